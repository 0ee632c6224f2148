"""ASR stage: the two-tier recogniser.

* Grammar tier — pocketsphinx over the home grammar, fed every frame of an open
  utterance; a partial hypothesis whenever it changes.
* Second tier — Whisper tiny.en on a short window, started speculatively the moment
  the user falls silent (so it runs while end-of-turn waits), its text snapped to the
  nearest sentence of the grammar.

At end of turn the grammar tier's hypothesis is taken at once when it is a complete
command with confident words, heard while the hub was silent; otherwise the second
tier decides, and speech that is not a home command keeps Whisper's open transcript.
An utterance that overlaps the hub's own playback (a barge-in) always goes to the
second tier: the echo canceller's residue makes the grammar tier's words unreliable.

Speech over the hub too short to open a turn (a ``blip`` end of turn) is transcribed from
the pre-roll alone; only a stop phrase in it reaches the router as words.

Consumes: SpeechStartedFrame, InputAudioFrame, EndOfTurnFrame (upstream).
Emits: PartialTranscriptFrame, TranscriptFrame.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import random
from collections import deque
from dataclasses import dataclass
from typing import Final

import numpy as np

from ..agent import Agent, HomeModel
from ..audio.format import Int16Array, samples_to_ms
from ..engines.base import Transcriber, WhisperResult
from ..engines.pocketsphinx import MODEL_DIR, GrammarDecoder, GrammarHypothesis
from ..frames import (
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
from ..grammar.automaton import (
    FUNCTION_WORDS,
    NUMBER_WORDS,
    Snap,
    sentence_distance,
    snap,
    tokenize,
    word_distance,
)
from ..grammar.pronounce import Phonetics
from ..grammar.sample import sample_sentences
from ..nlu import words_to_digits
from ..pipeline import Direction, Stage
from ..settings import AsrSettings
from ..text import is_question
from ..understanding import is_stop

_LOGGER = logging.getLogger(__name__)

PREROLL_MS: Final = 300  # audio kept from before speech_start
# ... for the second tier when the hub was playing: its echo delays the VAD (p95 ~400 ms
# after the onset), and the first word ("close", "turn off") is the one that decides; the
# suppressor has removed most of the hub's own voice from what comes before the onset
OVERLAP_PREROLL_MS: Final = 600
SNAP_MAX_RATIO: Final = 0.34  # weighted edits per content word for a snap to count
AGREEMENT_MARGIN: Final = 0.3  # edits by which Whisper may prefer its snap over the grammar tier
MEND_DISTANCE: Final = 0.5  # a heard word snapping may mend into a name or a deciding word
PHONETIC_AGREEMENT: Final = 0.25  # phone edits per phone: Whisper's words sound like the grammar tier's
# words that decide what happens: two tiers agree only when they say the same of these
CONTRAST: Final = frozenset(
    "on off open close closed shut lock locked unlock unlocked up down start stop pause unpause play resume mute "
    "unmute increase decrease raise lower yes no cancel add remove not activate deactivate enable disable "
    "brightness temperature position volume speed color colour percent degrees".split())
_DIGITS: Final = frozenset(str(n) for n in range(10000))
# a value said is the user's: snapping never makes "forty g" into "forty eight"
NUMBERS: Final = NUMBER_WORDS | {"half"}
# Whisper hears a quick "un" as a word of its own ("unpause" → "and pause"): before one of
# these, such a word leaves the polarity open, so neither tier's sentence is taken.
UN_STEMS: Final = frozenset(w[2:] for w in CONTRAST if w.startswith("un") and w[2:] in CONTRAST)
UN_SOUNDS: Final = frozenset("un an and en in um uh ann anne".split())
UN_PREFIXES: Final = frozenset("a an en in em um ah".split())  # fused: "amute", "enlock"
MIN_SPECULATE_MS: Final = 300  # shortest utterance worth a speculative pass
# Silence before a speculative pass: the VAD flag drops before a word's soft tail
# (a final "n" or "s"), and Whisper drops a word it hears cut off.
SPECULATE_AFTER_MS: Final = 60


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


@dataclass
class _Speculation:
    samples: int  # utterance length it was started on
    task: asyncio.Task[WhisperResult]


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
        self._preroll: deque[tuple[Int16Array, bool]] = deque(maxlen=max(1, OVERLAP_PREROLL_MS // frame_ms))
        self._preroll_frames = max(1, PREROLL_MS // frame_ms)
        self._utterance: list[Int16Array] = []
        self._overlapped = False  # the utterance overlaps the hub's playback
        self._utt_samples = 0
        self._silent_ms = 0
        self._speculation: _Speculation | None = None
        self._whisper_lock = asyncio.Lock()
        self.phonetics = Phonetics(MODEL_DIR / "cmudict-en-us.dict")
        self._name_words: tuple[HomeModel, frozenset[str]] | None = None
        self._prompt: tuple[HomeModel, str] | None = None
        self._question = ""  # the hub's question the next utterance answers

    async def start(self) -> None:
        """Build the decoder for the current grammar, then start the queues."""
        self._model = self.agent.model
        self._decoder = await asyncio.to_thread(GrammarDecoder, self._model.grammar)
        self._prompt = (self._model, await asyncio.to_thread(whisper_prompt, self._model.grammar))
        await super().start()

    async def cleanup(self) -> None:
        """Remove grammar files."""
        for dec in (self._decoder, self._next_decoder):
            if dec is not None:
                dec.close()

    async def reload(self) -> None:
        """Build a decoder for the agent's new grammar off the loop; swap between utterances."""
        model = self.agent.model
        decoder = await asyncio.to_thread(GrammarDecoder, model.grammar)
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
            self._open()
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

    def _open(self) -> None:
        assert self._decoder is not None
        if self._decoder.is_open:
            return
        self._decoder.start(answering=bool(self._question))
        self._utterance = []
        self._utt_samples = 0
        self._speculation = None
        preroll = list(self._preroll)
        self._overlapped = any(played for _samples, played in preroll)
        if not self._overlapped:
            preroll = preroll[-self._preroll_frames:]
        for i, (samples, _played) in enumerate(preroll):
            if i >= len(preroll) - self._preroll_frames:  # the older part only for the second tier
                self._decoder.feed(samples)
            self._add(samples)
        self._preroll.clear()

    def _restart(self) -> None:
        """The wake word ends: the command is what comes after it."""
        decoder = self._decoder
        if decoder is None or not decoder.is_open:
            return
        decoder.end()
        decoder.start()
        self._utterance, self._utt_samples, self._speculation = [], 0, None

    def _add(self, samples: Int16Array) -> None:
        self._utterance.append(samples)
        self._utt_samples += len(samples)

    async def _audio(self, frame: InputAudioFrame) -> None:
        decoder = self._decoder
        assert decoder is not None
        samples = frame.audio.samples_i16
        played = frame.reference is not None and bool(np.any(frame.reference))
        if not decoder.is_open:
            self._preroll.append((samples, played))
            return
        self._overlapped |= played
        partial = decoder.feed(samples)
        self._add(samples)
        if partial is not None and partial:
            words = partial.split()
            complete = self.agent.model.grammar.is_complete(words)
            await self.push(PartialTranscriptFrame(text=partial, complete=complete))
        if frame.speech:
            self._speculation = None  # speech goes on: an earlier pass is stale
            self._silent_ms = 0
        else:
            self._silent_ms += self.frame_ms
            if self._silent_ms == SPECULATE_AFTER_MS and self.whisper is not None:
                self._speculate()
        if samples_to_ms(self._utt_samples) >= self.settings.max_utterance_s * 1000:
            self._close(EndOfTurnFrame(discard=False))

    def _audio_so_far(self) -> np.ndarray:
        return (np.concatenate(self._utterance) if self._utterance
                else np.zeros(0, np.int16)).astype(np.float32) / 32768.0

    def _speculate(self) -> None:
        if samples_to_ms(self._utt_samples) < MIN_SPECULATE_MS:
            return
        audio, prompt = self._audio_so_far(), self.prompt
        _LOGGER.debug("speculative whisper pass on %d ms", samples_to_ms(len(audio)))
        task = self.spawn(self._run_whisper(audio, prompt), "whisper", interruptible=False)
        self._speculation = _Speculation(self._utt_samples, task)

    async def _run_whisper(self, audio: np.ndarray, prompt: str) -> WhisperResult:
        assert self.whisper is not None
        async with self._whisper_lock:  # one pass at a time on the 2 cores
            return await asyncio.to_thread(self.whisper.transcribe, audio, prompt)

    def _close(self, eot: EndOfTurnFrame) -> None:
        decoder = self._decoder
        if decoder is None or not decoder.is_open:
            if eot.blip:
                self.spawn(self._blip(), "blip", interruptible=False)
            return
        hyp = decoder.end()
        audio = self._audio_so_far()
        speculation, overlapped = self._speculation, self._overlapped
        self._speculation, self._utterance, self._utt_samples = None, [], 0
        self._silent_ms, self._overlapped = 0, False
        self._swap()
        if eot.discard:
            return
        prompt, self._question = self.prompt, ""  # a question is answered once
        self.spawn(self._finish(hyp, audio, speculation, prompt, overlapped=overlapped, paused=eot.undecided),
                   "finish", interruptible=False)

    async def _blip(self) -> None:
        """Short speech over the hub that never became a turn: a stop phrase stops it, anything else is dropped.

        The transcript is paused (the router resumes the reply for an empty one); Whisper's
        words stay in ``open_text`` for the event log.
        """
        audio = (np.concatenate([s for s, _played in self._preroll]) if self._preroll
                 else np.zeros(0, np.int16)).astype(np.float32) / 32768.0
        heard = ""
        if self.whisper is not None and len(audio):
            heard = (await self._run_whisper(audio, self.prompt)).text
        await self._transcript(heard if is_stop(heard) else "", "open", 0.0, open_text=heard,
                               overlapped=True, paused=True)

    async def _finish(self, hyp: GrammarHypothesis, audio: np.ndarray, speculation: _Speculation | None,
                      prompt: str, *, overlapped: bool = False, paused: bool = False) -> None:
        say = functools.partial(self._transcript, overlapped=overlapped, paused=paused)
        grammar = self.agent.model.grammar
        complete = grammar.is_complete(list(hyp.words))
        if self.whisper is None:  # the grammar tier alone (configured so): only its confident words
            if hyp.words and hyp.confidence >= self.settings.confidence:
                await say(hyp.text, "grammar", hyp.confidence, grammar=hyp)
            else:
                await say("", "open", 0.0)
            return
        if speculation is not None:
            result = await speculation.task
            _LOGGER.debug("speculation on %d of %d ms", samples_to_ms(speculation.samples),
                          samples_to_ms(len(audio)))
        else:
            result = await self._run_whisper(audio, prompt)
        heard = tokenize(result.text)
        snapped = snap(grammar.dfa, heard) if heard else None
        asked = is_question(heard, result.text) or is_question(list(hyp.words))
        if _polarity_unclear(heard):
            await say(result.text, "open", 0.0, open_text=result.text, grammar=hyp)
            return
        agreement = sentence_distance(hyp.words, heard)
        if complete and (is_question(list(hyp.words)) or not asked) and (
                (snapped is not None and snapped.words != hyp.words
                 and agreement <= snapped.cost + AGREEMENT_MARGIN
                 and Snap(hyp.words, agreement, tuple(heard)).ratio <= SNAP_MAX_RATIO)
                or self._sounds_alike(list(hyp.words), heard)) and self._keeps_names(hyp.words, heard):
            # both tiers support the grammar tier's sentence: two models agree
            await say(hyp.text, "grammar", hyp.confidence, open_text=result.text,
                                   grammar=hyp)
        elif (snapped is not None and snapped.ratio <= SNAP_MAX_RATIO
              and (is_question(list(snapped.words)) or not asked)
              and self._supported(list(snapped.words), heard)):
            await say(" ".join(snapped.words), "snapped",
                                   max(0.0, 1.0 - snapped.ratio), open_text=result.text, grammar=hyp)
        else:
            # Whisper's own words: the understanding matches them as typed text, or nothing acts.
            # (Never the grammar tier's words alone: it fits any speech to some command.)
            await say(result.text, "open", float(np.exp(result.logprob)),
                                   open_text=result.text, grammar=hyp)

    def _supported(self, sentence: list[str], heard: list[str]) -> bool:
        """A snapped sentence keeps what Whisper heard: its names, rooms and deciding words.

        Snapping may mend a word ("lite" → "light"), never put another room, device or
        direction in its place ("in here" → "in the garage", "on" → "off"), and it must account
        for at least half of the words that carry meaning: dropping the rest is not mending
        ("turn lam pause" is not "pause"); the values said stay as said.
        """
        content = [h for h in heard if h not in FUNCTION_WORDS]
        kept = sum(1 for h in content if h in sentence or self._mends(h, sentence))
        if 2 * kept < len(content):
            return False
        if [w for w in sentence if w in NUMBERS] != [h for h in heard if h in NUMBERS]:
            return False  # a value added, changed or dropped
        names = self._names()
        for word in sentence:
            if word in heard or not (word in names or word in CONTRAST):
                continue
            if not any((word_distance(word, h) <= MEND_DISTANCE and h not in CONTRAST)
                       or self.phonetics.distance([word], [h]) <= PHONETIC_AGREEMENT for h in heard):
                return False
        if all(w in names or w in FUNCTION_WORDS for w in sentence) and any(
                h not in sentence and h not in FUNCTION_WORDS and not self._mends(h, sentence) for h in heard):
            return False  # "kill the porch light" is not "the porch light" (a bare name turns it on)
        return self._keeps_names(sentence, heard) and all(w in sentence for w in heard if w in CONTRAST)

    def _keeps_names(self, sentence: list[str] | tuple[str, ...], heard: list[str]) -> bool:
        """Every room or device word Whisper heard is in the sentence (or mended into it)."""
        names = self._names()
        return not any(h in names and h not in sentence and not self._mends(h, sentence) for h in heard)

    def _mends(self, heard: str, sentence: list[str] | tuple[str, ...]) -> bool:
        return any(word_distance(w, heard) <= MEND_DISTANCE
                   or self.phonetics.distance([w], [heard]) <= PHONETIC_AGREEMENT for w in sentence)

    def _names(self) -> frozenset[str]:
        model = self._model or self.agent.model
        if self._name_words is None or self._name_words[0] is not model:
            catalog = model.catalog
            words = {w for e in catalog for n in (*e.names, e.area or "") for w in tokenize(n)}
            self._name_words = (model, frozenset(words - FUNCTION_WORDS))
        return self._name_words[1]

    def _sounds_alike(self, grammar_words: list[str], heard: list[str]) -> bool:
        """Whisper's words sound like the grammar tier's sentence, with no word that says otherwise.

        (Whisper spells what it does not know: "todel nacrismas tree" is "toggle the christmas
        tree". But "turn off" sounds like "turn on": the words that decide what happens — on,
        off, open, lock, numbers — must be the same.)
        """
        if not heard or not grammar_words:
            return False
        mine = {w for w in heard if w in CONTRAST}
        if mine != {w for w in grammar_words if w in CONTRAST}:
            return False
        if set(words_to_digits(" ".join(heard)).split()) & _DIGITS != set(
                words_to_digits(" ".join(grammar_words)).split()) & _DIGITS:
            return False
        return self.phonetics.distance(grammar_words, heard) <= PHONETIC_AGREEMENT

    async def _transcript(self, text: str, tier: str, confidence: float, open_text: str = "",
                          grammar: GrammarHypothesis | None = None, *, overlapped: bool = False,
                          paused: bool = False) -> None:
        await self.push(TranscriptFrame(
            text=text, tier=tier, confidence=confidence, open_text=open_text or text,
            grammar_text=grammar.text if grammar is not None else None,
            grammar_confidence=grammar.confidence if grammar is not None else None, overlapped=overlapped,
            paused=paused))


def _polarity_unclear(heard: list[str]) -> bool:
    """Heard "and pause", "an lock" or "amute": the words may have been "unpause", "unlock", "unmute"."""
    if any(word in UN_STEMS and before in UN_SOUNDS for before, word in itertools.pairwise(heard)):
        return True
    return any(word.endswith(stem) and word[:-len(stem)] in UN_PREFIXES for word in heard for stem in UN_STEMS)
