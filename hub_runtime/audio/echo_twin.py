"""The numpy twin of ``native/echo.c``: an MDF echo canceller and residual echo suppression.

The C module wraps libspeexdsp; this twin is the same algorithm family written out in
numpy, not the same arithmetic, so the tests compare what matters (echo return loss
enhancement and near-end preservation), not samples:

- the linear filter is a multi-delay block frequency-domain adaptive filter (Soo and Pang's
  MDF, as in speex ``mdf.c``): the echo tail is cut into partitions of one frame, each
  adapted by a normalised gradient on the FFT of the reference, with speex's step control
  (a slow start until the filter has adapted, then a per-bin step from the estimated leak of
  echo into the error, so that near-end speech does not detune the filter);
- the residual echo that the filter leaves (the leak times the echo estimate's spectrum)
  is suppressed like speex's preprocessor does: a decision-directed Wiener gain, floored at
  ``suppress_db`` while only the hub talks and at ``suppress_active_db`` while someone talks
  over it -- and, as in the C module, only while the hub's voice can be in the room (the
  reference played within the last echo tail); otherwise the error passes unchanged.

Like speex's preprocessor (overlap-add), the output is one frame late; the optional ``now``
buffer gets the linear filter's output for the frame itself.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from .format import Int16Array

MIN_LEAK: Final = 0.005  # speex: the leak estimate's floor
EPS: Final = 1e-10  # power floor, in full-scale units squared
RESIDUAL_DECAY: Final = 0.6  # per frame: how fast the suppressor forgets the residual echo
PRIOR_SMOOTHING: Final = 0.7  # decision-directed prior SNR


class EchoCanceller:
    """One stream's echo canceller, one frame at a time (the interface of ``_echo``)."""

    def __init__(self, frame: int, filter: int, rate: int, suppress_db: int = -40,
                 suppress_active_db: int = -15) -> None:
        """Frames of ``frame`` samples, an echo tail of ``filter`` samples, at ``rate`` Hz."""
        if frame <= 0 or filter < frame or rate <= 0:
            raise ValueError("frame and rate must be positive and the filter at least one frame")
        if suppress_db > 0 or suppress_active_db > 0:
            raise ValueError("suppression levels are attenuations: 0 dB or less")
        self.frame, self.filter, self.rate = frame, filter, rate
        self._floor = 10 ** (suppress_db / 20)
        self._floor_active = 10 ** (suppress_active_db / 20)
        self._partitions = math.ceil(filter / frame)
        self._spec_average = frame / rate  # speex: per-frame smoothing of the spectra
        self._beta0, self._beta_max = 2 * frame / rate, 0.5 * frame / rate
        self.reset()

    def reset(self) -> None:
        """Forget the room."""
        bins = self.frame + 1
        self._x_hist = np.zeros((self._partitions, bins), np.complex128)
        self._w = np.zeros((self._partitions, bins), np.complex128)
        self._prev_ref = np.zeros(self.frame)
        self._power = np.zeros(bins)
        self._eh = np.zeros(bins)
        self._yh = np.zeros(bins)
        self._pey = self._pyy = 1.0
        self.leak = 1.0  # the estimated share of the echo left in the error
        self._adapted = False
        self._sum_adapt = 0.0
        self._residual = np.zeros(bins)
        self._prev_gain = np.ones(bins)
        self._prev_post = np.ones(bins)
        self._pending = np.zeros(self.frame, np.int16)
        self._quiet = self.filter + 1
        self.suppressing = False

    def process(self, mic: Int16Array, reference: Int16Array, out: Int16Array, now: Int16Array | None = None) -> None:
        """Write the mic frame without the echo of ``reference`` (played in the same frame) to ``out``.

        ``out`` is a frame late; ``now`` (optional) gets the linear filter's output for this
        very frame, before the residual suppression.
        """
        n = self.frame
        bufs = (("mic", mic), ("reference", reference), ("out", out)) + ((("now", now),) if now is not None else ())
        for name, buf in bufs:
            if buf.dtype != np.int16:
                raise TypeError(f"{name} must be a contiguous int16 buffer")
            if buf.size != n:
                raise ValueError(f"{name} has {buf.size} samples, the frame is {n}")
        if out is mic or out is reference:
            raise ValueError("out must be a buffer of its own, not mic or reference")
        if now is not None and (now is mic or now is reference or now is out):
            raise ValueError("now must be a buffer of its own, not mic, reference or out")
        ref = reference.astype(np.float64) / 32768
        near = mic.astype(np.float64) / 32768
        x = np.fft.rfft(np.concatenate([self._prev_ref, ref]))
        self._prev_ref = ref
        self._x_hist = np.roll(self._x_hist, 1, axis=0)
        self._x_hist[0] = x
        y_spec = np.sum(self._w * self._x_hist, axis=0)
        y = np.fft.irfft(y_spec, 2 * n)[n:]
        e = near - y
        e_spec = np.fft.rfft(np.concatenate([np.zeros(n), e]))
        self._adapt(x, y, e, e_spec)
        self._quiet = 0 if reference.any() else min(self._quiet + n, self.filter + 1)
        self.suppressing = self._quiet <= self.filter
        cleaned = self._suppress(e_spec, y)  # runs either way: its state follows the room
        out[:] = self._pending  # speex's preprocessor is one frame late: so is the twin
        if now is not None:
            now[:] = np.clip(np.round(e * 32768), -32768, 32767).astype(np.int16)
        self._pending = np.clip(np.round((cleaned if self.suppressing else e) * 32768),
                                -32768, 32767).astype(np.int16)

    def _adapt(self, x: np.ndarray, y: np.ndarray, e: np.ndarray, e_spec: np.ndarray) -> None:
        """Speex's step control and the constrained gradient step of every partition."""
        n, m = self.frame, self._partitions
        sxx = float(np.dot(self._prev_ref, self._prev_ref))
        see = float(np.dot(e, e)) + EPS
        syy = float(np.dot(y, y))
        sey = float(np.dot(e, y))
        xf = np.abs(x) ** 2
        self._power = (1 - 0.35 / m) * self._power + (0.35 / m) * xf + EPS
        rf = np.abs(e_spec) ** 2
        yf = np.abs(np.fft.rfft(np.concatenate([np.zeros(n), y]))) ** 2
        # the leak: how much of the echo estimate's power variation shows in the error
        self._eh = (1 - self._spec_average) * self._eh + self._spec_average * rf
        self._yh = (1 - self._spec_average) * self._yh + self._spec_average * yf
        pey_frame = float(np.dot(rf - self._eh, yf - self._yh))
        pyy_frame = float(np.dot(yf - self._yh, yf - self._yh))
        alpha = min(self._beta0 * syy / see, self._beta_max)
        self._pey = (1 - alpha) * self._pey + alpha * pey_frame
        self._pyy = max((1 - alpha) * self._pyy + alpha * pyy_frame, EPS)
        self._pey = min(max(self._pey, MIN_LEAK * self._pyy), self._pyy)
        self.leak = self._pey / self._pyy
        rer = min((1e-4 * sxx + 3 * self.leak * syy) / see, 0.5)
        rer = max(rer, sey * sey / (1 + see * syy))
        if not self._adapted and self._sum_adapt > m and self.leak * syy > 0.03 * syy:
            self._adapted = True
        if self._adapted:
            r = np.minimum(self.leak * yf, 0.5 * (rf + EPS))
            r = 0.7 * r + 0.3 * rer * (rf + EPS)
            step = r / ((rf + EPS) * (self._power + EPS))
        else:
            rate = 0.0 if sxx <= n * 1e-6 else min(0.25 * sxx, 0.25 * see) / see
            step = rate / self._power
            self._sum_adapt += rate
        grad = self._w + self._proportions()[:, None] * step * np.conj(self._x_hist) * e_spec
        taps = np.fft.irfft(grad, 2 * n, axis=1)
        taps[:, n:] = 0.0  # the gradient constraint: a partition is one frame long
        self._w = np.fft.rfft(taps, axis=1)

    def _proportions(self) -> np.ndarray:
        """Speex's proportionate step: partitions that hold more of the echo adapt faster; they sum to 0.99."""
        prop: np.ndarray = np.sqrt(np.sum(np.abs(self._w) ** 2, axis=1))
        prop += 0.1 * max(float(prop.max()), 1e-3)
        return 0.99 * prop / float(prop.sum())

    def _suppress(self, e_spec: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The error with the residual echo (leak x echo estimate) suppressed, as samples."""
        n = self.frame
        residual = self.leak * np.abs(np.fft.rfft(np.concatenate([np.zeros(n), y]))) ** 2
        self._residual = np.maximum(RESIDUAL_DECAY * self._residual, residual)
        post = np.abs(e_spec) ** 2 / (self._residual + EPS)
        prior = PRIOR_SMOOTHING * self._prev_gain ** 2 * self._prev_post \
            + (1 - PRIOR_SMOOTHING) * np.maximum(post - 1, 0)
        gain = prior / (1 + prior)
        presence = float(np.mean(gain))  # near-end speech: less suppression, as speex does
        floor = (1 - presence) * self._floor + presence * self._floor_active
        gain = np.maximum(gain, floor)
        gain = np.convolve(gain, np.ones(3) / 3, mode="same")  # a short filter: little block spill
        self._prev_gain, self._prev_post = gain, np.minimum(post, 1e4)
        return np.fft.irfft(gain * e_spec, 2 * n)[n:]
