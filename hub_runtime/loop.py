"""One dialogue loop (one room) as a plain list of stages, and the engines loops share.

    mic ─► [wake] ─► vad ─► asr ─► turn ─► router ─► tts ─► output ─► speaker
                             ▲       │ EndOfTurn (upstream)
                             └───────┘

A process may run several loops (one per satellite) over one :class:`Engines`
(the agent, Whisper and the voice are loaded once).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .agent import Agent
from .audio.format import AudioChunk, Int16Array
from .engines.piper import EspeakSynth, PiperSynth
from .engines.speex_aec import EchoCancellerUnavailable
from .engines.vad import make_scorer
from .engines.whisper import WhisperTranscriber
from .frames import InputAudioFrame, InterruptionFrame, SpeakFrame
from .llm.engine import Engine, EngineError
from .pipeline import Clock, EventSink, Pipeline, Stage
from .settings import Settings
from .stages.aec import AecStage
from .stages.asr import AsrStage
from .stages.output import OutputStage
from .stages.router import RouterStage
from .stages.state import DialogueState
from .stages.tts import Synth, TtsStage
from .stages.turn import TurnStage
from .stages.vad import VadStage
from .stages.wake import WakeWordStage

if TYPE_CHECKING:
    from .llm.dialogue import LlmDialogue

_LOGGER = logging.getLogger(__name__)


@dataclass
class Engines:
    """What every loop of a process shares."""

    agent: Agent
    whisper: WhisperTranscriber | None
    synth: Synth
    llm: Engine | None = None  # the LLM engine (None: grammar only)

    @classmethod
    async def load(cls, settings: Settings) -> Engines:
        """Load the catalog, grammar, Whisper and the voice (in worker threads, in parallel)."""
        agent_t = asyncio.to_thread(Agent.from_settings, settings)
        whisper_t = (
            asyncio.to_thread(WhisperTranscriber, settings.asr.whisper_model,
                              threads=settings.hardware.num_threads,
                              beam_size=settings.asr.beam_size)
            if settings.asr.second_tier == "whisper" else asyncio.sleep(0, None)
        )
        if settings.tts.engine == "piper":
            synth_t: Any = asyncio.to_thread(PiperSynth, settings.tts.voice,
                                             length_scale=settings.tts.length_scale)
        else:
            synth_t = asyncio.sleep(0, EspeakSynth())
        llm_t = asyncio.to_thread(_load_llm, settings) if settings.llm.enabled else asyncio.sleep(0, None)
        agent, whisper, synth, llm = await asyncio.gather(agent_t, whisper_t, synth_t, llm_t)
        return cls(agent=agent, whisper=whisper, synth=synth, llm=llm)


def _load_llm(settings: Settings) -> Engine | None:
    """The LLM engine; without a model (and none configured) the hub runs on the grammar alone."""
    from .llm.dialogue import load_engine

    try:
        return load_engine(settings)
    except EngineError as err:
        if settings.model.path or settings.llm.engine == "remote":
            raise
        _LOGGER.warning("no LLM (%s): the hub answers home commands only", err)
        return None


class DialogueLoop:
    """The stages of one room's conversation, driven one audio frame per tick."""

    def __init__(self, settings: Settings, engines: Engines, *, clock: Clock,
                 events: EventSink) -> None:
        """Build the stages for these settings."""
        self.settings = settings
        frame_ms = settings.frame_ms
        self.state = DialogueState(
            wake_word=settings.wake_word.enabled,
            session_timeout_ms=int(settings.wake_word.session_timeout_s * 1000),
        )
        a = settings.audio
        stages: list[Stage] = []
        if a.echo_cancel:
            try:
                stages.append(AecStage(a.chunk_size))
            except EchoCancellerUnavailable as err:
                _LOGGER.warning("echo cancellation unavailable: %s", err)
        if settings.wake_word.enabled:
            stages.append(WakeWordStage(settings.wake_word.model))
        self.asr = AsrStage(engines.agent, settings.asr, frame_ms=frame_ms,
                            whisper=engines.whisper)
        self.output = OutputStage(self.state, volume=settings.tts.volume)
        self.llm: LlmDialogue | None = None
        if engines.llm is not None and settings.llm.enabled:
            from .llm.dialogue import LlmDialogue

            self.llm = LlmDialogue(settings, engines.llm, engines.agent, spoken=self.state.spoken)
        self.router = RouterStage(engines.agent, self.state, self.llm, prefer_local=settings.llm.prefer_local)
        stages += [
            VadStage(make_scorer(a.vad_engine, a.vad_aggressiveness), threshold=a.vad_threshold,
                     start_ms=a.vad_start_ms, stop_ms=a.vad_stop_ms, frame_ms=frame_ms),
            self.asr,
            TurnStage(settings.turn, self.state, frame_ms=frame_ms),
            self.router,
            TtsStage(engines.synth),
            self.output,
        ]
        self.pipeline = Pipeline(stages, clock=clock, events=events)
        self.state.on_activity = lambda activity: self.pipeline.emit("state", state=activity.value)
        self.clock = clock
        self.chunk = a.chunk_size
        self.muted = False  # MQTT mute: the microphone feeds silence

    async def start(self) -> None:
        """Start every stage."""
        await self.pipeline.start()

    async def stop(self) -> None:
        """Stop every stage and await its tasks."""
        await self.pipeline.stop()

    def tick(self, mic: Int16Array, t_ms: int, room: EchoRoom | None = None
             ) -> tuple[Int16Array, Int16Array]:
        """One duplex audio period: play the next speaker frame, feed one microphone frame.

        With a simulated ``room`` the speaker comes back into the microphone. Returns
        (what the speaker played, what the microphone heard).
        """
        speaker = self.output.read_frame(self.chunk)
        if self.muted:
            mic = np.zeros_like(mic)
        if room is not None:
            mic = room.mix(mic, speaker)
        self.pipeline.push(InputAudioFrame(audio=AudioChunk(mic), t_ms=t_ms, reference=speaker))
        return speaker, mic

    def say(self, text: str) -> None:
        """Speak text after whatever is being said (as from the MQTT ``say`` topic)."""
        self.router.enqueue(SpeakFrame(text=text))

    async def interrupt(self) -> None:
        """Stop the reply for good, as a barge-in does, and wait until every stage has."""
        done = asyncio.Event()
        self.router.enqueue(InterruptionFrame(done=done))
        await done.wait()

    async def say_now(self, text: str) -> None:
        """Interrupt whatever is being said, then speak text."""
        if self.busy:
            await self.interrupt()
        self.say(text)

    def set_volume(self, volume: float) -> None:
        """Speaker gain (0 silent, 1 as synthesised)."""
        self.output.volume = volume

    @property
    def busy(self) -> bool:
        """Whether anything is queued, running, or still to be played."""
        return self.pipeline.pending > 0 or self.output.busy or self.state.replying


