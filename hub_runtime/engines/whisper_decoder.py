"""Whisper's text decoder in numpy, for decoding constrained to the home grammar.

CTranslate2 runs the encoder and the free decode fast, but it cannot restrict the next
token to what a grammar allows. This is the same decoder (the weights are read from the
CTranslate2 ``model.bin`` that faster-whisper loads, so there is one model on disk) with a
key/value cache per hypothesis, and logits computed only for the tokens that matter: the
grammar's next tokens and a shortlist of the commonest tokens for the normaliser. That
makes one step of a beam of 8 cost about 2 ms instead of the full 51k-token projection.

Layout of a CTranslate2 Whisper decoder layer (pre-norm): ``self_attention`` (fused QKV
``linear_0``, output ``linear_1``), ``attention`` on the encoder (query ``linear_0``,
fused KV ``linear_1``, output ``linear_2``), ``ffn`` (``linear_0``, GELU, ``linear_1``);
learnt positions; the output projection is the token embedding.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ..grammar.tokens import Allowed, TokenGrammar, TokenPath

F32 = npt.NDArray[np.floating[Any]]  # float32 in practice
_DTYPES: Final = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
SHORTLIST: Final = 8192  # the commonest tokens (BPE ids are in merge order), for the normaliser
# Nats for each token of free text (a wildcard): free text follows Whisper's own choice, so it
# would explain any words it misheard ("add {apple to my sharpening} list"); the grammar's own
# words explain them first ("add {apple} to my shopping list"). It counts in what the grammar
# cost, too: a sentence that is mostly free text ("who is {the capital of france}") is not
# much of a sentence of the grammar.
WILDCARD_PENALTY: Final = 1.0
_LN_EPS: Final = 1e-5


def read_ct2_variables(path: Path, prefix: str = "") -> dict[str, npt.NDArray[np.generic]]:
    """The variables of a CTranslate2 model file (binary version 6) whose names start with ``prefix``."""
    data = memoryview(path.read_bytes())
    off = 0

    def unpack(fmt: str) -> int:
        nonlocal off
        (value,) = struct.unpack_from(fmt, data, off)
        off += struct.calcsize(fmt)
        return int(value)

    def string() -> str:
        nonlocal off
        n = unpack("H")
        value = bytes(data[off:off + n - 1]).decode()
        off += n
        return value

    version = unpack("I")
    if version < 5:
        raise ValueError(f"{path}: CTranslate2 model version {version} is not supported (need 5 or newer)")
    string()  # the spec's name
    unpack("I")  # its revision
    out: dict[str, npt.NDArray[np.generic]] = {}
    for _ in range(unpack("I")):
        name = string()
        dims = [unpack("I") for _ in range(unpack("B"))]
        dtype = unpack("B")
        size = unpack("I")
        if name.startswith(prefix):
            if dtype not in _DTYPES:
                raise ValueError(f"{path}: variable {name} has data type {dtype}, not one of {sorted(_DTYPES)}")
            out[name] = np.frombuffer(data[off:off + size], dtype=_DTYPES[dtype]).reshape(dims)
        off += size
    return out


@dataclass
class _Layer:
    """One decoder layer, each layer norm's gain and bias folded into the linear after it.

    The attention's scale is folded into the queries' weights too: a step runs fewer numpy
    operations (most of its time is the products, whose weights are read again every step).
    """

    qkv: tuple[F32, F32]  # weight [d, 3d] (transposed), bias
    self_out: tuple[F32, F32]
    cross_q: tuple[F32, F32]
    cross_kv: tuple[F32, F32]  # on the encoder's output (no norm before it)
    cross_out: tuple[F32, F32]
    ffn_in: tuple[F32, F32]
    ffn_out: tuple[F32, F32]


@dataclass
class Cache:
    """Self-attention keys and values of a batch of hypotheses, per layer: [B, heads, steps, dh]."""

    keys: list[F32]
    values: list[F32]

    @property
    def steps(self) -> int:
        """How many tokens the cache holds."""
        return int(self.keys[0].shape[2])

    def take(self, rows: npt.NDArray[np.intp]) -> Cache:
        """The cache of these hypotheses (a beam reordered)."""
        return Cache([k[rows] for k in self.keys], [v[rows] for v in self.values])


@dataclass
class Encoded:
    """The encoder's output, projected once into every layer's cross-attention keys and values."""

    keys: list[F32]  # [heads, dh, frames]
    values: list[F32]  # [heads, frames, dh]


def _standardize(x: F32) -> F32:
    """A layer norm without its gain and bias (folded into the next linear): rows [N, dim]."""
    centred: F32 = x - x.mean(-1, keepdims=True)
    centred /= np.sqrt(np.square(centred).mean(-1, keepdims=True) + _LN_EPS)
    return centred


def _fold(norm: tuple[F32, F32], linear: tuple[F32, F32], scale: float = 1.0) -> tuple[F32, F32]:
    """``linear`` after ``norm``'s gain and bias (and times ``scale``): one linear on standardized input."""
    (gain, bias), (weight, b) = norm, linear
    return (np.ascontiguousarray(gain[:, None] * weight * scale, dtype=np.float32),
            np.ascontiguousarray((bias @ weight + b) * scale, dtype=np.float32))


