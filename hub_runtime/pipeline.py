"""The stage base (queues, interruption) and a dialogue loop as a list of stages.

Each :class:`Stage` has one job. Frames arrive on two queues: system frames are
handled at once by one task, data and control frames in order by another. Barge-in
is one mechanism, written here once: an :class:`~.frames.InterruptionFrame`
cancels the stage's in-flight work (its data task and everything it spawned),
flushes its queued data frames (all but uninterruptible ones), calls
:meth:`Stage.on_interruption` and travels on — even when the stage fails on it, so
a waiter on ``InterruptionFrame.done`` is always released.

Observers (:class:`Observer`) see every frame a stage sends; the loop's events and
its dialogue state are derived there, in one place each, never emitted by hand.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

from .frames import ControlFrame, ErrorFrame, Frame, InterruptionFrame, SystemFrame

_LOGGER = logging.getLogger(__name__)

IDLE_TIMEOUT_S: Final = 120.0  # the fast file mode's wait for one frame's work


class Direction(enum.Enum):
    """Which way a frame travels."""

    DOWNSTREAM = 1
    UPSTREAM = 2


# Sees every frame sent between stages (``source`` None: fed from outside); the same frame
# may pass several stages, so an observer acting once per frame keeps a :class:`Seen`.
Observer = Callable[["Stage | None", Frame, Direction], None]


class Seen:
    """Frame ids already seen, bounded: observers act on a frame once, though it passes several stages."""

    def __init__(self, keep: int = 512) -> None:
        """Remember the last ``keep`` ids."""
        self._ids: dict[int, None] = {}
        self._keep = keep

    def first(self, frame: Frame) -> bool:
        """True the first time this frame is shown."""
        if frame.id in self._ids:
            return False
        self._ids[frame.id] = None
        if len(self._ids) > self._keep:
            del self._ids[next(iter(self._ids))]
        return True


class Clock:
    """The loop's time in ms: the input position, or wall time with ``realtime``."""

    def __init__(self, *, realtime: bool) -> None:
        """Start at zero."""
        self.realtime = realtime
        self.position_ms = 0
        self._t0: float | None = None

    def start(self) -> None:
        """Mark the first frame (wall clock mode)."""
        self._t0 = time.perf_counter()

    def now_ms(self) -> int:
        """The current time on the loop's timeline."""
        if self.realtime and self._t0 is not None:
            return int(round((time.perf_counter() - self._t0) * 1000))
        return self.position_ms


