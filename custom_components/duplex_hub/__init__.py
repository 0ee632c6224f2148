"""Duplex Hub: full-duplex voice hubs in Home Assistant, over MQTT."""

from __future__ import annotations

import logging

import voluptuous as vol
from homeassistant.components import mqtt
from homeassistant.config_entries import ConfigEntry, ConfigEntryState
from homeassistant.const import Platform
from homeassistant.core import HomeAssistant, ServiceCall
from homeassistant.exceptions import ConfigEntryNotReady, HomeAssistantError, ServiceValidationError
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers.typing import ConfigType

from .const import (
    CONF_ALLOWED_INTENTS,
    CONF_BASE_TOPIC,
    CONF_HUB_ID,
    CONF_LANGUAGE,
    CONF_NAME,
    CONF_PREFER_LOCAL,
    DOMAIN,
)
from .hub import HubClient
from .protocol import CATALOG, CONTROLLER, Topics

_LOGGER = logging.getLogger(__name__)
PLATFORMS = [Platform.CONVERSATION, Platform.SENSOR, Platform.SWITCH]
CONFIG_SCHEMA = cv.config_entry_only_config_schema(DOMAIN)
SERVICE_SAY = "say"
ATTR_TEXT = "text"
ATTR_INTERRUPT = "interrupt"
ATTR_CONFIG_ENTRY_ID = "config_entry_id"
SAY_SCHEMA = vol.Schema({
    vol.Required(ATTR_TEXT): vol.All(cv.string, vol.Length(min=1, max=2000)),
    vol.Optional(ATTR_INTERRUPT, default=False): cv.boolean,
    vol.Optional(ATTR_CONFIG_ENTRY_ID): cv.string,
})

type DuplexHubConfigEntry = ConfigEntry[HubClient]


async def async_setup(hass: HomeAssistant, config: ConfigType) -> bool:
    """Register the ``duplex_hub.say`` action."""

    async def say(call: ServiceCall) -> None:
        entries: list[DuplexHubConfigEntry] = [
            e for e in hass.config_entries.async_entries(DOMAIN) if e.state is ConfigEntryState.LOADED]
        wanted = call.data.get(ATTR_CONFIG_ENTRY_ID)
        if wanted is not None:
            entries = [e for e in entries if e.entry_id == wanted]
        if not entries:
            raise ServiceValidationError(translation_domain=DOMAIN, translation_key="no_hub")
        for entry in entries:
            await entry.runtime_data.async_say(call.data[ATTR_TEXT], interrupt=call.data[ATTR_INTERRUPT])

    hass.services.async_register(DOMAIN, SERVICE_SAY, say, schema=SAY_SCHEMA)
    return True


async def async_setup_entry(hass: HomeAssistant, entry: DuplexHubConfigEntry) -> bool:
    """Connect to the hub through Home Assistant's MQTT."""
    if not await mqtt.async_wait_for_mqtt_client(hass):
        raise ConfigEntryNotReady(translation_domain=DOMAIN, translation_key="mqtt_unavailable")
    client = HubClient(
        hass,
        hub_id=entry.data[CONF_HUB_ID],
        base_topic=entry.data[CONF_BASE_TOPIC],
        name=entry.data.get(CONF_NAME) or entry.title,
        language=entry.options.get(CONF_LANGUAGE) or hass.config.language,
        allowed_intents=entry.options.get(CONF_ALLOWED_INTENTS),
        prefer_local=entry.options.get(CONF_PREFER_LOCAL, False),
    )
    client.options = dict(entry.options)
    await client.async_start()  # ConfigEntryNotReady (retried) without the broker; nothing left behind
    entry.runtime_data = client
    try:
        await hass.config_entries.async_forward_entry_setups(entry, PLATFORMS)
    except Exception:
        await client.async_stop()
        raise
    return True


async def async_unload_entry(hass: HomeAssistant, entry: DuplexHubConfigEntry) -> bool:
    """Unsubscribe; the hub goes back to acting on its own (succeeds with the broker down too)."""
    unloaded = await hass.config_entries.async_unload_platforms(entry, PLATFORMS)
    if unloaded:
        await entry.runtime_data.async_stop()
    return unloaded


async def async_remove_entry(hass: HomeAssistant, entry: DuplexHubConfigEntry) -> None:
    """Clear what we left retained for the hub (controller and catalog)."""
    topics = Topics(entry.data[CONF_BASE_TOPIC])
    try:
        for relative in (CONTROLLER, CATALOG):
            await mqtt.async_publish(hass, topics(relative), "", qos=1, retain=True)
    except HomeAssistantError as err:  # MQTT is gone too: the retained messages stay
        _LOGGER.warning("could not clear the retained messages of %s: %s", topics.base, err)
