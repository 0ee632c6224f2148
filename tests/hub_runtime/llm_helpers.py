"""A tiny random-weight llama GGUF (written with the ``gguf`` package; loads in milliseconds)."""

from __future__ import annotations

import string
from collections.abc import Iterable
from pathlib import Path

import gguf
import numpy as np

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def write_tiny_gguf(path: Path, words: Iterable[str] = (), *, seed: int = 0, n_ctx: int = 4096) -> Path:
    """A 2-layer llama with an SPM vocabulary (bytes, printable characters, ``words``)."""
    rng = np.random.default_rng(seed)
    toks: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    seen: set[str] = set()

    def add(tok: str, score: float, kind: int) -> None:
        if tok not in seen:
            seen.add(tok)
            toks.append(tok)
            scores.append(score)
            types.append(kind)

    for special in ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"):
        add(special, 0.0, 2 if special == "<unk>" else 3)
    for b in range(256):
        add(f"<0x{b:02X}>", 0.0, 6)
    for ch in string.printable:
        if ch not in "\t\n\r\x0b\x0c":
            add("▁" if ch == " " else ch, -10.0, 1)
    for w in words:
        for piece in (w, "▁" + w):
            for i in range(2, len(piece) + 1):  # every prefix, so SPM can merge up to the word
                add(piece[:i], -10.0 + i, 1)
    n_vocab, n_embd, n_head, n_ff, n_layer = len(toks), 64, 4, 128, 2
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("duplex-hub-tiny-random")
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(4)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    w.add_tensor("token_embd.weight", rand(n_vocab, n_embd))
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    w.add_tensor("output.weight", rand(n_vocab, n_embd))
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, np.float32))
        for part in ("q", "k", "v", "output"):
            w.add_tensor(f"blk.{i}.attn_{part}.weight", rand(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
