"""Spoken dialogues through the real loop (fast file mode): follow-up answers, timers, wrong actions.

The speech is synthesised (Piper and espeak-ng voices); the recognisers, the voice and the
loop are the real ones. Where a dialogue needs the LLM, a scripted engine stands at the
LLM boundary (the real models are tested in test_llm.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from hub_runtime.agent import Agent
from hub_runtime.audio.synthetic import scene
from hub_runtime.engines import Engines
from hub_runtime.engines.base import Stats
from hub_runtime.runner import RunResult, run_file
from hub_runtime.settings import Settings, WakeWordSettings

from .conftest import of_type


def _story(result: RunResult) -> str:
    return "\n".join(str(e) for e in result.events if e["type"] not in ("partial", "state"))


def _run(settings: Settings, engines: Engines, parts: list[tuple[int, np.ndarray]], total_ms: int,
         **states: str) -> tuple[RunResult, Agent]:
    agent = Agent.from_settings(settings)
    for entity_id, value in states.items():
        entity = agent.model.catalog.get(entity_id.replace("__", "."))
        assert entity is not None
        entity.state = value
    result = asyncio.run(run_file(settings, scene(parts, total_ms), engines=engines, agent=agent))
    return result, agent


def test_which_room_is_asked_and_the_spoken_answer_needs_no_wake_word(
        shared_engines: Engines, voice: Callable[..., np.ndarray]) -> None:
    settings = Settings(wake_word=WakeWordSettings(enabled=True))
    wake, command, answer = voice("okay nabu"), voice("turn off the lights in here"), voice("the kitchen")
    result, agent = _run(settings, shared_engines, [(500, wake), (2000, command), (6500, answer)], 10000,
                         light__kitchen="on", light__bedroom="on")
    responses = [e["text"] for e in of_type(result.events, "response")]
    assert responses[:1] == ["Which room?"], _story(result)
    assert [i["targets"] for i in of_type(result.events, "intent")] == [["light.kitchen"]], _story(result)
    assert agent.model.catalog.get("light.kitchen").state == "off"  # type: ignore[union-attr]
    assert agent.model.catalog.get("light.bedroom").state == "on"  # type: ignore[union-attr]


class Proposes:
    """An LLM engine that proposes turning on the kitchen light, whatever it is told."""

    name = "script"
    context_size = 4096

    def __init__(self) -> None:
        self.stats = Stats()

    def count(self, messages: Any) -> int:
        return 10

    async def stream(self, messages: Any, *, grammar: Any, sampling: Any,
                     budget: Any = None) -> AsyncIterator[str]:
        yield '{"intent": "HassTurnOn", "name": "Kitchen Light"}'

    async def close(self) -> None:
        pass


@pytest.mark.parametrize(("reply", "on"), [("yes please", True), ("no", False)])
def test_an_llm_proposal_is_confirmed_by_voice(shared_engines: Engines, voice: Callable[..., np.ndarray],
                                               reply: str, on: bool) -> None:
    engines = replace(shared_engines, llm=Proposes())
    request, answer = voice("it is much too dark in the kitchen"), voice(reply, "en-us")
    result, agent = _run(Settings(), engines, [(500, request), (7000, answer)], 10000)
    responses = [e["text"] for e in of_type(result.events, "response")]
    assert responses[0] == "Do you want me to turn on the Kitchen Light?", _story(result)
    assert (agent.model.catalog.get("light.kitchen").state == "on") is on, _story(result)  # type: ignore[union-attr]


def test_a_short_timer_announces_itself(shared_engines: Engines, voice: Callable[..., np.ndarray]) -> None:
    command = voice("set a timer for five seconds")
    result, _agent = _run(Settings(), shared_engines, [(500, command)], 12000)
    timers = [(e["action"], e["t_ms"]) for e in of_type(result.events, "timer")]
    assert [a for a, _t in timers] == ["started", "finished"], _story(result)
    assert 4900 <= timers[1][1] - timers[0][1] <= 5100
    said = [e for e in of_type(result.events, "tts_end") if "timer is done" in e["text"]]
    assert said and said[0]["t_ms"] > timers[1][1], _story(result)
    start = of_type(result.events, "tts_start")[-1]["t_ms"]
    assert np.abs(result.speaker[start * 16 : (start + 150) * 16].astype(np.int32)).max() > 1000, "a chime"


@pytest.mark.parametrize(("text", "who"), [
    ("pause", "piper"), ("timer status", "en-us"), ("run party time", "en-gb"),
    ("add apples to my shopping list", "piper"), ("what's the office temp", "en-us+m3"),
    ("what is the capital of France", "piper"), ("is the coffee maker on", "en-us"),
])
def test_spoken_turns_that_acted_wrongly_do_not(shared_engines: Engines, voice: Callable[..., np.ndarray],
                                                text: str, who: str) -> None:
    utt = voice(text, who)
    result, agent = _run(Settings(), shared_engines, [(500, utt)], 500 + len(utt) // 16 + 2500)
    before = Agent.from_settings(Settings()).model.catalog
    changed = {e.entity_id for e in agent.model.catalog
               if (e.state, e.attributes) != (before.get(e.entity_id).state,  # type: ignore[union-attr]
                                              before.get(e.entity_id).attributes)}  # type: ignore[union-attr]
    allowed = {"todo.shopping_list"} if "shopping" in text else set()
    assert changed <= allowed, _story(result)
