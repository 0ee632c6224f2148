"""NLU and standalone acting on text (``hub-runtime ask``), the grammar automata."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from hub_runtime.agent import Agent, HomeModel
from hub_runtime.catalog import Catalog
from hub_runtime.grammar.automaton import WILDCARD, number_words, tokenize
from hub_runtime.grammar.pronounce import ipa_to_arpabet
from hub_runtime.nlu import only_opening, without_fillers, words_to_digits
from hub_runtime.settings import Settings
from hub_runtime.understanding import Reply, Understanding

from .conftest import EXAMPLE_CATALOG


@pytest.fixture
def agent() -> Agent:
    return Agent(HomeModel(Catalog.load(EXAMPLE_CATALOG), Settings()))


def respond(agent: Agent, text: str) -> Reply:
    """A typed turn through the understanding service (grammar only), standalone."""
    return asyncio.run(Understanding(agent, None).answer(text))


@pytest.mark.parametrize(
    ("text", "name", "targets", "slots"),
    [
        ("turn on the kitchen light", "HassTurnOn", ["light.kitchen"], {"name": "Kitchen Light"}),
        ("switch off the ceiling light", "HassTurnOff", ["light.kitchen"], {"name": "Kitchen Light"}),
        ("turn off the lights in the bedroom", "HassTurnOff", ["light.bedroom"], {"area": "Bedroom"}),
        ("toggle the christmas tree", "HassToggle", ["switch.christmas_tree"], {}),
        ("set the reading lamp brightness to 40 percent", "HassLightSet", ["light.living_room_lamp"],
         {"brightness": 40}),
        ("make the living room lamp blue", "HassLightSet", ["light.living_room_lamp"], {"color": "blue"}),
        ("set the temperature to 21 degrees", "HassClimateSetTemperature", ["climate.thermostat"],
         {"temperature": 21}),
        ("open the garage door", "HassTurnOn", ["cover.garage_door"], {"name": "Garage Door"}),
        ("close the bedroom blinds", "HassTurnOff", ["cover.bedroom_blinds"], {"name": "Bedroom Blinds"}),
        ("set the bedroom blinds to 30%", "HassSetPosition", ["cover.bedroom_blinds"], {"position": 30}),
        ("what is the outside temperature", "HassGetState", ["sensor.outside_temperature"], {}),
        ("what time is it", "HassGetCurrentTime", [], {}),
        ("never mind", "HassNevermind", [], {}),
        ("could you turn on the zigbee plug please", "HassTurnOn", ["switch.zigbee_plug"], {}),
    ],
)
def test_intents_on_text(agent: Agent, text: str, name: str, targets: list[str], slots: dict) -> None:
    intent = agent.recognize(text)
    assert intent is not None, text
    assert intent.name == name
    assert intent.targets == targets
    for key, value in slots.items():
        assert intent.slots[key] == value


def test_state_question_answers_truthfully_after_a_command(agent: Agent) -> None:
    assert respond(agent, "is the kitchen light on").response.startswith("No")
    turned = respond(agent, "turn on the kitchen light")
    assert turned.response == "Turned on the light"
    assert agent.model.catalog.get("light.kitchen").state == "on"  # type: ignore[union-attr]
    asked = respond(agent, "is the kitchen light on")
    assert asked.response == "Yes"
    assert asked.intent is not None and asked.intent.name == "HassGetState"
    assert agent.model.catalog.get("light.kitchen").state == "on"  # type: ignore[union-attr]


def test_light_set_and_position_change_state(agent: Agent) -> None:
    respond(agent, "set the kitchen light brightness to 50 percent")
    kitchen = agent.model.catalog.get("light.kitchen")
    assert kitchen is not None and kitchen.state == "on" and kitchen.attributes["brightness"] == 128
    respond(agent, "set the bedroom blinds to 0 percent")
    blinds = agent.model.catalog.get("cover.bedroom_blinds")
    assert blinds is not None and blinds.state == "closed"


def test_time_reply_uses_the_template(agent: Agent) -> None:
    intent = agent.recognize("what time is it")
    assert intent is not None
    outcome = asyncio.run(agent.act(intent, intent_id="t", now=dt.datetime(2026, 1, 1, 15, 7)))
    assert outcome.response == "3:07 PM"


def test_out_of_grammar_gives_no_intent(agent: Agent) -> None:
    reply = respond(agent, "what is the capital of france")
    assert reply.intent is None and reply.source is None
    assert reply.response


@pytest.mark.parametrize(("text", "name"), [
    ("Um, turn on the kitchen light.", "HassTurnOn"),
    ("Okay, turn off the kitchen light.", "HassTurnOff"),
    ("So, what time is it?", "HassGetCurrentTime"),
    ("All right, uh, turn on the kitchen light", "HassTurnOn"),
    ("turn on the, uh, kitchen light", "HassTurnOn"),
])
def test_hesitations_and_lead_ins_are_heard_past(agent: Agent, text: str, name: str) -> None:
    intent = agent.recognize(text)
    assert intent is not None and intent.name == name
    assert intent.targets == ([] if name == "HassGetCurrentTime" else ["light.kitchen"])


def test_without_fillers_keeps_a_word_and_the_request() -> None:
    assert without_fillers("Well, um, so turn on the fan.") == "turn on the fan."
    assert without_fillers("okay") == "okay"  # an answer, not a lead-in
    assert without_fillers("um uh") == "um uh"
    assert without_fillers("turn on the well pump") == "turn on the well pump"  # only before a request
    assert without_fillers("And milk to the shopping list.") == "And milk to the shopping list."  # "add" heard
    # a quick "un" is written as a word of its own: "Um, pause the music." may be "unpause"
    assert without_fillers("Um, pause the music.") == "Um, pause the music."
    assert without_fillers("Okay, pause the music.") == "pause the music."
    assert only_opening("So.") and only_opening("Okay, um") and only_opening("All right,")
    assert not only_opening("") and not only_opening("So, stop.") and not only_opening("hello")


def test_catalog_change_changes_what_is_recognised(agent: Agent) -> None:
    assert agent.recognize("turn on the aquarium pump") is None
    catalog = Catalog.from_dict({"entities": [
        {"entity_id": "switch.aquarium", "name": "Aquarium Pump", "area": "Den"}]})
    asyncio.run(agent.replace_catalog(catalog, Settings()))
    intent = agent.recognize("turn on the aquarium pump")
    assert intent is not None and intent.targets == ["switch.aquarium"]
    assert agent.recognize("turn on the kitchen light") is None
    assert agent.model.grammar.is_complete(tokenize("turn on the aquarium pump"))


def test_grammar_completeness_and_prefixes(agent: Agent) -> None:
    g = agent.model.grammar
    assert g.is_complete("turn on the kitchen light".split())
    assert not g.is_complete("turn on the".split())
    assert g.dfa.is_prefix("turn on the".split())
    assert not g.dfa.is_prefix("banana".split())
    assert g.is_complete(tokenize("set the kitchen light brightness to 75%"))


def test_the_spoken_automaton_keeps_wildcards_and_leaves_out_answers(agent: Agent) -> None:
    g = agent.model.grammar
    spoken = g.spoken_dfa()
    assert spoken.accepts("add * to my shopping list".split())
    assert not g.dfa.accepts("add * to my shopping list".split())  # pocketsphinx cannot decode free text
    assert spoken.accepts("turn on the kitchen light".split())
    assert not spoken.accepts(["yes"]) and g.spoken_dfa(answering=True).accepts(["yes"])


def test_every_sentence_the_recognisers_may_hear_is_understood(agent: Agent) -> None:
    """A random walk through the spoken grammar: each sentence it ends on is an intent.

    What the recognisers decode within is built from the same templates as the NLU, with the
    words a sentence may start or end with ("hey ...", "... for me") and numbers spelled out:
    a sentence they can hear and the NLU cannot read is answered "Sorry, I couldn't understand".
    """
    dfa = agent.model.grammar.spoken_dfa()
    rng = random.Random(0)
    missed = []
    for _ in range(400):
        state, words = 0, []
        while True:
            arcs = sorted(dfa.trans[state].items())
            if not arcs or (state in dfa.accepting and rng.random() < 0.3):
                break
            word, state = rng.choice(arcs)
            words.append(word)
        if WILDCARD in words or state not in dfa.accepting:
            continue  # free text (a list item) is filled in by Whisper
        if agent.recognize(" ".join(words)) is None:
            missed.append(" ".join(words))
    assert missed == []
    for said in ("hey turn on the kitchen light please", "could you turn on the kitchen light for me"):
        assert dfa.accepts(tokenize(said)) and agent.model.grammar.is_complete(tokenize(said))
        intent = agent.recognize(said)
        assert intent is not None and intent.name == "HassTurnOn"


def test_numbers_round_trip() -> None:
    for n in (0, 7, 15, 21, 40, 99, 100, 255):
        assert words_to_digits(number_words(n)) == str(n)
    assert words_to_digits("set it to fifty five percent") == "set it to 55 percent"
    assert tokenize("Lamp 2 at 50%") == ["lamp", "two", "at", "fifty", "percent"]


def test_a_half_in_a_timer_is_said_one_half_and_understood(agent: Agent) -> None:
    """Home Assistant's timers take "3 and 1/2 minutes": the spoken grammar says "one half", not "one two"."""
    assert tokenize("3 and 1/2 minutes") == ["three", "and", "one", "half", "minutes"]
    spoken = "timer for three and one half minutes".split()
    assert agent.model.grammar.is_complete(spoken)
    assert not agent.model.grammar.is_complete("timer for three and one two minutes".split())
    intent = agent.recognize(" ".join(spoken))
    assert intent is not None and intent.name == "HassStartTimer"
    assert intent.slots == {"minutes": 3, "seconds": 30}


