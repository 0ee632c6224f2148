"""The hub's newer intents executed by Home Assistant's own handlers on real entities."""

from __future__ import annotations

from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import HomeAssistant
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.duplex_hub import protocol as p

from ..conftest import BASE, collect, hub_entry, publish, wait_until

MEDIA, LOCK, WEATHER, TODO = "media_player.living_room", "lock.front_door", "weather.demo_weather_south", \
    "todo.shopping_list"


async def _home(hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> None:
    demo = MockConfigEntry(domain="demo")
    demo.add_to_hass(hass)
    assert await async_setup_component(hass, "demo", {})
    shopping = MockConfigEntry(domain="shopping_list")
    shopping.add_to_hass(hass)
    assert await hass.config_entries.async_setup(shopping.entry_id)
    await hass.async_block_till_done()
    for entity_id in (MEDIA, LOCK, WEATHER, TODO):
        assert hass.states.get(entity_id) is not None, entity_id
        async_expose_entity(hass, "conversation", entity_id, True)


async def test_media_lock_list_and_weather_intents_run_on_real_entities(
        hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> None:
    assert await async_setup_component(hass, "conversation", {})
    await _home(hass, mqtt_entry)
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    results = await collect(hass, f"{BASE}/intent/result")
    media_name = hass.states.get(MEDIA).name  # type: ignore[union-attr]
    lock_name = hass.states.get(LOCK).name  # type: ignore[union-attr]

    async def run(i: str, name: str, slots: dict[str, object]) -> dict[str, object]:
        message = p.IntentMessage(id=i, text="", source="grammar", intent=p.IntentData(name=name, slots=slots))
        await publish(hass, f"{BASE}/intent", message.to_json())
        await wait_until(hass, lambda: any(r["id"] == i for r in results.json()), 15, f"the result of {i}")
        await hass.async_block_till_done()
        return next(r for r in results.json() if r["id"] == i)

    assert hass.states.get(MEDIA).state == "playing"  # type: ignore[union-attr]
    paused = await run("m1", "HassMediaPause", {"name": media_name})
    assert paused["success"] and hass.states.get(MEDIA).state == "paused"  # type: ignore[union-attr]
    resumed = await run("m2", "HassMediaUnpause", {"name": media_name})
    assert resumed["success"] and hass.states.get(MEDIA).state == "playing"  # type: ignore[union-attr]

    unlocked = await run("l1", "HassTurnOff", {"name": lock_name})
    await wait_until(hass, lambda: hass.states.get(LOCK).state == "unlocked", 10, "unlocked")  # type: ignore[union-attr]
    assert unlocked["success"]

    items = int(hass.states.get(TODO).state)  # type: ignore[union-attr]
    added = await run("s1", "HassShoppingListAddItem", {"item": "apples"})
    assert added["success"]  # (no text: the hub then says its own reply, "Added apples")
    await wait_until(hass, lambda: int(hass.states.get(TODO).state) == items + 1, 10,  # type: ignore[union-attr]
                     "one more item")

    weather = await run("w1", "HassGetWeather", {})
    assert weather["success"] and WEATHER in weather["targets"]  # type: ignore[operator]

    # a timer intent is the hub's own: Home Assistant leaves it alone (no result)
    timer = p.IntentMessage(id="t1", text="", source="grammar", intent=p.IntentData(name="HassStartTimer",
                                                                                      slots={"minutes": 5}))
    await publish(hass, f"{BASE}/intent", timer.to_json())
    await run("m3", "HassMediaPause", {"name": media_name})
    assert not [r for r in results.json() if r["id"] == "t1"]
