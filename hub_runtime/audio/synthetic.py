"""Synthetic speech and rooms for the demo, the tests and the benchmarks.

Voices are espeak-ng variants and Piper at other speeds; a scene places utterances on
a timeline, optionally with pink noise and a simple reverb; an :class:`EchoRoom` sends
the hub's own voice back into its microphone.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from .format import RATE, Int16Array, ms_to_samples

ESPEAK_VOICES = ("en-us", "en-us+f3", "en-us+m3", "en-gb", "en-us+f4")


@cache
def _piper(length_scale: float) -> object:
    from ..engines.piper import PiperSynth

    return PiperSynth(length_scale=length_scale, variation=False)


def speak(text: str, voice: str = "piper", *, speed: float = 1.0) -> Int16Array:
    """Synthesise a user utterance: ``piper`` (speed = 1/length_scale) or an espeak voice.

    The same text always gives the same samples (Piper without its sampling noise).
    """
    from ..engines.espeak import espeak

    if voice == "piper":
        synth = _piper(round(1.0 / speed, 2))
        parts = [audio for _t, audio in synth.sentences(text)]  # type: ignore[attr-defined]
        return np.concatenate(parts) if parts else np.zeros(0, np.int16)
    return espeak(text, voice, speed_wpm=int(165 * speed))


def pink_noise(samples: int, rms: float, seed: int = 0) -> Int16Array:
    """Pink (1/f) noise at this RMS (int16 units)."""
    rng = np.random.default_rng(seed)
    spec = np.fft.rfft(rng.standard_normal(samples))
    f = np.arange(len(spec), dtype=np.float64)
    f[0] = 1.0
    noise = np.fft.irfft(spec / np.sqrt(f), n=samples)
    noise *= rms / (np.sqrt(np.mean(noise**2)) + 1e-9)
    return np.clip(noise, -32768, 32767).astype(np.int16)


def reverb(x: Int16Array, rt60_s: float = 0.3, wet: float = 0.3, seed: int = 0) -> Int16Array:
    """A small room: convolution with exponentially decaying noise."""
    rng = np.random.default_rng(seed)
    n = int(rt60_s * RATE)
    ir = rng.standard_normal(n) * np.exp(-6.9 * np.arange(n) / n)
    ir = ir / np.sqrt(np.sum(ir**2)) * wet
    ir[0] = 1.0
    y = np.convolve(x.astype(np.float64), ir)[: len(x)]
    y *= np.max(np.abs(x)) / (np.max(np.abs(y)) + 1e-9)
    return np.clip(y, -32768, 32767).astype(np.int16)


@dataclass(frozen=True)
class Placed:
    """An utterance on the scene's timeline."""

    start_ms: int
    end_ms: int
    text: str


def scene(parts: list[tuple[int, Int16Array]], total_ms: int, *, noise_rms: float = 0.0,
          seed: int = 0) -> Int16Array:
    """Mix utterances (start ms, audio) into one microphone track."""
    out = np.zeros(total_ms * RATE // 1000, dtype=np.float64)
    for start_ms, audio in parts:
        s = start_ms * RATE // 1000
        e = min(len(out), s + len(audio))
        out[s:e] += audio[: e - s]
    if noise_rms > 0:
        out += pink_noise(len(out), noise_rms, seed)
    return np.clip(out, -32768, 32767).astype(np.int16)


def speech_bounds_ms(audio: Int16Array, threshold: float = 0.02) -> tuple[int, int]:
    """First and last sample above threshold × peak, in ms (the true speech span)."""
    a = np.abs(audio.astype(np.float64))
    if a.size == 0 or a.max() == 0:
        return 0, 0
    idx = np.nonzero(a >= threshold * a.max())[0]
    return int(idx[0] * 1000 // RATE), int(idx[-1] * 1000 // RATE)


class EchoRoom:
    """A simulated room: the speaker's output comes back into the mic, delayed and scaled."""

    def __init__(self, delay_ms: int, gain: float, chunk: int) -> None:
        """Delay in ms, linear gain."""
        self.gain = gain
        self._delay = ms_to_samples(delay_ms)
        self._line = np.zeros(self._delay + chunk, dtype=np.float32)

    def mix(self, mic: Int16Array, speaker: Int16Array) -> Int16Array:
        """Add the delayed speaker to this mic frame."""
        n = len(speaker)
        self._line = np.concatenate([self._line[n:], speaker.astype(np.float32)])
        start = len(self._line) - self._delay - n
        echo = self._line[start : start + n] * self.gain
        return np.clip(mic.astype(np.float32) + echo, -32768, 32767).astype(np.int16)


def parse_echo(spec: str | None) -> tuple[int, float] | None:
    """``DELAY_MS:GAIN`` → (delay, gain); raises ValueError naming what is wrong."""
    if spec is None:
        return None
    try:
        delay_s, gain_s = spec.split(":")
        delay, gain = int(delay_s), float(gain_s)
    except ValueError:
        raise ValueError(f"--echo {spec!r}: expected DELAY_MS:GAIN, e.g. 40:0.3") from None
    if not 0 <= delay <= 2000 or not 0.0 <= gain <= 4.0:
        raise ValueError(f"--echo {spec!r}: delay 0..2000 ms, gain 0..4")
    return delay, gain
