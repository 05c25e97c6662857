"""Learning from use: what the learned field gains, measured on requests it never learned from.

    python -m bench.learning [--analyzers reference,enhanced] [--per-tool 5,20] [--weights 1.0]
                             [--terms-per-call 16] [--play one|planning|rephrase]
                             [--answer contract|rich] [--semantic MODEL] [--folds 5]
                             [--identities single,per-task] [--min-identities 2,3]

Two sets, each split so that no query tested was learned from:

- MetaTool (``../shared/data/metatool``, 199 tools, 21,060 labelled queries written by a model).
  Each tool's queries are shuffled with a fixed seed; its first N (5 or 20) are played as
  sessions (the request searched, then its labelled tools called) and its queries 20-39 are
  tested, so every N is tested on the same queries.
- The real MCP catalog (``../shared/data/mcp-catalog.jsonl``, 757 tools of 74 servers) with the
  project's own labelled requests, written by people: 253 one-off requests
  (``bench/queries/mcp-catalog.jsonl``) and 40 recurring needs in three wordings each
  (``bench/queries/mcp-recurring.jsonl``), in five folds (``--folds``): each fold is tested after
  learning from the others (each request searched, then the first tool of each of its groups
  called), and the folds' results are pooled.

Every run copies the catalog into a fresh SQLite file, plays the training requests through the
library's own sessions (``discovery._quality.evaluate.learn_from``), turns learning on and runs the
test queries as read-only searches. ``--weights`` measures other weights of the learned field
than the shipped one (the choice is the table's, recorded in ``bench/results.md``).

``--identities`` says who taught: ``single``, every session of the run (training and tested) is
the one local identity, a single-user host; ``per-task``, each training task (a request, or a
session of several with ``--play planning|rephrase``) is an identity of its own, and the tested
queries are searched as the local identity, which taught nothing: a new user of a shared index.
``--min-identities`` sets K, the identities that must teach a (term, tool) before it ranks for
another (the index's default without it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import discovery._ranking.learned as learned_module
import discovery._sessions.learning as learning_rule
from discovery import ToolIndex
from discovery._quality.evaluate import LabelledQuery, TrainingRequest, evaluate, learn_from
from discovery._ranking.fields import LEARNED_WEIGHT

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / ".." / "shared" / "data"
METATOOL = DATA / "metatool"
MCP_CATALOG = DATA / "mcp-catalog.jsonl"
MCP_QUERIES = ROOT / "bench" / "queries" / "mcp-catalog.jsonl"
MCP_RECURRING = ROOT / "bench" / "queries" / "mcp-recurring.jsonl"
SEED = 20261204
TESTED = range(20, 40)
"""The positions of a MetaTool tool's shuffled queries that are tested."""
FOLDS = 5
KS = (1, 5, 10)
IDENTITIES = ("single", "per-task")


@dataclass(frozen=True)
class Split:
    name: str
    train: list[TrainingRequest]
    test: list[LabelledQuery]


@dataclass(frozen=True)
class Measured:
    queries: int
    recall1: float
    recall5: float
    mrr: float
    learn_seconds: float


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as source:
        return [json.loads(line) for line in source if line.strip()]


def metatool_splits(per_tool: Sequence[int]) -> list[Split]:
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for row in read_jsonl(METATOOL / "queries.jsonl"):
        relevant = row["relevant"]
        assert isinstance(relevant, list)
        by_tool.setdefault(str(relevant[0]), []).append(row)
    rng = random.Random(SEED)
    shuffled = {tool: rng.sample(rows, len(rows)) for tool, rows in sorted(by_tool.items())}
    test = [
        LabelledQuery(
            f"metatool:{tool}:{i}", str(rows[i]["query"]), tuple((str(n),) for n in rows[i]["relevant"])
        )
        for tool, rows in shuffled.items()
        for i in TESTED
        if i < len(rows)
    ]
    splits = [Split("MetaTool, no learning", [], test)]
    for n in per_tool:
        train = [
            TrainingRequest(
                f"train:{tool}:{i}", f"{tool}-{i}", str(row["query"]), tuple(map(str, row["relevant"]))
            )
            for tool, rows in shuffled.items()
            for i, row in enumerate(rows[: min(n, TESTED.start)])
        ]
        splits.append(Split(f"MetaTool, {n} requests per tool", train, test))
    return splits