def _gelu(x: F32) -> F32:
    inner = np.tanh(x * (0.7978845608 + 0.0356774081 * np.square(x)))
    inner += 1.0
    inner *= x
    inner *= 0.5
    return inner


def _softmax(x: F32) -> F32:
    e = np.exp(x - x.max(-1, keepdims=True))
    e /= e.sum(-1, keepdims=True)
    return e


class WhisperDecoder:
    """Whisper's decoder over one encoded utterance, a batch of hypotheses at a time."""

    def __init__(self, model_bin: Path) -> None:
        """Read the decoder's weights (float32 in memory, about 60 MB for tiny)."""
        raw = read_ct2_variables(model_bin, "decoder/")

        def get(name: str) -> F32:
            return np.ascontiguousarray(raw["decoder/" + name].astype(np.float32))

        def linear(name: str) -> tuple[F32, F32]:
            return np.ascontiguousarray(get(name + "/weight").T), get(name + "/bias")

        def norm(name: str) -> tuple[F32, F32]:
            return get(name + "/gamma"), get(name + "/beta")

        self.heads = int(np.asarray(raw["decoder/num_heads"]).item())
        self.embedding = get("embeddings/weight")
        self.positions = get("position_encodings/encodings")
        self.dim = int(self.embedding.shape[1])
        self.head_dim = self.dim // self.heads
        self.vocab = int(self.embedding.shape[0])
        self.layers: list[_Layer] = []
        scale = 1.0 / math.sqrt(self.head_dim)
        i = 0
        while f"decoder/layer_{i}/ffn/linear_0/weight" in raw:
            p = f"layer_{i}/"
            qkv_w, qkv_b = _fold(norm(p + "self_attention/layer_norm"), linear(p + "self_attention/linear_0"))
            qkv_w[:, : self.dim] *= scale  # the queries' part
            qkv_b[: self.dim] *= scale
            self.layers.append(_Layer(
                qkv=(qkv_w, qkv_b), self_out=linear(p + "self_attention/linear_1"),
                cross_q=_fold(norm(p + "attention/layer_norm"), linear(p + "attention/linear_0"), scale),
                cross_kv=linear(p + "attention/linear_1"), cross_out=linear(p + "attention/linear_2"),
                ffn_in=_fold(norm(p + "ffn/layer_norm"), linear(p + "ffn/linear_0")),
                ffn_out=linear(p + "ffn/linear_1")))
            i += 1
        self.final_norm = norm("layer_norm")
        self._shortlist_t = np.ascontiguousarray(self.embedding[: min(SHORTLIST, self.vocab)].T)

    @property
    def max_positions(self) -> int:
        """The longest token sequence the decoder takes."""
        return int(self.positions.shape[0])

    def encode(self, encoder_output: F32) -> Encoded:
        """Project the encoder's output ([frames, dim]) into each layer's keys and values."""
        frames = encoder_output.shape[0]
        keys: list[F32] = []
        values: list[F32] = []
        for layer in self.layers:
            kv = encoder_output @ layer.cross_kv[0] + layer.cross_kv[1]
            k, v = kv[:, : self.dim], kv[:, self.dim:]
            keys.append(np.ascontiguousarray(k.reshape(frames, self.heads, self.head_dim).transpose(1, 2, 0)))
            values.append(np.ascontiguousarray(v.reshape(frames, self.heads, self.head_dim).transpose(1, 0, 2)))
        return Encoded(keys, values)

    def forward(self, tokens: npt.NDArray[np.intp], cache: Cache | None, audio: Encoded) -> tuple[F32, Cache]:
        """Run ``tokens`` ([B, n]) after what ``cache`` holds; the final hidden states [B, n, dim] and the cache.

        The linears run on all B x n rows at once (one matrix product each, not one per hypothesis).
        """
        batch, n = tokens.shape
        start = cache.steps if cache is not None else 0
        if start + n > self.max_positions:
            raise ValueError(f"{start + n} tokens: the decoder takes at most {self.max_positions}")
        h, dh, dim = self.heads, self.head_dim, self.dim
        x: F32 = (self.embedding[tokens] + self.positions[start:start + n]).reshape(batch * n, dim)
        keys: list[F32] = []
        values: list[F32] = []
        mask = np.triu(np.full((n, start + n), -1e9, np.float32), k=start + 1) if n > 1 else None
        for li, layer in enumerate(self.layers):
            qkv = (_standardize(x) @ layer.qkv[0] + layer.qkv[1]).reshape(batch, n, 3, h, dh).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # [B, heads, n, dh]; q scaled
            if cache is not None:
                k = np.concatenate([cache.keys[li], k], axis=2)
                v = np.concatenate([cache.values[li], v], axis=2)
            keys.append(k)
            values.append(v)
            scores = q @ k.transpose(0, 1, 3, 2)
            if mask is not None:
                scores += mask
            out = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch * n, dim)
            x = x + out @ layer.self_out[0] + layer.self_out[1]
            q = (_standardize(x) @ layer.cross_q[0] + layer.cross_q[1]).reshape(batch, n, h, dh).transpose(0, 2, 1, 3)
            out = (_softmax(q @ audio.keys[li]) @ audio.values[li]).transpose(0, 2, 1, 3).reshape(batch * n, dim)
            x = x + out @ layer.cross_out[0] + layer.cross_out[1]
            x = x + _gelu(_standardize(x) @ layer.ffn_in[0] + layer.ffn_in[1]) @ layer.ffn_out[0] + layer.ffn_out[1]
        gain, bias = self.final_norm
        return (_standardize(x) * gain + bias).reshape(batch, n, dim), Cache(keys, values)

    def log_probs(self, hidden: F32, ids: npt.NDArray[np.intp],
                  extra: range = range(0)) -> tuple[F32, F32, F32, F32]:
        """Log-probabilities after each hidden state ([B, dim]): of ``ids``, the best token, the shortlist, ``extra``.

        ``ids`` are sorted, unique and outside ``extra`` (a range of ids past the shortlist:
        the timestamps); the shortlist ([B, SHORTLIST]) holds the tokens free text is written
        with. Normalised over all of these (the rest of the vocabulary holds almost no mass
        after speech; leaving it out keeps a step cheap).
        """
        common = hidden @ self._shortlist_t
        picked = hidden @ self.embedding[ids].T
        stamps = hidden @ self.embedding[extra.start:extra.stop].T
        rare = picked[:, ids >= self._shortlist_t.shape[1]]
        top = np.maximum(common.max(-1, keepdims=True), picked.max(-1, keepdims=True, initial=-np.inf))
        top = np.maximum(top, stamps.max(-1, keepdims=True, initial=-np.inf))
        total = (np.exp(common - top).sum(-1, keepdims=True) + np.exp(rare - top).sum(-1, keepdims=True)
                 + np.exp(stamps - top).sum(-1, keepdims=True))
        norm = top + np.log(total)
        out: F32 = picked - norm
        best: F32 = (top - norm)[:, 0]
        shortlist: F32 = common - norm
        timestamps: F32 = stamps - norm
        return out, best, shortlist, timestamps

    def full_log_probs(self, hidden: F32) -> F32:
        """Log-probabilities of every token after each hidden state ([B, dim] → [B, vocab])."""
        logits = hidden @ self.embedding.T
        top = logits.max(-1, keepdims=True)
        out: F32 = logits - (top + np.log(np.exp(logits - top).sum(-1, keepdims=True)))
        return out


