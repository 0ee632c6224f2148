"""Turn stage: end of turn, barge-in decisions, and whether speech is addressed to the hub.

End of turn is not silence alone: when the running hypothesis is already a complete
command of the grammar the turn closes after ``complete_silence_ms`` of silence (a
one-word command, one that ends on a number more number words may follow ("set the volume
to thirty [pause] four"), or any over the hub's paused voice, after ``short_silence_ms``:
it may be the start of a longer one), otherwise after ``incomplete_silence_ms``. In a pause the
ASR's second tier checks the words (CheckingFrame, then a ``checked`` partial): the turn
waits for that verdict, which overrules the grammar tier's; a full command of the grammar
tier's that the check was not sure of closes after ``short_silence_ms`` (a pause inside a
longer sentence: "... fifty seven minute [pause] timer").

Barge-in: ``barge_in_ms`` of user speech while the hub is replying pauses playback
at once (BargeInFrame), before the VAD has even confirmed a turn. Once the speech
has lasted ``LONG_SPEECH_FACTOR`` times ``backchannel_ms`` — or the grammar made out an
answer to the hub's own question — the hub stops for good (InterruptionFrame, which the
pipeline base turns into cancellation everywhere downstream). A shorter blip resumes
playback (ResumeFrame) and is discarded. Any other words over the hub's own voice end the
turn ``undecided``: playback stays paused and the transcript (Whisper's, as for every
overlapped turn) decides in the router ("stop": cancelled; "mm hmm": resumed; a command:
cancelled and answered). The grammar tier's words are not trusted over an echo, however
many: it fits the echo's residue to commands ("uh huh" → "what lock are"). Speech over the
hub that never became a VAD turn but lasted ``MIN_WORDS_MS`` (a short "stop" under a loud
echo) ends as a ``blip``: playback stays paused while the ASR transcribes what it kept, and
only a stop phrase stops the hub.

Sessions (wake-word mode): this stage owns them. The wake word or a SessionFrame opens
one; the hub's reply keeps it open ``session_timeout_ms`` after the reply ends; a turn
outside a session is discarded (EndOfTurnFrame ``discard``), never transcribed.

Reads whether the hub is replying from the :class:`~..status.DialogueTracker`.
Consumes: SpeechStartedFrame, PartialTranscriptFrame, CheckingFrame, InputAudioFrame, WakeWordFrame,
SessionFrame, BotStoppedSpeakingFrame.
Emits: EndOfTurnFrame (upstream, to the ASR), BargeInFrame, ResumeFrame,
InterruptionFrame (downstream); forwards everything.
"""

from __future__ import annotations

import logging
from typing import Final

from ..frames import (
    BargeInFrame,
    BotStoppedSpeakingFrame,
    CheckingFrame,
    EndOfTurnFrame,
    Frame,
    InputAudioFrame,
    InterruptionFrame,
    PartialTranscriptFrame,
    ResumeFrame,
    SessionFrame,
    SpeechStartedFrame,
    WakeWordFrame,
)
from ..grammar.automaton import OPEN_NUMBER_WORDS
from ..pipeline import Direction, Stage
from ..settings import TurnSettings
from ..status import DialogueTracker

_LOGGER = logging.getLogger(__name__)

MIN_WORDS_MS: Final = 90  # shorter voiced speech over the hub is a blip (a cough, a click)
LONG_SPEECH_FACTOR: Final = 3  # speech over the hub this many times backchannel_ms is a turn, words or not


class Session:
    """Whether speech is addressed to the hub (always, without a wake word)."""

    def __init__(self, *, wake_word: bool, timeout_ms: int) -> None:
        """Sessions are needed only in wake-word mode."""
        self.wake_word = wake_word
        self.timeout_ms = timeout_ms
        self.until_ms = -1

    def open(self, now_ms: int) -> None:
        """The wake word was heard (or a session was opened from outside)."""
        self.until_ms = now_ms + self.timeout_ms

    def extend(self, now_ms: int) -> None:
        """The hub replied: the user may answer without the wake word."""
        if self.until_ms >= 0:
            self.until_ms = max(self.until_ms, now_ms + self.timeout_ms)

    def close(self) -> None:
        """Close the session now."""
        if self.wake_word:
            self.until_ms = -1

    def active(self, now_ms: int) -> bool:
        """Whether speech is addressed to the hub now."""
        return not self.wake_word or now_ms <= self.until_ms


