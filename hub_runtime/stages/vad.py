"""VAD stage: scores every frame and runs the quiet → starting → speaking → stopping machine.

Consumes: InputAudioFrame (fills ``speech`` and ``probability``).
While the hub speaks, an :class:`EchoGate` keeps its own echo from counting as speech.

Emits: SpeechStartedFrame, SpeechStoppedFrame; forwards everything.
"""

from __future__ import annotations

import bisect
import enum
from collections import deque
from typing import Final

import numpy as np

from ..audio.native import frame_rms
from ..engines.base import SpeechScorer
from ..frames import Frame, InputAudioFrame, SpeechStartedFrame, SpeechStoppedFrame
from ..pipeline import Direction, Stage

ECHO_WINDOW_FRAMES: Final = 7  # reference frames an echo may lag behind (~210 ms)
ECHO_TAIL_FRAMES: Final = 15  # after the speaker falls silent, its echo still dies away (~450 ms)
# echo-to-reference ratios kept (~1 s of playback): the canceller converges within the first
# seconds of a reply, and an estimate that still holds them (3 s were kept before) missed the
# user's first 900 ms in 4 of 60 overlaps, none with 1 s and ECHO_LEARN_MAX (bench/echo.py's
# scenes, their levels replayed)
ECHO_STATS_FRAMES: Final = 33
ECHO_MIN_STATS: Final = 10  # ratios needed before speech can count during playback
ECHO_MARGIN: Final = 2.5  # the user must be this much louder than the expected echo
# A frame the VAD calls speech, louder than this times the expected echo but under the margin,
# is not learnt from: a word's rising start, which would lift the estimate above the word itself.
ECHO_LEARN_MAX: Final = 1.25
PLAYBACK_FLOOR_RMS: Final = 60.0  # reference below this is silence
# Other voices in the room (a TV, people talking) keep the VAD on after the person talking to
# the hub has stopped: a turn would go on until they pause. The person near the hub is the
# loudest talker; once ``TALKER_MIN_FRAMES`` frames of speech have set their level (the
# ``TALKER_PERCENTILE``th percentile of the turn's speech frames, in dB), ``TALKER_QUIET_FRAMES``
# frames in a row more than ``TALKER_DROP_DB`` under it end their speech, whatever the VAD
# says. Offline, on the dev half's recordings: in the bench's babble (voices at -14 dB) it ends
# the talker's speech in all 59, 408 ms after the words (p50); in the 243 clean, reverberant
# and pink-noise ones, where the VAD ends first, it fires in 2 (inside the words). 12 dB or 6
# frames fired inside the words of 7 to 50 of those.
TALKER_DROP_DB: Final = 15.0
# ... frames quieter still are no voices but the talker's own silence (without this bound, the
# gate also ended 12 of the 113 clean dev recordings, on the breath after the words, and said
# voices were in the room). The VAD's scores lag behind it (a median 60 ms after the words on
# the dev half's clean recordings, 120 ms with reverb): ``TALKER_HUSH_FRAMES`` such frames in a
# row end the speech already (30 ms after the words; 60 ms with reverb). Inside the words, 2 in
# a row came 0.4 times a clean recording (a stop's closure): the speech goes on after it.
TALKER_VOICES_DB: Final = 30.0
TALKER_HUSH_FRAMES: Final = 2
TALKER_QUIET_FRAMES: Final = 8
TALKER_MIN_FRAMES: Final = 10
TALKER_PERCENTILE: Final = 90
TALKER_WINDOW_FRAMES: Final = 400  # the talker's level is of the last 12 s of speech frames at most
# ... and the voices go on being no one's speech while they do: until the VAD hears none for
# ``QUIET_ROOM_FRAMES`` (or nothing louder comes for ``TALKER_HOLD_FRAMES``), a turn needs a
# voice within half ``TALKER_DROP_DB`` of the talker's level to start
TALKER_HOLD_FRAMES: Final = 333  # 10 s of 30 ms frames
QUIET_ROOM_FRAMES: Final = 8  # frames in a row without speech that end the hold


def _rms(x: np.ndarray) -> float:
    return float(frame_rms(np.ascontiguousarray(x, dtype=np.int16)))


