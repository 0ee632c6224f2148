"""Whisper within the home grammar: the numpy decoder, the grammar as tokens, and real speech in."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from hub_runtime.agent import Agent
from hub_runtime.audio.format import RATE
from hub_runtime.audio.synthetic import pink_noise, speak
from hub_runtime.engines.whisper import WhisperTranscriber, drop_repeats, length_fit
from hub_runtime.grammar.automaton import Dfa, tokenize
from hub_runtime.grammar.tokens import write
from hub_runtime.settings import Settings
from hub_runtime.stages.asr import MAX_FORCED


@pytest.fixture(scope="module")
def whisper() -> Iterator[WhisperTranscriber]:
    yield WhisperTranscriber(threads=2)


@pytest.fixture(scope="module")
def agent() -> Agent:
    return Agent.from_settings(Settings())


def _chain(text: str) -> Dfa:
    """An automaton of exactly one sentence."""
    words = text.split()
    return Dfa([{w: i + 1} for i, w in enumerate(words)] + [{}], {len(words)})


def _audio(text: str, voice: str = "piper") -> np.ndarray:
    utt = speak(text, voice)
    return np.concatenate([np.zeros(RATE // 5), utt, np.zeros(RATE // 5)]).astype(np.float32) / 32768.0


def test_the_numpy_decoder_scores_tokens_as_ctranslate2_does(whisper: WhisperTranscriber) -> None:
    import ctranslate2

    audio = _audio("turn off the kitchen light")
    window = 3
    padded = np.zeros(window * RATE, np.float32)
    padded[: len(audio)] = audio
    feats = whisper._features(padded, chunk_length=window)[:, : window * 100]
    model = whisper._model.model
    encoded = model.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(feats[None])))
    prefix = [whisper._sot, whisper._notimestamps]
    ids = whisper._tok.encode(" Turn off the kitchen light.", add_special_tokens=False).ids
    theirs = model.align(encoded, prefix, [ids], [window * 100])[0].text_token_probs
    decoder = whisper._decoder
    hidden, _ = decoder.forward(np.array([prefix + ids[:-1]]), None, decoder.encode(np.asarray(encoded)[0]))
    full = decoder.full_log_probs(hidden[0, len(prefix) - 1:])
    mine = np.exp(full[np.arange(len(ids)), ids])
    # the same model (float32 here, int8 there): every token within a few points, the last aside
    assert np.max(np.abs(mine[:-1] - np.array(theirs[:-1]))) < 0.1
    assert np.all(mine[:-1] > 0.2)


def test_the_grammar_as_tokens_reads_what_whisper_writes(whisper: WhisperTranscriber) -> None:
    from hub_runtime.grammar.tokens import TokenGrammar

    tok = whisper._tok

    def grammar_of(dfa: Dfa, timestamp: int | None = None) -> TokenGrammar:
        return TokenGrammar(dfa, lambda t: list(tok.encode(t, add_special_tokens=False).ids),
                            lambda ids: str(tok.decode(ids)), end_of_text=whisper._eot, timestamp=timestamp)

    grammar = grammar_of(_chain("set the light to fifty five percent"))

    def words(text: str) -> tuple[str, ...] | None:
        path = grammar.start()
        for token in tok.encode(text, add_special_tokens=False).ids:
            if token not in grammar.allowed(path).tokens:
                return None
            path = grammar.advance(path, token)
        return grammar.sentence(path)

    want = ("set", "the", "light", "to", "fifty", "five", "percent")
    assert words(" Set the light to 55%.") == want
    assert words(" Set the Light to fifty-five percent") == want
    assert words(" set the light to 55%.") is None  # Whisper starts a sentence with a capital
    assert words(" Set the light to 55") is None  # not a whole sentence
    assert words(" Set the lamp to 55%.") is None
    wild = grammar_of(Dfa([{"add": 1}, {"*": 2}, {"to": 3}, {"my": 4}, {"list": 5}, {}], {5}))
    path = wild.start()
    for token in tok.encode(" Add milk and eggs to my list.", add_special_tokens=False).ids:
        assert token in wild.allowed(path).tokens or wild.allowed(path).any_text
        path = wild.advance(path, token)
    assert wild.sentence(path) == ("add", "milk", "and", "eggs", "to", "my", "list")
    # a segment between timestamps: one before the first word, one after the last, then the end
    stamp = whisper._timestamp_begin
    timed = grammar_of(_chain("turn on the light"), timestamp=stamp)
    path = timed.start()
    assert timed.allowed(path).tokens == {stamp}
    path = timed.advance(path, stamp)
    for token in tok.encode(" Turn on the light.", add_special_tokens=False).ids:
        assert whisper._eot not in timed.allowed(path).tokens
        path = timed.advance(path, token)
    assert timed.allowed(path).tokens == {stamp}
    path = timed.advance(path, stamp)
    assert timed.allowed(path).tokens == {whisper._eot}
    assert timed.sentence(path) == ("turn", "on", "the", "light")
    # made ready at once, the same grammar: every path reads the same, and walking builds nothing more
    ready = grammar_of(_chain("set the light to fifty five percent"))
    ready.warm()
    built = len(ready._next)
    grammar = ready
    assert words(" Set the light to 55%.") == want
    assert words(" Set the lamp to 55%.") is None
    assert len(ready._next) == built


@pytest.mark.parametrize(("text", "voice", "noise"), [
    ("turn off the kitchen light", "piper", 0.0),
    ("is the garage door open", "en-us", 0.0),
    ("set the bedroom blinds to fifty percent", "piper", 0.0),
    ("close the garage door", "en-gb", 300.0),
    ("add milk to my shopping list", "piper", 0.0),
])
def test_whisper_hears_the_sentence_of_the_grammar(whisper: WhisperTranscriber, agent: Agent, text: str,
                                                   voice: str, noise: float) -> None:
    audio = _audio(text, voice)
    if noise:
        audio = audio + pink_noise(len(audio), noise).astype(np.float32) / 32768.0
    speech_s = len(speak(text, voice)) / RATE
    result = whisper.transcribe(audio, grammar=agent.model.grammar.spoken_dfa(), speech_s=speech_s)
    assert result.sentences, result
    top = result.sentences[0]
    assert top.words == tuple(tokenize(text)), result
    assert top.forced <= MAX_FORCED


def test_a_cancelled_pass_stops_its_search(whisper: WhisperTranscriber, agent: Agent) -> None:
    import threading

    audio, grammar = _audio("turn off the kitchen light"), agent.model.grammar.spoken_dfa()
    cancel = threading.Event()
    assert whisper.transcribe(audio, grammar=grammar, speech_s=1.2, cancel=cancel).sentences  # not set: searched
    cancel.set()
    result = whisper.transcribe(audio, grammar=grammar, speech_s=1.2, cancel=cancel)
    assert (result.text, result.sentences) == ("", ())


@pytest.mark.parametrize("text", ["what is the capital of france", "the dog needs a walk in the park"])
def test_speech_outside_the_grammar_costs_it_much(whisper: WhisperTranscriber, agent: Agent, text: str) -> None:
    audio = _audio(text)
    result = whisper.transcribe(audio, grammar=agent.model.grammar.spoken_dfa(),
                                speech_s=len(speak(text)) / RATE)
    assert not result.sentences or result.sentences[0].forced > MAX_FORCED, result


def test_a_sentence_too_short_for_the_speech_is_unlikely() -> None:
    assert length_fit(("mute",), 2.5) < -5.0  # "mute" does not last 2.5 s: words were left out
    assert length_fit(tuple("mute the music in the hallway".split()), 1.6) > -0.5
    assert length_fit(("stop",), 0.3) > -1.0
    assert length_fit(("stop",), 0.0) == 0.0  # no measure of the speech: no opinion


@pytest.mark.parametrize(("heard", "kept"), [
    ("Turn on the light. Turn on the light.", "Turn on the light."),
    ("Turn on the light. Turn on the", "Turn on the light."),
    # a repeat heard a little differently is a repeat
    ("TV Turn the volume down to 28. Tbe Turn the volume down to 28.", "TV Turn the volume down to 28."),
    ("Pause laundry timer. Post laundry timer.", "Pause laundry timer."),
    # other sentences stay (Whisper heard more than a command: the decision sees it)
    ("Start my Roomba. Rock my work carriage.", "Start my Roomba. Rock my work carriage."),
    ("Yes. No.", "Yes. No."),
])
def test_whisper_repeating_itself_is_cut(heard: str, kept: str) -> None:
    assert drop_repeats(heard) == kept


def test_sentences_are_written_as_whisper_writes_them() -> None:
    assert write(tuple("set the fan to fifty five percent".split())) == " Set the fan to 55%"
    assert write(tuple("add seventy one minutes to the tea timer".split())) == " Add 71 minutes to the tea timer"
    assert write(("what", "time", "is", "it")) == " What time is it"


@pytest.mark.parametrize(("text", "also", "agreed", "top", "voice"), [
    # Whisper's own choice, token by token: taken at once, without a search
    ("what time is it", "what time is it", True, "what time is it", "piper"),
    # ... also when a reading that is no sentence of the grammar was nearly as likely ("leaving room")
    ("turn off the living room lamp", "turn off the living room lamp", True, "turn off the living room lamp",
     "en-us"),
    # another polarity than was said: searched, and the search hears what was said
    ("turn off the office fan", "turn on the office fan", False, "turn off the office fan", "piper"),
    # less than was said (the speech goes on after "lights"): searched
    ("turn off the lights in the kitchen", "turn off the lights", False, "turn off the lights in the kitchen",
     "piper"),
])
def test_another_recognisers_sentence_is_taken_at_once_only_when_whisper_would_write_it(
        whisper: WhisperTranscriber, agent: Agent, text: str, also: str, agreed: bool, top: str, voice: str) -> None:
    grammar = agent.model.grammar.spoken_dfa()
    assert grammar.accepts(also.split())
    result = whisper.transcribe(_audio(text, voice), grammar=grammar, speech_s=len(speak(text, voice)) / RATE,
                                also=tuple(also.split()))
    assert (result.agreed and result.sentences[0].words == tuple(also.split())) is agreed, result
    assert result.sentences[0].words == tuple(top.split()), result


@pytest.mark.parametrize(("text", "also", "voice"), [
    ("open the bedroom blinds", "close the bedroom blinds", "piper"),  # the opposite action, far behind
    ("turn on the office fan", "what time is it", "en-gb"),  # another sentence altogether
    ("turn off the lights in the kitchen", "turn off the lights", "piper"),  # less than was said
])
def test_a_sentence_scored_on_a_pass_s_encoding_later_is_scored_as_the_pass_would_have(
        whisper: WhisperTranscriber, agent: Agent, text: str, also: str, voice: str) -> None:
    """Pocketsphinx's words made out after the pass began: the pass's result as if it had been given them.

    Its one writing stands in for a search of its writings (as the pass does for a sentence
    far behind): the same ranking, scores within a few tenths of a nat.
    """
    grammar, words = agent.model.grammar.spoken_dfa(), tuple(also.split())
    audio, speech_s = _audio(text, voice), len(speak(text, voice)) / RATE
    plain = whisper.transcribe(audio, "Turn on the light.", grammar=grammar, speech_s=speech_s)
    assert all(h.words != words for h in plain.sentences)
    given = whisper.transcribe(audio, "Turn on the light.", grammar=grammar, speech_s=speech_s, also=words)
    later = whisper.score_also(plain, words)
    assert [h.words for h in later.sentences] == [h.words for h in given.sentences] and later.text == plain.text
    for scored, searched in zip(later.sentences, given.sentences, strict=True):
        assert scored.score == pytest.approx(searched.score, abs=0.3)
        assert scored.forced == pytest.approx(searched.forced, abs=0.3)
    assert whisper.score_also(later, words) is later  # scored once


@pytest.mark.parametrize(("text", "voice", "agreed"), [
    # Whisper's own words are a sentence of the grammar, its choice token by token: taken, the search stopped
    ("turn off the office fan", "piper", True),
    ("close the garage door", "en-gb", True),
    # its own words ("Open the bedroom blind.") are a sentence, but not by a margin over "blinds": searched
    ("open the bedroom blinds", "piper", False),
])
def test_whisper_s_own_words_are_taken_at_once_when_they_are_a_sentence_it_agrees_with(
        whisper: WhisperTranscriber, agent: Agent, text: str, voice: str, agreed: bool) -> None:
    result = whisper.transcribe(_audio(text, voice), "Turn on the light.", grammar=agent.model.grammar.spoken_dfa(),
                                speech_s=len(speak(text, voice)) / RATE)
    assert result.agreed is agreed, result
    assert result.sentences[0].words == tuple(text.split()), result
    if agreed:
        assert len(result.sentences) == 1 and result.text == write(tuple(text.split())).strip() + "."


@pytest.mark.parametrize(("text", "voice"), [
    ("where does my data go to", "en-us"),  # written with "?" at its end
    ("turn on the office fan", "en-gb"),  # with "."
    ("set the temperature to twenty two degrees", "en-us"),  # Whisper writes "22 degrees" here, not "22°"
])
def test_a_sentence_scored_in_one_pass_ranks_as_the_search_would_rank_it(
        whisper: WhisperTranscriber, text: str, voice: str) -> None:
    """Another recogniser's sentence the search did not find is scored in one pass, as the search scores one.

    The same log-probability (its end included: a mark, a timestamp, the end of text) and
    the same cost against Whisper's likeliest tokens as the search's best way of writing it,
    in a fraction of a search's time.
    """
    from hub_runtime.engines.whisper_decoder import constrained_search

    audio = speak(text, voice).astype(np.float32) / 32768.0
    speech_s = len(audio) / RATE
    window = 3
    _features, encoded = whisper._encode(audio, window)
    stamps = range(whisper._timestamp_begin, whisper._timestamp_begin + window * 50 + 1)
    grammar = whisper.token_grammar(_chain(text))
    searched = constrained_search(whisper._decoder, encoded, grammar, whisper._segment_prefix, timestamps=stamps,
                                  fit=lambda words: length_fit(words, speech_s), slack=2.2)[0]
    words = tuple(text.split())
    scored = whisper._score(words, encoded, stamps, speech_s, grammar)
    heard, hope = whisper._as_sentence(words, scored, encoded, stamps, speech_s, grammar)
    assert heard.words == searched.words
    assert heard.score == pytest.approx(searched.score, abs=0.3), (heard, searched)
    assert heard.forced == pytest.approx(searched.forced, abs=0.3), (heard, searched)
    assert hope >= heard.score


def test_a_misheard_sentence_of_the_other_recogniser_far_behind_is_not_searched_for(
        whisper: WhisperTranscriber, agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pocketsphinx's sentence, far behind what Whisper heard, keeps its one-pass score: no search of its writings."""
    searches: list[bool] = []
    within = whisper._within

    def counted(*args: object, cache: bool = True, **kwargs: object) -> object:
        searches.append(cache)
        return within(*args, cache=cache, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(whisper, "_within", counted)
    text, misheard = "turn on the office fan", ("what", "time", "is", "it")
    result = whisper.transcribe(_audio(text, "en-gb"), "Turn on the light.", grammar=agent.model.grammar.spoken_dfa(),
                                speech_s=len(speak(text, "en-gb")) / RATE, also=misheard)
    assert result.sentences[0].words == tuple(text.split()), result
    behind = next(h for h in result.sentences if h.words == misheard)
    assert behind.score < result.sentences[0].score - 10
    assert searches == [True], searches  # the search within the grammar, and no other


def test_the_search_goes_on_for_the_runners_up_within_its_slack(whisper: WhisperTranscriber, agent: Agent) -> None:
    """Stopping at the best sentence misses a rival a hair behind it: the slack finds those within it."""
    from hub_runtime.engines.whisper_decoder import constrained_search

    text = "could you turn on the bedroom light"
    audio, speech_s = _audio(text), len(speak(text, "piper")) / RATE
    window = 3
    _features, encoded = whisper._encode(audio, window)
    stamps = range(whisper._timestamp_begin, whisper._timestamp_begin + window * 50 + 1)
    grammar = whisper.token_grammar(agent.model.grammar.spoken_dfa())

    def search(slack: float) -> list[tuple[tuple[str, ...], float]]:
        found = constrained_search(whisper._decoder, encoded, grammar, whisper._segment_prefix, timestamps=stamps,
                                   fit=lambda words: length_fit(words, speech_s),
                                   bound=lambda words: length_fit(words, speech_s, longer_only=True), slack=slack)
        return [(h.words, h.score) for h in found]

    tight, wide = search(0.0), search(4.0)
    assert tight[0][0] == wide[0][0] and {w for w, _s in tight} <= {w for w, _s in wide}
    more = [(words, score) for words, score in wide if words not in {w for w, _s in tight}]
    assert any(score >= wide[0][1] - 4.0 for _words, score in more), (tight, wide)


def test_rival_sentences_are_scored_against_the_best_whatever_the_search_found(
        whisper: WhisperTranscriber, agent: Agent) -> None:
    """The opposite one syllable away ("unmute" for "mute") gets a score, behind the sentence said."""
    from hub_runtime.stages.asr import _un_sentences

    dfa = agent.model.grammar.spoken_dfa()
    asked: list[tuple[str, ...]] = []

    def rivals(best: tuple[str, ...]) -> list[tuple[str, ...]]:
        asked.append(best)
        return [*_un_sentences(best), ("no", "such", "sentence")]

    text = "mute the music"
    result = whisper.transcribe(_audio(text), "Turn on the light.", grammar=dfa,
                                speech_s=len(speak(text, "piper")) / RATE, rivals=rivals)
    scored = {h.words: h.score for h in result.sentences}
    said, opposite = tuple(text.split()), ("unmute", *text.split()[1:])
    assert asked == [said] and result.sentences[0].words == said, result
    assert scored[opposite] < scored[said] - 1.0, result
    assert ("no", "such", "sentence") not in scored  # not a sentence of the grammar: not scored
    assert [h.score for h in result.sentences] == sorted(scored.values(), reverse=True)


def test_a_grammar_is_prepared_without_holding_up_passes(whisper: WhisperTranscriber,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Another room's pass runs while a new home's grammar is built (~250 ms per automaton)."""
    import threading

    from hub_runtime.grammar.tokens import TokenGrammar

    building, release = threading.Event(), threading.Event()
    warm = TokenGrammar.warm

    def slow_warm(self: TokenGrammar) -> None:
        building.set()
        release.wait(10)
        warm(self)

    monkeypatch.setattr(TokenGrammar, "warm", slow_warm)
    dfa = _chain("turn on the porch light")
    builder = threading.Thread(target=whisper.prepare, args=(dfa,))
    builder.start()
    try:
        assert building.wait(10)
        free = whisper._lock.acquire(timeout=5)  # what a pass takes first
        if free:
            whisper._lock.release()
    finally:
        release.set()
        builder.join()
    assert free
    assert whisper.token_grammar(dfa)._roots  # built, and kept for the passes
