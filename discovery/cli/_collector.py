"""The collector paused around the program's own imports (``discovery.cli.__main__`` says why)."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off while a block imports, and what it made moved past the young
    generations unexamined (``gc.freeze`` then ``gc.unfreeze``)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
