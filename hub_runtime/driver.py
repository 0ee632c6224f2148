"""The tick driver: one dialogue loop, one audio frame per tick, from any source.

``run --input`` (a WAV file), the ``demo`` (a scripted conversation) and the benchmarks
all drive a loop the same way: each tick the source hands over a microphone frame (or
None to stop), the loop plays its next speaker frame and hears the microphone, and the
driver keeps pace — with the wall clock (``realtime``), or as fast as the loop goes,
waiting for each frame's work so that results do not depend on the machine's speed.
Live audio is driven by the device instead (``audio/devices.py``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .audio.format import Int16Array
from .audio.synthetic import EchoRoom
from .loop import DialogueLoop

# a source: the loop's position in ms -> the next microphone frame, or None to stop
Source = Callable[[int], Int16Array | None]


@dataclass
class Recording:
    """What the speaker played and the microphone heard, on one timeline."""

    speaker: list[Int16Array] = field(default_factory=list)
    mic: list[Int16Array] = field(default_factory=list)
    cpu_s: float = 0.0  # process CPU (all threads) while frames were fed
    # ... by thread: Python's thread names; threads Python did not start (the native libraries'
    # pools: CTranslate2's, onnxruntime's) under NATIVE. A thread that ended meanwhile is not in
    # it (its count went with it). Empty where /proc has no threads (not Linux).
    cpu_threads: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def _join(frames: list[Int16Array]) -> Int16Array:
        return np.concatenate(frames) if frames else np.zeros(0, np.int16)

    @property
    def speaker_audio(self) -> Int16Array:
        """The speaker's whole output."""
        return self._join(self.speaker)

    @property
    def mic_audio(self) -> Int16Array:
        """What the microphone heard (with the room's echo)."""
        return self._join(self.mic)


NATIVE = "native"  # threads Python did not start


def thread_cpu() -> dict[int, float]:
    """Each of the process's threads' CPU seconds so far (user and system), by native thread id (Linux)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    out: dict[int, float] = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after the name, which may hold spaces
        except OSError:
            continue  # the thread ended
        out[int(task)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return out


def by_thread_name(before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """The CPU each thread used between two :func:`thread_cpu` readings, summed by thread name."""
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    out: dict[str, float] = {}
    for tid, cpu in after.items():
        used = cpu - before.get(tid, 0.0)
        if used > 0:
            name = names.get(tid, NATIVE)
            out[name] = out.get(name, 0.0) + used
    return out


async def drive(loop: DialogueLoop, source: Source, *, realtime: bool,
                room: EchoRoom | None = None) -> Recording:
    """Tick the loop until the source returns None."""
    clock = loop.clock
    frame_ms = loop.settings.frame_ms
    out = Recording()
    clock.start()
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    threads0 = thread_cpu()
    i = 0
    try:
        while True:
            position = i * frame_ms
            clock.position_ms = position
            frame = source(position)
            if frame is None:
                break
            speaker, heard = loop.tick(frame, clock.now_ms() if realtime else position, room)
            out.speaker.append(speaker)
            out.mic.append(heard)
            i += 1
            if realtime:
                await asyncio.sleep(max(0.0, t0 + i * frame_ms / 1000 - time.perf_counter()))
            else:
                await loop.pipeline.wait_idle()
    finally:
        out.cpu_s = time.process_time() - cpu0
        out.cpu_threads = by_thread_name(threads0, thread_cpu())
    return out
