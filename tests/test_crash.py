"""A writer killed with SIGKILL at random instants leaves a database that is whole: the
interrupted import is entirely present or entirely absent, and every aggregate still agrees."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from discovery import ToolIndex
from tests.catalogs import generated_catalog

REPO = Path(__file__).resolve().parent.parent
KILLS = 20
BATCH = 1500
KILLS_PER_VERIFY = 5
"""A full ``verify`` reads every posting: it runs after every few kills and after the last. What a
kill damaged stays for it to find, as the later kills' writes are of other servers' tools. Each
kill is checked at once for all or nothing: its batch is whole or absent, and the catalog holds
exactly the batches that survived."""


@pytest.mark.slow
def test_sigkill_during_import_leaves_all_or_nothing(sqlite_url: str) -> None:
    from discovery._diagnostics.verify import verify

    with ToolIndex.open(sqlite_url) as index:
        index.upsert_tools(generated_catalog(200, seed=1, servers=["base"]))
        # How long one such write takes here: the kills are spread over that window and a bit
        # beyond, whatever the speed of the machine or of the code.
        timing = generated_catalog(BATCH, seed=999, servers=["timing"])
        start = time.perf_counter()
        index.upsert_tools(timing)
        window = 1.3 * (time.perf_counter() - start)
        index.remove_tools([tool["name"] for tool in timing])
    rng = random.Random(20)
    outcomes = {"present": 0, "absent": 0}
    verified_through = -1
    for attempt in range(KILLS):
        server = f"batch{attempt}"
        args = json.dumps({"count": BATCH, "seed": attempt, "server": server})
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.workers", "import_batch", sqlite_url, args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "started"
        time.sleep(rng.uniform(0.0, window))
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        with ToolIndex.open(sqlite_url) as index:
            present = len(index.tools(server=server))
            assert present in (0, BATCH), f"kill {attempt}: {present} of {BATCH} tools survived"
            outcomes["present" if present else "absent"] += 1
            assert index.stats()["tools"] == 200 + BATCH * outcomes["present"], f"kill {attempt}"
            if (attempt + 1) % KILLS_PER_VERIFY == 0 or attempt == KILLS - 1:
                report = verify(index)
                assert report.ok, (f"kills {verified_through + 1} to {attempt}", report.problems)
                verified_through = attempt
    assert outcomes["absent"] > 0, outcomes  # some kills did land inside the write
