"""Word automata: hassil templates compiled to a minimal DFA over words.

The DFA is what the grammar tier of the recogniser decodes with (written as a
pocketsphinx FSG file), what the turn stage asks "is this already a complete
command?", and what Whisper decodes within (``tokens.py``: the same words as tokens,
wildcards kept as the word ``*``).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import hassil

EPS: Final = ""
WILDCARD: Final = "*"  # the word for free text (a template's wildcard) in automata that keep them
STRING_SET_CAP: Final = 512  # largest local expansion of pure-text alternatives
_WORD_RE: Final = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")
_HALF_RE: Final = re.compile(r"(?<![\d/])1/2(?![\d/])")


_ONES: Final = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS: Final = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
# the words :func:`number_words` spells with (and the NLU reads back as digits)
NUMBER_WORDS: Final = frozenset((*_ONES, *(t for t in _TENS if t != "_"), "hundred", "thousand"))
# ... those more number words may follow: "thirty" may be the start of "thirty four"
OPEN_NUMBER_WORDS: Final = frozenset((*(t for t in _TENS if t != "_"), "hundred", "thousand"))


def number_words(n: int) -> str:
    """Spell a whole number from 0 to 9999 the way people say it."""
    if n < 0:
        return "minus " + number_words(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return _ONES[hundreds] + " hundred" + ("" if rest == 0 else " " + number_words(rest))
    thousands, rest = divmod(n, 1000)
    return number_words(thousands) + " thousand" + ("" if rest == 0 else " " + number_words(rest))


def tokenize(text: str) -> list[str]:
    """Split text into the recogniser's words: lower case, digits and symbols spelled out."""
    text = text.lower().replace("’", "'")
    text = text.replace("%", " percent ").replace("°", " degrees ").replace("-", " ")
    text = _HALF_RE.sub(" one half ", text)  # Home Assistant's timers take "1/2" ("3 and 1/2 minutes")
    text = re.sub(r"\d+", lambda m: " " + number_words(int(m.group())) + " ", text)
    return _WORD_RE.findall(text)


@functools.lru_cache(maxsize=65536)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(tokenize(text))


# hassil 3 has Group/Sequence/Alternative/Permutation classes; hassil 2 (Home Assistant
# 2025.4) has one Sequence class with a ``type``. These helpers read both.
_ALTERNATIVE = getattr(hassil, "Alternative", None)
_PERMUTATION = getattr(hassil, "Permutation", None)
_GROUP = getattr(hassil, "Group", hassil.Sequence)


def _kind(expr: Any) -> str:
    """"text", "rule", "list", "alt", "perm", "seq" or "other"."""
    if isinstance(expr, hassil.TextChunk):
        return "text"
    if isinstance(expr, hassil.RuleReference):
        return "rule"
    if isinstance(expr, hassil.ListReference):
        return "list"
    if _ALTERNATIVE is not None and isinstance(expr, _ALTERNATIVE):
        return "alt"
    if _PERMUTATION is not None and isinstance(expr, _PERMUTATION):
        return "perm"
    if isinstance(expr, _GROUP):
        kind = str(getattr(getattr(expr, "type", None), "value", "group"))
        return {"alternative": "alt", "permutation": "perm"}.get(kind, "seq")
    return "other"


def sentence_expression(sentence: Any) -> Any:
    """The expression of a parsed sentence (hassil 3) or the sentence itself (hassil 2)."""
    return getattr(sentence, "expression", sentence)


class _Dead(Exception):
    """A template path that cannot match (it names an empty list)."""


@dataclass
class Nfa:
    """A word NFA with epsilon arcs; state 0 starts, ``final`` accepts."""

    arcs: list[list[tuple[str, int]]]
    final: int

    @classmethod
    def empty(cls) -> Nfa:
        """An NFA with a start and a final state and no paths."""
        return cls(arcs=[[], []], final=1)

    def new_state(self) -> int:
        """Add a state."""
        self.arcs.append([])
        return len(self.arcs) - 1

    def add(self, src: int, label: str, dst: int) -> None:
        """Add an arc (label EPS for epsilon)."""
        self.arcs[src].append((label, dst))

    def add_words(self, src: int, words: Sequence[str], dst: int) -> None:
        """Add a chain of word arcs from src to dst."""
        if not words:
            self.add(src, EPS, dst)
            return
        cur = src
        for word in words[:-1]:
            nxt = self.new_state()
            self.add(cur, word, nxt)
            cur = nxt
        self.add(cur, words[-1], dst)


ListResolver = Callable[[Any], list[list[str]] | list[Any] | None]


