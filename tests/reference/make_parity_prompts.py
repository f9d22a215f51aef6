#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the grown parity prompt set (tests/data/logits/prompts-grown.json) from a seed.

The twelve hand-written prompts of prompts.json show that the engine follows llama.cpp on the texts
someone chose; these are meant to show it on texts nobody chose. A seeded generator composes them
from word banks and templates, by kind, so that the set is varied and reproducible:

  prose         story openings and descriptions, one to four sentences
  fact          encyclopedic sentences and question/answer pairs
  code          Python, C, JavaScript, Rust, SQL and shell, cut mid-function
  chat          conversations as messages (formatted with each model's own template by
                make_logit_fixtures.py --chat-format), one to three turns, some with a system line
  multilingual  Chinese, French, German, Greek, Hindi, Italian, Japanese, Korean, Portuguese, Russian
  structured    JSON, CSV, YAML, HTML, Markdown tables
  numbers       arithmetic, sequences, dates, lists
  edge          one word, whitespace runs, repetition, emoji, punctuation, a long identifier
  long          500–1,300 tokens (past llama.cpp's 512-token micro-batch and Gemma 3's 512-token
                sliding window): chapters, source files, long conversations

Usage: python3 tests/reference/make_parity_prompts.py [--seed 2026] [--out FILE]
The output is deterministic for a seed (Python's random.Random; no hash randomisation involved).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "logits" / "prompts-grown.json"

NAMES = ["Mara", "Tomas", "Ines", "Kofi", "Lena", "Arjun", "Yuki", "Olek", "Priya", "Sven", "Amara", "Diego"]
PLACES = ["a fishing village on the northern coast", "the last house on Willow Street", "a mountain monastery",
          "a crowded train station", "an abandoned observatory", "a bakery that never closed",
          "a research station in Antarctica", "the valley below the old dam", "a small bookshop in Lisbon",
          "a space colony orbiting Mars"]
CREATURES = ["an old clockmaker", "a curious fox", "a retired sea captain", "a girl who collected maps",
             "a robot that wanted to paint", "two brothers who never agreed", "a nervous young doctor",
             "a dragon afraid of heights", "a night-shift nurse", "a detective with a bad memory"]
EVENTS = ["a letter arrived with no return address", "the river froze overnight", "the power went out",
          "a stranger asked for directions to a town that did not exist", "the bells rang thirteen times",
          "the old radio began to speak", "every clock in town stopped at noon", "a storm closed the only road"]
FEELINGS = ["quietly hopeful", "restless", "afraid but determined", "delighted", "suspicious", "exhausted"]
OPENERS = ["Once upon a time", "Long ago", "On the coldest night of the year", "Nobody remembers exactly when",
           "It was the summer of 1987 when", "Every morning"]

FACTS = [
    ("Photosynthesis", "is the process by which green plants use sunlight to turn water and carbon dioxide into"),
    ("The Pacific Ocean", "is the largest and deepest of the Earth's oceans, covering about"),
    ("DNA", "carries the genetic instructions of living organisms and is made of two strands that"),
    ("The Roman Empire", "reached its greatest extent under the emperor Trajan, when it stretched from"),
    ("A black hole", "is a region of spacetime where gravity is so strong that"),
    ("The mitochondrion", "is often called the powerhouse of the cell because"),
    ("Mount Everest", "rises 8,849 metres above sea level on the border between"),
    ("The printing press", "was developed by Johannes Gutenberg around 1440 and"),
    ("Vaccines", "train the immune system to recognise a pathogen by"),
    ("Plate tectonics", "explains earthquakes, volcanoes and mountain ranges as the result of"),
    ("The speed of light", "in a vacuum is exactly 299,792,458 metres per second, which means"),
    ("Honeybees", "communicate the location of flowers to each other by"),
]
QUESTIONS = ["Why is the sky blue?", "How do airplanes stay in the air?", "What causes the seasons on Earth?",
             "Why do cats purr?", "How does a refrigerator keep food cold?", "What is the difference between weather and climate?",
             "Why does bread rise?", "How do noise-cancelling headphones work?", "What is inflation?",
             "Why do we dream?"]

PY_FUNCS = [
    ("merge_intervals", "intervals: list[tuple[int, int]]", "list[tuple[int, int]]",
     "Merge overlapping closed intervals and return them sorted by start."),
    ("word_frequencies", "text: str, top: int = 10", "list[tuple[str, int]]",
     "Count words case-insensitively and return the `top` most common ones."),
    ("parse_duration", "spec: str", "int", "Convert a duration like '1h30m15s' to seconds."),
    ("flatten", "nested: list", "list", "Flatten arbitrarily nested lists into one list."),
    ("moving_average", "values: list[float], window: int", "list[float]",
     "Return the simple moving average of `values` over `window` items."),
    ("is_balanced", "expr: str", "bool", "Check that (), [] and {} in `expr` are balanced."),
    ("chunked", "items: list, size: int", "list[list]", "Split `items` into lists of at most `size` items."),
    ("levenshtein", "a: str, b: str", "int", "Return the edit distance between two strings."),
]
C_FUNCS = [
    ("size_t count_lines(const char *path)", "Count the newline characters in a file; return 0 if it cannot be opened."),
    ("int binary_search(const int *a, size_t n, int key)", "Return the index of key in the sorted array a, or -1."),
    ("void matrix_multiply(const float *a, const float *b, float *c, int n)", "c = a * b for n x n row-major matrices."),
    ("char *str_trim(char *s)", "Remove leading and trailing whitespace in place and return s."),
]
JS_FUNCS = [
    ("debounce(fn, waitMs)", "Return a function that delays calling fn until waitMs have passed without a call."),
    ("async function fetchJson(url, { retries = 3 } = {})", "Fetch url and parse JSON, retrying on network errors."),
    ("function groupBy(items, key)", "Group an array of objects by the value of key."),
]
RUST_FUNCS = [
    ("fn median(values: &mut [f64]) -> Option<f64>", "Median of the values, None when empty."),
    ("fn parse_kv(line: &str) -> Result<(String, String), ParseError>", "Parse a `key = value` line."),
]
SQL = ["-- Top five customers by total order value in 2023\nSELECT c.name, SUM(o.total) AS spent\nFROM customers c\nJOIN orders o ON o.customer_id = c.id\nWHERE",
       "CREATE TABLE books (\n    id INTEGER PRIMARY KEY,\n    title TEXT NOT NULL,\n    author_id INTEGER REFERENCES authors(id),\n",
       "-- Monthly active users\nWITH events AS (\n    SELECT user_id, date_trunc('month', created_at) AS month\n    FROM"]
SHELL = ["#!/bin/sh\n# Back up the home directory to a dated archive\nset -eu\ndest=\"/backup/$(date +%F)\"\n",
         "# Find the ten largest files under the current directory\nfind . -type f -printf '%s %p\\n' |",
         "#!/usr/bin/env bash\nfor f in *.png; do\n    "]

SYSTEMS = ["You are a helpful assistant.", "You are a concise assistant. Answer in one paragraph.",
           "You are a senior Python developer who reviews code carefully.", "You are a friendly tutor for children."]
USER_ASKS = ["Can you explain what a hash table is?", "Write a haiku about autumn rain.",
             "How do I reverse a list in Python?", "What should I pack for a week in Iceland?",
             "Summarise the plot of Romeo and Juliet in two sentences.", "Give me three ideas for a birthday party.",
             "What is the capital of Australia, and why isn't it Sydney?", "Explain recursion to a ten-year-old.",
             "Translate 'good morning, how are you?' into Spanish.", "Why does my C program print garbage after a string?",
             "What's a good way to learn to play the guitar?", "Write a SQL query that counts orders per day."]
ASSISTANT_REPLIES = ["Sure! Here is a short answer.", "Of course. Let me explain step by step.",
                     "Good question. There are a few parts to it.", "Here you go:"]
FOLLOW_UPS = ["Can you give an example?", "Thanks! And what about the edge cases?", "Make it shorter, please.",
              "Why does that work?", "Could you write it in C instead?"]

MULTI = {
    "french": ["Le petit café au coin de la rue ouvre tous les jours à sept heures, et", "Quand j'étais enfant, ma grand-mère me racontait"],
    "german": ["Die Wissenschaftler untersuchten das Verhalten von Bienen bei Regen und stellten fest, dass", "Am Wochenende fahren wir mit dem Fahrrad an den See, weil"],
    "italian": ["La ricetta tradizionale del risotto alla milanese richiede", "Ogni estate la piazza del paese si riempie di"],
    "portuguese": ["O navegador português chegou à costa depois de", "A feira de domingo vende frutas frescas, pão caseiro e"],
    "chinese": ["春天来了，公园里的花都开了，很多人", "这个城市的地铁系统非常方便，因为"],
    "japanese": ["東京の朝は早く、駅にはもう多くの人が", "私の趣味は写真を撮ることで、特に"],
    "korean": ["서울의 겨울은 춥지만 사람들은", "오늘 아침에 친구와 함께 시장에 가서"],
    "russian": ["Учёные обнаружили новый вид лягушек в лесах", "Когда поезд остановился на маленькой станции,"],
    "hindi": ["भारत में त्योहारों का मौसम आते ही", "मेरे गाँव में हर सुबह"],
    "greek": ["Η Αθήνα είναι μια από τις αρχαιότερες πόλεις του κόσμου και", "Το καλοκαίρι στα νησιά"],
}

ITEMS = ["apples", "batteries", "a notebook", "sunscreen", "a torch", "rope", "tea", "a map", "socks", "bread"]


def prose(r: random.Random) -> str:
    name, place, who = r.choice(NAMES), r.choice(PLACES), r.choice(CREATURES)
    s = [f"{r.choice(OPENERS)}, in {place}, there lived {who} named {name}."]
    if r.random() < 0.7:
        s.append(f"One day {r.choice(EVENTS)}, and {name} felt {r.choice(FEELINGS)}.")
    if r.random() < 0.5:
        s.append(f"{name} had always believed that {r.choice(EVENTS)} only in stories.")
    s.append(r.choice([f"So {name}", "That evening", f"Without telling anyone, {name}", "At first"]))
    return " ".join(s)


def fact(r: random.Random) -> str:
    if r.random() < 0.5:
        subject, rest = r.choice(FACTS)
        return f"{subject} {rest}"
    q = r.choice(QUESTIONS)
    style = r.choice(["Question: {q}\nAnswer:", "Q: {q}\nA:", "{q}\n\n", "FAQ\n\n**{q}**\n\n"])
    return style.format(q=q)


def code(r: random.Random) -> str:
    kind = r.choice(["py", "py", "py", "c", "js", "rust", "sql", "sh"])
    if kind == "py":
        name, args, ret, doc = r.choice(PY_FUNCS)
        head = "from __future__ import annotations\n\n" if r.random() < 0.4 else ""
        body = r.choice(["    ", "    if not ", "    result = ", "    for "])
        return f'{head}def {name}({args}) -> {ret}:\n    """{doc}"""\n{body}'
    if kind == "c":
        sig, doc = r.choice(C_FUNCS)
        return f"#include <stdio.h>\n#include <stdlib.h>\n\n/* {doc} */\n{sig}\n{{\n    "
    if kind == "js":
        sig, doc = r.choice(JS_FUNCS)
        kw = "" if sig.startswith(("async", "function")) else "function "
        return f"/**\n * {doc}\n */\nexport {kw}{sig} {{\n  "
    if kind == "rust":
        sig, doc = r.choice(RUST_FUNCS)
        return f"/// {doc}\npub {sig} {{\n    "
    if kind == "sql":
        return r.choice(SQL)
    return r.choice(SHELL)


def chat(r: random.Random) -> list[dict]:
    msgs = []
    if r.random() < 0.4:
        msgs.append({"role": "system", "content": r.choice(SYSTEMS)})
    asks = r.sample(USER_ASKS, 3)
    for turn in range(r.choice([1, 1, 2, 3])):
        if turn:
            msgs.append({"role": "assistant", "content": r.choice(ASSISTANT_REPLIES)})
            msgs.append({"role": "user", "content": r.choice(FOLLOW_UPS) if r.random() < 0.5 else asks[turn]})
        else:
            msgs.append({"role": "user", "content": asks[0]})
    return msgs


def multilingual(r: random.Random, lang: str) -> str:
    return r.choice(MULTI[lang])


def structured(r: random.Random) -> str:
    kind = r.choice(["json", "csv", "yaml", "html", "md"])
    name = r.choice(NAMES)
    if kind == "json":
        return (f'{{\n  "id": {r.randint(100, 9999)},\n  "name": "{name}",\n  "tags": ["{r.choice(ITEMS)}", '
                f'"{r.choice(ITEMS)}"],\n  "active": {r.choice(["true", "false"])},\n  "address": {{\n    "city": "')
    if kind == "csv":
        rows = "\n".join(f"{r.choice(NAMES)},{r.randint(18, 90)},{r.choice(['Oslo', 'Lima', 'Pune', 'Leeds'])}"
                         for _ in range(r.randint(2, 5)))
        return f"name,age,city\n{rows}\n"
    if kind == "yaml":
        return (f"services:\n  web:\n    image: nginx:1.{r.randint(20, 27)}\n    ports:\n      - \"8080:80\"\n"
                f"  db:\n    image: postgres:{r.randint(13, 16)}\n    environment:\n      ")
    if kind == "html":
        return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>{name}'s page"
                f"</title>\n</head>\n<body>\n  <ul>\n    <li>")
    return (f"| Item | Qty | Price |\n|------|----:|------:|\n| {r.choice(ITEMS)} | {r.randint(1, 9)} | "
            f"{r.randint(1, 20)}.{r.randint(10, 99)} |\n| ")


