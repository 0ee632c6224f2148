"""Constants of the Duplex Hub integration (the topics and payloads are in protocol.py)."""

from __future__ import annotations

from typing import Final

from .protocol import SUPPORTED_INTENTS, TIMER_INTENTS

DOMAIN: Final = "duplex_hub"

CONF_HUB_ID: Final = "hub_id"
CONF_BASE_TOPIC: Final = "base_topic"
CONF_NAME: Final = "name"
CONF_LANGUAGE: Final = "language"
CONF_PREFER_LOCAL: Final = "prefer_local"
CONF_ALLOWED_INTENTS: Final = "allowed_intents"

AVAILABILITY_TIMEOUT_S: Final = 5.0  # the config flow waits this long for the hub's availability
ASK_TIMEOUT_S: Final = 15.0  # an ask answered by the hub's LLM can take seconds
RESULT_TIMEOUT_S: Final = 5.0  # what the hub waits for our intent/result (sent as its controller)
CATALOG_COOLDOWN_S: Final = 0.5  # catalog republish debounce
SEEN_INTENTS: Final = 256  # intent ids remembered to drop the outbox's resends



# the intents Home Assistant executes for a hub (a hub keeps its timers itself)
EXECUTED_INTENTS: Final = tuple(i for i in SUPPORTED_INTENTS if i not in TIMER_INTENTS)
