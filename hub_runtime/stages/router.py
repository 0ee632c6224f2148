"""Router stage: a final transcript becomes intents and a reply, through the understanding service.

The :class:`~..understanding.Understanding` decides (the home grammar, then the LLM) and
carries out intents, here or by a controller whose result it awaits. Each intent is sent
as an IntentFrame before it is carried out (it is published; a controller answers it);
the reply goes out sentence by sentence as SpeakFrames, so the first is spoken before an
LLM answer is complete, then the whole reply as a ResponseFrame. When the reply asks the
user something, a session is opened upstream: the answer needs no wake word. An interruption cancels
this stage's task, which stops generation. Text to say (SayFrame) is replied with as is.
With several rooms, a spoken turn is first claimed from the arbiter (``arbitration.py``):
a room that heard the same words less loudly than another stays silent.

Consumes: TranscriptFrame, SayFrame, SpokenFrame (what was played, for the LLM's history).
Emits: IntentFrame, SpeakFrame, ResponseFrame, ArbitrationFrame; SessionFrame (upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Final

from ..arbitration import Arbiter
from ..frames import (
    ArbitrationFrame,
    Frame,
    IntentFrame,
    InterruptionFrame,
    ResponseFrame,
    ResumeFrame,
    SayFrame,
    SessionFrame,
    SpeakFrame,
    SpokenFrame,
    TranscriptFrame,
)
from ..grammar.automaton import tokenize
from ..pipeline import Direction, Stage
from ..smalltalk import is_local
from ..text import is_backchannel, is_question
from ..understanding import Recognized, Understanding, is_stop

INTERRUPT_PASS_S: Final = 2.0  # a stop the router decides passes the stages after it within this


class RouterStage(Stage):
    """Turns transcripts into intents and replies."""

    def __init__(self, understanding: Understanding, *, arbiter: Arbiter | None = None, site: str = "") -> None:
        """Answer through this understanding service; with an ``arbiter``, only turns this room wins."""
        super().__init__("router")
        self.understanding = understanding
        self.arbiter, self.site = arbiter, site

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Handle transcripts and text to say; forward the rest."""
        if isinstance(frame, TranscriptFrame):
            if frame.paused:
                decided = await self._stops_the_hub(frame)
                if decided is None:
                    return
                frame = decided
            if frame.text:
                await self._turn(frame)
            return
        if isinstance(frame, SayFrame):
            await self.push(SpeakFrame(text=frame.text, chime=frame.chime))
            return
        if isinstance(frame, SpokenFrame):
            self.understanding.heard(frame.text)
        await self.push(frame, direction)

    async def _stops_the_hub(self, frame: TranscriptFrame) -> TranscriptFrame | None:
        """Short words over the hub's paused reply: go on (a backchannel, a few unclear words), or stop.

        It stops for "stop" and its like, a command, or a question; then the words are a turn:
        the frame to answer is returned (the grammar's stop when it decided), else None. The
        grammar's small talk counts only when Whisper's own words say it too.
        """
        text = frame.text.strip()
        words = text.lower().split()
        said_stop = is_stop(text)
        intent = self.understanding.agent.recognize(text) if text else None
        recognized = intent is not None
        said = words  # the words that count as said
        if (intent is not None and is_local(intent.name) and not is_question(words, text)
                and tokenize(frame.open_text) != tokenize(text)):
            # the grammar's small talk that Whisper's own words do not say: short social
            # sentences are what it fits a listener's hum to ("uh huh", heard "Fuff": "bye bye";
            # "mm hmm", heard "And Anton.": "see you soon"); Whisper's words are what was said
            recognized, said = False, tokenize(frame.open_text)
        # Whisper's own words count too: the grammar fits "OK." to some sentence of its own
        backchannel = is_backchannel(text) or is_backchannel(frame.open_text)
        # Whisper alone often misses a short "stop" under the echo ("Let's talk.", "Start"); the
        # grammar alone fits a listener's "I see" to "cancel": its stop counts unless Whisper
        # heard a backchannel, a question or a command
        grammar_stop = (bool(frame.grammar_text) and is_stop(frame.grammar_text or "") and not recognized
                        and not backchannel and not is_question(words, text))
        matters = grammar_stop or (text and not backchannel and (
            said_stop or len(said) >= 3 or is_question(words, text) or recognized))
        if not matters:
            await self.push(ResumeFrame())
            return None
        passed = asyncio.Event()  # the reply downstream is gone before the new turn's frames follow
        await self.push(InterruptionFrame(done=passed))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(INTERRUPT_PASS_S):
                await passed.wait()
        if grammar_stop and not said_stop:  # the turn is the stop the grammar heard
            return replace(frame, text=frame.grammar_text or "", tier="grammar")
        return frame

    async def _turn(self, frame: TranscriptFrame) -> None:
        if self.arbiter is not None and frame.tier != "typed":
            claim = await self.arbiter.claim(self.site, frame.text)
            if len(claim.group) > 1:
                await self.push(ArbitrationFrame(
                    winner=next(c.site for c in claim.group if c.won), answered=claim.won,
                    candidates=[(c.site, round(c.level_db, 1), c.text) for c in claim.group]))
            if not claim.won:  # a louder room heard the same words: it answers
                await self.push(ResponseFrame(text="", source=None))
                return
        said: list[str] = []
        source: str | None = None
        expects = False
        async for piece in self.understanding.turn(frame.text, overlapped=frame.overlapped, unsure=frame.unsure):
            if isinstance(piece, Recognized):
                await self.push(IntentFrame(intent=piece.intent, intent_id=piece.intent_id, source=piece.source,
                                            text=frame.text, confidence=frame.confidence, call=piece.call))
                continue
            source = piece.source
            expects |= piece.expects_reply
            if piece.text:
                said.append(piece.text)
                await self.push(SpeakFrame(text=piece.text))
        if expects:  # the answer needs no wake word
            await self.push(SessionFrame(open=True, question=said[-1] if said else ""), Direction.UPSTREAM)
        await self.push(ResponseFrame(text=" ".join(said), source=source, expects_reply=expects))
