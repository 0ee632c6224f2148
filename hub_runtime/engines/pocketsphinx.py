"""The grammar tier: pocketsphinx decoding over the home grammar's automaton (FSG).

Streaming: one 30 ms frame costs about a millisecond; the final hypothesis is ready
a few ms after the utterance closes. Confidence is the smallest word posterior.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pocketsphinx import Decoder, get_model_path

from ..audio.format import Int16Array
from ..grammar import HomeGrammar
from ..grammar.pronounce import build_dictionary

_LOGGER = logging.getLogger(__name__)

MODEL_DIR: Final = Path(get_model_path()) / "en-us"
FILLERS: Final = {"<s>", "</s>", "<sil>", "[NOISE]", "<unk>"}
ANSWERS_SEARCH: Final = "answers"  # the grammar with the answers to a question


@dataclass(frozen=True)
class GrammarHypothesis:
    """The grammar tier's result for one utterance."""

    words: tuple[str, ...]
    confidence: float  # smallest word posterior, 0 when nothing matched

    @property
    def text(self) -> str:
        """The words joined."""
        return " ".join(self.words)


class GrammarDecoder:
    """A pocketsphinx decoder bound to one grammar (build a new one for a new catalog)."""

    def __init__(self, grammar: HomeGrammar) -> None:
        """Write the FSG and a dictionary for its words, then load the decoder."""
        self.grammar = grammar
        self._dir = tempfile.TemporaryDirectory(prefix="duplex-hub-asr-")
        fsg = Path(self._dir.name) / "home.fsg"
        answers = Path(self._dir.name) / "answers.fsg"
        dic = Path(self._dir.name) / "home.dict"
        grammar.commands_dfa.write_fsg(fsg)
        grammar.dfa.write_fsg(answers, name="answers")
        self.generated = build_dictionary(grammar.vocabulary, MODEL_DIR / "cmudict-en-us.dict",
                                          dic)
        self._decoder = Decoder(
            hmm=str(MODEL_DIR / "en-us"), dict=str(dic), fsg=str(fsg), loglevel="FATAL",
            bestpath=True,
        )
        self._decoder.add_fsg(ANSWERS_SEARCH, self._decoder.read_fsg(str(answers)))
        self._open = False
        self._last_partial = ""

    def start(self, *, answering: bool = False) -> None:
        """Open an utterance; ``answering`` a question of the hub's: its answers are words too."""
        self._decoder.activate_search(ANSWERS_SEARCH if answering else None)
        self._decoder.start_utt()
        self._open = True
        self._last_partial = ""

    @property
    def is_open(self) -> bool:
        """Whether an utterance is being decoded."""
        return self._open

    def feed(self, frame: Int16Array) -> str | None:
        """Decode one frame; the partial text if it changed."""
        self._decoder.process_raw(frame.tobytes(), False, False)
        hyp = self._decoder.hyp()
        text = hyp.hypstr if hyp is not None else ""
        if text != self._last_partial:
            self._last_partial = text
            return text
        return None

    def end(self) -> GrammarHypothesis:
        """Close the utterance and return the final hypothesis (:meth:`stop`, then :meth:`final`)."""
        self.stop()
        return self.final()

    def stop(self) -> None:
        """Close the utterance (about a millisecond); :meth:`final` makes its final hypothesis."""
        self._open = False
        self._decoder.end_utt()

    def final(self) -> GrammarHypothesis:
        """The closed utterance's final hypothesis: the best path through its lattice.

        Slow on a big lattice (on the understanding bench's recordings 4 ms median, 100 ms
        at p95, up to 220): call it from a worker thread (pocketsphinx lets go of the GIL),
        and before the next :meth:`start`.
        """
        hyp = self._decoder.hyp()
        if hyp is None or not hyp.hypstr:
            return GrammarHypothesis((), 0.0)
        probs = [seg.prob for seg in self._decoder.seg() if seg.word not in FILLERS]
        words = tuple(hyp.hypstr.split())
        return GrammarHypothesis(words, min(probs) if probs else 0.0)

    def close(self) -> None:
        """Remove the temporary grammar files."""
        self._dir.cleanup()
