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


def room_response(delay_ms: int, gain: float, rt60_s: float = 0.2, seed: int = 0) -> np.ndarray:
    """A speaker-to-microphone impulse response: the direct path, then a decaying tail at half its energy."""
    rng = np.random.default_rng(seed)
    n = int(rt60_s * RATE)
    tail = rng.standard_normal(n) * np.exp(-6.9 * np.arange(n) / n)
    tail *= 0.5 * gain / np.sqrt(np.sum(tail**2))
    return np.concatenate([np.zeros(ms_to_samples(delay_ms)), [gain], tail])


@dataclass(frozen=True)
class EchoReport:
    """How an echo canceller did on one recording (all in dB)."""

    erle_db: float  # echo return loss enhancement where only the hub talks (after 2 s to converge)
    near_level_db: float  # the talker's level in the output against the input (0: untouched)
    near_snr_in_db: float  # talker against echo at the microphone
    near_snr_out_db: float  # talker against everything else in the output (echo, distortion)


def measure_echo(canceller: object, far: Int16Array, near: Int16Array, response: np.ndarray, *,
                 near_at_s: float = 4.0, frame: int = 480, latency: int = 480) -> EchoReport:
    """Run ``canceller.process(mic, reference, out)`` over a room: ``far`` played, ``near`` spoken at ``near_at_s``.

    ``latency`` is how late the canceller's output is (speex's preprocessor: one frame).
    """
    total = far.size // frame * frame
    start = int(near_at_s * RATE)
    if start + near.size + RATE > total:
        raise ValueError("the far end must outlast the talker by a second")
    echo = np.convolve(far.astype(np.float64), response)[:total]
    talker = np.zeros(total)
    talker[start:start + near.size] = near
    noise = np.random.default_rng(1).normal(0, 30, total)
    mic = np.clip(echo + talker + noise, -32768, 32767).astype(np.int16)
    out = np.zeros(total + latency, np.int16)
    step = np.empty(frame, np.int16)
    for i in range(0, total, frame):
        canceller.process(mic[i:i + frame], np.ascontiguousarray(far[i:i + frame]), step)  # type: ignore[attr-defined]
        out[i:i + frame] = step
    cleaned = out[latency:latency + total].astype(np.float64)
    m = mic.astype(np.float64)
    hub_only = np.zeros(total, bool)
    hub_only[2 * RATE:start] = True
    hub_only[start + near.size + RATE // 2:] = True
    erle = 10 * np.log10(np.sum(m[hub_only] ** 2) / max(float(np.sum(cleaned[hub_only] ** 2)), 1.0))
    span = slice(start, start + near.size)
    t, o = talker[span], cleaned[span]
    g = float(np.dot(o, t) / np.dot(t, t))
    rest = o - g * t
    return EchoReport(
        erle_db=float(erle),
        near_level_db=float(20 * np.log10(max(g, 1e-6))),
        near_snr_in_db=float(10 * np.log10(np.dot(t, t) / np.sum((m[span] - t) ** 2))),
        near_snr_out_db=float(10 * np.log10(g * g * np.dot(t, t) / max(float(np.dot(rest, rest)), 1.0))),
    )
