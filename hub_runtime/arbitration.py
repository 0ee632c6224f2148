"""Rooms that hear the same words: the loudest answers, the others stay silent.

Each room's loop has a :class:`LoudnessMeter` (an observer of its frames): while its VAD
hears speech it measures the microphone level of every frame, and at the end of the turn
keeps the mean of the loudest half of those frames, in dBFS — the same measure in every
room, so the room nearest the speaker reads highest. Before a room's router answers a
turn it *claims* it from the one :class:`Arbiter` of the process:

- no other room is hearing speech or has just claimed: it answers at once (one room, or
  the others are quiet: no delay);
- else the arbiter waits (at most ``window_ms``) for the other hearing rooms to claim
  too; claims whose words match (half the words shared) compete, and the loudest wins.
  Different words in two rooms are two turns: both answer.

Every competing room gets an ``arbitration`` event naming the winner and the candidates.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from .audio.native import frame_rms
from .frames import EndOfTurnFrame, Frame, InputAudioFrame, SpeechStartedFrame
from .pipeline import Direction, Stage

WINDOW_MS: Final = 600  # a claim waits at most this for the other rooms that hear speech
SAME_WORDS: Final = 0.5  # share of words two transcripts must share to be one utterance
_WORD: Final = re.compile(r"[a-z0-9']+")


def dbfs(rms: float) -> float:
    """An int16 RMS level in dB below full scale."""
    return 20 * math.log10(max(rms, 1e-3) / 32768)


class LoudnessMeter:
    """How loud one room heard its last utterance (an observer of the room's frames).

    ``busy`` while the room hears speech, and after its turn ended until the room claims
    it (its words are still being recognised): the other rooms wait for it.
    """

    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        """Nothing heard yet; ``on_change`` when the room stops being busy."""
        self.hearing = False
        self.ended_at: float | None = None  # the turn ended, not claimed yet (event-loop time)
        self.level_db = -120.0  # the last utterance's level
        self._levels: list[float] = []
        self._on_change = on_change

    def busy(self, now: float, window_s: float) -> bool:
        """Hearing, or a turn ended within the window and not claimed yet."""
        return self.hearing or (self.ended_at is not None and now - self.ended_at < window_s)

    def claimed(self) -> None:
        """The room claimed its turn."""
        self.ended_at = None
        self._on_change()

    def on_frame(self, source: Stage | None, frame: Frame, direction: Direction) -> None:
        """Measure speech frames between the VAD's start and the end of the turn."""
        if isinstance(frame, SpeechStartedFrame):
            self.hearing, self.ended_at, self._levels = True, None, []
        elif (isinstance(frame, InputAudioFrame) and self.hearing and frame.speech
              and source is not None and source.name == "vad"):  # as the VAD judged it (after echo cancelling)
            self._levels.append(frame_rms(frame.audio.samples_i16))
        elif isinstance(frame, EndOfTurnFrame) and self.hearing:
            self.hearing = False
            self.ended_at = None if frame.discard else asyncio.get_running_loop().time()
            if self._levels:
                loud = sorted(self._levels)[len(self._levels) // 2:]
                self.level_db = dbfs(float(np.mean(loud)))
            self._on_change()


@dataclass
class Claim:
    """One room's wish to answer an utterance."""

    site: str
    level_db: float
    text: str
    decided: asyncio.Event = field(default_factory=asyncio.Event)
    won: bool = True
    group: list[Claim] = field(default_factory=list)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def same_utterance(a: str, b: str) -> bool:
    """Whether two rooms' transcripts are one utterance (they share half their words)."""
    wa, wb = _words(a), _words(b)
    return bool(wa and wb) and len(wa & wb) / max(len(wa), len(wb)) >= SAME_WORDS


class Arbiter:
    """One per process: decides which room answers an utterance several rooms heard."""

    def __init__(self, window_ms: int = WINDOW_MS) -> None:
        """Wait at most ``window_ms`` for the other rooms."""
        self.window_s = window_ms / 1000
        self.meters: dict[str, LoudnessMeter] = {}
        self._open: list[Claim] = []  # claims waiting for a decision
        self.waiting: set[str] = set()  # rooms whose router waits for a decision
        self._changed = asyncio.Event()  # a room stopped being busy, or claimed

    def register(self, site: str) -> LoudnessMeter:
        """A room joins; its meter (an observer for its loop)."""
        return self.meters.setdefault(site, LoudnessMeter(self._changed.set))

    def _others_busy(self, site: str) -> bool:
        """Another room is in the middle of an utterance, or recognising one."""
        now = asyncio.get_running_loop().time()
        return any(m.busy(now, self.window_s) for s, m in self.meters.items() if s != site)

    async def claim(self, site: str, text: str) -> Claim:
        """May ``site`` answer ``text``? Its claim, decided (``won``), with the competing claims."""
        meter = self.meters.get(site)
        me = Claim(site, meter.level_db if meter else -120.0, text)
        rivals = [c for c in self._open if same_utterance(c.text, text) and c.site != site]
        if not rivals and not self._others_busy(site):
            me.group = [me]
            me.decided.set()
            if meter is not None:
                meter.claimed()
            return me
        self._open.append(me)
        if meter is not None:
            meter.claimed()
        self.waiting.add(site)
        try:
            return await self._decide(me, text, rivals)
        finally:
            self.waiting.discard(site)

    async def _decide(self, me: Claim, text: str, rivals: list[Claim]) -> Claim:
        site = me.site
        if rivals:  # the first claim of the group decides for all
            await me.decided.wait()
            return me
        deadline = asyncio.get_running_loop().time() + self.window_s
        while self._others_busy(site):  # the other rooms finish their turns and claim, or go quiet
            self._changed.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._changed.wait()
            except TimeoutError:
                break
        group = [c for c in self._open if c is me or same_utterance(c.text, text)]
        self._open = [c for c in self._open if c not in group]
        winner = max(group, key=lambda c: c.level_db)
        for c in group:
            c.won, c.group = c is winner, group
            c.decided.set()
        return me
