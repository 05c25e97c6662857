"""The fixed query set: short and long, common and rare terms, the same for every engine and size.

Common terms are verbs, resources and server names that most catalogs share (thousands of
postings at 100k tools). Rare terms are jargon from the end of the generator's real-word list
(a few postings per thousand tools) and made-up codenames from its long tail (a handful at
100k, often none at 1k: a query that matches nothing is part of real traffic too).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.generate import TAIL_WORDS, tail_words


@dataclass(frozen=True)
class Query:
    text: str
    kind: str
    """``short-common``, ``short-rare``, ``long-common`` or ``long-rare``."""


SHORT_COMMON = (
    "create issue",
    "list files",
    "github pull request",
    "send message",
    "search",
    "get user",
    "delete branch",
    "slack channel",
    "update page",
    "query database",
)

SHORT_RARE = (
    "kubeconfig",
    "geofence alert",
    "idempotent webhook",
    "dunning invoice",
    "ebpf kprobe",
    "sommelier vintage",
    "exoplanet telescope",
    "quarantine malware",
)

LONG_COMMON = (
    "create a new issue in the github repository with a title and body",
    "list all open pull requests for the repository and show their status",
    "send a message to the team slack channel about the failed deployment",
    "search the notion database for pages updated in the last week",
    "get the details of the current user account and their permissions",
    "upload a file to the shared google drive folder and share it with the team",
    "run a sql query against the postgres database and return the rows",
    "take a screenshot of the current browser page after clicking the element",
)

LONG_RARE = (
    "rotate the kubeconfig credentials and rollout a canary deployment with failover",
    "reconcile the ledger chargeback and proration for the dunning invoice",
    "generate a flamegraph from the profiler heapdump and coredump of the worker",
    "transcribe the podcast episode into a spectrogram waveform with phoneme lyrics",
    "compute the portfolio volatility hedge and arbitrage for the dividend ticker",
)


def _codename_queries() -> tuple[str, ...]:
    tail = tail_words(TAIL_WORDS)
    return (
        tail[100],
        f"{tail[2000]} {tail[9000]}",
        f"find the {tail[15000]} settings for the {tail[300]} project",
    )


def query_set() -> list[Query]:
    """Every query with its kind, in a fixed order."""
    codenames = _codename_queries()
    return [
        *(Query(text, "short-common") for text in SHORT_COMMON),
        *(Query(text, "short-rare") for text in (*SHORT_RARE, *codenames[:2])),
        *(Query(text, "long-common") for text in LONG_COMMON),
        *(Query(text, "long-rare") for text in (*LONG_RARE, codenames[2])),
    ]
