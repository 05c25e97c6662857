"""Tool records to what the store writes, in worker processes when an import is large.

Validating and tokenizing a record is pure Python (tens of microseconds), so a 100k-tool import
spends seconds there while the database work after it is mostly in C. Beyond ``PARALLEL_MIN``
records the work is split in chunks over one process per core; the results come back in input
order, so the first bad record raises the same error, naming the same position, as it would in
one process.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from discovery._catalog.indexing import IndexedTool, indexed_batch
from discovery._catalog.models import ToolRecord
from discovery._params import analyzer_named
from discovery._text.analyzers import DEFAULT_ANALYZER
from discovery.errors import InvalidRecord, describe_validation_error
from store import IndexedBatch

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

Progress = Callable[[int], None]
Record = Mapping[str, Any] | ToolRecord

PARALLEL_MIN = 20_000
"""Records below which one process is faster than starting workers."""
WORKER_NICENESS = 10
CHUNK = 2_000
"""Records per task: large enough to amortize the pickling, small enough to balance the cores."""


def as_record(record: Record, position: int) -> ToolRecord:
    """``record`` validated; ``InvalidRecord`` names its 1-based position and every bad field."""
    if isinstance(record, ToolRecord):
        return record
    try:
        return ToolRecord.model_validate(record)
    except ValidationError as exc:
        raise InvalidRecord(f"record {position + 1}: {describe_validation_error(exc)}") from exc


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while an import builds and writes its records.

    A collection walks every tracked object, and an import allocates hundreds of thousands of
    them (records, dicts, row tuples) that form no cycle, so collections run again and again
    over a growing heap for nothing: a third of a 100k-tool import. Restored on exit, whatever
    happens; cycles made meanwhile are collected then.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def prepare(
    records: Iterable[Record], progress: Progress | None = None, analyzer: str = DEFAULT_ANALYZER
) -> list[IndexedTool]:
    """Validate and index ``records`` with ``analyzer``, in order; ``progress`` hears how many
    are done."""
    with closing(prepared(records, progress, analyzer)) as batches:
        return [IndexedTool(*tool) for batch in batches for tool in batch.tools()]


def prepared(
    records: Iterable[Record], progress: Progress | None = None, analyzer: str = DEFAULT_ANALYZER
) -> Generator[IndexedBatch]:
    """``prepare``, lazily and ``CHUNK`` records at a time: the workers run ahead while the
    caller consumes (an import writes the first tools while the last are still being
    tokenized). Close it to stop the workers."""
    items = list(records)
    workers = worker_count(len(items))
    if workers <= 1:
        for start in range(0, len(items), CHUNK):
            part = items[start : start + CHUNK]
            yield _indexed(part, start, analyzer)
            if progress is not None:
                progress(len(part))
        return
    # Imported here: a process that only searches (or imports little) never pays for them.
    from concurrent.futures import ProcessPoolExecutor

    context = _start_method()
    bounds = [(start, min(start + CHUNK, len(items))) for start in range(0, len(items), CHUNK)]
    if context.get_start_method() == "fork":
        # A forked worker starts with a copy of this process's memory, the records included (a
        # fork does not pickle a process's arguments): a task names its records by position.
        # Pickling them into tasks cost the writer a tenth of a 100k-tool import.
        inherited: Sequence[Record] | None = items
        tasks: list[Task] = [(start, end, None, analyzer) for start, end in bounds]
    else:
        inherited = None
        tasks = [(start, end, items[start:end], analyzer) for start, end in bounds]
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=(inherited, os.getpid())
    )
    try:
        for done in pool.map(_prepare_chunk, tasks):
            yield done
            if progress is not None:
                progress(len(done))
    finally:
        # On an error (here or in the caller), drop the chunks not started rather than
        # preparing them all.
        pool.shutdown(wait=True, cancel_futures=True)


def worker_count(records: int) -> int:
    """Processes for ``records``: one per core this process may run on, once worth it."""
    if records < PARALLEL_MIN:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(cores, -(-records // CHUNK))


_inherited: Sequence[Record] = ()
"""In a forked worker: the records of the import that started it."""

Task = tuple[int, int, Sequence[Record] | None, str]
"""``(start, end, records, analyzer)``: the records at positions ``start:end``, sent along unless
the worker inherited them, and the name of the analyzer to index them with."""


PARENT_POLL_SECONDS = 1.0
"""Where the kernel cannot end a worker with its parent: how often the worker checks it is alive."""
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _start_worker(inherited: Sequence[Record] | None, parent: int) -> None:
    """Die with the import, keep the records a forked worker inherited, and run at a lower
    priority than the writer.

    A worker outliving a killed import would hold its memory and the database files for as long
    as its tasks last. The writer is the one process every record passes through: when it waits
    for a core the whole import waits, while a worker that waits only delays records queued
    behind it.
    """
    global _inherited
    _die_with(parent)
    if inherited is not None:
        _inherited = inherited
    if hasattr(os, "nice"):
        os.nice(WORKER_NICENESS)


def _die_with(parent: int) -> None:
    """End this process when ``parent`` ends: the kernel's parent-death signal on Linux, else a
    thread that watches the parent."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent:  # the parent died before the signal was asked for
                os._exit(1)
            return
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)


def _start_method() -> BaseContext:
    """``fork`` (no imports to repeat) unless other threads run, which a fork could catch holding
    a lock; then ``spawn``."""
    import multiprocessing

    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _prepare_chunk(task: Task) -> IndexedBatch:
    """A worker's share, as one batch: its arrays and word list cost far less to send back than
    a tool (and a dict of terms) at a time."""
    start, end, sent, analyzer = task
    return _indexed(_inherited[start:end] if sent is None else sent, start, analyzer)


def _indexed(records: Sequence[Record], start: int, analyzer: str) -> IndexedBatch:
    """``records``, the first at position ``start`` of the import, validated and indexed."""
    valid = [as_record(record, start + offset) for offset, record in enumerate(records)]
    return indexed_batch(valid, analyzer_named(analyzer))
