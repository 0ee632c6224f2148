"""Operations: metrics from events, health and systemd's watchdog, the web server, a lost audio device."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
import tempfile
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from typing import Any, ClassVar

import aiohttp
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hub_runtime import memory
from hub_runtime import protocol as p
from hub_runtime.agent import Agent
from hub_runtime.audio.devices import DeviceError
from hub_runtime.audio.format import Int16Array
from hub_runtime.engines import CachedSynth, Engines, FallbackSynth
from hub_runtime.engines.espeak import EspeakSynth
from hub_runtime.events import EventLog
from hub_runtime.health import Health, sd_notify
from hub_runtime.metrics import Metrics
from hub_runtime.runner import live_frames, run_live, running_loop
from hub_runtime.settings import HttpSettings, Settings, SettingsError, parse
from hub_runtime.text import split_sentences
from hub_runtime.understanding import fixed_replies

from .http_helpers import CHUNK, served, wait_for


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(_text(metrics)):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise KeyError(name)


def _text(metrics: Metrics) -> str:
    from prometheus_client import generate_latest

    return generate_latest(metrics.registry).decode()


# -- metrics -----------------------------------------------------------------------------------------
def test_metrics_measure_each_stage_of_a_turn_from_the_end_of_speech() -> None:
    """The end of speech is the end of the turn less the silence waited (the VAD's own end may come later)."""
    m = Metrics()
    for event in (p.SpeechStart(t_ms=1000, onset_ms=1000), p.EndOfTurn(t_ms=2090, silence_ms=90),
                  p.Transcript(t_ms=2150, text="turn on the kitchen light"),
                  p.IntentRecognized(t_ms=2160, id="i", name="HassTurnOn"),
                  p.Response(t_ms=2170, text="Turned on the light", source="grammar"),
                  p.TtsStart(t_ms=2300, utterance=1), p.StateChanged(t_ms=2300, state="speaking"),
                  p.SpeechEnd(t_ms=2330, offset_ms=2000)):  # the VAD's end comes late: no new turn
        m.on_event(event)
    assert m.snapshot() == [{"t_ms": 2000, "typed": False, "text": "turn on the kitchen light", "intent": "HassTurnOn",
                             "response": "Turned on the light",
                             "latency_ms": {"end_of_turn": 90, "transcript": 150, "intent": 160, "response": 170,
                                            "first_audio": 300}}]
    assert sample(m, "duplex_hub_turn_latency_seconds_count", stage="first_audio") == 1
    assert sample(m, "duplex_hub_turn_latency_seconds_sum", stage="first_audio") == pytest.approx(0.3)
    assert sample(m, "duplex_hub_turns_total", source="grammar") == 1
    assert sample(m, "duplex_hub_dialogue_state", duplex_hub_dialogue_state="speaking") == 1


def test_metrics_count_barge_ins_by_outcome_and_skip_discarded_turns() -> None:
    m = Metrics()
    for event in (p.BargeIn(onset_ms=0), p.TtsResumed(), p.BargeIn(onset_ms=0), p.TtsCancelled(),
                  p.TtsCancelled(), p.EndOfTurn(t_ms=20, discard=True),
                  p.Transcript(t_ms=30, text="x"), p.ErrorEvent(message="boom")):
        m.on_event(event)
    assert sample(m, "duplex_hub_barge_ins_total", outcome="resumed") == 1
    assert sample(m, "duplex_hub_barge_ins_total", outcome="cancelled") == 1  # a cancel without a pause: not one
    assert sample(m, "duplex_hub_errors_total") == 1
    assert m.snapshot() == []
    for event in (p.Transcript(t_ms=100, text="hello", tier="typed"), p.Response(t_ms=120, text="Hi", source="grammar"),
                  p.TtsStart(t_ms=400, utterance=1)):
        m.on_event(event)
    assert m.snapshot()[0]["typed"] and m.snapshot()[0]["latency_ms"] == {"transcript": 0, "response": 20,
                                                                        "first_audio": 300}
    assert sample(m, "duplex_hub_turn_latency_seconds_count", stage="first_audio") == 0  # speech only


# -- health and the watchdog --------------------------------------------------------------------------
class FakeTime:
    def __init__(self) -> None:
        self.s = 100.0

    def __call__(self) -> float:
        return self.s


@contextlib.contextmanager
def notify_socket(monkeypatch: pytest.MonkeyPatch) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.setblocking(False)
        monkeypatch.setenv("NOTIFY_SOCKET", path)

        def received() -> list[str]:
            got = []
            with contextlib.suppress(BlockingIOError):
                while True:
                    got.append(sock.recv(100).decode())
            return got

        try:
            yield received
        finally:
            sock.close()


def test_the_watchdog_is_fed_only_while_the_loop_ticks_on_time(monkeypatch: pytest.MonkeyPatch) -> None:
    now = FakeTime()
    metrics = Metrics()
    health = Health(stall_ms=1000, metrics=metrics, now=now)
    with notify_socket(monkeypatch) as received:
        assert not health.beat(0.0).ok  # never ticked
        health.ticked()
        assert health.beat(0.01).ok
        assert received() == ["WATCHDOG=1"]
        now.s += 2.0  # the audio stopped
        report = health.beat(0.0)
        assert not report.ok and report.problems == ("no audio frame for 2000 ms",)
        health.ticked()
        assert not health.beat(1.5).ok  # the event loop stalled 1.5 s
        assert received() == []
        assert health.beat(0.0).ok and received() == ["WATCHDOG=1"]
        health.on_event(p.ErrorEvent(message="piper failed"))
        assert health.beat(0.0).problems == ("a stage failed: piper failed",)
        now.s += 31
        health.ticked()
        assert health.beat(0.0).ok
    assert sample(metrics, "duplex_hub_healthy") == 1
    assert sample(metrics, "duplex_hub_late_ticks_total") == 2
    assert sample(metrics, "duplex_hub_ticks_total") == 3


def test_an_overload_holds_the_llm_back_and_ends_by_itself() -> None:
    now, cpu = FakeTime(), [0.0]
    metrics = Metrics()
    health = Health(stall_ms=1000, metrics=metrics, now=now, watchdog=False, max_cpu_percent=80,
                    max_memory_mb=500, usage=lambda: (cpu[0], 100.0), cpus=2)
    health.ticked()

    def beats(n: int, busy_cores: float) -> None:
        for _ in range(n):
            now.s += 0.5
            cpu[0] += 0.5 * busy_cores
            health.ticked()
            health.beat(0.0)

    beats(4, 1.0)  # 50 %
    assert health.overloaded() is None
    beats(3, 1.9)  # 95 %, not yet long enough
    assert health.overloaded() is None
    beats(1, 1.9)
    assert health.overloaded() == "overloaded: CPU 95% > 80%"
    report = health.check()
    assert report.ok and report.degraded == ("overloaded: CPU 95% > 80%",)  # it still answers
    assert sample(metrics, "duplex_hub_degraded", component="load") == 1
    beats(3, 0.2)
    assert health.overloaded() is not None  # hysteresis
    beats(1, 0.2)
    assert health.overloaded() is None and sample(metrics, "duplex_hub_degraded", component="load") == 0


def test_overloaded_the_understanding_says_it_is_busy_but_the_grammar_answers() -> None:
    from hub_runtime.understanding import BUSY

    from .test_understanding import ask, state, understanding

    u = understanding('{"intent": "HassTurnOn", "name": "Kitchen Light"}')
    u.overloaded = lambda: "overloaded: CPU 99% > 95%"
    assert ask(u, "tell me a story about dragons").response == BUSY
    assert ask(u, "turn on the kitchen light").intent is not None and state(u, "light.kitchen") == "on"


def test_sd_notify_ready_and_stopping_around_the_monitor(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        health = Health(stall_ms=1000)
        health.start()
        await asyncio.sleep(0)
        await health.stop()

    with notify_socket(monkeypatch) as received:
        asyncio.run(go())
        assert received() == ["READY=1", "STOPPING=1"]
    monkeypatch.delenv("NOTIFY_SOCKET")
    assert sd_notify("READY=1") is False  # not under systemd: nothing to do


# -- settings -----------------------------------------------------------------------------------------
def test_serving_beyond_loopback_needs_a_token() -> None:
    with pytest.raises(SettingsError, match=r"^http\.token: needed when http\.host \(0\.0\.0\.0\)"):
        parse({"http": {"host": "0.0.0.0"}})
    with pytest.raises(SettingsError, match=r"^http\.token: 'short' is shorter than 16 characters|http\.token"):
        parse({"http": {"host": "0.0.0.0", "token": "short"}})
    assert parse({"http": {"host": "0.0.0.0", "token": "x" * 16}}).http.token == "x" * 16
    assert parse({"http": {"host": "::1"}}).http.host == "::1"
    assert parse({"http": {"host": "0.0.0.0", "enabled": False}}).http.enabled is False


# -- the web server, on a running loop ------------------------------------------------------------------
def test_healthz_metrics_and_a_typed_command(engines: Engines, settings: Settings) -> None:
    async def go() -> None:
        async with served(engines, settings) as (_loop, url), aiohttp.ClientSession() as http:
            async def healthy() -> bool:
                async with http.get(f"{url}/healthz") as r:
                    return r.status == 200 and (await r.json())["ok"] is True

            await wait_for(healthy)
            async with http.post(f"{url}/api/command", json={"text": "turn on the kitchen light"}) as r:
                assert r.status == 202

            async def light_on() -> bool:
                async with http.get(f"{url}/api/status") as r:
                    data = await r.json()
                return any(e["entity_id"] == "light.kitchen" and e["state"] == "on" for e in data["entities"])

            await wait_for(light_on)
            async with http.get(f"{url}/api/status") as r:
                status = await r.json()
            assert status["status"]["site"] == "default" and status["health"]["ok"]
            async with http.get(f"{url}/metrics") as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
                text = await r.text()
            assert 'duplex_hub_turns_total{source="grammar"} 1.0' in text
            assert "duplex_hub_ticks_total" in text and "process_cpu_seconds_total" in text
            for bad in (b"not json", b'{"text": ""}', b'{"text": 3}', b"[]"):
                async with http.post(f"{url}/api/command", data=bad) as r:
                    assert r.status == 400, bad
            async with http.get(f"{url}/") as r:
                assert r.status == 200 and "<title>Duplex Hub</title>" in await r.text()

    asyncio.run(go())


def test_a_token_guards_every_route(engines: Engines, settings: Settings) -> None:
    token = "t0ps3cret-t0ps3cret"
    s = replace(settings, http=HttpSettings(token=token))

    async def go() -> None:
        async with served(engines, s) as (_loop, url), aiohttp.ClientSession() as http:
            for path in ("/", "/healthz", "/metrics", "/api/status"):
                async with http.get(url + path) as r:
                    assert r.status == 401, path
                async with http.get(url + path, headers={"Authorization": "Bearer wrong"}) as r:
                    assert r.status == 401, path
            async with http.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}) as r:
                assert r.status == 200
            async with http.get(f"{url}/api/status?token={token}") as r:
                assert r.status == 200

    asyncio.run(go())


