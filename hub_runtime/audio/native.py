"""The audio hot path: the C extensions (``native/``) when built, else their numpy twins.

``DUPLEX_HUB_PURE=1`` forces the twins (``twin.py``, ``echo_twin.py``). :data:`IMPLEMENTATION`
and :data:`ECHO_IMPLEMENTATION` say which one this process uses ("c" or "numpy"): the echo
canceller is a module of its own (``_echo``, linked with libspeexdsp), so a machine without
libspeexdsp-dev at build time still has the rest in C.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Final

from . import echo_twin, twin

_LOGGER = logging.getLogger(__name__)


def _load(name: str, pure: Any, what: str) -> tuple[Any, str]:
    if os.environ.get("DUPLEX_HUB_PURE", "") not in ("", "0"):
        return pure, "numpy"
    try:
        module = __import__(f"hub_runtime.{name}", fromlist=[name])
    except ImportError as err:
        _LOGGER.info("%s is not built (%s): using its numpy twin", what, err)
        return pure, "numpy"
    return module, "c"


_impl, IMPLEMENTATION = _load("_native", twin, "the C audio path")
_echo, ECHO_IMPLEMENTATION = _load("_echo", echo_twin, "the C echo canceller")
frame_rms: Final = _impl.frame_rms
int16_to_float: Final = _impl.int16_to_float
float_to_int16: Final = _impl.float_to_int16
Resampler: Final = _impl.Resampler
RingBuffer: Final = _impl.RingBuffer
EchoCanceller: Final = _echo.EchoCanceller
