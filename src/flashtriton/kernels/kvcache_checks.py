"""The values that flash_attn_with_kvcache's value checks read, gathered on the device in
one launch (flashtriton.kvcache._check_values; host launcher: launchers/kvcache_checks.py).

The checks need, per sequence b, its cache length, left padding and cache row, and, with
a paged cache, the first USED block-table entry that is not a block index. Built from
torch ops, that took 24 tiny launches a step (paged; 2 contiguous) before the one
device-to-host copy; this kernel writes all of it into one small int64 tensor instead.

OUT (5, B) int64, row-major (row stride B), exactly what kvcache._value_rows_torch builds:
  OUT[0, b] = SEQLENS[b]                        (end)
  OUT[1, b] = LEFTPAD[b], 0 without leftpad     (start)
  OUT[2, b] = BATCH_IDX[b], 0 without it
  OUT[3, b] = the smallest column c in the used range [start // PAGE_SIZE,
              ceil((end + snew) / PAGE_SIZE)) (within [0, max_blocks)) whose entry
              BLOCK_TABLE[b, c] is outside [0, num_blocks); -1 when there is none or
              there is no block table
  OUT[4, b] = BLOCK_TABLE[b, max(OUT[3, b], 0)] (0 without a block table)
Floor division as torch's: a negative start or end only widens / empties the range, and
the columns are >= 0, so clamping to 0 before the division gives the same columns.
"""
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["stride_btb", "batch", "max_blocks", "num_blocks", "snew"])
def kvcache_value_rows_kernel(SEQLENS, LEFTPAD, BATCH_IDX, BLOCK_TABLE, OUT,
                              stride_sl, stride_lp, stride_bi, stride_btb, stride_btc,
                              batch, max_blocks, num_blocks, snew,
                              HAS_LEFTPAD: tl.constexpr, HAS_BATCH_IDX: tl.constexpr, HAS_TABLE: tl.constexpr,
                              PAGE_SIZE: tl.constexpr, BLOCK_C: tl.constexpr):
    """Program b: sequence b. SEQLENS, LEFTPAD, BATCH_IDX (B,) int32, any stride (absent
    ones: any pointer, never read); BLOCK_TABLE (B, max_blocks) int32, any strides, scanned
    in BLOCK_C-column chunks over the used range only; OUT (5, B) int64, contiguous."""
    b = tl.program_id(0)
    end = tl.load(SEQLENS + b.to(tl.int64) * stride_sl).to(tl.int64)
    start = end * 0
    if HAS_LEFTPAD:
        start = tl.load(LEFTPAD + b.to(tl.int64) * stride_lp).to(tl.int64)
    idx = end * 0
    if HAS_BATCH_IDX:
        idx = tl.load(BATCH_IDX + b.to(tl.int64) * stride_bi).to(tl.int64)
    bad_col = end * 0 - 1
    bad_val = end * 0
    if HAS_TABLE:
        row = BLOCK_TABLE + b.to(tl.int64) * stride_btb
        lo = tl.maximum(start, 0) // PAGE_SIZE
        hi = tl.minimum(tl.maximum(end + snew + PAGE_SIZE - 1, 0) // PAGE_SIZE, max_blocks)
        none = end * 0 + max_blocks                       # "no bad column yet"
        first = none
        for c0 in range(lo, hi, BLOCK_C):
            cols = c0 + tl.arange(0, BLOCK_C)             # (BLOCK_C,) int64
            used = cols < hi
            v = tl.load(row + cols * stride_btc, mask=used, other=0)
            bad = used & ((v < 0) | (v >= num_blocks))
            first = tl.minimum(first, tl.min(tl.where(bad, cols, none), axis=0))
        bad_col = tl.where(first < none, first, -1)
        bad_val = tl.load(row + tl.maximum(bad_col, 0) * stride_btc).to(tl.int64)
    tl.store(OUT + b, end)
    tl.store(OUT + batch + b, start)
    tl.store(OUT + 2 * batch + b, idx)
    tl.store(OUT + 3 * batch + b, bad_col)
    tl.store(OUT + 4 * batch + b, bad_val)
