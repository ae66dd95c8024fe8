"""Tile sizes and precision choices of the CPU backend, with the measurements that
picked them (bench/NOTES.md, "CPU backend", has the full log).

Rows are query rows times the G query heads of a KV head (GQA folds the group into
the rows, so K and V tiles are read once per group). A forward tile is rows x keys
float32: 512 x 1024 x 4 B = 2 MiB, 1 MiB per core when torch's two intra-op threads
split the rows (each core's L2). Sweep at B=1 H=8 N=4096 D=128 bf16, ms:
256x512 227, 256x1024 187, 512x1024 165, 256x2048 174, 512x2048 172: larger tiles
amortise the ~75 us fixed cost of a tile step (a dozen torch ops) until the
elementwise passes spill from L2.
"""
from __future__ import annotations

import torch

# Forward: query rows per block (times G) and keys per tile.
FWD_ROWS = 512
FWD_KEYS = 1024
# Rows of the sub-blocks that a tile cut by a narrow sliding window is computed in
# (Band.steps); the causal diagonal is not cut.
FWD_SUB_ROWS = 128

# Backward: keys per tile (the rows of the transposed score tile) and query rows per block.
BWD_KEYS = 512
BWD_ROWS = 512


def products_in_input_precision(dtype: torch.dtype) -> bool:
    """Whether the products that accumulate over tiles (forward P @ V; backward
    dV += P^T dO, dK += dS^T q, dQ += dS k) take P and dS rounded to the input dtype
    and run as low-precision matmuls. bf16: yes - oneDNN's bf16 matmul runs at ~2x its
    float32 rate; it accumulates in fp32 and rounds each tile's product to bf16 before
    it is added to the float32 accumulator. fp16 has no fast matmul on these CPUs, so
    fp16 and fp32 use the float32 engine with P and dS in float32. The score products
    (S = q k^T, and dP = dO v^T in the backward) are always float32-exact."""
    return dtype == torch.bfloat16


# Decode: cache positions per round of the lock-step splits (all splits together).
# A round of K and V in float32 scratch is 2 x 1024 x Hk x D x 4 B (8 MiB at Hk = 8,
# D = 128); 512 and 2048 measured the same or slower, 4096 1.5x slower (bench/NOTES.md).
DECODE_CHUNK = 1024
