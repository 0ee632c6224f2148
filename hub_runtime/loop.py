"""One dialogue loop (one room) as a plain list of stages, and the narrow interface of its edges.

    mic ─► [aec] ─► [wake] ─► vad ─► asr ─► turn ─► router ─► tts ─► output ─► speaker
                                      ▲       │ EndOfTurn (upstream)
                                      └───────┘
    observers of every frame: events (events.py), dialogue state (status.py)

The edges — the audio device or a file, MQTT, the CLI, a satellite link — use only
:meth:`DialogueLoop.tick` and the methods under "the edges"; the stages are internal.
A process may run several loops (one per room) over one :class:`~.engines.Engines` and
one :class:`~.agent.Agent`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import numpy as np

from . import memory
from .agent import Agent
from .arbitration import Arbiter
from .audio.format import AudioChunk, Int16Array
from .audio.synthetic import EchoRoom
from .catalog import Catalog
from .engines import CachedSynth, Engines, make_echo_canceller, make_scorer, make_wake_word
from .events import EventObserver, EventSink
from .frames import (
    BotStoppedSpeakingFrame,
    Frame,
    InputAudioFrame,
    InterruptionFrame,
    SayFrame,
    SessionFrame,
    TimerFrame,
    TranscriptFrame,
)
from .home import Outcome
from .nlu import Intent
from .pipeline import Clock, Direction, Pipeline, Stage
from .protocol import CatalogStates, Controller, IntentResult, Status, TimerInfo
from .settings import Settings
from .stages.aec import AecStage
from .stages.asr import AsrStage
from .stages.output import OutputStage
from .stages.router import RouterStage
from .stages.tts import TtsStage
from .stages.turn import Session, TurnStage
from .stages.vad import VadStage
from .stages.wake import WakeWordStage
from .status import IDLE, LISTENING, DialogueTracker
from .timers import Timer, TimerChange, Timers, announcement
from .understanding import Recognized, Reply, Understanding, fixed_replies

if TYPE_CHECKING:
    from .http import HttpServer

_LOGGER = logging.getLogger(__name__)

INTERRUPT_TIMEOUT_S: Final = 2.0  # an interruption passes every stage within this
FAILED_RESULT: Final = "Sorry, that did not work."


class DialogueLoop:
    """The stages of one room's conversation, driven one audio frame per tick."""

    def __init__(self, settings: Settings, engines: Engines, agent: Agent, *, clock: Clock,
                 events: EventSink, arbiter: Arbiter | None = None) -> None:
        """Build the stages for these settings; events go to ``events``.

        With an ``arbiter`` (several rooms), this room answers only the turns it heard loudest.
        """
        self.settings = settings
        self.agent = agent
        self.clock = clock
        self.voice = engines.synth
        frame_ms = settings.frame_ms
        self.tracker = DialogueTracker(clock, events)
        self.timers = Timers(now_ms=clock.now_ms, area=settings.site_area, on_change=self._timer_changed)
        self.understanding = Understanding.build(settings, agent, engines.llm, timers=self.timers)
        self._announcing: Timer | None = None
        self.asr = AsrStage(agent, settings.asr, frame_ms=frame_ms, whisper=engines.whisper)
        self.output = OutputStage()
        a = settings.audio
        stages: list[Stage] = []
        if (canceller := make_echo_canceller(settings)) is not None:
            stages.append(AecStage(canceller))
        if (detector := make_wake_word(settings)) is not None:
            stages.append(WakeWordStage(detector))
        session = Session(wake_word=settings.wake_word.enabled,
                          timeout_ms=int(settings.wake_word.session_timeout_s * 1000))
        stages += [
            VadStage(make_scorer(settings), threshold=a.vad_threshold, start_ms=a.vad_start_ms,
                     stop_ms=a.vad_stop_ms, frame_ms=frame_ms),
            self.asr,
            TurnStage(settings.turn, self.tracker, frame_ms=frame_ms, session=session),
            RouterStage(self.understanding, arbiter=arbiter, site=settings.site_id),
            TtsStage(engines.synth),
            self.output,
        ]
        observers = [EventObserver(clock, events).on_frame, self.tracker.on_frame, self._watch_announcement]
        if arbiter is not None:
            observers.append(arbiter.register(settings.site_id).on_frame)
        self.pipeline = Pipeline(stages, clock=clock, observers=observers)
        self.chunk = a.chunk_size
        self.on_tick: list[Callable[[], None]] = []  # called each tick (the health monitor)
        self.server: HttpServer | None = None  # the web server, when one serves this loop
        self._muted = False
        self._volume = settings.tts.volume

    async def start(self) -> None:
        """Start every stage; the voice makes the home's fixed replies while the loop is idle."""
        await self.pipeline.start()
        await self._make_replies_ahead()

    async def stop(self) -> None:
        """Stop every stage and await its tasks."""
        if isinstance(self.voice, CachedSynth):
            self.voice.forget(self._idle)
        await self.pipeline.stop()

    async def _make_replies_ahead(self) -> None:
        if isinstance(self.voice, CachedSynth):
            self.voice.make_ahead(await asyncio.to_thread(fixed_replies, self.agent), self._idle)

    def _idle(self) -> bool:
        """Whether the loop is idle: no one speaking, no reply (asked from the voice's worker thread)."""
        return self.tracker.state == IDLE

    def tick(self, mic: Int16Array, t_ms: int, room: EchoRoom | None = None
             ) -> tuple[Int16Array, Int16Array]:
        """One duplex audio period: play the next speaker frame, feed one microphone frame.

        With a simulated ``room`` the speaker comes back into the microphone. Returns
        (what the speaker played, what the microphone heard).
        """
        for listener in self.on_tick:
            listener()
        self.timers.tick()
        if self.timers.finished and self._announcing is None and self.tracker.state == IDLE \
                and not self.pipeline.pending:
            self._announce()
        speaker = self.output.read_frame(self.chunk)
        if self._volume != 1.0:
            speaker = np.clip(speaker * self._volume, -32768, 32767).astype(np.int16)
        if self._muted:
            mic = np.zeros_like(mic)
        if room is not None:
            mic = room.mix(mic, speaker)
        self.pipeline.push(InputAudioFrame(audio=AudioChunk(mic), t_ms=t_ms, reference=speaker))
        return speaker, mic

    # -- timers ---------------------------------------------------------------------------------
    def _timer_changed(self, change: TimerChange) -> None:
        t = change.timer
        self.pipeline.push(TimerFrame(action=change.action, timer_id=t.id, seconds_left=change.seconds_left,
                                      name=t.name, area=t.area))

    def _announce(self) -> None:
        """Say that a timer ended (with a chime), when the hub is free: it speaks over no one."""
        timer = self.timers.next_announcement()
        if timer is not None:
            self._announcing = timer
            self.pipeline.push(SayFrame(text=announcement(timer), chime=True))

    def _watch_announcement(self, source: Stage | None, frame: Frame, direction: Direction) -> None:
        """An announcement heard to the end is done; one cut short is made again later."""
        if self._announcing is None:
            return
        if isinstance(frame, BotStoppedSpeakingFrame) and frame.drained:
            self.timers.announced(self._announcing)
            self._announcing = None
        elif isinstance(frame, InterruptionFrame):
            self._announcing = None

    @property
    def replying(self) -> bool:
        """Whether a reply is being made or played."""
        return self.tracker.replying

    @property
    def busy(self) -> bool:
        """Whether a frame is queued, work runs, the user is speaking, or a reply is being made or played."""
        return self.pipeline.pending > 0 or self.tracker.replying or self.tracker.state == LISTENING

    # -- the edges ---------------------------------------------------------------------------
    def say(self, text: str) -> None:
        """Speak text after what is being said; it enters at the head of the loop like any input."""
        self.pipeline.push(SayFrame(text=text))

    async def say_now(self, text: str) -> None:
        """Stop what is being said (and any reply being made), then speak text."""
        if self.tracker.replying:
            await self.interrupt()
        self.say(text)

    async def hear(self, text: str) -> None:
        """Text typed as if spoken (the dashboard): the same turn as speech, and the reply is spoken.

        It stops what is being said first, as talking over the hub would.
        """
        if self.tracker.replying:
            await self.interrupt()
        self.pipeline.push(TranscriptFrame(text=text, tier="typed", confidence=1.0))

    async def interrupt(self) -> None:
        """Stop the reply for good, as a barge-in does; wait (bounded) until every stage has."""
        done = asyncio.Event()
        self.pipeline.push(InterruptionFrame(done=done))
        try:
            async with asyncio.timeout(INTERRUPT_TIMEOUT_S):
                await done.wait()
        except TimeoutError:
            _LOGGER.warning("an interruption did not pass every stage in %.1f s", INTERRUPT_TIMEOUT_S)

    def mute(self, muted: bool) -> None:
        """Cut the microphone (it hears silence) or restore it."""
        self._muted = muted

    def set_volume(self, volume: float) -> None:
        """Speaker gain (0 silent, 1 as synthesised)."""
        self._volume = volume

    def open_session(self, open_: bool = True) -> None:
        """Open (or close) a session: speech is addressed to the hub without the wake word."""
        self.pipeline.push(SessionFrame(open=open_))

    def status(self) -> Status:
        """What the hub is doing, whether it is muted, its volume, its timers."""
        timers = tuple(TimerInfo(id=t["id"], name=t["name"] or None, area=t["area"] or None,
                                 seconds_left=t["total_seconds_left"], is_active=t["is_active"])
                       for t in self.timers.status())
        return Status(state=self.tracker.state, muted=self._muted, volume=self._volume,
                      site=self.settings.site_id, timers=timers)

    async def set_catalog(self, catalog: Catalog) -> bool:
        """Take a new catalog (rebuilt off the loop; no audio is dropped); True when the names changed."""
        with memory.building():  # one full collection after it, not ten while it builds
            rebuilt = await self.agent.set_catalog(catalog, self.settings)
            if rebuilt:
                await self.asr.reload()
        if rebuilt:
            memory.rebuilt()
            await self._make_replies_ahead()
        return rebuilt

    async def ask(self, text: str, *, delegate: bool, conversation: str | None = None,
                  on_intent: Callable[[Recognized], None] | None = None) -> Reply:
        """Answer text as if spoken, without speaking (``ask``): the same understanding as speech.

        Turns of one ``conversation`` may answer the hub's questions ("Which room?").
        """
        return await self.understanding.answer(text, delegate=delegate, conversation=conversation,
                                               on_intent=on_intent)

    def update_states(self, states: CatalogStates) -> list[str]:
        """New states of the catalog's entities (no rebuild); the ids it does not know."""
        return self.agent.apply_states({e.entity_id: (e.state, e.attributes) for e in states.entities})

    def set_controller(self, controller: Controller | None) -> None:
        """Who carries out intents: a controller (Home Assistant), or None for the hub itself."""
        self.agent.controller = controller
        _LOGGER.info("intents are executed by %s", controller.name if controller else "the hub (standalone)")

    def take_result(self, result: IntentResult) -> bool:
        """A controller's outcome of an intent: to the turn waiting for it, else said now.

        False (dropped) for an unsolicited result naming entities the catalog does not know.
        """
        text = result.text or ("" if result.success else FAILED_RESULT)
        outcome = Outcome(response=text, changed=list(result.targets), success=result.success)
        if self.agent.results.resolve(result.id, outcome):
            return True
        if any(self.agent.model.catalog.get(e) is None for e in result.targets):
            return False
        if text:
            self.say(text)
        return True

    def recognize(self, text: str) -> Intent | None:
        """The grammar's intent for text, without acting (Hermes ``nlu/query``)."""
        return self.agent.recognize(text)

    def camera_event(self, payload: bytes) -> None:
        """A camera's event for the LLM's scene (Frigate); ValueError for anything else."""
        if self.understanding.llm is not None:
            self.understanding.llm.scene.update(payload)

