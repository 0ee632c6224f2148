"""Requests said in words Home Assistant's templates miss: asked about first, never done at once."""

from __future__ import annotations

import asyncio

import pytest

from hub_runtime.agent import Agent, HomeModel
from hub_runtime.catalog import Catalog
from hub_runtime.paraphrase import (
    brightness_rewrites,
    kind_rewrites,
    name_rewrites,
    paraphrase,
    request_paraphrase,
    rewrites,
    temperature_rewrites,
)
from hub_runtime.settings import Settings
from hub_runtime.understanding import NO_INTENT_RESPONSE, Reply, Understanding

from .conftest import EXAMPLE_CATALOG


@pytest.fixture
def agent() -> Agent:
    return Agent(HomeModel(Catalog.load(EXAMPLE_CATALOG), Settings()))


def _turns(agent: Agent, *texts: str) -> list[Reply]:
    understanding = Understanding(agent, None)

    async def run() -> list[Reply]:
        return [await understanding.answer(text, conversation="c") for text in texts]

    return asyncio.run(run())


@pytest.mark.parametrize(("said", "words", "name", "targets"), [
    ("Kill the kitchen light.", "turn off the kitchen light", "HassTurnOff", ["light.kitchen"]),
    ("switch the telly off", "switch the tv off", "HassTurnOff", ["media_player.tv"]),
    ("send the robot vacuum back to its dock", "return the robot vacuum to base", "HassVacuumReturnToBase",
     ["vacuum.robot"]),
    ("set a pasta timer for ten minutes", "set a timer for ten minutes named pasta", "HassStartTimer", []),
    ("it's too dark in the bedroom", "turn on the lights in the bedroom", "HassTurnOn", ["light.bedroom"]),
    ("put the kitchen light on", "turn on the kitchen light", "HassTurnOn", ["light.kitchen"]),
    ("Put on the Christmas tree.", "turn on the christmas tree", "HassTurnOn", ["switch.christmas_tree"]),
    ("start the office fan", "turn on the office fan", "HassTurnOn", ["fan.office"]),
    ("turn the tv up", "turn up the tv volume", "HassSetVolumeRelative", ["media_player.tv"]),
    ("set the kitchen light to half brightness", "set the kitchen light to 50 percent brightness", "HassLightSet",
     ["light.kitchen"]),
    ("open the bedroom blinds halfway", "set the bedroom blinds position to 50 percent", "HassSetPosition",
     ["cover.bedroom_blinds"]),
    ("tell everyone that dinner is ready", "broadcast dinner is ready", "HassBroadcast", []),
    ("And eggs to the shopping list.", "add eggs to the shopping list", "HassListAddItem", ["todo.shopping_list"]),
    ("Louder, please.", "turn up the volume", "HassSetVolumeRelative", ["media_player.tv"]),
    ("a bit quieter", "turn down the volume", "HassSetVolumeRelative", ["media_player.tv"]),
    ("open the garage", "open the garage door", "HassTurnOn", ["cover.garage_door"]),
])
def test_usual_words_are_rewritten_to_a_request_of_the_templates(agent: Agent, said: str, words: str,
                                                                   name: str, targets: list[str]) -> None:
    assert agent.recognize(said) is None  # the templates miss it
    found = paraphrase(said, agent.recognize)
    assert found is not None
    assert found[0] == words
    assert (found[1].name, found[1].targets) == (name, targets)


def test_stop_vacuuming_asks_to_send_the_vacuum_home(agent: Agent) -> None:
    """The home's one vacuum: "stop vacuuming" is asked about as its return to base (no intent stops one)."""
    asked, done = _turns(agent, "Stop vacuuming.", "yes")
    assert asked.intent is None and asked.expects_reply
    assert "Robot Vacuum" in asked.response, asked.response
    assert done.intent is not None and done.intent.name == "HassVacuumReturnToBase"


