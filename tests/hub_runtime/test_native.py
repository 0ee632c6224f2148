"""The C audio path against its numpy twin: the same outputs, and the twin forced by the environment."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from hub_runtime.audio import echo_twin, twin
from hub_runtime.audio.synthetic import measure_echo, room_response, speak

native: Any = pytest.importorskip("hub_runtime._native", reason="the C extension is not built (no compiler?)")
echo: Any = pytest.importorskip("hub_runtime._echo", reason="the C echo canceller is not built (libspeexdsp-dev?)")
IMPLS = [pytest.param(native, id="c"), pytest.param(twin, id="numpy")]
ECHO_IMPLS = [pytest.param(echo, id="c"), pytest.param(echo_twin, id="numpy")]
RNG = np.random.default_rng(7)


def frames() -> list[np.ndarray]:
    loud = RNG.integers(-32768, 32768, 480).astype(np.int16)
    return [np.zeros(480, np.int16), loud, speak("turn on the light", "en-us")[:480 * 10],
            np.full(160, -32768, np.int16), np.zeros(0, np.int16)]


def test_frame_energy_is_the_same() -> None:
    for f in frames():
        assert native.frame_rms(f) == pytest.approx(twin.frame_rms(f), rel=1e-12, abs=1e-12)
    assert native.frame_rms(np.full(480, 1000, np.int16)) == pytest.approx(1000.0)


def test_int16_float_round_trips_are_the_same() -> None:
    for f in frames():
        a, b = np.empty(f.size, np.float32), np.empty(f.size, np.float32)
        native.int16_to_float(f, a)
        twin.int16_to_float(f, b)
        assert np.array_equal(a, b)
        back_a, back_b = np.empty(f.size, np.int16), np.empty(f.size, np.int16)
        native.float_to_int16(a, back_a)
        twin.float_to_int16(b, back_b)
        assert np.array_equal(back_a, back_b) and np.array_equal(back_a, f)
    over = np.array([1.5, -1.5, 0.5 / 32768, 1.5 / 32768, -0.99999], np.float32)
    a, b = np.empty(5, np.int16), np.empty(5, np.int16)
    native.float_to_int16(over, a)
    twin.float_to_int16(over, b)
    assert np.array_equal(a, b) and a.tolist() == [32767, -32768, 0, 2, -32768]


def test_bad_buffers_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match="int16"):
        native.frame_rms(np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="shorter"):
        native.int16_to_float(np.zeros(4, np.int16), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="positive"):
        native.Resampler(0, 16000)


@pytest.mark.parametrize("src", [48000, 44100, 8000, 16000])
def test_the_resampler_streams_like_its_twin(src: int) -> None:
    t = np.arange(src // 2) / src
    tone = (8000 * np.sin(2 * np.pi * 440 * t) + RNG.normal(0, 300, t.size)).astype(np.int16)
    outs = []
    for impl in (native, twin):
        r = impl.Resampler(src, 16000)
        got = []
        for chunk in np.array_split(tone, 7):  # uneven device periods
            out = np.empty(r.max_out(chunk.size), np.int16)
            got.append(out[: r.process(chunk, out)].copy())
        outs.append(np.concatenate(got))
    c, py = outs
    assert c.size == py.size and abs(c.size - t.size * 16000 // src) <= 2 + 2 * twin.HALF_TAPS
    assert np.max(np.abs(c.astype(int) - py.astype(int))) <= 1  # libm and numpy's sin may differ by an ulp
    # it is a resampler: the 440 Hz tone is still at 440 Hz, at the same level
    spectrum = np.abs(np.fft.rfft(c[200:-200].astype(np.float64)))
    peak_hz = np.argmax(spectrum) * 16000 / (c.size - 400)
    assert abs(peak_hz - 440) < 10
    assert np.std(c[200:-200]) == pytest.approx(np.std(tone.astype(np.float64)), rel=0.1)


def test_a_stream_gives_what_one_call_gives() -> None:
    x = RNG.integers(-20000, 20000, 4410).astype(np.int16)
    whole = native.Resampler(44100, 16000)
    out = np.empty(whole.max_out(x.size), np.int16)
    one = out[: whole.process(x, out)].copy()
    parts = native.Resampler(44100, 16000)
    got = []
    for chunk in np.array_split(x, 13):
        buf = np.empty(parts.max_out(chunk.size), np.int16)
        got.append(buf[: parts.process(chunk, buf)].copy())
    assert np.array_equal(np.concatenate(got), one)


@pytest.mark.parametrize("impl", IMPLS)
def test_the_ring_buffer_keeps_order_and_drops_what_does_not_fit(impl: Any) -> None:
    ring = impl.RingBuffer(1000)
    assert ring.capacity == 1024 and ring.available() == 0
    assert ring.write(np.arange(600, dtype=np.int16)) == 600
    out = np.empty(500, np.int16)
    assert ring.read_into(out) == 500 and np.array_equal(out, np.arange(500))
    assert ring.write(np.arange(600, 1600, dtype=np.int16)) == 924  # 100 waiting: 924 fit
    rest = np.empty(2000, np.int16)
    n = ring.read_into(rest)
    assert n == 1024 and np.array_equal(rest[:n], np.arange(500, 1524))


def test_the_c_ring_buffer_between_two_threads() -> None:
    """The device thread writes while the loop reads: every sample arrives once, in order."""
    ring = native.RingBuffer(4096)
    total, got = 200_000, []
    data = (np.arange(total) % 30000).astype(np.int16)

    def produce() -> None:
        i = 0
        while i < total:
            i += ring.write(data[i:i + 480])

    producer = threading.Thread(target=produce)
    producer.start()
    out = np.empty(1000, np.int16)
    received = 0
    while received < total:
        n = ring.read_into(out)
        got.append(out[:n].copy())
        received += n
    producer.join()
    assert np.array_equal(np.concatenate(got), data)


def test_the_environment_forces_the_twins() -> None:
    code = ("from hub_runtime.audio import native; print(native.IMPLEMENTATION, native.Resampler.__module__, "
            "native.ECHO_IMPLEMENTATION, native.EchoCanceller.__module__)")
    env = {**os.environ, "DUPLEX_HUB_PURE": "1"}
    forced = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert forced.stdout.split() == ["numpy", "hub_runtime.audio.twin", "numpy", "hub_runtime.audio.echo_twin"]
    env["DUPLEX_HUB_PURE"] = "0"
    default = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert default.stdout.split() == ["c", "hub_runtime._native", "c", "hub_runtime._echo"]


@pytest.fixture(scope="module")
def hub_and_talker() -> tuple[np.ndarray, np.ndarray]:
    """The hub's long answer (13 s) and a talker who barges in over it."""
    answer = speak("It is twenty one degrees in the living room and the kitchen light is on. "
                   "I can set timers and play music.", "en-us+f3")
    return np.concatenate([answer, answer]), speak("stop, turn off the kitchen light", "en-us")