def test_a_taken_port_fails_the_start_loudly(engines: Engines, settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        s = replace(settings, http=replace(settings.http, port=taken.getsockname()[1]))

        async def go() -> None:
            async with running_loop(s, EventLog(), realtime=True, mqtt=False, engines=engines,
                                    agent=Agent.from_settings(s), http=True):
                pass

        with pytest.raises(OSError):
            asyncio.run(go())


# -- a lost audio device ----------------------------------------------------------------------------------
class FakeDevice:
    """Hands out ``n`` frames, then stops (an unplugged device: no more callbacks)."""

    opened: ClassVar[list[FakeDevice]] = []

    def __init__(self, n: int) -> None:
        self.n = n
        self.played: list[Int16Array] = []
        self.closed = False
        FakeDevice.opened.append(self)

    async def frames(self) -> AsyncIterator[Int16Array]:
        for _ in range(self.n):
            await asyncio.sleep(0)
            yield np.zeros(CHUNK, np.int16)
        await asyncio.Event().wait()  # silence for ever: no callback comes

    def play(self, frame: Int16Array) -> None:
        self.played.append(frame)

    def close(self) -> None:
        self.closed = True


def test_a_device_that_stops_is_reopened_with_back_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hub_runtime.runner.REOPEN_FIRST_S", 0.01)
    FakeDevice.opened = []
    attempts = iter(["ok", "fail", "fail", "ok"])

    def open_device() -> FakeDevice:
        if next(attempts) == "fail":
            raise DeviceError("no usable audio device (unplugged)")
        return FakeDevice(3)

    async def go() -> int:
        got = 0
        frames = live_frames(open_device, stall_s=0.05, on_device=lambda d: None)
        async for _frame in frames:
            got += 1
            if got == 6:
                break
        await frames.aclose()
        return got

    assert asyncio.run(go()) == 6
    assert len(FakeDevice.opened) == 2 and FakeDevice.opened[0].closed


def test_no_device_at_all_is_a_set_up_error(settings: Settings) -> None:
    def missing() -> FakeDevice:
        raise DeviceError("no usable audio device (none)")

    with pytest.raises(DeviceError):
        asyncio.run(run_live(settings, EventLog(keep=False), mqtt=False, http=False, open_device=missing))


def test_run_live_plays_the_loop_on_the_device(engines: Engines, settings: Settings,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    FakeDevice.opened = []
    s = replace(settings, llm=replace(settings.llm, enabled=False))
    monkeypatch.setattr("hub_runtime.runner.Engines.load", _loaded(engines))
    stop = asyncio.Event()
    log = EventLog(keep=False)

    def open_device() -> FakeDevice:
        device = FakeDevice(40)
        original = device.play

        def play(frame: Int16Array) -> None:
            original(frame)
            frozen.append(gc.get_freeze_count())
            if len(device.played) >= 30:
                stop.set()

        device.play = play  # type: ignore[method-assign]
        return device

    frozen: list[int] = []
    asyncio.run(run_live(s, log, mqtt=False, http=False, open_device=open_device, stop=stop))
    assert len(FakeDevice.opened[0].played) == 30 and log.events == []  # a live log keeps nothing
    # while it ran, what its start built was kept out of full collections; not after
    assert min(frozen) > 0 and gc.get_freeze_count() == 0


def test_a_rebuilt_part_of_the_long_lived_hub_is_collected() -> None:
    class Part:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    old = Part()
    gone = weakref.ref(old)
    with memory.long_lived():
        del old  # replaced by a new one, but frozen: a collection does not see it
        gc.collect()
        assert gone() is not None
        memory.rebuilt()
        assert gone() is None and gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_automatic_collections_are_off_while_long_lived_parts_build_and_as_before_after() -> None:
    with memory.building():
        with memory.building():  # two rooms rebuild at once
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()  # off before: off after
    try:
        with memory.building():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def _loaded(engines: Engines) -> Callable[..., Any]:
    async def load(*_args: Any, **_kwargs: Any) -> Engines:
        return engines

    return load



# -- degradation: a voice that fails ------------------------------------------------------------------------
class BrokenVoice:
    """Speaks ``good`` sentences, then fails (an ONNX runtime error, a corrupt model)."""

    def __init__(self, good: int = 0) -> None:
        self.good, self.calls = good, 0

    def sentences(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        self.calls += 1
        for i, sentence in enumerate(split_sentences(text)):
            if i >= self.good:
                raise RuntimeError("onnxruntime: bad model")
            yield sentence, np.ones(160, np.int16)


def test_the_fallback_voice_takes_over_the_rest_and_the_first_is_tried_again() -> None:
    now = FakeTime()
    primary = BrokenVoice(good=1)
    synth = FallbackSynth(primary, EspeakSynth(), retry_s=60, now=now)
    said = list(synth.sentences("It is ten. The light is on. Bye."))
    assert [s for s, _ in said] == ["It is ten.", "The light is on.", "Bye."]
    assert said[0][1].size == 160 and said[1][1].size > 1000  # the rest in espeak's voice
    assert synth.degraded == "voice failed: onnxruntime: bad model"
    list(synth.sentences("Again."))
    assert primary.calls == 1  # not retried within retry_s
    now.s += 61
    primary.good = 5
    assert [s for s, _ in synth.sentences("Back. Fine.")] == ["Back.", "Fine."]
    assert primary.calls == 2 and synth.degraded is None


def test_a_reply_said_again_is_played_from_what_was_kept() -> None:
    primary = BrokenVoice(good=5)
    synth = CachedSynth(primary, max_bytes=2 * 320)
    first = list(synth.sentences("Turned on the light. Done."))
    again = list(synth.sentences("Turned on the light. Done."))
    assert primary.calls == 1 and (synth.hits, synth.misses) == (1, 1)
    assert [s for s, _ in again] == [s for s, _ in first] and all(
        np.array_equal(a, b) for (_s, a), (_t, b) in zip(first, again, strict=True))
    # a reply cut short (a barge-in stops the voice between sentences) is not kept
    cut = synth.sentences("Closing. Opening.")
    next(cut)
    cut.close()
    list(synth.sentences("Closing. Opening."))
    assert primary.calls == 3
    # the oldest goes when what is kept passes max_bytes (two replies of 320 bytes here)
    list(synth.sentences("Bye."))
    list(synth.sentences("Turned on the light. Done."))
    assert primary.calls == 5


class CountingVoice:
    """Says every sentence as 160 samples; counts the replies it made (from any thread)."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def sentences(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        self.said.append(text)
        for sentence in split_sentences(text):
            yield sentence, np.ones(160, np.int16)


def test_replies_are_made_ahead_only_while_every_room_is_idle() -> None:
    voice = CountingVoice()
    synth = CachedSynth(voice)
    asked = threading.Semaphore(0)
    busy = threading.Event()
    busy.set()

    def idle() -> bool:
        asked.release()
        return not busy.is_set()

    try:
        synth.make_ahead(["Opening", "Closing", "Opening", ""], idle)
        assert asked.acquire(timeout=20) and asked.acquire(timeout=20)  # it looked twice: the room was busy
        assert voice.said == []
        busy.clear()
        for _ in range(1000):  # up to 20 s on a loaded machine
            if synth.keeps("Opening") and synth.keeps("Closing"):
                break
            threading.Event().wait(0.02)
        assert voice.said == ["Opening", "Closing"]  # each once, none empty
        assert [s for s, _ in synth.sentences("Closing")] == ["Closing"]
        assert (synth.hits, synth.misses, voice.said) == (1, 0, ["Opening", "Closing"])
        synth.make_ahead(["Closing"], idle)  # kept already: not made again
        synth.forget(idle)
    finally:
        synth.close()
    assert voice.said == ["Opening", "Closing"]
    # closed, it still speaks, and makes replies ahead again when asked (engines are shared)
    synth.make_ahead(["Done"], idle)
    try:
        for _ in range(1000):  # up to 20 s on a loaded machine
            if synth.keeps("Done"):
                break
            threading.Event().wait(0.02)
    finally:
        synth.close()
    assert voice.said == ["Opening", "Closing", "Done"]


def test_a_started_hub_makes_its_fixed_replies_ahead(engines: Engines, settings: Settings, agent: Agent) -> None:
    voice = CountingVoice()
    own = Engines(whisper=engines.whisper, synth=CachedSynth(voice))

    async def go() -> None:
        async with running_loop(settings, EventLog(), realtime=False, mqtt=False, engines=own, agent=agent):
            async with asyncio.timeout(20):
                while not own.synth.keeps("Turned on the light"):  # noqa: ASYNC110 - made in a worker thread
                    await asyncio.sleep(0.02)
        await own.close()

    asyncio.run(go())
    assert voice.said[0] == "Sorry, I didn't catch that." and "Turned on the light" in voice.said


def test_piper_makes_a_reply_ahead_that_is_then_played_from_what_it_kept(engines: Engines) -> None:
    synth = engines.synth
    assert isinstance(synth, CachedSynth)
    text = "Okay, I will wait for you in the hall."  # said by no test: not kept yet

    def idle() -> bool:
        return True

    synth.make_ahead([text], idle)
    try:
        for _ in range(1000):  # up to 20 s on a loaded machine
            if synth.keeps(text):
                break
            threading.Event().wait(0.02)
        hits = synth.hits
        said = list(synth.sentences(text))
    finally:
        synth.forget(idle)
    assert synth.hits == hits + 1
    assert sum(audio.size for _s, audio in said) > 16000 // 2  # Piper's voice: over half a second of speech


def test_the_fixed_replies_are_those_that_depend_on_nothing_said(agent: Agent) -> None:
    replies = fixed_replies(agent)
    assert replies[:2] == ["Sorry, I didn't catch that.", "Sorry, I couldn't understand that"]
    # the target's domain only: one for each domain of the home
    assert {"Turned on the light", "Turned off the fan", "Opening", "Timer paused"} <= set(replies)
    assert "Turned on the lawn mower" not in replies  # no mower in this home
    assert not [r for r in replies if "None" in r or "{" in r or "Added" in r]  # nothing with a slot
    assert "Hello from Home Assistant." not in replies  # the hub answers as itself
    assert "You're welcome." in replies


def test_a_reply_in_the_fallback_voice_is_not_kept() -> None:
    primary = BrokenVoice(good=0)
    synth = CachedSynth(FallbackSynth(primary, EspeakSynth(), retry_s=60, now=FakeTime()))
    list(synth.sentences("It is ten."))
    assert synth.degraded == "voice failed: onnxruntime: bad model"
    list(synth.sentences("It is ten."))
    assert synth.misses == 2 and synth.hits == 0


def test_a_hub_whose_voice_fails_still_answers_and_says_it_is_degraded(engines: Engines,
                                                                        settings: Settings) -> None:
    broken = Engines(whisper=engines.whisper, synth=FallbackSynth(BrokenVoice(), EspeakSynth()))

    async def go() -> None:
        async with served(broken, settings) as (_loop, url), aiohttp.ClientSession() as http:
            async with http.post(f"{url}/api/command", json={"text": "what time is it"}) as r:
                assert r.status == 202

            async def spoke() -> bool:  # the reply's first audio, in the fallback voice
                async with http.get(f"{url}/api/status") as r:
                    turns = (await r.json())["turns"]
                return bool(turns) and "first_audio" in turns[0]["latency_ms"]

            await wait_for(spoke)
            async with http.get(f"{url}/healthz") as r:
                report = await r.json()
            assert r.status == 200 and report["degraded"] == ["voice failed: onnxruntime: bad model"]
            async with http.get(f"{url}/metrics") as r:
                assert 'duplex_hub_degraded{component="voice"} 1.0' in await r.text()

    asyncio.run(go())


def test_the_cpu_of_a_run_is_told_by_thread() -> None:
    """A thread's CPU goes to its name; a thread Python did not start goes to NATIVE."""
    from hub_runtime.driver import NATIVE, by_thread_name, thread_cpu

    before = thread_cpu()
    if not before:
        pytest.skip("no /proc/self/task here")
    busy, done = threading.Event(), threading.Event()

    def burn() -> None:
        x = 0
        while not done.is_set():
            for i in range(20000):
                x += i * i
            busy.set()

    worker = threading.Thread(target=burn, name="burner", daemon=True)
    worker.start()
    busy.wait()
    assert worker.native_id is not None
    while thread_cpu().get(worker.native_id, 0.0) == 0.0:  # the clock counts in ticks: until one is counted
        done.wait(0.01)
    used = by_thread_name(before, thread_cpu())
    done.set()
    worker.join()
    assert used["burner"] > 0
    assert by_thread_name({1: 1.0}, {1: 1.5, 2: 0.25, worker.native_id: 0.0}) == {NATIVE: 0.75}
