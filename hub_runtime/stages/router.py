"""Router stage: a final transcript becomes an intent and a reply.

Grammar first (hassil over the home grammar); the LLM (``llm/``) for what the grammar
does not match, or for every turn when ``llm.prefer_local`` is false. Intents are carried
out by the agent: here (standalone) or by a controller such as Home Assistant, whose
result is awaited and spoken. The LLM's sentences
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

from ..agent import NO_INTENT_RESPONSE, Agent
from ..frames import Frame, IntentFrame, SpeakFrame, TranscriptFrame
from ..home import Outcome
from ..nlu import Intent
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
        intent = self.agent.recognize(frame.text) if self.prefer_local or self.llm is None else None
        if intent is None and self.llm is not None:
            await self._llm_turn(frame, now)
            return
        if intent is None:
            response = NO_INTENT_RESPONSE
        else:
            outcome = await self._act(intent, "grammar", frame)
            response = outcome.response
        self.emit("response", text=response)
        self.state.extend_session(now)
        if response:
            self.state.replying = True
            await self.push(SpeakFrame(text=response))
        else:
            self.state.activity = Activity.IDLE

    async def _act(self, intent: Intent, source: str, frame: TranscriptFrame,
                   call: str | None = None) -> Outcome:
        """Publish the intent (event ``intent``) and carry it out, here or by the controller."""
        intent_id = uuid.uuid4().hex
        self.agent.expect(intent_id)
        extra = {"call": call} if call is not None else {}
        self.emit("intent", id=intent_id, name=intent.name, slots=intent.slots,
                  targets=intent.targets, source=source, text=frame.text,
                  confidence=round(frame.confidence, 3), error=intent.error, **extra)
        await self.push(IntentFrame(intent=intent, source=source))
        return await self.agent.act(intent, intent_id=intent_id)

    async def _llm_turn(self, frame: TranscriptFrame, now: int) -> None:
        from ..llm.dialogue import Act

        assert self.llm is not None
        said: list[str] = []
        async for item in self.llm.turn(frame.text):
            if isinstance(item, Act):
                outcome = await self._act(item.intent, "llm", frame, call=item.call)
                text = outcome.response
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
