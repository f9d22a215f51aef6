#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Chat-template fixtures from llama.cpp's Jinja path.

Starts llama-server (from tests/reference/build_llama_cpp.sh) on 127.0.0.1 with --jinja and the chat
model, posts each conversation below to POST /apply-template (which renders the model's own
tokenizer.chat_template with add_generation_prompt = true and returns {"prompt": ...}), stops the
server, and writes tests/data/chat/<name>-templates.json. tests/engine/test_chat_template.cpp renders
the same conversations with engine::render_chat and compares bytes.

Usage:
  .venv/bin/python tests/reference/make_template_fixtures.py [--model PATH] [--llama-server PATH] [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
OUT = REPO_ROOT / "tests" / "data" / "chat" / "qwen2.5-coder-0.5b-templates.json"
CHAT_MODEL = Path.home() / ".local/share/tokenscope/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

CONVERSATIONS = [
    ("no_system", [
        {"role": "user", "content": "What is the capital of France? Answer in one word."},
    ]),
    ("with_system", [
        {"role": "system", "content": "You are a terse geography tutor."},
        {"role": "user", "content": "What is the capital of France?"},
    ]),
    ("multi_turn", [
        {"role": "user", "content": "What is the capital of France? Answer in one word."},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "Rome"},
        {"role": "user", "content": "Write a Python function that adds two numbers.\n\nKeep it short."},
    ]),
    ("multi_turn_with_system", [
        {"role": "system", "content": "Answer in English.\nBe brief."},
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Tell me a fact about the sea."},
    ]),
]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def locate_server() -> tuple[str, dict]:
    out = subprocess.run(["bash", str(REPO_ROOT / "tests/reference/build_llama_cpp.sh")], check=True,
                         capture_output=True, text=True).stdout
    info = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return info["LLAMA_SERVER"], info


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, path: str, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def render_all(server: str, model: Path) -> list[dict]:
    port = free_port()
    proc = subprocess.Popen([server, "-m", str(model), "--jinja", "--host", "127.0.0.1", "--port", str(port),
                             "-c", "1024", "-t", "2", "-fa", "off"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while True:  # /health answers 200 once the model is loaded
            if proc.poll() is not None:
                sys.exit("llama-server exited: " + proc.stderr.read().decode(errors="replace")[-2000:])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                sys.exit("llama-server did not become ready in 120 s")
            time.sleep(0.5)
        cases = []
        for name, messages in CONVERSATIONS:
            prompt = post(port, "/apply-template", {"messages": messages})["prompt"]
            cases.append({"name": name, "messages": messages, "add_generation_prompt": True, "prompt": prompt})
        return cases
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=CHAT_MODEL)
    ap.add_argument("--llama-server", help="path to llama-server (default: run build_llama_cpp.sh)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = ap.parse_args()
    if args.llama_server:
        server, info = args.llama_server, {}
    else:
        server, info = locate_server()
    cases = render_all(server, args.model)
    doc = {
        "source": "llama-server --jinja, POST /apply-template (the model's own tokenizer.chat_template rendered by "
                  "llama.cpp's Jinja engine, add_generation_prompt = true)",
        "llama_cpp_commit": info.get("LLAMA_CPP_COMMIT", "0c1e57098"),
        "llama_cpp_source": "llama-cpp-python==0.3.36 sdist, vendor/llama.cpp",
        "model": args.model.name,
        "model_sha256": sha256_file(args.model),
        "cases": cases,
    }
    text = json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    if args.check:
        same = args.out.read_text(encoding="utf-8") == text
        print("OK: identical" if same else "MISMATCH")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {args.out} ({len(cases)} conversations)")
    for c in cases:
        print(f"--- {c['name']}\n{c['prompt']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
