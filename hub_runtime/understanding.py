"""Understanding: text in, intent, reply and source out — one path for every way text comes in.

Speech (the router stage), MQTT ``ask`` (and so Home Assistant's conversation agent) and
``hub-runtime ask`` all go through :meth:`Understanding.turn`: the same options
(``llm.prefer_local``), the same order, the same way of carrying out an intent (here when
standalone, else by the controller; for an ``ask`` answered to a controller, the asker
executes it and the hub only renders its reply).

The order of a turn:

1. an empty or unreadable turn is not understood (it never reaches the LLM);
2. the answer to a question the hub just asked in this conversation ("Which room?",
   "Do you want me to ...?", "Which timer?");
3. Home Assistant's templates (the NLU), small talk included; a "here" sentence without a
   known room asks "Which room?"; timers are the hub's own; then the usual ways of saying a
   request that the templates miss ("kill the porch light", :mod:`.paraphrase`): asked about
   first ("Do you want me to turn off the Porch Light?"), a question answered;
4. the LLM, a weak helper: a question it answers may only read state; an action it
   proposes is never done at once — the hub asks first ("Do you want me to turn on the
   TV?") and acts only on a yes, and refuses outright what the words contradict; its
   spoken replies are checked before they are said.

Replies to actions are rendered from what was executed, never written by the LLM.

A turn is a stream of pieces: :class:`Recognized` (an intent, before it is carried out,
so that it can be published and a controller can answer it) and :class:`Said` (reply
text, sentence by sentence for the LLM).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from .agent import Agent
from .catalog import Entity
from .engines.base import LlmEngine
from .grammar.automaton import FUNCTION_WORDS
from .llm.check import NOT_SURE
from .nlu import Intent, only_opening, words_to_digits
from .paraphrase import request_paraphrase
from .protocol import READ_ONLY_INTENTS, TIMER_INTENTS
from .settings import Settings
from .smalltalk import ANSWERS, REPLIES, SmallTalk, is_local
from .text import STOP_PHRASES, is_backchannel, is_question, text_words
from .timers import Timer, TimerError, Timers

if TYPE_CHECKING:
    from .llm.dialogue import Act, LlmDialogue

NO_INTENT_RESPONSE: Final = "Sorry, I couldn't understand that"
NOT_HEARD: Final = "Sorry, I didn't catch that."
CANNOT: Final = "Sorry, I can't do that yet."
STOP_TAIL_S: Final = 3.0  # words after a "stop" that match nothing within this are its tail: no reply
# ... and thanks: "stop, thanks" wants quiet, not "You're welcome"; and Whisper hears the rest of
# a "stop ... talking" cut in two as "Thank you." (its usual reading of a short unclear word)
TAIL_INTENTS: Final = frozenset({"DuplexHubThanks"})
BUSY: Final = "I'm busy, one moment."  # the LLM is not started while the machine is overloaded
WHICH_ROOM: Final = "Which room?"
DECLINED: Final = "Okay, I won't."
VOICE: Final = ""  # the conversation of the room's own voice (MQTT asks carry their own ids)
_YES: Final = frozenset({"yes", "yeah", "yep", "yup", "sure", "ok", "okay", "please", "do it", "go ahead",
                         "yes please", "correct", "that's right", "right", "affirmative", "please do",
                         "sounds good", "of course", "yes do it", "absolutely", "definitely"})
_NO: Final = frozenset({"no", "nope", "nah", "don't", "do not", "cancel", "never mind", "nevermind", "stop",
                        "no thanks", "no thank you", "leave it", "forget it", "no don't", "not now"})
# words that say an action's direction: an LLM's proposal against them is refused
_POLARITY: Final[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
    # intent: (words that support it, words that contradict it)
    "HassTurnOn": (frozenset("on open start activate run enable unlock lock raise up dark darker".split()),
                   frozenset("off close shut stop disable pause lower down mute resume skip next "
                             "previous".split())),
    "HassTurnOff": (frozenset("off close shut stop disable unlock lock lower down".split()),
                    frozenset("on open start activate run enable pause resume play next skip dark darker "
                              "see".split())),
}
# words that name a kind of device: "it's too warm" is about a thermostat, never about blinds
_DOMAIN_WORDS: Final[dict[str, frozenset[str]]] = {
    "light": frozenset("light lights lamp lamps bright brighter dim dimmer dark darker brightness".split()),
    "climate": frozenset("thermostat heat heating heater warm warmer hot cold colder cool cooler "
                         "temperature degrees ac air conditioning".split()),
    "cover": frozenset("blind blinds shade shades curtain curtains shutter shutters door garage gate "
                       "window awning open close".split()),
    "lock": frozenset("lock unlock locked door".split()),
    "fan": frozenset("fan fans breeze stuffy".split()),
    "media_player": frozenset("tv television music play song speaker volume loud louder quiet quieter".split()),
    "vacuum": frozenset("vacuum roomba clean hoover".split()),
    "lawn_mower": frozenset("mower mow lawn grass".split()),
    "switch": frozenset("switch plug outlet power".split()),
    "valve": frozenset("valve water sprinkler".split()),
}


def fixed_replies(agent: Agent) -> list[str]:
    """What the hub may say that depends on nothing said: its own replies, then the home's fixed ones.

    The voice makes them ahead (:meth:`~.engines.CachedSynth.make_ahead`), so that the first
    time one is said is as fast as every later time. Most said first.
    """
    own = [NOT_HEARD, NO_INTENT_RESPONSE, CANNOT, WHICH_ROOM, DECLINED, NOT_SURE, BUSY]
    social = [text for texts in REPLIES.values() for text in texts]
    return list(dict.fromkeys([*own, *agent.model.home.fixed_replies(), *social]))


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


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
    expects_reply: bool = False  # a question to the user: the next turn answers it


@dataclass(frozen=True)
class Reply:
    """A whole turn, collected (``ask``)."""

    text: str
    intent: Intent | None
    intent_id: str | None
    source: str | None  # grammar | llm | None
    response: str
    expects_reply: bool = False

    @property
    def success(self) -> bool:
        """An intent matched and was resolved without error."""
        return self.intent is not None and self.intent.error is None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object printed by ``hub-runtime ask``."""
        return {"text": self.text, "intent": self.intent.to_dict() if self.intent else None,
                "source": self.source, "response": self.response}


