"""The audio hot path: the C extension (``native/``) when built, else its numpy twin.

``DUPLEX_HUB_PURE=1`` forces the twins (``twin.py``). :data:`IMPLEMENTATION` says which
one this process uses ("c" or "numpy").
"""

from __future__ import annotations

import logging
import os
from typing import Any, Final

from . import twin

_LOGGER = logging.getLogger(__name__)


def _load() -> tuple[Any, str]:
    if os.environ.get("DUPLEX_HUB_PURE", "") not in ("", "0"):
        return twin, "numpy"
    try:
        from .. import _native  # type: ignore[attr-defined]
    except ImportError as err:
        _LOGGER.info("the C audio path is not built (%s): using the numpy twins", err)
        return twin, "numpy"
    return _native, "c"


_impl, IMPLEMENTATION = _load()
frame_rms: Final = _impl.frame_rms
int16_to_float: Final = _impl.int16_to_float
float_to_int16: Final = _impl.float_to_int16
Resampler: Final = _impl.Resampler
RingBuffer: Final = _impl.RingBuffer
