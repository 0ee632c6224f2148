"""Set-up, entities, catalog, voice intents, the say action and diagnostics (real HA, real broker)."""

from __future__ import annotations

import json

from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.config_entries import ConfigEntryState
from homeassistant.core import HomeAssistant
from homeassistant.helpers import entity_registry as er
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.duplex_hub import diagnostics
from custom_components.duplex_hub import protocol as p
from custom_components.duplex_hub.const import DOMAIN

from ..conftest import BASE, collect, hub_entry, publish, wait_until


async def _setup(hass: HomeAssistant, **options: object) -> MockConfigEntry:
    entry = hub_entry(hass, **options)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED
    return entry


async def test_catalog_controller_and_republish(hass: HomeAssistant, home: dict[str, str]) -> None:
    catalogs = await collect(hass, f"{BASE}/catalog")
    controllers = await collect(hass, f"{BASE}/controller")
    entry = await _setup(hass)
    await wait_until(hass, lambda: catalogs.json(), 10, "the catalog")
    entities = catalogs.json()[-1]["entities"]
    assert [e["entity_id"] for e in entities] == ["light.kitchen_light"]  # only what is exposed
    kitchen = entities[0]
    assert kitchen["name"] == "Kitchen Light" and kitchen["area"] == "Kitchen"
    assert kitchen["aliases"] == ["ceiling light"] and kitchen["state"] == "off"
    await wait_until(hass, lambda: controllers.json(), 10, "the controller")
    assert controllers.json()[-1] == {"name": "Home Assistant", "timeout_s": 5.0}

    # a state change: only the new state goes (debounced)
    states = await collect(hass, f"{BASE}/catalog/states")
    await hass.services.async_call("light", "turn_on", {"entity_id": home["kitchen"]}, blocking=True)
    await wait_until(hass, lambda: states.json(), 10, "the new state")
    assert states.json()[-1]["entities"][0]["state"] == "on"
    # exposure: the porch light joins
    async_expose_entity(hass, "conversation", home["porch"], True)
    await wait_until(hass, lambda: len(catalogs.json()[-1]["entities"]) == 2, 10, "the porch light")
    # the hub's own entities stay out (a muted hub could not hear "unmute")
    assert not [e for e in catalogs.json()[-1]["entities"] if "test_hub" in e["entity_id"]]

    # unload: the hub is standalone again
    assert await hass.config_entries.async_unload(entry.entry_id)
    await wait_until(hass, lambda: controllers.messages[-1].payload == "", 10, "the controller cleared")


async def test_the_transcript_sensor_is_disabled_by_default(hass: HomeAssistant, home: dict[str, str]) -> None:
    """What people say must not go into the recorder's history unless the user wants it."""
    await _setup(hass)
    entity = er.async_get(hass).async_get("sensor.test_hub_last_transcript")
    assert entity is not None and entity.disabled_by is er.RegistryEntryDisabler.INTEGRATION
    assert hass.states.get("sensor.test_hub_last_transcript") is None