def numbers(r: random.Random) -> str:
    kind = r.choice(["sum", "seq", "date", "list", "word"])
    if kind == "sum":
        a, b = r.randint(10, 999), r.randint(10, 999)
        return f"{a} + {b} = "
    if kind == "seq":
        start, step = r.randint(1, 20), r.randint(2, 9)
        return ", ".join(str(start + step * i) for i in range(r.randint(4, 8))) + ","
    if kind == "date":
        return f"The meeting was moved from {r.randint(1, 28)} March {r.randint(1990, 2030)} to"
    if kind == "list":
        items = r.sample(ITEMS, 3)
        return "Shopping list:\n" + "".join(f"{i + 1}. {it}\n" for i, it in enumerate(items)) + "4."
    return f"If a train travels {r.randint(40, 300)} km in {r.randint(2, 5)} hours, its average speed is"


def edge(r: random.Random, i: int) -> str:
    choices = [
        lambda: r.choice(["The", "def", "Hello", "1", "#"]),
        lambda: "the " * r.randint(8, 30),
        lambda: "    \n\n\t  " + r.choice(NAMES),
        lambda: r.choice(["🙂🚀🌍 ", "✨ Launch day! 🎉", "I ❤️ 🍕 and"]),
        lambda: r.choice(["!!!???...", "--- *** ---\n", "((((", "\"'`"]),
        lambda: "getUser" + "".join(w.capitalize() for w in r.sample(["account", "profile", "settings", "cache", "token", "session", "billing"], 5)) + "(",
        lambda: "https://example.org/" + "/".join(r.sample(["api", "v2", "users", "42", "orders", "items"], 4)) + "?page=",
        lambda: "ALL CAPS HEADLINE: " + r.choice(EVENTS).upper(),
    ]
    return choices[i % len(choices)]()