class EchoRoom:
    """A simulated room: the speaker's output comes back into the mic, delayed and scaled."""

    def __init__(self, delay_ms: int, gain: float, chunk: int) -> None:
        """Delay in ms, linear gain."""
        self.gain = gain
        self._line = np.zeros(delay_ms * 16 + chunk, dtype=np.float32)
        self._delay = delay_ms * 16

    def mix(self, mic: Int16Array, speaker: Int16Array) -> Int16Array:
        """Add the delayed speaker to this mic frame."""
        n = len(speaker)
        self._line = np.concatenate([self._line[n:], speaker.astype(np.float32)])
        start = len(self._line) - self._delay - n
        echo = self._line[start : start + n] * self.gain
        return np.clip(mic.astype(np.float32) + echo, -32768, 32767).astype(np.int16)


def parse_echo(spec: str | None) -> tuple[int, float] | None:
    """``DELAY_MS:GAIN`` → (delay, gain); raises ValueError naming what is wrong."""
    if spec is None:
        return None
    try:
        delay_s, gain_s = spec.split(":")
        delay, gain = int(delay_s), float(gain_s)
    except ValueError:
        raise ValueError(f"--echo {spec!r}: expected DELAY_MS:GAIN, e.g. 40:0.3") from None
    if not 0 <= delay <= 2000 or not 0.0 <= gain <= 4.0:
        raise ValueError(f"--echo {spec!r}: delay 0..2000 ms, gain 0..4")
    return delay, gain
