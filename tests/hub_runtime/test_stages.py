"""Each stage alone: frames in, frames out, fake engines at the stage's boundary.

The real engines are exercised end to end in test_voice_loop.py; these say exactly which
stage does what.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from hub_runtime import protocol as p
from hub_runtime.agent import Agent
from hub_runtime.audio.format import AudioChunk, Int16Array
from hub_runtime.events import EventObserver
from hub_runtime.frames import (
    BargeInFrame,
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    CheckingFrame,
    EndOfTurnFrame,
    ErrorFrame,
    Frame,
    IntentFrame,
    InterruptionFrame,
    PartialTranscriptFrame,
    PlaybackCancelledFrame,
    PlaybackPausedFrame,
    ResponseFrame,
    ResumeFrame,
    SayFrame,
    SessionFrame,
    SpeakFrame,
    SpeechStartedFrame,
    SpeechStoppedFrame,
    SpokenFrame,
    TranscriptFrame,
    TTSAudioFrame,
)
from hub_runtime.pipeline import Clock, Direction, Stage
from hub_runtime.settings import Settings, TurnSettings
from hub_runtime.stages.output import OutputStage
from hub_runtime.stages.router import RouterStage
from hub_runtime.stages.tts import TtsStage
from hub_runtime.stages.turn import Session, TurnStage
from hub_runtime.stages.vad import VadStage
from hub_runtime.status import DialogueTracker
from hub_runtime.understanding import Understanding

from .stage_helpers import StageRun, audio_frame, run_stage


def run(stage: Stage, frames: list[Any], **kwargs: Any) -> StageRun:
    return asyncio.run(run_stage(stage, frames, **kwargs))


# -- VAD -------------------------------------------------------------------------------------
class ScriptedScorer:
    """A speech scorer that returns the scores it was given, one per frame."""

    def __init__(self, scores: list[float]) -> None:
        self._scores: Iterator[float] = iter(scores)

    def score(self, frame: Int16Array, *, playing: bool = False) -> float:
        return next(self._scores)

    def reset(self) -> None:
        pass


def test_vad_starts_after_start_ms_and_stops_after_stop_ms() -> None:
    scores = [0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    stage = VadStage(ScriptedScorer([float(s) for s in scores]), threshold=0.5, start_ms=60, stop_ms=90,
                     frame_ms=30)
    out = run(stage, [audio_frame(i * 30) for i in range(len(scores))])
    assert [f.onset_ms for f in out.of(SpeechStartedFrame)] == [60]
    assert [f.offset_ms for f in out.of(SpeechStoppedFrame)] == [180]
    assert [f.speech for f in out.of(type(audio_frame(0)))] == [bool(s) for s in scores]


def test_vad_ignores_a_blip_shorter_than_start_ms() -> None:
    stage = VadStage(ScriptedScorer([0, 1, 0, 0, 0]), threshold=0.5, start_ms=60, stop_ms=90, frame_ms=30)
    out = run(stage, [audio_frame(i * 30) for i in range(5)])
    assert not out.of(SpeechStartedFrame)


def _level(rms: float) -> Int16Array:
    return np.full(480, int(rms), np.int16)


def test_the_echo_gate_holds_while_a_replys_first_echo_comes_back() -> None:
    """A reply's first word: its echo comes back 120 ms late and uncancelled (the canceller has not heard it)."""
    from hub_runtime.stages.vad import EchoGate

    refs = [0, 0, 85, 546, 6187, 671, 54, 840, 1740, 8019, 10733, 2267, 84, 1037, 1797, 0, 0, 0, 0, 0, 0, 0]
    echo = [0, 0, 0, 0] + [0.2 * r for r in refs]  # heard as speech: it is the hub's voice
    gate = EchoGate()
    allowed = [gate.allows(_level(m), _level(r), True) for r, m in zip(refs, echo, strict=False)]
    assert allowed[:2] == [True, True] and not any(allowed[2:])  # before the reply, speech is speech
    for _ in range(40):  # the echo settles (a fifth of the playback); the user, ten times louder, counts
        gate.allows(_level(200), _level(1000), False)
    assert gate.allows(_level(2000), _level(1000), True)


def test_the_echo_gate_does_not_learn_a_words_rising_start() -> None:
    """A word starts just under the margin: learning it would lift the expected echo above the word."""
    from hub_runtime.stages.vad import ECHO_MARGIN, EchoGate

    gate = EchoGate()
    for _ in range(60):
        gate.allows(_level(100), _level(1000), False)  # the echo: a tenth of the playback
    rising = 0.9 * ECHO_MARGIN * 100
    assert not any([gate.allows(_level(rising), _level(1000), True) for _ in range(12)])
    assert gate.allows(_level(1.1 * ECHO_MARGIN * 100), _level(1000), True)


def test_the_talker_gate_ends_the_talkers_speech_when_only_quieter_voices_go_on() -> None:
    """Voices 20 dB under the person near the hub (a TV) keep the VAD on; they are no one's turn."""
    from hub_runtime.stages.vad import TALKER_QUIET_FRAMES, TalkerGate, level_db

    gate = TalkerGate()
    tv, talker = level_db(_level(400)), level_db(_level(4000))
    assert all(gate.allows(tv, True, True) for _ in range(5))  # the TV alone: speech, as the VAD says
    assert all(gate.allows(talker, True, True) for _ in range(20))
    quiet = [gate.allows(tv, True, True) for _ in range(TALKER_QUIET_FRAMES + 20)]
    assert quiet == [True] * (TALKER_QUIET_FRAMES - 1) + [False] * 21  # a soft stretch, then the end
    # over the hub's reply the TV stays held; a voice as loud as the talker is the echo gate's call
    assert not gate.allows(tv, True, True, playing=True)
    assert gate.allows(talker, True, True, playing=True) and not gate.allows(talker, True, False, playing=True)
    assert not gate.allows(tv, True, True)
    assert gate.allows(level_db(_level(2500)), True, True)  # someone as loud as the talker: a turn again


def test_the_talker_going_on_softly_after_a_pause_is_still_the_talker() -> None:
    """'add apples to [a pause, the room's voices] my list': until the VAD ends the speech, softer words go on."""
    from hub_runtime.stages.vad import TALKER_QUIET_FRAMES, TalkerGate, level_db

    gate = TalkerGate()
    tv, soft, talker = level_db(_level(300)), level_db(_level(1000)), level_db(_level(4000))
    assert all(gate.allows(talker, True, True, speaking=True) for _ in range(20))
    assert not [gate.allows(tv, True, True, speaking=True) for _ in range(TALKER_QUIET_FRAMES)][-1]
    assert gate.allows(soft, True, True, speaking=True)  # 12 dB under the talker: the talker goes on
    assert [gate.allows(tv, True, True, speaking=True) for _ in range(TALKER_QUIET_FRAMES)][-1] is False
    assert not gate.allows(soft, True, True)  # once the VAD has ended the speech: someone else, held


def test_the_talker_gate_lets_a_soft_word_be_and_forgets_the_talker_in_a_quiet_room() -> None:
    from hub_runtime.stages.vad import QUIET_ROOM_FRAMES, TALKER_QUIET_FRAMES, TalkerGate, level_db

    gate = TalkerGate()
    soft, talker = level_db(_level(300)), level_db(_level(4000))
    for _ in range(3):  # words with soft stretches shorter than a talker's end
        assert all(gate.allows(talker, True, True) for _ in range(12))
        assert all(gate.allows(soft, True, True) for _ in range(TALKER_QUIET_FRAMES - 1))
    assert not any(gate.allows(talker, False, False) for _ in range(QUIET_ROOM_FRAMES))  # a silence
    assert all(gate.allows(soft, True, True) for _ in range(30))  # a new, softer talker: theirs is the level


def test_the_talkers_silence_ends_their_speech_before_the_vad_does() -> None:
    """Frames far under the talker (the room's silence) end the speech in 2; they are no voices."""
    from hub_runtime.stages.vad import TALKER_HUSH_FRAMES, TalkerGate, level_db

    gate = TalkerGate()
    silence, talker = level_db(_level(30)), level_db(_level(4000))
    assert all(gate.allows(talker, True, True) for _ in range(20))
    # the VAD still hears speech in the silence after the words: its scores lag behind
    assert [gate.allows(silence, True, True) for _ in range(4)] == [True] * (TALKER_HUSH_FRAMES - 1) + [False] * 3
    assert gate.hushed
    assert gate.allows(talker, True, True) and not gate.hushed  # a stop's closure: the words go on
    assert gate.allows(silence, True, True)