class EchoGate:
    """Keeps the hub's own (residual) echo from counting as user speech.

    While the speaker plays, the ratio of microphone level to recent playback level is
    learnt on frames that are not user speech (a high percentile over the last second of
    playback, kept across replies: the room does not change). A frame is speech only if it
    is ``ECHO_MARGIN`` times louder than that expected echo; a frame the VAD calls speech
    that is clearly louder than the echo but under the margin is not learnt from (the
    start of a word). In the first ``ECHO_WINDOW_FRAMES`` of playback nothing counts and
    nothing is learnt: the echo has not come back yet (measured on 40 replies to silence
    with a reply's first word in it: 4 paused the hub at 390-480 ms, none with this hold).
    When the speaker falls silent (between sentences, at the end), the echo dies away for a
    while: against the recent playback, the gate holds.
    """

    def __init__(self) -> None:
        """No echo learnt yet."""
        self._ref: deque[float] = deque(maxlen=ECHO_TAIL_FRAMES)
        self._ratios: deque[float] = deque(maxlen=ECHO_STATS_FRAMES)
        self._playing = 0  # frames since playback started (after a silence longer than the echo tail)

    def allows(self, mic: np.ndarray, reference: np.ndarray | None, speech: bool) -> bool:
        """Whether a frame the VAD called ``speech`` is really the user."""
        self._ref.append(_rms(reference) if reference is not None else 0.0)
        recent = list(self._ref)[-ECHO_WINDOW_FRAMES:]
        ref_level = max(recent)
        tail_level = max(self._ref)
        if tail_level < PLAYBACK_FLOOR_RMS:
            self._playing = 0
            return speech
        self._playing += 1
        if self._playing <= ECHO_WINDOW_FRAMES:  # the echo may not have come back yet: a ratio
            return False  # now would be too low, and the canceller has not heard this reply yet
        level = _rms(mic)
        if ref_level < PLAYBACK_FLOOR_RMS:  # the echo's tail: the gate holds, learning nothing
            expected = float(np.percentile(self._ratios, 90)) if self._ratios else 1.0
            return speech and level > ECHO_MARGIN * expected * tail_level
        ratio = level / ref_level
        if len(self._ratios) < ECHO_MIN_STATS:
            self._ratios.append(ratio)
            return False
        expected = float(np.percentile(self._ratios, 90))
        user = speech and ratio > ECHO_MARGIN * expected
        if not speech or ratio <= ECHO_LEARN_MAX * expected:
            self._ratios.append(ratio)
        return user


def level_db(x: np.ndarray) -> float:
    """Samples' level in dB over one int16 step (0 for silence)."""
    return 20.0 * float(np.log10(_rms(x) + 1.0))