def long_text(r: random.Random, kind: str) -> str | list[dict]:
    if kind == "chapter":
        paras = []
        for c in range(r.randint(5, 8)):
            paras.append(" ".join(prose(r).rsplit(" ", 1)[0] + "." for _ in range(r.randint(2, 3))))
            if r.random() < 0.4:
                subject, rest = r.choice(FACTS)
                paras.append(f"{subject} {rest} many other things, as {r.choice(NAMES)} later learned.")
        return "Chapter One\n\n" + "\n\n".join(paras) + "\n\n"
    if kind == "source":
        parts = ['"""Utilities for the inventory service."""\n\nimport json\nimport logging\n\nlog = logging.getLogger(__name__)\n']
        for name, args, ret, doc in r.sample(PY_FUNCS, 8):
            first = args.split(":")[0]
            parts.append(f'\ndef {name}({args}) -> {ret}:\n    """{doc}\n\n    Raises ValueError when `{first}` is empty.\n    """\n'
                         f'    if not {first}:\n        raise ValueError("{name}: empty {first}")\n'
                         f'    log.debug("{name}(%r)", {first})\n    raise NotImplementedError\n')
        parts.append("\n\nclass Inventory:\n    def __init__(self):\n        self.items = {}\n\n    def add(self, ")
        return "".join(parts)
    msgs = [{"role": "system", "content": r.choice(SYSTEMS)}]
    for ask in r.sample(USER_ASKS, 7):
        msgs.append({"role": "user", "content": ask})
        msgs.append({"role": "assistant", "content": r.choice(ASSISTANT_REPLIES) + " " + prose(r) + "."})
    msgs.append({"role": "user", "content": r.choice(FOLLOW_UPS)})
    return msgs


def make(seed: int) -> list[dict]:
    r = random.Random(seed)
    out: list[dict] = []

    def add(kind: str, value, n: int) -> None:
        entry = {"name": f"{kind}_{n:02d}", "category": kind}
        entry["messages" if isinstance(value, list) else "text"] = value
        out.append(entry)

    for n in range(14):
        add("prose", prose(r), n)
    for n in range(10):
        add("fact", fact(r), n)
    for n in range(16):
        add("code", code(r), n)
    for n in range(12):
        add("chat", chat(r), n)
    for n, lang in enumerate(sorted(MULTI)):
        add("multilingual", multilingual(r, lang), n)
    for n in range(8):
        add("structured", structured(r), n)
    for n in range(8):
        add("numbers", numbers(r), n)
    for n in range(8):
        add("edge", edge(r, n), n)
    for n, kind in enumerate(["chapter", "source", "conversation"] * 3 + ["chapter"]):
        entry_value = long_text(r, kind)
        add("long", entry_value, n)
        out[-1]["min_tokens"] = 500
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    prompts = make(args.seed)
    doc = {"generator": f"tests/reference/make_parity_prompts.py --seed {args.seed}", "prompts": prompts}
    Path(args.out).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(prompts)} prompts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
