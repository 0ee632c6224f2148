"""Configuration: validation messages, exit status, the shipped file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hub_runtime import settings as s
from hub_runtime.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_config_loads() -> None:
    cfg = s.load(ROOT / "config" / "real_time.yaml")
    assert cfg.audio.chunk_size == 480
    assert cfg.audio.vad_threshold == 0.78
    assert cfg.model.max_new_tokens == 64
    assert cfg.model.repetition_penalty == 1.2
    assert cfg.model.temperature == 0.7
    assert cfg.frame_ms == 30
    assert cfg.catalog and Path(cfg.catalog).is_file()


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"audio": {"chunk_size": 500}}, "audio.chunk_size: 500 is not a multiple of 160 samples (10 ms)"),
        ({"audio": {"chunk_size": "big"}}, "audio.chunk_size: 'big' is not a whole number of samples"),
        ({"audio": {"vad_threshold": 1.5}}, "audio.vad_threshold: 1.5 is out of range (allowed 0.0 to 1.0)"),
        ({"audio": {"vad_engine": "magic"}}, "audio.vad_engine: 'magic' is not allowed (allowed: webrtcvad, silero)"),
        ({"audio": {"chunksize": 480}}, "audio.chunksize: unknown key (allowed: chunk_size"),
        ({"turn": {"complete_silence_ms": 900, "incomplete_silence_ms": 600}},
         "turn.complete_silence_ms: 900 is longer"),
        ({"audio": {"echo_suppress_db": 10}}, "audio.echo_suppress_db: 10 is out of range (allowed -90 to 0)"),
        ({"hardware": {"use_npu": "yes"}}, "hardware.use_npu: 'yes' is not true or false"),
        ({"audio": 3}, "audio: is not a mapping of keys"),
        ({"mqtt": {"port": 0}}, "mqtt.port: 0 is out of range"),
        ({"mqtt": {"protocol": "4"}}, "mqtt.protocol: '4' is not allowed"),
        ({"mqtt": {"protocol": 5}}, "mqtt.protocol: 5 needs mqtt.host"),
        ({"mqtt": {"hub_id": "a/b"}}, "mqtt.hub_id: is not a plain id"),
    ],
)
def test_bad_config_names_key_and_reason(doc: dict, message: str) -> None:
    with pytest.raises(s.SettingsError) as err:
        s.parse(doc)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_cli_bad_config_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("audio:\n  chunk_size: 500\n")
    assert main(["ask", "--config", str(cfg), "--json", "turn on the kitchen light"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hub-runtime: audio.chunk_size: 500 is not a multiple of 160 samples (10 ms)"]


def test_cli_not_audio_exits_2(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.wav"
    bogus.write_text("this is not audio")
    proc = subprocess.run(
        [sys.executable, "-m", "hub_runtime", "run", "--input", str(bogus), "--events",
         str(tmp_path / "ev.jsonl")], capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "not a WAV audio file" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_catalog_names_the_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cat = tmp_path / "cat.yaml"
    cat.write_text("entities:\n  - entity_id: Kitchen\n    name: K\n")
    assert main(["ask", "--catalog", str(cat), "hi"]) == 2
    assert "catalog: entities.0.entity_id: 'Kitchen' is not an entity id" in capsys.readouterr().err
