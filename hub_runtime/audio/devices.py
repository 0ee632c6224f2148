"""Live audio through sounddevice (PortAudio): one duplex stream, 30 ms blocks."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from typing import Any, Final

import numpy as np

from ..settings import Settings
from .format import RATE, Int16Array

_LOGGER = logging.getLogger(__name__)

REALTIME_PRIORITY: Final = 20  # SCHED_FIFO priority of the audio callback thread (1..99)


class DeviceError(RuntimeError):
    """No usable microphone or speaker."""


def realtime_priority(priority: int = REALTIME_PRIORITY) -> bool:
    """Put the calling thread (the device's callback thread) at SCHED_FIFO; one log line either way.

    Permitted for root, with CAP_SYS_NICE, or with an ``rtprio`` limit (systemd
    ``LimitRTPRIO=``, see ``config/duplex-hub.service``).
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, OSError) as err:
        _LOGGER.warning("audio thread stays at normal priority (SCHED_FIFO not permitted: %s)", err)
        return False
    _LOGGER.info("audio thread at SCHED_FIFO priority %d", priority)
    return True


class LiveDuplex:
    """Microphone frames in, speaker frames out, at the device's pace."""

    def __init__(self, settings: Settings) -> None:
        """Open the configured devices; raise DeviceError with one clear line if absent."""
        try:
            import sounddevice as sd
        except OSError as err:  # PortAudio missing
            raise DeviceError(f"no audio system: {err}") from None
        self._sd = sd
        self.chunk = settings.audio.chunk_size
        self._queue: asyncio.Queue[Int16Array] = asyncio.Queue(maxsize=100)
        self._out = np.zeros(self.chunk, np.int16)
        self._loop = asyncio.get_running_loop()
        self._realtime_tried = False
        dev: Any = (settings.audio.input_device, settings.audio.output_device)
        try:
            self._stream = sd.RawStream(
                samplerate=RATE, blocksize=self.chunk, channels=1, dtype="int16",
                device=dev, callback=self._callback,
            )
            self._stream.start()
        except Exception as err:
            raise DeviceError(f"no usable audio device ({err})") from None

    def _callback(self, indata: Any, outdata: Any, frames: int, _time: Any, _status: Any) -> None:
        if not self._realtime_tried:
            self._realtime_tried = True
            realtime_priority()
        mic = np.frombuffer(bytes(indata), dtype=np.int16).copy()
        outdata[:] = self._out.tobytes()
        self._loop.call_soon_threadsafe(self._put, mic)

    def _put(self, mic: Int16Array) -> None:
        if self._queue.full():
            self._queue.get_nowait()
            _LOGGER.warning("the loop fell behind the microphone; dropped a frame")
        self._queue.put_nowait(mic)

    async def frames(self) -> AsyncIterator[Int16Array]:
        """Microphone frames as they arrive."""
        while True:
            yield await self._queue.get()

    def play(self, frame: Int16Array) -> None:
        """The frame the speaker plays at the next callback."""
        self._out = frame

    def close(self) -> None:
        """Stop the stream."""
        self._stream.stop()
        self._stream.close()
