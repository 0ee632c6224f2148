"""Sensors of a hub: dialogue state, last transcript, last turn latency."""

from __future__ import annotations

from homeassistant.components.sensor import SensorDeviceClass, SensorEntity, SensorStateClass
from homeassistant.const import EntityCategory, UnitOfTime
from homeassistant.core import HomeAssistant
from homeassistant.helpers.entity_platform import AddEntitiesCallback

from . import DuplexHubConfigEntry
from .entity import DuplexHubEntity
from .hub import HubClient
from .protocol import DIALOGUE_STATES

PARALLEL_UPDATES = 0


async def async_setup_entry(hass: HomeAssistant, entry: DuplexHubConfigEntry,
                            async_add_entities: AddEntitiesCallback) -> None:
    """The three sensors of the entry's hub."""
    hub = entry.runtime_data
    async_add_entities([DialogueStateSensor(hub), TranscriptSensor(hub), LatencySensor(hub)])


class DialogueStateSensor(DuplexHubEntity, SensorEntity):
    """idle / listening / thinking / speaking."""

    _attr_device_class = SensorDeviceClass.ENUM
    _attr_options: list[str] | None = list(DIALOGUE_STATES)  # noqa: RUF012 (Home Assistant's attribute)

    def __init__(self, hub: HubClient) -> None:
        """The sensor of this hub."""
        super().__init__(hub, "dialogue_state")

    @property
    def native_value(self) -> str | None:
        """The hub's dialogue state."""
        activity = self.hub.activity
        return activity if activity in DIALOGUE_STATES else None


class TranscriptSensor(DuplexHubEntity, SensorEntity):
    """What the hub last heard.

    Disabled by default: what people say would go into the recorder's history.
    """

    _attr_entity_registry_enabled_default = False
    _attr_entity_category = EntityCategory.DIAGNOSTIC

    def __init__(self, hub: HubClient) -> None:
        """The sensor of this hub."""
        super().__init__(hub, "last_transcript")

    @property
    def native_value(self) -> str | None:
        """The last final transcript (at most 255 characters)."""
        text = self.hub.last_transcript
        return text[:255] if text else None


class LatencySensor(DuplexHubEntity, SensorEntity):
    """From the end of the user's speech to the hub's first audio, last turn."""

    _attr_entity_category = EntityCategory.DIAGNOSTIC
    _attr_device_class = SensorDeviceClass.DURATION
    _attr_state_class = SensorStateClass.MEASUREMENT
    _attr_native_unit_of_measurement = UnitOfTime.MILLISECONDS

    def __init__(self, hub: HubClient) -> None:
        """The sensor of this hub."""
        super().__init__(hub, "last_turn_latency")

    @property
    def native_value(self) -> int | None:
        """Milliseconds."""
        return self.hub.last_latency_ms
