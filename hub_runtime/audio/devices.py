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
from .native import Resampler, RingBuffer

_LOGGER = logging.getLogger(__name__)

REALTIME_PRIORITY: Final = 20  # SCHED_FIFO priority of the audio callback thread (1..99)
RING_FRAMES: Final = 16  # frames the rings between the device thread and the loop hold (~0.5 s)


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


class _RateConverter:
    """One direction's resampler and its output buffer (grown once, then reused); none at equal rates."""

    def __init__(self, src: int, dst: int) -> None:
        self._rs = Resampler(src, dst) if src != dst else None
        self._buf = np.zeros(0, np.int16)

    def __call__(self, samples: Int16Array) -> Int16Array:
        """The samples at the other rate (a view of the buffer: used before the next call)."""
        if self._rs is None:
            return samples
        if self._buf.size < self._rs.max_out(samples.size):
            self._buf = np.zeros(self._rs.max_out(samples.size), np.int16)
        return self._buf[: self._rs.process(samples, self._buf)]


class LiveDuplex:
    """Microphone frames in, speaker frames out, at the device's pace and rate.

    The device runs at ``audio.device_rate`` (16, 44.1, 48 kHz ...); its callback thread
    resamples to and from the loop's 16 kHz (``Resampler``) and hands samples over
    through single-producer single-consumer rings (``RingBuffer``): no lock and no
    allocation on the device's thread, which runs at SCHED_FIFO where permitted.
    """

    def __init__(self, settings: Settings, *, open_stream: bool = True) -> None:
        """Open the configured devices; raise DeviceError with one clear line if absent."""
        self.chunk = settings.audio.chunk_size
        self.rate = settings.audio.device_rate
        self.block = self.chunk * self.rate // RATE  # device samples per loop frame
        ring = RING_FRAMES * max(self.chunk, self.block)
        self._mic, self._speaker = RingBuffer(ring), RingBuffer(ring)
        self._to_loop = _RateConverter(self.rate, RATE)
        self._to_device = _RateConverter(RATE, self.rate)
        self._loop = asyncio.get_running_loop()
        self._ready = asyncio.Event()
        self._realtime_tried = False
        self.dropped = 0  # microphone samples the loop did not take in time
        self._stream: Any = None
        if open_stream:
            self._open(settings)

    def _open(self, settings: Settings) -> None:
        try:
            import sounddevice as sd
        except OSError as err:  # PortAudio missing
            raise DeviceError(f"no audio system: {err}") from None
        dev: Any = (settings.audio.input_device, settings.audio.output_device)
        try:
            self._stream = sd.RawStream(samplerate=self.rate, blocksize=self.block, channels=1, dtype="int16",
                                        device=dev, callback=self._callback)
            self._stream.start()
        except Exception as err:
            raise DeviceError(f"no usable audio device ({err})") from None

    def _callback(self, indata: Any, outdata: Any, frames: int, _time: Any, _status: Any) -> None:
        """The device's thread: microphone in, speaker out."""
        if not self._realtime_tried:
            self._realtime_tried = True
            realtime_priority()
        mic = self._to_loop(np.frombuffer(indata, dtype=np.int16))
        written = self._mic.write(mic)
        self.dropped += mic.size - written
        out = np.frombuffer(outdata, dtype=np.int16)
        got = self._speaker.read_into(out)
        out[got:] = 0  # nothing to play (or the loop is late): silence
        if self._mic.available() >= self.chunk:
            self._loop.call_soon_threadsafe(self._ready.set)

    async def frames(self) -> AsyncIterator[Int16Array]:
        """Microphone frames of ``chunk`` samples at 16 kHz, as they arrive."""
        while True:
            while self._mic.available() < self.chunk:
                self._ready.clear()
                if self._mic.available() >= self.chunk:
                    break
                await self._ready.wait()
            frame = np.empty(self.chunk, np.int16)  # the loop keeps it: a frame of its own
            self._mic.read_into(frame)
            yield frame

    def play(self, frame: Int16Array) -> None:
        """The loop's next speaker frame (16 kHz), played at the device's rate."""
        self._speaker.write(self._to_device(np.ascontiguousarray(frame, np.int16)))

    def close(self) -> None:
        """Stop the stream."""
        if self._stream is not None:
            self._stream.stop()
            self._stream.close()
            self._stream = None