def mcp_folds(
    folds: int = FOLDS,
) -> list[tuple[list[TrainingRequest], list[LabelledQuery], list[LabelledQuery]]]:
    """``folds`` folds over the one-off requests and the recurring needs: the i-th wording of
    every recurring need is in fold i modulo ``folds`` (so a tested wording was learned in the
    others' words), the one-off requests are dealt to the folds at random. Each fold is tested
    (one-off and recurring apart) after learning from the others."""
    one_off = read_jsonl(MCP_QUERIES)
    recurring = read_jsonl(MCP_RECURRING)
    order = random.Random(SEED).sample(range(len(one_off)), len(one_off))
    fold_of = {i: position % folds for position, i in enumerate(order)}
    wording: dict[tuple[tuple[str, ...], ...], int] = {}
    rows: list[tuple[str, int, bool, dict[str, Any]]] = []
    for i, row in enumerate(one_off):
        rows.append((f"one-off:{i}", fold_of[i], False, row))
    for i, row in enumerate(recurring):
        need = tuple(tuple(group) for group in row["relevant_groups"])
        wording[need] = wording.get(need, -1) + 1
        rows.append((f"recurring:{i}", wording[need] % folds, True, row))
    split = []
    for fold in range(folds):
        train: list[TrainingRequest] = []
        tested_once: list[LabelledQuery] = []
        tested_again: list[LabelledQuery] = []
        for where, held, again, row in rows:
            groups = tuple(tuple(map(str, group)) for group in row["relevant_groups"])
            if held == fold:
                (tested_again if again else tested_once).append(
                    LabelledQuery(where, str(row["query"]), groups)
                )
            else:
                train.append(TrainingRequest(where, where, str(row["query"]), tuple(g[0] for g in groups)))
        split.append((train, tested_once, tested_again))
    return split


PLANNED = 3
"""Requests for other needs a planning session searches before its own (``--play planning``)."""


def played(train: list[TrainingRequest], play: str) -> list[TrainingRequest]:
    """The training requests as sessions play them: ``one`` each request its own session;
    ``planning`` each session first searches ``PLANNED`` requests of other tools (calling
    nothing), then its own and calls its tools; ``rephrase`` the wordings of a recurring need
    are one session, each but the last calling nothing."""
    if play == "one":
        return train
    if play == "planning":
        rng = random.Random(SEED)
        sessions: list[TrainingRequest] = []
        for request in train:
            others = [other for other in rng.sample(train, PLANNED + 1) if other.tools != request.tools]
            sessions += [
                TrainingRequest(other.where, request.session, other.query, ()) for other in others[:PLANNED]
            ]
            sessions.append(request)
        return sessions
    by_need: dict[tuple[str, ...], list[TrainingRequest]] = {}
    for request in train:
        need = request.tools if request.where.startswith("recurring:") else (request.where,)
        by_need.setdefault(need, []).append(request)
    sessions = []
    for need, requests in by_need.items():
        session = "+".join(need)
        *first, last = requests
        sessions += [TrainingRequest(r.where, session, r.query, ()) for r in first]
        sessions.append(TrainingRequest(last.where, session, last.query, last.tools))
    return sessions


def taught_by(sessions: list[TrainingRequest], identities: str) -> list[TrainingRequest]:
    """The played sessions with their identities: all the local one (``single``), or each
    session its own (``per-task``), none of them the local one, as which tests are searched."""
    if identities == "single":
        return sessions
    return [replace(request, identity=f"task:{request.session}") for request in sessions]


@dataclass(frozen=True)
class Protocol:
    """How training is played and taught: see ``played`` and ``taught_by``; ``min_identities``
    is the index's K (``None``: its default)."""

    play: str = "one"
    answer: str = "contract"
    identities: str = "single"
    min_identities: int | None = None


def measure(
    template: Path,
    workdir: Path,
    train: list[TrainingRequest],
    test: list[LabelledQuery],
    protocol: Protocol,
) -> Measured:
    copy = workdir / "copy.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, copy)
    with ToolIndex.open(str(copy), min_identities=protocol.min_identities) as index:
        started = time.perf_counter()
        if train:
            sessions = taught_by(played(train, protocol.play), protocol.identities)
            learn_from(index, sessions, answer=protocol.answer)
        learned = time.perf_counter() - started
        result = evaluate(index, test, KS)
    return Measured(result.queries, result.recall[1], result.recall[5], result.mrr, learned)


def pooled(parts: list[Measured]) -> Measured:
    total = sum(part.queries for part in parts)

    def weighted(value: str) -> float:
        return float(sum(getattr(part, value) * part.queries for part in parts)) / total

    return Measured(
        total,
        weighted("recall1"),
        weighted("recall5"),
        weighted("mrr"),
        sum(part.learn_seconds for part in parts),
    )


def mcp_rows(template: Path, workdir: Path, protocol: Protocol, folds: int) -> list[tuple[str, Measured]]:
    split = mcp_folds(folds)
    rows = []
    for label, tests in (
        ("one-off", [once for _, once, _ in split]),
        ("recurring", [again for _, _, again in split]),
    ):
        unlearned = [measure(template, workdir, [], test, protocol) for test in tests if test]
        learned = [
            measure(template, workdir, train, test, protocol)
            for (train, _, _), test in zip(split, tests, strict=True)
            if test
        ]
        rows += [
            (f"MCP {label}, no learning", pooled(unlearned)),
            (f"MCP {label}, {folds}-fold", pooled(learned)),
        ]
    return rows


