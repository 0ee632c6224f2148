"""The home grammar as Whisper writes it: the word automaton expanded into tokens.

Whisper does not write "turn on the kitchen light" but " Turn on the kitchen light." and
"fifty percent" as " 50%". :class:`TokenGrammar` walks the word DFA and offers, at each
point, the tokens of every way Whisper may write the next word: lower case, capitalised,
upper case for short words ("TV"), digits for a spelled number ("twenty two" → " 22",
" twenty-two"), "%" for "percent" and "°" for "degrees", a comma after a word, and at the
end of a sentence a full stop, question or exclamation mark and the end of text.

A position is a set of :class:`Point` (several ways of writing may share tokens); the
words behind a finished path are the DFA's own words, so the result is a sentence of the
grammar exactly as the recogniser's other tier would write it. A wildcard of the templates
(a list item, a message, a timer's name, a search) is the DFA word ``*``: there any text
token may come, up to :data:`MAX_WILDCARD_TOKENS`, and its words are Whisper's own. A
sentence never starts with free text ("{timer_name} timer status"): any speech would fit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from .automaton import NUMBER_WORDS, WILDCARD, Dfa, number_words, tokenize

MAX_NUMBER_WORDS: Final = 4  # "one hundred twenty five"
SENTENCE_ENDS: Final = (".", "?", "!")
_SYMBOLS: Final = {"percent": ("%",), "degrees": ("°",), "degree": ("°",)}  # written glued to the number before


@dataclass(frozen=True)
class Point:
    """Where a token path is: inside a word (``node`` of the trie of ``state``), after a comma, after the end mark."""

    kind: str  # begin | word | comma | wild | end | closing
    state: int = 0
    node: int = 0


END: Final = Point("end")
MAX_WILDCARD_TOKENS: Final = 10
_WILD_MARK: Final = "\x00"  # a wildcard token among a path's words, until the sentence is written


@dataclass(frozen=True)
class Allowed:
    """The tokens that may come next, and whether any text may (inside or at the start of a wildcard)."""

    tokens: frozenset[int]
    any_text: bool
TokenPath = tuple[tuple[Point, tuple[str, ...]], ...]  # the points a token path may be at, with the words it finished


class TokenGrammar:
    """The token-level view of a word DFA for one tokenizer (built lazily, state by state)."""

    def __init__(self, dfa: Dfa, encode: Callable[[str], list[int]], decode: Callable[[list[int]], str], *,
                 end_of_text: int, timestamp: int | None = None) -> None:
        """``encode`` turns written text into token ids (no special tokens), ``decode`` back.

        With ``timestamp`` (a token id that stands for every timestamp: the search picks
        which), a sentence is written between two, as Whisper writes a segment: "<|0.00|>
        Turn on the light.<|1.20|>". Anchored to where the speech starts and ends, Whisper
        no longer drops a word it is unsure of at either end ("[toggle] the kitchen light",
        "pause [the music in the hallway]").
        """
        self.dfa = dfa
        self.timestamp = timestamp
        self._encode = encode
        self._decode = decode
        self.end_of_text = end_of_text
        # the tries of written forms that leave each DFA state, node by node: a node's next
        # tokens (token -> node), and the words that end at it (words, DFA state after them,
        # whether its last token also ended the sentence: "%." is one token). Plain dicts of
        # ints and tuples: a grammar's ~140,000 nodes as objects made each full garbage
        # collection of the process take ~300 ms, in the middle of a turn
        self._next: list[dict[int, int]] = []
        self._ends: dict[int, tuple[tuple[tuple[str, ...], int, bool], ...]] = {}
        self._building = threading.Lock()  # tries are built under it, and published whole
        self._roots: dict[int, int] = {}
        self._end_marks = {self._single(mark): mark for mark in SENTENCE_ENDS}
        self._comma = self._single(",")
        self._token_cache: dict[str, list[int]] = {}
        self._allowed: dict[frozenset[Point], Allowed] = {}

    @property
    def end_marks(self) -> tuple[int, ...]:
        """The tokens a sentence may end with (".", "?", "!")."""
        return tuple(self._end_marks)

    def _single(self, text: str) -> int:
        ids = self._encode(text)
        if len(ids) != 1:
            raise ValueError(f"{text!r} is {len(ids)} tokens, expected one")
        return ids[0]

    # -- the trie of one DFA state ------------------------------------------------------
    def _root(self, state: int) -> int:
        root = self._roots.get(state)
        if root is None:
            # a pass's search and its check of Whisper's own words walk the grammar from two threads
            with self._building:
                root = self._roots.get(state)
                if root is None:
                    root = self._roots[state] = self._build_root(state)  # published whole
        return root

    def _build_root(self, state: int) -> int:
        """The trie of the words that may follow ``state``, as Whisper writes them."""
        root = self._new_node()
        for words, dst, written in self._spellings(state):
            for text in written:
                tokens = self._tokens(text)
                self._add_path(root, tokens, (words, dst, False))
                if dst in self.dfa.accepting:
                    for mark in SENTENCE_ENDS:  # merged with the mark that ends the sentence
                        merged = self._tokens(text + mark)
                        if merged != [*tokens, *self._tokens(mark)]:
                            self._add_path(root, merged, (words, dst, True))
        return root

    def _add_path(self, root: int, tokens: list[int], end: tuple[tuple[str, ...], int, bool]) -> None:
        node = root
        for token in tokens:
            child = self._next[node].get(token)
            if child is None:
                child = self._next[node][token] = self._new_node()
            node = child
        ends = self._ends.get(node, ())
        if end not in ends:
            self._ends[node] = (*ends, end)

    def _tokens(self, text: str) -> list[int]:
        tokens = self._token_cache.get(text)
        if tokens is None:
            tokens = self._token_cache[text] = self._encode(text)
        return tokens

    def _new_node(self) -> int:
        self._next.append({})
        return len(self._next) - 1

    def _spellings(self, state: int) -> Iterable[tuple[tuple[str, ...], int, list[str]]]:
        """Every word (or spelled number) leaving ``state``, where it leads, and how it may be written."""
        for word, dst in self.dfa.trans[state].items():
            if word != WILDCARD:
                yield (word,), dst, self._word_forms(word, first=state == 0)
        for words, dst, value in self._numbers(state):
            written = [f" {value}"]
            if len(words) == 2 and words[0] not in ("hundred", "thousand") and words[1] != "hundred":
                written.append(f" {words[0]}-{words[1]}")
            yield words, dst, written

    @staticmethod
    def _word_forms(word: str, *, first: bool = False) -> list[str]:
        """How Whisper may write a word: capitalised first in a sentence, else either way (names)."""
        written = {f" {word[:1].upper()}{word[1:]}"} if first else {f" {word}", f" {word[:1].upper()}{word[1:]}"}
        if len(word) <= 3 and word.isalpha():
            written.add(f" {word.upper()}")
        written.update(_SYMBOLS.get(word, ()))
        return sorted(written)

    def _numbers(self, state: int) -> Iterable[tuple[tuple[str, ...], int, int]]:
        """Runs of number words from ``state`` that spell one number, with the state after them and the value."""
        stack: list[tuple[tuple[str, ...], int]] = [((), state)]
        while stack:
            words, at = stack.pop()
            if len(words) == MAX_NUMBER_WORDS:
                continue
            for word, dst in self.dfa.trans[at].items():
                if word not in NUMBER_WORDS:
                    continue
                run = (*words, word)
                stack.append((run, dst))
                value = _spelled_value(run)
                if value is not None:
                    yield run, dst, value

    def warm(self) -> None:
        """Build every state's trie now (~250 ms for a home of 1,300 states), not in the first searches.

        Built lazily, they cost the first searches after a start or a new grammar ~50 ms each.
        """
        for state in range(len(self.dfa.trans)):
            self._root(state)

    # -- walking ------------------------------------------------------------------------
    def start(self) -> TokenPath:
        """Where every token path starts."""
        if self.timestamp is not None:
            return ((Point("begin"), ()),)
        return ((Point("comma", 0), ()),)  # after a comma: exactly the words that may start

    def _finish(self, tokens: set[int]) -> None:
        """The sentence may end here: the end of text, or the timestamp before it."""
        tokens.add(self.timestamp if self.timestamp is not None else self.end_of_text)

    def allowed(self, path: TokenPath) -> Allowed:
        """What may come next: these tokens (the end of text among them when the sentence may end), or any text."""
        points = frozenset(point for point, _words in path)
        cached = self._allowed.get(points)
        if cached is None:
            tokens: set[int] = set()
            any_text = False

            def starts(state: int) -> None:
                nonlocal any_text
                tokens.update(self._next[self._root(state)])
                any_text |= state != 0 and WILDCARD in self.dfa.trans[state]

            def boundary(state: int) -> None:
                starts(state)
                tokens.add(self._comma)
                if state in self.dfa.accepting:
                    tokens.update(self._end_marks)
                    self._finish(tokens)

            for point in points:
                if point.kind == "begin" and self.timestamp is not None:
                    tokens.add(self.timestamp)
                elif point.kind == "closing":
                    tokens.add(self.end_of_text)
                elif point.kind == "end":
                    self._finish(tokens)
                elif point.kind == "comma":
                    starts(point.state)
                elif point.kind == "wild":
                    any_text |= point.node < MAX_WILDCARD_TOKENS
                    boundary(point.state)
                else:
                    tokens.update(self._next[point.node])
                    for _words, dst, closed in self._ends.get(point.node, ()):
                        if closed:
                            self._finish(tokens)
                        else:
                            boundary(dst)
            cached = self._allowed[points] = Allowed(frozenset(tokens), any_text)
        return cached

    def in_wildcard(self, path: TokenPath) -> bool:
        """Whether the path's last token was free text (every way of reading it)."""
        return bool(path) and all(words and words[-1].startswith(_WILD_MARK) for _point, words in path)

    def is_text(self, token: int) -> bool:
        """Whether a token may be part of a wildcard (free words: a list item, a message, a timer's name)."""
        return token < self.end_of_text and token not in self._end_marks

    def advance(self, path: TokenPath, token: int) -> TokenPath:
        """The path after one more token (empty if the token is not allowed)."""
        out: list[tuple[Point, tuple[str, ...]]] = []
        stamp = token == self.timestamp
        for point, words in path:
            if point.kind == "begin":
                if stamp:
                    out.append((Point("comma", 0), words))
                continue
            if stamp:  # the timestamp after the sentence
                ended = self._ended(point, words)
                if ended is not None:
                    out.append((Point("closing"), ended))
                continue
            if point.kind in ("end", "closing"):
                continue
            if point.kind == "comma":
                self._starts(point.state, words, token, out)
            elif point.kind == "wild":
                if point.node < MAX_WILDCARD_TOKENS and self.is_text(token):
                    out.append((Point("wild", point.state, point.node + 1), (*words, _WILD_MARK + str(token))))
                self._boundary(point.state, words, token, out)
            else:
                child = self._next[point.node].get(token)
                if child is not None:
                    out.append((Point("word", point.state, child), words))
                for finished, dst, closed in self._ends.get(point.node, ()):
                    if not closed:
                        self._boundary(dst, words + finished, token, out)
        return tuple(dict.fromkeys(out))

    def _starts(self, state: int, words: tuple[str, ...], token: int, out: list[tuple[Point, tuple[str, ...]]]) -> None:
        child = self._next[self._root(state)].get(token)
        if child is not None:
            out.append((Point("word", state, child), words))
        after = self.dfa.trans[state].get(WILDCARD) if state != 0 else None
        if after is not None and self.is_text(token):
            out.append((Point("wild", after, 1), (*words, _WILD_MARK + str(token))))

    def _boundary(self, state: int, words: tuple[str, ...], token: int,
                  out: list[tuple[Point, tuple[str, ...]]]) -> None:
        self._starts(state, words, token, out)
        if token == self._comma:
            out.append((Point("comma", state), words))
        if token in self._end_marks and state in self.dfa.accepting:
            out.append((END, words))

    def sentence(self, path: TokenPath) -> tuple[str, ...] | None:
        """The words of a path that may end here (None if it may not); a wildcard's words as Whisper wrote them."""
        for point, words in path:
            if point.kind == "closing":
                return self._written(words)
            ended = self._ended(point, words) if self.timestamp is None else None
            if ended is not None:
                return self._written(ended)
        return None

    def _ended(self, point: Point, words: tuple[str, ...]) -> tuple[str, ...] | None:
        """The words, if the sentence may end at this point."""
        if point.kind == "end" or (point.kind == "wild" and point.state in self.dfa.accepting):
            return words
        if point.kind == "word":
            for finished, dst, _closed in self._ends.get(point.node, ()):
                if dst in self.dfa.accepting:
                    return words + finished
        return None

    def _written(self, words: tuple[str, ...]) -> tuple[str, ...]:
        out: list[str] = []
        run: list[int] = []
        for word in (*words, ""):
            if word.startswith(_WILD_MARK):
                run.append(int(word[1:]))
                continue
            if run:
                out.extend(tokenize(self._decode(run)))
                run = []
            if word:
                out.append(word)
        return tuple(out)


_VALUES: Final = {number_words(n): n for n in range(0, 1000)}


def _spelled_value(words: tuple[str, ...]) -> int | None:
    """The number these words spell the way :func:`number_words` does, else None."""
    return _VALUES.get(" ".join(words))


def write(words: tuple[str, ...], *, symbols: bool = True) -> str:
    """The likeliest way Whisper writes a sentence: capitalised, numbers in digits, "percent" as "%".

    ("set the fan to fifty five percent" → " Set the fan to 55%"; no end mark.) ``symbols``
    False: "percent" and "degrees" are written as words (" 22 degrees").
    """
    out: list[str] = []
    i = 0
    while i < len(words):
        for n in range(min(MAX_NUMBER_WORDS, len(words) - i), 0, -1):
            value = _spelled_value(words[i:i + n])
            if value is not None:
                out.append(str(value))
                i += n
                break
        else:
            word = words[i]
            if symbols and word in _SYMBOLS and out and out[-1].isdigit():
                out[-1] += _SYMBOLS[word][0]
            else:
                out.append(word)
            i += 1
    text = " ".join(out)
    return " " + text[:1].upper() + text[1:]