@dataclass
class Pending:
    """A question the hub asked; the next turn of the conversation may answer it."""

    kind: str  # confirm | room | timer
    intent: Intent
    source: str
    call: str | None = None
    timers: list[Timer] = field(default_factory=list)


# courtesy and fillers around a stop phrase: "be quiet please", "ok just stop now"
_COURTESY: Final = frozenset("please now just ok okay oh hey thanks right".split())


def is_stop(text: str) -> bool:
    """Words that only ask the hub to be quiet ("stop", "be quiet please", "never mind")."""
    words = text_words(text)
    if " ".join(words) in STOP_PHRASES:
        return True
    core = [w for w in words if w not in _COURTESY]
    return bool(core) and " ".join(core) in STOP_PHRASES


def acts(intent: Intent) -> bool:
    """Whether carrying the intent out changes something (the home, a timer, a list)."""
    return not (intent.name in READ_ONLY_INTENTS or intent.name in ANSWERS or is_local(intent.name)
                or intent.error is not None)


# what turning a device of these domains on and off is called ("open the Garage Door")
_ON_OFF: Final = {"cover": ("open", "close"), "valve": ("open", "close"), "lock": ("lock", "unlock"),
                  "scene": ("activate", "activate"), "script": ("run", "run")}


# how the other actions are asked about ("Do you want me to send the Roomba back to its base?")
_ACTIONS: Final = {"HassMediaPause": "pause the {}", "HassMediaUnpause": "resume the {}",
                   "HassMediaNext": "skip to the next track on the {}",
                   "HassMediaPrevious": "go back a track on the {}",
                   "HassVacuumStart": "start the {}", "HassVacuumReturnToBase": "send the {} back to its base",
                   "HassLawnMowerStartMowing": "start the {}", "HassLawnMowerDock": "dock the {}"}