def template_of(catalog: Path, analyzer: str, workdir: Path, model: str | None = None) -> Path:
    """A fresh index of ``catalog``; with ``model``, its tools embedded (the semantic signal on)."""
    path = workdir / f"{catalog.parent.name}-{catalog.stem}-{analyzer}.db"
    if not path.exists():
        with ToolIndex.open(str(path), analyzer=analyzer) as index:
            index.upsert_tools(read_jsonl(catalog))
            if model is not None:
                index.embed(model)
    return path


def measured_rows(
    analyzer: str, args: argparse.Namespace, protocol: Protocol, workdir: Path
) -> list[tuple[str, Measured]]:
    """The rows of the sets ``args`` names, each measured under ``protocol``."""
    rows: list[tuple[str, Measured]] = []
    if "metatool" in args.sets.split(","):
        template = template_of(METATOOL / "catalog.jsonl", analyzer, workdir, args.semantic)
        per_tool = [int(n) for n in args.per_tool.split(",")]
        for split in metatool_splits(per_tool):
            rows.append((split.name, measure(template, workdir, split.train, split.test, protocol)))
    if "mcp" in args.sets.split(","):
        template = template_of(MCP_CATALOG, analyzer, workdir, args.semantic)
        rows += mcp_rows(template, workdir, protocol, args.folds)
    return rows


def thresholds(given: str) -> list[int | None]:
    """The Ks of ``--min-identities``."""
    return [int(k) for k in given.split(",")]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--analyzers", default="reference,enhanced")
    parser.add_argument("--per-tool", default="5,20")
    parser.add_argument("--weights", default=str(LEARNED_WEIGHT))
    parser.add_argument("--sets", default="metatool,mcp")
    parser.add_argument(
        "--terms-per-call",
        default=str(learning_rule.TERMS_PER_CALL),
        help="the most terms a call credits (a list measures each)",
    )
    parser.add_argument(
        "--play",
        choices=("one", "planning", "rephrase"),
        default="one",
        help="how training sessions are played (see ``played``)",
    )
    parser.add_argument("--answer", choices=("contract", "rich"), default="contract")
    parser.add_argument(
        "--semantic", metavar="MODEL", help="embed the catalogs with MODEL: both signals at once"
    )
    parser.add_argument("--folds", type=int, default=FOLDS, help="folds of the MCP requests")
    parser.add_argument(
        "--identities",
        default="single",
        help="who taught: single, per-task (see above; a list measures each)",
    )
    parser.add_argument(
        "--min-identities",
        metavar="K[,K...]",
        type=thresholds,
        default=[None],
        help="the index's K (a list measures each; default: the index's own)",
    )
    args = parser.parse_args()
    if args.folds < 2:
        parser.error("--folds must be at least 2")
    for identities in args.identities.split(","):
        if identities not in IDENTITIES:
            parser.error(f"--identities: {identities!r} is not one of {', '.join(IDENTITIES)}")
    return args


def main() -> None:
    args = arguments()
    table = Table(title="Learning from use: held-out queries, before and after learning")
    columns = ("set", "analyzer", "weight", "terms", "identities", "K", "queries")
    for column in (*columns, "Recall@1", "Recall@5", "MRR@10", "learn s"):
        table.add_column(column, justify="left" if column in ("set", "analyzer", "identities") else "right")
    sweep = itertools.product(
        args.analyzers.split(","),
        [float(w) for w in args.weights.split(",")],
        [int(n) for n in args.terms_per_call.split(",")],
        args.identities.split(","),
        args.min_identities,
    )
    with tempfile.TemporaryDirectory(prefix="tool-index-learning-") as directory:
        for analyzer, weight, cap, identities, k in sweep:
            # The weight and the cap are constants; a sweep sets them in this process only.
            setattr(learned_module, "LEARNED_WEIGHT", weight)  # noqa: B010
            setattr(learning_rule, "TERMS_PER_CALL", cap)  # noqa: B010
            protocol = Protocol(args.play, args.answer, identities, k)
            for name, result in measured_rows(analyzer, args, protocol, Path(directory)):
                table.add_row(
                    name,
                    analyzer,
                    f"{weight:g}",
                    str(cap),
                    identities,
                    "default" if k is None else str(k),
                    str(result.queries),
                    f"{result.recall1:.3f}",
                    f"{result.recall5:.3f}",
                    f"{result.mrr:.3f}",
                    f"{result.learn_seconds:.1f}",
                )
                print(name, analyzer, weight, cap, identities, k, result, flush=True)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
