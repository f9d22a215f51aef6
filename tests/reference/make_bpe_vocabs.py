#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Train a small byte-level BPE and write vocab-only GGUF test vocabularies.

One BPE (GPT-2 style: ByteLevel pre-tokenizer/decoder, GPT-2 bytes->unicode
alphabet) is trained with the HF `tokenizers` package on
tests/data/tokenizer/bpe_training.txt and written once per llama.cpp
pre-tokenizer type to tests/data/tokenizer/bpe-<name>.gguf:

    file name            tokenizer.ggml.pre   general.architecture   add_bos_token key
    bpe-gpt2.gguf        gpt-2                gpt2                   (absent -> false)
    bpe-llama-bpe.gguf   llama-bpe            llama                  (absent -> true, set by pre type)
    bpe-qwen2.gguf       qwen2                qwen2                  (absent -> false)
    bpe-default.gguf     default              gpt2                   true (explicit override)
    bpe-tekken.gguf      tekken               llama                  (absent -> true, set by pre type)
    bpe-gpt-4o.gguf      gpt-4o               llama                  (absent -> false)
    bpe-smaug-bpe.gguf   smaug-bpe            llama                  (absent -> false)
    bpe-dbrx.gguf        dbrx                 llama                  (absent -> false)
    bpe-refact.gguf      refact               llama                  (absent -> false)

Only tokenizer metadata is written (no tensors); llama.cpp loads such files with
vocab_only = true (llama-tokenize does). Output is byte-for-byte deterministic:
re-running the script must not change any file.

Usage: .venv/bin/python tests/reference/make_bpe_vocabs.py [--out-dir DIR] [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

# The Rust trainer parallelises with rayon; one thread keeps it deterministic.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import gguf  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "tests" / "data" / "tokenizer"
TRAINING_TEXT = DATA_DIR / "bpe_training.txt"

VOCAB_SIZE = 1536

# Special tokens come first (ids 0..n-1). CONTROL = 3, USER_DEFINED = 4.
SPECIAL_TOKENS: list[tuple[str, int]] = [
    ("<|endoftext|>", gguf.TokenType.CONTROL),     # id 0: bos = eos
    ("<|im_start|>", gguf.TokenType.CONTROL),      # id 1
    ("<|im_end|>", gguf.TokenType.CONTROL),        # id 2 (auto-detected as EOG by llama.cpp)
    ("<|user_defined|>", gguf.TokenType.USER_DEFINED),  # id 3: split out even with parse_special = false
]
BOS_ID = 0
EOS_ID = 0

# name -> (tokenizer.ggml.pre, general.architecture, add_bos_token or None = key absent)
VARIANTS: dict[str, tuple[str, str, bool | None]] = {
    "gpt2": ("gpt-2", "gpt2", None),
    "llama-bpe": ("llama-bpe", "llama", None),
    "qwen2": ("qwen2", "qwen2", None),
    "default": ("default", "gpt2", True),
    # the pre-tokenizers of the architectures users run (issue 42): Ministral 3, Phi-4-mini / Llama 4,
    # SmolLM3, OLMo 2 (cl100k, as DBRX), Granite 3
    "tekken": ("tekken", "llama", None),
    "gpt-4o": ("gpt-4o", "llama", None),
    "smaug-bpe": ("smaug-bpe", "llama", None),
    "dbrx": ("dbrx", "llama", None),
    "refact": ("refact", "llama", None),
}


def train() -> tuple[list[str], list[str]]:
    """Returns (tokens by id, merges as "left right" strings by rank)."""
    text = TRAINING_TEXT.read_bytes().decode("utf-8")
    lines = text.split("\n")
    # Keep the newlines inside the training items so that merges involving "\n"
    # (Ċ) and indentation exist.
    items = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        show_progress=False,
        special_tokens=[t for t, _ in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(items, trainer=trainer)

    model = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = model["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    tokens = [""] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    assert all(tokens), "vocab ids are not contiguous"
    assert len(set(tokens)) == len(tokens), "duplicate tokens"
    for (t, _), i in zip(SPECIAL_TOKENS, range(len(SPECIAL_TOKENS))):
        assert tokens[i] == t, (i, tokens[i], t)
    # every merge result must be a token, and no token may contain U+2581
    tokset = set(tokens)
    for m in merges:
        a, b = m.split(" ", 1)
        assert a + b in tokset, m
    assert not any("\u2581" in t for t in tokens)
    return tokens, merges


def write_gguf(path: Path, name: str, tokens: list[str], merges: list[str]) -> None:
    pre, arch, add_bos = VARIANTS[name]
    types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    for i, (_, ttype) in enumerate(SPECIAL_TOKENS):
        types[i] = int(ttype)

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tokenscope-test-bpe-{name}")
    w.add_type(gguf.GGUFType.MODEL)
    w.add_description(
        "Tokenscope test vocabulary (vocab only, no tensors): byte-level BPE trained by "
        "tests/reference/make_bpe_vocabs.py on tests/data/tokenizer/bpe_training.txt"
    )
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=DATA_DIR)
    ap.add_argument("--check", action="store_true",
                    help="do not write; regenerate into a temp dir and compare with --out-dir")
    args = ap.parse_args()

    tokens, merges = train()
    print(f"trained: {len(tokens)} tokens, {len(merges)} merges", file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        ok = True
        for name in VARIANTS:
            fname = f"bpe-{name}.gguf"
            tmp_path = Path(tmp) / fname
            write_gguf(tmp_path, name, tokens, merges)
            dest = args.out_dir / fname
            digest = sha256(tmp_path)
            if args.check:
                same = dest.exists() and sha256(dest) == digest
                ok &= same
                print(f"{'OK  ' if same else 'DIFF'} {dest}", file=sys.stderr)
            else:
                args.out_dir.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(tmp_path.read_bytes())
                print(f"{digest}  {dest} ({dest.stat().st_size} bytes)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
