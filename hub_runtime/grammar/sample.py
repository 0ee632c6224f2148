"""Random sentences of the home grammar: Home Assistant's templates filled with the home's names.

For Whisper's prompt (commands of every kind, naming this home's devices and rooms) and for
evaluation sets. A template's ``requires_context`` is honoured (a lock's name only where a
lock may be named); wildcards are filled from small lists.
"""

from __future__ import annotations

import random
from typing import Any, Final

from hassil.intents import RangeSlotList, TextSlotList

from . import HomeGrammar, context_ok
from .automaton import _kind, sentence_expression

ITEMS: Final = ["apples", "milk", "batteries", "dog food", "the laundry", "paper towels"]
MESSAGES: Final = ["dinner is ready", "the car is here", "time to go"]
QUERIES: Final = ["jazz", "the news", "some relaxing music"]
TIMER_NAMES: Final = ["pasta", "tea", "laundry"]
WILDCARDS: Final = {"todo_list_item": ITEMS, "shopping_list_item": ITEMS, "message": MESSAGES, "search_query": QUERIES,
             "timer_name": TIMER_NAMES}


class _Dead(Exception):
    """A template path with nothing to fill a list with."""


def _sample(expr: Any, rng: random.Random, rules: dict[str, Any], fill: Any) -> str:
    """One random sentence of a template expression."""
    kind = _kind(expr)
    if kind == "text":
        return str(expr.text)
    if kind == "rule":
        if expr.rule_name not in rules:
            raise _Dead
        return _sample(sentence_expression(rules[expr.rule_name]), rng, rules, fill)
    if kind == "list":
        return str(fill(expr))
    if kind == "alt":
        items = list(expr.items) + ([None] if getattr(expr, "is_optional", False) else [])
        rng.shuffle(items)
        for item in items:
            if item is None:
                return ""
            try:
                return _sample(item, rng, rules, fill)
            except _Dead:
                continue
        raise _Dead
    if kind == "perm":
        items = list(expr.items)
        rng.shuffle(items)
        return " ".join(_sample(i, rng, rules, fill) for i in items)
    if kind == "seq":
        return "".join(_sample(i, rng, rules, fill) for i in expr.items)
    raise _Dead


def sample_sentences(grammar: HomeGrammar, rng: random.Random, per_intent: int) -> dict[str, list[str]]:
    """Random sentences of every intent's templates, specialised to the home."""
    rules = dict(grammar.intents.expansion_rules)
    out: dict[str, list[str]] = {}
    for name, intent in grammar.intents.intents.items():
        if name.startswith("DuplexHub"):
            continue
        pairs = [(data, sentence) for data in intent.data for sentence in data.sentences]
        texts: set[str] = set()
        for _ in range(per_intent * 20):
            if len(texts) >= per_intent:
                break
            data, sentence = rng.choice(pairs)
            requires, excludes = dict(data.requires_context or {}), dict(data.excludes_context or {})

            def fill(ref: Any, data: Any = data, requires: Any = requires, excludes: Any = excludes) -> str:
                list_name = ref.list_name
                if list_name == "name":
                    names = [n.text for n in grammar.names if context_ok(n.context, requires, excludes)]
                    if not names:
                        raise _Dead
                    return rng.choice(names)
                if list_name == "area":
                    if not grammar.areas:
                        raise _Dead  # a home without rooms
                    return rng.choice(grammar.areas)
                if list_name in WILDCARDS:
                    return rng.choice(WILDCARDS[list_name])
                slot_list = (getattr(data, "slot_lists", None) or {}).get(list_name) or \
                    grammar.intents.slot_lists.get(list_name)
                if isinstance(slot_list, RangeSlotList):
                    top = max(slot_list.start, min(slot_list.stop, 100))
                    return str(rng.randrange(slot_list.start, top + 1, slot_list.step))
                if isinstance(slot_list, TextSlotList) and slot_list.values:
                    value = rng.choice(slot_list.values)
                    return _sample(value.text_in, rng, rules, fill)
                raise _Dead

            try:
                text = " ".join(_sample(sentence_expression(sentence), rng, {**rules, **(
                    getattr(data, "expansion_rules", None) or {})}, fill).split())
            except _Dead:
                continue
            texts.add(text)
        out[name] = sorted(texts)
    return out


