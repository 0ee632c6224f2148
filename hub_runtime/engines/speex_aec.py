"""Acoustic echo cancellation with Debian's libspeexdsp (MDF filter + residual suppression).

The reference is exactly what the output stage played in the same tick, so the filter
only has to model the room (delay and colouring). The native issue replaces this ctypes
binding with the project's own C hot path; the interface stays.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Final

import numpy as np

from ..audio.format import RATE, Int16Array

_LOGGER = logging.getLogger(__name__)

SPEEX_ECHO_SET_SAMPLING_RATE: Final = 24
SPEEX_PREPROCESS_SET_DENOISE: Final = 0
SPEEX_PREPROCESS_SET_ECHO_STATE: Final = 24
FILTER_MS: Final = 300  # echo tail the filter covers


class EchoCancellerUnavailable(RuntimeError):
    """libspeexdsp is not installed."""


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("speexdsp") or "libspeexdsp.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as err:
        raise EchoCancellerUnavailable(f"libspeexdsp not found ({err})") from None
    lib.speex_echo_state_init.restype = ctypes.c_void_p
    lib.speex_echo_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.speex_echo_cancellation.argtypes = [ctypes.c_void_p] + [ctypes.c_void_p] * 3
    lib.speex_echo_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.speex_echo_state_destroy.argtypes = [ctypes.c_void_p]
    lib.speex_preprocess_state_init.restype = ctypes.c_void_p
    lib.speex_preprocess_state_init.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.speex_preprocess_ctl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.speex_preprocess_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.speex_preprocess_state_destroy.argtypes = [ctypes.c_void_p]
    return lib


class SpeexEchoCanceller:
    """Removes the speaker's echo from microphone frames of a fixed size."""

    def __init__(self, frame_samples: int, *, filter_ms: int = FILTER_MS) -> None:
        """Create the filter for frames of ``frame_samples``."""
        self._lib = _library()
        self.frame = frame_samples
        self._echo = self._lib.speex_echo_state_init(frame_samples, filter_ms * RATE // 1000)
        rate = ctypes.c_int(RATE)
        self._lib.speex_echo_ctl(self._echo, SPEEX_ECHO_SET_SAMPLING_RATE, ctypes.byref(rate))
        self._pre = self._lib.speex_preprocess_state_init(frame_samples, RATE)
        off = ctypes.c_int(0)
        self._lib.speex_preprocess_ctl(self._pre, SPEEX_PREPROCESS_SET_DENOISE, ctypes.byref(off))
        self._lib.speex_preprocess_ctl(self._pre, SPEEX_PREPROCESS_SET_ECHO_STATE,
                                       ctypes.c_void_p(self._echo))
        self._out = np.zeros(frame_samples, dtype=np.int16)

    def process(self, mic: Int16Array, reference: Int16Array) -> Int16Array:
        """The mic frame with the echo of ``reference`` (played in the same tick) removed."""
        if len(mic) != self.frame or len(reference) != self.frame:
            raise ValueError(f"frames must be {self.frame} samples (mic {len(mic)}, "
                             f"reference {len(reference)})")
        rec = np.ascontiguousarray(mic, dtype=np.int16)
        ref = np.ascontiguousarray(reference, dtype=np.int16)
        out = np.empty(self.frame, dtype=np.int16)
        self._lib.speex_echo_cancellation(self._echo, rec.ctypes.data, ref.ctypes.data,
                                          out.ctypes.data)
        self._lib.speex_preprocess_run(self._pre, out.ctypes.data)
        return out

    def close(self) -> None:
        """Free the C state."""
        if self._echo:
            self._lib.speex_echo_state_destroy(self._echo)
            self._lib.speex_preprocess_state_destroy(self._pre)
            self._echo = self._pre = None