def describe(intent: Intent, names: list[str], domains: frozenset[str] = frozenset()) -> str:
    """An action as the hub asks about it: "turn on the Kitchen Light" (``domains``: its targets')."""
    what = " and ".join(names) if names else "that"
    slots = intent.slots
    verbs = {"HassTurnOn": "turn on", "HassTurnOff": "turn off", "HassToggle": "toggle"}
    if intent.name in verbs:
        verb = verbs[intent.name]
        if len(domains) == 1 and intent.name != "HassToggle" and next(iter(domains)) in _ON_OFF:
            verb = _ON_OFF[next(iter(domains))][intent.name == "HassTurnOff"]
        return f"{verb} the {what}"
    if intent.name == "HassLightSet":
        if "brightness" in slots:
            return f"set the {what} to {slots['brightness']} percent brightness"
        return f"set the {what} to {slots.get('color', 'that')}"
    if intent.name == "HassSetPosition":
        return f"set the {what} to {slots.get('position')} percent"
    if intent.name == "HassClimateSetTemperature":
        where = f" of the {what}" if names else ""
        return f"set the temperature{where} to {slots.get('temperature')} degrees"
    if intent.name == "HassMediaSearchAndPlay":
        return f"play {slots.get('search_query')} on the {what}"
    if intent.name == "HassSetVolume":
        return f"set the volume of the {what} to {slots.get('volume_level')} percent"
    if intent.name == "HassSetVolumeRelative":
        step = slots.get("volume_step")
        return f"turn the volume {step if step in ('up', 'down') else f'up by {step} percent'} on the {what}"
    if intent.name == "HassBroadcast":
        return f'announce "{slots.get("message")}"'
    if intent.name in _ACTIONS:
        return _ACTIONS[intent.name].format(what)
    return f"do that to the {what}"


