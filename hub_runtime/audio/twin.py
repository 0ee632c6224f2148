"""The pure numpy twins of ``native/duplex_audio.c`` (``hub_runtime._native``): the same arithmetic.

Used when the C extension was not built, or with ``DUPLEX_HUB_PURE=1``; the tests run
both and compare them (``tests/hub_runtime/test_native.py``).
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

HALF_TAPS: Final = 16  # the resampler's taps per side at the lower band edge (as in C)


def frame_rms(frame: npt.NDArray[np.int16]) -> float:
    """Root mean square of an int16 frame, in int16 units."""
    x = np.asarray(frame, dtype=np.float64)
    return float(math.sqrt(float(np.dot(x, x)) / x.size)) if x.size else 0.0


def int16_to_float(src: npt.NDArray[np.int16], dst: npt.NDArray[np.float32]) -> None:
    """dst[:len(src)] = src / 32768."""
    if dst.size < src.size:
        raise ValueError("dst is shorter than src")
    np.divide(src, np.float32(32768.0), out=dst[: src.size], dtype=np.float32)


def float_to_int16(src: npt.NDArray[np.float32], dst: npt.NDArray[np.int16]) -> None:
    """dst[:len(src)] = clip(round(src * 32768)) (round half to even)."""
    if dst.size < src.size:
        raise ValueError("dst is shorter than src")
    dst[: src.size] = np.clip(np.rint(src.astype(np.float64) * 32768.0), -32768, 32767)


def _kernel(x: npt.NDArray[np.float64], c: float) -> npt.NDArray[np.float64]:
    reach = HALF_TAPS / c
    u = x * c
    safe = np.where(np.abs(u) < 1e-12, 1.0, u)
    s = np.where(np.abs(u) < 1e-12, 1.0, np.sin(np.pi * safe) / (np.pi * safe))
    w = 0.5 + 0.5 * np.cos(np.pi * u / HALF_TAPS)
    return np.asarray(np.where(np.abs(x) >= reach, 0.0, c * s * w), dtype=np.float64)


class Resampler:
    """Streaming windowed-sinc resampler of int16 audio (a stream gives what one call gives).

    Output k sits at input position k * src / dst = base + p / dst; its value is the dot
    product of the inputs base - R .. base + R + 1 with the phase's row of a table made
    once (see ``native/duplex_audio.c``).
    """

    def __init__(self, src_rate: int, dst_rate: int) -> None:
        """From ``src_rate`` to ``dst_rate`` Hz."""
        if src_rate <= 0 or dst_rate <= 0:
            raise ValueError("rates must be positive")
        g = math.gcd(src_rate, dst_rate)
        self.phases, self.step = dst_rate // g, src_rate // g
        c = dst_rate / src_rate if dst_rate < src_rate else 1.0
        self.r = math.ceil(HALF_TAPS / c)
        offsets = np.arange(2 * self.r + 2) - self.r
        self.table = np.stack([_kernel(p / self.phases - offsets.astype(np.float64), c)
                               for p in range(self.phases)])
        self.consumed = 0  # input samples before hist[0]
        self.produced = 0
        self.hist = np.zeros(0, np.float64)

    def max_out(self, n: int) -> int:
        """Room ``dst`` needs for ``n`` more input samples."""
        return (self.consumed + self.hist.size + n) * self.phases // self.step - self.produced + 2

    def process(self, src: npt.NDArray[np.int16], dst: npt.NDArray[np.int16]) -> int:
        """Resample ``src`` (the stream's next samples) into ``dst``; the number written."""
        if dst.size < self.max_out(src.size):
            raise ValueError("dst is shorter than max_out(len(src))")
        self.hist = np.concatenate([self.hist, np.asarray(src, np.float64)])
        end = self.consumed + self.hist.size
        # every output whose last tap is already here, at once (sums in another order than
        # C: the two may differ by one step of int16 after rounding)
        last = (end - self.r - 1) * self.phases - 1  # the largest position k * step with base + r + 1 < end
        n = max(0, last // self.step + 1 - self.produced) if last >= 0 else 0
        if n:
            k = self.produced + np.arange(n)
            base, phase = np.divmod(k * self.step, self.phases)
            j = base[:, None] + (np.arange(2 * self.r + 2) - self.r)[None, :]
            x = np.where(j >= 0, self.hist[np.maximum(j - self.consumed, 0)], 0.0)
            acc = np.einsum("ij,ij->i", x, self.table[phase])
            dst[:n] = np.clip(np.rint(acc), -32768, 32767)
            self.produced += n
        written = n
        keep_from = max(self.consumed, self.produced * self.step // self.phases - self.r)
        drop = keep_from - self.consumed
        if drop > 0:
            self.hist = self.hist[drop:]
            self.consumed += drop
        return written


class RingBuffer:
    """Single-producer single-consumer ring of int16 samples (capacity: a power of two)."""

    def __init__(self, capacity: int) -> None:
        """Hold at least ``capacity`` samples."""
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = 1 << (capacity - 1).bit_length()
        self._data = np.zeros(self.capacity, np.int16)
        self._head = 0  # written
        self._tail = 0  # read

    def write(self, samples: npt.NDArray[np.int16]) -> int:
        """Append what fits; the number written (the rest is dropped)."""
        n = min(samples.size, self.capacity - (self._head - self._tail))
        idx = (self._head + np.arange(n)) & (self.capacity - 1)
        self._data[idx] = samples[:n]
        self._head += n
        return n

    def read_into(self, out: npt.NDArray[np.int16]) -> int:
        """Take up to ``len(out)`` samples; the number read."""
        n = min(out.size, self._head - self._tail)
        idx = (self._tail + np.arange(n)) & (self.capacity - 1)
        out[:n] = self._data[idx]
        self._tail += n
        return n

    def available(self) -> int:
        """Samples waiting."""
        return self._head - self._tail
