#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixture for steering against llama.cpp's control vectors (test_head_lab).

Tokenscope makes a steering direction from two prompts (`tokenscope-cli steer --export`, the
residual after LAYER at the last position of PLUS minus that of MINUS) and writes it as a
llama.cpp control-vector GGUF. llama.cpp (our dump_logits, built like the logit fixtures' tool,
AVX2) then evaluates three prompts with and without that control vector at STRENGTH
(`--control-vector FILE:STRENGTH`, as --control-vector-scaled does). The fixture keeps, per prompt,
its token ids and the change of the last position's logits (steered − unsteered) for the 32 tokens
that move most and 96 seeded others; the control vector itself is committed beside it, so the test
first checks that Tokenscope still makes exactly that direction.

    python3 tests/reference/make_steering_fixtures.py [--model M] [--dump-logits BIN]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_logit_fixtures import DEFAULT_CLI, build_tool, default_model, run_dump, sha256_file  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = REPO_ROOT / "tests" / "data" / "steering"
PLUS = "I love this. It is wonderful, beautiful and kind."
MINUS = "I hate this. It is awful, ugly and cruel."
PROMPTS = ["The weather today is", "My opinion of the movie:", "She opened the door and"]
LAYER = 6
STRENGTH = 4.0


def token_ids(cli: str, model: Path, text: str) -> list[int]:
    out = subprocess.run([cli, "tokenize", str(model), text, "--ids"], check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="GGUF model (default: the Gemma 3 270M Q4_K_M model)")
    ap.add_argument("--dump-logits", help="path to the dump_logits binary (default: build it)")
    ap.add_argument("--cli", default=str(DEFAULT_CLI))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    model = Path(args.model) if args.model else default_model()
    tool = args.dump_logits or build_tool()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    cvec = OUT_DIR / "gemma3-270m-cvec.gguf"
    subprocess.run([args.cli, "steer", "-m", str(model), "-p", PROMPTS[0], "--plus", PLUS, "--minus", MINUS,
                    "--layer", str(LAYER), "--strength", str(STRENGTH), "-n", "1", "--export", str(cvec)],
                   check=True, stdout=subprocess.DEVNULL)
    rng = np.random.default_rng(1)
    prompts = []
    with tempfile.TemporaryDirectory() as tmp:
        for text in PROMPTS:
            ids = token_ids(args.cli, model, text)
            entry = {"name": text, "tokens": ids}
            plain = run_dump(tool, model, entry, 1, args.threads, Path(tmp))
            steered = run_steered(tool, model, ids, cvec, args.threads, Path(tmp))
            delta = steered["logits"].astype(np.float64) - plain["logits"].astype(np.float64)
            top = np.argsort(-np.abs(delta), kind="stable")[:32]
            others = rng.choice(np.setdiff1d(np.arange(delta.size), top), size=96, replace=False)
            picked = sorted(int(i) for i in np.concatenate([top, others]))
            prompts.append({"text": text, "tokens": ids, "ids": picked,
                            "delta": [float(np.float32(steered["logits"][i]) - np.float32(plain["logits"][i]))
                                      for i in picked],
                            "max_abs_delta": float(np.abs(delta).max())})
            header = plain["header"]
    fixture = {"source": "tests/reference/make_steering_fixtures.py", "model_sha256": sha256_file(model),
               "llama_cpp_commit": header["llama_cpp_commit"], "cpu_variant": header["cpu_variant"],
               "control_vector": cvec.name, "control_vector_sha256": sha256_file(cvec), "plus": PLUS,
               "minus": MINUS, "layer": LAYER, "strength": STRENGTH, "prompts": prompts}
    (OUT_DIR / "gemma3-270m.json").write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {OUT_DIR / 'gemma3-270m.json'} and {cvec}")
    return 0


def run_steered(tool: str, model: Path, ids: list[int], cvec: Path, threads: int, tmp: Path) -> dict:
    from make_logit_fixtures import read_dump

    pf, of = tmp / "steered.ids", tmp / "steered.bin"
    pf.write_text(" ".join(str(t) for t in ids))
    subprocess.run([tool, "-m", str(model), "-o", str(of), "--n-predict", "1", "--threads", str(threads),
                    "--tokens-file", str(pf), "--control-vector", f"{cvec}:{STRENGTH}"], check=True)
    return read_dump(of)


if __name__ == "__main__":
    sys.exit(main())
