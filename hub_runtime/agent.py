"""The agent: text in, intent and reply out, against the home's grammar.

One agent serves every dialogue loop of a home: it owns the catalog, the grammar and
the NLU built from them, and swaps them atomically when the catalog changes. It also
knows who carries out intents: the hub itself, or a controller (``controller.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from .catalog import Catalog
from .controller import Controller, Results
from .grammar import HomeGrammar
from .home import Home, Outcome
from .nlu import Intent, Nlu
from .settings import Settings

_LOGGER = logging.getLogger(__name__)

NO_INTENT_RESPONSE = "Sorry, I couldn't understand that"


@dataclass(frozen=True)
class Reply:
    """The agent's answer to one turn."""

    text: str
    intent: Intent | None
    source: str | None  # "grammar" | "llm" | None
    response: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON object printed by ``hub-runtime ask``."""
        return {
            "text": self.text,
            "intent": self.intent.to_dict() if self.intent else None,
            "source": self.source,
            "response": self.response,
        }


class HomeModel:
    """The grammar, NLU and standalone executor for one version of the catalog."""

    def __init__(self, catalog: Catalog, settings: Settings) -> None:
        """Build everything that depends on the catalog's names."""
        self.catalog = catalog
        self.grammar = HomeGrammar(catalog, language=settings.language,
                                   site_area=settings.site_area)
        self.nlu = Nlu(self.grammar, catalog)
        self.home = Home(catalog, self.grammar)


class Agent:
    """Answers text turns against the current home model."""

    def __init__(self, model: HomeModel) -> None:
        """Start with this home model, standalone (no controller)."""
        self.model = model
        self.controller: Controller | None = None
        self.results = Results()

    @classmethod
    def from_settings(cls, settings: Settings) -> Agent:
        """Load the configured (or bundled) catalog and build the model."""
        from .settings import DEFAULT_CATALOG

        catalog = Catalog.load(settings.catalog or DEFAULT_CATALOG)
        return cls(HomeModel(catalog, settings))

    def recognize(self, text: str) -> Intent | None:
        """The grammar intent for the text, without acting."""
        return self.model.nlu.recognize(text)

    def respond(self, text: str, *, intent: Intent | None = None,
                now: dt.datetime | None = None) -> Reply:
        """Recognise (unless given) and reply; act too when standalone.

        With a controller the intent is not applied here (the controller executes it); the
        response is the hub's own rendering of it.
        """
        intent = intent if intent is not None else self.recognize(text)
        if intent is None:
            return Reply(text=text, intent=None, source=None, response=NO_INTENT_RESPONSE)
        outcome = self.model.home.handle(intent, now=now, apply=self.controller is None)
        return Reply(text=text, intent=intent, source="grammar", response=outcome.response)

    def expect(self, intent_id: str) -> None:
        """Before an intent is published: a turn will :meth:`act` on it."""
        if self.controller is not None:
            self.results.expect(intent_id)

    async def act(self, intent: Intent, *, intent_id: str, now: dt.datetime | None = None) -> Outcome:
        """Carry out an intent: here when standalone, else wait for the controller's result."""
        if self.controller is None:
            return self.model.home.handle(intent, now=now)
        own = self.model.home.handle(intent, now=now, apply=False)
        result = await self.results.wait(intent_id, self.controller)
        if result.success and not result.response:  # the controller did it and had nothing to say
            return dataclasses.replace(result, response=own.response)
        return result

    def update_states(self, catalog: Catalog) -> bool:
        """Take the states of a catalog with the same names; False when the names differ."""
        current = self.model.catalog
        if catalog.signature() != current.signature():
            return False
        for entity in catalog:
            mine = current.get(entity.entity_id)
            assert mine is not None
            mine.state, mine.attributes = entity.state, entity.attributes
        return True

    async def replace_catalog(self, catalog: Catalog, settings: Settings) -> None:
        """Rebuild grammar and NLU for a new catalog off the loop, then swap atomically."""
        model = await asyncio.to_thread(HomeModel, catalog, settings)
        self.model = model