# -- turn ------------------------------------------------------------------------------------
class Replying:
    """The facts the turn stage reads from the dialogue tracker."""

    def __init__(self, replying: bool, asking: bool = False) -> None:
        self.replying = replying
        self.asking = asking


def _turn(replying: bool = False, wake_word: bool = False) -> TurnStage:
    return TurnStage(TurnSettings(), Replying(replying),  # type: ignore[arg-type]
                     frame_ms=30, session=Session(wake_word=wake_word, timeout_ms=8000))


def _speech(start: int, n: int, speech: bool = True) -> list[Frame]:
    return [audio_frame(start + i * 30, speech=speech) for i in range(n)]


def test_turn_ends_soon_after_a_complete_command() -> None:
    frames = [SpeechStartedFrame(onset_ms=0), *_speech(0, 10), PartialTranscriptFrame("turn on the light", True),
              *_speech(300, 4, speech=False)]
    out = run(_turn(), frames)
    ends = out.of(EndOfTurnFrame, up=True)
    assert len(ends) == 1 and not ends[0].discard and ends[0].silence_ms == 90


def test_the_second_tiers_verdict_on_a_pause_decides_how_long_the_turn_waits() -> None:
    """Pocketsphinx fits a pause inside a sentence to a command; the turn waits for the check of the pause."""
    said = [SpeechStartedFrame(onset_ms=0), *_speech(0, 10), PartialTranscriptFrame("toggle the study light", True),
            *_speech(300, 1, speech=False), CheckingFrame(), *_speech(330, 4, speech=False)]
    assert not run(_turn(), said).of(EndOfTurnFrame, up=True)  # no verdict yet: the turn waits
    # sure of a full command: the turn closes at the verdict, the silence long enough already
    sure = run(_turn(), [*said, PartialTranscriptFrame("toggle the study light", True, checked=True)])
    assert [e.silence_ms for e in sure.of(EndOfTurnFrame, up=True)] == [150]
    # not sure: the words may go on ("time left on fifty seven minute [pause] timer") ...
    doubted = [*said, PartialTranscriptFrame("toggle the study light", False, checked=True)]
    assert not run(_turn(), [*doubted, *_speech(450, 2, speech=False)]).of(EndOfTurnFrame, up=True)
    # ... and they do: the grammar tier's words count again, until the next pause's check
    went_on = run(_turn(), [*doubted, *_speech(450, 8), PartialTranscriptFrame("turn on the study light", True),
                            *_speech(690, 3, speech=False)])
    assert [e.silence_ms for e in went_on.of(EndOfTurnFrame, up=True)] == [90]
    # ... or they do not: the turn ends after a short silence (the grammar tier's words do not overrule)
    ended = run(_turn(), [*doubted, PartialTranscriptFrame("toggle the study light", True),
                          *_speech(450, 6, speech=False)])
    assert [e.silence_ms for e in ended.of(EndOfTurnFrame, up=True)] == [TurnSettings().short_silence_ms]


def test_a_verdict_with_no_words_of_a_command_waits_for_the_request() -> None:
    """ "So, [pause] what time is it?": pocketsphinx fits "So," to "hello"; Whisper heard only "So."."""
    said = [SpeechStartedFrame(onset_ms=0), *_speech(0, 10), PartialTranscriptFrame("hello", True),
            *_speech(300, 1, speech=False), CheckingFrame(), *_speech(330, 4, speech=False),
            PartialTranscriptFrame("", False, checked=True), PartialTranscriptFrame("help", True)]
    # a doubted command would end after short_silence_ms; this waits as for words that are no command
    assert not run(_turn(), [*said, *_speech(450, 6, speech=False)]).of(EndOfTurnFrame, up=True)
    went_on = run(_turn(), [*said, *_speech(450, 3, speech=False), *_speech(540, 10),
                            PartialTranscriptFrame("what time is it", True), *_speech(840, 3, speech=False)])
    assert [e.silence_ms for e in went_on.of(EndOfTurnFrame, up=True)] == [90]
    ended = run(_turn(), [*said, *_speech(450, 20, speech=False)]).of(EndOfTurnFrame, up=True)
    assert [e.silence_ms for e in ended] == [TurnSettings().incomplete_silence_ms + 10]


def test_a_one_word_command_or_any_over_the_hub_waits_a_little_longer() -> None:
    """ "stop" may go on ("stop the mower"); over the hub (paused) the grammar's words may be cut short."""
    frames = [SpeechStartedFrame(onset_ms=0), *_speech(0, 10), PartialTranscriptFrame("stop", True),
              *_speech(300, 4, speech=False)]
    assert not run(_turn(), frames).of(EndOfTurnFrame, up=True)
    ends = run(_turn(), [*frames, *_speech(420, 8, speech=False)]).of(EndOfTurnFrame, up=True)
    assert ends and ends[0].silence_ms == TurnSettings().short_silence_ms
    over = [SpeechStartedFrame(onset_ms=0), *_speech(0, 10), PartialTranscriptFrame("turn on the office", True),
            *_speech(300, 4, speech=False)]
    assert run(_turn(), over).of(EndOfTurnFrame, up=True)
    assert not run(_turn(replying=True), over).of(EndOfTurnFrame, up=True)
    ends = run(_turn(replying=True), [*over, *_speech(420, 8, speech=False)]).of(EndOfTurnFrame, up=True)
    assert ends and ends[0].silence_ms == TurnSettings().short_silence_ms


@pytest.mark.parametrize(("words", "waits"), [
    ("set the volume to thirty", True),  # "... thirty [pause] four"
    ("set the brightness to one hundred", True),
    ("set the volume to thirty four", False),
    ("set the volume to five", False),
    ("set the brightness to fifty percent", False),
])
def test_a_command_that_ends_on_a_number_more_may_follow_waits_a_little_longer(words: str, waits: bool) -> None:
    frames = [SpeechStartedFrame(onset_ms=0), *_speech(0, 10), PartialTranscriptFrame(words, True),
              *_speech(300, 4, speech=False)]
    assert bool(run(_turn(), frames).of(EndOfTurnFrame, up=True)) is not waits
    ends = run(_turn(), [*frames, *_speech(420, 8, speech=False)]).of(EndOfTurnFrame, up=True)
    assert [e.silence_ms for e in ends] == [TurnSettings().short_silence_ms if waits else 90]


def test_turn_waits_longer_when_the_words_are_not_a_command_yet() -> None:
    frames = [SpeechStartedFrame(onset_ms=0), *_speech(0, 10), PartialTranscriptFrame("turn on the", False),
              *_speech(300, 10, speech=False)]
    assert not run(_turn(), frames).of(EndOfTurnFrame, up=True)
    frames += _speech(600, 12, speech=False)
    assert run(_turn(), frames).of(EndOfTurnFrame, up=True)[0].silence_ms >= 650


def test_speech_over_the_hub_pauses_then_interrupts() -> None:
    """Long speech stops the hub before the turn ends; the grammar's words over the echo do not."""
    frames = [*_speech(0, 2), SpeechStartedFrame(onset_ms=0), *_speech(60, 14)]
    out = run(_turn(replying=True), frames)
    assert out.of(BargeInFrame) and not out.of(InterruptionFrame)  # 420 ms of unclear words: not yet
    assert out.of(BargeInFrame)[0].onset_ms == 0
    out = run(_turn(replying=True), [*frames, *_speech(480, 28)])
    assert [type(f).__name__ for f in out.down if isinstance(f, BargeInFrame | InterruptionFrame)] == [
        "BargeInFrame", "InterruptionFrame"]
    worded = [*_speech(0, 2), SpeechStartedFrame(onset_ms=0), *_speech(60, 6),
              PartialTranscriptFrame("turn off the", False), *_speech(240, 8)]
    assert not run(_turn(replying=True), worded).of(InterruptionFrame)


def test_a_blip_over_the_hub_resumes_and_is_discarded() -> None:
    frames = [*_speech(0, 2), SpeechStartedFrame(onset_ms=0), *_speech(60, 0),
              *_speech(60, 23, speech=False)]
    out = run(_turn(replying=True), frames)
    assert out.of(BargeInFrame) and out.of(ResumeFrame) and not out.of(InterruptionFrame)
    assert out.of(EndOfTurnFrame, up=True)[0].discard