async def test_entities_follow_the_hub(hass: HomeAssistant, home: dict[str, str]) -> None:
    er.async_get(hass).async_get_or_create(  # the user enabled the transcript sensor
        "sensor", DOMAIN, "test_hub_last_transcript", suggested_object_id="test_hub_last_transcript")
    entry = await _setup(hass)
    state_id, transcript_id = "sensor.test_hub_dialogue_state", "sensor.test_hub_last_transcript"
    latency_id, mute_id = "sensor.test_hub_last_turn_latency", "switch.test_hub_microphone_mute"
    assert hass.states.get(state_id).state == "unavailable"
    await publish(hass, f"{BASE}/availability", "online", retain=True)
    await publish(hass, f"{BASE}/state", {"state": "speaking", "muted": True, "volume": 1.0}, retain=True)
    await wait_until(hass, lambda: hass.states.get(state_id).state == "speaking", 10, "speaking")
    assert hass.states.get(mute_id).state == "on"
    for event in (p.EndOfTurn(t_ms=1090, silence_ms=90), p.Transcript(t_ms=1090, text="hello hub"),
                  p.TtsStart(t_ms=1320, utterance=1), p.SpeechEnd(t_ms=1330, offset_ms=1000)):
        await publish(hass, f"{BASE}/event/{event.type}", event.to_json())
    await wait_until(hass, lambda: hass.states.get(latency_id).state == "320", 10, "the latency")
    assert hass.states.get(transcript_id).state == "hello hub"
    assert hass.states.get(latency_id).attributes["unit_of_measurement"] == "ms"

    # the switch and the say action reach the hub
    unmutes, says = await collect(hass, f"{BASE}/unmute"), await collect(hass, f"{BASE}/say")
    await hass.services.async_call("switch", "turn_off", {"entity_id": mute_id}, blocking=True)
    await hass.services.async_call(DOMAIN, "say", {"text": "Dinner is ready.", "interrupt": True}, blocking=True)
    await wait_until(hass, lambda: unmutes.messages and says.messages, 10, "unmute and say")
    assert [p.Say.from_dict(d) for d in says.json()] == [p.Say(text="Dinner is ready.", interrupt=True)]

    # malformed payloads are logged and dropped
    hub = entry.runtime_data
    await publish(hass, f"{BASE}/state", "{nope")
    await publish(hass, f"{BASE}/intent", {"id": 5})
    await publish(hass, f"{BASE}/event/transcript", "[]")
    good = {"id": "i9", "intent": {"name": "HassTurnOn", "slots": {}, "targets": []}}
    bad_intents = [  # each breaks one rule of the vendored protocol
        {**good, "id": ""}, {**good, "id": "x" * 300},
        {**good, "confidence": 1.5}, {**good, "confidence": "high"}, {**good, "confidence": True},
        {**good, "text": ["a"]}, {**good, "intent": {**good["intent"], "slots": []}},
        {**good, "intent": {**good["intent"], "targets": "light.x"}},
        {**good, "intent": {**good["intent"], "targets": ["x" * 300]}},
        {**good, "intent": {**good["intent"], "name": "x" * 101}},
        {**good, "intent": "HassTurnOn"}, {**good, "timestamps": {"intent_ms": 1.5}},
        {**good, "timestamps": {"intent_ms": float("inf")}}, [good], "not json",
    ]
    for payload in bad_intents:
        await publish(hass, f"{BASE}/intent", payload)
    await publish(hass, f"{BASE}/state", {"state": "dancing", "muted": False, "volume": 1})
    await publish(hass, f"{BASE}/state", {"state": "idle", "muted": "no", "volume": 1})
    await wait_until(hass, lambda: hub.counts["dropped"] == 5 + len(bad_intents), 10, "every bad payload dropped")
    assert hass.states.get(state_id).state == "speaking"

    # the last will: unavailable
    await publish(hass, f"{BASE}/availability", "offline", retain=True)
    await wait_until(hass, lambda: hass.states.get(state_id).state == "unavailable", 10, "unavailable")

    # diagnostics: redacted
    diag = await diagnostics.async_get_config_entry_diagnostics(hass, entry)
    assert diag["hub"]["last_transcript"] == "**REDACTED**"
    assert diag["hub"]["catalog_entities"] == 1 and diag["entry"]["data"]["hub_id"] == "test_hub"
    json.dumps(diag)


async def test_voice_intents_are_executed_and_answered(hass: HomeAssistant, home: dict[str, str]) -> None:
    """An intent the hub publishes from speech: run by HA (exposed entities only), result back."""
    entry = await _setup(hass)
    results = await collect(hass, f"{BASE}/intent/result")

    def intent(i: str, name: str, slots: dict[str, object], request_id: str | None = None) -> dict[str, object]:
        return {"id": i, "site": "kitchen", "text": "", "source": "grammar", "request_id": request_id,
                "intent": {"name": name, "slots": slots, "targets": []}}

    await publish(hass, f"{BASE}/intent", intent("i1", "HassTurnOn", {"name": "Kitchen Light", "domain": "light"}))
    await wait_until(hass, lambda: hass.states.get(home["kitchen"]).state == "on", 10, "the kitchen light on")
    await wait_until(hass, lambda: results.json(), 10, "a result")
    assert results.json()[0]["id"] == "i1" and results.json()[0]["success"] is True
    assert results.json()[0]["targets"] == [home["kitchen"]]

    # an unexposed light is not switched, and the hub is told why
    await publish(hass, f"{BASE}/intent", intent("i2", "HassTurnOn", {"name": "Porch Light"}))
    await wait_until(hass, lambda: len(results.json()) == 2, 10, "a second result")
    r = results.json()[1]
    assert r["id"] == "i2" and r["success"] is False and "Porch Light" in r["text"]
    assert hass.states.get(home["porch"]).state == "off"

    # the outbox's resend of i1 is dropped; an ask's intent is left to the agent that asked
    await publish(hass, f"{BASE}/intent", intent("i1", "HassTurnOff", {"name": "Kitchen Light"}))
    await publish(hass, f"{BASE}/intent", intent("i3", "HassTurnOff", {"name": "Kitchen Light"}, "q1"))
    await publish(hass, f"{BASE}/intent", intent("i4", "HassNoSuchIntent", {}))
    await wait_until(hass, lambda: len(results.json()) == 3, 10, "a third result")
    assert results.json()[2]["id"] == "i4" and results.json()[2]["success"] is False
    assert hass.states.get(home["kitchen"]).state == "on"
    assert entry.runtime_data.counts["intents"] == 3
