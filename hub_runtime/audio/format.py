"""Audio that carries its format (like Wyoming's AudioChunk), and conversion at the edges."""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

import numpy as np
import numpy.typing as npt

RATE: Final = 16000  # Hz, the loop's internal rate: the one audio timebase
WIDTH: Final = 2  # bytes per sample
CHANNELS: Final = 1
SAMPLES_PER_MS: Final = RATE // 1000

Int16Array = npt.NDArray[np.int16]


class AudioFormatError(ValueError):
    """Input that is not usable audio."""


@dataclass(frozen=True)
class AudioChunk:
    """PCM audio with its format: 16-bit little-endian samples."""

    samples_i16: Int16Array
    rate: int = RATE
    width: int = WIDTH
    channels: int = CHANNELS

    @property
    def samples(self) -> int:
        """Samples per channel."""
        return int(self.samples_i16.shape[0]) // self.channels

    @property
    def ms(self) -> float:
        """Duration in milliseconds."""
        return self.samples * 1000.0 / self.rate

    @property
    def bytes(self) -> bytes:
        """The raw PCM."""
        return self.samples_i16.tobytes()

    def float32(self) -> npt.NDArray[np.float32]:
        """Samples scaled to [-1, 1)."""
        return self.samples_i16.astype(np.float32) / 32768.0


def ms_to_samples(ms: float) -> int:
    """Samples at the loop's rate in ``ms`` milliseconds."""
    return int(round(ms * SAMPLES_PER_MS))


def samples_to_ms(samples: int) -> int:
    """Whole milliseconds that ``samples`` at the loop's rate last."""
    return samples // SAMPLES_PER_MS


def silence(samples: int) -> Int16Array:
    """Zeros."""
    return np.zeros(samples, dtype=np.int16)


def resample(x: npt.NDArray[np.floating] | Int16Array, src: int, dst: int) -> Int16Array:
    """Band-limited resampling of a whole signal (FFT), returning int16."""
    data = np.asarray(x, dtype=np.float64)
    if src == dst or data.size == 0:
        return np.clip(np.round(data), -32768, 32767).astype(np.int16)
    n_out = int(round(data.size * dst / src))
    spec = np.fft.rfft(data)
    n_bins = n_out // 2 + 1
    if n_bins <= spec.size:
        spec = spec[:n_bins]
    else:
        spec = np.concatenate([spec, np.zeros(n_bins - spec.size, dtype=spec.dtype)])
    out = np.fft.irfft(spec, n=n_out) * (n_out / data.size)
    return np.clip(np.round(out), -32768, 32767).astype(np.int16)


def to_mono_16k(pcm: npt.NDArray[np.generic], rate: int, channels: int, width: int) -> Int16Array:
    """Convert interleaved PCM of any common width to 16 kHz mono int16."""
    if width == 1:
        data = (pcm.astype(np.float64) - 128.0) * 256.0
    elif width == 2:
        data = pcm.astype(np.float64)
    elif width == 3 or width == 4:
        data = pcm.astype(np.float64) / (1 << (8 * width - 16))
    else:
        raise AudioFormatError(f"{width * 8}-bit samples are not supported")
    if channels > 1:
        data = data.reshape(-1, channels).mean(axis=1)
    return resample(data, rate, RATE)


def read_wav(path: str | Path | BinaryIO) -> Int16Array:
    """Read a WAV file (or a file object) as 16 kHz mono int16, converting when needed."""
    try:
        with wave.open(path if not isinstance(path, str | Path) else str(path), "rb") as w:
            rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            raw = w.readframes(w.getnframes())
    except FileNotFoundError:
        raise AudioFormatError(f"{path}: no such file") from None
    except (wave.Error, EOFError) as err:
        raise AudioFormatError(f"{path}: not a WAV audio file ({err})") from None
    if width == 3:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3)
        pcm = (b[:, 0].astype(np.int32) | (b[:, 1].astype(np.int32) << 8)
               | (b[:, 2].astype(np.int32) << 16))
        pcm = np.where(pcm >= 1 << 23, pcm - (1 << 24), pcm)
    else:
        dtype = {1: np.uint8, 2: np.int16, 4: np.int32}.get(width)
        if dtype is None:
            raise AudioFormatError(f"{path}: {width * 8}-bit samples are not supported")
        pcm = np.frombuffer(raw, dtype=dtype)
    if rate == RATE and channels == 1 and width == 2:
        return pcm.astype(np.int16)
    return to_mono_16k(pcm, rate, channels, width)


def wav_samples(data: bytes) -> Int16Array:
    """A WAV file in memory (an MQTT payload) as 16 kHz mono int16; AudioFormatError if it is none."""
    return read_wav(io.BytesIO(data))


def wav_bytes(samples: Int16Array, rate: int = RATE) -> bytes:
    """Mono int16 samples as a WAV file in memory."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(samples, dtype=np.int16).tobytes())
    return buf.getvalue()


def write_wav(path: str | Path, samples: Int16Array, rate: int = RATE) -> None:
    """Write mono int16 samples as a WAV file."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(wav_bytes(samples, rate))
