#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""The table of a side-by-side run against llama-bench (types_vs_llama_cpp.sh, moe_vs_llama_cpp.sh).

Reads, for each case i = 1 … N in OUT: i.what ("NAME SIZE_BYTES"), i.shape (optional: one line printed
before the case's rows), i.theirs.0 / i.theirs.1 (llama-bench -o jsonl with --repack 0 / 1; missing or
empty when that variant failed), i.ours.pp / i.ours.tg (tokenscope-cli bench --json); OUT/probe the read
bandwidth probe (optional). Prints each test's speeds, Tokenscope over the faster llama.cpp, decode's
bandwidth share, and the cases below llama.cpp.

usage: compare_llama_bench.py OUT N PP TG [--name-header type] [--name-width 8] [--gib]
"""
import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("n", type=int)
    ap.add_argument("pp")
    ap.add_argument("tg")
    ap.add_argument("--name-header", default="type")
    ap.add_argument("--name-width", type=int, default=8)
    ap.add_argument("--gib", action="store_true", help="sizes in GiB (default MiB)")
    a = ap.parse_args()
    out, width = a.out, a.name_width
    try:
        probe = json.load(open(f"{out}/probe"))["tg"]["probe"]["read_bytes_per_second"]
        print(f"read bandwidth probe: {probe / 1e9:.2f} GB/s")
    except Exception:
        probe = None
    print("(t/s: mean over the repetitions ± standard deviation; ratio: Tokenscope / the faster llama.cpp)")
    size_header = f"{'size':>7}" if a.gib else f"{'size':>9}"
    print(f"{a.name_header:<{width}}{size_header} {'test':<7}{'llama.cpp rpk0':>16}{'rpk1':>16}{'tokenscope':>16}"
          f"{'ratio':>7}{'decode GB/s':>13}{'share':>7}")
    below = []
    for i in range(1, a.n + 1):
        name, size = open(f"{out}/{i}.what").read().split()
        try:
            print(f"{name}: {open(f'{out}/{i}.shape').read().strip()} (architecture, parameters, active, experts, per token)")
        except OSError:
            pass
        rows = {}
        for rpk in (0, 1):
            try:
                for line in open(f"{out}/{i}.theirs.{rpk}"):
                    r = json.loads(line)
                    key = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
                    rows.setdefault(key, [None, None])[rpk] = (r["avg_ts"], r.get("stddev_ts", 0.0))
            except (OSError, ValueError):
                pass  # that variant failed: "failed" below
        ours = {f"pp{a.pp}": json.load(open(f"{out}/{i}.ours.pp"))["pp"],
                f"tg{a.tg}": json.load(open(f"{out}/{i}.ours.tg"))["tg"]}
        for key, o in ours.items():
            r0, r1 = rows.get(key, [None, None])
            best = max(x[0] for x in (r0, r1, (0.0, 0.0)) if x is not None)
            ratio = o["tokens_per_second"] / best if best else float("nan")
            bw = o.get("read_bytes_per_second")
            f = lambda x: f"{x[0]:.1f} ± {x[1]:.1f}" if x is not None else "failed"
            mine = (o["tokens_per_second"], o.get("stddev", 0.0))
            share = f"{bw / 1e9:>13.2f}{bw / probe:>7.0%}" if bw and probe else ""
            size_text = f"{int(size) / 2**30:>6.2f}G" if a.gib else f"{int(size) / 2**20:>8.0f}M"
            print(f"{name:<{width}}{size_text} {key:<7}{f(r0):>16}{f(r1):>16}{f(mine):>16}{ratio:>7.2f}{share}")
            if not ratio >= 1.0:
                below.append(f"{name} {key} ({ratio:.2f})")
    print("below llama.cpp: " + (", ".join(below) if below else "none"))


if __name__ == "__main__":
    main()