class Stage:
    """One job in the loop. Subclasses override :meth:`process` and forward the rest."""

    def __init__(self, name: str | None = None) -> None:
        """A stage not yet linked into a pipeline."""
        self.name = name or type(self).__name__
        self.pipeline: Pipeline | None = None
        self._next: Stage | None = None
        self._prev: Stage | None = None
        self._system: asyncio.Queue[tuple[Frame, Direction]] = asyncio.Queue()
        self._data: asyncio.Queue[tuple[Frame, Direction]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._data_task: asyncio.Task[None] | None = None
        self._work: set[asyncio.Task[Any]] = set()
        self._keep: set[asyncio.Task[Any]] = set()  # spawned work an interruption must not cancel
        self._failing: str | None = None  # the error being reported, until the stage recovers

    # -- life cycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Start the stage's queue tasks (the pipeline calls this)."""
        self._tasks.append(asyncio.create_task(self._system_loop(), name=f"{self.name}.system"))
        self._data_task = asyncio.create_task(self._data_loop(), name=f"{self.name}.data")

    async def stop(self) -> None:
        """Cancel and await every task the stage owns."""
        tasks = [*self._tasks, *self._work]
        if self._data_task:
            tasks.append(self._data_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.cleanup()

    async def cleanup(self) -> None:
        """Release what the stage holds (override)."""

    # -- frames -------------------------------------------------------------------------
    def enqueue(self, frame: Frame, direction: Direction = Direction.DOWNSTREAM) -> None:
        """Accept a frame from a neighbour."""
        assert self.pipeline is not None
        self.pipeline.pending += 1
        queue = self._system if isinstance(frame, SystemFrame) else self._data
        queue.put_nowait((frame, direction))

    def send(self, frame: Frame, direction: Direction = Direction.DOWNSTREAM) -> None:
        """Send a frame to the next (or previous) stage now; observers see it."""
        pipeline = self.pipeline
        assert pipeline is not None
        pipeline.observe(self, frame, direction)
        target = self._next if direction is Direction.DOWNSTREAM else self._prev
        if target is not None:
            target.enqueue(frame, direction)
        elif direction is Direction.DOWNSTREAM:
            pipeline.leave(frame)

    async def push(self, frame: Frame, direction: Direction = Direction.DOWNSTREAM) -> None:
        """Send a frame on (the coroutine form of :meth:`send`)."""
        self.send(frame, direction)

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Handle one frame; the default forwards it."""
        await self.push(frame, direction)

    async def on_interruption(self) -> None:
        """Drop stage state tied to the interrupted reply (override)."""

    # -- helpers for subclasses ------------------------------------------------------
    def now_ms(self) -> int:
        """The loop's current time."""
        return self.pipeline.clock.now_ms() if self.pipeline else 0

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str, *, interruptible: bool = True
              ) -> asyncio.Task[Any]:
        """Run owned background work; the loop counts it as busy until it ends.

        An interruption reaching this stage cancels it, like the data task, unless it is
        not part of a reply (``interruptible`` False: the recognition of the user's words).
        """
        assert self.pipeline is not None
        pipeline = self.pipeline
        pipeline.pending += 1
        task = asyncio.create_task(coro, name=f"{self.name}.{name}")
        self._work.add(task)
        if not interruptible:
            self._keep.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._work.discard(t)
            self._keep.discard(t)
            pipeline.pending -= 1
            if not t.cancelled() and t.exception() is not None:
                _LOGGER.error("%s failed", t.get_name(), exc_info=t.exception())
                self.send(ErrorFrame(message=f"{t.get_name()}: {t.exception()}"))

        task.add_done_callback(done)
        return task

    def _report(self, err: Exception, what: str) -> None:
        """Report a failure once (a repeating one is not reported every frame)."""
        message = f"{self.name}: {type(err).__name__}: {err}"
        if message != self._failing:
            self._failing = message
            _LOGGER.error("%s failed on %s", self.name, what, exc_info=err)
            self.send(ErrorFrame(message=message))

    # -- queue loops ---------------------------------------------------------------------
    async def _handle(self, frame: Frame, direction: Direction) -> None:
        try:
            await self.process(frame, direction)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a stage error is reported, never fatal
            self._report(err, type(frame).__name__)
            if isinstance(frame, InterruptionFrame):
                self.send(frame, direction)  # the interruption travels on regardless
            return
        if self._failing is not None:
            _LOGGER.warning("%s works again after: %s", self.name, self._failing)
            self._failing = None

    async def _system_loop(self) -> None:
        assert self.pipeline is not None
        while True:
            frame, direction = await self._system.get()
            try:
                if isinstance(frame, InterruptionFrame):
                    await self._interrupt()
                await self._handle(frame, direction)
            finally:
                self.pipeline.pending -= 1

    async def _data_loop(self) -> None:
        assert self.pipeline is not None
        while True:
            frame, direction = await self._data.get()
            try:
                await self._handle(frame, direction)
            finally:
                self.pipeline.pending -= 1

    async def _interrupt(self) -> None:
        """Cancel in-flight work, flush queued data, reset the stage; never raises."""
        assert self.pipeline is not None
        try:
            running = [t for t in (self._data_task, *self._work) if t is not None and t not in self._keep]
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            kept: list[tuple[Frame, Direction]] = []
            while not self._data.empty():
                frame, direction = self._data.get_nowait()
                if isinstance(frame, ControlFrame) and frame.uninterruptible:
                    kept.append((frame, direction))
                else:
                    self.pipeline.pending -= 1
            for item in kept:
                self._data.put_nowait(item)
            await self.on_interruption()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            self._report(err, "an interruption")
        finally:
            self._data_task = asyncio.create_task(self._data_loop(), name=f"{self.name}.data")


class Pipeline:
    """A dialogue loop: stages linked top to bottom, one clock, observers of every frame."""

    def __init__(self, stages: Sequence[Stage], *, clock: Clock,
                 observers: Sequence[Observer] = ()) -> None:
        """Link the stages in order."""
        self.stages = list(stages)
        self.clock = clock
        self.observers = list(observers)
        self.pending = 0
        self.sink: Callable[[Frame], None] = lambda frame: None  # frames leaving the last stage
        for prev, nxt in zip(self.stages, self.stages[1:], strict=False):
            prev._next, nxt._prev = nxt, prev
        for stage in self.stages:
            stage.pipeline = self

    async def start(self) -> None:
        """Start every stage."""
        for stage in self.stages:
            await stage.start()

    async def stop(self) -> None:
        """Stop every stage (in reverse order) and await their tasks."""
        for stage in reversed(self.stages):
            await stage.stop()

    def push(self, frame: Frame) -> None:
        """Feed a frame into the first stage."""
        self.observe(None, frame, Direction.DOWNSTREAM)
        self.stages[0].enqueue(frame)

    def observe(self, source: Stage | None, frame: Frame, direction: Direction) -> None:
        """Show a frame to every observer (an observer's failure is logged, never fatal)."""
        for observer in self.observers:
            try:
                observer(source, frame, direction)
            except Exception:
                _LOGGER.exception("an observer failed on %s", type(frame).__name__)

    def leave(self, frame: Frame) -> None:
        """A frame passed the last stage."""
        if isinstance(frame, InterruptionFrame) and frame.done is not None:
            frame.done.set()
        self.sink(frame)

    async def wait_idle(self, timeout_s: float = IDLE_TIMEOUT_S) -> None:
        """Wait until no frame is queued and no owned work runs (the fast file mode).

        Raises TimeoutError naming what is still pending after ``timeout_s``.
        """
        spins = 0
        deadline = time.monotonic() + timeout_s
        while self.pending > 0:
            spins += 1
            if spins % 1000 == 0 and time.monotonic() > deadline:
                busy = [s.name for s in self.stages if s._work or not s._data.empty() or not s._system.empty()]
                raise TimeoutError(f"the loop did not become idle in {timeout_s:g} s "
                                   f"({self.pending} pending; busy: {', '.join(busy) or 'a data task'})")
            await asyncio.sleep(0 if spins < 50 else 0.001)
