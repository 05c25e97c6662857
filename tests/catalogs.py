"""Catalogs written for the tests: the worked example of contract §6 and generated ones."""

from __future__ import annotations

import random
from typing import Any

from discovery import ToolIndex
from discovery._params import query_terms
from discovery._ranking.ranker import Ranking
from discovery._rules import Corpus

WORKED_EXAMPLE: list[dict[str, Any]] = [
    {
        "name": "mcp__github_create_issue",
        "label": "github/create_issue",
        "description": "Create a GitHub issue in the selected repository",
        "server_name": "github",
        "mcp_tool_name": "create_issue",
        "schema_keys": ["owner", "repo", "title", "body"],
    },
    {
        "name": "mcp__github_list_pull_requests",
        "label": "github/list_pull_requests",
        "description": "List pull requests for a repository",
        "server_name": "github",
        "mcp_tool_name": "list_pull_requests",
        "schema_keys": ["owner", "repo", "state"],
    },
    {
        "name": "mcp__slack_post_message",
        "label": "slack/post_message",
        "description": "Post a message to a Slack channel",
        "server_name": "slack",
        "mcp_tool_name": "post_message",
        "schema_keys": ["channel", "text"],
    },
]

ROUTE: dict[str, Any] = {
    "name": "mcp__atlas__find_route",
    "description": "Itinéraire le plus court — 最短経路 between two stops",
    "server_name": "atlas",
    "mcp_tool_name": "find_route",
    "input_schema": {
        "type": "object",
        "properties": {
            "to": {"type": "string"},
            "from": {"type": "string"},
            "max_hops": {"type": "integer", "maximum": 1e16, "default": 3},
        },
        "required": ["from", "to"],
    },
}
"""A record with accents, CJK and a float bound in its schema: its digests are pinned."""

SERVERS = ["github", "slack", "jira", "notion", "postgres", "k8s", "stripe", "sentry"]
VERBS = ["create", "list", "get", "update", "delete", "search", "merge", "sync", "close", "watch"]
NOUNS = ["issue", "message", "page", "table", "pod", "invoice", "event", "branch", "user", "report"]
WORDS = [
    "repository", "channel", "workspace", "cluster", "customer", "project", "record", "comment",
    "status", "label", "query", "token", "file", "thread", "schema", "alert", "deploy", "review",
]  # fmt: skip
KEYS = ["owner", "repo", "title", "body", "channel", "text", "id", "limit", "cursor", "query", "state"]


def generated_catalog(count: int, *, seed: int = 7, servers: list[str] | None = None) -> list[dict[str, Any]]:
    """``count`` MCP-style tools with repeated vocabulary, so scores tie and overlap."""
    rng = random.Random(seed)
    pool = servers or SERVERS
    tools = []
    for number in range(count):
        server = pool[number % len(pool)]
        verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
        tool = f"{verb}_{noun}_{number}" if number % 2 else f"{verb}{noun.title()}{number}"
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        keys = rng.sample(KEYS, rng.randint(0, 4))
        tools.append(
            {
                "name": f"mcp__{server}__{tool}",
                "label": f"{server}/{tool}",
                "description": f"{verb.title()} a {noun} in {server}. {words}",
                "server_name": server,
                "mcp_tool_name": tool,
                "input_schema": {"type": "object", "properties": {key: {"type": "string"} for key in keys}},
            }
        )
    return tools


def rank(index: ToolIndex, query: str, corpus: Corpus, limit: int | None) -> Ranking:
    """Rank any corpus of ``index`` for ``query`` in one read transaction, as a search does."""
    with index.store.reading() as reader:
        return index.ranker.rank(reader, query_terms(query), corpus, limit)