@dataclass(frozen=True)
class Hypothesis:
    """A token path of the constrained search."""

    tokens: tuple[int, ...]
    logprob: float  # sum of the tokens' log-probabilities (the end of text included once finished)
    # how much the grammar cost: sum over tokens of (best token's log-prob - this one's), and
    # WILDCARD_PENALTY for each token of free text (the grammar did not choose those)
    forced: float
    worst: float  # the most the grammar cost at one token
    path: TokenPath
    words: tuple[str, ...] | None = None  # the grammar's sentence, once finished
    wild: int = 0  # tokens of free text (wildcards) in it
    fit: float = 0.0  # log-likelihood (at most 0) that the sentence lasts as long as the speech did

    @property
    def score(self) -> float:
        """What ranks finished sentences: Whisper's log-probability and the length's fit."""
        return self.logprob + self.fit


def constrained_search(decoder: WhisperDecoder, audio: Encoded, grammar: TokenGrammar, prefix: list[int], *,
                       beam: int = 6, first_beam: int = 16, wide_steps: int = 3, max_tokens: int = 40,
                       fit: Callable[[tuple[str, ...]], float] | None = None,
                       bound: Callable[[tuple[str, ...]], float] | None = None,
                       timestamps: range = range(0), slack: float = 0.0,
                       stop: Callable[[], bool] | None = None) -> list[Hypothesis]:
    """Beam search over the sentences of ``grammar``: the finished ones, best first.

    Every step scores only the tokens the grammar allows after each hypothesis (and the
    shortlist for the normaliser); inside a wildcard, the whole vocabulary. Paths with free
    text and paths without have a beam each: free text always looks likely token by token
    (it is what Whisper would write anyway), and would otherwise push the grammar's own
    sentences out before they end. Log-probabilities only fall as a path grows, so the search
    stops once a finished sentence beats every open path by ``slack`` (the runners-up within
    ``slack`` of the best are found too).

    The first ``wide_steps`` steps keep ``first_beam`` paths: the first word is where the
    grammar and Whisper's own guess part most ("Add" where it would write "And"), and a
    sentence pruned there is lost. Paths that differ only in how the same words are written
    (" Turn" or " turn") are one path: the likelier is kept.

    ``timestamps``: the timestamp tokens that ``grammar.timestamp`` stands for (those of the
    audio's window); where the grammar allows one, the likeliest is written.

    ``fit`` scores a finished sentence's words (its length against the speech); ``bound``
    the best that any sentence going on from these words can still get (a path already
    longer than the speech only gets worse), so that paths that can no longer win stop.

    ``stop``, asked before every step: True ends the search at once (nothing found; the
    caller no longer wants it).
    """
    hidden, cache = decoder.forward(np.array([prefix], dtype=np.intp), None, audio)
    states = hidden[:, -1]
    live = [Hypothesis((), 0.0, 0.0, 0.0, grammar.start())]
    finished: list[Hypothesis] = []
    for step_no in range(max_tokens):
        if stop is not None and stop():
            return []
        width = first_beam if step_no < wide_steps else beam
        allowed = [grammar.allowed(h.path) for h in live]
        candidates = _candidates(decoder, grammar, states, live, allowed, width, timestamps)
        nxt: list[Hypothesis] = []
        rows: list[int] = []
        seen: set[TokenPath] = set()
        room = [width, beam]  # without free text, with
        for score, row, token, forced, written in candidates:
            hyp = live[row]
            if token == grammar.end_of_text:
                words = grammar.sentence(hyp.path)
                finished.append(Hypothesis(hyp.tokens, score, hyp.forced + forced, max(hyp.worst, forced),
                                           hyp.path, words, hyp.wild,
                                           fit(words) if fit is not None and words else 0.0))
                continue
            if not any(room):
                if finished:
                    break
                continue
            path = grammar.advance(hyp.path, token)
            wild = hyp.wild + int(grammar.in_wildcard(path))
            if path and room[wild > 0] and path not in seen:
                seen.add(path)
                room[wild > 0] -= 1
                nxt.append(Hypothesis((*hyp.tokens, written), score, hyp.forced + forced,
                                      max(hyp.worst, forced), path, wild=wild))
                rows.append(row)
        finished.sort(key=lambda h: -h.score)
        if finished and bound is not None:
            keep = [i for i, h in enumerate(nxt) if h.logprob + bound(h.path[0][1]) > finished[0].score - slack]
            nxt, rows = [nxt[i] for i in keep], [rows[i] for i in keep]
        if not nxt or (finished and finished[0].score - slack >= max(h.logprob for h in nxt)):
            break
        live = nxt
        tokens = np.array([[h.tokens[-1]] for h in live], dtype=np.intp)
        hidden, cache = decoder.forward(tokens, cache.take(np.array(rows, dtype=np.intp)), audio)
        states = hidden[:, -1]
    return sorted(finished, key=lambda h: -h.score)


