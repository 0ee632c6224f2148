"""The LLM turn: prompt, constrained generation, streaming sentences, acting on a call.

Prompt layout (the prefix the engine's cache reuses comes first and never changes while
the catalog stays the same):

1. system: persona, voice rules, the home (names and rooms, no states), the call format;
2. the history: earlier turns as they were sent (so the next prompt shares this one's
   prefix up to the new turn), the hub's side as it was actually spoken;
3. user: the changing context (time, states, scene, preferences) and the words.

History is a window of ``llm.history_turns`` turns, trimmed from the oldest until the
prompt plus ``model.max_new_tokens`` fits the context; it never overflows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..agent import Agent, Reply
from ..catalog import Catalog
from ..nlu import Intent
from ..settings import Settings, state_dir
from ..stages.state import SpokenLog
from .context import VOICE_RULES, Preferences, Scene, describe_home, persona, states_context, time_context
from .engine import Engine, EngineError, Message, RemoteEngine, Sampling
from .tools import CallError, HomeTools, Mode

_LOGGER = logging.getLogger(__name__)

APOLOGY: Final = "Sorry, I can't answer that right now."
CALL_FAILED: Final = "Sorry, I couldn't do that."
MIN_CALL_TOKENS: Final = 96  # a call must not be cut short (it ends itself when the grammar is done)
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")


@dataclass(frozen=True)
class Say:
    """A sentence to speak now."""

    text: str


@dataclass(frozen=True)
class Act:
    """A valid call was made; the consumer carries it out (``Agent.act``) and says the outcome."""

    intent: Intent
    call: str


@dataclass
class _Turn:
    user: str
    assistant: str
    mark: int | None = None  # spoken-log position when the reply started (speech turns)


def default_memory_path() -> Path:
    """``$XDG_STATE_HOME/duplex_hub/preferences.json``."""
    return state_dir() / "preferences.json"


def load_engine(settings: Settings, *, light: bool = False) -> Engine:
    """The configured engine (EngineError when it cannot be had)."""
    llm = settings.llm
    if llm.engine == "remote":
        assert llm.remote_url is not None
        return RemoteEngine(llm.remote_url, model=llm.remote_model, api_key=llm.remote_api_key,
                            timeout_s=llm.timeout_s, context_size=settings.model.context_size)
    from .process import ProcessEngine

    path = llm.light_model if light else settings.model.path
    return ProcessEngine(path, context_size=settings.model.context_size, threads=settings.hardware.num_threads)


class LlmDialogue:
    """One room's conversation with the LLM (the engine may be shared by several rooms)."""

    def __init__(self, settings: Settings, engine: Engine, agent: Agent, *, scene: Scene | None = None,
                 preferences: Preferences | None = None, spoken: SpokenLog | None = None,
                 clock: Callable[[], Any] | None = None) -> None:
        """Talk through ``engine``; act on ``agent``'s home."""
        self.settings = settings
        self.engine = engine
        self.light_engine: Engine | None = None
        self.use_light = False  # the operations work switches this under memory pressure
        self.agent = agent
        self.scene = scene or Scene()
        self.preferences = preferences or Preferences(settings.llm.memory or default_memory_path())
        self.spoken = spoken or SpokenLog()
        self.clock = clock
        self.history: deque[_Turn] = deque(maxlen=max(1, settings.llm.history_turns))
        self._tools: tuple[Catalog, HomeTools, str] | None = None
        self.last_mode: Mode | None = None
        self.dropped_turns = 0  # history turns dropped to fit the context

    # -- the prompt -----------------------------------------------------------------------
    def tools(self) -> HomeTools:
        """Tools for the current catalog (rebuilt when the catalog is replaced)."""
        catalog = self.agent.model.catalog
        if self._tools is None or self._tools[0] is not catalog:
            tools = HomeTools(catalog)
            self._tools = (catalog, tools, self._system_prompt(catalog, tools))
        return self._tools[1]

    def system_prompt(self) -> str:
        """The stable prefix."""
        self.tools()
        assert self._tools is not None
        return self._tools[2]

    def _system_prompt(self, catalog: Catalog, tools: HomeTools) -> str:
        p = persona(self.settings.llm.persona, self.settings.llm.custom_prompt)
        examples = _examples(catalog)
        return "\n".join(filter(None, [
            p.prompt, VOICE_RULES, describe_home(catalog),
            "When asked to act on the home, answer only with one JSON call naming a device or room "
            "from the list, for example:",
            *examples,
            "Otherwise answer in plain speech.",
        ]))

    def _context(self, focus: frozenset[str] | None) -> str:
        """Short on purpose (every token of it is evaluated each turn): the time, the states of
        what the turn names (else of the sensors), the scene, the preferences."""
        now = self.clock() if self.clock else None
        catalog = self.agent.model.catalog
        shown = Catalog([e for e in catalog if (e.entity_id in focus if focus else e.domain == "sensor")])
        return " ".join(filter(None, [time_context(now), states_context(shown),
                                      self.scene.describe(), self.preferences.describe()]))

    def messages(self, text: str, mode: Mode, focus: frozenset[str] | None = None) -> list[Message]:
        """The whole prompt for this turn (the engine trims it to :meth:`budget`)."""
        self._finish_history()
        instruction = "(Answer with one JSON call.)" if mode is not Mode.CHAT else ""
        msgs = [Message("system", self.system_prompt())]
        for turn in self.history:
            msgs += [Message("user", turn.user), Message("assistant", turn.assistant)]
        msgs.append(Message("user", "\n".join(filter(None, [self._context(focus), text, instruction]))))
        return msgs

    def budget(self) -> int:
        """Prompt tokens that leave room for the answer in the context."""
        return self._engine().context_size - max(self.settings.model.max_new_tokens, MIN_CALL_TOKENS) - 8

    def _finish_history(self) -> None:
        for turn in self.history:
            if turn.mark is not None:
                turn.assistant = self.spoken.since(turn.mark) or "…"
                turn.mark = None

    async def set_light(self, light: bool) -> None:
        """Switch to the light model (``llm.light_model``) under memory pressure, or back.

        The main engine is left loaded (shared by other rooms); switching back is instant.
        Without a light model configured, this does nothing.
        """
        if light and self.light_engine is None and self.settings.llm.light_model:
            self.light_engine = await asyncio.to_thread(load_engine, self.settings, light=True)
        self.use_light = light and self.light_engine is not None

    def _drop_oldest(self, n: int) -> None:
        """The engine dropped the ``n`` oldest turns to fit: forget them here too."""
        for _ in range(min(n, len(self.history) - 1)):
            self.history.popleft()
            self.dropped_turns += 1

    def _engine(self) -> Engine:
        if self.use_light and self.light_engine is not None:
            return self.light_engine
        return self.engine

    # -- a turn ---------------------------------------------------------------------------
    async def turn(self, text: str) -> AsyncIterator[Say | Act]:
        """Answer one turn: sentences as they come, or the outcome of one call.

        Stopping the iteration (barge-in) stops generation within one token; the history
        then holds only what was spoken.
        """
        learned = self.preferences.learn(text)
        if learned:
            self.history.append(_Turn(text, learned))
            yield Say(learned)
            return
        tools = self.tools()
        mode = tools.classify(text)
        self.last_mode = mode
        focus = tools.focus(text)
        if focus is not None and mode is not Mode.CHAT and not tools.intents(mode, focus):
            focus = None
        msgs = self.messages(text, mode, focus)
        cfg = self.settings.model
        calling = mode is not Mode.CHAT
        sampling = Sampling(max_new_tokens=max(cfg.max_new_tokens, MIN_CALL_TOKENS) if calling else
                            cfg.max_new_tokens,
                            temperature=min(cfg.temperature, 0.3) if calling else cfg.temperature,
                            repetition_penalty=1.0 if calling else cfg.repetition_penalty)
        # the user side as sent (context included), so the next prompt shares this one's prefix
        turn = _Turn(msgs[-1].content, "", None if calling else self.spoken.count)
        self.history.append(turn)
        out = ""
        pending = ""
        try:
            stream = self._engine().stream(msgs, grammar=tools.grammar(mode, focus), sampling=sampling,
                                           budget=self.budget())
            async with contextlib.aclosing(stream) as pieces:  # closing it stops generation
                async for piece in pieces:
                    out += piece
                    if calling:
                        continue
                    pending += piece
                    parts = _SENTENCE_END.split(pending)
                    for sentence in parts[:-1]:
                        yield Say(_clean(sentence))
                    pending = parts[-1]
            self._drop_oldest(self._engine().stats.dropped_turns)
        except EngineError as err:
            _LOGGER.warning("LLM: %s", err)
            turn.assistant, turn.mark = APOLOGY, None
            yield Say(APOLOGY)
            return
        if not calling:
            cut = self._engine().stats.generated_tokens >= sampling.max_new_tokens
            if pending.strip() and not (cut and out.strip() != pending.strip()):
                yield Say(_clean(pending))  # (a sentence cut by the token limit is not said)
            if not out.strip():
                turn.mark = None
                turn.assistant = APOLOGY
                yield Say(APOLOGY)
            return
        turn.assistant = out.strip()
        try:
            call = tools.parse_call(out, mode, focus)
        except CallError as err:
            _LOGGER.warning("LLM call refused: %s (%r)", err, out[:200])
            yield Say(CALL_FAILED)
            return
        yield Act(intent=tools.to_intent(call, self.agent.model.nlu, text), call=call.to_json())

    async def answer(self, text: str) -> tuple[Intent | None, str]:
        """The whole answer of a turn as text (for ``ask``)."""
        intent, said = None, []
        async for item in self.turn(text):
            if isinstance(item, Act):
                intent = item.intent
                # standalone it is applied here; a controller executes it itself
                outcome = self.agent.model.home.handle(intent, apply=self.agent.controller is None)
                said.append(outcome.response)
            else:
                said.append(item.text)
        for turn in self.history:  # nothing is played here: the answer counts as said
            if turn.mark is not None:
                turn.assistant, turn.mark = " ".join(said), None
        return intent, " ".join(said)

    async def close(self) -> None:
        """Close the engines this dialogue owns."""
        for engine in (self.engine, self.light_engine):
            if engine is not None:
                await engine.close()