def test_text_no_rewrite_makes_a_request_is_no_paraphrase(agent: Agent) -> None:
    assert paraphrase("what is the capital of france", agent.recognize) is None
    assert paraphrase("switch the spaceship off", agent.recognize) is None  # rewritten, but no such device
    assert list(rewrites("what is the capital of france")) == []


def test_a_paraphrased_action_is_asked_about_and_done_on_a_yes(agent: Agent) -> None:
    asked, done = _turns(agent, "kill the kitchen light", "yes")
    assert asked.response == "Do you want me to turn off the Kitchen Light?" and asked.expects_reply
    assert asked.intent is None  # nothing done before the answer
    assert done.intent is not None and done.intent.name == "HassTurnOff"
    assert agent.model.catalog.get("light.kitchen").state == "off"


def test_a_paraphrased_action_is_not_done_on_a_no(agent: Agent) -> None:
    before = agent.model.catalog.get("light.kitchen").state
    asked, declined = _turns(agent, "kill the kitchen light", "no")
    assert asked.expects_reply and declined.intent is None
    assert agent.model.catalog.get("light.kitchen").state == before


def test_words_nothing_makes_a_request_of_are_not_understood(agent: Agent) -> None:
    (reply,) = _turns(agent, "what is the capital of france")
    assert reply.response == NO_INTENT_RESPONSE and reply.intent is None


@pytest.mark.parametrize(("said", "words", "name"), [
    ("is it going to rain today", "what's the weather", "HassGetWeather"),
    ("Do I need an umbrella?", "what's the weather", "HassGetWeather"),
    ("how much time is left", "how much time is left on my timer", "HassTimerStatus"),
    ("are the blinds open", "are any blinds open", "HassGetState"),
    ("are the lights off", "are all the lights off", "HassGetState"),
])
def test_questions_said_another_way_are_read(agent: Agent, said: str, words: str, name: str) -> None:
    found = paraphrase(said, agent.recognize)
    assert found is not None and found[0] == words and found[1].name == name


def test_a_device_is_called_by_its_kind_when_the_home_has_one_of_it(agent: Agent) -> None:
    only = {"vacuum": "Robot Vacuum", "climate": "Thermostat"}
    found = paraphrase("send the vacuum home", agent.recognize, only)
    assert found is not None and found[0] == "return the robot vacuum to base"
    assert (found[1].name, found[1].targets) == ("HassVacuumReturnToBase", ["vacuum.robot"])
    found = paraphrase("set the heating to 21", agent.recognize, only)
    assert found is not None and (found[1].name, found[1].targets) == ("HassClimateSetTemperature",
                                                                         ["climate.thermostat"])
    assert paraphrase("send the vacuum home", agent.recognize) is None  # no one vacuum named: no guess
    # "vacuum" as a verb is not the device
    assert all("robot vacuum" not in new for new in rewrites("vacuum the kitchen", kind_rewrites(only)))


def test_understanding_names_the_one_device_of_a_kind_and_asks_first(agent: Agent) -> None:
    asked, done = _turns(agent, "start the vacuum", "yes")
    assert asked.response == "Do you want me to start the Robot Vacuum?" and asked.intent is None
    assert done.intent is not None and done.intent.name == "HassVacuumStart"
    (question,) = _turns(agent, "is it going to rain")
    assert question.intent is not None and question.intent.name == "HassGetWeather"  # a question is answered


def test_a_name_said_with_another_word_for_one_of_its_words_is_the_device(agent: Agent) -> None:
    entities = list(agent.model.catalog)
    assert agent.recognize("turn on the reading light") is None
    found = paraphrase("turn on the reading light", agent.recognize, home=name_rewrites(entities))
    assert found is not None and found[0] == "turn on the reading lamp"
    assert (found[1].name, found[1].targets) == ("HassTurnOn", ["light.living_room_lamp"])
    # "living room lamp" is a name already: it is not made the other way into "living room light"
    assert all(pattern.pattern != r"\bliving\ room\ lamp\b" for pattern, _ in name_rewrites(entities))
    # a lamp and a light side by side: each name is said as it is, neither is rewritten
    pair = Catalog.from_dict({"entities": [{"entity_id": "light.desk_lamp", "name": "Desk Lamp"},
                                           {"entity_id": "light.desk_light", "name": "Desk Light"}]})
    assert name_rewrites(pair) == ()