def _candidates(decoder: WhisperDecoder, grammar: TokenGrammar, states: F32, live: list[Hypothesis],
                allowed: list[Allowed], beam: int, timestamps: range) -> list[tuple[float, int, int, float, int]]:
    """(score, row, token, forced, token written) of every allowed extension, best first.

    In a wildcard, the best ``beam`` texts; for the grammar's timestamp, the likeliest one.
    """
    out: list[tuple[float, int, int, float, int]] = []
    stamp = grammar.timestamp
    sets = [np.fromiter(sorted(a.tokens - {stamp}), dtype=np.intp) for a in allowed]
    ids = np.unique(np.concatenate(sets)) if sets else np.zeros(0, np.intp)
    logp, best, common, stamps = decoder.log_probs(states, ids, timestamps if stamp is not None else range(0))
    for row, hyp in enumerate(live):
        scores = logp[row, np.searchsorted(ids, sets[row])]
        if len(scores) > beam:  # at most ``beam`` of one row can be kept, and the end of text
            keep = np.argpartition(-scores, beam)[:beam]
            if grammar.end_of_text in allowed[row].tokens:
                keep = np.union1d(keep, np.searchsorted(sets[row], [grammar.end_of_text]))
        else:
            keep = np.arange(len(scores))
        top = float(best[row])
        for token, lp in zip(sets[row][keep].tolist(), scores[keep].tolist(), strict=True):
            out.append((hyp.logprob + lp, row, token, top - lp, token))
        if stamp is not None and stamp in allowed[row].tokens and len(timestamps):
            # that a timestamp comes (Whisper spreads it over neighbouring times); the likeliest is written
            at = int(np.argmax(stamps[row]))
            lp = float(np.logaddexp.reduce(stamps[row]))
            out.append((hyp.logprob + lp, row, stamp, max(0.0, float(best[row]) - lp), timestamps[at]))
        if allowed[row].any_text:  # free text: the likeliest common tokens
            scores = common[row]
            picked = 0
            likely = np.argpartition(-scores, 4 * beam)[: 4 * beam]
            for token in likely[np.argsort(-scores[likely])].tolist():
                if picked == beam:
                    break
                if grammar.is_text(token) and token not in allowed[row].tokens:
                    lp = float(scores[token])
                    out.append((hyp.logprob + lp - WILDCARD_PENALTY, row, token,
                                float(best[row]) - lp + WILDCARD_PENALTY, token))
                    picked += 1
    out.sort(key=lambda c: -c[0])
    return out