@pytest.mark.parametrize("impl", ECHO_IMPLS)
@pytest.mark.parametrize(("delay_ms", "gain"), [(20, 0.2), (120, 0.8)])
def test_the_echo_goes_and_the_talker_stays(impl: Any, delay_ms: int, gain: float,
                                            hub_and_talker: tuple[np.ndarray, np.ndarray]) -> None:
    """In a room with a reverberant tail: the hub's echo is cancelled, a barge-in over it is kept."""
    far, near = hub_and_talker
    report = measure_echo(impl.EchoCanceller(480, 4800, 16000), far, near, room_response(delay_ms, gain, seed=3))
    assert report.erle_db >= 12, report
    assert report.near_level_db >= -3, report  # the residual suppression lets the talker through
    # what is left with the talker (echo, the suppressor's distortion) stays 8 dB under it; speex's
    # preprocessor distorts at about -12 dB, so a loud talker over a quiet echo gains nothing
    assert report.near_snr_out_db >= 8.0, report
    # without residual suppression the linear filter alone cancels less
    linear = measure_echo(impl.EchoCanceller(480, 4800, 16000, suppress_db=0, suppress_active_db=0), far, near,
                          room_response(delay_ms, gain, seed=3))
    assert linear.erle_db < report.erle_db - 3, (linear, report)


def test_the_twin_cancels_like_speex(hub_and_talker: tuple[np.ndarray, np.ndarray]) -> None:
    far, near = hub_and_talker
    room = room_response(60, 0.5, seed=4)
    c = measure_echo(echo.EchoCanceller(480, 4800, 16000), far, near, room)
    py = measure_echo(echo_twin.EchoCanceller(480, 4800, 16000), far, near, room)
    assert abs(c.erle_db - py.erle_db) < 10 and abs(c.near_level_db - py.near_level_db) < 2, (c, py)


