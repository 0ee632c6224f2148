"""Router stage: a final transcript becomes an intent and a reply.

Grammar first (hassil over the home grammar); the LLM issue adds the model for what
the grammar does not match. In wake-word mode, turns outside a session are dropped.

Consumes: TranscriptFrame, SpeakFrame (passes it on).
Emits: IntentFrame, SpeakFrame (events ``intent``, ``response``).
"""

from __future__ import annotations

import logging
import uuid

from ..agent import Agent
from ..frames import Frame, IntentFrame, SpeakFrame, TranscriptFrame
from ..pipeline import Direction, Stage
from .state import Activity, DialogueState

_LOGGER = logging.getLogger(__name__)


class RouterStage(Stage):
    """Turns transcripts into intents and replies."""

    def __init__(self, agent: Agent, state: DialogueState) -> None:
        """Answer with this agent."""
        super().__init__("router")
        self.agent = agent
        self.state = state

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
        reply = self.agent.respond(frame.text)
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