@dataclass(frozen=True)
class _Segment:
    """Text run through the decoder as the search writes a sentence: a timestamp, the tokens, then the end."""

    start_logprob: float  # that a timestamp comes first (summed over the times it may be at)
    start_forced: float  # what the timestamp first costs against Whisper's likeliest token there
    cache: Cache
    ids: npt.NDArray[np.intp]  # the text's distinct tokens, sorted
    logp: F32  # [tokens + 1, len(ids)]
    best: F32  # [tokens + 1]: the likeliest token's log-probability at each state
    common: F32  # [tokens + 1, shortlist]
    stamps: F32  # [tokens + 1, timestamps]


def _segment(decoder: WhisperDecoder, audio: Encoded, prefix: list[int], tokens: list[int],
             timestamps: range) -> _Segment:
    hidden, cache = decoder.forward(np.array([prefix], dtype=np.intp), None, audio)
    _, first_best, _, stamps = decoder.log_probs(hidden[:, -1], np.zeros(0, np.intp), timestamps)
    start = timestamps[int(np.argmax(stamps[0]))]
    hidden, cache = decoder.forward(np.array([[start, *tokens]], dtype=np.intp), cache, audio)
    ids = np.unique(np.array(tokens, dtype=np.intp))
    logp, best, common, text_stamps = decoder.log_probs(hidden[0], ids, timestamps)
    start_logprob = float(np.logaddexp.reduce(stamps[0]))
    return _Segment(start_logprob, max(0.0, float(first_best[0]) - start_logprob), cache, ids, logp, best, common,
                    text_stamps)