class Understanding:
    """One room's understanding: the home's templates first, then its LLM, with follow-ups."""

    def __init__(self, agent: Agent, llm: LlmDialogue | None, *, prefer_local: bool = True,
                 timers: Timers | None = None, clock: Callable[[], dt.datetime] | None = None) -> None:
        """Understand against ``agent``'s home; ``llm`` None: the templates alone."""
        self.agent = agent
        self.llm = llm
        self.prefer_local = prefer_local
        self.timers = timers
        self.overloaded: Callable[[], str | None] = lambda: None  # why the LLM must wait (health.py)
        self.clock = clock or dt.datetime.now
        self._stopped: dict[str, dt.datetime] = {}  # when the user last told the hub to stop
        self.small_talk = SmallTalk()
        self._pending: dict[str, Pending] = {}

    @classmethod
    def build(cls, settings: Settings, agent: Agent, engine: LlmEngine | None, *,
              timers: Timers | None = None) -> Understanding:
        """The understanding these settings ask for, with an LLM dialogue over ``engine``."""
        llm = None
        if engine is not None and settings.llm.enabled:
            from .llm.dialogue import LlmDialogue

            llm = LlmDialogue(settings, engine, agent)
        return cls(agent, llm, prefer_local=settings.llm.prefer_local, timers=timers)

    def needs_llm(self, text: str) -> bool:
        """Whether this text would go to the LLM (a caller may load one only then)."""
        text = text.strip()
        return bool(text) and (not self.prefer_local
                               or (self.agent.recognize(text) is None and self._paraphrase(text) is None))

    def heard(self, text: str) -> None:
        """The speaker played these words of a reply (the LLM's history keeps only those)."""
        if self.llm is not None:
            self.llm.spoken.add(text)

    def waiting(self, conversation: str = VOICE) -> bool:
        """Whether the hub asked this conversation something it has not answered yet."""
        return conversation in self._pending

    # -- a turn -------------------------------------------------------------------------------
    async def turn(self, text: str, *, delegate: bool = False, spoken: bool = True,
                   conversation: str = VOICE, overlapped: bool = False,
                   unsure: bool = False) -> AsyncIterator[Recognized | Said]:
        """Understand one turn and carry it out; stopping the iteration stops it.

        ``delegate``: the asker executes the intent when a controller is set (``ask``).
        ``spoken``: the reply will be played (the LLM's history keeps what was heard).
        ``conversation``: whose follow-up this may be (the voice, or an ``ask``'s id).
        ``overlapped``: said over the hub's voice: "stop", "be quiet", a listener's "okay" only
        stopped it (the hub already did), they ask for nothing else.
        ``unsure``: the words were heard, but not surely (the recogniser found another meaning
        nearly as likely): an action is asked about first ("Did you say ...?").
        """
        text = text.strip()
        if not any(c.isalnum() for c in text):
            yield Said(NOT_HEARD, None)
            return
        if overlapped and (is_stop(text) or is_backchannel(text)):
            self._pending.pop(conversation, None)
            if is_stop(text):
                self._stopped[conversation] = self.clock()
            yield Said("", None)
            return
        stopped = self._stopped.pop(conversation, None)
        pending = self._pending.pop(conversation, None)
        if pending is not None:
            answered = False
            async for piece in self._answer(pending, text, delegate, conversation):
                answered = True
                yield piece
            if answered:
                return
        intent = self.agent.recognize(text) if self.prefer_local or self.llm is None else None
        if spoken and (only_opening(text) or is_backchannel(text)):
            # "Okay." after the hub's answer, "mm hmm", a "So." nothing followed: the person
            # acknowledges, or talks to someone else; nothing was asked, no apology is due
            # ("thank you" is small talk, and answered; read here also when the LLM goes first)
            said = intent if intent is not None else self.agent.recognize(text)
            if said is None or said.name in ANSWERS:
                yield Said("", None)
                return
        tail = stopped is not None and (self.clock() - stopped).total_seconds() < STOP_TAIL_S
        if intent is not None and tail and intent.name in TAIL_INTENTS:
            yield Said("", None)
            return
        if intent is not None and unsure and acts(intent):
            self._pending[conversation] = Pending("confirm", intent, "grammar")
            yield Said(f"Did you say {' '.join(text_words(text))}?", "grammar", expects_reply=True)
            return
        if intent is not None:
            async for piece in self._intent(intent, "grammar", delegate, conversation):
                yield piece
            return
        if is_stop(text) or tail:
            # "be quiet" with nothing to stop, or the rest of "stop ... talking": quiet, no apology
            yield Said("", None)
            return
        found = self._paraphrase(text) if self.prefer_local or self.llm is None else None
        if found is not None:  # "kill the porch light": asked first, a question answered
            words, intent = found
            if acts(intent):
                self._pending[conversation] = Pending("confirm", intent, "grammar")
                yield Said(f"Do you want me to {self._describe(intent, words)}?", "grammar", expects_reply=True)
            else:
                async for piece in self._intent(intent, "grammar", delegate, conversation):
                    yield piece
            return
        if self.llm is None:
            yield Said(NO_INTENT_RESPONSE, None)
            return
        if self.overloaded() is not None:  # the machine is out of CPU or memory: the templates only
            yield Said(BUSY, None)
            return
        from .llm.dialogue import Act

        async for item in self.llm.turn(text, spoken=spoken):
            if isinstance(item, Act):
                async for piece in self._proposal(item, text, delegate, conversation):
                    yield piece
            else:
                yield Said(item.text, "llm")

    def _paraphrase(self, text: str) -> tuple[str, Intent] | None:
        """A request of the home said in words the templates miss (:mod:`.paraphrase`), with those words."""
        return request_paraphrase(text, self.agent.recognize, self.agent.model.catalog)

    def _action(self, intent: Intent) -> str:
        """The action asked about, by its targets' names and what their kind of device does."""
        targets = [e for e in map(self.agent.model.catalog.get, intent.targets) if e is not None]
        return describe(intent, [e.name for e in targets], frozenset(e.domain for e in targets))

    def _describe(self, intent: Intent, words: str) -> str:
        """The action asked about when :func:`describe` knows it, else the words that made it."""
        described = self._action(intent)
        return words if described.startswith("do that") else described

    async def _intent(self, intent: Intent, source: str, delegate: bool, conversation: str,
                      call: str | None = None, *, confirmed: bool = False) -> AsyncIterator[Recognized | Said]:
        if intent.name in ANSWERS:  # "yes", "the kitchen": nothing was asked
            yield Said(NO_INTENT_RESPONSE, None)
            return
        if is_local(intent.name):
            yield Said(self.small_talk.reply(intent.name, self.clock()), source)
            return
        if intent.needs_area:
            self._pending[conversation] = Pending("room", intent, source, call)
            yield Said(WHICH_ROOM, source, expects_reply=True)
            return
        if intent.name in TIMER_INTENTS:
            async for piece in self._timer(intent, source, conversation):
                yield piece
            return
        if not confirmed and self._names_in_query(intent):
            # "play jazz on kitchen speak on sunday": a device or room went into the search
            # words, so the player chosen may not be the one meant: ask first
            self._pending[conversation] = Pending("confirm", intent, source, call)
            yield Said(f"Do you want me to {self._action(intent)}?", source, expects_reply=True)
            return
        intent_id = uuid.uuid4().hex
        if not delegate and intent.error is None:
            self.agent.expect(intent_id)  # before the intent is published: the result may come fast
        yield Recognized(intent, intent_id, source, call)
        outcome = await self.agent.act(intent, intent_id=intent_id, delegate=delegate, now=self.clock())
        yield Said(outcome.response, source)

    async def _timer(self, intent: Intent, source: str, conversation: str) -> AsyncIterator[Recognized | Said]:
        """Timers are the hub's own, also under a controller: published, but done here."""
        home = self.agent.model.home
        if self.timers is None:
            yield Said(home.render(home.responses.get("errors", {}).get("no_timer_support", CANNOT), {}), source)
            return
        yield Recognized(intent, uuid.uuid4().hex, source)
        try:
            extra = self.timers.handle(intent)
        except TimerError as err:
            if err.key == "multiple_timers_matched" and len(err.candidates) > 1:
                self._pending[conversation] = Pending("timer", intent, source, timers=err.candidates)
                options = " or ".join(t.describe() for t in err.candidates[:3])
                yield Said(f"Which timer? {options[0].upper()}{options[1:]}?", source, expects_reply=True)
                return
            errors = home.responses.get("errors", {})
            yield Said(home.render(errors.get(err.key, NO_INTENT_RESPONSE), {}), source)
            return
        yield Said(home.handle(replace(intent, slot_texts={**intent.slot_texts, **extra}), apply=False).response,
                   source)

    async def _proposal(self, act: Act, text: str, delegate: bool,
                        conversation: str) -> AsyncIterator[Recognized | Said]:
        """An intent the LLM proposed: answered if it only reads, else asked about first."""
        intent = act.intent
        words = text_words(text)
        if intent.name in READ_ONLY_INTENTS:
            # a question, and an answer about what it asks: the time for the time, a named thing's state
            wanted = intent.name != "HassGetCurrentTime" or bool({"time", "clock", "late"} & set(words))
            if not is_question(words, text) or not wanted:
                yield Said(NOT_SURE if is_question(words, text) else CANNOT, "llm")
                return
        if intent.error is not None or intent.name in READ_ONLY_INTENTS:
            async for piece in self._intent(intent, "llm", delegate, conversation, act.call):
                yield piece
            return
        support, against = _POLARITY.get(intent.name, (frozenset(), frozenset()))
        targets = [e for e in map(self.agent.model.catalog.get, intent.targets) if e is not None]
        if (set(words) & against and not set(words) & support) or not self._grounded(targets, words):
            yield Said(CANNOT, "llm")
            return
        self._pending[conversation] = Pending("confirm", intent, "llm", act.call)
        yield Said(f"Do you want me to {self._action(intent)}?", "llm", expects_reply=True)

    async def _answer(self, pending: Pending, text: str, delegate: bool,
                      conversation: str) -> AsyncIterator[Recognized | Said]:
        """The reply to the hub's question; nothing when the turn is something else."""
        said = " ".join(text_words(text))
        heard = self.agent.recognize(text)
        kind = heard.name if heard is not None else None
        if pending.kind == "confirm":
            if kind == "DuplexHubYes" or said in _YES:
                async for piece in self._intent(pending.intent, pending.source, delegate, conversation,
                                                pending.call, confirmed=True):
                    yield piece
            elif kind == "DuplexHubNo" or said in _NO:
                yield Said(DECLINED, pending.source)
            return
        if pending.kind == "room":
            area = heard.slots.get("area") if heard is not None and kind == "DuplexHubArea" else None
            if area is None and heard is None and len(said.split()) <= 4:
                area = self._area_in(text)
            if area is not None:
                intent = self.agent.model.nlu.with_area(pending.intent, area)
                async for piece in self._intent(intent, pending.source, delegate, conversation, pending.call):
                    yield piece
            elif kind == "DuplexHubNo" or said in _NO:
                yield Said(DECLINED, pending.source)
            return
        if pending.kind == "timer":
            timer = self._timer_in(said, pending.timers)
            if timer is not None:
                slots = {k: v for k, v in pending.intent.slots.items()
                         if k not in ("name", "area", "start_hours", "start_minutes", "start_seconds")}
                if timer.name:
                    slots["name"] = timer.name
                else:
                    slots.update({k: v for k, v in (("start_hours", timer.start_hours),
                                                    ("start_minutes", timer.start_minutes),
                                                    ("start_seconds", timer.start_seconds)) if v})
                async for piece in self._timer(replace(pending.intent, slots=slots), pending.source, conversation):
                    yield piece
            elif kind == "DuplexHubNo" or said in _NO:
                yield Said(DECLINED, pending.source)

    @staticmethod
    def _grounded(targets: list[Entity], words: list[str]) -> bool:
        """The words point at one of the targets: its name, an alias, its room or its kind of device.

        SmolLM2 picks some device for any complaint ("make it warmer" -> the blinds); a question
        about a device the user did not point at is noise, so such a proposal is dropped.
        """
        said = {_stem(w) for w in words}
        for entity in targets:
            named = {_stem(w) for text in (*entity.names, entity.area or "") for w in text_words(text)}
            named |= {_stem(w) for w in _DOMAIN_WORDS.get(entity.domain, ())}
            if said & (named - FUNCTION_WORDS):
                return True
        return not targets

    def _names_in_query(self, intent: Intent) -> bool:
        """A media search whose words name a room or a device of the home."""
        query = intent.slots.get("search_query")
        if intent.name != "HassMediaSearchAndPlay" or not isinstance(query, str):
            return False
        catalog = self.agent.model.catalog
        words = {w for e in catalog for n in (*e.names, e.area or "") for w in text_words(n)} - FUNCTION_WORDS
        return bool(set(text_words(query)) & words)

    def _area_in(self, text: str) -> str | None:
        said = f" {' '.join(text_words(text))} "
        for area in sorted(self.agent.model.catalog.areas, key=len, reverse=True):
            if f" {' '.join(text_words(area))} " in said:
                return area
        return None

    @staticmethod
    def _timer_in(said: str, timers: list[Timer]) -> Timer | None:
        numbers = set(words_to_digits(said).split())
        for timer in timers:
            if timer.name and timer.name.casefold() in said:
                return timer
        for timer in timers:
            starts = {str(v) for v in (timer.start_hours, timer.start_minutes, timer.start_seconds) if v}
            if starts and starts <= numbers:
                return timer
        return None

    async def answer(self, text: str, *, delegate: bool = False, conversation: str | None = None,
                     on_intent: Callable[[Recognized], None] | None = None) -> Reply:
        """A whole turn as text (``ask``); ``on_intent`` sees the intent before it is carried out."""
        recognized: Recognized | None = None
        said: list[str] = []
        source: str | None = None
        expects = False
        async for piece in self.turn(text, delegate=delegate, spoken=False,
                                     conversation=conversation if conversation is not None else uuid.uuid4().hex):
            if isinstance(piece, Recognized):
                recognized = piece
                if on_intent is not None:
                    on_intent(piece)
            else:
                source = piece.source
                expects |= piece.expects_reply
                if piece.text:
                    said.append(piece.text)
        return Reply(text=text, intent=recognized.intent if recognized else None,
                     intent_id=recognized.intent_id if recognized else None, source=source,
                     response=" ".join(said), expects_reply=expects)

