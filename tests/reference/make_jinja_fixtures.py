#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Jinja chat-template fixtures: every template of llama.cpp's models/templates/, rendered by llama.cpp.

For each models/templates/*.jinja of the llama.cpp copy that tests/reference/build_llama_cpp.sh unpacks,
this script writes a tiny random-weight llama model whose vocabulary carries that template family's BOS and
EOS token strings (TEMPLATE_TOKENS below), starts

    faketime -f "2026-03-14 09:26:53" llama-server --jinja --chat-template-file F -m tiny.gguf ...   (TZ=UTC)

on a free loopback port, posts the fixed conversations (CASES) to POST /apply-template, stops the server
and writes tests/data/chat/jinja/<template stem>.json. The templates themselves are not copied into the
repository: the C++ test reads them from $TOKENSCOPE_LLAMA_CPP_SRC/models/templates and checks
template_sha256.

Per template the fixture also records what llama.cpp decided about it (GET /props "chat_template_caps",
whether llama.cpp patched the template source before parsing, and the value of the `enable_thinking`
variable it passed — found by re-rendering each case with chat_template_kwargs {"enable_thinking": true}
and {"enable_thinking": false} and comparing with the default render).

Usage:
  .venv/bin/python tests/reference/make_jinja_fixtures.py [--llama-server PATH] [--templates DIR]
                                                         [--only SUBSTRING ...] [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import gguf  # the repo venv (gguf 0.19)
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]

OUT_DIR = REPO_ROOT / "tests" / "data" / "chat" / "jinja"
LLAMA_CPP_COMMIT = "0c1e57098"
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
REF_DIR = Path(os.environ.get("TOKENSCOPE_REF_DIR", Path.home() / ".cache/tokenscope/reference"))
DEFAULT_SERVER = REF_DIR / "build" / f"llama.cpp-{LLAMA_CPP_COMMIT}-avx2" / "bin" / "llama-server"
DEFAULT_SRC = REF_DIR / "src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"

# The fixed date: faketime's absolute (frozen) form; TZ=UTC so localtime() == UTC.
FAKE_TIME = "2026-03-14 09:26:53"
NOW_ISO = "2026-03-14T09:26:53Z"

# ---------------------------------------------------------------------------------------------------------
# template file -> (bos token text, eos token text), as llama.cpp sees them in a converted GGUF of that family
# (llama_vocab_bos / llama_vocab_eos: the tokenizer_config.json bos_token / eos_token, or config.json's ids
# where tokenizer_config has none; instruct models' eos). "assumed" marks values not checked against the
# family's released tokenizer files.
# ---------------------------------------------------------------------------------------------------------
LLAMA3 = ("<|begin_of_text|>", "<|eot_id|>")
QWEN = ("<|endoftext|>", "<|im_end|>")  # Qwen GGUFs: bos_token_id 151643 from config.json (tokenizer_config has none)
DEEPSEEK = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")  # fullwidth bars, U+2581 (as ggml-vocab-deepseek-*.gguf)
MISTRAL = ("<s>", "</s>")
COHERE = ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>")  # as ggml-vocab-command-r.gguf
GRANITE = ("<|end_of_text|>", "<|end_of_text|>")  # Granite 3.x/4.x: bos == eos
GEMMA = ("<bos>", "<eos>")  # as ggml-vocab-gemma-4.gguf; Gemma 2 the same
LFM2 = ("<|startoftext|>", "<|im_end|>")
KIMI = ("[BOS]", "<|im_end|>")
GLM = ("[gMASK]", "<|endoftext|>")  # conversion/base.py _set_vocab_glm sets bos = [gMASK] (151331)

TEMPLATE_TOKENS: dict[str, tuple[str, str]] = {
    "Apertus-8B-Instruct.jinja": MISTRAL,  # Mistral-Nemo-derived tokenizer (assumed)
    "Apriel-1.6-15b-Thinker-fixed.jinja": MISTRAL,  # Pixtral-based
    "Bielik-11B-v3.0-Instruct.jinja": ("<s>", "<|im_end|>"),  # Mistral-based, ChatML eos (assumed for v3)
    "ByteDance-Seed-OSS.jinja": ("<seed:bos>", "<seed:eos>"),  # the template also sets these itself
    "Cohere2MoE.jinja": COHERE,
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": COHERE,
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": COHERE,
    "GLM-4.6.jinja": GLM,
    "GLM-4.7-Flash.jinja": GLM,
    "GigaChat3-10B-A1.8B.jinja": MISTRAL,  # assumed
    "GigaChat3.1-10B-A1.8B.jinja": MISTRAL,  # assumed
    "HuggingFaceTB-SmolLM3-3B.jinja": ("<|begin_of_text|>", "<|im_end|>"),  # Llama-3 vocab, bos from config.json
    "Kimi-K2-Instruct.jinja": KIMI,
    "Kimi-K2-Thinking.jinja": KIMI,
    "Kimi-K3.jinja": ("[BOS]", "<|end_of_msg|>"),  # conversion/kimi_k3.py restores config eos <|end_of_msg|>
    "LFM2-8B-A1B.jinja": LFM2,
    "LFM2.5-8B-A1B.jinja": LFM2,
    "LFM2.5-Instruct.jinja": LFM2,
    "MiMo-VL.jinja": QWEN,  # Qwen2.5-VL based
    "MiniMax-M1.jinja": ("<beginning_of_sentence>", "<end_of_sentence>"),
    "MiniMax-M2.jinja": ("]~!b[", "[e~["),
    "MiniMax-M3.jinja": ("]~!b[", "[e~["),  # the template sets bos_token ']~b]' / eos_token '[e~[' itself
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": MISTRAL,
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": ("<s>", "<|im_end|>"),
    "NVIDIA-Nemotron-Nano-v2.jinja": ("<s>", "<SPECIAL_12>"),  # <SPECIAL_12> ends a turn in this template
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": ("<|begin_of_text|>", "<|im_end|>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": ("<|begin_of_text|>", "<|im_end|>"),
    "Qwen-QwQ-32B.jinja": QWEN,
    "Qwen-Qwen2.5-7B-Instruct.jinja": QWEN,
    "Qwen-Qwen3-0.6B.jinja": QWEN,
    "Qwen3-Coder.jinja": QWEN,
    "Qwen3.5-4B.jinja": QWEN,
    "Reka-Edge.jinja": ("<|endoftext|>", "<sep>"),  # cl100k-style vocab, turns end with <sep> (assumed)
    "Spark2.5.jinja": ("<｜start▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),  # as the template writes them (assumed)
    "StepFun3.5-Flash.jinja": ("<｜begin▁of▁sentence｜>", "<|im_end|>"),  # assumed
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": DEEPSEEK,
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": DEEPSEEK,
    "deepseek-ai-DeepSeek-V3.1.jinja": DEEPSEEK,
    "deepseek-ai-DeepSeek-V3.2.jinja": DEEPSEEK,
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": DEEPSEEK,
    "deepseek-ai-DeepSeek-V4.jinja": DEEPSEEK,
    "fireworks-ai-llama-3-firefunction-v2.jinja": LLAMA3,
    "google-gemma-2-2b-it.jinja": GEMMA,
    "google-gemma-4-31B-it-interleaved.jinja": GEMMA,
    "google-gemma-4-31B-it.jinja": GEMMA,
    "ibm-granite-granite-3.3-2B-Instruct.jinja": GRANITE,
    "ibm-granite-granite-4.0.jinja": GRANITE,
    "ibm-granite-granite-4.1.jinja": GRANITE,
    "inclusionai-ling-3.0-flash.jinja": ("<|startoftext|>", "<|endoftext|>"),  # Ling/Bailing vocab (assumed)
    "llama-cpp-deepseek-r1.jinja": DEEPSEEK,
    "llama-cpp-rwkv-world.jinja": ("<s>", "<s>"),  # conversion/base.py _set_vocab_rwkv_world: bos = eos = 0 "<s>"
    "meetkai-functionary-medium-v3.1.jinja": LLAMA3,
    "meetkai-functionary-medium-v3.2.jinja": LLAMA3,
    "meta-llama-Llama-3.1-8B-Instruct.jinja": LLAMA3,
    "meta-llama-Llama-3.2-3B-Instruct.jinja": LLAMA3,
    "meta-llama-Llama-3.3-70B-Instruct.jinja": LLAMA3,
    "microsoft-Phi-3.5-mini-instruct.jinja": ("<s>", "<|endoftext|>"),  # as ggml-vocab-phi-3.gguf
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": MISTRAL,
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": MISTRAL,
    "moonshotai-Kimi-K2.jinja": KIMI,
    "muse-glimmer.jinja": ("<|startoftext|>", "<|endoftext|>"),  # assumed; turns end with <|eot|> (eot id)
    "openai-gpt-oss-120b.jinja": ("<|startoftext|>", "<|return|>"),
    "openbmb-MiniCPM5-1B.jinja": ("<s>", "<|im_end|>"),  # MiniCPM4-style vocab (assumed)
    "poolside-Laguna-S-2.1.jinja": ("〈|EOS|〉", "〈|EOS|〉"),  # conversion/laguna.py: token 2 is EOS and BOS
    "poolside-Laguna-XS-2.1.jinja": ("〈|EOS|〉", "〈|EOS|〉"),
    "poolside-Laguna-XS.2.jinja": ("〈|EOS|〉", "〈|EOS|〉"),
    # the template overrides bos_token/eos_token with these ('<｜hy_...{}｜>'.format(':opensource'))
    "tencent-Hy3.jinja": ("<｜hy_begin_of_sentence:opensource｜>", "<｜hy_eos:opensource｜>"),
    "unsloth-Apriel-1.5.jinja": MISTRAL,
    "unsloth-mistral-Devstral-Small-2507.jinja": MISTRAL,
    "upstage-Solar-Open-100B.jinja": ("<|startoftext|>", "<|endoftext|>"),  # conversion/glm.py SolarOpenModel
}

# ---------------------------------------------------------------------------------------------------------
# The conversations. Every one ends with a user message; add_generation_prompt is true except in the last.
# ---------------------------------------------------------------------------------------------------------
THREE_TURNS = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And its population?\nA rough number is fine."},
    {"role": "assistant", "content": "About 2.1 million people live in the city itself."},
    {"role": "user", "content": "Thanks! Name one famous museum there."},
]
CASES: list[tuple[str, list[dict], bool]] = [
    ("no_system", [
        {"role": "user", "content": "Hello! Can you help me plan a trip?"},
    ], True),
    ("system", [
        {"role": "system", "content": "You are a concise travel assistant."},
        {"role": "user", "content": "Suggest one city to visit in Italy."},
    ], True),
    ("three_turns", THREE_TURNS, True),
    ("assistant_whitespace", [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "  \n Paris is the capital.  \n\n"},
        {"role": "user", "content": "And of Spain?"},
    ], True),
    ("three_turns_no_generation_prompt", THREE_TURNS, False),
]


# ---------------------------------------------------------------------------------------------------------
# The tiny model
# ---------------------------------------------------------------------------------------------------------
def bytes_to_unicode() -> list[str]:
    """GPT-2's byte -> printable character table (the alphabet of byte-level BPE vocabularies)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def write_tiny_model(path: Path, bos: str, eos: str) -> None:
    """1-layer llama, n_embd 32, F32 random weights, context 512; byte-level BPE vocab with bos/eos CONTROL tokens.

    add_bos_token / add_eos_token are false, so llama.cpp cuts no BOS/EOS text from the rendered prompt
    (common_chat_template_direct_apply_impl strips a leading bos_token only when the vocab adds BOS itself).
    """
    specials = [bos] if bos == eos else [bos, eos]
    byte_tokens = bytes_to_unicode()
    merges = ["Ġ t", "h e", "i n", "Ġ a"]
    merged = [m.replace(" ", "") for m in merges]
    tokens = specials + byte_tokens + merged
    types = [gguf.TokenType.CONTROL] * len(specials) + [gguf.TokenType.NORMAL] * (len(byte_tokens) + len(merged))
    n_vocab, n_embd, n_ff, n_head = len(tokens), 32, 64, 4

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tokenscope jinja fixture model")
    w.add_context_length(512)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0 if bos == eos else 1)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)

    rng = np.random.default_rng(1234)

    def t(name: str, *shape: int, ones: bool = False) -> None:
        a = np.ones(shape, np.float32) if ones else (rng.standard_normal(shape) * 0.02).astype(np.float32)
        w.add_tensor(name, a)

    t("token_embd.weight", n_vocab, n_embd)
    t("output_norm.weight", n_embd, ones=True)
    t("output.weight", n_vocab, n_embd)
    t("blk.0.attn_norm.weight", n_embd, ones=True)
    for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
        t(f"blk.0.{n}.weight", n_embd, n_embd)
    t("blk.0.ffn_norm.weight", n_embd, ones=True)
    t("blk.0.ffn_gate.weight", n_ff, n_embd)
    t("blk.0.ffn_up.weight", n_ff, n_embd)
    t("blk.0.ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---------------------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port: int, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"error": {"message": raw.decode(errors="replace")}}


def load_error_text(stderr: str) -> str:
    """The lines of llama-server's log that say why the template was refused."""
    keep = [ln.strip() for ln in stderr.splitlines()
            if ("error" in ln.lower() or "exception" in ln.lower()) and "chat template" in ln.lower()
            or "common_chat_templates_init: error" in ln or "failed to initialize chat template" in ln]
    if not keep:
        keep = [ln.strip() for ln in stderr.splitlines() if "error" in ln.lower()][-5:]
    return "\n".join(keep) if keep else stderr.strip()[-2000:]


class Server:
    def __init__(self, exe: str, model: Path, template: Path):
        self.port = free_port()
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ, TZ="UTC", DONT_FAKE_MONOTONIC="1")
        cmd = ["faketime", "-f", FAKE_TIME, exe, "--jinja", "--chat-template-file", str(template),
               "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port), "-c", "512", "-np", "1",
               "-t", "1", "-tb", "1", "-fa", "off", "--no-warmup", "--log-colors", "off"]
        # start_new_session: the server gets its own process group, so stop() kills exactly it (and nothing else)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, env=env,
                                     start_new_session=True)

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def wait_ready(self, timeout: float = 60) -> str | None:
        """None when /health answers 200; else the load error text."""
        deadline = time.time() + timeout
        while True:
            if self.proc.poll() is not None:
                return load_error_text(self.stderr())
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return None
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"llama-server not ready after {timeout} s:\n{self.stderr()[-2000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, 9)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        self.log.close()


def apply_template(port: int, messages: list[dict], add_generation_prompt: bool,
                   enable_thinking: bool | None = None) -> tuple[str | None, str | None]:
    body: dict = {"messages": messages}
    if not add_generation_prompt:
        body["add_generation_prompt"] = False
    if enable_thinking is not None:
        body["chat_template_kwargs"] = {"enable_thinking": enable_thinking}
    status, res = http(port, "/apply-template", body)
    if status == 200 and "prompt" in res:
        return res["prompt"], None
    err = res.get("error", res)
    return None, err.get("message", json.dumps(err, ensure_ascii=False)) if isinstance(err, dict) else str(err)


def normalize_source(text: str) -> str:
    # what llama.cpp's jinja lexer keeps of the file (lexer.cpp: CRLF/CR -> LF, one trailing newline removed)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text[:-1] if text.endswith("\n") else text


def render_template(exe: str, template: Path, model: Path) -> dict:
    raw = template.read_bytes()
    bos, eos = TEMPLATE_TOKENS[template.name]
    doc: dict = {
        "template": template.name,
        "template_sha256": hashlib.sha256(raw).hexdigest(),
        "bos_token": bos,
        "eos_token": eos,
        "now": NOW_ISO,
        "llama_cpp_commit": LLAMA_CPP_COMMIT,
        "load_error": None,
    }
    server = Server(exe, model, template)
    try:
        err = server.wait_ready()
        if err is not None:
            if "chat template" not in err:  # a refusal must come from the template, not from the model or flags
                raise RuntimeError(f"{template.name}: llama-server failed, not on the template:\n{server.stderr()[-3000:]}")
            doc["load_error"] = err
            doc["cases"] = []
            return doc
        _, props = http(server.port, "/props")
        if props.get("bos_token") != bos or props.get("eos_token") != eos:
            raise RuntimeError(f"{template.name}: served bos/eos {props.get('bos_token')!r}/{props.get('eos_token')!r}"
                               f" != {bos!r}/{eos!r}")
        src = props.get("chat_template", "")
        file_src = raw.decode("utf-8")
        patched = src not in (file_src, normalize_source(file_src))
        cases = []
        thinking_votes: set[bool] = set()
        for name, messages, agp in CASES:
            prompt, error = apply_template(server.port, messages, agp)
            cases.append({"name": name, "messages": messages, "add_generation_prompt": agp,
                          "prompt": prompt, "error": error})
            if prompt is None:
                continue
            p_true, _ = apply_template(server.port, messages, agp, True)
            p_false, _ = apply_template(server.port, messages, agp, False)
            if p_true != p_false:
                if prompt == p_true:
                    thinking_votes.add(True)
                elif prompt == p_false:
                    thinking_votes.add(False)
                else:
                    raise RuntimeError(f"{template.name}/{name}: default render matches neither enable_thinking value")
        if len(thinking_votes) > 1:
            raise RuntimeError(f"{template.name}: inconsistent enable_thinking across cases")
        doc["llama_cpp"] = {
            # value of the `enable_thinking` variable llama-server passed (null: no case depends on it)
            "enable_thinking": thinking_votes.pop() if thinking_votes else None,
            "source_patched": patched,  # common_chat_templates_init replaced a GPT-OSS / Mistral check
            "caps": props.get("chat_template_caps", {}),
        }
        doc["cases"] = cases
        return doc
    finally:
        server.stop()


def locate(args) -> tuple[str, Path]:
    src = Path(args.llama_cpp_src) if args.llama_cpp_src else \
        Path(os.environ["TOKENSCOPE_LLAMA_CPP_SRC"]) if os.environ.get("TOKENSCOPE_LLAMA_CPP_SRC") else DEFAULT_SRC
    exe = args.llama_server or str(DEFAULT_SERVER)
    if not Path(exe).is_file():
        out = subprocess.run(["bash", str(REPO_ROOT / "tests/reference/build_llama_cpp.sh")], check=True,
                             capture_output=True, text=True).stdout
        info = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        exe = str(Path(info["LLAMA_CPP_BIN_DIR"]) / "llama-server")
        src = Path(info["LLAMA_CPP_SRC"]) if not args.llama_cpp_src else src
    if shutil.which("faketime") is None:
        sys.exit("faketime not found (Debian: apt-get install -y faketime)")
    return exe, src


def dump(doc: dict) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=1, sort_keys=False) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-server", help=f"path to llama-server (default: {DEFAULT_SERVER})")
    ap.add_argument("--llama-cpp-src", help="llama.cpp source tree (default: $TOKENSCOPE_LLAMA_CPP_SRC, else "
                                            f"{DEFAULT_SRC})")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    ap.add_argument("--only", nargs="*", default=[], help="only templates whose file name contains one of these")
    ap.add_argument("--check", action="store_true", help="regenerate in memory and compare with the committed files")
    args = ap.parse_args()
    exe, src = locate(args)
    templates = sorted((src / "models" / "templates").glob("*.jinja"))
    if args.only:
        templates = [t for t in templates if any(s in t.name for s in args.only)]
    unknown = [t.name for t in templates if t.name not in TEMPLATE_TOKENS]
    if unknown:
        sys.exit("no (bos, eos) entry in TEMPLATE_TOKENS for: " + ", ".join(unknown))
    if not args.only:
        missing = sorted(set(TEMPLATE_TOKENS) - {t.name for t in templates})
        if missing:
            sys.exit("TEMPLATE_TOKENS lists templates that are not in the source tree: " + ", ".join(missing))

    t0 = time.time()
    mismatches = 0
    counts = {"loaded": 0, "refused": 0, "rendered": 0, "errored": 0}
    with tempfile.TemporaryDirectory(prefix="tokenscope-jinja-") as tmp:
        models: dict[tuple[str, str], Path] = {}
        for template in templates:
            pair = TEMPLATE_TOKENS[template.name]
            if pair not in models:
                models[pair] = Path(tmp) / f"tiny-{len(models)}.gguf"
                write_tiny_model(models[pair], *pair)
            doc = render_template(exe, template, models[pair])
            if doc["load_error"] is not None:
                counts["refused"] += 1
            else:
                counts["loaded"] += 1
                for c in doc["cases"]:
                    counts["rendered" if c["error"] is None else "errored"] += 1
            out = args.out_dir / (template.stem + ".json")
            text = dump(doc)
            status = "refused" if doc["load_error"] else \
                f"{sum(c['error'] is None for c in doc['cases'])}/{len(doc['cases'])} rendered"
            if args.check:
                old = out.read_text(encoding="utf-8") if out.is_file() else None
                if old == text:
                    print(f"ok       {template.name}: {status}")
                else:
                    mismatches += 1
                    print(f"MISMATCH {template.name}: {'missing' if old is None else describe_diff(json.loads(old), doc)}")
            else:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(text, encoding="utf-8", newline="\n")
                print(f"wrote    {out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}: {status}")
    print(f"{len(templates)} templates in {time.time() - t0:.0f} s: {counts['loaded']} loaded, "
          f"{counts['refused']} refused; cases {counts['rendered']} rendered, {counts['errored']} errored")
    if args.check:
        if not args.only:
            stale = sorted({p.name for p in args.out_dir.glob("*.json")} - {t.stem + ".json" for t in templates})
            for s in stale:
                mismatches += 1
                print(f"MISMATCH {s}: committed, but no such template")
        print("OK: identical" if mismatches == 0 else f"{mismatches} file(s) differ")
        return 0 if mismatches == 0 else 1
    return 0


def describe_diff(old: dict, new: dict) -> str:
    parts = [k for k in sorted(set(old) | set(new)) if k != "cases" and old.get(k) != new.get(k)]
    oc = {c["name"]: c for c in old.get("cases", [])}
    nc = {c["name"]: c for c in new.get("cases", [])}
    for name in sorted(set(oc) | set(nc)):
        if oc.get(name) != nc.get(name):
            a, b = oc.get(name, {}), nc.get(name, {})
            detail = ""
            if isinstance(a.get("prompt"), str) and isinstance(b.get("prompt"), str):
                i = next((i for i, (x, y) in enumerate(zip(a["prompt"], b["prompt"])) if x != y),
                         min(len(a["prompt"]), len(b["prompt"])))
                detail = f" (prompt differs at char {i}: {a['prompt'][i:i + 30]!r} vs {b['prompt'][i:i + 30]!r})"
            parts.append(f"case {name}{detail}")
    return "; ".join(parts) or "formatting only"


if __name__ == "__main__":
    sys.exit(main())
