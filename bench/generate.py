"""A deterministic generator of MCP-like tool catalogs (contract §2 records with ``input_schema``).

The shape follows real catalogs (see ``../shared/data``): servers with a handful to a few
hundred tools, ``mcp__<server>__<tool>`` names in snake_case, camelCase or kebab-case, short
descriptions whose words follow a Zipf law over a vocabulary with a long tail of rare words
(codenames, jargon), a few empty or Chinese descriptions, 0–8 schema keys from a pool.

    python -m bench.generate --size 10000 --seed 7 -o /tmp/catalog.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from bench.vocabulary import (
    CJK_DESCRIPTIONS,
    MODIFIERS,
    SCHEMA_KEYS,
    SERVER_QUALIFIERS,
    SERVERS,
    STOPWORDS,
    SYLLABLES,
    VERBS,
    WORDS,
)

DEFAULT_SEED = 20240601
TAIL_WORDS = 20_000
"""Made-up words after the real ones: the long tail that makes rare query terms rare."""
ZIPF_EXPONENT = 1.0
TAIL_DAMPING = 0.25
"""Tail words are drawn this much less often than Zipf alone would: ~10% of prose words."""
CORE_BUILTINS = ("read", "bash", "edit", "write", "glob", "eval")


def _dedupe(words: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(words))


def tail_words(count: int) -> list[str]:
    """``count`` distinct made-up words of two or three syllables, always the same ones."""
    if count > len(SYLLABLES) ** 3 // 2:
        raise ValueError(f"{count} tail words need more syllables than {len(SYLLABLES)}")
    rng = random.Random(0)
    seen: dict[str, None] = {}
    while len(seen) < count:
        parts = rng.choices(SYLLABLES, k=rng.choice((2, 3, 3)))
        seen.setdefault("".join(parts), None)
    return list(seen)


def vocabulary() -> tuple[list[str], int]:
    """Description words from most to least frequent (stopwords, real words, then the tail),
    and how many of them are real words."""
    real = _dedupe([*STOPWORDS, *WORDS])
    known = set(real)
    return real + [w for w in tail_words(TAIL_WORDS) if w not in known], len(real)


def zipf_weights(size: int, exponent: float = ZIPF_EXPONENT) -> np.ndarray:
    """Probabilities proportional to ``1 / rank**exponent`` for ranks ``1..size``."""
    weights: np.ndarray = 1.0 / np.arange(1, size + 1, dtype=np.float64) ** exponent
    normalized: np.ndarray = weights / weights.sum()
    return normalized


def word_weights(size: int, real: int) -> np.ndarray:
    """Zipf over all words, with the made-up tail after ``real`` damped by ``TAIL_DAMPING``."""
    weights = zipf_weights(size)
    weights[real:] *= TAIL_DAMPING
    normalized: np.ndarray = weights / weights.sum()
    return normalized


def _style(words: Sequence[str], style: str) -> str:
    parts = [p for w in words for p in w.split()]
    if style == "camel":
        return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])
    if style == "kebab":
        return "-".join(parts)
    return "_".join(parts)


class _Generator:
    """Holds the random state; one instance produces one catalog."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.words, real = vocabulary()
        self.word_p = word_weights(len(self.words), real)
        self.verb_w = list(zipf_weights(len(VERBS), 0.8))
        self.key_w = list(zipf_weights(len(SCHEMA_KEYS), 0.9))
        self.word_buffer: list[str] = []

    def word(self) -> str:
        if not self.word_buffer:
            picks = self.np_rng.choice(len(self.words), size=65_536, p=self.word_p)
            self.word_buffer = [self.words[i] for i in picks]
        return self.word_buffer.pop()

    def server_names(self) -> Iterator[tuple[str, str]]:
        """``(server name, base)`` forever: the real names first, then qualified copies."""
        bases = list(SERVERS)
        round_no = 0
        while True:
            for base in bases:
                if round_no == 0:
                    yield base, base
                    continue
                qualifier = SERVER_QUALIFIERS[(round_no - 1) % len(SERVER_QUALIFIERS)]
                cycle = (round_no - 1) // len(SERVER_QUALIFIERS)
                suffix = f"{qualifier}{cycle + 1}" if cycle else qualifier
                sep = self.rng.choice(("_", "-", "_"))
                yield f"{base}{sep}{suffix}", base
            round_no += 1

    def tool_name(self, base: str, style: str, taken: set[str]) -> tuple[str, str, str]:
        """A new tool name for a server: ``(tool name, verb, resource)``."""
        resource = self.rng.choice(SERVERS[base])
        verb = self.rng.choices(VERBS, weights=self.verb_w)[0]
        words = [verb, resource]
        if style == "prefixed":
            words.insert(0, base)
        if self.rng.random() < 0.25:
            words.append(self.rng.choice(MODIFIERS))
        tool_style = "snake" if style == "prefixed" else style
        name = _style(words, tool_style)
        while name in taken:
            words.append(self.rng.choice(MODIFIERS) if len(words) < 5 else str(len(taken)))
            name = _style(words, tool_style)
        taken.add(name)
        return name, verb, resource

    def description(self, verb: str, resource: str, server: str) -> str:
        roll = self.rng.random()
        if roll < 0.02:
            return ""
        if roll < 0.05:
            return self.rng.choice(CJK_DESCRIPTIONS)
        article = "an" if resource[0] in "aeio" else "a"
        head = f"{verb.capitalize()}s {article} {resource} in {server.replace('_', ' ')}."
        count = min(int(self.rng.lognormvariate(2.4, 0.7)), 80)
        sentences = [head]
        while count > 0:
            size = min(count, self.rng.randint(5, 14))
            words = [self.word() for _ in range(size)]
            sentences.append(" ".join(words).capitalize() + ".")
            count -= size
        return " ".join(sentences)

    def input_schema(self, resource: str, style: str) -> dict[str, Any]:
        count = 0 if self.rng.random() < 0.1 else min(1 + int(self.rng.expovariate(0.45)), 8)
        keys: list[str] = []
        if count and self.rng.random() < 0.5:
            keys.append(_style([resource, "id"], "camel" if style == "camel" else "snake"))
        while len(keys) < count:
            key = self.rng.choices(SCHEMA_KEYS, weights=self.key_w)[0]
            if key not in keys:
                keys.append(key)
        properties: dict[str, Any] = {key: {"type": "string"} for key in keys}
        for key in keys[:2]:
            properties[key]["description"] = " ".join(self.word() for _ in range(4))
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if keys:
            schema["required"] = keys[:1]
        return schema

    def builtin(self, index: int, taken: set[str]) -> dict[str, Any]:
        if index < len(CORE_BUILTINS):
            name = CORE_BUILTINS[index]
            taken.add(name)
            description = f"{name.capitalize()} files in the workspace."
            return {
                "name": name,
                "description": description,
                "source": "builtin",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
        base = self.rng.choice(list(SERVERS))
        name, verb, resource = self.tool_name(base, "snake", taken)
        return {
            "name": name,
            "description": self.description(verb, resource, "the workspace"),
            "source": self.rng.choice(("builtin", "extension", "custom")),
            "input_schema": self.input_schema(resource, "snake"),
        }

    def mcp_tools(self, count: int) -> Iterator[dict[str, Any]]:
        servers = self.server_names()
        made = 0
        while made < count:
            server, base = next(servers)
            style = self.rng.choices(("snake", "camel", "kebab", "prefixed"), (60, 30, 5, 5))[0]
            size = max(1, min(int(self.rng.lognormvariate(2.8, 0.9)), 400, count - made))
            taken: set[str] = set()
            for _ in range(size):
                tool, verb, resource = self.tool_name(base, style, taken)
                yield {
                    "name": f"mcp__{server}__{tool}",
                    "label": f"{server}/{tool}",
                    "description": self.description(verb, resource, server),
                    "source": "mcp",
                    "server_name": server,
                    "mcp_tool_name": tool,
                    "input_schema": self.input_schema(resource, style),
                }
            made += size


def generate_catalog(size: int, seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    """``size`` tool records; the same ``(size, seed)`` always gives the same catalog."""
    gen = _Generator(seed)
    builtin_count = min(size, max(len(CORE_BUILTINS), size // 200))
    taken: set[str] = set()
    records = [gen.builtin(i, taken) for i in range(builtin_count)]
    records.extend(gen.mcp_tools(size - builtin_count))
    return records


def write_jsonl(records: Sequence[dict[str, Any]], path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("-o", "--output", default="-", help="JSONL file, '-' for stdout")
    args = parser.parse_args(argv)
    records = generate_catalog(args.size, args.seed)
    if args.output == "-":
        for record in records:
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        write_jsonl(records, args.output)


if __name__ == "__main__":
    main()
