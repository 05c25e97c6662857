"""The documents the code points to: every "contract §n" names a section of docs/contract.md, and
the links between the README and docs/ lead to files and headings that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONTRACT = REPO / "docs" / "contract.md"
CITATION = re.compile(r"contract §(\d+)(?:\s*[–-]\s*(\d+)|((?:,\s*§\d+)+))?")
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#([^)\s]+))?\)")


def tracked(*suffixes: str) -> list[Path]:
    """The repository's files with these suffixes, or under ``.ci``, as git tracks them."""
    names = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return [REPO / name for name in names if name.endswith(suffixes) or name.startswith(".ci/")]


def contract_sections() -> set[int]:
    text = CONTRACT.read_text(encoding="utf-8")
    return {int(number) for number in re.findall(r"^## §(\d+) ", text, flags=re.MULTILINE)}


def cited(text: str) -> list[int]:
    """Section numbers a text cites: ``contract §4``, ``contract §3–4``, ``contract §2, §4``."""
    numbers: list[int] = []
    for match in CITATION.finditer(text):
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        numbers += range(first, last + 1)
        numbers += [int(n) for n in re.findall(r"§(\d+)", match.group(3) or "")]
    return numbers


def test_the_contract_is_numbered_from_one() -> None:
    sections = contract_sections()
    assert sections == set(range(1, max(sections) + 1))


def test_citation_pattern() -> None:
    assert cited("contract §4's order; contract §3–4; (contract §2, §4); contract §9") == [4, 3, 4, 2, 4, 9]


def test_every_citation_names_a_section() -> None:
    sections = contract_sections()
    wrong = [
        (str(path.relative_to(REPO)), number)
        for path in tracked(".py", ".md")
        for number in cited(path.read_text(encoding="utf-8"))
        if number not in sections
    ]
    assert not wrong
    old_form = "SPEC" + " §"  # the form citations had before the contract was in the repository
    assert not [path for path in tracked(".py", ".md") if old_form in path.read_text(encoding="utf-8")]


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_documents_resolve() -> None:
    broken = []
    documents = [
        REPO / "README.md",
        *sorted((REPO / "docs").glob("*.md")),
        *sorted((REPO / "bench").glob("*.md")),
    ]
    for path in documents:
        for target, fragment in LINK.findall(path.read_text(encoding="utf-8")):
            linked = (path.parent / target).resolve()
            if not linked.is_file():
                broken.append((path.name, target))
            elif fragment:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), flags=re.MULTILINE)
                if fragment not in {anchor(heading) for heading in headings}:
                    broken.append((path.name, f"{target}#{fragment}"))
    assert not broken