def test_a_warmth_wished_for_sets_the_thermostat_one_step_from_its_target(agent: Agent) -> None:
    entities = list(agent.model.catalog)
    for said, value in (("make it warmer in the living room", 21), ("it's too cold", 21), ("turn the heat up", 21),
                        ("make it a bit cooler", 19), ("it's too warm in the living room", 19)):
        found = request_paraphrase(said, agent.recognize, entities)
        assert found is not None, said
        assert (found[1].name, found[1].targets) == ("HassClimateSetTemperature", ["climate.thermostat"]), said
        assert float(found[1].slots["temperature"]) == value, said
    assert request_paraphrase("make it warmer in the kitchen", agent.recognize, entities) is None  # no thermostat there
    fahrenheit = Catalog.from_dict({"entities": [
        {"entity_id": "climate.den", "name": "Den Thermostat", "area": "Den", "state": "heat",
         "attributes": {"temperature": 68, "temperature_unit": "°F"}},
        {"entity_id": "climate.attic", "name": "Attic Thermostat", "area": "Attic", "state": "off"}]})
    rules = temperature_rewrites(fahrenheit)
    assert [said for pattern, said in rules if pattern.match("make it warmer in the den")] == [
        "set the den thermostat to 70 degrees"]
    assert not any(pattern.match("make it warmer") for pattern, _ in rules)  # two thermostats: which one?


def test_a_warmth_wished_for_is_asked_about_and_done_on_yes(agent: Agent) -> None:
    asked, done = _turns(agent, "make it warmer in here", "yes")
    assert asked.intent is None
    assert asked.response == "Do you want me to set the temperature of the Thermostat to 21 degrees?"
    assert done.intent is not None and done.intent.name == "HassClimateSetTemperature"
    assert agent.model.catalog.get("climate.thermostat").attributes["temperature"] == 21


def test_a_light_made_brighter_or_dimmer_moves_a_step_from_its_brightness() -> None:
    home = Catalog.from_dict({"entities": [
        {"entity_id": "light.desk", "name": "Desk Lamp", "area": "Study", "state": "on",
         "attributes": {"brightness": 128}},
        {"entity_id": "light.porch", "name": "Porch Light", "area": "Porch", "state": "on"},
        {"entity_id": "light.hall", "name": "Hall Light", "area": "Hall", "state": "off",
         "attributes": {"brightness": 0}}]})
    agent = Agent(HomeModel(home, Settings()))
    entities = list(home)
    for said, target, value in (("dim the desk lamp", "light.desk", 25), ("brighten the desk lamp", "light.desk", 75),
                                ("make the study lights a bit darker", "light.desk", 25),
                                ("dim the lights in the study", "light.desk", 25),
                                ("make the porch light dimmer", "light.porch", 75)):
        found = request_paraphrase(said, agent.recognize, entities)
        assert found is not None, said
        assert (found[1].name, found[1].targets) == ("HassLightSet", [target]), said
        assert int(found[1].slots["brightness"]) == value, said
    assert request_paraphrase("brighten the porch light", agent.recognize, entities) is None  # at full already
    assert request_paraphrase("dim the hall light", agent.recognize, entities) is None  # off: nothing to dim
    dim = Catalog.from_dict({"entities": [{"entity_id": "light.a", "name": "A Lamp", "state": "on",
                                           "attributes": {"brightness": 20}}]})
    assert [said for pattern, said in brightness_rewrites(dim) if pattern.match("dim the a lamp")] == [
        "set the a lamp brightness to 5 percent"]  # not under 5: "dim" does not turn it off
