"""Diagnostics: the entry, the hub's announcement and live state, counters (redacted)."""

from __future__ import annotations

from typing import Any

from homeassistant.components.diagnostics import async_redact_data
from homeassistant.core import HomeAssistant

from . import DuplexHubConfigEntry

# what the user said is private; the rest describes the set-up
TO_REDACT = {"last_transcript"}


async def async_get_config_entry_diagnostics(hass: HomeAssistant,
                                             entry: DuplexHubConfigEntry) -> dict[str, Any]:
    """What a bug report needs."""
    hub = entry.runtime_data
    return async_redact_data({
        "entry": {"data": dict(entry.data), "options": dict(entry.options)},
        "hub": {
            "available": hub.available,
            "announcement": hub.info.to_dict() if hub.info else None,
            "activity": hub.activity,
            "muted": hub.muted,
            "volume": hub.volume,
            "last_transcript": hub.last_transcript,
            "last_turn_latency_ms": hub.last_latency_ms,
            "allowed_intents": hub.allowed,
            "prefer_local": hub.prefer_local,
            "language": hub.language,
            "catalog_entities": len(hub.catalog_ids),
            "counts": dict(hub.counts),
        },
    }, TO_REDACT)
