"""The base of the hub's entities: one device per hub, available while the hub is online."""

from __future__ import annotations

from homeassistant.helpers.device_registry import DeviceInfo
from homeassistant.helpers.entity import Entity

from .const import DOMAIN
from .hub import HubClient


class DuplexHubEntity(Entity):
    """An entity of one hub, updated by push from its :class:`HubClient`."""

    _attr_has_entity_name = True
    _attr_should_poll = False

    def __init__(self, hub: HubClient, key: str) -> None:
        """An entity named by its translation key ``key``."""
        self.hub = hub
        self._attr_unique_id = f"{hub.hub_id}_{key}"
        self._attr_translation_key = key
        # the software version follows the hub's announcement (hub.py); a hub's site is not an area
        self._attr_device_info = DeviceInfo(
            identifiers={(DOMAIN, hub.hub_id)}, name=hub.name, manufacturer="Duplex Hub",
            model="Duplex Hub", sw_version=hub.info.version if hub.info else None)

    @property
    def available(self) -> bool:
        """While the hub is online (its last will says offline)."""
        return self.hub.available

    async def async_added_to_hass(self) -> None:
        """Follow the hub."""
        self.async_on_remove(self.hub.async_add_listener(self.async_write_ha_state))
