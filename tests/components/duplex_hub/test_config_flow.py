"""Every config flow step, through Home Assistant's real MQTT and a real broker."""

from __future__ import annotations

import json

import pytest
from homeassistant import config_entries
from homeassistant.core import HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers.service_info.mqtt import MqttServiceInfo
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.duplex_hub import config_flow
from custom_components.duplex_hub.const import (
    CONF_ALLOWED_INTENTS,
    CONF_BASE_TOPIC,
    CONF_HUB_ID,
    CONF_LANGUAGE,
    CONF_NAME,
    CONF_PREFER_LOCAL,
    DOMAIN,
)

from ..conftest import BASE, HUB_ID, hub_entry, publish, wait_until

ANNOUNCEMENT = {"id": HUB_ID, "name": "Test Hub", "version": "0.1.0", "protocol": 1,
                "base_topic": BASE, "site": "kitchen", "availability_topic": f"{BASE}/availability",
                "language": "en", "capabilities": ["intents"]}


@pytest.fixture(autouse=True)
def quick_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wait 2 s (not 5) for an availability that never comes."""
    monkeypatch.setattr(config_flow, "AVAILABILITY_TIMEOUT_S", 2.0)


@pytest.fixture(autouse=True)
def no_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flows only: an entry they create is not set up."""
    async def ok(*_a: object) -> bool:
        return True
    monkeypatch.setattr("custom_components.duplex_hub.async_setup_entry", ok)
    monkeypatch.setattr("custom_components.duplex_hub.async_unload_entry", ok)


def _info(payload: str) -> MqttServiceInfo:
    return MqttServiceInfo(topic=f"duplex_hub/discovery/{HUB_ID}", payload=payload, qos=1, retain=True,
                           subscribed_topic="duplex_hub/discovery/#", timestamp=0.0)


async def test_discovery_through_the_broker_then_confirm(hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> None:
    await publish(hass, f"duplex_hub/discovery/{HUB_ID}", ANNOUNCEMENT, retain=True)
    flows: list = []

    def found() -> bool:
        flows[:] = hass.config_entries.flow.async_progress_by_handler(DOMAIN)
        return bool(flows)
    await wait_until(hass, found, 10, "a discovery flow")
    flow = flows[0]
    assert flow["context"]["source"] == config_entries.SOURCE_MQTT and flow["step_id"] == "confirm"
    assert flow["context"]["title_placeholders"] == {"name": "Test Hub"}
    result = await hass.config_entries.flow.async_configure(flow["flow_id"], {})
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["title"] == "Test Hub"
    assert result["data"] == {CONF_HUB_ID: HUB_ID, CONF_BASE_TOPIC: BASE, CONF_NAME: "Test Hub"}
    assert result["result"].unique_id == HUB_ID

    # the same hub again: refused
    again = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_MQTT}, data=_info(json.dumps(ANNOUNCEMENT)))
    assert again["type"] is FlowResultType.ABORT and again["reason"] == "already_configured"


@pytest.mark.parametrize("payload", ["", "not json", "[1]", json.dumps({"name": "no id"}),
                                     json.dumps({"id": "a b", "base_topic": "duplex_hub/a b"}),
                                     json.dumps({"id": "x", "base_topic": "duplex_hub/y"})])
async def test_discovery_with_a_bad_announcement_aborts(hass: HomeAssistant, mqtt_entry: MockConfigEntry,
                                                        payload: str) -> None:
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_MQTT}, data=_info(payload))
    assert result["type"] is FlowResultType.ABORT and result["reason"] == "invalid_discovery_info"


async def test_manual_step_checks_the_hub_is_online(hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> None:
    result = await hass.config_entries.flow.async_init(DOMAIN, context={"source": config_entries.SOURCE_USER})
    assert result["type"] is FlowResultType.FORM and result["step_id"] == "user"

    # not a valid id
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_HUB_ID: "bad id!"})
    assert result["errors"] == {CONF_HUB_ID: "invalid_hub_id"}
    # nobody there
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_HUB_ID: HUB_ID})
    assert result["type"] is FlowResultType.FORM and result["errors"] == {"base": "hub_not_found"}
    # there, but offline (its last will)
    await publish(hass, f"{BASE}/availability", "offline", retain=True)
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_HUB_ID: BASE})
    assert result["errors"] == {"base": "hub_offline"}
    # online: created, named by its announcement
    await publish(hass, f"{BASE}/availability", "online", retain=True)
    await publish(hass, f"duplex_hub/discovery/{HUB_ID}", ANNOUNCEMENT, retain=True)
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_HUB_ID: BASE})
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["title"] == "Test Hub" and result["data"][CONF_BASE_TOPIC] == BASE

    # a second entry for the same hub is refused
    result = await hass.config_entries.flow.async_init(DOMAIN, context={"source": config_entries.SOURCE_USER})
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_HUB_ID: HUB_ID})
    assert result["type"] is FlowResultType.ABORT and result["reason"] == "already_configured"