def score_segment(decoder: WhisperDecoder, audio: Encoded, prefix: list[int], tokens: list[int], *,
                  timestamps: range, end_of_text: int) -> float:
    """Log-probability of text written as the search writes a sentence: between two timestamps, then the end.

    Scored as the search scores (the same normaliser, a timestamp's probability summed over
    the times it may be at), so that it compares with a found sentence's ``logprob``.
    """
    if not tokens or not len(timestamps):
        return -math.inf
    seg = _segment(decoder, audio, prefix, tokens, timestamps)
    cols = np.searchsorted(seg.ids, np.array(tokens, dtype=np.intp))
    total = seg.start_logprob + float(seg.logp[np.arange(len(tokens)), cols].sum())
    total += float(np.logaddexp.reduce(seg.stamps[-1]))
    end = timestamps[int(np.argmax(seg.stamps[-1]))]
    hidden, _ = decoder.forward(np.array([[end]], dtype=np.intp), seg.cache, audio)
    logp, _, _, _ = decoder.log_probs(hidden[:, -1], np.array([end_of_text], dtype=np.intp), timestamps)
    return total + float(logp[0, 0])


@dataclass(frozen=True)
class Agreement:
    """How Whisper, token by token, agrees with text it is given (see :func:`agreement`)."""

    logprob: float  # of the text between its timestamps (the end of text left out)
    forced: float  # summed over tokens (and the end): the likeliest token's log-prob less the text's
    margin: float  # the least, over tokens (and the end), by which the text's beats any other reading
    # what the search's ``forced`` would be for these tokens, their end left out (see :func:`as_sentence`)
    cost: float
    # at most how likely the text is, written any way: at each token, the likeliest that writes
    # the same letters up to a token's end (" Christmas" for " christmas", or " christ" "mas";
    # not " chr"); its end left out
    hope: float
    segment: _Segment


def agreement(decoder: WhisperDecoder, audio: Encoded, prefix: list[int], tokens: list[int], *,
              timestamps: range, spelling: Callable[[int], str], rivals: int = 4,
              rival: Callable[[int, int], bool] | None = None) -> Agreement:
    """Whether Whisper's own choice, token by token, is this text, and by how much (one pass, not a search).

    At each token, what writes the same letters from there on (``spelling``: a token's
    letters, digits and symbols, lower case) counts as the text: " Christmas" for " christ"
    "mas", "-" for " minute" after " 62". After the text, the end (a timestamp, or a mark
    that writes no letters) must beat every token that writes some: else Whisper heard more.
    ``rival(row, token)`` False: that token, inside the text (not its first token, not its
    end), reads as no other sentence (not one of the grammar's): it is no rival for the
    margin, only what it costs counts (``forced``).
    """
    seg = _segment(decoder, audio, prefix, tokens, timestamps)
    letters = [spelling(t) for t in tokens]
    forced, margin = 0.0, math.inf
    logprob = hope = seg.start_logprob
    cost = seg.start_forced
    for row in range(len(tokens) + 1):
        rest = "".join(letters[row:])
        common = seg.common[row]
        stamp = float(np.logaddexp.reduce(seg.stamps[row]))
        if row < len(tokens):  # a timestamp here would end the text early
            mine, other = float(seg.logp[row, np.searchsorted(seg.ids, tokens[row])]), stamp
            logprob += mine
            cost += float(seg.best[row]) - mine
        else:  # after the text, a timestamp is its end
            mine, other = stamp, -math.inf
        inside = 0 < row < len(tokens)
        best_writing = mine  # ... of the next words: a token that writes one or more of them whole
        ends = set(itertools.accumulate(len(x) for x in letters[row:]))
        for t in np.argpartition(-common, rivals)[:rivals].tolist():
            spelt = spelling(t)
            if rest.startswith(spelt):
                mine = max(mine, float(common[t]))
                if len(spelt) in ends:
                    best_writing = max(best_writing, float(common[t]))
            elif not inside or rival is None or rival(row, t):
                other = max(other, float(common[t]))
        forced += max(0.0, float(seg.best[row]) - mine)
        margin = min(margin, mine - other)
        if row < len(tokens):
            hope += best_writing
    return Agreement(logprob, forced, margin, cost, hope, seg)


