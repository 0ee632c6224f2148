"""Set-up and unload with the broker down, one client after a reload, 2026 registry aliases (real HA, real broker)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import attr
import pytest
from homeassistant.components import mqtt
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.common import MockConfigEntry, async_fire_time_changed

from custom_components.duplex_hub import hub as hub_module
from custom_components.duplex_hub import protocol as p

from ...mosquitto import Mosquitto
from ..conftest import BASE, collect, hub_entry, publish, wait_until


async def _broker_gone(hass: HomeAssistant, broker: Mosquitto) -> None:
    broker.stop()
    await wait_until(hass, lambda: not mqtt.is_connected(hass), 20, "MQTT disconnected")


async def _broker_back(hass: HomeAssistant, broker: Mosquitto) -> None:
    broker.start()
    for _ in range(60):  # Home Assistant's client reconnects on its own schedule
        async_fire_time_changed(hass, dt_util.utcnow() + timedelta(seconds=10))
        await hass.async_block_till_done()
        if mqtt.is_connected(hass):
            return
        await asyncio.sleep(0.25)
    raise AssertionError("MQTT did not reconnect")


async def test_broker_down_at_setup_is_retried_and_leaves_nothing_behind(
        hass: HomeAssistant, home: dict[str, str], broker: Mosquitto, mqtt_entry: MockConfigEntry) -> None:
    await _broker_gone(hass, broker)
    try:
        entry = hub_entry(hass)
        assert not await hass.config_entries.async_setup(entry.entry_id)
        assert entry.state is ConfigEntryState.SETUP_RETRY
        assert "not reachable" in (entry.reason or "")
    finally:
        await _broker_back(hass, broker)
    controllers = await collect(hass, f"{BASE}/controller")
    async_fire_time_changed(hass, dt_util.utcnow() + timedelta(minutes=2))  # the retry
    await wait_until(hass, lambda: entry.state is ConfigEntryState.LOADED, 30, "loaded after the retry")
    await wait_until(hass, lambda: controllers.json(), 10, "the controller announced")


async def test_unload_with_the_broker_down_succeeds(hass: HomeAssistant, home: dict[str, str],
                                                    broker: Mosquitto) -> None:
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    await _broker_gone(hass, broker)
    try:
        assert await hass.config_entries.async_unload(entry.entry_id)
        assert entry.state is ConfigEntryState.NOT_LOADED
    finally:
        await _broker_back(hass, broker)


async def test_a_reload_leaves_exactly_one_client(hass: HomeAssistant, home: dict[str, str]) -> None:
    """A toggle executed twice would cancel itself: after a reload the hub's intent runs once."""
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    results = await collect(hass, f"{BASE}/intent/result")
    message = p.IntentMessage(id="r1", text="toggle the kitchen light", source="grammar",
                              intent=p.IntentData(name="HassToggle", slots={"name": "Kitchen Light"}))
    await publish(hass, f"{BASE}/intent", message.to_json())
    await wait_until(hass, lambda: results.json(), 10, "a result")
    await hass.async_block_till_done()
    assert len(results.json()) == 1
    assert hass.states.get(home["kitchen"]).state == "on"


async def test_aliases_with_a_computed_name_marker(hass: HomeAssistant, home: dict[str, str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Home Assistant 2026.4: an alias may be a marker for the computed name, not text."""
    marker = object()
    real_get = er.EntityRegistry.async_get

    def with_marker(self: er.EntityRegistry, entity_id: str) -> Any:
        entry = real_get(self, entity_id)
        if entry is not None and entity_id == home["kitchen"]:
            return attr.evolve(entry, aliases={"ceiling light", marker})
        return entry

    monkeypatch.setattr(er.EntityRegistry, "async_get", with_marker)
    catalog = hub_module.build_catalog(hass)
    kitchen = next(e for e in catalog if e["entity_id"] == home["kitchen"])
    assert kitchen["aliases"] == ["ceiling light"]
    # and the 2026.4 helper, where it exists, resolves them
    monkeypatch.setattr(er, "async_get_entity_aliases", lambda hass, entry: ["Kitchen Light", "ceiling light"],
                        raising=False)
    kitchen = next(e for e in hub_module.build_catalog(hass) if e["entity_id"] == home["kitchen"])
    assert kitchen["aliases"] == ["Kitchen Light", "ceiling light"]


async def test_a_state_change_sends_only_that_state(hass: HomeAssistant, home: dict[str, str]) -> None:
    entry = hub_entry(hass)
    catalogs, states = await collect(hass, f"{BASE}/catalog"), await collect(hass, f"{BASE}/catalog/states")
    assert await hass.config_entries.async_setup(entry.entry_id)
    await wait_until(hass, lambda: catalogs.json(), 10, "the catalog")
    n = len(catalogs.messages)
    await hass.services.async_call("light", "turn_on", {"entity_id": home["kitchen"]}, blocking=True)
    await wait_until(hass, lambda: states.json(), 10, "a states message")
    message = p.CatalogStates.from_dict(states.json()[-1])
    assert [(e.entity_id, e.state) for e in message.entities] == [(home["kitchen"], "on")]
    assert len(catalogs.messages) == n  # the whole catalog is not sent again


async def test_no_mqtt_client_at_setup_is_retried(hass: HomeAssistant, home: dict[str, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_client(hass: HomeAssistant) -> bool:
        return False

    monkeypatch.setattr(mqtt, "async_wait_for_mqtt_client", no_client)
    entry = hub_entry(hass)
    assert not await hass.config_entries.async_setup(entry.entry_id)
    assert entry.state is ConfigEntryState.SETUP_RETRY


async def test_a_platform_that_fails_stops_the_client(hass: HomeAssistant, home: dict[str, str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    stopped: list[bool] = []
    real_stop = hub_module.HubClient.async_stop

    async def stop(self: hub_module.HubClient) -> None:
        stopped.append(True)
        await real_stop(self)

    async def broken(entry: Any, platforms: Any) -> None:
        raise RuntimeError("a platform failed")

    monkeypatch.setattr(hub_module.HubClient, "async_stop", stop)
    monkeypatch.setattr(hass.config_entries, "async_forward_entry_setups", broken)
    entry = hub_entry(hass)
    assert not await hass.config_entries.async_setup(entry.entry_id)
    assert entry.state is ConfigEntryState.SETUP_ERROR and stopped == [True]


async def test_removal_with_mqtt_failing_only_warns(hass: HomeAssistant, home: dict[str, str],
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()

    async def failing(*args: Any, **kwargs: Any) -> None:
        raise HomeAssistantError("MQTT is not connected")

    monkeypatch.setattr(mqtt, "async_publish", failing)
    assert (await hass.config_entries.async_remove(entry.entry_id))["require_restart"] is False
    assert "could not clear the retained messages" in caplog.text
