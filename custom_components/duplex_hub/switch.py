"""The hub's microphone mute switch (on = muted)."""

from __future__ import annotations

from typing import Any

from homeassistant.components.switch import SwitchEntity
from homeassistant.core import HomeAssistant
from homeassistant.helpers.entity_platform import AddEntitiesCallback

from . import DuplexHubConfigEntry
from .entity import DuplexHubEntity
from .hub import HubClient

PARALLEL_UPDATES = 0


async def async_setup_entry(hass: HomeAssistant, entry: DuplexHubConfigEntry,
                            async_add_entities: AddEntitiesCallback) -> None:
    """The mute switch of the entry's hub."""
    async_add_entities([MuteSwitch(entry.runtime_data)])


class MuteSwitch(DuplexHubEntity, SwitchEntity):
    """On while the microphone is muted; the state follows the hub's retained state."""

    def __init__(self, hub: HubClient) -> None:
        """The switch of this hub."""
        super().__init__(hub, "mute")

    @property
    def is_on(self) -> bool | None:
        """Muted, as the hub reports it."""
        return self.hub.muted

    async def async_turn_on(self, **kwargs: Any) -> None:
        """Mute."""
        await self.hub.async_set_muted(True)

    async def async_turn_off(self, **kwargs: Any) -> None:
        """Unmute."""
        await self.hub.async_set_muted(False)
