"""Short sounds the hub plays itself (not speech)."""

from __future__ import annotations

from functools import cache

import numpy as np

from .format import RATE, Int16Array, ms_to_samples


@cache
def chime() -> Int16Array:
    """Two soft rising tones (a timer's end), about half a second."""
    parts = []
    for freq, ms in ((880.0, 180), (1318.5, 260)):
        n = ms_to_samples(ms)
        t = np.arange(n) / RATE
        envelope = np.minimum(1.0, np.arange(n) / ms_to_samples(10)) * np.exp(-4.0 * t / (ms / 1000))
        parts.append(np.sin(2 * np.pi * freq * t) * envelope * 9000)
        parts.append(np.zeros(ms_to_samples(40)))
    return np.concatenate(parts).astype(np.int16)
