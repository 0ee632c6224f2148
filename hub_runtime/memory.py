"""The garbage collector and the live hub's long-lived objects.

A full collection scans every container the process holds, and holds the GIL while it does:
the whole loop stops. The models, the home's grammars and their automata are many thousands
of objects that live as long as the hub does; with them in it a full collection took 300 ms
(before their tables took shapes the collector does not track, see ``grammar/tokens.py``
and ``grammar/pronounce.py``; ~90 ms after) and came at random, also in the middle of a
turn (one of 300 ms inside the pause's check of "make the reading lamp red", in each of
three real-time runs of that command).

While the live hub runs (:func:`long_lived`, in :func:`~.runner.run_live`, and a file run at
real speed, which stands in for it), what its start built is collected once and then kept
out of full collections (``gc.freeze``): they scan only what came since. Collected first: a
freeze also keeps the garbage of the moment from being collected, and freezing at each of
many loops' starts without (the file runs of the tests and benches, one after another)
leaked all of it (24 GB in 300 runs).

A new home model (the catalog's names changed) is built beside the old one, with the
automatic collections off (:func:`building`): on, the ~7 s build of the bundled home made
10 full collections of 100-180 ms each, every one of them stopping the loop (measured:
sum 0.95-1.15 s; off, none, and the build 2 s shorter). Once it is in place,
:func:`rebuilt` collects the old one (it was frozen too: unreferenced, it would never be
collected) and freezes the new one: one full collection (~300 ms) when the home changes.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_depth = 0  # how many long-lived sections are open
_builds = 0  # how many long-lived parts are being built
_collecting = True  # whether automatic collections were on when the first build began
_builds_lock = threading.Lock()  # builds run in worker threads


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """While it is open, the objects alive at its start (and at each :func:`rebuilt`) are not scanned."""
    global _depth
    if not _depth:
        gc.collect()
        gc.freeze()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth:
            gc.unfreeze()


def rebuilt() -> None:
    """A long-lived part was replaced: collect what it leaves behind, and freeze what replaced it."""
    if _depth:
        gc.unfreeze()
        gc.collect()
        gc.freeze()


@contextlib.contextmanager
def building() -> Iterator[None]:
    """While a long-lived part is built: no automatic collections (each would scan what is built so far)."""
    global _builds, _collecting
    with _builds_lock:
        if not _builds:
            _collecting = gc.isenabled()
            gc.disable()
        _builds += 1
    try:
        yield
    finally:
        with _builds_lock:
            _builds -= 1
            if not _builds and _collecting:
                gc.enable()
