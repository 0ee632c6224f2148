"""Config flow: a hub found by MQTT discovery, or named by hand and checked online."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Final, cast

import voluptuous as vol
from homeassistant import config_entries
from homeassistant.components import mqtt
from homeassistant.config_entries import ConfigFlow, ConfigFlowResult, OptionsFlow
from homeassistant.core import HomeAssistant, callback
from homeassistant.helpers import selector
from homeassistant.helpers.service_info.mqtt import MqttServiceInfo

from .const import (
    AVAILABILITY_TIMEOUT_S,
    CONF_ALLOWED_INTENTS,
    CONF_BASE_TOPIC,
    CONF_HUB_ID,
    CONF_LANGUAGE,
    CONF_NAME,
    CONF_PREFER_LOCAL,
    DOMAIN,
    EXECUTED_INTENTS,
)
from .protocol import ONLINE, BadPayload, Discovery, Topics, discovery_topic

_LOGGER = logging.getLogger(__name__)
ANNOUNCEMENT_GRACE_S: Final = 0.5  # the announcement may trail the availability
HUB_ID: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def parse_target(value: str) -> tuple[str, str] | None:
    """``kitchen`` or ``duplex_hub/kitchen`` -> (hub id, base topic); None when invalid."""
    value = value.strip().strip("/")
    if "/" in value:
        hub_id = value.rsplit("/", 1)[1]
        base = value
    else:
        hub_id, base = value, Topics.for_hub(value).base
    if not HUB_ID.match(hub_id) or any(c in base for c in "+#") or " " in base:
        return None
    return hub_id, base


async def async_probe(hass: HomeAssistant, hub_id: str, base: str) -> tuple[str | None, Discovery | None]:
    """The hub's retained availability (None when there is none) and its announcement."""
    got: dict[str, Any] = {}
    arrived, announced = asyncio.Event(), asyncio.Event()

    @callback
    def on_availability(msg: mqtt.ReceiveMessage) -> None:
        got["availability"] = msg.payload
        arrived.set()

    @callback
    def on_discovery(msg: mqtt.ReceiveMessage) -> None:
        try:
            got["discovery"] = Discovery.from_json(msg.payload)
        except BadPayload:
            return
        announced.set()

    unsubs = [await mqtt.async_subscribe(hass, discovery_topic(hub_id), on_discovery),
              await mqtt.async_subscribe(hass, Topics(base).availability, on_availability)]
    try:
        async with asyncio.timeout(AVAILABILITY_TIMEOUT_S):
            await arrived.wait()
        async with asyncio.timeout(ANNOUNCEMENT_GRACE_S):  # retained, sent just before or after
            await announced.wait()
    except TimeoutError:
        pass
    finally:
        for unsub in unsubs:
            unsub()
    return got.get("availability"), got.get("discovery")


async def async_check_online(hass: HomeAssistant, hub_id: str, base: str) -> tuple[str | None, Discovery | None]:
    """The form error (``hub_not_found`` / ``hub_offline``) or None, and the announcement."""
    availability, info = await async_probe(hass, hub_id, base)
    if availability is None:
        return "hub_not_found", info
    return (None if availability == ONLINE else "hub_offline"), info


