"""The say action without a hub, removal, intent errors, a bad announcement (real HA, real broker)."""

from __future__ import annotations

import pytest
from homeassistant import config_entries
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.exceptions import ServiceValidationError
from homeassistant.helpers import intent
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.duplex_hub import protocol as p
from custom_components.duplex_hub.const import CONF_HUB_ID, DOMAIN, EXECUTED_INTENTS
from custom_components.duplex_hub.intents import async_execute

from ..conftest import BASE, HUB_ID, collect, hub_entry, publish, wait_until


async def test_say_without_a_loaded_hub_is_a_translated_error(hass: HomeAssistant,
                                                             mqtt_entry: MockConfigEntry) -> None:
    assert await async_setup_component(hass, DOMAIN, {})
    with pytest.raises(ServiceValidationError) as err:
        await hass.services.async_call(DOMAIN, "say", {"text": "hello"}, blocking=True)
    assert err.value.translation_key == "no_hub"
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    with pytest.raises(ServiceValidationError):  # a loaded hub, but not the one asked for
        await hass.services.async_call(DOMAIN, "say", {"text": "hello", "config_entry_id": mqtt_entry.entry_id},
                                       blocking=True)


async def test_the_mute_switch_mutes(hass: HomeAssistant, home: dict[str, str]) -> None:
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    await publish(hass, f"{BASE}/availability", p.ONLINE, retain=True)  # the switch is available
    await wait_until(hass, lambda: entry.runtime_data.available, 10, "online")
    mutes = await collect(hass, f"{BASE}/mute")
    await hass.services.async_call("switch", "turn_on", {"entity_id": "switch.test_hub_microphone_mute"},
                                   blocking=True)
    await wait_until(hass, lambda: mutes.messages, 10, "mute")
    await publish(hass, f"{BASE}/availability", "", retain=True)


async def test_removing_the_entry_makes_the_hub_standalone(hass: HomeAssistant, home: dict[str, str]) -> None:
    controllers, catalogs = await collect(hass, f"{BASE}/controller"), await collect(hass, f"{BASE}/catalog")
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    await wait_until(hass, lambda: controllers.json() and catalogs.json(), 10, "controller and catalog")
    await hass.config_entries.async_remove(entry.entry_id)
    await hass.async_block_till_done()
    await wait_until(hass, lambda: controllers.messages[-1].payload == "" and catalogs.messages[-1].payload == "",
                     10, "the retained controller and catalog cleared")
    assert entry.state is ConfigEntryState.NOT_LOADED


async def test_intent_errors_are_spoken_not_raised(hass: HomeAssistant, home: dict[str, str]) -> None:
    async def run(intent_name: str, allowed: frozenset[str] = EXECUTED_INTENTS,
                  **slots: object) -> intent.IntentResponse:
        return await async_execute(hass, p.IntentData(name=intent_name, slots=slots), text="words",
                                   language="en", allowed=allowed)

    refused = await run("HassTurnOn", frozenset({"HassGetState"}), name="Kitchen Light")
    assert refused.error_code is intent.IntentResponseErrorCode.FAILED_TO_HANDLE
    assert hass.states.get(home["kitchen"]).state == "off"
    speeches = {}
    for key, slots in {"both": {"name": "Attic Fan", "area": "Kitchen"}, "name": {"name": "Attic Fan"},
                       "area": {"area": "Kitchen", "domain": "fan"}}.items():
        response = await run("HassTurnOn", **slots)
        assert response.error_code is intent.IntentResponseErrorCode.NO_VALID_TARGETS, key
        speeches[key] = response.speech["plain"]["speech"]
    assert speeches["both"] == "Sorry, I am not aware of any device called Attic Fan in the Kitchen"
    assert speeches["name"] == "Sorry, I am not aware of any device called Attic Fan"
    assert speeches["area"] == "Sorry, I am not aware of any such device in the Kitchen"
    unknown = await run("HassNoSuchIntent", frozenset({"HassNoSuchIntent"}))
    assert unknown.error_code is intent.IntentResponseErrorCode.NO_INTENT_MATCH
    bad = await run("HassLightSet", name="Kitchen Light", brightness="bright")  # invalid slot value
    assert bad.error_code is intent.IntentResponseErrorCode.FAILED_TO_HANDLE
    assert bad.speech["plain"]["speech"] == "Sorry, that did not work"
    assert hass.states.get(home["kitchen"]).state == "off"


async def test_manual_step_ignores_a_bad_announcement_of_an_online_hub(hass: HomeAssistant,
                                                                       mqtt_entry: MockConfigEntry) -> None:
    await publish(hass, f"duplex_hub/discovery/{HUB_ID}", "{not json", retain=True)
    await publish(hass, f"{BASE}/availability", p.ONLINE, retain=True)
    result = await hass.config_entries.flow.async_init(DOMAIN, context={"source": config_entries.SOURCE_USER})
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_HUB_ID: HUB_ID})
    assert result["type"] is FlowResultType.CREATE_ENTRY, result
    assert result["title"] == HUB_ID  # no name from the broken announcement
    await publish(hass, f"{BASE}/availability", "", retain=True)
    await publish(hass, f"duplex_hub/discovery/{HUB_ID}", "", retain=True)
