"""Router stage: a final transcript becomes an intent and a reply.

Grammar first (hassil over the home grammar); the LLM (``llm/``) for what the grammar
does not match, or for every turn when ``llm.prefer_local`` is false. The LLM's sentences
are pushed one by one as they are generated, so the first is spoken before the answer is
complete; an interruption cancels this stage's task, which stops generation. In wake-word
mode, turns outside a session are dropped.

Consumes: TranscriptFrame, SpeakFrame (passes it on).
Emits: IntentFrame, SpeakFrame (events ``intent``, ``response``).
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from ..agent import Agent
from ..frames import Frame, IntentFrame, SpeakFrame, TranscriptFrame
from ..pipeline import Direction, Stage
from .state import Activity, DialogueState

if TYPE_CHECKING:
    from ..llm.dialogue import LlmDialogue

_LOGGER = logging.getLogger(__name__)


class RouterStage(Stage):
    """Turns transcripts into intents and replies."""

    def __init__(self, agent: Agent, state: DialogueState, llm: LlmDialogue | None = None,
                 *, prefer_local: bool = True) -> None:
        """Answer with this agent (and this LLM dialogue, if any)."""
        super().__init__("router")
        self.agent = agent
        self.state = state
        self.llm = llm
        self.prefer_local = prefer_local

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Handle transcripts; forward the rest."""
        if isinstance(frame, TranscriptFrame):
            await self._transcript(frame)
            return
        if isinstance(frame, SpeakFrame):
            self.state.replying = True
        await self.push(frame, direction)

    async def _transcript(self, frame: TranscriptFrame) -> None:
        now = self.now_ms()
        if not frame.text or not self.state.in_session(now):
            if not self.state.replying:
                self.state.activity = Activity.IDLE
            return
        self.state.activity = Activity.THINKING
        reply = self.agent.respond(frame.text) if self.prefer_local or self.llm is None else None
        if (reply is None or reply.intent is None) and self.llm is not None:
            await self._llm_turn(frame, now)
            return
        assert reply is not None
        if reply.intent is not None:
            intent = reply.intent
            self.emit("intent", id=uuid.uuid4().hex, name=intent.name, slots=intent.slots,
                      targets=intent.targets, source=reply.source, text=frame.text,
                      confidence=round(frame.confidence, 3), error=intent.error)
            await self.push(IntentFrame(intent=intent, source=reply.source or "grammar"))
        self.emit("response", text=reply.response)
        self.state.extend_session(now)
        if reply.response:
            self.state.replying = True
            await self.push(SpeakFrame(text=reply.response))
        else:
            self.state.activity = Activity.IDLE

    async def _llm_turn(self, frame: TranscriptFrame, now: int) -> None:
        from ..llm.dialogue import Act

        assert self.llm is not None
        said: list[str] = []
        async for item in self.llm.turn(frame.text):
            if isinstance(item, Act):
                intent = item.intent
                self.emit("intent", id=uuid.uuid4().hex, name=intent.name, slots=intent.slots,
                          targets=intent.targets, source="llm", text=frame.text,
                          confidence=round(frame.confidence, 3), error=intent.error, call=item.call)
                await self.push(IntentFrame(intent=intent, source="llm"))
                text = item.response
            else:
                text = item.text
            if text:
                said.append(text)
                self.state.replying = True
                await self.push(SpeakFrame(text=text))
        self.emit("response", text=" ".join(said), source="llm")
        self.state.extend_session(now)
        if not said:
            self.state.activity = Activity.IDLE
