"""The stage base (queues, interruption) and a dialogue loop as a list of stages.

Each :class:`Stage` has one job. Frames arrive on two queues: system frames are
handled at once by one task, data and control frames in order by another. Barge-in
is one mechanism, written here once: an :class:`~.frames.InterruptionFrame`
cancels the stage's in-flight data work, flushes its queued data frames (all but
uninterruptible ones), calls :meth:`Stage.on_interruption` and travels on.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from .frames import ControlFrame, ErrorFrame, Frame, InterruptionFrame, SystemFrame

_LOGGER = logging.getLogger(__name__)

EventSink = Callable[[dict[str, Any]], None]


class Direction(enum.Enum):
    """Which way a frame travels."""

    DOWNSTREAM = 1
    UPSTREAM = 2


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
        """Release engines (override)."""

    # -- frames -------------------------------------------------------------------------
    def enqueue(self, frame: Frame, direction: Direction = Direction.DOWNSTREAM) -> None:
        """Accept a frame from a neighbour."""
        assert self.pipeline is not None
        self.pipeline.pending += 1
        queue = self._system if isinstance(frame, SystemFrame) else self._data
        queue.put_nowait((frame, direction))

    async def push(self, frame: Frame, direction: Direction = Direction.DOWNSTREAM) -> None:
        """Send a frame on to the next (or previous) stage."""
        target = self._next if direction is Direction.DOWNSTREAM else self._prev
        if target is not None:
            target.enqueue(frame, direction)
        elif self.pipeline is not None and direction is Direction.DOWNSTREAM:
            if isinstance(frame, InterruptionFrame) and frame.done is not None:
                frame.done.set()
            self.pipeline.sink(frame)

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Handle one frame; the default forwards it."""
        await self.push(frame, direction)

    async def on_interruption(self) -> None:
        """Drop stage state tied to the interrupted reply (override)."""

    # -- helpers for subclasses ------------------------------------------------------
    def emit(self, type_: str, **data: Any) -> None:
        """Publish an event at the loop's current time."""
        if self.pipeline is not None:
            self.pipeline.emit(type_, **data)

    def now_ms(self) -> int:
        """The loop's current time."""
        return self.pipeline.clock.now_ms() if self.pipeline else 0

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run owned background work; the loop counts it as busy until it ends."""
        assert self.pipeline is not None
        pipeline = self.pipeline
        pipeline.pending += 1
        task = asyncio.create_task(coro, name=f"{self.name}.{name}")
        self._work.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._work.discard(t)
            pipeline.pending -= 1
            if not t.cancelled() and t.exception() is not None:
                _LOGGER.error("%s failed", t.get_name(), exc_info=t.exception())
                pipeline.emit("error", message=f"{t.get_name()}: {t.exception()}")

        task.add_done_callback(done)
        return task

    # -- queue loops ---------------------------------------------------------------------
    async def _handle(self, frame: Frame, direction: Direction) -> None:
        try:
            await self.process(frame, direction)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a stage error is reported, never fatal
            message = f"{self.name}: {type(err).__name__}: {err}"
            if message != self._failing:  # report a repeating failure once, not every frame
                self._failing = message
                _LOGGER.exception("%s failed on %s", self.name, type(frame).__name__)
                self.emit("error", message=message)
                await self.push(ErrorFrame(message=message))
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
        assert self.pipeline is not None
        if self._data_task is not None:
            self._data_task.cancel()
            await asyncio.gather(self._data_task, return_exceptions=True)
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
        self._data_task = asyncio.create_task(self._data_loop(), name=f"{self.name}.data")


class Pipeline:
    """A dialogue loop: stages linked top to bottom, one clock, one event sink."""

    def __init__(self, stages: Sequence[Stage], *, clock: Clock, events: EventSink) -> None:
        """Link the stages in order."""
        self.stages = list(stages)
        self.clock = clock
        self._events = events
        self.pending = 0
        self.sink: Callable[[Frame], None] = lambda frame: None
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
        self.stages[0].enqueue(frame)

    def emit(self, type_: str, **data: Any) -> None:
        """Publish an event stamped with the loop's time."""
        self._events({"t_ms": self.clock.now_ms(), "type": type_, **data})

    async def wait_idle(self) -> None:
        """Wait until no frame is queued and no owned work runs (the fast file mode)."""
        spins = 0
        while self.pending > 0:
            spins += 1
            await asyncio.sleep(0 if spins < 50 else 0.001)
