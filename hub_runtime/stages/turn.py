"""Turn stage: end of turn and barge-in decisions.

End of turn is not silence alone: when the running hypothesis is already a complete
command of the grammar the turn closes after ``complete_silence_ms`` of silence,
otherwise after ``incomplete_silence_ms``.

Barge-in: ``barge_in_ms`` of user speech while the hub is replying pauses playback
at once (BargeInFrame), before the VAD has even confirmed a turn. Once the speech
has lasted ``backchannel_ms`` — or it ends as a complete command — the hub stops
for good (InterruptionFrame, which the pipeline base turns into cancellation
everywhere downstream). Shorter speech that is no
command ("mm-hmm", a cough) resumes playback (ResumeFrame) and is discarded.

Consumes: SpeechStartedFrame, PartialTranscriptFrame, InputAudioFrame.
Emits: EndOfTurnFrame (upstream, to the ASR), BargeInFrame, ResumeFrame,
InterruptionFrame (downstream); forwards everything.
"""

from __future__ import annotations

import logging

from ..frames import (
    BargeInFrame,
    EndOfTurnFrame,
    Frame,
    InputAudioFrame,
    InterruptionFrame,
    PartialTranscriptFrame,
    ResumeFrame,
    SpeechStartedFrame,
    WakeWordFrame,
)
from ..pipeline import Direction, Stage
from ..settings import TurnSettings
from .state import Activity, DialogueState

_LOGGER = logging.getLogger(__name__)


class TurnStage(Stage):
    """Decides when the user's turn ends and whether they are taking the floor."""

    def __init__(self, settings: TurnSettings, state: DialogueState, *, frame_ms: int) -> None:
        """Use these timings; read whether the hub is replying from ``state``."""
        super().__init__("turn")
        self.settings = settings
        self.state = state
        self.frame_ms = frame_ms
        self._open = False
        self._voiced_ms = 0
        self._silence_ms = 0
        self._complete = False
        self._barge = False  # playback paused, not yet decided
        self._pre_voiced_ms = 0  # speech heard while replying, before the VAD opened a turn
        self._pre_silence_ms = 0

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Track the turn; forward every frame."""
        await self.push(frame, direction)
        if isinstance(frame, SpeechStartedFrame):
            await self._speech_started(frame)
        elif isinstance(frame, PartialTranscriptFrame):
            self._complete = frame.complete
        elif isinstance(frame, InputAudioFrame):
            if self._open:
                await self._audio(frame)
            else:
                await self._watch(frame)
        elif isinstance(frame, WakeWordFrame):
            self.state.open_session(self.now_ms())
            self._voiced_ms, self._silence_ms, self._complete = 0, 0, False

    async def _speech_started(self, frame: SpeechStartedFrame) -> None:
        self._pre_voiced_ms = self._pre_silence_ms = 0
        if not self._open:
            self._open, self._voiced_ms, self._silence_ms = True, 0, 0
            self._complete = False
            if not self.state.replying:
                self.state.activity = Activity.LISTENING
        self._silence_ms = 0
        if self.state.replying and not self._barge:
            self._barge = True
            await self.push(BargeInFrame(onset_ms=frame.onset_ms))

    async def _watch(self, frame: InputAudioFrame) -> None:
        """Before the VAD opens a turn: pause after ``barge_in_ms`` of speech over the hub."""
        if frame.speech:
            self._pre_voiced_ms += self.frame_ms
            self._pre_silence_ms = 0
            if (self.state.replying and not self._barge
                    and self._pre_voiced_ms >= max(self.frame_ms, self.settings.barge_in_ms)):
                self._barge = True
                await self.push(BargeInFrame(onset_ms=frame.t_ms - self._pre_voiced_ms + self.frame_ms))
            return
        self._pre_voiced_ms = 0
        self._pre_silence_ms += self.frame_ms
        if self._barge and self._pre_silence_ms >= self.settings.complete_silence_ms + self.frame_ms:
            self._barge = False  # a blip that never became speech
            await self.push(ResumeFrame())

    async def _audio(self, frame: InputAudioFrame) -> None:
        if frame.speech:
            self._voiced_ms += self.frame_ms
            self._silence_ms = 0
        else:
            self._silence_ms += self.frame_ms
        if self._barge and self._voiced_ms >= self.settings.backchannel_ms:
            self._barge = False
            await self.push(InterruptionFrame())
        needed = (self.settings.complete_silence_ms if self._complete
                  else self.settings.incomplete_silence_ms)
        if self._silence_ms >= needed:
            await self._end_turn()

    async def _end_turn(self) -> None:
        discard = False
        if self._barge:
            self._barge = False
            if self._complete:
                await self.push(InterruptionFrame())  # a short command: "stop", "never mind"
            else:
                discard = True  # backchannel or noise
                await self.push(ResumeFrame())
        self._open = False
        await self.push(EndOfTurnFrame(discard=discard, silence_ms=self._silence_ms),
                        Direction.UPSTREAM)
