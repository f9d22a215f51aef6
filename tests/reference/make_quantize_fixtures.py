#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Quantizer fixture for test_text_analysis: seeded rows (normal values, some with exact halves
and ties of magnitude, one all zero) and the Q8_0 / Q4_0 blocks gguf.quants.quantize makes of
them, base64-encoded, into tests/data/quant/quantize-gguf.json.

    .venv/bin/python tests/reference/make_quantize_fixtures.py
"""
import base64
import json
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "quant" / "quantize-gguf.json"


def main() -> None:
    rng = np.random.default_rng(7)
    rows = [rng.normal(0, 0.05, 256).astype(np.float32), rng.normal(0, 3, 96).astype(np.float32),
            np.zeros(64, np.float32), (rng.integers(-16, 16, 128) / 2).astype(np.float32)]
    ties = rng.normal(0, 1, 64).astype(np.float32)
    ties[5], ties[9] = 2.0, -2.0  # the same largest magnitude twice: the first one decides Q4_0's sign
    rows.append(ties)
    cases = []
    for row in rows:
        for qt in (T.Q8_0, T.Q4_0):
            blocks = gguf.quants.quantize(row.reshape(1, -1), qt)
            cases.append({"type": qt.name, "values_f32": base64.b64encode(row.tobytes()).decode(),
                          "blocks": base64.b64encode(blocks.tobytes()).decode()})
    OUT.write_text(json.dumps({"source": "tests/reference/make_quantize_fixtures.py",
                               "gguf": getattr(gguf, "__version__", "?"), "cases": cases}, indent=1) + "\n")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
