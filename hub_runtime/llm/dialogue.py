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

import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..agent import Agent
from ..catalog import Catalog
from ..engines.base import EngineError, LlmEngine, Message, Sampling
from ..nlu import Intent
from ..settings import Settings, state_dir
from ..text import complete_sentences
from .check import NOT_SURE, problem
from .context import VOICE_RULES, Preferences, Scene, describe_home, persona, states_context, time_context
from .tools import CallError, HomeTools, Mode

_LOGGER = logging.getLogger(__name__)

APOLOGY: Final = "Sorry, I can't answer that right now."
CALL_FAILED: Final = "Sorry, I couldn't do that."
MIN_CALL_TOKENS: Final = 96  # a call must not be cut short (it ends itself when the grammar is done)


@dataclass(frozen=True)
class Sentence:
    """A sentence to speak now."""

    text: str


@dataclass(frozen=True)
class Act:
    """A valid call was made; the consumer carries it out (``Agent.act``) and says the outcome."""

    intent: Intent
    call: str


class SpokenLog:
    """What the speaker actually played, sentence by sentence (from the output's SpokenFrames)."""

    def __init__(self, keep: int = 256) -> None:
        """Remember the last ``keep`` sentences."""
        self._items: deque[tuple[int, str]] = deque(maxlen=keep)
        self.count = 0

    def add(self, text: str) -> None:
        """One sentence (or the part of one) was played."""
        if text.strip():
            self._items.append((self.count, text.strip()))
            self.count += 1

    def since(self, mark: int) -> str:
        """Everything played from ``mark`` on."""
        return " ".join(t for i, t in self._items if i >= mark)


@dataclass
class _Turn:
    user: str
    assistant: str
    mark: int | None = None  # spoken-log position when the reply started (speech turns)


def default_memory_path() -> Path:
    """``$XDG_STATE_HOME/duplex_hub/preferences.json``."""
    return state_dir() / "preferences.json"


class LlmDialogue:
    """One room's conversation with the LLM (the engines belong to :class:`~..engines.Engines`)."""

    def __init__(self, settings: Settings, engine: LlmEngine, agent: Agent, *, scene: Scene | None = None,
                 preferences: Preferences | None = None, clock: Callable[[], Any] | None = None) -> None:
        """Talk through ``engine``; act on ``agent``'s home."""
        self.settings = settings
        self.engine = engine
        self.light_engine: LlmEngine | None = None  # used instead under memory pressure
        self.agent = agent
        self.scene = scene or Scene()
        self.preferences = preferences or Preferences(settings.llm.memory or default_memory_path())
        self.spoken = SpokenLog()  # fed by the router from the output's SpokenFrames
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
        """The turn's context: the time, states of what it names (else of the sensors), scene, preferences.

        Short on purpose: every token of it is evaluated each turn.
        """
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

    def use_light(self, engine: LlmEngine | None) -> None:
        """Answer with a lighter engine (``llm.light_model``) under memory pressure; None: the main one.

        Switching is instant: both stay loaded (``Engines`` owns them).
        """
        self.light_engine = engine

    def _drop_oldest(self, n: int) -> None:
        """The engine dropped the ``n`` oldest turns to fit: forget them here too."""
        for _ in range(min(n, len(self.history) - 1)):
            self.history.popleft()
            self.dropped_turns += 1

    def _engine(self) -> LlmEngine:
        return self.light_engine or self.engine

    # -- a turn ---------------------------------------------------------------------------
    async def turn(self, text: str, *, spoken: bool = True) -> AsyncIterator[Sentence | Act]:
        """Answer one turn: sentences as they come, or one call for the consumer to carry out.

        Stopping the iteration (barge-in) stops generation within one token; with
        ``spoken`` the history then holds only what the speaker played (else what was
        generated: a text answer, as for ``ask``).
        """
        learned = self.preferences.learn(text)
        if learned:
            self.history.append(_Turn(text, learned))
            yield Sentence(learned)
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
        turn = _Turn(msgs[-1].content, "", None if calling or not spoken else self.spoken.count)
        self.history.append(turn)
        out = ""
        pending = ""
        said: list[str] = []
        told = " ".join(m.content for m in msgs)
        refused = False
        try:
            stream = self._engine().stream(msgs, grammar=tools.grammar(mode, focus), sampling=sampling,
                                           budget=self.budget())
            async with contextlib.aclosing(stream) as pieces:  # closing it stops generation
                async for piece in pieces:
                    out += piece
                    if calling:
                        continue
                    pending += piece
                    done, pending = complete_sentences(pending)
                    for sentence in done:
                        if (why := problem(_clean(sentence), prompt=told, catalog=tools.catalog)) is not None:
                            _LOGGER.info("LLM sentence not said (%s): %r", why, sentence)
                            refused = True
                            break
                        said.append(_clean(sentence))
                        yield Sentence(said[-1])
                    if refused:
                        break
            self._drop_oldest(self._engine().stats.dropped_turns)
        except EngineError as err:
            _LOGGER.warning("LLM: %s", err)
            turn.assistant, turn.mark = APOLOGY, None
            yield Sentence(APOLOGY)
            return
        if not calling:
            cut = self._engine().stats.generated_tokens >= sampling.max_new_tokens
            last = _clean(pending)
            if not refused and last and not (cut and out.strip() != pending.strip()):
                if (why := problem(last, prompt=told, catalog=tools.catalog)) is None:
                    said.append(last)  # (a sentence cut by the token limit is not said)
                    yield Sentence(said[-1])
                else:
                    _LOGGER.info("LLM sentence not said (%s): %r", why, last)
                    refused = True
            if refused and not said:
                said = [NOT_SURE]
                turn.mark = None
                yield Sentence(NOT_SURE)
            elif not out.strip():
                said = [APOLOGY]
                turn.mark = None
                yield Sentence(APOLOGY)
            if turn.mark is None:
                turn.assistant = " ".join(said)
            return
        turn.assistant = out.strip()
        try:
            call = tools.parse_call(out, mode, focus)
        except CallError as err:
            _LOGGER.warning("LLM call refused: %s (%r)", err, out[:200])
            yield Sentence(CALL_FAILED)
            return
        yield Act(intent=tools.to_intent(call, self.agent.model.nlu, text), call=call.to_json())


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