@pytest.mark.parametrize(("words", "asking", "decided"), [
    ("yeah", False, "undecided"), ("mm hmm", False, "undecided"), ("stop", False, "undecided"),
    ("yes", True, "interrupted"), ("turn on the light", False, "undecided"), ("what lock are", False, "undecided")])
def test_the_grammars_words_over_the_hub_wait_for_the_transcript(words: str, asking: bool, decided: str) -> None:
    """Over an echo the grammar fits residue to commands: only its answer to the hub's question stops the hub."""
    turn = TurnStage(TurnSettings(), Replying(True, asking), frame_ms=30,  # type: ignore[arg-type]
                     session=Session(wake_word=False, timeout_ms=8000))
    frames = [SpeechStartedFrame(onset_ms=0), *_speech(0, 6), PartialTranscriptFrame(words, True),
              *_speech(180, 11, speech=False)]
    out = run(turn, frames)
    end = out.of(EndOfTurnFrame, up=True)[0]
    got = "interrupted" if out.of(InterruptionFrame) else "undecided" if end.undecided else "resumed"
    assert got == decided and not out.of(ResumeFrame) and not end.discard


def test_unclear_short_words_over_the_hub_keep_it_paused_for_the_transcript() -> None:
    """ "stop" in an echo that the grammar did not make out: neither resumed nor cancelled yet."""
    frames = [SpeechStartedFrame(onset_ms=0), *_speech(0, 6), PartialTranscriptFrame("", False),
              *_speech(180, 23, speech=False)]
    out = run(_turn(replying=True), frames)
    end = out.of(EndOfTurnFrame, up=True)[0]
    assert out.of(BargeInFrame) and not out.of(ResumeFrame) and not out.of(InterruptionFrame)
    assert end.undecided and not end.discard


@pytest.mark.parametrize(("voiced", "blip"), [(1, False), (4, True)])
def test_speech_over_the_hub_that_never_became_a_turn_is_a_blip_for_the_asr(voiced: int, blip: bool) -> None:
    """No SpeechStarted (a short "stop" under a loud echo): 120 ms of speech asks the ASR, a click resumes."""
    frames = [*_speech(0, voiced), *_speech(voiced * 30, 6, speech=False)]
    out = run(_turn(replying=True), frames)
    ends = out.of(EndOfTurnFrame, up=True)
    assert out.of(BargeInFrame)
    assert bool(ends and ends[0].blip and ends[0].undecided) is blip and bool(out.of(ResumeFrame)) is not blip


def test_outside_a_session_turns_are_discarded_until_one_is_opened() -> None:
    turn = [SpeechStartedFrame(onset_ms=0), *_speech(0, 5), PartialTranscriptFrame("turn on the light", True),
            *_speech(150, 4, speech=False)]
    assert run(_turn(wake_word=True), turn).of(EndOfTurnFrame, up=True)[0].discard
    opened = run(_turn(wake_word=True), [SessionFrame(open=True), *turn])
    assert not opened.of(EndOfTurnFrame, up=True)[0].discard
    closed = run(_turn(wake_word=True), [SessionFrame(open=True), SessionFrame(open=False), *turn])
    assert closed.of(EndOfTurnFrame, up=True)[0].discard


# -- router ----------------------------------------------------------------------------------
@pytest.fixture
def understanding() -> Understanding:
    return Understanding(Agent.from_settings(Settings()), None)


def test_router_publishes_the_intent_then_says_the_reply(understanding: Understanding) -> None:
    out = run(RouterStage(understanding), [TranscriptFrame("turn on the kitchen light", "grammar", 0.9)])
    assert out.kinds() == ["IntentFrame", "SpeakFrame", "ResponseFrame"]
    intent = out.of(IntentFrame)[0]
    assert intent.intent.targets == ["light.kitchen"] and intent.source == "grammar" and intent.confidence == 0.9
    assert out.of(ResponseFrame)[0] == ResponseFrame(text="Turned on the light", source="grammar")
    assert understanding.agent.model.catalog.get("light.kitchen").state == "on"  # type: ignore[union-attr]


def test_router_without_a_match_apologises_and_says_text_as_is(understanding: Understanding) -> None:
    out = run(RouterStage(understanding), [TranscriptFrame("sing me a song", "open", 0.5),
                                           TranscriptFrame("", "open", 0), SayFrame("Dinner is ready.")])
    assert out.kinds() == ["SpeakFrame", "ResponseFrame", "SpeakFrame"]
    assert out.of(ResponseFrame)[0].source is None and out.of(SpeakFrame)[1].text == "Dinner is ready."


@pytest.mark.parametrize(("heard", "kinds"), [
    ("Stop.", ["InterruptionFrame", "ResponseFrame"]),
    ("Be quiet.", ["InterruptionFrame", "ResponseFrame"]),
    ("MMM", ["ResumeFrame"]),
    ("Okay.", ["ResumeFrame"]),
    ("Thank you.", ["ResumeFrame"]),  # a listener's thanks, or Whisper's reading of an unclear "uh huh"
    ("The F.", ["ResumeFrame"]),
    ("", ["ResumeFrame"]),
    ("turn on the kitchen light", ["InterruptionFrame", "IntentFrame", "SpeakFrame", "ResponseFrame"]),
    ("wait, what time is it?", ["InterruptionFrame", "SpeakFrame", "ResponseFrame"]),
])
def test_router_decides_a_paused_reply_on_the_words(understanding: Understanding, heard: str,
                                                    kinds: list[str]) -> None:
    frame = TranscriptFrame(heard, "open", 0.5, overlapped=True, paused=True)
    assert run(RouterStage(understanding), [frame]).kinds() == kinds


@pytest.mark.parametrize(("heard", "grammar", "kinds"), [
    ("Let's talk.", "stop", ["InterruptionFrame", "ResponseFrame"]),  # Whisper missed a "stop" in the echo
    ("", "cancel", ["InterruptionFrame", "ResponseFrame"]),
    ("I see.", "cancel", ["ResumeFrame"]),  # the grammar fitted a listener's words to a stop
    ("Mm hmm.", "stop", ["ResumeFrame"]),
    ("turn on the kitchen light", "stop", ["InterruptionFrame", "IntentFrame", "SpeakFrame", "ResponseFrame"]),
])
def test_router_stops_a_paused_reply_when_the_grammar_heard_stop_and_whisper_nothing_else(
        understanding: Understanding, heard: str, grammar: str, kinds: list[str]) -> None:
    frame = TranscriptFrame(heard, "open", 0.5, grammar_text=grammar, overlapped=True, paused=True)
    out = run(RouterStage(understanding), [frame])
    assert out.kinds() == kinds
    if kinds[-1] == "ResponseFrame" and len(kinds) == 2:
        assert out.of(ResponseFrame)[0].text == ""  # quiet: no apology for what Whisper made of it


@pytest.mark.parametrize(("grammar", "whisper", "kinds"), [
    ("bye bye", "Fuff", ["ResumeFrame"]),  # an "uh huh" the grammar fitted to small talk
    ("see you soon", "And Anton.", ["ResumeFrame"]),  # ... an "mm hmm": its 3 words are not what was said
    ("bye bye", "Bye bye.", ["InterruptionFrame", "SpeakFrame", "ResponseFrame"]),
    ("turn on the kitchen light", "Turn on the kitchen lights.",
     ["InterruptionFrame", "IntentFrame", "SpeakFrame", "ResponseFrame"]),
])
def test_router_takes_small_talk_over_the_hub_only_when_whisper_said_it(
        understanding: Understanding, grammar: str, whisper: str, kinds: list[str]) -> None:
    frame = TranscriptFrame(grammar, "grammar", 0.9, open_text=whisper, overlapped=True, paused=True)
    assert run(RouterStage(understanding), [frame]).kinds() == kinds


def test_router_passes_what_was_played_upstream(understanding: Understanding) -> None:
    out = run(RouterStage(understanding), [(SpokenFrame("Hello there."), Direction.UPSTREAM)])
    assert out.of(SpokenFrame, up=True) == [SpokenFrame("Hello there.")]


