#!/usr/bin/env python3
"""Writes the dequantization fixtures of sdk/core/tests/fixtures/quant: for each tensor type,
`<type>.blocks` (random blocks with sane f16 scales, as a GGUF file stores them) and
`<type>.f32` (gguf-py's dequantization of them, little-endian f32).

    pip install gguf numpy && python3 scripts/quant_fixtures.py
"""

import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

OUT = os.path.join(os.path.dirname(__file__), "..", "sdk", "core", "tests", "fixtures", "quant")

# type -> (blocks to write, byte offsets of its f16 scale fields)
TYPES = {
    T.Q5_1: (8, [0, 2]),
    T.IQ4_NL: (8, [0]),
    T.IQ4_XS: (2, [0]),
    T.Q2_K: (2, [80, 82]),
    T.Q3_K: (2, [108]),
    T.Q5_K: (2, [0, 2]),
}


def main():
    rng = np.random.default_rng(20260501)
    os.makedirs(OUT, exist_ok=True)
    for t, (nb, scales) in TYPES.items():
        _, size = GGML_QUANT_SIZES[t]
        blocks = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
        for off in scales:
            d = rng.uniform(1e-3, 2e-2, size=nb).astype(np.float16)
            blocks[:, off : off + 2] = d.view(np.uint8).reshape(nb, 2)
        values = dequantize(blocks.reshape(-1), t).astype("<f4").reshape(-1)
        name = t.name.lower()
        blocks.tofile(os.path.join(OUT, f"{name}.blocks"))
        values.tofile(os.path.join(OUT, f"{name}.f32"))
        print(name, blocks.size, "bytes,", values.size, "values")


if __name__ == "__main__":
    main()
