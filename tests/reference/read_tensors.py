#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read a dump written by dump_tensors (format TSDTEN01, see dump_tensors.cpp).

usage: read_tensors.py FILE [--match REGEX] [-n 8] [--srcs] [--header]

Prints, for each tensor in graph order: index, name, op, type, shape ne[0..3]
(ggml order, ne[0] fastest) and the first N values. Pure standard library;
`load(path)` returns (header_dict, [record dicts]) with 'values' as array('f') in
logical order: index i0 + ne0*(i1 + ne1*(i2 + ne2*i3)).
"""
import argparse
import array
import json
import re
import signal
import struct
import sys

# ggml_type ids that appear in graphs (ggml.h)
GGML_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 9: "q8_1",
              10: "q2_K", 11: "q3_K", 12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K", 24: "i8",
              25: "i16", 26: "i32", 27: "i64", 28: "f64", 30: "bf16", -1: "-"}


class _Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, n):
        if self.p + n > len(self.d):
            raise ValueError("truncated file")
        b = self.d[self.p:self.p + n]
        self.p += n
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        return self.take(self.u32()).decode("utf-8", "replace")

    def shape(self):
        t = struct.unpack("<i", self.take(4))[0]
        v = struct.unpack("<8q", self.take(64))
        return t, list(v[:4]), list(v[4:])


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    r = _Reader(data)
    if r.take(8) != b"TSDTEN01":
        raise ValueError(f"{path}: not a dump_tensors file")
    header = json.loads(r.take(r.u32()))
    recs = []
    while r.p < len(data):
        rec = {"name": r.string(), "op": r.string()}
        rec["type"], rec["ne"], rec["nb"] = r.shape()
        srcs = []
        for _ in range(r.u32()):
            name = r.string()
            t, ne, nb = r.shape()
            srcs.append({"name": name, "type": t, "ne": ne, "nb": nb})
        rec["srcs"] = srcs
        flags = r.u32()
        rec["is_input"], rec["missing"] = bool(flags & 1), bool(flags & 2)
        n = r.u64()
        vals = array.array("f")
        vals.frombytes(r.take(4 * n))
        if sys.byteorder != "little":
            vals.byteswap()
        rec["values"] = vals
        recs.append(rec)
    return header, recs


def main():
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--match", help="only tensors whose name matches this regex (re.search)")
    ap.add_argument("-n", type=int, default=8, help="values to print per tensor (default 8)")
    ap.add_argument("--srcs", action="store_true", help="also print each tensor's sources")
    ap.add_argument("--header", action="store_true", help="print the JSON header")
    a = ap.parse_args()
    header, recs = load(a.file)
    if a.header:
        print(json.dumps(header, indent=1))
    rx = re.compile(a.match) if a.match else None
    for i, r in enumerate(recs):
        if rx and not rx.search(r["name"]):
            continue
        ne = "x".join(str(x) for x in r["ne"])
        vals = " ".join(f"{v:.6g}" for v in r["values"][:a.n])
        tag = " [input]" if r["is_input"] else (" [no data]" if r["missing"] else "")
        print(f"{i:4d} {r['name']:<32} {r['op']:<10} {GGML_TYPES.get(r['type'], r['type']):<4} {ne:<16}{tag} {vals}")
        if a.srcs:
            for k, s in enumerate(r["srcs"]):
                print(f"       src{k}: {s['name']} {GGML_TYPES.get(s['type'], s['type'])} "
                      f"ne={s['ne']} nb={s['nb']}")


if __name__ == "__main__":
    main()