def test_generated_pronunciations() -> None:
    assert ipa_to_arpabet("zˈɪɡbiː") == ["Z", "IH", "G", "B", "IY"]
    assert ipa_to_arpabet("tʃˈeɪndʒ") == ["CH", "EY", "N", "JH"]


def test_ask_cli_prints_the_contract_json(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hub_runtime", "ask", "--catalog", str(EXAMPLE_CATALOG), "--json",
         "turn on the kitchen light"], capture_output=True, text=True, check=True,
    )
    out = json.loads(proc.stdout)
    assert out == {
        "text": "turn on the kitchen light",
        "intent": {"name": "HassTurnOn", "slots": {"name": "Kitchen Light"}, "targets": ["light.kitchen"]},
        "source": "grammar",
        "response": "Turned on the light",
    }
    proc = subprocess.run([sys.executable, "-m", "hub_runtime", "ask", "--json", "sing me a song"],
                          capture_output=True, text=True, check=True)
    out = json.loads(proc.stdout)
    # not a home command: the local LLM answers in speech, and acts on nothing
    assert out["intent"] is None and out["source"] == "llm" and out["response"]


def test_a_home_without_rooms_has_a_grammar_a_prompt_and_no_answers_when_nothing_was_asked() -> None:
    import random

    from hub_runtime.grammar import HomeGrammar
    from hub_runtime.grammar.sample import sample_sentences
    from hub_runtime.stages.asr import whisper_prompt

    grammar = HomeGrammar(Catalog.from_dict({"entities": [{"entity_id": "switch.aquarium", "name": "Aquarium Pump"}]}))
    sampled = sample_sentences(grammar, random.Random(1), 2)
    assert any("aquarium pump" in t.lower() for texts in sampled.values() for t in texts)
    assert "aquarium pump" in whisper_prompt(grammar).lower()
    assert grammar.dfa.accepts(["no"]) and not grammar.commands_dfa.accepts(["no"])
    assert grammar.commands_dfa.accepts("turn on the aquarium pump".split())