# -- tts -------------------------------------------------------------------------------------
class FakeSynth:
    """One 100-sample sentence per '.'; ``fail`` raises after the first sentence."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def sentences(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        for i, sentence in enumerate(s for s in text.split(".") if s.strip()):
            if self.fail and i == 1:
                raise RuntimeError("voice broke")
            yield sentence.strip() + ".", np.full(100, 1000, np.int16)


def test_tts_makes_one_utterance_per_text() -> None:
    out = run(TtsStage(FakeSynth()), [SpeakFrame("One. Two.")])
    audio = out.of(TTSAudioFrame)
    assert [(f.text, f.last, f.audio.samples) for f in audio] == [("One.", False, 100), ("Two.", False, 100),
                                                                 ("One. Two.", True, 0)]
    assert len({f.utterance for f in audio}) == 1


def test_a_failing_voice_still_closes_the_utterance() -> None:
    out = run(TtsStage(FakeSynth(fail=True)), [SpeakFrame("One. Two.")])
    assert [f.last for f in out.of(TTSAudioFrame)] == [False, True]
    assert "voice broke" in out.of(ErrorFrame)[0].message


# -- output ----------------------------------------------------------------------------------
def _piece(utterance: int, text: str, n: int, *, last: bool = False) -> TTSAudioFrame:
    return TTSAudioFrame(audio=AudioChunk(np.full(n, 500, np.int16)), utterance=utterance, text=text, last=last)


def test_output_plays_and_announces_what_the_speaker_did() -> None:
    played: list[Int16Array] = []

    def tick(stage: Stage, frame: Frame) -> None:
        if isinstance(frame, TTSAudioFrame) and frame.last:
            assert isinstance(stage, OutputStage)
            for _ in range(3):
                played.append(stage.read_frame(480))

    out = run(OutputStage(), [_piece(7, "Hello there.", 600), _piece(7, "Hello there.", 0, last=True)],
              between=tick)
    assert np.count_nonzero(np.concatenate(played)) == 600
    for up in (False, True):  # announced both ways
        assert out.kinds(up=up) == ["BotStartedSpeakingFrame", "SpokenFrame", "BotStoppedSpeakingFrame"]
    stopped = out.of(BotStoppedSpeakingFrame)[0]
    assert stopped.utterance == 7 and stopped.drained


def test_output_pauses_resumes_and_cancels() -> None:
    def tick(stage: Stage, frame: Frame) -> None:
        assert isinstance(stage, OutputStage)
        if isinstance(frame, TTSAudioFrame) and not frame.last:
            stage.read_frame(480)  # 480 of the 1200 samples are played
        if isinstance(frame, BargeInFrame):
            assert not stage.read_frame(480).any()  # paused: silence

    frames: list[Any] = [_piece(1, "one two three four five", 1200), _piece(1, "x", 0, last=True),
                         BargeInFrame(onset_ms=100), ResumeFrame(), BargeInFrame(onset_ms=200), InterruptionFrame()]
    out = run(OutputStage(), frames, between=tick)
    assert out.kinds() == ["BotStartedSpeakingFrame", "PlaybackPausedFrame", "BargeInFrame", "PlaybackResumedFrame",
                           "ResumeFrame", "PlaybackPausedFrame", "BargeInFrame", "SpokenFrame",
                           "PlaybackCancelledFrame", "InterruptionFrame"]
    assert out.of(SpokenFrame)[0].text == "one two —"  # the words heard before the cut
    assert out.of(PlaybackCancelledFrame)[0].played_ms == 30
    assert out.of(PlaybackPausedFrame)[0].playing


# -- what the hub is doing, and the events -----------------------------------------------------
def test_the_tracker_derives_the_state_from_frames() -> None:
    states: list[str] = []
    tracker = DialogueTracker(Clock(realtime=False), lambda e: states.append(e.state))  # type: ignore[attr-defined]

    def see(*frames: Frame) -> None:
        for f in frames:
            tracker.on_frame(None, f, Direction.DOWNSTREAM)

    see(SpeechStartedFrame(onset_ms=0), TranscriptFrame("turn on the light", "grammar", 1.0))
    assert tracker.replying
    see(SpeakFrame("Turned on."), ResponseFrame("Turned on.", "grammar"), BotStartedSpeakingFrame(utterance=1))
    assert tracker.replying
    see(BotStoppedSpeakingFrame(utterance=1))
    assert not tracker.replying
    see(SpeechStartedFrame(onset_ms=9), EndOfTurnFrame(discard=True))  # out of a session
    see(SpeakFrame("A."), BotStartedSpeakingFrame(utterance=2), InterruptionFrame())
    assert states == ["listening", "thinking", "speaking", "idle", "listening", "idle", "speaking", "listening"]
    assert not tracker.replying


def test_events_come_from_frames_once_each() -> None:
    events: list[p.Event] = []
    clock = Clock(realtime=False)
    observer = EventObserver(clock, events.append)
    frame = SpeechStartedFrame(onset_ms=40)
    clock.position_ms = 90
    for stage_name in ("vad", "asr", "turn"):  # the same frame passes several stages
        observer.on_frame(Stage(stage_name), frame, Direction.DOWNSTREAM)
    observer.on_frame(None, SpeakFrame("not an event"), Direction.DOWNSTREAM)
    assert events == [p.SpeechStart(onset_ms=40, t_ms=90)]


# -- the stage base: interruption can never hang ----------------------------------------------
class Fragile(Stage):
    """Raises while being interrupted (``on_interruption``) or on the interruption itself."""

    def __init__(self, where: str) -> None:
        super().__init__("fragile")
        self.where = where
        self.handled: list[str] = []

    async def process(self, frame: Frame, direction: Direction) -> None:
        if isinstance(frame, InterruptionFrame) and self.where == "process":
            raise RuntimeError("cannot handle that")
        if isinstance(frame, SpeakFrame):
            self.handled.append(frame.text)
        await self.push(frame, direction)

    async def on_interruption(self) -> None:
        if self.where == "on_interruption":
            raise RuntimeError("cannot reset")


@pytest.mark.parametrize("where", ["process", "on_interruption"])
def test_a_stage_failing_on_an_interruption_still_passes_it_on_and_keeps_working(where: str) -> None:
    stage = Fragile(where)

    async def go() -> StageRun:
        done = asyncio.Event()
        out = await run_stage(stage, [InterruptionFrame(done=done), SpeakFrame("after")])
        assert done.is_set()  # a waiter is released
        return out

    out = asyncio.run(go())
    assert out.of(InterruptionFrame) and "cannot" in out.of(ErrorFrame)[0].message
    assert stage.handled == ["after"]  # the data path was restarted


class Slow(Stage):
    """Holds each data frame for a long time (a slow voice, a slow model), in a worker thread."""

    def __init__(self) -> None:
        super().__init__("slow")
        self.started = threading.Event()
        self.spawned: asyncio.Task[None] | None = None

    async def process(self, frame: Frame, direction: Direction) -> None:
        if isinstance(frame, SpeakFrame):
            self.started.set()
            self.spawned = self.spawn(asyncio.sleep(30), "sleep")
            await asyncio.to_thread(time.sleep, 0.2)
            await asyncio.sleep(30)
        await self.push(frame, direction)


def test_an_interruption_cancels_slow_and_spawned_work_at_once() -> None:
    stage = Slow()

    async def go() -> None:
        from hub_runtime.pipeline import Pipeline

        from .stage_helpers import Collector

        down = Collector("down")
        pipeline = Pipeline([stage, down], clock=Clock(realtime=False))
        await pipeline.start()
        stage.enqueue(SpeakFrame("a very long answer"))
        stage.enqueue(SpeakFrame("queued behind it"))
        await asyncio.to_thread(stage.started.wait, 5)
        done = asyncio.Event()
        t0 = time.monotonic()
        stage.enqueue(InterruptionFrame(done=done))
        async with asyncio.timeout(5):
            await done.wait()
        assert time.monotonic() - t0 < 5
        assert stage.spawned is not None and stage.spawned.cancelled()
        await pipeline.wait_idle(timeout_s=5)
        assert [type(f).__name__ for f in down.frames] == ["InterruptionFrame"]  # queued data dropped
        await pipeline.stop()

    asyncio.run(go())


def test_wait_idle_has_a_bound() -> None:
    async def go() -> None:
        from hub_runtime.pipeline import Pipeline

        stage = Slow()
        pipeline = Pipeline([stage], clock=Clock(realtime=False))
        await pipeline.start()
        stage.enqueue(SpeakFrame("forever"))
        with pytest.raises(TimeoutError, match="did not become idle"):
            await pipeline.wait_idle(timeout_s=0.5)
        await pipeline.stop()

    asyncio.run(go())


class SlowSynth:
    """A voice that takes 0.3 s per sentence (in the TTS stage's worker thread)."""

    def sentences(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        for sentence in (s.strip() + "." for s in text.split(".") if s.strip()):
            time.sleep(0.3)
            yield sentence, np.full(4800, 800, np.int16)


def test_say_now_interrupts_a_slow_reply_under_load(caplog: pytest.LogCaptureFixture) -> None:
    from hub_runtime.engines import Engines
    from hub_runtime.events import EventLog
    from hub_runtime.loop import DialogueLoop
    from hub_runtime.settings import AsrSettings

    settings = Settings(asr=AsrSettings(second_tier="none"))
    log = EventLog()

    async def go() -> None:
        loop = DialogueLoop(settings, Engines(whisper=None, synth=SlowSynth()), Agent.from_settings(settings),
                            clock=Clock(realtime=False), events=log)
        await loop.start()
        try:
            loop.say("One. Two. Three. Four. Five. Six. Seven. Eight.")
            silence = np.zeros(480, np.int16)
            for i in range(40):  # frames pile up while the voice is busy: no waiting for idle
                loop.tick(silence, i * 30)
                await asyncio.sleep(0.02)
            assert loop.replying
            await loop.say_now("Now.")
            for i in range(40, 400):
                loop.tick(silence, i * 30)
                await loop.pipeline.wait_idle(timeout_s=10)
                if log.of_type("tts_end"):
                    break
        finally:
            await loop.stop()

    asyncio.run(go())
    assert [e["text"] for e in log.of_type("tts_end")] == ["Now."]
    assert log.of_type("tts_cancelled") and not log.of_type("error")
    assert "did not pass every stage" not in caplog.text


class ScriptedWhisper:
    """The second tier at its boundary: it 'hears' a given text, and these sentences of the grammar."""

    def __init__(self, text: str, sentences: tuple[Any, ...] = (), text_score: float | None = None,
                 later: tuple[Any, ...] = ()) -> None:
        self.text = text
        self.sentences = sentences
        self.text_score = text_score
        self.later = later  # the sentences it scores on a pass's encoding when asked to (``score_also``)
        self.passes: list[tuple[int, Any]] = []  # (samples, the pass's cancel event)

    def transcribe(self, audio: np.ndarray, prompt: str = "", *, grammar: Any = None, speech_s: float = 0.0,
                   also: tuple[str, ...] = (), rivals: Any = None, cancel: Any = None) -> Any:
        from hub_runtime.engines.base import WhisperResult

        self.passes.append((len(audio), cancel))

        if grammar is None:
            return WhisperResult(self.text, -0.1)
        return WhisperResult(self.text, -0.1, self.sentences, self.text_score, self.text_score, encoding="scripted")

    def score_also(self, result: Any, also: tuple[str, ...]) -> Any:
        import dataclasses

        more = tuple(h for h in self.later if h.words == also)
        return dataclasses.replace(result, sentences=tuple(sorted((*result.sentences, *more), key=lambda h: -h.score)))

    def prepare(self, grammar: Any) -> None:
        pass


@pytest.mark.parametrize(("whisper", "text"), [("Stop.", "Stop."), ("Be quiet, please.", "Be quiet, please."),
                                            ("Thank you.", ""), ("Turn on the light.", "")])
def test_a_blip_over_the_hub_reaches_the_router_only_as_a_stop(whisper: str, text: str) -> None:
    from hub_runtime.settings import AsrSettings
    from hub_runtime.stages.asr import AsrStage

    stage = AsrStage(Agent.from_settings(Settings()), AsrSettings(), frame_ms=30, whisper=ScriptedWhisper(whisper))
    frames: list[Any] = [audio_frame(i * 30, speech=i < 6, level=3000) for i in range(10)]
    out = run(stage, [*frames, (EndOfTurnFrame(undecided=True, blip=True), Direction.UPSTREAM)])
    said = out.of(TranscriptFrame)
    assert [(t.text, t.open_text, t.paused, t.overlapped) for t in said] == [(text, whisper, True, True)]


@pytest.mark.parametrize(("whisper", "sentences", "played", "settled"), [
    # pocketsphinx made out no full command; Whisper's pass in the pause is sure of one, its own words too
    ("Turn on the kitchen light.", [("turn on the kitchen light", -3.0, 0.5)], False, True),
    # ... not when it is unsure (the opposite action nearly as likely): the turn waits
    ("Turn on the kitchen light.",
     [("turn on the kitchen light", -3.0, 0.5), ("turn off the kitchen light", -3.5, 0.8)], False, False),
    # ... nor when its own words are not the sentence (a pause after "open up ...")
    ("Open up.", [("volume up", -4.0, 3.0)], False, False),
    # ... nor over the hub's voice, where the words wait for the end of the turn
    ("Turn on the kitchen light.", [("turn on the kitchen light", -3.0, 0.5)], True, False),
])
def test_a_sure_sentence_in_the_pause_completes_the_hypothesis(
        whisper: str, sentences: list[tuple[str, float, float]], played: bool, settled: bool) -> None:
    from hub_runtime.settings import AsrSettings
    from hub_runtime.stages.asr import AsrStage

    stage = AsrStage(Agent.from_settings(Settings()), AsrSettings(), frame_ms=30,
                     whisper=ScriptedWhisper(whisper, tuple(_heard(*h) for h in sentences)))
    reference = np.full(480, 2000, np.int16) if played else None
    frames: list[Any] = [SpeechStartedFrame(onset_ms=0)]
    frames += [audio_frame(i * 30, speech=i < 20, level=3000 if i < 20 else 0, reference=reference)
               for i in range(30)]
    out = run(stage, frames)
    partials = out.of(PartialTranscriptFrame)
    assert all(not p.complete for p in partials[:-1])  # pocketsphinx heard no command in a hum
    assert bool(partials and partials[-1].complete) is settled
    if settled:
        assert partials[-1].text == "turn on the kitchen light"


@pytest.mark.parametrize(("pocketsphinx", "whisper", "sentences", "verdict"), [
    # pocketsphinx's full command, and the pass is sure of one (not its words: Whisper's sentence)
    ("toggle the kitchen light", "Turn off the kitchen light.", [("turn off the kitchen light", -3.0, 0.5)],
     ("turn off the kitchen light", True)),
    # ... the pass heard no sentence of the grammar: a pause inside a longer one ("... minute [pause] timer")
    ("toggle every our study light", "Time left on 57 minute.",
     [("time left on fifty seven minute timer", -21.0, 15.0)], ("toggle every our study light", False)),
    # ... the pass is unsure (the opposite action nearly as likely)
    ("turn on the kitchen light", "Turn of the kitchen light.",
     [("turn off the kitchen light", -3.0, 1.0), ("turn on the kitchen light", -3.4, 1.2)],
     ("turn on the kitchen light", False)),
])
def test_the_check_of_a_pause_confirms_a_full_command_only_when_the_pass_is_sure(
        pocketsphinx: str, whisper: str, sentences: list[tuple[str, float, float]], verdict: tuple[str, bool]) -> None:
    from hub_runtime.settings import AsrSettings
    from hub_runtime.stages.asr import AsrStage, _Speculation

    stage = AsrStage(Agent.from_settings(Settings()), AsrSettings(), frame_ms=30,
                     whisper=ScriptedWhisper(whisper, tuple(_heard(*h) for h in sentences)))
    pushed: list[Frame] = []

    async def push(frame: Frame, direction: Direction = Direction.DOWNSTREAM) -> None:
        pushed.append(frame)

    async def check() -> None:
        stage.push = push  # type: ignore[method-assign]
        task = asyncio.ensure_future(stage._run_whisper(np.zeros(16000, np.float32), "", stage._within(), 1.0))
        stage._speculation = speculation = _Speculation(16000, task, threading.Event(), tuple(pocketsphinx.split()))
        await stage._check(speculation, tuple(pocketsphinx.split()), {})

    asyncio.run(check())
    assert [(p.text, p.complete, p.checked) for p in pushed if isinstance(p, PartialTranscriptFrame)] == [
        (*verdict, True)]


@pytest.mark.parametrize(("before_the_verdict", "verdicts"), [
    # the first verdict, without pocketsphinx's words, then the one with them: the turn may end now
    (False, [("", False), ("turn off the kitchen light", True)]),
    # ... and when they came before the first verdict, it is dropped: it would come last and overrule
    (True, [("turn off the kitchen light", True)]),
])
def test_a_full_command_the_grammar_tier_made_out_after_the_pause_began_is_checked_again(
        before_the_verdict: bool, verdicts: list[tuple[str, bool]]) -> None:
    from hub_runtime.settings import AsrSettings
    from hub_runtime.stages.asr import AsrStage, _Speculation

    # Whisper's own words are not the sentence: alone, the pass is not sure it was said
    stage = AsrStage(Agent.from_settings(Settings()), AsrSettings(), frame_ms=30,
                     whisper=ScriptedWhisper("Turn of the kitchen light.",
                                             (_heard("turn off the kitchen light", -3.0, 0.5),)))
    pushed: list[Frame] = []
    spawned: list[asyncio.Future[Any]] = []

    async def push(frame: Frame, direction: Direction = Direction.DOWNSTREAM) -> None:
        pushed.append(frame)

    def spawn(coro: Any, name: str, *, interruptible: bool = True) -> None:
        spawned.append(asyncio.ensure_future(coro))

    async def check() -> None:
        stage.push = push  # type: ignore[method-assign]
        stage.spawn = spawn  # type: ignore[method-assign,assignment]
        task = asyncio.ensure_future(stage._run_whisper(np.zeros(16000, np.float32), "", stage._within(), 1.0))
        stage._speculation = speculation = _Speculation(16000, task, threading.Event())  # no command yet
        first = asyncio.ensure_future(stage._check(speculation, (), {}))
        if not before_the_verdict:
            await first
        stage._complete = tuple("turn off the kitchen light".split())  # pocketsphinx's next partial
        stage._check_again()
        await asyncio.gather(first, *spawned)

    asyncio.run(check())
    assert [(p.text, p.complete) for p in pushed if isinstance(p, PartialTranscriptFrame)] == verdicts


def test_speech_after_a_pause_cancels_the_speculative_pass() -> None:
    from hub_runtime.settings import AsrSettings
    from hub_runtime.stages.asr import SPECULATE_AFTER_MS, AsrStage

    whisper = ScriptedWhisper("Turn on the kitchen light.", (_heard("turn on the kitchen light", -3.0, 0.5),))
    stage = AsrStage(Agent.from_settings(Settings()), AsrSettings(), frame_ms=30, whisper=whisper)
    pause = SPECULATE_AFTER_MS // 30
    speech = [True] * 15 + [False] * pause + [True] * 5 + [False] * 10  # a pause, then the words go on
    frames: list[Any] = [SpeechStartedFrame(onset_ms=0)]
    frames += [audio_frame(i * 30, speech=s, level=3000 if s else 0) for i, s in enumerate(speech)]
    frames.append((EndOfTurnFrame(), Direction.UPSTREAM))
    out = run(stage, frames)
    assert [cancel.is_set() for _samples, cancel in whisper.passes] == [True, False]
    assert whisper.passes[0][0] < whisper.passes[1][0]  # the pass at the end heard it all
    assert [t.text for t in out.of(TranscriptFrame)] == ["turn on the kitchen light"]


def _heard(text: str, score: float, forced: float = 1.0) -> Any:
    from hub_runtime.engines.base import Heard

    return Heard(tuple(text.split()), score, forced)


@pytest.mark.parametrize(("whisper", "sentences", "decided", "pocketsphinx", "text_score"), [
    # the likeliest sentence of the grammar, cheap against Whisper's own tokens: taken
    ("Turn on the kitchen light.", [("turn on the kitchen light", -3.0, 0.5)],
     ("grammar", "turn on the kitchen light", False), "", None),
    # the same meaning in other words nearby: still sure
    ("Turn on the kitchen light.", [("turn on the kitchen light", -3.0, 0.5), ("turn on kitchen light", -3.2, 1.0)],
     ("grammar", "turn on the kitchen light", False), "", None),
    # another action nearly as likely: unsure (the understanding asks first)
    ("Turn of the kitchen light.",
     [("turn on the kitchen light", -3.0, 1.0), ("turn off the kitchen light", -3.4, 1.2)],
     ("grammar", "turn on the kitchen light", True), "", None),
    # ... but not when it is far less likely
    ("Turn of the kitchen light.",
     [("turn off the kitchen light", -3.0, 1.0), ("turn on the kitchen light", -7.5, 4.0)],
     ("grammar", "turn off the kitchen light", False), "", None),
    # the opposite action on the same targets, a few nats less likely: unsure though its share is small
    ("So, current fans saw.", [("turn fans off", -17.4, 5.0), ("turn fans on", -20.3, 7.9)],
     ("grammar", "turn fans off", True), "", None),
    # ... not so another action on other targets
    ("Turn off the kitchen light.",
     [("turn off the kitchen light", -3.0, 1.0), ("turn off the bedroom light", -6.0, 4.0)],
     ("grammar", "turn off the kitchen light", False), "", None),
    # a meaning said many ways is no likelier for it: the mower 1.3 nats behind three ways of the media
    ("Stop the Mitter.", [("stop the music", -8.15, 4.2), ("stop the media", -8.22, 4.3),
                          ("stop the movie", -8.39, 4.4), ("stop the mower", -9.47, 4.5)],
     ("grammar", "stop the music", True), "", None),
    # the opposite one weak syllable away ("unmute") is the worst mistake noise makes: ask further off
    ("Meet the music.", [("mute the music", -5.0, 1.0), ("unmute the music", -11.0, 3.0)],
     ("grammar", "mute the music", True), "", None),
    ("Meet the music.", [("mute the music", -5.0, 1.0), ("unmute the music", -14.0, 3.0)],
     ("grammar", "mute the music", False), "", None),
    # ... unless Whisper's own words are the sentence with its "un": its free decode wrote the polarity itself
    ("Unmute the music.", [("unmute the music", -5.0, 1.0), ("mute the music", -11.0, 3.0)],
     ("grammar", "unmute the music", False), "", None),
    # ... without it they are no proof: tiny.en drops the weak syllable ("Mute, Music on Living Room
    # TV." for "unmute the music on Living Room TV" in pink noise), it does not put one in
    ("Mute the music.", [("mute the music", -5.0, 1.0), ("unmute the music", -11.0, 3.0)],
     ("grammar", "mute the music", True), "", None),
    # another spelling of free text is not another action
    ("Add milk to my shopping list.", [("add milk to my shopping list", -4.0, 0.0),
                                       ("add mills to my shopping list", -4.2, 0.5)],
     ("grammar", "add milk to my shopping list", False), "", None),
    # speech that is no sentence of the grammar costs much: Whisper's own words go on
    ("What is the capital of France?", [("what is the time", -14.0, 11.0)],
     ("open", "What is the capital of France?", False), "", None),
    ("Hello there.", [], ("open", "Hello there.", False), "", None),
    # a bare name turns a device on: said alone it is more often a command cut short
    ("Kitchen light of.", [("kitchen light", -3.0, 1.0)], ("grammar", "kitchen light", True), "", None),
    # ... and a name with a value, no word for the action ("kill the porch light" heard as "... white")
    ("Go the kitchen light.", [("the kitchen light white", -9.7, 4.2), ("the kitchen light", -10.1, 4.8)],
     ("grammar", "the kitchen light white", True), "the kitchen light white", None),
    # ... but a question about it asks nothing to be done
    ("Is the kitchen light on?", [("is the kitchen light on", -3.0, 1.0)],
     ("grammar", "is the kitchen light on", False), "", None),
    # ... and when Whisper's own words say in other words what it is to do ("start" for a switch), they
    # are read (the understanding asks "Do you want me to turn on the Christmas Tree?")
    ("Start the Christmas tree.", [("the christmas tree", -3.0, 1.0)], ("open", "Start the Christmas tree.", False),
     "", None),
    # Whisper's own words ask for more in other words than the sentence does: they are read, not the sentence
    ("Open the bedroom blinds halfway.", [("open the bedroom blinds", -3.0, 1.0)],
     ("open", "Open the bedroom blinds halfway.", False), "", None),
    # Whisper heard a quick "un" as a word: the polarity is open
    ("And pause the TV.", [("pause the tv", -3.0, 1.0)], ("grammar", "pause the tv", True), "", None),
    ("Amute the TV.", [("mute the tv", -3.0, 1.0)], ("grammar", "mute the tv", True), "", None),
    ("A mute track in here.", [("mute track in here", -3.0, 1.0)], ("grammar", "mute track in here", True), "", None),
    # Whisper's words are a question, the sentence is not: never act on it unasked
    ("Is the kitchen light on?", [("turn on the kitchen light", -3.0, 2.0)],
     ("grammar", "turn on the kitchen light", True), "", None),
    ("Can you turn on the kitchen light", [("turn on the kitchen light", -3.0, 2.0)],
     ("grammar", "turn on the kitchen light", True), "", None),
    # ... but a question word that is the sentence's first word split in two is no question
    ("Can Sol all of my Kitchen Timors.", [("cancel all of my kitchen timers", -3.0, 1.0)],
     ("grammar", "cancel all of my kitchen timers", False), "", None),
    # what pocketsphinx heard too counts more: two recognisers agree (the other is still close: ask)
    ("Turn of the kitchen light.",
     [("turn on the kitchen light", -3.0, 1.0), ("turn off the kitchen light", -4.5, 1.2)],
     ("grammar", "turn off the kitchen light", True), "turn off the kitchen light", None),
    ("Turn of the kitchen light.",
     [("turn off the kitchen light", -3.0, 1.0), ("turn on the kitchen light", -5.5, 1.2)],
     ("grammar", "turn off the kitchen light", False), "turn off the kitchen light", None),
    # the sentence Whisper's own words are counts more too: not ranked under one that leaves out "pause"
    ("Pause 36 seconds timer.", [("twenty six seconds timer", -5.2, 1.7), ("pause thirty six seconds timer", -5.9, 1.5),
                                 ("forty six seconds timer", -7.0, 3.5)],
     ("grammar", "pause thirty six seconds timer", True), "", None),
    ("Pause 36 seconds timer.",
     [("twenty six seconds timer", -5.2, 1.7), ("pause thirty six seconds timer", -5.9, 1.5)],
     ("grammar", "pause thirty six seconds timer", False), "pause thirty six seconds timer", None),
    # ... and, when no sentence is Whisper's own words, so does one with their numbers: 80 is not 8
    ("Set the kitchen light. Write us to 80%.",
     [("set the kitchen light to eighty percent", -11.3, 3.9), ("set the kitchen light to eight percent", -12.9, 5.2)],
     ("grammar", "set the kitchen light to eighty percent", False), "", None),
    ("Set the kitchen light. Write us to 80%.",
     [("set the kitchen light to eight percent", -11.3, 3.9), ("set the kitchen light to eighty percent", -12.9, 5.2)],
     ("grammar", "set the kitchen light to eighty percent", True), "", None),
    # ... but a word after Whisper's number that the sentence leaves out: the number may be cut or misheard
    ("Make the volume to 30 feet.", [("make the volume to thirty", -5.0, 2.0)],
     ("grammar", "make the volume to thirty", True), "make the volume to thirty", None),
    ("Set the kitchen light to 30 please.", [("set the kitchen light to thirty", -5.0, 2.0)],
     ("grammar", "set the kitchen light to thirty", False), "set the kitchen light to thirty", None),
    # ... nor a unit the sentence has after its number, however Whisper wrote it
    ("Increase the timer by 54 sec.", [("increase the timer by fifty four second", -5.0, 2.0)],
     ("grammar", "increase the timer by fifty four second", False), "increase the timer by fifty four second", None),
    # ... but not against the opposite action: the free decode may not have heard the polarity right
    ("Turn fans off.", [("turn fans off", -5.0, 1.0), ("turn fans on", -8.0, 2.0)],
     ("grammar", "turn fans off", True), "", None),
    # Whisper heard much more than the sentence says
    ("Start my Roomba. Rock my work carriage.", [("start my roomba", -5.0, 2.0)],
     ("grammar", "start my roomba", True), "", None),
    # Whisper's own words are a sentence of the grammar that the search missed, and likelier
    ("Turn off the TV.", [("what are you", -10.0, 6.0)], ("grammar", "turn off the tv", False), "", -4.0),
    # Whisper skipped a word it was unsure of; pocketsphinx accounts for all the speech
    ("Cobbled the kitchen light.", [("the kitchen light", -6.0, 1.4), ("toggle the kitchen light", -9.0, 5.0)],
     ("grammar", "toggle the kitchen light", False), "toggle the kitchen light", None),
    # ... but not when Whisper finds its longer sentence far less likely
    ("Cobbled the kitchen light.", [("the kitchen light", -6.0, 1.4), ("toggle the kitchen light", -12.0, 8.0)],
     ("grammar", "the kitchen light", True), "toggle the kitchen light", None),
    # small talk fitted to people talking in the room, where Whisper's own words are a command
    ("Turn off the TV.", [("thank you very much", -3.0, 5.0)], ("grammar", "turn off the tv", False), "", -6.0),
    ("Turn off the TV.", [("thank you very much", -3.0, 5.0), ("turn off the tv", -6.0, 3.0)],
     ("grammar", "turn off the tv", False), "", None),
    # ... but small talk stands when Whisper's own words are no request ("Largu.") or small talk too
    ("Largu.", [("thank you very much", -3.0, 2.0)], ("grammar", "thank you very much", False), "", None),
    ("Thanks a lot.", [("thank you very much", -3.0, 2.0)], ("grammar", "thank you very much", False), "", None),
    # ... and not when the grammar costs more for it than small talk said to the hub does
    ("So that more. That more.", [("thank you so much", -18.0, 8.7)], ("open", "So that more. That more.", False),
     "", None),
    # Whisper's own words go one way, the sentence the other ("off" against "up"): ask first
    ("Turn off the kitchen light 10.", [("turn up the kitchen light", -3.0, 3.0)],
     ("grammar", "turn up the kitchen light", True), "", None),
    # ... a word both ways says nothing ("on" in "the light on the porch")
    ("Turn off the light on the porch.", [("turn off the porch light", -3.0, 2.0)],
     ("grammar", "turn off the porch light", False), "", None),
    # Whisper's own words are another request than the sentence's action: ask first
    ("Turn off the kitchen light.", [("set the kitchen light to ten percent", -3.0, 3.0)],
     ("grammar", "set the kitchen light to ten percent", True), "", None),
    # ... but a question for another question changes nothing
    ("What's the time.", [("what's the kitchen temperature", -3.0, 3.0)],
     ("grammar", "what's the kitchen temperature", False), "", None),
])
def test_the_second_tier_decides_what_was_said(whisper: str, sentences: list[tuple[str, float, float]],
                                               decided: tuple[str, str, bool], pocketsphinx: str,
                                               text_score: float | None) -> None:
    heard = tuple(_heard(*s) for s in sentences)
    assert _finished(ScriptedWhisper(whisper, heard, text_score), pocketsphinx) == [decided]


def _finished(whisper: ScriptedWhisper, pocketsphinx: str = "", *, voices: bool = False,
              later: bool = False) -> list[tuple[str, str, bool]]:
    """The end of a turn's transcripts (tier, text, unsure): Whisper's pass given, pocketsphinx's words these.

    ``later``: the pass is the pause's, begun before pocketsphinx made out its words.
    """
    from hub_runtime.engines.pocketsphinx import GrammarHypothesis
    from hub_runtime.settings import AsrSettings
    from hub_runtime.stages.asr import AsrStage, _Speculation

    stage = AsrStage(Agent.from_settings(Settings()), AsrSettings(), frame_ms=30, whisper=whisper)
    said: list[tuple[str, str, bool]] = []

    async def transcript(text: str, tier: str, confidence: float, open_text: str = "",
                         grammar: Any = None, *, overlapped: bool = False, paused: bool = False,
                         unsure: bool = False) -> None:
        said.append((tier, text, unsure))

    stage._transcript = transcript  # type: ignore[method-assign]

    async def finish() -> None:
        final = asyncio.get_running_loop().create_future()
        final.set_result(GrammarHypothesis(tuple(pocketsphinx.split()), 0.9))
        speculation = None
        if later:  # the pause's pass began before pocketsphinx made out its words
            task = asyncio.ensure_future(stage._run_whisper(np.zeros(16000, np.float32), "", stage._within(), 1.0))
            speculation = _Speculation(16000, task, threading.Event())
        await stage._finish(final, np.zeros(16000, np.int16), speculation, stage.prompt, stage._within(), 1.0, {},
                            voices=voices)

    asyncio.run(finish())
    return said


@pytest.mark.parametrize(("later", "decided"), [
    # scored on the pause's pass, pocketsphinx's final words (the opposite action) make its sentence unsure
    (True, ("grammar", "turn on the kitchen light", True)),
    # ... unscored, they had no say
    (False, ("grammar", "turn on the kitchen light", False)),
])
def test_pocketsphinx_s_final_words_made_out_after_the_pause_s_pass_began_are_weighed_too(
        later: bool, decided: tuple[str, str, bool]) -> None:
    whisper = ScriptedWhisper("Turn on the kitchen light.", (_heard("turn on the kitchen light", -3.0, 0.5),),
                              later=(_heard("turn off the kitchen light", -3.3, 0.8),) if later else ())
    assert _finished(whisper, "turn off the kitchen light", later=True) == [decided]


def test_the_final_hypothesis_is_made_off_the_loop_and_the_next_utterance_waits_for_it() -> None:
    """Pocketsphinx's best path through a big lattice may take 100 ms and more: frames go on meanwhile."""
    from hub_runtime.settings import AsrSettings
    from hub_runtime.stages.asr import AsrStage

    from .stage_helpers import Collector

    stage = AsrStage(Agent.from_settings(Settings()), AsrSettings(confidence=0.0), frame_ms=30, whisper=None)
    release = threading.Event()
    order: list[str] = []
    down = Collector("down")

    async def go() -> None:
        from hub_runtime.pipeline import Pipeline

        pipeline = Pipeline([Collector("up"), stage, down], clock=Clock(realtime=False))
        await pipeline.start()
        try:
            decoder = stage._decoder
            assert decoder is not None
            made, start = decoder.final, decoder.start

            def final() -> Any:
                release.wait(30)
                main = threading.current_thread() is threading.main_thread()
                order.append(f"final in {'main' if main else 'worker'}")
                return made()

            def started(**kwargs: Any) -> None:
                order.append("start")
                start(**kwargs)

            decoder.final, decoder.start = final, started  # type: ignore[method-assign]
            await stage.process(SpeechStartedFrame(onset_ms=0), Direction.DOWNSTREAM)
            for i in range(20):
                await stage.process(audio_frame(i * 30, speech=i < 15, level=3000 if i < 15 else 0),
                                    Direction.DOWNSTREAM)
            await stage.process(EndOfTurnFrame(), Direction.UPSTREAM)  # returns while the hypothesis is made
            await stage.process(audio_frame(600), Direction.DOWNSTREAM)  # the loop's frames go on
            following = asyncio.ensure_future(stage.process(SpeechStartedFrame(onset_ms=630), Direction.DOWNSTREAM))
            await asyncio.sleep(0.05)
            assert order == ["start"] and not following.done()  # the next utterance waits for the decoder
            release.set()
            await following
            await pipeline.wait_idle(timeout_s=30)
        finally:
            release.set()
            await pipeline.stop()

    asyncio.run(go())
    assert order == ["start", "final in worker", "start"]
    assert len([f for f in down.frames if isinstance(f, TranscriptFrame)]) == 1


@pytest.mark.parametrize(("whisper", "sentence", "voices", "unsure"), [
    # other voices in the room: a request with free text in it (a search) is asked about first,
    # also when Whisper's own words hold the same text (its free decode hears the voices too)
    ("So I play last in 4th wave.", "play last in four away", True, True),
    ("Play last in four away.", "play last in four away", True, True),
    ("Play jazz on the TV.", "play jazz on the tv", True, True),
    ("Play jazz on the TV.", "play jazz on the tv", False, False),
    # ... an action without free text is not, nor free text only read
    ("Turn on the kitchen light.", "turn on the kitchen light", True, False),
])
def test_free_text_amid_other_voices_is_asked_about(whisper: str, sentence: str, voices: bool, unsure: bool) -> None:
    said = _finished(ScriptedWhisper(whisper, (_heard(sentence, -3.0, 0.5),)), voices=voices)
    assert said == [("grammar", sentence, unsure)]


@pytest.mark.parametrize(("whisper", "voices", "unsure"), [
    # Whisper's own words, no sentence of the grammar: amid other voices an action is asked about
    ("Turn on the kitchen light.", True, True),
    ("Turn on the kitchen light.", False, False),
    ("What time is it?", True, False),  # a question changes nothing
])
def test_whispers_own_action_amid_other_voices_is_asked_about(whisper: str, voices: bool, unsure: bool) -> None:
    assert _finished(ScriptedWhisper(whisper, ()), voices=voices) == [("open", whisper, unsure)]


def test_whispers_window_starts_at_the_talker_when_other_voices_came_first() -> None:
    from hub_runtime.stages.asr import _talker_start

    talker, silence = [(75.0, True)] * 30, [(30.0, False)] * 10
    # a TV's voices (speech to the VAD, 25 dB under the talker) for 12 frames, then the talker:
    # the window starts 150 ms (5 frames) before the talker's first loud frame
    assert _talker_start([(50.0, True)] * 12 + talker + silence) == 12 - 5
    # the talker's own lead-in (the pre-roll's silence, a soft first sound) stays
    assert _talker_start(silence + [(58.0, True)] * 2 + talker + silence) == 0
    assert _talker_start(talker + silence) == 0
    assert _talker_start([]) == 0


def test_the_asr_gives_whisper_the_talkers_words_and_their_length_only() -> None:
    """Other voices (speech to the VAD) before the talker: cut from Whisper's window and the speech's length."""
    from hub_runtime.settings import AsrSettings
    from hub_runtime.stages.asr import AsrStage

    stage = AsrStage(Agent.from_settings(Settings()), AsrSettings(), frame_ms=30, whisper=ScriptedWhisper(""))
    for samples, speech, frames in ((_level(300), True, 12), (_level(5000), True, 30), (_level(3), False, 10)):
        for _ in range(frames):
            stage._add(samples, speech)
    assert len(stage._audio_so_far()) == (52 - 7) * 480  # from 5 frames before the talker's first
    assert stage._speech_s == pytest.approx(35 * 0.03)
    stage._overlapped = True  # over the hub's voice, all of it (the first word decides)
    assert len(stage._audio_so_far()) == 52 * 480 and stage._speech_s == pytest.approx(42 * 0.03)


def test_the_vad_marks_the_voices_its_talker_gate_holds() -> None:
    from hub_runtime.stages.vad import TALKER_QUIET_FRAMES

    n = 20 + TALKER_QUIET_FRAMES + 10
    stage = VadStage(ScriptedScorer([1.0] * n), threshold=0.5, start_ms=60, stop_ms=240, frame_ms=30)
    frames = [audio_frame(i * 30, level=4000 if i < 20 else 400) for i in range(n)]
    out = run(stage, frames)
    audio = out.of(type(frames[0]))
    assert [f.voices for f in audio] == [False] * (20 + TALKER_QUIET_FRAMES - 1) + [True] * 11
    assert [f.onset_ms for f in out.of(SpeechStartedFrame)] == [0]
    assert len(out.of(SpeechStoppedFrame)) == 1  # the talker's speech ended though the VAD still hears voices


def test_the_talker_level_is_of_the_last_frames_only() -> None:
    """Voices that never pause (a TV all evening): the level is of the last 12 s, and its memory stays bounded."""
    from hub_runtime.stages.vad import TALKER_WINDOW_FRAMES, TalkerGate, level_db

    gate = TalkerGate()
    for _ in range(3 * TALKER_WINDOW_FRAMES):
        gate.allows(level_db(_level(400)), True, True)
    assert len(gate._levels) == TALKER_WINDOW_FRAMES
    for _ in range(TALKER_WINDOW_FRAMES):
        gate.allows(level_db(_level(4000)), True, True)
    assert gate._levels == sorted(gate._levels) and gate._level == level_db(_level(4000))
