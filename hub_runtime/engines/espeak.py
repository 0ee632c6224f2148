"""espeak-ng: the fallback voice (no model files) and varied synthetic test voices."""

from __future__ import annotations

import io
import subprocess
import wave
from collections.abc import Iterator

import numpy as np

from ..audio.format import RATE, Int16Array, resample
from ..text import split_sentences


class EspeakSynth:
    """espeak-ng as a fallback voice (no model files needed)."""

    def __init__(self, voice: str = "en-us", *, speed_wpm: int = 170) -> None:
        """Use this espeak-ng voice."""
        self.voice, self.speed = voice, speed_wpm

    def sentences(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        """Yield each sentence's audio."""
        for sentence in split_sentences(text):
            yield sentence, espeak(sentence, self.voice, speed_wpm=self.speed)


def espeak(text: str, voice: str = "en-us", *, speed_wpm: int = 170, pitch: int = 50) -> Int16Array:
    """Synthesise with espeak-ng, returned at 16 kHz."""
    out = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(speed_wpm), "-p", str(pitch), "--stdout", text],
        capture_output=True, check=True, timeout=60,
    ).stdout
    with wave.open(io.BytesIO(out)) as w:
        rate = w.getframerate()
        audio = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    return resample(audio, rate, RATE)
