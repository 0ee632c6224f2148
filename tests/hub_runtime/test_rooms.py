"""Rooms as satellites: one loop per room over shared engines, the loudest room answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hub_runtime.agent import Agent
from hub_runtime.arbitration import Arbiter, same_utterance
from hub_runtime.audio.format import RATE, Int16Array
from hub_runtime.engines import Engines
from hub_runtime.frames import EndOfTurnFrame, SpeechStartedFrame
from hub_runtime.rooms import Rooms, run_rooms
from hub_runtime.settings import Settings


def test_one_room_answers_at_once_and_the_louder_of_two_wins() -> None:
    async def go() -> None:
        arbiter = Arbiter(window_ms=2000)
        kitchen, hall = arbiter.register("kitchen"), arbiter.register("hall")
        assert (await arbiter.claim("kitchen", "turn on the light")).won  # nobody else hears: no wait
        kitchen.level_db, hall.level_db = -20.0, -32.0
        kitchen.on_frame(None, SpeechStartedFrame(onset_ms=0), None)  # type: ignore[arg-type]
        hall.on_frame(None, SpeechStartedFrame(onset_ms=0), None)  # type: ignore[arg-type]
        hall.on_frame(None, EndOfTurnFrame(), None)  # type: ignore[arg-type]
        first = asyncio.create_task(arbiter.claim("hall", "turn on the light"))
        await asyncio.sleep(0.01)
        assert not first.done()  # the kitchen is still hearing: the hall waits for it
        kitchen.on_frame(None, EndOfTurnFrame(), None)  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        assert not first.done()  # ... and for its words
        second = await arbiter.claim("kitchen", "turn on the lights")
        assert second.won and not (await first).won
        assert [c.site for c in second.group] == ["hall", "kitchen"]

    asyncio.run(go())


def test_different_words_in_two_rooms_are_two_turns() -> None:
    assert same_utterance("turn on the kitchen light", "turn on the kitchen lights")
    assert not same_utterance("what time is it", "turn on the kitchen light")

    async def go() -> None:
        arbiter = Arbiter(window_ms=200)
        a, b = arbiter.register("a"), arbiter.register("b")
        a.on_frame(None, SpeechStartedFrame(onset_ms=0), None)  # type: ignore[arg-type]
        b.on_frame(None, SpeechStartedFrame(onset_ms=0), None)  # type: ignore[arg-type]
        b.on_frame(None, EndOfTurnFrame(), None)  # type: ignore[arg-type]
        first = asyncio.create_task(arbiter.claim("b", "what time is it"))
        a.on_frame(None, EndOfTurnFrame(), None)  # type: ignore[arg-type]
        second = await arbiter.claim("a", "turn on the kitchen light")
        assert second.won and (await first).won

    asyncio.run(go())


@pytest.fixture
def two_rooms(engines: Engines, settings: Settings) -> Callable[[dict[str, Int16Array]], tuple[Rooms, dict]]:
    def run(mics: dict[str, Int16Array]) -> tuple[Rooms, dict]:
        rooms_events: dict[str, list] = {}

        async def go_and_keep() -> tuple[Rooms, dict]:
            rooms = Rooms(settings, engines, Agent.from_settings(settings), realtime=False,
                          arbiter=Arbiter(window_ms=3000))
            try:
                await run_rooms(rooms, mics)
                rooms_events.update({site: room.log.events for site, room in rooms.rooms.items()})
            finally:
                await rooms.close()
            return rooms, rooms_events

        return asyncio.run(go_and_keep())

    return run


def _track(speech: Int16Array, gain: float, delay_ms: int = 0) -> Int16Array:
    lead = np.zeros(RATE // 2 + delay_ms * RATE // 1000, np.int16)
    return np.concatenate([lead, (speech * gain).astype(np.int16), np.zeros(RATE, np.int16)])


def test_the_same_words_in_two_rooms_are_answered_once_by_the_louder(
        two_rooms: Callable[..., tuple[Rooms, dict]], voice: Callable[..., Int16Array]) -> None:
    """A toggle carried out twice would undo itself: it runs once, in the room nearest the speaker."""
    speech = voice("toggle the kitchen light")
    rooms, events = two_rooms({"hall": _track(speech, 0.25, delay_ms=20), "kitchen": _track(speech, 1.0)})
    light = rooms.agent.model.catalog.get("light.kitchen")
    assert light is not None and light.state == "on"  # toggled once
    spoke = {site: [e for e in evs if e["type"] == "tts_start"] for site, evs in events.items()}
    assert spoke["kitchen"] and not spoke["hall"], spoke
    for site in ("hall", "kitchen"):
        decision = [e for e in events[site] if e["type"] == "arbitration"]
        assert len(decision) == 1 and decision[0]["winner"] == "kitchen", events[site]
        assert decision[0]["answered"] is (site == "kitchen")
    levels = {c["site"]: c["level_db"] for c in decision[0]["candidates"]}
    assert levels["kitchen"] - levels["hall"] == pytest.approx(12.0, abs=2.0)  # 0.25 = -12 dB


def test_two_people_in_two_rooms_both_get_answers(two_rooms: Callable[..., tuple[Rooms, dict]],
                                                  voice: Callable[..., Int16Array]) -> None:
    rooms, events = two_rooms({"office": _track(voice("what time is it"), 1.0),
                               "kitchen": _track(voice("turn on the kitchen light"), 1.0)})
    light = rooms.agent.model.catalog.get("light.kitchen")
    assert light is not None and light.state == "on"
    for site in ("office", "kitchen"):
        assert [e for e in events[site] if e["type"] == "tts_start"], site
        assert not [e for e in events[site] if e["type"] == "arbitration"]


def test_a_satellite_over_the_websocket_is_a_room_of_its_own(engines: Engines, settings: Settings,
                                                            voice: Callable[..., Int16Array]) -> None:
    """A WAV streamed at real speed as the kitchen's microphone: the light turns on, the reply comes back."""
    from hub_runtime.satellite import satellite_url, stream_file

    from .http_helpers import served

    mic = np.concatenate([np.zeros(RATE // 2, np.int16), voice("turn on the kitchen light")])

    async def go() -> tuple[Int16Array, str]:
        async with served(engines, settings) as (loop, url):
            played = await stream_file(satellite_url(url, "kitchen", "Kitchen"), mic, linger_s=3.0)
            light = loop.agent.model.catalog.get("light.kitchen")
            assert light is not None
            assert loop.server is not None
            assert loop.server.rooms is not None
            assert loop.server.rooms.rooms["kitchen"].loop.settings.site_area == "Kitchen"
            return played, light.state

    played, state = asyncio.run(go())
    assert state == "on"
    assert played.size >= mic.size and np.abs(played).max() > 1000  # the hub's voice, in the room


def test_a_satellite_with_a_bad_site_or_no_hub_is_told_why(engines: Engines, settings: Settings,
                                                           tmp_path: Path) -> None:
    import aiohttp

    from hub_runtime.__main__ import main
    from hub_runtime.audio.format import write_wav

    from .http_helpers import served

    async def go() -> int:
        async with served(engines, settings) as (_loop, url), aiohttp.ClientSession() as http:
            async with http.get(f"{url}/satellite/bad%20site") as r:
                return r.status

    assert asyncio.run(go()) == 400
    wav = tmp_path / "in.wav"
    write_wav(wav, np.zeros(RATE // 10, np.int16))
    assert main(["satellite", "--hub", "ws://127.0.0.1:9", "--site", "kitchen", "--input", str(wav)]) == 2


def test_a_hermes_satellite_streams_wav_chunks_over_mqtt(engines: Engines, settings: Settings, tmp_path: Path,
                                                        voice: Callable[..., Int16Array]) -> None:
    """Rhasspy's audio server: ``audioFrame`` WAV chunks in, ``playBytes`` WAVs of the reply out."""
    import time

    from hub_runtime.audio.format import wav_bytes, wav_samples
    from hub_runtime.events import EventLog
    from hub_runtime.runner import running_loop

    from .mqtt_helpers import Mosquitto, Watcher, mqtt_settings

    broker = Mosquitto(tmp_path)
    broker.start()
    s = mqtt_settings(replace(settings, llm=replace(settings.llm, enabled=False)), tmp_path, port=broker.port,
                      embedded=False)
    mic = np.concatenate([np.zeros(RATE // 2, np.int16), voice("open the garage door"), np.zeros(3 * RATE, np.int16)])

    async def go() -> tuple[str, list[Int16Array]]:
        agent = Agent.from_settings(s)
        async with running_loop(s, EventLog(keep=False), realtime=True, mqtt=True, engines=engines, agent=agent):
            w = await asyncio.to_thread(Watcher, broker.port, ["hermes/audioServer/garage/playBytes/#"])
            try:
                w.publish("hermes/audioServer/garage/audioFrame", b"not a wav")  # dropped, logged
                t0 = time.perf_counter()
                for i, start in enumerate(range(0, len(mic), 512)):  # Rhasspy's 512-sample chunks
                    w.publish("hermes/audioServer/garage/audioFrame", wav_bytes(mic[start:start + 512]))
                    await asyncio.sleep(max(0.0, t0 + (i + 1) * 512 / RATE - time.perf_counter()))
                await w.wait_for(lambda m: m.topic.startswith("hermes/audioServer/garage/playBytes/"))
                played = [wav_samples(m.payload) for m in w.seen]
            finally:
                await asyncio.to_thread(w.close)
        door = agent.model.catalog.get("cover.garage_door")
        assert door is not None
        return door.state, played

    try:
        state, played = asyncio.run(go())
    finally:
        broker.stop()
    assert state == "open"
    assert played and max(int(np.abs(p).max()) for p in played) > 1000
