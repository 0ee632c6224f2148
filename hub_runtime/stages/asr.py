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

Consumes: SpeechStartedFrame, InputAudioFrame, EndOfTurnFrame (upstream).
Emits: PartialTranscriptFrame, TranscriptFrame.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Final

import numpy as np

from ..agent import Agent, HomeModel
from ..audio.format import Int16Array, samples_to_ms
from ..catalog import Catalog
from ..engines.base import Transcriber, WhisperResult
from ..engines.pocketsphinx import GrammarDecoder, GrammarHypothesis
from ..frames import (
    EndOfTurnFrame,
    Frame,
    InputAudioFrame,
    PartialTranscriptFrame,
    SpeechStartedFrame,
    TranscriptFrame,
    WakeWordFrame,
)
from ..grammar.automaton import sentence_distance, snap, tokenize
from ..pipeline import Direction, Stage
from ..settings import AsrSettings

_LOGGER = logging.getLogger(__name__)

PREROLL_MS: Final = 300  # audio kept from before speech_start
SNAP_MAX_RATIO: Final = 0.34  # weighted edits per content word for a snap to count
AGREEMENT_MARGIN: Final = 0.3  # edits by which Whisper may prefer its snap over the grammar tier
WHISPER_SURE: Final = 0.5  # mean token probability above which an unsnappable transcript is open speech
MIN_SPECULATE_MS: Final = 300  # shortest utterance worth a speculative pass
# Silence before a speculative pass: the VAD flag drops before a word's soft tail
# (a final "n" or "s"), and Whisper drops a word it hears cut off.
SPECULATE_AFTER_MS: Final = 60


PROMPT_VERBS: Final = {"cover": "Open the {}.", "sensor": "What is the {}?",
                       "climate": "Set the {} to 21 degrees.", "lock": "Lock the {}."}


def whisper_prompt(catalog: Catalog, *, max_words: int = 100) -> str:
    """Short commands naming each entity (aliases too) and each area, capped in length."""
    candidates = [PROMPT_VERBS.get(e.domain, "Turn on the {}.").format(name)
                  for e in catalog for name in e.names]
    areas = [f"Turn off the lights in the {area}." for area in catalog.areas]
    # interleave so a long catalog still shows both kinds of command
    mixed = [s for pair in zip(candidates, areas + [""] * len(candidates), strict=False)
             for s in pair if s]
    sentences: list[str] = []
    words = 0
    for sentence in mixed:
        words += len(sentence.split())
        if words > max_words:
            break
        sentences.append(sentence)
    return " ".join(sentences)


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
        self._preroll: deque[tuple[Int16Array, bool]] = deque(maxlen=max(1, PREROLL_MS // frame_ms))
        self._utterance: list[Int16Array] = []
        self._overlapped = False  # the utterance overlaps the hub's playback
        self._utt_samples = 0
        self._silent_ms = 0
        self._speculation: _Speculation | None = None
        self._whisper_lock = asyncio.Lock()

    async def start(self) -> None:
        """Build the decoder for the current grammar, then start the queues."""
        self._model = self.agent.model
        self._decoder = await asyncio.to_thread(GrammarDecoder, self._model.grammar)
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
        self._next_decoder, self._model = decoder, model
        if self._decoder is None or not self._decoder.is_open:
            self._swap()

    def _swap(self) -> None:
        if self._next_decoder is not None:
            if self._decoder is not None:
                self._decoder.close()
            self._decoder, self._next_decoder = self._next_decoder, None

    @property
    def prompt(self) -> str:
        """Whisper's initial prompt: commands that name the home's entities.

        Sentences, not a list: a list of names makes Whisper answer with a list
        ("Turn off the Office,") and drop the word after a name.
        """
        model = self._model or self.agent.model
        return whisper_prompt(model.catalog)

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Feed audio to the open utterance; finish it on end of turn."""
        if isinstance(frame, SpeechStartedFrame):
            self._open()
        elif isinstance(frame, InputAudioFrame):
            await self._audio(frame)
        elif isinstance(frame, WakeWordFrame):
            self._restart()
        elif isinstance(frame, EndOfTurnFrame):
            self._close(frame)
            return  # consumed here
        await self.push(frame, direction)

    def _open(self) -> None:
        assert self._decoder is not None
        if self._decoder.is_open:
            return
        self._decoder.start()
        self._utterance = []
        self._utt_samples = 0
        self._speculation = None
        self._overlapped = False
        for samples, played in self._preroll:
            self._decoder.feed(samples)
            self._add(samples)
            self._overlapped |= played
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
            return
        hyp = decoder.end()
        audio = self._audio_so_far()
        speculation, overlapped = self._speculation, self._overlapped
        self._speculation, self._utterance, self._utt_samples = None, [], 0
        self._silent_ms, self._overlapped = 0, False
        self._swap()
        if eot.discard:
            return
        self.spawn(self._finish(hyp, audio, speculation, overlapped=overlapped), "finish", interruptible=False)

    async def _finish(self, hyp: GrammarHypothesis, audio: np.ndarray,
                      speculation: _Speculation | None, *, overlapped: bool = False) -> None:
        grammar = self.agent.model.grammar
        complete = grammar.is_complete(list(hyp.words))
        trusted = complete and hyp.confidence >= self.settings.confidence and not overlapped
        if self.whisper is None or trusted:
            if hyp.words:
                await self._transcript(hyp.text, "grammar", hyp.confidence, grammar=hyp)
            else:
                await self._transcript("", "open", 0.0)
            return
        if speculation is not None:
            result = await speculation.task
            _LOGGER.debug("speculation on %d of %d ms", samples_to_ms(speculation.samples),
                          samples_to_ms(len(audio)))
        else:
            result = await self._run_whisper(audio, self.prompt)
        heard = tokenize(result.text)
        snapped = snap(grammar.dfa, heard) if heard else None
        if (snapped is not None and complete and snapped.words != hyp.words
                and sentence_distance(hyp.words, heard) <= snapped.cost + AGREEMENT_MARGIN):
            # both tiers support the grammar tier's sentence about as well: two models agree
            await self._transcript(hyp.text, "grammar", hyp.confidence, open_text=result.text,
                                   grammar=hyp)
        elif snapped is not None and snapped.ratio <= SNAP_MAX_RATIO:
            await self._transcript(" ".join(snapped.words), "snapped",
                                   max(0.0, 1.0 - snapped.ratio), open_text=result.text, grammar=hyp)
        elif complete and np.exp(result.logprob) < WHISPER_SURE:
            # Whisper is unsure and heard nothing of the grammar: the grammar tier's words
            await self._transcript(hyp.text, "grammar", hyp.confidence, open_text=result.text,
                                   grammar=hyp)
        else:
            await self._transcript(result.text, "open", float(np.exp(result.logprob)),
                                   open_text=result.text, grammar=hyp)

    async def _transcript(self, text: str, tier: str, confidence: float,
                          open_text: str = "", grammar: GrammarHypothesis | None = None) -> None:
        await self.push(TranscriptFrame(
            text=text, tier=tier, confidence=confidence, open_text=open_text or text,
            grammar_text=grammar.text if grammar is not None else None,
            grammar_confidence=grammar.confidence if grammar is not None else None))
