"""Spoken in-grammar commands for the benchmarks: text, voice, speed, noise, reverb."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

COMMANDS = [
    "turn on the kitchen light",
    "turn off the living room lamp",
    "switch on the christmas tree",
    "turn off the zigbee plug",
    "is the kitchen light on",
    "open the garage door",
    "close the bedroom blinds",
    "set the bedroom blinds to fifty percent",
    "set the kitchen light brightness to thirty percent",
    "make the reading lamp red",
    "set the temperature to twenty two degrees",
    "what time is it",
    "turn on the office fan",
    "turn off the lights in the bedroom",
    "toggle the christmas tree",
    "what is the outside temperature",
    "turn on the ceiling light",
    "is the garage door open",
    "set the living room lamp to blue",
    "never mind",
    "turn on the lights in the kitchen",
    "turn off the office fan",
    "could you turn on the bedroom light",
    "set the kitchen light to green",
    "close the garage door",
    "turn the bedroom light off",
    "set the reading lamp brightness to eighty percent",
    "switch off the christmas tree",
    "open the bedroom blinds",
    "turn on the zigbee plug please",
]
VOICES = [("piper", 1.0), ("en-us", 1.0), ("piper", 1.25), ("en-us+f3", 0.9), ("piper", 0.85),
          ("en-gb", 1.0), ("en-us+m3", 1.1)]


@dataclass(frozen=True)
class Case:
    """One spoken command and how it is rendered."""

    text: str
    voice: str
    speed: float
    noise_rms: float
    reverb: bool


def cases(n: int | None = None) -> list[Case]:
    """Commands crossed with voices, every third noisy, every fourth reverberant."""
    out = []
    for i, (text, (voice, speed)) in enumerate(zip(COMMANDS, itertools.cycle(VOICES), strict=False)):
        out.append(Case(text, voice, speed, 300.0 if i % 3 == 0 else 0.0, i % 4 == 1))
    return out[:n] if n else out