async def test_manual_step_without_mqtt_aborts(hass: HomeAssistant) -> None:
    assert await async_setup_component(hass, "homeassistant", {})
    result = await hass.config_entries.flow.async_init(DOMAIN, context={"source": config_entries.SOURCE_USER})
    assert result["type"] is FlowResultType.ABORT and result["reason"] == "mqtt_not_connected"


async def test_reconfigure(hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> None:
    entry = hub_entry(hass)
    result = await entry.start_reconfigure_flow(hass)
    assert result["type"] is FlowResultType.FORM and result["step_id"] == "reconfigure"
    # another hub's topic: refused
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_TOPIC: "duplex_hub/other_hub"})
    assert result["type"] is FlowResultType.ABORT and result["reason"] == "wrong_hub"

    result = await entry.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_TOPIC: BASE, CONF_NAME: "Kitchen Hub"})
    assert result["errors"] == {"base": "hub_not_found"}
    await publish(hass, f"{BASE}/availability", "online", retain=True)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_TOPIC: BASE, CONF_NAME: "Kitchen Hub"})
    assert result["type"] is FlowResultType.ABORT and result["reason"] == "reconfigure_successful"
    assert entry.title == "Kitchen Hub" and entry.data[CONF_NAME] == "Kitchen Hub"


async def test_options(hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> None:
    entry = hub_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert result["type"] is FlowResultType.FORM and result["step_id"] == "init"
    result = await hass.config_entries.options.async_configure(result["flow_id"], {
        CONF_LANGUAGE: "en", CONF_PREFER_LOCAL: True, CONF_ALLOWED_INTENTS: []})
    assert result["errors"] == {CONF_ALLOWED_INTENTS: "no_intents"}
    result = await hass.config_entries.options.async_configure(result["flow_id"], {
        CONF_LANGUAGE: "en", CONF_PREFER_LOCAL: True, CONF_ALLOWED_INTENTS: ["HassGetState"]})
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options == {CONF_LANGUAGE: "en", CONF_PREFER_LOCAL: True,
                             CONF_ALLOWED_INTENTS: ["HassGetState"]}


async def test_reconfigure_refuses_a_bad_topic_and_an_offline_hub(hass: HomeAssistant,
                                                                   mqtt_entry: MockConfigEntry) -> None:
    entry = hub_entry(hass)
    result = await entry.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_TOPIC: "duplex_hub/#", CONF_NAME: "x"})
    assert result["errors"] == {CONF_BASE_TOPIC: "invalid_hub_id"}
    await publish(hass, f"{BASE}/availability", "offline", retain=True)
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {CONF_BASE_TOPIC: BASE})
    assert result["errors"] == {"base": "hub_offline"}


async def test_a_hub_that_moved_updates_its_entry(hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> None:
    entry = hub_entry(hass)
    moved = {**ANNOUNCEMENT, "base_topic": f"house/{HUB_ID}"}
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_MQTT}, data=_info(json.dumps(moved)))
    assert result["type"] is FlowResultType.ABORT and result["reason"] == "already_configured"
    assert entry.data[CONF_BASE_TOPIC] == f"house/{HUB_ID}"


async def test_a_second_discovery_of_the_same_hub_is_already_in_progress(
        hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> None:
    first = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_MQTT}, data=_info(json.dumps(ANNOUNCEMENT)))
    assert first["type"] is FlowResultType.FORM and first["step_id"] == "confirm"
    second = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_MQTT}, data=_info(json.dumps(ANNOUNCEMENT)))
    assert second["type"] is FlowResultType.ABORT and second["reason"] == "already_in_progress"


async def test_the_options_flow_reloads_the_entry(hass: HomeAssistant, mqtt_entry: MockConfigEntry,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    entry = hub_entry(hass)
    reloads: list[str] = []
    monkeypatch.setattr(hass.config_entries, "async_schedule_reload", reloads.append)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    await hass.config_entries.options.async_configure(result["flow_id"], {
        CONF_LANGUAGE: "en", CONF_PREFER_LOCAL: False, CONF_ALLOWED_INTENTS: ["HassTurnOn"]})
    # one reload: Home Assistant's OptionsFlowWithReload (2025.8+) or the flow itself (before)
    assert reloads == [entry.entry_id]