class TemplateCompiler:
    """Adds hassil sentence expressions to an NFA.

    Pure-text parts next to each other are expanded locally into strings first, so
    word-internal templates such as ``fan[s]`` or ``switch[es]`` yield real words.
    """

    def __init__(self, nfa: Nfa, rules: dict[str, Any], lists: ListResolver) -> None:
        """Compile into ``nfa`` with these expansion rules and list resolver."""
        self.nfa = nfa
        self.rules = rules
        self.lists = lists
        self._strings_cache: dict[int, frozenset[str] | None] = {}

    def add_sentence(self, expression: Any, src: int, dst: int) -> bool:
        """Add every path of the expression from src to dst; False if none can match."""
        try:
            end = self._build(expression, src)
        except _Dead:
            # Partial paths stay behind as dead ends; minimize() drops them.
            return False
        self.nfa.add(end, EPS, dst)
        return True

    # -- pure text ----------------------------------------------------------------------
    def _strings(self, expr: Any) -> frozenset[str] | None:
        key = id(expr)
        if key in self._strings_cache:
            return self._strings_cache[key]
        result = self._compute_strings(expr)
        self._strings_cache[key] = result
        return result

    def _compute_strings(self, expr: Any) -> frozenset[str] | None:
        kind = _kind(expr)
        if kind == "text":
            return frozenset([expr.text])
        if kind == "rule":
            rule = self.rules.get(expr.rule_name)
            return None if rule is None else self._strings(sentence_expression(rule))
        if kind == "alt":
            out: set[str] = set()
            for item in expr.items:
                sub = self._strings(item)
                if sub is None:
                    return None
                out |= sub
            if getattr(expr, "is_optional", False):
                out.add("")
            return frozenset(out) if len(out) <= STRING_SET_CAP else None
        if kind == "seq":
            acc: frozenset[str] = frozenset([""])
            for item in expr.items:
                sub = self._strings(item)
                if sub is None or len(acc) * len(sub) > STRING_SET_CAP:
                    return None
                acc = frozenset(a + b for a in acc for b in sub)
            return acc
        return None

    def _add_strings(self, strings: Iterable[str], src: int) -> int:
        """Add the strings as a trie from src (shared prefixes, one end state)."""
        end = self.nfa.new_state()
        children: dict[tuple[int, str], int] = {}
        for text in sorted(set(strings)):
            words = _tokens(text)
            cur = src
            for word in words:
                nxt = children.get((cur, word))
                if nxt is None:
                    nxt = children[(cur, word)] = self.nfa.new_state()
                    self.nfa.add(cur, word, nxt)
                cur = nxt
            self.nfa.add(cur, EPS, end)
        return end

    # -- structure ----------------------------------------------------------------------
    def _build(self, expr: Any, src: int) -> int:
        strings = self._strings(expr)
        if strings is not None:
            return self._add_strings(strings, src)
        kind = _kind(expr)
        if kind == "rule":
            rule = self.rules.get(expr.rule_name)
            if rule is None:
                raise _Dead
            return self._build(sentence_expression(rule), src)
        if kind == "list":
            return self._build_list(expr, src)
        if kind == "alt":
            end = self.nfa.new_state()
            alive = False
            for item in expr.items:
                try:
                    self.nfa.add(self._build(item, src), EPS, end)
                    alive = True
                except _Dead:
                    continue
            if getattr(expr, "is_optional", False):
                self.nfa.add(src, EPS, end)
                alive = True
            if not alive:
                raise _Dead
            return end
        if kind == "perm":
            end = self.nfa.new_state()
            for order in itertools.permutations(expr.items):
                cur = src
                for item in order:
                    cur = self._build(item, cur)
                self.nfa.add(cur, EPS, end)
            return end
        if kind == "seq":
            return self._build_sequence(list(expr.items), src)
        raise _Dead

    def _build_sequence(self, items: list[Any], src: int) -> int:
        cur = src
        run: frozenset[str] | None = None  # the pure-text items not added yet, expanded
        head: frozenset[str] | None = None  # ... all but the last of them
        last: frozenset[str] | None = None  # ... the last
        for item in items:
            sub = self._strings(item)
            if sub is not None and (run is None or len(run) * len(sub) <= STRING_SET_CAP):
                head, last = run, sub
                run = sub if run is None else _concat(run, sub)
                continue
            if (sub is not None and last is not None and _glued(sub)
                    and len(last) * len(sub) <= STRING_SET_CAP):
                # a word's ending after too many strings ("... (room|area|floor)[s]"): the word
                # it ends stays with it ("rooms", not "room s")
                if head is not None:
                    cur = self._add_strings(head, cur)
                run = last = _concat(last, sub)
                head = None
                continue
            if run is not None:
                cur = self._add_strings(run, cur)
                run = head = last = None
            if sub is not None:
                run = last = sub
                continue
            cur = self._build(item, cur)
        if run is not None:
            cur = self._add_strings(run, cur)
        return cur

    def _build_list(self, ref: Any, src: int) -> int:
        values = self.lists(ref)
        if not values:
            raise _Dead
        end = self.nfa.new_state()
        for value in values:
            if isinstance(value, list):
                self.nfa.add_words(src, value, end)
            else:
                try:
                    self.nfa.add(self._build(value, src), EPS, end)
                except _Dead:
                    continue
        return end


