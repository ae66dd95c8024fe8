"""flash_attn_varlen_func with block_table: the paged KV layout's checks and its gather.

Layout (flash-attn 2.x's): k_cache and v_cache are (num_blocks, page_size, Hk, D);
block_table (B, max_blocks_per_seq) int32; sequence b has
cu_seqlens_k[b + 1] - cu_seqlens_k[b] keys, and its key position p is row p % page_size
of page block_table[b, p // page_size]. cu_seqlens_k gives lengths only: it need not end
at any dimension of k_cache. The queries are packed as in any varlen call.

The forward only: as in flash-attn, paged KV is an inference layout, and the op's
backward raises NotImplementedError (flashtriton.ops.attention_paged).

- check_structure: shapes, dtypes, devices (no host sync; the API layer).
- check_values: cu_seqlens_k's values and the used block-table entries, with one
  device-to-host copy, remembered per tensor contents (the op, before any launch).
- gather_kv: contiguous (total_k, Hk, D) copies of the keys and values; what the
  reference and CPU backends compute on, and return_attn_probs. The triton backend
  reads the pages in place (kernels/fwd_paged.py).
- scatter_to_pages: the reverse, packed k, v into a new paged cache with the pages in a
  random order (the tests, the feature benchmark).
"""
from __future__ import annotations

import torch

from . import validate


def check_structure(q, k_cache, v_cache, block_table, batch: int):
    """k_cache / v_cache (num_blocks, page_size, Hk, D) with page_size a power of two,
    block_table (batch, max_blocks_per_seq >= 1) int32, all on q's device."""
    for name, t in (("k", k_cache), ("v", v_cache)):
        validate._tensor(name, t)
        if t.dim() != 4:
            raise ValueError(f"{name}: with block_table, expected 4 dims (num_blocks, page_block_size, nheads_k, "
                             f"headdim), got shape {tuple(t.shape)}")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v: shape {tuple(v_cache.shape)} must equal k's {tuple(k_cache.shape)}")
    page = k_cache.shape[1]
    if k_cache.shape[0] == 0 or page == 0 or page & (page - 1):
        raise ValueError(f"k: with block_table, num_blocks must be >= 1 and page_block_size (dim 1) a power of "
                         f"two, got shape {tuple(k_cache.shape)}")
    validate.block_table(block_table, batch, q.device)


def _table_rows(cu_k: torch.Tensor, block_table: torch.Tensor, num_blocks: int, page: int) -> torch.Tensor:
    """(4, B) int64 on the device: each sequence's key count, its first used table column
    whose entry is outside [0, num_blocks) (-1: none), that entry, and its cu_seqlens_k entry."""
    cu = cu_k.to(torch.int64)
    lens = cu[1:] - cu[:-1]
    bt = block_table.to(torch.int64)
    col = torch.arange(bt.shape[1], device=bt.device)[None, :]
    used = col < ((lens.clamp_min(0) + page - 1) // page)[:, None]
    bad = used & ((bt < 0) | (bt >= num_blocks))
    bad_col = torch.where(bad, col, bt.shape[1]).amin(dim=1).masked_fill_(~bad.any(dim=1), -1)
    bad_val = bt.gather(1, bad_col.clamp_min(0)[:, None]).squeeze(1)
    return torch.stack([lens, bad_col, bad_val, cu[:-1]])


def check_values(cu_k: torch.Tensor, block_table: torch.Tensor, num_blocks: int, page: int, max_seqlen_k: int):
    """cu_seqlens_k starts at 0 and never decreases, no sequence is longer than max_seqlen_k
    or than its table row (max_blocks_per_seq * page_size keys), and every table entry a
    sequence uses is a block index in [0, num_blocks). One host read of a (3, B) tensor,
    skipped when the same tensors (version counters and pointers) passed before."""
    stamp = (cu_k._version, cu_k.data_ptr(), block_table._version, block_table.data_ptr(), num_blocks, page)
    if getattr(block_table, "_flashtriton_paged_checked", None) == stamp:
        return
    lens, bad_col, bad_val, starts = _table_rows(cu_k, block_table, num_blocks, page).cpu().tolist()  # the one sync
    if starts[0] != 0:
        raise ValueError(f"cu_seqlens_k: must start at 0, got {starts[0]}")
    capacity = block_table.shape[1] * page
    for b, n in enumerate(lens):
        if n < 0:
            raise ValueError(f"cu_seqlens_k: must be non-decreasing, but entry {b + 1} < entry {b}")
        if n > max_seqlen_k:
            raise ValueError(f"max_seqlen_k: {max_seqlen_k} is less than the longest sequence in cu_seqlens_k ({n})")
        if n > capacity:
            raise ValueError(f"cu_seqlens_k: sequence {b} has {n} keys, more than its block_table row holds "
                             f"(max_blocks_per_seq {block_table.shape[1]} x page_block_size {page} = {capacity})")
        if bad_col[b] >= 0:
            raise ValueError(f"block_table: entry [{b}, {bad_col[b]}] is {bad_val[b]}; used entries must be block "
                             f"indices in [0, num_blocks = {num_blocks})")
    try:
        block_table._flashtriton_paged_checked = stamp
    except (AttributeError, RuntimeError):  # a tensor subclass that refuses attributes: no memo
        pass


def gather_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor, cu_k: torch.Tensor):
    """(k, v) as contiguous (total_k, Hk, D) tensors, total_k = cu_seqlens_k[-1], in the
    layout of an unpaged varlen call with the same cu_seqlens_k (values checked first)."""
    num_blocks, page, hk, d = k_cache.shape
    cu = cu_k.to(torch.int64)
    lens = cu[1:] - cu[:-1]
    total = int(cu[-1])
    seq = torch.repeat_interleave(torch.arange(lens.numel(), device=cu.device), lens, output_size=total)
    pos = torch.arange(total, device=cu.device) - cu[seq]               # position within its sequence
    rows = block_table.to(torch.int64)[seq, pos // page] * page + pos % page
    return (k_cache.reshape(num_blocks * page, hk, d).index_select(0, rows),
            v_cache.reshape(num_blocks * page, hk, d).index_select(0, rows))


def scatter_to_pages(k: torch.Tensor, v: torch.Tensor, lens, page: int, *, fill: float = 0.0, spare_blocks: int = 0,
                     generator: torch.Generator | None = None):
    """(k_cache, v_cache, block_table) holding the packed (total_k, Hk, D) k and v, whose sequences have the
    lengths `lens`: each sequence's keys in pages of `page` rows dealt in a random order (as a serving engine's
    allocator leaves them), spare_blocks pages more, every row no sequence uses set to `fill` (NaN in the tests:
    a kernel that reads such a row fails them), table entries past a sequence's pages -1 (never followed)."""
    blocks = [(n + page - 1) // page for n in lens]
    num_blocks = sum(blocks) + spare_blocks
    order = torch.randperm(num_blocks, generator=generator).tolist()
    shape = (num_blocks, page) + tuple(k.shape[1:])
    k_cache = torch.full(shape, fill, dtype=k.dtype, device=k.device)
    v_cache = torch.full(shape, fill, dtype=v.dtype, device=v.device)
    table = torch.full((len(lens), max(max(blocks, default=0), 1)), -1, dtype=torch.int32)
    start = 0
    for b, n in enumerate(lens):
        for j in range(blocks[b]):
            blk = order.pop()
            table[b, j] = blk
            rows = min(page, n - j * page)
            k_cache[blk, :rows] = k[start + j * page:start + j * page + rows]
            v_cache[blk, :rows] = v[start + j * page:start + j * page + rows]
        start += n
    return k_cache, v_cache, table.to(k.device)
