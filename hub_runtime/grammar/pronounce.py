"""Pronunciations for the grammar tier: the CMU dictionary, and espeak-ng for the rest.

A word missing from the dictionary ("zigbee", "hows") is phonemised by espeak-ng
(IPA) and mapped onto the acoustic model's ARPAbet phone set.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Final

from .automaton import edit_distance

_LOGGER = logging.getLogger(__name__)

# Longest first: diphthongs and affricates before their parts.
IPA_TO_ARPABET: Final = [
    ("tʃ", "CH"), ("dʒ", "JH"), ("aɪ", "AY"), ("aʊ", "AW"), ("eɪ", "EY"), ("oʊ", "OW"),
    ("əʊ", "OW"), ("ɔɪ", "OY"), ("ɪə", "IH R"), ("ɛə", "EH R"), ("ʊə", "UH R"),
    ("ɜː", "ER"), ("ɑː", "AA"), ("ɔː", "AO"), ("iː", "IY"), ("uː", "UW"), ("ɚ", "ER"),
    ("ɝ", "ER"), ("ɐ", "AH"), ("ə", "AH"), ("ʌ", "AH"), ("æ", "AE"), ("ɑ", "AA"),
    ("ɒ", "AA"), ("ɔ", "AO"), ("ɛ", "EH"), ("e", "EH"), ("ɪ", "IH"), ("ᵻ", "IH"),
    ("i", "IY"), ("ʊ", "UH"), ("u", "UW"), ("o", "OW"), ("a", "AE"), ("ɜ", "ER"),
    ("b", "B"), ("d", "D"), ("ð", "DH"), ("f", "F"), ("ɡ", "G"), ("g", "G"), ("h", "HH"),
    ("j", "Y"), ("k", "K"), ("l", "L"), ("m", "M"), ("n", "N"), ("ŋ", "NG"), ("p", "P"),
    ("ɹ", "R"), ("r", "R"), ("s", "S"), ("ʃ", "SH"), ("t", "T"), ("θ", "TH"), ("v", "V"),
    ("w", "W"), ("z", "Z"), ("ʒ", "ZH"), ("ɾ", "T"), ("ʔ", "T"), ("x", "K"), ("ɬ", "L"),
]
_IGNORED: Final = set("ˈˌː-_'. ̩")


def ipa_to_arpabet(ipa: str) -> list[str]:
    """Map an IPA string (as espeak-ng prints it) to ARPAbet phones."""
    phones: list[str] = []
    i = 0
    while i < len(ipa):
        if ipa[i] in _IGNORED:
            i += 1
            continue
        for sym, arpa in IPA_TO_ARPABET:
            if ipa.startswith(sym, i):
                phones.extend(arpa.split())
                i += len(sym)
                break
        else:
            i += 1  # an unknown mark: skip it
    return phones


def espeak_ipa(words: list[str]) -> list[str]:
    """IPA for each word (one espeak-ng call for all of them)."""
    exe = shutil.which("espeak-ng")
    if exe is None or not words:
        return ["" for _ in words]
    out = subprocess.run(
        [exe, "-v", "en-us", "-q", "--ipa", "--sep=", "\n".join(w.replace("'", "") for w in words)],
        capture_output=True, text=True, check=False, timeout=60,
    ).stdout
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    if len(lines) != len(words):  # espeak joined or split lines: go word by word
        lines = []
        for w in words:
            one = subprocess.run([exe, "-v", "en-us", "-q", "--ipa", w], capture_output=True,
                                 text=True, check=False, timeout=30).stdout
            lines.append(one.strip().replace(" ", ""))
    return lines


@cache
def _cmudict(path: str) -> dict[str, list[str]]:
    entries: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) < 2:
                continue
            word = parts[0]
            if word.endswith(")"):  # alternates: "word(2)"
                word = word[: word.index("(")]
            entries.setdefault(word, []).append(" ".join(parts[1:]))
    return entries


def build_dictionary(words: Iterable[str], cmudict: Path, out: Path) -> list[str]:
    """Write a pronunciation dictionary for the words; returns the words generated."""
    full = _cmudict(str(cmudict))
    lines: list[str] = []
    missing: list[str] = []
    for word in sorted(set(words)):
        prons = full.get(word)
        if prons:
            for n, pron in enumerate(prons):
                lines.append(f"{word} {pron}" if n == 0 else f"{word}({n + 1}) {pron}")
        else:
            missing.append(word)
    for word, ipa in zip(missing, espeak_ipa(missing), strict=True):
        phones = ipa_to_arpabet(ipa)
        if not phones:
            phones = ipa_to_arpabet(word)  # last resort: letters as sounds
        lines.append(f"{word} {' '.join(phones)}")
        _LOGGER.debug("generated pronunciation %s -> %s (%s)", word, phones, ipa)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return missing


# -- comparing what two recognisers heard, by sound ------------------------------------------------
_VOWELS: Final = frozenset("AA AE AH AO AW AY EH ER EY IH IY OW OY UH UW".split())
_NEAR: Final = frozenset(frozenset(p) for p in (
    ("P", "B"), ("T", "D"), ("K", "G"), ("S", "Z"), ("F", "V"), ("CH", "JH"), ("TH", "DH"), ("SH", "ZH"),
    ("M", "N"), ("N", "NG"), ("TH", "F"), ("DH", "D"), ("L", "R"), ("W", "V"), ("S", "SH"),
))
_DROP: Final = frozenset({"HH"})  # too weak to count


class Phonetics:
    """Words as ARPAbet phones (the CMU dictionary, espeak-ng for the rest), compared by sound."""

    def __init__(self, cmudict: Path) -> None:
        """Use this dictionary (the acoustic model's)."""
        self._dict = _cmudict(str(cmudict))
        self._guessed: dict[str, tuple[str, ...]] = {}

    def phones(self, words: Iterable[str]) -> tuple[str, ...]:
        """The phones of the words, run together (word boundaries do not count)."""
        words = [w for w in words if w]
        unknown = [w for w in dict.fromkeys(words) if w not in self._dict and w not in self._guessed]
        for word, ipa in zip(unknown, espeak_ipa(unknown), strict=True):
            self._guessed[word] = tuple(ipa_to_arpabet(ipa) or ipa_to_arpabet(word))
        out: list[str] = []
        for word in words:
            if word in self._dict:
                out += self._dict[word][0].split()
            else:
                out += self._guessed[word]
        return tuple(p.rstrip("012") for p in out if p.rstrip("012") not in _DROP)

    def distance(self, a: Iterable[str], b: Iterable[str]) -> float:
        """Edit distance between two word sequences by sound, per phone of the longer (0 same, ~1 unrelated)."""
        pa, pb = self.phones(a), self.phones(b)
        if not pa or not pb:
            return 0.0 if pa == pb else 1.0
        return edit_distance(pa, pb, _phone_cost) / max(len(pa), len(pb))


def _phone_cost(a: str, b: str) -> float:
    if a == b:
        return 0.0
    if (a in _VOWELS and b in _VOWELS) or frozenset((a, b)) in _NEAR:
        return 0.4
    return 1.0
