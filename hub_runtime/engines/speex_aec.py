"""Acoustic echo cancellation: speex's MDF filter and residual echo suppression.

The canceller is ``native/echo.c`` (libspeexdsp) or its numpy twin, whichever
:mod:`hub_runtime.audio.native` loaded. The reference is exactly what the output stage played
in the same tick, so the filter only has to model the room (delay and colouring). The
cleaned frame is one frame (30 ms) late: speex's preprocessor works by overlap-add.

While the hub is silent and its echo has died away there is no residue to suppress, and
the preprocessor only makes the filter's output a frame late: that frame was 30 ms of every
turn's latency (the VAD, the end of the turn and the recogniser all heard the words' end a
frame after the microphone did). Then the filter's output for the frame itself goes on, at
once (the same audio: speex's DC notch, nothing to cancel). The preprocessor still runs on
every frame (its state follows the room). Going from one to the other repeats a frame or
drops one: the frame before the hub starts to play comes twice (the room before the hub
spoke), and the way back drops one frame inside a pause at the room's floor (never a word,
or a weak sound of one, of someone talking on after the hub stopped).
"""

from __future__ import annotations

from collections import deque
from typing import Final

import numpy as np

from ..audio import native
from ..audio.format import RATE, Int16Array

FILTER_MS: Final = 300  # echo tail the filter covers
FLOOR_FRAMES: Final = 33  # the room's floor: the quietest microphone frame of the last second or so
FLOOR_MARGIN: Final = 2.0  # a frame at most this much louder (RMS, 6 dB) is at the room's floor
# ... and a frame is dropped only amid this many such frames in a row: a pause, not a weak sound
# inside a word (the "f" of "office fan", said on after a barge-in, was dropped: "Turn on the office.")
FLOOR_RUN: Final = 5


class SpeexEchoCanceller:
    """Removes the speaker's echo from microphone frames of a fixed size."""

    def __init__(self, frame_samples: int, *, filter_ms: int = FILTER_MS, suppress_db: int = -40,
                 suppress_active_db: int = -15) -> None:
        """Create the filter for frames of ``frame_samples``; suppression levels in dB (<= 0)."""
        self.frame = frame_samples
        self._aec = native.EchoCanceller(frame_samples, filter_ms * RATE // 1000, RATE,
                                         suppress_db=suppress_db, suppress_active_db=suppress_active_db)
        self.direct = True  # the output is the filter's for the frame itself, not the preprocessor's (a frame late)
        self._levels: deque[float] = deque(maxlen=FLOOR_FRAMES)  # the microphone frames' RMS
        self._floor_run = 0  # frames in a row at the room's floor

    def process(self, mic: Int16Array, reference: Int16Array) -> Int16Array:
        """The mic frame with the echo of ``reference`` (played in the same tick) removed.

        One frame late while the hub's voice may be in the room; the frame itself, at once,
        when it has not been for the echo tail (see the module's docstring).
        """
        if len(mic) != self.frame or len(reference) != self.frame:
            raise ValueError(f"frames must be {self.frame} samples (mic {len(mic)}, "
                             f"reference {len(reference)})")
        mic = np.ascontiguousarray(mic, dtype=np.int16)
        reference = np.ascontiguousarray(reference, dtype=np.int16)
        out = np.empty(self.frame, dtype=np.int16)  # the frame keeps it: one array per frame
        now = np.empty(self.frame, dtype=np.int16)
        self._aec.process(mic, reference, out, now)
        level = float(native.frame_rms(mic))
        self._levels.append(level)
        self._floor_run = self._floor_run + 1 if level <= FLOOR_MARGIN * min(self._levels) + 1.0 else 0
        if self.direct:
            if reference.any():  # the hub plays: a frame late from now on (the last frame comes again)
                self.direct = False
                return out
            return now
        if not self._aec.suppressing and self._floor_run >= FLOOR_RUN:
            self.direct = True  # the echo tail is over, the room has been quiet: the last frame is dropped
            return now
        return out

    def close(self) -> None:
        """Nothing to free by hand: the C state goes with the object."""
