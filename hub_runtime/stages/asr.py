"""ASR stage: the two-tier recogniser.

* Grammar tier — pocketsphinx over the home grammar, fed every frame of an open
  utterance; a partial hypothesis whenever it changes (end of turn asks whether it is
  already a full command).
* Second tier — Whisper tiny.en on a short window, started speculatively the moment
  the user falls silent (so it runs while end-of-turn waits; cancelled if they go on): a free transcript, and a
  beam search within the home grammar's sentences (wildcards decoded as free text).
  The turn waits for that pass's verdict (a ``checked`` partial after a CheckingFrame):
  complete when it is sure of a full command — pocketsphinx's words alone no longer close
  the turn fast (it fits a pause inside a sentence to a command); when they were no full
  command, the sentence must also be Whisper's own free words.

At end of turn Whisper's likeliest sentence of the grammar is the transcript when the
grammar cost little against Whisper's own choice of tokens (``MAX_FORCED``: speech that is
not a sentence of the grammar costs much more) and Whisper's own words are not far likelier
(``MAX_LIKELIER``). It is ``unsure`` (the understanding asks before acting) when its
meaning has less than ``MIN_SHARE`` of the likeliest sentences' probability (others mean
another intent, target or value, each weighed as its likeliest sentence; the same sentence
with words left out does not count), when the opposite action on the same targets is
within ``OPPOSITE_NATS`` (``UN_OPPOSITE_NATS`` one "un" away, always scored), when it is a
bare name (a command cut short: "coffee maker [off]") or a name and a value ("the porch
white"), when Whisper's own words leave its polarity open ("and pause": unpause?) or
say the other way ("off" for its "up"), are a question where the sentence is not, are a request of their own for another
action, or say much more than it does; and when other voices went on in the room (the VAD's
talker gate held them) and the action carries free text (a search, a list item, a message),
Whisper's own words too. Otherwise Whisper's free transcript goes on (tier
``open``) and is understood as text; pocketsphinx's words never decide alone, but the
sentence they make counts more, and wins when it is Whisper's with words more; the sentence
Whisper's own free words are counts as much more (not against the opposite action). Social
small talk ("thank you very much") is no candidate when Whisper's own words are a request
of another kind, or when the grammar costs more for it than ``SOCIAL_MAX_FORCED``: the
unprompted search fits other voices in the room to it.

Words said over the hub's voice are decoded within its stop phrases and a listener's
backchannels too ("stop", "okay"), besides the commands. Speech over the hub too short to
open a turn (a ``blip`` end of turn) is decoded from the pre-roll alone; only a stop phrase
in it reaches the router as words.

Consumes: SpeechStartedFrame, InputAudioFrame, EndOfTurnFrame (upstream).
Emits: PartialTranscriptFrame, CheckingFrame, TranscriptFrame.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import math
import random
import threading
from collections import deque
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np

from ..agent import Agent, HomeModel
from ..audio.format import RATE, Int16Array, samples_to_ms
from ..engines.base import CANCELLED, Heard, Transcriber, WhisperResult
from ..engines.pocketsphinx import GrammarDecoder, GrammarHypothesis
from ..frames import (
    CheckingFrame,
    EndOfTurnFrame,
    Frame,
    InputAudioFrame,
    PartialTranscriptFrame,
    SessionFrame,
    SpeechStartedFrame,
    TranscriptFrame,
    WakeWordFrame,
)
from ..grammar import HomeGrammar
from ..grammar.automaton import FUNCTION_WORDS, NUMBER_WORDS, Dfa, tokenize
from ..grammar.pronounce import syllables
from ..grammar.sample import sample_sentences
from ..nlu import UN_STEMS, Intent, only_opening
from ..paraphrase import request_paraphrase
from ..pipeline import Direction, Stage
from ..protocol import READ_ONLY_INTENTS, TIMER_INTENTS
from ..settings import AsrSettings
from ..smalltalk import ANSWERS, is_local
from ..text import is_question
from ..understanding import is_stop
from .vad import level_db

_LOGGER = logging.getLogger(__name__)

PREROLL_MS: Final = 300  # audio kept from before speech_start
# ... for the second tier when the hub was playing: its echo delays the VAD (p95 ~400 ms
# after the onset), and the first word ("close", "turn off") is the one that decides; the
# suppressor has removed most of the hub's own voice from what comes before the onset
OVERLAP_PREROLL_MS: Final = 600
# Other voices before the talker's (a TV, people talking) start the utterance early, and
# Whisper writes their words into the command ("So, mute media ..."). Whisper's window starts
# ONSET_MARGIN_MS before the first frame within ONSET_DB of the talker's level (the 90th
# percentile of the utterance's frames), when the VAD heard speech before that; on the dev
# half's clean speech that frame came 14 ms before to 127 ms after the words' true onset.
ONSET_DB: Final = 10.0
ONSET_MARGIN_MS: Final = 150
MAX_FORCED: Final = 10.0  # nats the grammar may cost against Whisper's own tokens (more: not a home sentence)
SOCIAL_MAX_FORCED: Final = 6.0  # ... for social small talk: more is other voices fitted to it
MAX_LIKELIER: Final = 8.0  # nats by which Whisper's own words may be likelier than the sentence (more: not one)
MIN_SHARE: Final = 0.9  # the best sentence's meaning, among the likeliest sentences: less is unsure, ask first
AGREEMENT_NATS: Final = 2.0  # the sentence pocketsphinx heard too counts this much more
COVERAGE_NATS: Final = 3.0  # ... and, holding Whisper's with words more, wins when no more than this less likely
# The opposite action on the same targets is the worst mistake: a sentence meaning it, no more
# than this many nats less likely, makes the best one unsure even when its share is high.
OPPOSITE_NATS: Final = 4.0
# ... and for the opposite one weak syllable away ("unmute" for "mute"), which noise hides,
# unless Whisper's own words are the sentence word for word with its "un"; the pass scores that sentence
# whatever its search found (``_un_sentences``). On the dev half, of the 3 such sentences 4 to
# 8 nats behind the best one, 1 was the one said ("unmute the music ..." heard as "mute ..."
# by both recognisers in pink noise, 6.5 nats; Whisper's own words "Mute, a music on ...").
UN_OPPOSITE_NATS: Final = 8.0
OPPOSITES: Final = frozenset(frozenset(pair) for pair in (
    ("HassTurnOn", "HassTurnOff"), ("HassMediaPause", "HassMediaUnpause"),
    ("HassMediaPlayerMute", "HassMediaPlayerUnmute"), ("HassPauseTimer", "HassUnpauseTimer"),
    ("HassVacuumStart", "HassVacuumReturnToBase"), ("HassLawnMowerStartMowing", "HassLawnMowerDock")))
# slots of free text: their spelling is not a different action ("apple" or "apples" on the list)
FREE_SLOTS: Final = frozenset({"message", "item", "search_query", "media_class"})
# Words that say which way an action goes; Whisper's own words saying one way and the sentence
# the other is the worst mistake snapping makes (a word both ways, as "on" in "pause the music
# on the tv", says nothing).
POLARITY_WORDS: Final = (
    frozenset("on up open raise unlock resume unpause unmute start increase brighten louder".split()),
    frozenset("off down close shut lower lock pause mute stop decrease dim quieter".split()))
# Whisper hears a quick "un" as a word of its own ("unpause" → "and pause"): before one of
# these, such a word leaves the polarity open.
UN_SOUNDS: Final = frozenset("un a an and en in um uh ann anne".split())
UN_PREFIXES: Final = frozenset("a an en in em um ah".split())  # fused: "amute", "enlock"
MIN_SPECULATE_MS: Final = 300  # shortest utterance worth a speculative pass
# Silence before a speculative pass: the first frame the VAD calls silent (Silero's flag drops
# about 115 ms after the words end, median). A pass that speech made stale is cancelled (its
# search stops at the next step). 60 ms was measured too: the same dev accuracy (243 against
# 242 of 302, within run-to-run noise), the transcript 125 → 68 ms after the end of turn (p50).
SPECULATE_AFTER_MS: Final = 30


Meanings = dict[tuple[str, ...], tuple[object, ...] | None]  # sentences and what they would do
PROMPT_SEED: Final = 1  # the prompt's sentences are a fixed sample of the home's grammar


def whisper_prompt(grammar: HomeGrammar, *, max_words: int = 100) -> str:
    """Commands of every kind the home understands, with its names, capped in length.

    A prompt that is all "Turn on the X." makes Whisper hear "turn on" in everything; one
    sentence per intent, from the templates and naming this home's devices and rooms, keeps
    both the vocabulary and the variety (measured: mean word distance 0.28 against 0.46).
    """
    sampled = sample_sentences(grammar, random.Random(PROMPT_SEED), 1)
    sentences = [texts[0] for intent, texts in sorted(sampled.items()) if texts]
    random.Random(PROMPT_SEED).shuffle(sentences)
    out: list[str] = []
    words = 0
    for sentence in sentences:
        words += len(sentence.split())
        if words > max_words:
            break
        out.append(sentence[0].upper() + sentence[1:] + ".")
    return " ".join(out)


@dataclass(frozen=True)
class _Within:
    """Which sentences Whisper decodes an utterance within (the automaton is built on first use)."""

    model: HomeModel
    answering: bool  # the answers to the hub's question too
    overlapping: bool  # said over the hub's voice: its stop phrases and backchannels too

    def dfa(self) -> Dfa:
        """The automaton (slow the first time: call from a worker thread)."""
        return self.model.grammar.spoken_dfa(answering=self.answering, overlapping=self.overlapping)


@dataclass
class _Speculation:
    samples: int  # utterance length it was started on
    task: asyncio.Task[WhisperResult]
    cancel: threading.Event  # set when speech goes on: the pass stops early, its result unused
    words: tuple[str, ...] = ()  # the grammar tier's full command its verdict is on (:meth:`AsrStage._check`)
    # the decision made for the turn's check: pocketsphinx's words, the result with them scored, the choice
    choice: tuple[tuple[str, ...], WhisperResult, tuple[tuple[str, ...], float, bool] | None] | None = None

    def drop(self) -> None:
        """Speech went on: stop the pass (it frees the second tier sooner)."""
        self.cancel.set()


class AsrStage(Stage):
    """Streaming grammar decoding with a speculative Whisper second tier."""

    def __init__(self, agent: Agent, settings: AsrSettings, *, frame_ms: int,
                 whisper: Transcriber | None) -> None:
        """Decode with the agent's current grammar; ``whisper`` None disables tier two."""
        super().__init__("asr")
        self.agent = agent
        self.settings = settings
        self.frame_ms = frame_ms
        self.whisper = whisper
        self._decoder: GrammarDecoder | None = None
        self._model: HomeModel | None = None
        self._next_decoder: GrammarDecoder | None = None
        # (samples, the hub was playing, the VAD heard speech) of the frames before speech_start
        self._preroll: deque[tuple[Int16Array, bool, bool]] = deque(maxlen=max(1, OVERLAP_PREROLL_MS // frame_ms))
        self._preroll_frames = max(1, PREROLL_MS // frame_ms)
        self._utterance: list[Int16Array] = []
        self._levels: list[tuple[float, bool]] = []  # each of its chunks' level (dB) and whether the VAD heard speech
        self._overlapped = False  # the utterance overlaps the hub's playback
        self._voices = False  # ... other voices went on in the room (the talker gate held them)
        self._answering = False  # the utterance answers a question of the hub's
        self._utt_samples = 0
        self._speech: tuple[int, int] | None = None  # first and last sample of speech in the utterance
        self._complete: tuple[str, ...] = ()  # the grammar tier's words so far, when a whole sentence
        self._silent_ms = 0
        self._speculation: _Speculation | None = None
        self._final: asyncio.Task[GrammarHypothesis] | None = None  # the last utterance's final hypothesis
        self._whisper_lock = asyncio.Lock()
        self._name_words: tuple[HomeModel, frozenset[str]] | None = None
        self._prompt: tuple[HomeModel, str] | None = None
        self._question = ""  # the hub's question the next utterance answers
        self._meanings: Meanings = {}  # this utterance's sentences understood so far (``_meaning``)

    async def start(self) -> None:
        """Build the decoder for the current grammar, then start the queues."""
        self._model = self.agent.model
        self._decoder = await asyncio.to_thread(self._build, self._model)
        self._prompt = (self._model, await asyncio.to_thread(whisper_prompt, self._model.grammar))
        await super().start()

    def _build(self, model: HomeModel) -> GrammarDecoder:
        """The grammar tier's decoder, and the automata Whisper decodes with (slow: a worker thread).

        What the first utterances would otherwise build on the way (Whisper's token grammar,
        the NLU's matcher) is built here too: ~100 ms less for the first commands after a
        start or a change of the home.
        """
        decoder = GrammarDecoder(model.grammar)
        if self.whisper is not None:
            for answering in (False, True):
                self.whisper.prepare(model.grammar.spoken_dfa(answering=answering))
        model.nlu.recognize("turn on the light")
        return decoder

    async def cleanup(self) -> None:
        """Remove grammar files."""
        for dec in (self._decoder, self._next_decoder):
            if dec is not None:
                dec.close()

    async def reload(self) -> None:
        """Build a decoder for the agent's new grammar off the loop; swap between utterances."""
        model = self.agent.model
        decoder = await asyncio.to_thread(self._build, model)
        prompt = await asyncio.to_thread(whisper_prompt, model.grammar)
        self._next_decoder, self._model, self._prompt = decoder, model, (model, prompt)
        if self._decoder is None or not self._decoder.is_open:
            self._swap()

    def _swap(self) -> None:
        if self._next_decoder is not None:
            if self._decoder is not None:
                self._decoder.close()
            self._decoder, self._next_decoder = self._next_decoder, None

    @property
    def prompt(self) -> str:
        """Whisper's initial prompt: commands of the home, made once per home model.

        Sentences, not a list: a list of names makes Whisper answer with a list. After a
        question of the hub's, the question comes last: the answer is heard in its context
        ("Which room?" → "The kitchen.", not "Vacaching.").
        """
        model = self._model or self.agent.model
        if self._prompt is None or self._prompt[0] is not model:
            self._prompt = (model, whisper_prompt(model.grammar))
        return f"{self._prompt[1]} {self._question}" if self._question else self._prompt[1]

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Feed audio to the open utterance; finish it on end of turn."""
        if isinstance(frame, SpeechStartedFrame):
            await self._open()
        elif isinstance(frame, InputAudioFrame):
            await self._audio(frame)
        elif isinstance(frame, WakeWordFrame):
            self._restart()
        elif isinstance(frame, SessionFrame) and frame.open:
            self._question = frame.question
        elif isinstance(frame, EndOfTurnFrame):
            self._close(frame)
            return  # consumed here
        await self.push(frame, direction)

    async def _open(self) -> None:
        assert self._decoder is not None
        if self._decoder.is_open:
            return
        if self._final is not None:  # the decoder is still making the last utterance's final hypothesis
            await asyncio.wait([self._final])
            self._final = None
        self._answering = bool(self._question)
        self._decoder.start(answering=self._answering)
        self._utterance, self._levels = [], []
        self._utt_samples = 0
        self._speech, self._complete = None, ()
        self._meanings = {}
        self._speculation = None
        preroll = list(self._preroll)
        self._overlapped = any(played for _samples, played, _speech in preroll)
        self._voices = False
        if not self._overlapped:
            preroll = preroll[-self._preroll_frames:]
        for i, (samples, _played, speech) in enumerate(preroll):
            if i >= len(preroll) - self._preroll_frames:  # the older part only for the second tier
                self._decoder.feed(samples)
            self._add(samples, speech)
        self._preroll.clear()

    def _restart(self) -> None:
        """The wake word ends: the command is what comes after it."""
        decoder = self._decoder
        if decoder is None or not decoder.is_open:
            return
        decoder.stop()
        decoder.start()
        if self._speculation is not None:
            self._speculation.drop()
        self._utterance, self._levels, self._utt_samples, self._speculation, self._speech = [], [], 0, None, None
        self._complete = ()

    def _add(self, samples: Int16Array, speech: bool) -> None:
        if speech:
            first = self._speech[0] if self._speech is not None else self._utt_samples
            self._speech = (first, self._utt_samples + len(samples))
        self._utterance.append(samples)
        self._levels.append((level_db(samples), speech))
        self._utt_samples += len(samples)

    @property
    def _speech_s(self) -> float:
        """How long the person spoke in this utterance (first to last frame of speech, from their onset)."""
        if self._speech is None:
            return 0.0
        first, last = self._speech
        return max(0, last - max(first, self._talker_offset())) / RATE

    def _talker_offset(self) -> int:
        """Samples of the utterance before Whisper's window: other voices before the talker's onset."""
        if self._overlapped:
            return 0
        return sum(len(chunk) for chunk in self._utterance[:_talker_start(self._levels)])

    async def _audio(self, frame: InputAudioFrame) -> None:
        decoder = self._decoder
        assert decoder is not None
        samples = frame.audio.samples_i16
        played = frame.played
        if not decoder.is_open:
            self._preroll.append((samples, played, frame.speech))
            return
        self._overlapped |= played
        self._voices |= frame.voices
        partial = decoder.feed(samples)
        self._add(samples, frame.speech)
        if partial is not None and partial:
            words = partial.split()
            complete = self.agent.model.grammar.is_complete(words)
            self._complete = tuple(words) if complete else ()
            await self.push(PartialTranscriptFrame(text=partial, complete=complete))
            self._check_again()
        if frame.speech:
            if self._speculation is not None:  # speech goes on: an earlier pass is stale
                self._speculation.drop()
                self._speculation = None
            self._silent_ms = 0
        else:
            self._silent_ms += self.frame_ms
            if self._silent_ms == SPECULATE_AFTER_MS and self.whisper is not None and self._speculate():
                await self.push(CheckingFrame())
        if samples_to_ms(self._utt_samples) >= self.settings.max_utterance_s * 1000:
            self._close(EndOfTurnFrame(discard=False))

    def _audio_so_far(self) -> np.ndarray:
        """The utterance for Whisper: from the talker's onset when other voices came before it."""
        audio = np.concatenate(self._utterance) if self._utterance else np.zeros(0, np.int16)
        return audio[self._talker_offset():].astype(np.float32) / 32768.0

    def _speculate(self) -> bool:
        """Start the pause's pass; True when the turn is to wait for its verdict (:meth:`_check`)."""
        if samples_to_ms(self._utt_samples) < MIN_SPECULATE_MS:
            return False
        audio, prompt = self._audio_so_far(), self.prompt
        _LOGGER.debug("speculative whisper pass on %d ms", samples_to_ms(len(audio)))
        cancel = threading.Event()
        task = self.spawn(self._run_whisper(audio, prompt, self._within(), self._speech_s, self._complete, cancel),
                          "whisper", interruptible=False)
        self._speculation = _Speculation(self._utt_samples, task, cancel, self._complete)
        if self._overlapped:  # over the hub's voice, undecided words wait for the end of the turn
            return False
        self.spawn(self._check(self._speculation, self._complete, self._meanings), "check", interruptible=False)
        return True

    def _check_again(self) -> None:
        """The grammar tier made out another full command in the pause: the verdict again, on the same pass.

        Its last words may come a frame or two after the pause's pass began ("make the
        reading lamp red": none yet then). The verdict without them left the turn waiting as
        for words that are no command (650 ms), though the end of the turn decides on these
        words and this pass anyway; with them it is the end of turn's decision, made sooner.
        """
        speculation = self._speculation
        if speculation is None or self._overlapped or not self._complete or speculation.words == self._complete:
            return
        speculation.words = self._complete
        self.spawn(self._check(speculation, self._complete, self._meanings), "check", interruptible=False)

    async def _check(self, speculation: _Speculation, words: tuple[str, ...], known: Meanings) -> None:
        """The verdict on a pause: whether the pass is sure of a full command (a ``checked`` partial).

        Its result is the transcript at end of turn anyway (no speech since), so only the
        turn's wait depends on it. When pocketsphinx's ``words`` were a full command, the
        turn may close as for one only when the pass decides on a complete sentence and is
        not unsure: pocketsphinx fits a pause inside a sentence to a command ("time left on
        fifty seven minute [pause] timer" heard as "toggle every our study light"). When they
        were not, the pass's sentence must also be Whisper's own free words (a pause after
        "open up" is not "volume up" said). When Whisper's words are only those a request opens
        with ("So.", "Okay, um") and answer no question, the verdict holds no words: the turn
        waits as for words that are no command.
        """
        result = await self._score_also(await speculation.task, words)
        if self._speculation is not speculation or speculation.words != words:
            return  # speech went on, the turn ended, or the grammar tier's words changed (checked again)
        choice = self._amid_voices(await asyncio.to_thread(self._choose, result, words, known), self._voices)
        if self._speculation is not speculation or speculation.words != words:
            return
        speculation.choice = (words, result, choice)
        sure = (choice is not None and not choice[2] and self.agent.model.grammar.is_complete(list(choice[0]))
                and (bool(words) or tuple(tokenize(result.text)) == choice[0]))
        heard: tuple[str, ...]
        if only_opening(result.text) and not (sure and self._answering):
            # Whisper heard only the words a request opens with ("So.", "Okay, um"), and they answer
            # no question of the hub's: more may come ("So, [pause] what time is it?"), and
            # pocketsphinx's command in them ("hello" for "So,") is not what was said
            sure, heard = False, ()
        else:
            heard = choice[0] if sure and choice is not None else words
        _LOGGER.debug("the pause's verdict: %r %s", " ".join(heard), "complete" if sure else "not sure")
        await self.push(PartialTranscriptFrame(text=" ".join(heard), complete=sure, checked=True))

    def _within(self, *, overlapping: bool | None = None) -> _Within:
        """The sentences Whisper decodes this utterance within."""
        return _Within(self._model or self.agent.model, self._answering,
                       self._overlapped if overlapping is None else overlapping)

    async def _run_whisper(self, audio: np.ndarray, prompt: str, within: _Within | None = None,
                           speech_s: float = 0.0, also: tuple[str, ...] = (),
                           cancel: threading.Event | None = None) -> WhisperResult:
        assert self.whisper is not None
        # built in a worker thread at start; the one for words over the hub's voice on first use
        dfa = await asyncio.to_thread(within.dfa) if within is not None else None
        async with self._whisper_lock:  # one pass at a time on the 2 cores
            if cancel is not None and cancel.is_set():
                return CANCELLED  # made stale while it waited
            return await asyncio.to_thread(functools.partial(self.whisper.transcribe, audio, prompt, grammar=dfa,
                                                             speech_s=speech_s, also=also, rivals=_un_sentences,
                                                             cancel=cancel))

    async def _score_also(self, result: WhisperResult, words: tuple[str, ...]) -> WhisperResult:
        """The pass's result with pocketsphinx's ``words`` scored too, when they came after it began.

        Its partial words may never make out the command its final words do ("vacuum in
        here": nothing at the pause, the sentence at the end of the turn); unscored, they
        would get no say in the choice. One pass over the sentence on the same encoding.
        """
        if not words or result.encoding is None or result.agreed or any(h.words == words for h in result.sentences):
            return result
        assert self.whisper is not None
        async with self._whisper_lock:
            return await asyncio.to_thread(self.whisper.score_also, result, words)

    def _close(self, eot: EndOfTurnFrame) -> None:
        decoder = self._decoder
        if decoder is None or not decoder.is_open:
            if eot.blip:
                self.spawn(self._blip(), "blip", interruptible=False)
            return
        # the final hypothesis off the loop: its lattice may take 100 ms and more, and frames go on
        decoder.stop()
        final = self._final = self.spawn(asyncio.to_thread(decoder.final), "final", interruptible=False)
        audio = self._audio_so_far()
        speculation, overlapped, voices = self._speculation, self._overlapped, self._voices
        within, speech_s, known = self._within(), self._speech_s, self._meanings
        self._speculation, self._utterance, self._levels, self._utt_samples, self._speech = None, [], [], 0, None
        self._complete = ()
        self._silent_ms, self._overlapped, self._voices = 0, False, False
        self._swap()
        if eot.discard:
            return
        prompt, self._question = self.prompt, ""  # a question is answered once
        self.spawn(self._finish(final, audio, speculation, prompt, within, speech_s, known, overlapped=overlapped,
                                paused=eot.undecided, voices=voices), "finish", interruptible=False)

    async def _blip(self) -> None:
        """Short speech over the hub that never became a turn: a stop phrase stops it, anything else is dropped.

        Whisper decodes it within the phrases said over the hub (a stop, a backchannel) and
        the commands; the transcript is paused (the router resumes the reply for an empty
        one), and its words are a stop phrase or nothing. Whisper's own words stay in
        ``open_text`` for the event log.
        """
        audio = (np.concatenate([s for s, _played, _speech in self._preroll]) if self._preroll
                 else np.zeros(0, np.int16)).astype(np.float32) / 32768.0
        if self.whisper is None or not len(audio):
            await self._transcript("", "open", 0.0, overlapped=True, paused=True)
            return
        speech_s = sum(len(s) for s, _played, speech in self._preroll if speech) / RATE
        result = await self._run_whisper(audio, self.prompt, self._within(overlapping=True), speech_s)
        choice = await asyncio.to_thread(self._choose, result)
        if choice is not None and is_stop(" ".join(choice[0])) and not choice[2]:
            await self._transcript(" ".join(choice[0]), "grammar", choice[1], open_text=result.text,
                                   overlapped=True, paused=True)
            return
        heard = result.text
        await self._transcript(heard if is_stop(heard) else "", "open", 0.0, open_text=heard,
                               overlapped=True, paused=True)

    async def _finish(self, final: Awaitable[GrammarHypothesis], audio: np.ndarray, speculation: _Speculation | None,
                      prompt: str, within: _Within, speech_s: float, known: Meanings, *, overlapped: bool = False,
                      paused: bool = False, voices: bool = False) -> None:
        hyp = await final
        say = functools.partial(self._transcript, overlapped=overlapped, paused=paused, grammar=hyp)
        if self.whisper is None:  # the grammar tier alone (configured so): only its confident words
            if hyp.words and hyp.confidence >= self.settings.confidence:
                await say(hyp.text, "grammar", hyp.confidence)
            else:
                await say("", "open", 0.0)
            return
        decided = speculation.choice if speculation is not None else None
        if decided is not None and decided[0] == hyp.words:
            _words, result, choice = decided  # decided for the turn's check already
        else:
            if speculation is not None:
                result = await self._score_also(await speculation.task, hyp.words)
                _LOGGER.debug("speculation on %d of %d ms", samples_to_ms(speculation.samples),
                              samples_to_ms(len(audio)))
            else:
                result = await self._run_whisper(audio, prompt, within, speech_s, hyp.words)
            choice = self._amid_voices(await asyncio.to_thread(self._choose, result, hyp.words, known), voices)
        if choice is None:
            # Whisper's own words: the understanding matches them as typed text, or nothing acts.
            # Amid other voices, an action in them no sentence of the grammar confirmed is asked
            # about first: Whisper writes those voices into it, or leaves the talker's words out
            # ("start the Roomba at Study" over people talking: "Start Roomba.")
            await say(result.text, "open", float(np.exp(result.logprob)), open_text=result.text,
                      unsure=voices and self._action(tuple(tokenize(result.text))))
            return
        words, confidence, unsure = choice
        await say(" ".join(words), "grammar", confidence, open_text=result.text, unsure=unsure)

    def _choose(self, result: WhisperResult, grammar_words: tuple[str, ...] = (),
                known: Meanings | None = None) -> tuple[tuple[str, ...], float, bool] | None:
        """The grammar's sentence to take, how sure (its share among the likeliest), and whether to ask first.

        The sentence the grammar tier (pocketsphinx) heard counts ``AGREEMENT_NATS`` more: two
        recognisers agree on it. So does the sentence Whisper's own free words are, word for word
        (its free decode wrote "Pause 36 seconds timer." and the search found "twenty six seconds
        timer" 0.7 nats likelier; "Delete batteries on the Chores List." and "... magazine ..."),
        or, when no sentence is them, each sentence with their numbers ("Set the reading lamp.
        Write us to 80%." for "... to eighty percent", 1.7 nats ahead of "... eight percent");
        but not against the opposite action: the free decode hears "mute" for "unmute" in noise.
        ``known``: the utterance's meanings so far (added to).
        """
        _LOGGER.debug("whisper heard %r (%s); within the grammar: %s; pocketsphinx: %r", result.text,
                      result.text_logprob, [(" ".join(h.words), round(h.score, 2), round(h.forced, 2))
                                            for h in result.sentences], " ".join(grammar_words))
        free = tuple(tokenize(result.text))  # Whisper's own words
        known = {} if known is None else known

        candidates = list(result.sentences)
        if (result.text_score is not None and free and all(h.words != free for h in candidates)
                and self._meaning(free, known) is not None):
            # Whisper's own words are a sentence of the grammar the search missed: one more candidate
            candidates.append(Heard(free, result.text_score, 0.0, result.text_logprob or 0.0))
        # Whisper's numbers vote too, when no sentence is its words ("Set the reading lamp. Write us to 80%.")
        free_numbers = _numbers(free) if all(h.words != free for h in candidates) else ()

        def free_vote(h: Heard) -> bool:
            return h.words == free or (bool(free_numbers) and _numbers(h.words) == free_numbers)

        def score(h: Heard) -> float:
            return h.score + AGREEMENT_NATS * ((h.words == grammar_words) + free_vote(h))

        def opposite_score(h: Heard) -> float:  # the opposite action is weighed on the search's scores alone
            return score(h) - AGREEMENT_NATS * free_vote(h)

        meaning_of = {h.words: self._meaning(h.words, known) for h in candidates}
        free_meaning = self._meaning(free, known) if free else None
        # Social small talk ("thank you very much", "see you soon") is what the search fits other
        # voices in the room to (a TV, people talking): when Whisper's own words, which follow
        # the speaker the prompt is about, are a request of another kind, it does not count.
        # Nor does small talk the grammar cost much more for than a command may cost: said to the
        # hub, Whisper's own words are close to it ("Thanks a lot." for "thank you very much").
        command = free_meaning is not None and not _social(free_meaning)
        ranked = sorted((h for h in candidates
                         if not (_social(meaning_of[h.words]) and (command or h.forced > SOCIAL_MAX_FORCED))),
                        key=lambda h: -score(h))
        if ranked and ranked[0].words != grammar_words and _within(ranked[0].words, grammar_words):
            # Whisper skips words it is unsure of; pocketsphinx must account for all the speech:
            # its longer sentence, not far less likely for Whisper, is what was said
            longer = next((h for h in ranked if h.words == grammar_words), None)
            if longer is not None and score(longer) >= score(ranked[0]) - COVERAGE_NATS:
                ranked.remove(longer)
                ranked.insert(0, longer)
        if not ranked or ranked[0].forced > MAX_FORCED:
            return None
        top = ranked[0]
        if result.text_logprob is not None and result.text_logprob - top.logprob > MAX_LIKELIER:
            return None  # Whisper's own words explain the speech far better: "OK." is not "what are you"
        meanings = [meaning_of[h.words] for h in ranked]
        meaning = meanings[0]
        reworded = self._reworded(free, free_meaning, meaning)
        if reworded is not None and (reworded != meaning or self._bare_name(top.words, meaning)):
            # Whisper's own words ask for something else in other words ("Open the blinds halfway."
            # for "open the blinds"), or say in them what a bare name is to do ("Start the coffee
            # maker."): the understanding reads them, and asks first
            return None
        # Each other meaning weighs as its likeliest sentence: a meaning said many ways ("stop the
        # music", "... the media", "... the movie") is no likelier for it than one said one way
        rivals: dict[object, float] = {}
        for h, m in zip(ranked, meanings, strict=True):
            if not (h is top or _within(h.words, top.words) or m == meaning):
                key = h.words if m is None else m
                rivals[key] = max(rivals.get(key, 0.0), math.exp(score(h) - score(top)))
        share = 1.0 / (1.0 + sum(rivals.values()))  # how likely it is that this was meant, among the likeliest
        heard = list(free)  # Whisper's own words, tokenized once above
        # the opposite one "un" away, unless Whisper's own words are the sentence's, word for word,
        # "un" and all: its free decode wrote the polarity itself ("Unmute in here.": "mute in here"
        # 7.2 nats behind). Not when they lack it: tiny.en drops the weak syllable ("Mute, Music on
        # Living Room TV." for "unmute the music ...", which was muted; "A new kitchen speaker.",
        # "Amute Living Room TV.", "And Pause the media port."), it does not put one in
        un = set(_un_sentences(top.words)) if free != top.words or not _has_un(top.words) else set()
        opposed = any(opposite_score(top) - opposite_score(h) < (UN_OPPOSITE_NATS if h.words in un else OPPOSITE_NATS)
                      and _opposite(meaning, m) for h, m in zip(ranked[1:], meanings[1:], strict=True))
        unsure = (share < MIN_SHARE or opposed
                  or self._bare_name(top.words, meaning)
                  or _polarity_unclear(heard)
                  or _against(heard, top.words)
                  or _asks(heard, result.text, top.words)
                  or _number_goes_on(heard, top.words)
                  or (command and _other_action(meaning, free_meaning))
                  or syllables(heard) > 1.5 * syllables(top.words) + 2)  # Whisper heard much more than it says
        return top.words, share, unsure

    def _amid_voices(self, choice: tuple[tuple[str, ...], float, bool] | None,
                     voices: bool) -> tuple[tuple[str, ...], float, bool] | None:
        """The choice, unsure when other voices went on in the room and its action carries free text.

        A search, a list item or a message is free text the search fits to whatever is said:
        other voices in it ("play last in Hallway" over people talking heard as "play last in
        four away", and played) make it a question first. Whisper's own words holding the same
        text is no proof: its free decode heard "Play last in 4th wave." too.
        """
        if choice is not None and voices and not choice[2] and self._action(choice[0], free_text=True):
            return choice[0], choice[1], True
        return choice

    def _action(self, words: tuple[str, ...], *, free_text: bool = False) -> bool:
        """Whether the words ask for an action (``free_text``: with free text in it: a search, a list item)."""
        intent = self.agent.recognize(" ".join(words)) if words else None
        return (intent is not None and intent.name not in READ_ONLY_INTENTS
                and (not free_text or bool(FREE_SLOTS.intersection(intent.slots))))

    def _meaning(self, words: tuple[str, ...], known: Meanings | None = None) -> tuple[object, ...] | None:
        """What a sentence would do: the intent, its targets and its values (free text left out).

        ``known``: the meanings found for this utterance so far (the pause's check and the end
        of turn decide on the same sentences; matching one takes a few ms).
        """
        known = {} if known is None else known
        if words in known:
            return known[words]
        intent = self.agent.recognize(" ".join(words))
        meaning = None if intent is None else _intent_meaning(intent)
        known[words] = meaning
        return meaning

    def _reworded(self, free: tuple[str, ...], free_meaning: tuple[object, ...] | None,
                  meaning: tuple[object, ...] | None) -> tuple[object, ...] | None:
        """What Whisper's own words ask for in words the templates miss (:mod:`..paraphrase`), else None.

        Only for an action the grammar's sentence would take, when the matcher cannot read
        Whisper's words themselves: "Start the coffee maker." says what "the coffee maker" (a
        bare name) is to do; "Open the blinds halfway." says more than "open the blinds".
        """
        if not free or free_meaning is not None or meaning is None or _social(meaning):
            return None
        if str(meaning[0]) in READ_ONLY_INTENTS:
            return None
        found = request_paraphrase(" ".join(free), self.agent.recognize, (self._model or self.agent.model).catalog)
        return None if found is None else _intent_meaning(found[1])

    def _bare_name(self, words: tuple[str, ...], meaning: tuple[object, ...] | None) -> bool:
        """Only a device's or a room's name, and a value: an action without a word for it.

        Home Assistant turns on a name said alone, and sets "the porch white"; said alone
        they are more often a command cut short, or misheard: "kill the porch light" (Whisper:
        "Go the porch light.") was "the porch white", which set the light white. A question
        ("is the porch light on") asks nothing to be done.
        """
        if meaning is None or str(meaning[0]) in READ_ONLY_INTENTS:
            return False
        names = self._names()
        values: set[str] = set()
        if meaning[0] != "HassTurnOn":
            intent = self.agent.recognize(" ".join(words))
            values = {w for v in (intent.slot_texts.values() if intent else ()) for w in tokenize(str(v))} - names
            if not values & set(words):
                return False
        return all(w in names or w in FUNCTION_WORDS or w in values for w in words)

    def _names(self) -> frozenset[str]:
        model = self._model or self.agent.model
        if self._name_words is None or self._name_words[0] is not model:
            catalog = model.catalog
            words = {w for e in catalog for n in (*e.names, e.area or "") for w in tokenize(n)}
            self._name_words = (model, frozenset(words - FUNCTION_WORDS))
        return self._name_words[1]

    async def _transcript(self, text: str, tier: str, confidence: float, open_text: str = "",
                          grammar: GrammarHypothesis | None = None, *, overlapped: bool = False,
                          paused: bool = False, unsure: bool = False) -> None:
        await self.push(TranscriptFrame(
            text=text, tier=tier, confidence=confidence, open_text=open_text or text,
            grammar_text=grammar.text if grammar is not None else None,
            grammar_confidence=grammar.confidence if grammar is not None else None, overlapped=overlapped,
            paused=paused, unsure=unsure))


def _numbers(words: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """The numbers in words, each a run of number words ("eighty", "twenty two")."""
    runs: list[tuple[str, ...]] = []
    for is_number, run in itertools.groupby(words, lambda word: word in NUMBER_WORDS):
        if is_number:
            runs.append(tuple(run))
    return tuple(runs)


def _number_goes_on(heard: list[str], words: tuple[str, ...]) -> bool:
    """Whether the sentence ends on a number, and Whisper's words go on after it with a word it does not explain.

    Such a word may be the number's end misheard, or the turn cut inside it: "make the volume
    to 34 Kitchen Speaker" ended after "34", Whisper wrote "Make the volume to 30 feet." and
    the sentence "make the volume to thirty" set the wrong player to the wrong volume. A
    number the sentence says its unit after ("by fifty four second", heard "54 sec") is not
    in doubt so: the unit is the sentence's, however Whisper wrote it.
    """
    if not words or words[-1] not in NUMBER_WORDS:
        return False
    return any(word in NUMBER_WORDS and after not in NUMBER_WORDS and after not in FUNCTION_WORDS
               and after not in words for word, after in itertools.pairwise(heard))


def _intent_meaning(intent: Intent) -> tuple[object, ...]:
    """The intent, its targets and its values (free text left out: a list item, a search, a timer's name)."""
    free = FREE_SLOTS | ({"name"} if intent.name in TIMER_INTENTS else set())
    return (intent.name, tuple(sorted(intent.targets)),
            tuple(sorted((k, str(v)) for k, v in intent.slots.items() if k not in free)))


def _talker_start(levels: list[tuple[float, bool]], frame_ms: int = 30) -> int:
    """The first chunk of the talker's words: ``ONSET_MARGIN_MS`` before their onset, or 0.

    ``levels``: each chunk's level (dB) and whether the VAD heard speech in it. The onset is
    the first chunk within ``ONSET_DB`` of the talker's level. Chunks before it are cut only
    when the VAD heard speech in 3 of them or more: other voices, not the talker's lead-in.
    """
    if not levels:
        return 0
    talker = float(np.percentile([db for db, _speech in levels], 90))
    onset = next(i for i, (db, _speech) in enumerate(levels) if db >= talker - ONSET_DB)
    cut = max(0, onset - ONSET_MARGIN_MS // frame_ms)
    return cut if sum(speech for _db, speech in levels[:cut]) >= 3 else 0


def _within(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    """Whether ``part`` is ``whole`` with words left out ("the christmas tree" in "toggle the christmas tree").

    Whisper often drops a word it is unsure of at the edges; a sentence that explains more of
    the speech and is likelier anyway is not put in doubt by its cut-short reading.
    """
    rest = iter(whole)
    return len(part) < len(whole) and all(word in rest for word in part)


def _social(meaning: tuple[object, ...] | None) -> bool:
    """Whether a sentence is social small talk: the hub's own or Home Assistant's (not an answer to the hub)."""
    return (meaning is not None and (meaning[0] == "HassRespond" or is_local(str(meaning[0])))
            and meaning[0] not in ANSWERS)


def _other_action(meaning: tuple[object, ...] | None, heard: tuple[object, ...] | None) -> bool:
    """Whether the sentence changes the home in a way Whisper's own words, a request too, do not ask for.

    "turn off the office fan" heard by Whisper as "Turn off the office." (a command of its
    own) is not "turn up the office ten" (the grammar's likeliest); a question instead of
    another question changes nothing, and the same intent on other targets is words left out.
    """
    return (meaning is not None and heard is not None and meaning[0] != heard[0]
            and str(meaning[0]) not in READ_ONLY_INTENTS and not _social(meaning))


def _un_sentences(words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The sentence with one word's "un" put on or taken off ("mute" and "unmute"): the closest opposites."""
    out = []
    for i, word in enumerate(words):
        other = "un" + word if word in UN_STEMS else word[2:] if _is_un(word) else ""
        if other:
            out.append((*words[:i], other, *words[i + 1:]))
    return out


def _is_un(word: str) -> bool:
    """Whether the word is one with "un" put on ("unmute", "unpause", "unlock")."""
    return word.startswith("un") and word[2:] in UN_STEMS


def _has_un(words: tuple[str, ...]) -> bool:
    """Whether a word of the sentence is one with "un" put on."""
    return any(_is_un(word) for word in words)


def _opposite(a: tuple[object, ...] | None, b: tuple[object, ...] | None) -> bool:
    """Whether two meanings are opposite actions on the same targets ("turn fans on", "turn fans off").

    The same targets as said (name, area, domain), or as resolved: "unpause the tv" resolves
    to nothing while the TV plays, "pause the tv" to the TV.
    """
    return (a is not None and b is not None and frozenset((a[0], b[0])) in OPPOSITES
            and (a[1] == b[1] or a[2] == b[2]))


def _asks(heard: list[str], text: str, words: tuple[str, ...]) -> bool:
    """Whisper's words are a question where the sentence is not ("is the coffee maker on": "coffee maker on").

    Not a question word that is only the start of the sentence's first word, split off by
    Whisper and no question mark after: "Can Sol all of my Living Room Timors." is "cancel
    all of my living room timers".
    """
    if not is_question(heard, text) or is_question(list(words)):
        return False
    split = (not text.rstrip().endswith("?") and bool(heard) and bool(words)
             and words[0] != heard[0] and words[0].startswith(heard[0]))
    return not split


def _polarity(words: Iterable[str]) -> int:
    """+1 when the words only say "on" ("turn up", "open", "resume"), -1 when only "off", else 0."""
    said = set(words)
    up, down = bool(said & POLARITY_WORDS[0]), bool(said & POLARITY_WORDS[1])
    return int(up) - int(down)


def _against(heard: list[str], words: tuple[str, ...]) -> bool:
    """Whisper's own words say one way ("Turn off the office 10.") and the sentence the other ("turn up ...")."""
    mine = _polarity(heard)
    return mine != 0 and _polarity(words) == -mine


def _polarity_unclear(heard: list[str]) -> bool:
    """Heard "and pause", "an lock" or "amute": the words may have been "unpause", "unlock", "unmute"."""
    if any(word in UN_STEMS and before in UN_SOUNDS for before, word in itertools.pairwise(heard)):
        return True
    return any(word.endswith(stem) and word[:-len(stem)] in UN_PREFIXES for word in heard for stem in UN_STEMS)
