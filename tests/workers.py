"""Work run in separate processes by the concurrency and crash tests.

Usage: ``python -m tests.workers <job> <database url> <json arguments>``; prints one JSON line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from discovery import ToolCallError, ToolIndex
from tests.catalogs import generated_catalog


def search_many(url: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run ``count`` searches on the given sessions, round robin; report what came back."""
    queries = args["queries"]
    activated: list[list[str]] = []
    errors: list[str] = []
    with ToolIndex.open(url) as index:
        handles = [index.session(session_id) for session_id in args["sessions"]]
        for number in range(args["count"]):
            session = handles[number % len(handles)]
            call_id = f"{args['worker']}-{number}"
            query = queries[(number + args["worker"]) % len(queries)]
            try:
                result = session.search_tool.execute(call_id, {"query": query, "limit": args["limit"]})
                activated.append(result.details["activated_tools"])
            except ToolCallError as error:
                errors.append(str(error))
    return {"activated": activated, "errors": errors}


def import_servers(url: str, args: dict[str, Any]) -> dict[str, Any]:
    """Import the generated catalog of each named server, one write per server."""
    counts = []
    with ToolIndex.open(url) as index:
        for server in args["servers"]:
            tools = generated_catalog(args["per_server"], seed=args["seed"], servers=[server])
            counts.append(index.upsert_tools(tools).counts())
    return {"counts": counts}


def churn_catalog(url: str, args: dict[str, Any]) -> dict[str, Any]:
    """Rewrite one server's tools ``rounds`` times with new words, then remove half of them."""
    generations = []
    with ToolIndex.open(url) as index:
        for round_number in range(args["rounds"]):
            seed = args["seed"] + round_number
            tools = generated_catalog(args["count"], seed=seed, servers=[args["server"]])
            index.upsert_tools(tools)
            index.remove_tools(tool["name"] for tool in tools[::2])
            generations.append(index.stats()["generation"])
    return {"generations": generations}


def import_batch(url: str, args: dict[str, Any]) -> dict[str, Any]:
    """One large write, tagged with a marker server, for the crash test to interrupt."""
    tools = generated_catalog(args["count"], seed=args["seed"], servers=[args["server"]])
    with ToolIndex.open(url) as index:
        print("started", flush=True)
        return index.upsert_tools(tools).counts()


JOBS = {
    "search_many": search_many,
    "import_servers": import_servers,
    "churn_catalog": churn_catalog,
    "import_batch": import_batch,
}

if __name__ == "__main__":
    job, url, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    print(json.dumps(JOBS[job](url, json.loads(raw))), flush=True)