class DuplexHubConfigFlow(ConfigFlow, domain=DOMAIN):
    """Add a hub: discovered over MQTT (confirm) or by hand (checked online)."""

    VERSION = 1

    def __init__(self) -> None:
        """Nothing found yet."""
        self._hub: dict[str, Any] = {}

    @staticmethod
    @callback
    def async_get_options_flow(config_entry: Any) -> DuplexHubOptionsFlow:
        """Language, local handling, allowed intents."""
        return DuplexHubOptionsFlow()

    async def async_step_mqtt(self, discovery_info: MqttServiceInfo) -> ConfigFlowResult:
        """A hub's retained announcement on ``duplex_hub/discovery/<id>``."""
        try:
            info = Discovery.from_json(discovery_info.payload)
        except BadPayload:
            return self.async_abort(reason="invalid_discovery_info")
        target = parse_target(info.base_topic or info.id)
        if target is None or target[0] != info.id:
            return self.async_abort(reason="invalid_discovery_info")
        hub_id, base = target
        await self.async_set_unique_id(hub_id)
        known = self.hass.config_entries.async_entry_for_domain_unique_id(DOMAIN, hub_id)
        self._abort_if_unique_id_configured(  # reload only when the hub moved to another topic
            updates={CONF_BASE_TOPIC: base},
            reload_on_update=known is not None and known.data.get(CONF_BASE_TOPIC) != base)
        name = info.name or hub_id
        self._hub = {CONF_HUB_ID: hub_id, CONF_BASE_TOPIC: base, CONF_NAME: name}
        self.context["title_placeholders"] = {"name": name}
        return await self.async_step_confirm()

    async def async_step_confirm(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """Confirm the discovered hub."""
        if user_input is not None:
            return self.async_create_entry(title=self._hub[CONF_NAME], data=self._hub)
        self._set_confirm_only()
        return self.async_show_form(step_id="confirm", description_placeholders={
            "name": self._hub[CONF_NAME], "base_topic": self._hub[CONF_BASE_TOPIC]})

    async def async_step_user(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """A hub id or base topic, checked online through its availability topic."""
        if not await mqtt.async_wait_for_mqtt_client(self.hass):
            return self.async_abort(reason="mqtt_not_connected")
        errors: dict[str, str] = {}
        if user_input is not None:
            found = await self._online_target(user_input[CONF_HUB_ID], CONF_HUB_ID, errors, same_hub=False)
            if found is not None:
                hub_id, base, info = found
                name = (info.name if info else "") or hub_id
                return self.async_create_entry(title=name, data={
                    CONF_HUB_ID: hub_id, CONF_BASE_TOPIC: base, CONF_NAME: name})
        return self.async_show_form(
            step_id="user", errors=errors,
            data_schema=self.add_suggested_values_to_schema(
                vol.Schema({vol.Required(CONF_HUB_ID): str}), user_input or {}))

    async def _online_target(self, raw: str, key: str, errors: dict[str, str], *,
                             same_hub: bool) -> tuple[str, str, Discovery | None] | None:
        """The hub a typed id or topic names, once it answers; None with ``errors`` filled.

        ``same_hub``: reconfiguring, so it must be the entry's hub; otherwise a new one.
        """
        target = parse_target(raw)
        if target is None:
            errors[key] = "invalid_hub_id"
            return None
        hub_id, base = target
        await self.async_set_unique_id(hub_id)
        if same_hub:
            self._abort_if_unique_id_mismatch(reason="wrong_hub")
        else:
            self._abort_if_unique_id_configured()
        error, info = await async_check_online(self.hass, hub_id, base)
        if error:
            errors["base"] = error
            return None
        return hub_id, base, info

    async def async_step_reconfigure(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """Change the name or the base topic of the same hub."""
        entry = self._get_reconfigure_entry()
        errors: dict[str, str] = {}
        if user_input is not None:
            found = await self._online_target(user_input[CONF_BASE_TOPIC], CONF_BASE_TOPIC, errors, same_hub=True)
            if found is not None:
                hub_id, base, _info = found
                name = user_input.get(CONF_NAME) or entry.data.get(CONF_NAME) or hub_id
                return self.async_update_reload_and_abort(
                    entry, title=name, data_updates={CONF_BASE_TOPIC: base, CONF_NAME: name})
        schema = vol.Schema({vol.Required(CONF_BASE_TOPIC): str, vol.Optional(CONF_NAME): str})
        return self.async_show_form(
            step_id="reconfigure", errors=errors,
            data_schema=self.add_suggested_values_to_schema(schema, user_input or {
                CONF_BASE_TOPIC: entry.data[CONF_BASE_TOPIC], CONF_NAME: entry.data.get(CONF_NAME, "")}))


# Home Assistant 2025.8 and later reload an entry after its options flow (the update-listener
# pattern is deprecated from 2026.6); before it, the flow schedules the reload itself.
_OptionsFlowBase: type[OptionsFlow] = getattr(config_entries, "OptionsFlowWithReload", OptionsFlow)
_RELOADS_ITSELF = _OptionsFlowBase is not OptionsFlow


class DuplexHubOptionsFlow(_OptionsFlowBase):  # type: ignore[valid-type,misc]
    """Language, whether Home Assistant's own sentences go first, which intents may run."""

    async def async_step_init(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """One form."""
        errors: dict[str, str] = {}
        if user_input is not None:
            if not user_input.get(CONF_ALLOWED_INTENTS):
                errors[CONF_ALLOWED_INTENTS] = "no_intents"
            else:
                if not _RELOADS_ITSELF and dict(user_input) != dict(self.config_entry.options):
                    self.hass.config_entries.async_schedule_reload(self.config_entry.entry_id)
                return cast(ConfigFlowResult, self.async_create_entry(data=user_input))
        options = self.config_entry.options
        schema = vol.Schema({
            vol.Required(CONF_LANGUAGE, default=options.get(CONF_LANGUAGE, self.hass.config.language)):
                selector.LanguageSelector(),
            vol.Required(CONF_PREFER_LOCAL, default=options.get(CONF_PREFER_LOCAL, False)):
                selector.BooleanSelector(),
            vol.Required(CONF_ALLOWED_INTENTS,
                         default=options.get(CONF_ALLOWED_INTENTS, list(EXECUTED_INTENTS))):
                selector.SelectSelector(selector.SelectSelectorConfig(
                    options=list(EXECUTED_INTENTS), multiple=True,
                    mode=selector.SelectSelectorMode.LIST)),
        })
        return cast(ConfigFlowResult, self.async_show_form(step_id="init", data_schema=schema, errors=errors))
