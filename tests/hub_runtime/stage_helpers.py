"""Per-stage tests, in the style of Pipecat's ``run_test``: frames in, frames out, one stage alone.

The stage sits between two collectors; frames it sends downstream land in ``down``,
upstream in ``up``. Each input frame is delivered and the pipeline left idle before the
next, so the output does not depend on timing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hub_runtime.audio.format import AudioChunk, Int16Array
from hub_runtime.frames import Frame, InputAudioFrame
from hub_runtime.pipeline import Clock, Direction, Observer, Pipeline, Stage


class Collector(Stage):
    """Keeps every frame it receives; forwards nothing (frames leave the pipeline here)."""

    def __init__(self, name: str) -> None:
        """An empty collector."""
        super().__init__(name)
        self.frames: list[Frame] = []

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Keep it."""
        self.frames.append(frame)
        if direction is Direction.DOWNSTREAM and self.pipeline is not None:
            self.pipeline.leave(frame)


@dataclass
class StageRun:
    """What one stage sent, each way (input audio frames left out unless asked for)."""

    down: list[Frame] = field(default_factory=list)
    up: list[Frame] = field(default_factory=list)

    def of(self, kind: type[Any], *, up: bool = False) -> list[Any]:
        """The frames of one type, downstream (or upstream)."""
        return [f for f in (self.up if up else self.down) if isinstance(f, kind)]

    def kinds(self, *, up: bool = False) -> list[str]:
        """The frame types in order, audio left out."""
        return [type(f).__name__ for f in (self.up if up else self.down) if not isinstance(f, InputAudioFrame)]


Item = Frame | tuple[Frame, Direction]


async def run_stage(stage: Stage, frames: Iterable[Item], *, clock: Clock | None = None,
                    observers: Sequence[Observer] = (), between: Any = None) -> StageRun:
    """Feed ``frames`` to ``stage`` one at a time; ``between(stage, frame)`` runs after each."""
    up, down = Collector("up"), Collector("down")
    pipeline = Pipeline([up, stage, down], clock=clock or Clock(realtime=False), observers=observers)
    await pipeline.start()
    try:
        for item in frames:
            frame, direction = item if isinstance(item, tuple) else (item, Direction.DOWNSTREAM)
            if isinstance(frame, InputAudioFrame):
                pipeline.clock.position_ms = frame.t_ms
            stage.enqueue(frame, direction)
            await pipeline.wait_idle(timeout_s=30)
            if between is not None:
                between(stage, frame)
                await pipeline.wait_idle(timeout_s=30)
    finally:
        await pipeline.stop()
    return StageRun(down=down.frames, up=up.frames)


def audio_frame(t_ms: int, *, speech: bool = False, level: int = 0, reference: Int16Array | None = None,
                samples: int = 480) -> InputAudioFrame:
    """An input frame (a constant ``level``) with the VAD's decision already made."""
    return InputAudioFrame(audio=AudioChunk(np.full(samples, level, np.int16)), t_ms=t_ms, speech=speech,
                           reference=reference)