def _clean(sentence: str) -> str:
    """A sentence as it is spoken: no wrapping quotes."""
    return sentence.strip().strip('"').strip()


def _examples(catalog: Catalog) -> list[str]:
    """A few calls over this home's own names (the model copies the format)."""
    out = []
    light = next((e for e in catalog if e.domain == "light"), None)
    switch = next((e for e in catalog if e.domain in ("switch", "fan")), None)
    cover = next((e for e in catalog if e.domain == "cover"), None)
    if light:
        out.append(f'turn on the {light.name.lower()} -> {{"intent": "HassTurnOn", "name": "{light.name}"}}')
        if light.area:
            out.append(f'it is too dark in the {light.area.lower()} -> '
                       f'{{"intent": "HassTurnOn", "area": "{light.area}", "domain": "light"}}')
        out.append(f'dim the {light.name.lower()} to half -> '
                   f'{{"intent": "HassLightSet", "name": "{light.name}", "brightness": 50}}')
    if switch:
        out.append(f'switch off the {switch.name.lower()} -> {{"intent": "HassTurnOff", "name": "{switch.name}"}}')
    if cover:
        out.append(f'shut the {cover.name.lower()} -> {{"intent": "HassCloseCover", "name": "{cover.name}"}}')
    return out


async def ask_llm(settings: Settings, agent: Agent, text: str) -> Reply | None:
    """One text turn through the LLM (``hub-runtime ask``); None when no model can be had."""
    from .engine import EngineError as _EngineError

    try:
        engine = await asyncio.to_thread(load_engine, settings)
    except _EngineError as err:
        if settings.model.path or settings.llm.engine == "remote":
            raise
        _LOGGER.warning("no LLM (%s)", err)
        return None
    dialogue = LlmDialogue(settings, engine, agent)
    try:
        intent, said = await dialogue.answer(text)
    finally:
        await dialogue.close()
    return Reply(text=text, intent=intent, source="llm", response=said)
