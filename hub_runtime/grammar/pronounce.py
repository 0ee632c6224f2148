"""Pronunciations for the grammar tier: the CMU dictionary, and espeak-ng for the rest.

A word missing from the dictionary ("zigbee", "hows") is phonemised by espeak-ng
(IPA) and mapped onto the acoustic model's ARPAbet phone set.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Final

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


_VOWEL_GROUP: Final = re.compile(r"[aeiouy]+")


def syllables(words: Iterable[str]) -> int:
    """About how many syllables the words have when spoken (vowel groups, a final silent "e" left out)."""
    total = 0
    for word in words:
        word = word.lower()
        silent = word.endswith("e") and len(word) > 3 and not word.endswith(("le", "ee"))
        total += max(1, len(_VOWEL_GROUP.findall(word)) - silent)
    return total


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
def _cmudict(path: str) -> dict[str, tuple[str, ...]]:
    """Each word's pronunciations, kept for the process.

    Its ~126,000 entries are tuples of strings, which the garbage collector stops tracking;
    as lists it scanned them at every full collection (~100 ms of the loop held up).
    """
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
    return {word: tuple(prons) for word, prons in entries.items()}


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