def as_sentence(decoder: WhisperDecoder, audio: Encoded, found: Agreement, *, end_marks: Sequence[int],
                end_of_text: int, timestamps: range) -> tuple[float, float, float]:
    """The text of ``found`` as the search writes a sentence: its log-probability, cost and hope, its end included.

    The end is the likelier of a timestamp then the end of text, and of the likeliest end
    mark (``end_marks``: ".", "?"), a timestamp and the end of text, as the search scores
    them (two more decoder steps): the log-probability and cost then rank the text among the
    search's sentences (a :class:`Hypothesis`'s ``logprob`` and ``forced``).
    """
    end_logprob, end_cost = _sentence_end(decoder, audio, found.segment, end_marks, end_of_text, timestamps)
    return found.logprob + end_logprob, found.cost + end_cost, found.hope + end_logprob


def _sentence_end(decoder: WhisperDecoder, audio: Encoded, seg: _Segment, end_marks: Sequence[int],
                  end_of_text: int, timestamps: range) -> tuple[float, float]:
    """The log-probability of the likelier end after the text, and its cost, as the search counts them.

    Either a timestamp then the end of text, or the likeliest end mark, a timestamp and the
    end of text (two more decoder steps).
    """
    last = len(seg.best) - 1
    best = float(seg.best[last])
    stamp = float(np.logaddexp.reduce(seg.stamps[last]))
    closing = timestamps[int(np.argmax(seg.stamps[last]))]
    eot = np.array([end_of_text], dtype=np.intp)
    marks = [m for m in end_marks if m < seg.common.shape[1]]
    if not marks:
        hidden, _ = decoder.forward(np.array([[closing]], dtype=np.intp), seg.cache, audio)
        logp, after_best, _, _ = decoder.log_probs(hidden[:, -1], eot, timestamps)
        return stamp + float(logp[0, 0]), best - stamp + float(after_best[0] - logp[0, 0])
    mark = max(marks, key=lambda m: float(seg.common[last, m]))
    hidden, cache = decoder.forward(np.array([[closing], [mark]], dtype=np.intp), seg.cache.take(np.zeros(2, np.intp)),
                                    audio)
    logp, after_best, _, after_stamps = decoder.log_probs(hidden[:, -1], eot, timestamps)
    plain = (stamp + float(logp[0, 0]), best - stamp + float(after_best[0] - logp[0, 0]))
    mark_lp = float(seg.common[last, mark])
    after = float(np.logaddexp.reduce(after_stamps[1]))
    hidden, _ = decoder.forward(np.array([[timestamps[int(np.argmax(after_stamps[1]))]]], dtype=np.intp),
                                cache.take(np.ones(1, np.intp)), audio)
    final, final_best, _, _ = decoder.log_probs(hidden[:, -1], eot, timestamps)
    marked = (mark_lp + after + float(final[0, 0]),
              best - mark_lp + max(0.0, float(after_best[1]) - after) + float(final_best[0] - final[0, 0]))
    return max(plain, marked)