@pytest.mark.parametrize("impl", ECHO_IMPLS)
def test_the_echo_canceller_is_one_frame_late_and_refuses_bad_frames(impl: Any) -> None:
    aec = impl.EchoCanceller(480, 4800, 16000)
    assert (aec.frame, aec.filter, aec.rate) == (480, 4800, 16000)
    talk = (RNG.normal(0, 3000, 480 * 20)).astype(np.int16)
    silence, out = np.zeros(480, np.int16), np.empty(480, np.int16)
    got = []
    for i in range(0, talk.size, 480):
        aec.process(talk[i:i + 480], silence, out)
        got.append(out.copy())
    cleaned = np.concatenate(got)
    corr = [float(np.corrcoef(cleaned[lag:lag + 4800], talk[:4800])[0, 1]) for lag in (0, 480)]
    assert corr[0] < 0.2 and corr[1] > 0.97, corr  # a silent hub: the talker passes whole
    assert not aec.suppressing
    aec.process(talk[:480], talk[480:960], out)  # the hub plays: its residue is suppressed ...
    assert aec.suppressing
    for _ in range(4800 // 480 + 1):  # ... until its echo tail has died away
        aec.process(talk[:480], silence, out)
    assert not aec.suppressing
    with pytest.raises(ValueError, match="480"):
        aec.process(np.zeros(100, np.int16), silence, out)
    with pytest.raises(TypeError, match="int16"):
        aec.process(np.zeros(480, np.float32), silence, out)
    with pytest.raises(ValueError, match="own"):
        aec.process(talk[:480], silence, out, out)


@pytest.mark.parametrize("impl", ECHO_IMPLS)
def test_the_echo_canceller_gives_the_frame_itself_before_its_preprocessor(impl: Any) -> None:
    """``now``: the linear filter's output for the frame itself, what ``out`` holds a frame later."""
    aec = impl.EchoCanceller(480, 4800, 16000)
    talk = (RNG.normal(0, 3000, 480 * 20)).astype(np.int16)
    silence, out, now = np.zeros(480, np.int16), np.empty(480, np.int16), np.empty(480, np.int16)
    late, early = [], []
    for i in range(0, talk.size, 480):
        aec.process(talk[i:i + 480], silence, out, now)
        late.append(out.copy())
        early.append(now.copy())
    for lagged, lead in zip(late[2:], early[1:-1], strict=True):  # a silent hub: the same audio, a frame apart
        assert float(np.corrcoef(lagged, lead)[0, 1]) > 0.97
    assert all(float(np.corrcoef(e, talk[i * 480:(i + 1) * 480])[0, 1]) > 0.97 for i, e in enumerate(early))
    with pytest.raises(ValueError, match="own"):
        aec.process(out, silence, out)
    with pytest.raises(ValueError, match="0 dB or less"):
        impl.EchoCanceller(480, 4800, 16000, suppress_db=6)
    with pytest.raises(ValueError, match="one frame"):
        impl.EchoCanceller(480, 100, 16000)
    aec.reset()


def test_a_48_khz_device_feeds_the_loop_16_khz_frames_and_plays_its_frames() -> None:
    """The device's callback (here called from a thread, as PortAudio does) through the rings and resamplers."""
    import asyncio

    from hub_runtime.audio.devices import LiveDuplex
    from hub_runtime.settings import AudioSettings, Settings

    settings = Settings(audio=AudioSettings(device_rate=48000))
    t = np.arange(48000) / 48000
    tone = (6000 * np.sin(2 * np.pi * 300 * t)).astype(np.int16)

    async def go() -> tuple[np.ndarray, np.ndarray]:
        device = LiveDuplex(settings, open_stream=False)
        assert device.block == 1440
        played = bytearray(device.block * 2)
        outs: list[bytes] = []

        def feed() -> None:
            for i in range(0, tone.size, device.block):
                device._callback(tone[i:i + device.block].tobytes(), played, device.block, None, None)
                outs.append(bytes(played))

        frames = device.frames()
        got = []
        for _ in range(3):  # the speaker's next frames: a 16 kHz tone for the device to play at 48 kHz
            device.play((3000 * np.sin(2 * np.pi * 500 * np.arange(480) / 16000)).astype(np.int16))
        feeder = threading.Thread(target=feed)
        feeder.start()
        while len(got) < 30:
            got.append(await anext(frames))
        feeder.join()
        await frames.aclose()  # type: ignore[attr-defined]
        return np.concatenate(got), np.frombuffer(b"".join(outs[:3]), np.int16)

    mic, speaker = asyncio.run(go())
    assert mic.size == 30 * 480 and mic.dtype == np.int16
    spectrum = np.abs(np.fft.rfft(mic[480:].astype(np.float64)))
    assert abs(np.argmax(spectrum) * 16000 / (mic.size - 480) - 300) < 5
    assert np.std(speaker[200:4000]) > 1000  # what the loop gave was played, at 48 kHz
