"""Constants of the Duplex Hub integration (see docs/protocol.md for the topics)."""

from __future__ import annotations

from typing import Final

DOMAIN: Final = "duplex_hub"
TOPIC_ROOT: Final = "duplex_hub"
DISCOVERY_PREFIX: Final = f"{TOPIC_ROOT}/discovery/"

CONF_HUB_ID: Final = "hub_id"
CONF_BASE_TOPIC: Final = "base_topic"
CONF_NAME: Final = "name"
CONF_LANGUAGE: Final = "language"
CONF_PREFER_LOCAL: Final = "prefer_local"
CONF_ALLOWED_INTENTS: Final = "allowed_intents"

# the intents the hub's grammar and LLM produce; Home Assistant handles each of them
SUPPORTED_INTENTS: Final = (
    "HassTurnOn", "HassTurnOff", "HassToggle", "HassLightSet", "HassGetState",
    "HassClimateSetTemperature", "HassClimateGetTemperature", "HassSetPosition",
    "HassGetCurrentTime", "HassGetCurrentDate", "HassNevermind",
)

AVAILABILITY_TIMEOUT_S: Final = 5.0  # the config flow waits this long for the hub's availability
ASK_TIMEOUT_S: Final = 15.0  # an ask answered by the hub's LLM can take seconds
RESULT_TIMEOUT_S: Final = 5.0  # what the hub waits for our intent/result (sent as its controller)
CATALOG_COOLDOWN_S: Final = 0.5  # catalog republish debounce
SEEN_INTENTS: Final = 256  # intent ids remembered to drop the outbox's resends

STATE_ACTIVITIES: Final = ["idle", "listening", "thinking", "speaking"]