def _concat(left: frozenset[str], right: frozenset[str]) -> frozenset[str]:
    return frozenset(a + b for a in left for b in right)


def _glued(strings: frozenset[str]) -> bool:
    """Whether text goes on the word before it ("s" in "room[s]"), not a word of its own."""
    return any(text and not text[0].isspace() for text in strings)


class Dfa:
    """A deterministic word automaton (state 0 starts)."""

    def __init__(self, trans: list[dict[str, int]], accepting: set[int]) -> None:
        """Hold transitions (one dict per state) and the accepting states."""
        self.trans = trans
        self.accepting = accepting

    @property
    def num_states(self) -> int:
        """How many states."""
        return len(self.trans)

    @property
    def words(self) -> set[str]:
        """Every word on an arc."""
        return {w for t in self.trans for w in t}

    def walk(self, words: Iterable[str]) -> int | None:
        """The state after these words, None if they leave the language."""
        state = 0
        for word in words:
            nxt = self.trans[state].get(word)
            if nxt is None:
                return None
            state = nxt
        return state

    def accepts(self, words: Iterable[str]) -> bool:
        """Whether the words are a complete sentence."""
        state = self.walk(words)
        return state is not None and state in self.accepting

    def is_prefix(self, words: Iterable[str]) -> bool:
        """Whether the words can still grow into a sentence."""
        return self.walk(words) is not None

    def write_fsg(self, path: Path, name: str = "home") -> None:
        """Write the automaton in pocketsphinx's FSG text format (one extra final state)."""
        final = self.num_states
        lines = [f"FSG_BEGIN {name}", f"NUM_STATES {final + 1}", "START_STATE 0",
                 f"FINAL_STATE {final}"]
        for src, t in enumerate(self.trans):
            out = len(t) + (1 if src in self.accepting else 0)
            if not out:
                continue
            prob = 1.0 / out
            for word, dst in sorted(t.items()):
                lines.append(f"TRANSITION {src} {dst} {prob:.6f} {word}")
            if src in self.accepting:
                lines.append(f"TRANSITION {src} {final} {prob:.6f}")
        lines.append("FSG_END")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _closure(arcs: list[list[tuple[str, int]]], states: Iterable[int]) -> frozenset[int]:
    stack = list(states)
    seen = set(stack)
    while stack:
        s = stack.pop()
        for label, dst in arcs[s]:
            if label == EPS and dst not in seen:
                seen.add(dst)
                stack.append(dst)
    return frozenset(seen)


def _determinize(
    arcs: list[list[tuple[str, int]]], starts: Iterable[int], finals: set[int]
) -> Dfa:
    start = _closure(arcs, starts)
    index = {start: 0}
    todo = [start]
    trans: list[dict[str, int]] = [{}]
    accepting: set[int] = set()
    while todo:
        subset = todo.pop()
        me = index[subset]
        if subset & finals:
            accepting.add(me)
        moves: dict[str, set[int]] = {}
        for s in subset:
            for label, dst in arcs[s]:
                if label != EPS:
                    moves.setdefault(label, set()).add(dst)
        for label, dsts in moves.items():
            target = _closure(arcs, dsts)
            if target not in index:
                index[target] = len(trans)
                trans.append({})
                todo.append(target)
            trans[me][label] = index[target]
    return Dfa(trans, accepting)


def _reverse(dfa: Dfa) -> tuple[list[list[tuple[str, int]]], list[int], set[int]]:
    arcs: list[list[tuple[str, int]]] = [[] for _ in range(dfa.num_states)]
    for src, t in enumerate(dfa.trans):
        for word, dst in t.items():
            arcs[dst].append((word, src))
    return arcs, sorted(dfa.accepting), {0}


def minimize(nfa: Nfa) -> Dfa:
    """The minimal DFA (Brzozowski: reverse and determinize, twice)."""
    reversed_arcs: list[list[tuple[str, int]]] = [[] for _ in nfa.arcs]
    for src, out in enumerate(nfa.arcs):
        for label, dst in out:
            reversed_arcs[dst].append((label, src))
    rev = _determinize(reversed_arcs, [nfa.final], {0})
    return _determinize(*_reverse(rev))


# Words that carry little of a command's meaning (on/off and numbers are not among them).
FUNCTION_WORDS: Final = frozenset(
    "the a an is are of to in at my our your me it its this that please can could would you "
    "for and be".split()
)
