"""The dropout key table of one backward call: the row and column hashes of the mask.

The mask of element (row, col) is (rk[row] ^ ck[col]) * mk >= p * 2^32, mk the odd
multiplier of the column's group (kernels.common.dropout_keep). Hashing rk and ck inside the backward loops cost as
much as the per-element work: ~9 integer ops per column key for each of the 32
columns a thread holds in every dQ tile, and a row key per query row in every dK/dV
tile. This kernel hashes them once per call into an O(N) table, which the loops load
like lse (H200, 2026-11-29, p = 0.1: backward 1.42x -> 1.27x the time without dropout;
the forward measured faster hashing its column keys, 1.28x against 1.36x with the
table, and keeps the hash; bench/NOTES.md, Session 4):

  KEYS (int32 bits of uint32): [ck of columns 0 .. n_cols) | rk of (head, row), head-major
                                | cs_mult]
The last entry, the seed word of the group multipliers, lets the backward kernels hash
mk with one scalar hash per key tile (kernels.common.dropout_group_mult).
"""
import triton
import triton.language as tl

from .common import dropout_col_key, dropout_mult_seed, dropout_row_key


@triton.jit
def dropout_keys_kernel(KEYS, RNG, n_cols, n_rows, total, rng_stride, BLOCK: tl.constexpr):
    """Grid: (cdiv(total + 1, BLOCK),) with total = n_cols + H * n_rows."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    seed = tl.load(RNG)
    j = tl.maximum(offs - n_cols, 0)                                # (head, row) index of an rk entry
    h = j // tl.maximum(n_rows, 1)
    row = j - h * n_rows
    # the forward's counter layout: rng_offset + h * rows * stride, then row * stride
    row_id = tl.load(RNG + 1) + (h.to(tl.int64) * n_rows + row) * rng_stride
    key = tl.where(offs < n_cols, dropout_col_key(seed, offs), dropout_row_key(seed, row_id))
    key = tl.where(offs == total, dropout_mult_seed(seed), key)
    tl.store(KEYS + offs, key.to(tl.int32, bitcast=True), mask=offs <= total)