class TalkerGate:
    """Ends the speech of the person talking to the hub when only quieter voices go on, or their silence.

    Fed every frame after the echo gate. See ``TALKER_DROP_DB`` and ``TALKER_HUSH_FRAMES``.
    """

    def __init__(self) -> None:
        """No talker yet."""
        self._levels: list[float] = []  # the speech frames' levels (dB) in this stretch of speech, sorted
        self._recent: deque[float] = deque()  # ... the same, oldest first (at most TALKER_WINDOW_FRAMES)
        self._level: float | None = None  # the talker's level, once known
        self._quiet = 0  # frames in a row well under it
        self._hush = 0  # ... frames in a row quieter still: the talker's silence
        self._held = 0  # frames the voices have been held under a known level after the talker ended
        self._silent = 0  # frames in a row the VAD heard no speech

    def allows(self, level_db: float, heard: bool, speech: bool, *, playing: bool = False,
               speaking: bool = False) -> bool:
        """Whether a frame is the talker's speech: ``heard``, the VAD's call; ``speech``, the echo gate's.

        ``playing``: the hub's echo may be in the frame; its level is no talker's, so nothing
        is learnt and no talker ends or starts, but voices held under the last talker stay
        held (the TV that goes on while the hub answers is not someone taking the floor).
        ``speaking``: the VAD has not ended the talker's speech yet; a voice over the held
        ones is the talker going on ("add apples to [pause] my list"), not a new one.
        """
        hush, self._hush = self._hush, 0
        if not heard:
            self._silent += 1
            if self._silent >= QUIET_ROOM_FRAMES:  # the room fell quiet: the voices are gone
                self.reset()
            self._quiet = 0
            return False
        self._silent = 0
        level = self._level
        if self._held and level is not None:
            under = TALKER_DROP_DB if speaking else TALKER_DROP_DB / 2
            if level_db < level - under:  # only the voices held under
                self._held += 1
                if self._held >= TALKER_HOLD_FRAMES:
                    self.reset()
                return False
            if playing:
                return speech  # as loud as the talker, over the hub's voice: the echo gate's call
            if not speaking:
                self._levels, self._recent = [], deque()  # a talker as loud as the last one: measured anew
            self._held, self._quiet = 0, 0
        elif playing:
            self._quiet = 0
            return speech
        elif level is not None and level_db < level - TALKER_VOICES_DB:
            self._quiet = 0  # too quiet for voices: the talker's silence the VAD has not caught up with
            self._hush = hush + 1
            return speech and not self.hushed
        elif level is not None and level_db < level - TALKER_DROP_DB:
            self._quiet += 1
            if self._quiet >= TALKER_QUIET_FRAMES:  # the talker has stopped; quieter voices go on
                self._held = 1
                return False
            return True
        self._quiet = 0
        bisect.insort(self._levels, level_db)  # kept sorted: the percentile is a lookup
        self._recent.append(level_db)
        if len(self._recent) > TALKER_WINDOW_FRAMES:  # the oldest goes: voices that never pause
            del self._levels[bisect.bisect_left(self._levels, self._recent.popleft())]
        if len(self._levels) >= TALKER_MIN_FRAMES:
            self._level = self._levels[(len(self._levels) - 1) * TALKER_PERCENTILE // 100]
        return True

    @property
    def hushed(self) -> bool:
        """Whether the last frame was the talker's silence, not voices, though the VAD heard speech."""
        return self._hush >= TALKER_HUSH_FRAMES

    def reset(self) -> None:
        """Forget the talker (the room fell quiet, or the voices went on too long to be held)."""
        self._levels, self._recent, self._level = [], deque(), None
        self._quiet = self._held = self._silent = self._hush = 0


class VadState(enum.Enum):
    """Where the detector is."""

    QUIET = "quiet"
    STARTING = "starting"
    SPEAKING = "speaking"
    STOPPING = "stopping"


class VadStage(Stage):
    """Speech start/stop from per-frame scores."""

    def __init__(self, scorer: SpeechScorer, *, threshold: float, start_ms: int, stop_ms: int,
                 frame_ms: int) -> None:
        """Compare scores with ``threshold``; need ``start_ms``/``stop_ms`` sustained."""
        super().__init__("vad")
        self.scorer = scorer
        self.threshold = threshold
        self.start_ms, self.stop_ms, self.frame_ms = start_ms, stop_ms, frame_ms
        self.state = VadState.QUIET
        self.echo_gate = EchoGate()
        self.talker_gate = TalkerGate()
        self._run_ms = 0
        self._edge_ms = 0
        self._since_playback = ECHO_TAIL_FRAMES + 1  # frames since the speaker last played

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Score audio frames; forward everything."""
        if isinstance(frame, InputAudioFrame):
            self._since_playback = 0 if frame.played else self._since_playback + 1
            frame.probability = self.scorer.score(frame.audio.samples_i16,
                                                  playing=self._since_playback <= ECHO_TAIL_FRAMES)
            heard = frame.probability >= self.threshold
            echo_allows = self.echo_gate.allows(frame.audio.samples_i16, frame.reference, heard)
            frame.speech = self.talker_gate.allows(
                level_db(frame.audio.samples_i16), heard, echo_allows,
                playing=self._since_playback <= ECHO_TAIL_FRAMES,
                speaking=self.state in (VadState.SPEAKING, VadState.STOPPING))
            frame.voices = echo_allows and not frame.speech and not self.talker_gate.hushed
            await self._step(frame)
        await self.push(frame, direction)

    async def _step(self, frame: InputAudioFrame) -> None:
        speech = frame.speech
        if self.state is VadState.QUIET:
            if speech:
                self.state, self._run_ms, self._edge_ms = VadState.STARTING, 0, frame.t_ms
        if self.state is VadState.STARTING:
            if not speech:
                self.state = VadState.QUIET
                return
            self._run_ms += self.frame_ms
            if self._run_ms >= self.start_ms:
                self.state = VadState.SPEAKING
                await self.push(SpeechStartedFrame(onset_ms=self._edge_ms))
            return
        if self.state is VadState.SPEAKING:
            if not speech:
                self.state, self._run_ms, self._edge_ms = VadState.STOPPING, 0, frame.t_ms
        if self.state is VadState.STOPPING:
            if speech:
                self.state = VadState.SPEAKING
                return
            self._run_ms += self.frame_ms
            if self._run_ms >= self.stop_ms:
                self.state = VadState.QUIET
                await self.push(SpeechStoppedFrame(offset_ms=self._edge_ms))
