"""Understanding: text in, intent, reply and source out — one path for every way text comes in.

Speech (the router stage), MQTT ``ask`` (and so Home Assistant's conversation agent) and
``hub-runtime ask`` all go through :meth:`Understanding.turn`: the same options
(``llm.prefer_local``), the same order (the home grammar, then the LLM), the same way of
carrying out an intent (here when standalone, else by the controller; for an ``ask``
answered to a controller, the asker executes it and the hub only renders its reply).

A turn is a stream of pieces: :class:`Recognized` (an intent, before it is carried out,
so that it can be published and a controller can answer it) and :class:`Said` (reply
text, sentence by sentence for the LLM), so that speech is spoken while the LLM is
still writing.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .agent import Agent
from .engines.base import LlmEngine
from .nlu import Intent
from .settings import Settings

if TYPE_CHECKING:
    from .llm.dialogue import LlmDialogue

NO_INTENT_RESPONSE: Final = "Sorry, I couldn't understand that"


@dataclass(frozen=True)
class Recognized:
    """An intent of the turn, about to be carried out."""

    intent: Intent
    intent_id: str
    source: str  # grammar | llm
    call: str | None = None  # the LLM's call as it wrote it


@dataclass(frozen=True)
class Said:
    """Reply text (a sentence or the whole reply)."""

    text: str
    source: str | None  # grammar | llm | None (nothing matched)


@dataclass(frozen=True)
class Reply:
    """A whole turn, collected (``ask``)."""

    text: str
    intent: Intent | None
    intent_id: str | None
    source: str | None  # grammar | llm | None
    response: str

    @property
    def success(self) -> bool:
        """An intent matched and was resolved without error."""
        return self.intent is not None and self.intent.error is None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object printed by ``hub-runtime ask``."""
        return {"text": self.text, "intent": self.intent.to_dict() if self.intent else None,
                "source": self.source, "response": self.response}


class Understanding:
    """One room's understanding: the home's grammar first, then its LLM."""

    def __init__(self, agent: Agent, llm: LlmDialogue | None, *, prefer_local: bool = True) -> None:
        """Understand against ``agent``'s home; ``llm`` None: the grammar alone."""
        self.agent = agent
        self.llm = llm
        self.prefer_local = prefer_local

    @classmethod
    def build(cls, settings: Settings, agent: Agent, engine: LlmEngine | None) -> Understanding:
        """The understanding these settings ask for, with an LLM dialogue over ``engine``."""
        llm = None
        if engine is not None and settings.llm.enabled:
            from .llm.dialogue import LlmDialogue

            llm = LlmDialogue(settings, engine, agent)
        return cls(agent, llm, prefer_local=settings.llm.prefer_local)

    def needs_llm(self, text: str) -> bool:
        """Whether this text would go to the LLM (a caller may load one only then)."""
        text = text.strip()
        return bool(text) and (not self.prefer_local or self.agent.recognize(text) is None)

    def heard(self, text: str) -> None:
        """The speaker played these words of a reply (the LLM's history keeps only those)."""
        if self.llm is not None:
            self.llm.spoken.add(text)

    async def turn(self, text: str, *, delegate: bool = False,
                   spoken: bool = True) -> AsyncIterator[Recognized | Said]:
        """Understand one turn and carry it out; stopping the iteration stops it.

        ``delegate``: the asker executes the intent when a controller is set (``ask``).
        ``spoken``: the reply will be played (the LLM's history keeps what was heard).
        """
        text = text.strip()
        use_grammar = self.prefer_local or self.llm is None
        intent = self.agent.recognize(text) if text and use_grammar else None
        if intent is not None:
            async for piece in self._act(intent, "grammar", delegate):
                yield piece
            return
        if self.llm is None or not text:
            yield Said(NO_INTENT_RESPONSE, None)
            return
        from .llm.dialogue import Act

        async for item in self.llm.turn(text, spoken=spoken):
            if isinstance(item, Act):
                async for piece in self._act(item.intent, "llm", delegate, call=item.call):
                    yield piece
            else:
                yield Said(item.text, "llm")

    async def _act(self, intent: Intent, source: str, delegate: bool,
                   call: str | None = None) -> AsyncIterator[Recognized | Said]:
        intent_id = uuid.uuid4().hex
        if not delegate:
            self.agent.expect(intent_id)  # before the intent is published: the result may come fast
        yield Recognized(intent, intent_id, source, call)
        outcome = await self.agent.act(intent, intent_id=intent_id, delegate=delegate)
        yield Said(outcome.response, source)

    async def answer(self, text: str, *, delegate: bool = False,
                     on_intent: Callable[[Recognized], None] | None = None) -> Reply:
        """A whole turn as text (``ask``); ``on_intent`` sees the intent before it is carried out."""
        recognized: Recognized | None = None
        said: list[str] = []
        source: str | None = None
        async for piece in self.turn(text, delegate=delegate, spoken=False):
            if isinstance(piece, Recognized):
                recognized = piece
                if on_intent is not None:
                    on_intent(piece)
            else:
                source = piece.source
                if piece.text:
                    said.append(piece.text)
        return Reply(text=text, intent=recognized.intent if recognized else None,
                     intent_id=recognized.intent_id if recognized else None, source=source,
                     response=" ".join(said))
