"""Acoustic echo cancellation: speex's MDF filter and residual echo suppression.

The canceller is ``native/echo.c`` (libspeexdsp) or its numpy twin, whichever
:mod:`hub_runtime.audio.native` loaded. The reference is exactly what the output stage played
in the same tick, so the filter only has to model the room (delay and colouring). The
cleaned frame is one frame (30 ms) late: speex's preprocessor works by overlap-add.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from ..audio import native
from ..audio.format import RATE, Int16Array

FILTER_MS: Final = 300  # echo tail the filter covers


class SpeexEchoCanceller:
    """Removes the speaker's echo from microphone frames of a fixed size."""

    def __init__(self, frame_samples: int, *, filter_ms: int = FILTER_MS, suppress_db: int = -40,
                 suppress_active_db: int = -15) -> None:
        """Create the filter for frames of ``frame_samples``; suppression levels in dB (<= 0)."""
        self.frame = frame_samples
        self._aec = native.EchoCanceller(frame_samples, filter_ms * RATE // 1000, RATE,
                                         suppress_db=suppress_db, suppress_active_db=suppress_active_db)

    def process(self, mic: Int16Array, reference: Int16Array) -> Int16Array:
        """The mic frame with the echo of ``reference`` (played in the same tick) removed."""
        if len(mic) != self.frame or len(reference) != self.frame:
            raise ValueError(f"frames must be {self.frame} samples (mic {len(mic)}, "
                             f"reference {len(reference)})")
        out = np.empty(self.frame, dtype=np.int16)  # the frame keeps it: one array per frame
        self._aec.process(np.ascontiguousarray(mic, dtype=np.int16),
                          np.ascontiguousarray(reference, dtype=np.int16), out)
        return out

    def close(self) -> None:
        """Nothing to free by hand: the C state goes with the object."""