class TurnStage(Stage):
    """Decides when the user's turn ends and whether they are taking the floor."""

    def __init__(self, settings: TurnSettings, tracker: DialogueTracker, *, frame_ms: int,
                 session: Session) -> None:
        """Use these timings; read whether the hub is replying from ``tracker``."""
        super().__init__("turn")
        self.settings = settings
        self.tracker = tracker
        self.session = session
        self.frame_ms = frame_ms
        self._open = False
        self._voiced_ms = 0
        self._silence_ms = 0
        self._grammar_complete = False  # the grammar tier's own words are a full command
        self._checking = False  # the second tier checks this pause: wait for its verdict
        self._verdict: bool | None = None  # ... its verdict: the grammar tier's words do not overrule it
        self._verdict_words = ""  # ... the words it holds as said ("": none of a command yet, "So.")
        self._words = ""  # the running hypothesis
        self._barge = False  # playback paused, not yet decided
        self._pre_voiced_ms = 0  # speech heard while replying, before the VAD opened a turn
        self._pre_silence_ms = 0
        self._blip_ms = 0  # all speech heard since a pre-turn pause

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Track the turn; forward every frame."""
        await self.push(frame, direction)
        if isinstance(frame, SpeechStartedFrame):
            await self._speech_started(frame)
        elif isinstance(frame, PartialTranscriptFrame):
            await self._partial(frame)
        elif isinstance(frame, CheckingFrame):
            self._checking, self._verdict = True, None
        elif isinstance(frame, InputAudioFrame):
            if self._open:
                await self._audio(frame)
            else:
                await self._watch(frame)
        elif isinstance(frame, WakeWordFrame):
            self.session.open(self.now_ms())
            self._voiced_ms, self._silence_ms = 0, 0
            self._forget_words()
        elif isinstance(frame, SessionFrame):
            if frame.open:
                self.session.open(self.now_ms())
            else:
                self.session.close()
        elif isinstance(frame, BotStoppedSpeakingFrame) and frame.drained:
            self.session.extend(self.now_ms())

    async def _speech_started(self, frame: SpeechStartedFrame) -> None:
        self._pre_voiced_ms = self._pre_silence_ms = self._blip_ms = 0
        if not self._open:
            self._open, self._voiced_ms, self._silence_ms = True, 0, 0
            self._forget_words()
        self._silence_ms = 0
        if self.tracker.replying and not self._barge:
            self._barge = True
            await self.push(BargeInFrame(onset_ms=frame.onset_ms))

    async def _watch(self, frame: InputAudioFrame) -> None:
        """Before the VAD opens a turn: pause after ``barge_in_ms`` of speech over the hub."""
        if frame.speech:
            self._pre_voiced_ms += self.frame_ms
            self._blip_ms += self.frame_ms
            self._pre_silence_ms = 0
            if (self.tracker.replying and not self._barge
                    and self._pre_voiced_ms >= max(self.frame_ms, self.settings.barge_in_ms)):
                self._barge = True
                self._blip_ms = self._pre_voiced_ms
                await self.push(BargeInFrame(onset_ms=frame.t_ms - self._pre_voiced_ms + self.frame_ms))
            return
        self._pre_voiced_ms = 0
        self._pre_silence_ms += self.frame_ms
        if self._barge and self._pre_silence_ms >= self.settings.complete_silence_ms + self.frame_ms:
            self._barge = False  # speech that never became a turn: a click, a cough, or a short
            if self._blip_ms >= MIN_WORDS_MS and self.session.active(self.now_ms()):  # "stop" in an echo
                await self.push(EndOfTurnFrame(undecided=True, blip=True), Direction.UPSTREAM)
            else:
                await self.push(ResumeFrame())
            self._blip_ms = 0

    def _forget_words(self) -> None:
        self._grammar_complete, self._checking, self._verdict = False, False, None

    @property
    def _complete(self) -> bool:
        """Whether the words so far are a full command: the pause's verdict, else the grammar tier's."""
        if self._verdict is not None:
            return self._verdict
        return self._grammar_complete and not self._checking

    async def _partial(self, frame: PartialTranscriptFrame) -> None:
        self._words = frame.text
        if frame.checked:  # the second tier's verdict on this pause
            self._checking, self._verdict, self._verdict_words = False, frame.complete, frame.text
            if self._open and self._silence_ms >= self._needed_silence_ms():
                await self._end_turn()  # it came between frames: no need to wait for the next
            return
        self._grammar_complete = frame.complete

    async def _audio(self, frame: InputAudioFrame) -> None:
        if frame.speech:
            self._voiced_ms += self.frame_ms
            self._silence_ms = 0
            self._checking, self._verdict = False, None  # the words go on: a pause's check is moot
        else:
            self._silence_ms += self.frame_ms
        if self._barge and self._voiced_ms >= self.settings.backchannel_ms and self._a_real_turn():
            self._barge = False
            await self.push(InterruptionFrame())
        if self._silence_ms >= self._needed_silence_ms():
            await self._end_turn()

    def _needed_silence_ms(self) -> int:
        """How long a silence ends the turn, from what the words so far are."""
        if self._checking:  # the verdict comes within a pass (~150 ms); this long a silence ends it anyway
            return self.settings.incomplete_silence_ms
        if not self._complete:
            # the grammar tier's full command that the second tier was not sure of: a pause
            # inside a longer sentence, or words it did not make out; a little longer for more.
            # Not when the second tier heard no words of a command at all ("So," and a pause,
            # that pocketsphinx fitted to "hello"): the request is still to come
            doubted = self._verdict is False and self._grammar_complete and bool(self._verdict_words)
            return self.settings.short_silence_ms if doubted else self.settings.incomplete_silence_ms
        words = self._words.split()
        if len(words) < 2 or words[-1] in OPEN_NUMBER_WORDS or self._barge:  # "stop" may go on: "stop the mower"
            # "thirty" may go on too: "make the volume to thirty [pause] four Kitchen Speaker", its
            # turn ended after "thirty", set the player in the hub's room to 30. Over the hub
            # (paused: it is quiet anyway), the grammar's words are not trusted to be whole:
            # "turn on the office" cut from "... fan" where the echo gate held a frame back
            return self.settings.short_silence_ms
        return self.settings.complete_silence_ms

    def _a_real_turn(self) -> bool:
        """Speech over the hub that is surely a turn, not a listener's "mm hmm": stop the hub now.

        Long speech, or the answer to the hub's question that the grammar made out; anything
        else waits for the end of the turn and its transcript (``undecided``): over the hub's
        voice the grammar tier fits the echo's residue to commands ("I see" → "cancel", "uh
        huh" → "what lock are"), so its words never stop the hub for good alone.
        """
        return ((self._complete and self.tracker.asking)
                or self._voiced_ms >= LONG_SPEECH_FACTOR * self.settings.backchannel_ms)

    async def _end_turn(self) -> None:
        discard = not self.session.active(self.now_ms())
        undecided = False
        if self._barge:
            self._barge = False
            if self._complete and self.tracker.asking:
                await self.push(InterruptionFrame())  # the answer to its question
            elif discard or self._voiced_ms < MIN_WORDS_MS:
                discard = True  # a blip
                await self.push(ResumeFrame())
            else:  # words over the hub's voice ("stop", "mm hmm", a command: the transcript knows)
                undecided = True  # playback stays paused; the transcript decides (router)
        self._open = False
        await self.push(EndOfTurnFrame(discard=discard, silence_ms=self._silence_ms, undecided=undecided),
                        Direction.UPSTREAM)
