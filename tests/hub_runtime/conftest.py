"""Shared fixtures: settings, engines loaded once, synthetic speech."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hub_runtime.agent import Agent
from hub_runtime.audio.format import Int16Array
from hub_runtime.audio.synthetic import speak
from hub_runtime.engines import Engines
from hub_runtime.runner import RunResult, run_file
from hub_runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CATALOG = ROOT / "config" / "catalog.example.yaml"


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The embedded defaults."""
    return Settings()


@pytest.fixture(scope="session")
def shared_engines(settings: Settings) -> Engines:
    """Whisper and Piper, loaded once for the session (no LLM: the LLM tests load their own)."""
    return asyncio.run(Engines.load(settings, llm=False))


@pytest.fixture
def engines(shared_engines: Engines) -> Engines:
    """The shared models."""
    return shared_engines


@pytest.fixture
def agent(settings: Settings) -> Agent:
    """A fresh agent: its own in-memory home."""
    return Agent.from_settings(settings)


@pytest.fixture(scope="session")
def voice() -> Callable[..., Int16Array]:
    """Synthesise a user utterance (cached)."""
    cache: dict[tuple[Any, ...], Int16Array] = {}

    def make(text: str, v: str = "piper", speed: float = 1.0) -> Int16Array:
        key = (text, v, speed)
        if key not in cache:
            cache[key] = speak(text, v, speed=speed)
        return cache[key]

    return make


@pytest.fixture
def run(engines: Engines, settings: Settings) -> Callable[..., RunResult]:
    """Run a microphone track through a loop (a fresh home each run) in fast mode."""

    def go(mic: Int16Array, **kwargs: Any) -> RunResult:
        s = kwargs.pop("settings", settings)
        return asyncio.run(run_file(s, mic, engines=engines, agent=Agent.from_settings(s), **kwargs))

    return go


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events of one type."""
    return [e for e in events if e["type"] == kind]
