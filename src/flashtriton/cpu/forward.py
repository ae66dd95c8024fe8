"""Forward pass: FlashAttention-2's online softmax over key tiles, driven by
PyTorch ops on float32 tiles.

Where it builds, the default forward is the compiled kernel of native_prefill.py (the
same recurrence in C, every head of a sequence in one call: bf16 / float32 / fp16 (since
session 64) without dropout, softcap and ALiBi for bf16 only; config.FWD_PATH; bf16 inputs on exact float32 copies
where the CPU's bf16 products are the slower ones, config.BF16_PRODUCTS); this file is the path for everything
else (those features, no C compiler, FLASHTRITON_CPU_FORWARD=ops) and the
reference design the compiled one follows.

For one sequence and one KV head, rows = (query i, head g) pairs of the G query
heads sharing that KV head (K and V tiles are read once per group), in blocks of
config.FWD_ROWS rows:

    m_i = -1e38, l_i = 0, acc = 0                        # (r, 1), (r, 1), (r, D)
    for each key tile [j0, j1) that the block can see:   # causal / window: others skipped
        s = (q * scale * log2 e) @ k_tile^T              # (r, w) float32, log2 units
        [softcap, ALiBi, mask of a partially visible tile]
        m_new = max(m_i, rowmax(s))
        p = exp2(s - m_new)                              # unnormalised
        alpha = exp2(m_i - m_new)
        l_i = l_i * alpha + rowsum(p)
        acc = acc * alpha + [dropout(p)] @ v_tile
    out = acc / l_i (divided once), lse = (m_i + log2 l_i) * ln 2

On top of that recurrence (measurements in bench/NOTES.md, "CPU backend"):
- exp2 instead of exp: torch's vectorised exp2 runs ~4x faster than its exp on
  AVX-512 (12 vs 3 Gelem/s on two cores), so log2(e) is folded into the q scale.
- Lazy rescaling (_Block): after a row's first tile, m_i stays fixed, so a step
  is matmul, subtract, exp2, row sum, matmul: 7 torch ops instead of ~15. One
  check per block catches the rare overflow and recomputes that block the plain way.
- A tile cut by a narrow sliding window is computed in row sub-blocks over the
  keys each can see (Band.steps); blocks that see a single piece (short
  sequences) take a one-step path without running state.
- m_i starts at -1e38 rather than -inf: a row that has seen no key yet then gives
  exp2(-inf - m) = 0 and alpha = 1, never inf - inf = NaN, and a NaN score still
  propagates (max keeps NaN). Scores below -1e38 (in log2 units) are not supported.
- A row that sees no key ends with l_i = 0: out 0, lse +inf, as in the reference.
- Extra memory: one (r, w) score tile and (r, D) accumulator at a time, plus the
  per-head float32 copies of K (and V^T tiles for fp32 / fp16). torch's intra-op
  threads split every op along the rows: threads never write the same output row.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from flashtriton import memory

from . import config, engine, layout, native_prefill
from .dropout import Dropout
from .tiles import LOG2E, Band, alibi_distance, alibi_slopes_log2, mask_, tiles

M_FLOOR = -1e38
LAZY_LIMIT = 2.0 ** 64
LN2 = math.log(2.0)


# The path the last forward call took: "compiled-amx" (native_prefill.py's AMX kernel,
# bf16), "compiled" (its AVX-512 kernel) or "ops" (the torch-ops loop below); the CPU
# benchmark reports it.
LAST_PATH: str | None = None


def one_row_decode(q, k, params, varlen=None) -> bool:
    """Whether fwd runs this call on the decode kernel (config.ONE_ROW_DECODE): a one-row call
    (flashtriton.one_row.takes) of any dtype with at least config.ONE_ROW_DECODE_MIN_NK keys."""
    from flashtriton import one_row
    return config.ONE_ROW_DECODE and one_row.takes(q, k, params, varlen, config.ONE_ROW_DECODE_MIN_NK)


def _fwd_one_row(q, k, v, params, alibi=None, varlen=None):
    """A one-row call (one_row_decode) on cpu/decode.kvcache_fwd, through flashtriton.one_row.run's views."""
    from flashtriton import one_row
    from .decode import kvcache_fwd     # (cpu/decode.py imports this module)
    return one_row.run(kvcache_fwd, q, k, v, params, alibi, varlen)


def fwd(q, k, v, params, alibi=None, rng=None, varlen=None):
    """Backend entry point: returns (out like q, lse float32)."""
    global LAST_PATH
    if one_row_decode(q, k, params, varlen):
        LAST_PATH = "decode"
        return _fwd_one_row(q, k, v, params, alibi, varlen)
    if q.dtype == torch.bfloat16 and not config.products_in_input_precision(q.dtype):
        # bf16 inputs on a CPU whose bf16 products are slower than float32 ones (config.BF16_PRODUCTS):
        # the float32 kernels on exact float32 copies, out rounded to bf16 once
        out32, lse = fwd(q.float(), k.float(), v.float(), params, alibi, rng, varlen)
        out = memory.empty(q.shape, q.dtype, q.device)
        out.copy_(out32)
        LAST_PATH = f"{LAST_PATH}-f32"
        return out, lse
    nheads, nheads_k = q.shape[-2], k.shape[-2]
    group = nheads // nheads_k
    out = memory.empty(q.shape, q.dtype, q.device)
    if varlen is None:
        lse = memory.empty((q.shape[0], nheads, q.shape[1]), torch.float32, q.device)
        mq, mk = q.shape[1], k.shape[1]
    else:
        lse = memory.empty((nheads, q.shape[0]), torch.float32, q.device)
        mq, mk = varlen.max_seqlen_q, varlen.max_seqlen_k
    ctx = _Ctx(params, alibi, Dropout(params.dropout_p, rng, nheads, mq, mk) if params.dropout_p > 0 else None,
               group, config.products_in_input_precision(q.dtype), q.shape[-1])
    lib = native_prefill.library_for(q, k, v, params, alibi, ctx.drop is not None)
    rows = config.FWD_ROWS_AMX if lib is not None and lib.amx else config.FWD_ROWS
    bm = max(1, rows // group)  # query positions per block
    LAST_PATH = native_prefill.path_name(lib)
    for seq in layout.sequences(q, k, v, varlen, extra=(out,), lse=lse):
        band = Band(seq.q.shape[0], seq.k.shape[0], params.window_left, params.window_right)
        if lib is not None:  # the compiled forward (native_prefill.py): every head in one call
            native_prefill.forward_sequence(lib, seq, group, q_scale(params), params.window_left,
                                            params.window_right, bm, params.softcap, alibi)
            continue
        piece = _single_piece(band, bm, group)
        if piece is not None:  # short sequences: every head in one pass
            _short_sequence(ctx, seq, band, piece)
            continue
        for hk in range(nheads_k):
            head = None
            for i0 in range(0, band.n_q, bm):
                i1 = min(band.n_q, i0 + bm)
                j_lo, j_hi = band.key_range(i0, i1)
                if head is None and j_lo < j_hi:  # the per-head copies, made on first use
                    head = _head_inputs(ctx, seq, hk)
                _block(ctx, seq, band, hk, i0, i1, head)
    return out, lse


class _Ctx(NamedTuple):
    params: object
    alibi: object
    drop: object
    group: int
    lowp_pv: bool
    head_dim: int


def q_scale(params) -> float:
    """What q is multiplied by before q @ k^T: the softmax scale in log2 units, or
    scale / softcap when softcapping (tanh comes first, log2 e after it)."""
    if params.softcap > 0:
        return params.softmax_scale / params.softcap
    return params.softmax_scale * LOG2E


class _HeadInputs(NamedTuple):
    kf: torch.Tensor              # (n_k, D) float32
    v: object                     # (n_k, D) bf16, or [(D, bn) float32] V^T tiles
    slopes: object                # (1, G, 1) -slope * log2 e, or None


def _head_inputs(ctx: _Ctx, seq, hk) -> _HeadInputs:
    kf = layout.head_f32(seq.k, hk)
    v = seq.v[:, hk].contiguous() if ctx.lowp_pv else layout.transposed_tiles(seq.v[:, hk], config.FWD_KEYS)
    return _HeadInputs(kf, v, alibi_slopes_log2(ctx.alibi, seq.index, hk * ctx.group, ctx.group))


def _block(ctx: _Ctx, seq, band: Band, hk, i0, i1, head: _HeadInputs):
    """Rows [i0, i1) x the G query heads of KV head hk: the online softmax over the
    key tiles this block can see, written to out and lse."""
    group, d = ctx.group, ctx.head_dim
    out, lse = seq.extra[0], seq.lse  # (n_q, H, D), (H, n_q)
    h0 = hk * group
    bm = i1 - i0
    j_lo, j_hi = band.key_range(i0, i1)
    if j_lo >= j_hi:  # the block sees no key (a skipped causal / window block, or n_k = 0)
        out[i0:i1, h0:h0 + group].zero_()
        lse[h0:h0 + group, i0:i1].fill_(math.inf)
        return
    pieces = _pieces(band, i0, i1, group)
    if len(pieces) == 1:  # short sequences: one step, without the running state
        m_i, l_i, acc = _one_piece(ctx, seq, band, hk, i0, i1, head, *pieces[0], fast=True)
        if not band.full(i0, i1, *pieces[0][1][2:]) and bool(torch.isnan(l_i).any()):
            # a NaN: maybe a hidden one, which the fast mask keeps; redo with masked_fill_
            m_i, l_i, acc = _one_piece(ctx, seq, band, hk, i0, i1, head, *pieces[0], fast=False)
    else:
        blk = _Block(ctx, seq, band, hk, i0, i1, head, pieces, lazy=True)
        if not blk.finite():  # a lazy step overflowed (or a NaN): redo with a rescale at every step
            blk = _Block(ctx, seq, band, hk, i0, i1, head, pieces, lazy=False)
        m_i, l_i, acc = blk.m_i, blk.l_i, blk.acc
    empty = l_i == 0
    acc.div_(l_i.masked_fill(empty, 1.0))
    out[i0:i1, h0:h0 + group].copy_(acc.view(bm, group, d))
    lse_blk = torch.log2(l_i).add_(m_i).mul_(LN2).masked_fill_(empty, math.inf)  # (r, 1)
    lse[h0:h0 + group, i0:i1].copy_(lse_blk.view(bm, group).t())


def _pieces(band: Band, i0: int, i1: int, group: int) -> list:
    """The (key tile, (a0, a1, k0, k1)) steps of row block [i0, i1)."""
    j_lo, j_hi = band.key_range(i0, i1)
    diag = max(1, config.FWD_DIAG_ROWS // group) if config.FWD_DIAG_ROWS else 0
    return [(t, piece) for t, j0, j1 in tiles(j_lo, j_hi, config.FWD_KEYS)
            for piece in band.steps(i0, i1, j0, j1, max(1, config.FWD_SUB_ROWS // group), diag)]


def _single_piece(band: Band, bm: int, group: int):
    """The one (tile, piece) of a sequence whose queries fit one row block and see a
    single piece of keys (no more than one key tile), else None."""
    if band.n_q == 0 or band.n_q > bm or band.n_k > config.FWD_KEYS:
        return None
    j_lo, j_hi = band.key_range(0, band.n_q)
    if j_lo >= j_hi:
        return None
    pieces = _pieces(band, 0, band.n_q, group)
    return pieces[0] if len(pieces) == 1 else None


def _short_sequence(ctx: _Ctx, seq, band: Band, piece) -> None:
    """A sequence whose queries form one row block over one piece of keys (short
    sequences, e.g. B=4 H=12 N=512): every head's plain softmax (_one_piece), with the
    per-head work that does not depend on the head done once for all heads: one
    float32 copy of K (and V^T), one scaled copy of q, one normalisation and one write
    of out and lse. Measured (B=4 H=12 N=512 D=64): ~20 torch ops per head -> ~8;
    bench/NOTES.md. Extra memory: the keys (<= FWD_KEYS) of all KV heads in float32."""
    params, group, d = ctx.params, ctx.group, ctx.head_dim
    n_q, n_k, nheads_k = seq.q.shape[0], seq.k.shape[0], seq.k.shape[1]
    rows = n_q * group
    kf = torch.empty(nheads_k, n_k, d, dtype=torch.float32)
    kf.copy_(seq.k.permute(1, 0, 2))
    if ctx.lowp_pv:
        vs = seq.v.permute(1, 0, 2).contiguous()                           # (Hk, n_k, D) bf16
    else:
        vs = torch.empty(nheads_k, d, n_k, dtype=torch.float32)            # V^T of each head
        vs.copy_(seq.v.permute(1, 2, 0))
    qa = torch.empty(nheads_k, n_q, group, d, dtype=torch.float32)
    qa.copy_(seq.q.view(n_q, nheads_k, group, d).permute(1, 0, 2, 3))
    qa = qa.mul_(q_scale(params)).view(nheads_k, rows, d)
    m_all = torch.empty(nheads_k, rows, 1)
    l_all = torch.empty(nheads_k, rows, 1)
    acc_all = torch.empty(nheads_k, rows, d)
    heads = [_HeadInputs(kf[hk], vs[hk] if ctx.lowp_pv else [vs[hk]],
                         alibi_slopes_log2(ctx.alibi, seq.index, hk * group, group)) for hk in range(nheads_k)]

    def run(fast):
        for hk in range(nheads_k):
            _one_piece(ctx, seq, band, hk, 0, n_q, heads[hk], *piece, fast=fast, q=qa[hk],
                       dst=(m_all[hk], l_all[hk], acc_all[hk]))
    run(True)
    if not band.full(0, n_q, *piece[1][2:]) and bool(torch.isnan(l_all).any()):
        run(False)  # a NaN, maybe a hidden one that the fast mask keeps: redo with masked_fill_
    empty = l_all == 0
    acc_all.div_(l_all.masked_fill(empty, 1.0))
    seq.extra[0].view(n_q, nheads_k, group, d).copy_(acc_all.view(nheads_k, n_q, group, d).permute(1, 0, 2, 3))
    lse_rows = torch.log2(l_all).add_(m_all).mul_(LN2).masked_fill_(empty, math.inf)   # (Hk, rows, 1)
    seq.lse.view(nheads_k, group, n_q).copy_(lse_rows.view(nheads_k, n_q, group).permute(0, 2, 1))


def _one_piece(ctx: _Ctx, seq, band: Band, hk, i0, i1, head: _HeadInputs, t, piece, fast: bool, q=None, dst=None):
    """A row block that sees a single piece of keys (short sequences): the plain
    softmax, with half the ops of the running-state path, which dominate there.
    Returns (m, l, acc) like _Block. fast: tiles.mask_'s fast mask (a hidden NaN
    stays NaN; the caller reruns with fast=False when l has a NaN). q: the block's
    scaled (r, D) rows when the caller has them; dst: (m, l, acc) buffers to write."""
    _, _, j0, j1 = piece  # one piece covers every row of the block
    params, group, d = ctx.params, ctx.group, ctx.head_dim
    if q is None:
        q = layout.group_rows(seq.q[i0:i1], hk, group, q_scale(params))      # (r, D)
    s = engine.mm_nt(q, head.kf[j0:j1])                      # (r, w)
    s3 = s.view(i1 - i0, group, j1 - j0)
    if params.softcap > 0:
        s.tanh_().mul_(params.softcap * LOG2E)
    if head.slopes is not None:
        s3.addcmul_(alibi_distance(band, i0, i1, j0, j1), head.slopes)
    if not band.full(i0, i1, j0, j1):
        mask_(s3, band, i0, i1, j0, j1, fast=fast)
    if dst is None:
        m = s.amax(dim=1, keepdim=True).clamp_min_(M_FLOOR)    # a row without keys: p = 0, l = 0
        p = s.sub_(m).exp2_()
        l_i = p.sum(dim=1, keepdim=True)
    else:
        m, l_i, acc = dst
        torch.amax(s, dim=1, keepdim=True, out=m).clamp_min_(M_FLOOR)
        p = s.sub_(m).exp2_()
        torch.sum(p, dim=1, keepdim=True, out=l_i)
    if ctx.lowp_pv:
        p = p.to(torch.bfloat16)
    pv = _pv(ctx, seq, head, hk, p, i0, i1, t, j0, j1)
    if dst is None:
        return m, l_i, pv.float()
    acc.copy_(pv)
    return dst


def _pv(ctx: _Ctx, seq, head: _HeadInputs, hk, p, i0, i1, t, j0, j1) -> torch.Tensor:
    """[dropout(p)] @ v for rows [i0, i1) and keys [j0, j1) of key tile t: (r, D),
    float32 (bf16 for bf16 inputs)."""
    group = ctx.group
    if ctx.drop is not None:
        keep = ctx.drop.keep(seq.index, hk * group, group, i0, i1, j0, j1)
        p.view(i1 - i0, group, j1 - j0).masked_fill_(~keep, 0.0)
    if ctx.lowp_pv:
        pv = torch.mm(p, head.v[j0:j1])
    else:
        bn = config.FWD_KEYS
        v_t = head.v[t]
        if j0 != t * bn or j1 - j0 != v_t.shape[1]:  # a window edge or a sub-block cuts the tile
            v_t = v_t[:, j0 - t * bn:j1 - t * bn].contiguous()
        pv = engine.mm_nt(p, v_t)
    # kept entries scale by 1 / (1 - p): applied to the (r, D) product, not to the
    # (r, w) probabilities (fewer flops, and no second bf16 rounding of p)
    return pv if ctx.drop is None else pv.mul_(ctx.drop.scale)


class _Block:
    """The online softmax of one row block, r = (i1 - i0) * G rows.

    State: m_i (r, 1) running max and l_i (r, 1) running sum, both log2-based, and
    acc (r, D) = sum of exp2(s - m_i) @ v, unnormalised (divided once at the end).

    Lazy rescaling: once a row has a running max, later steps keep it fixed:
    p = exp2(s - m_i) with no row max, no rescale of l_i / acc. That is exact for
    any m_i (softmax is shift-invariant; lse = m_i + log2 l_i) as long as nothing
    overflows: keys scoring below m_i underflow harmlessly (weight < 2^-126 of the
    max's), and keys scoring above it give p > 1. Instead of a check at every step
    (a host sync), finite() checks once per block that every l_i <= 2^64 (so every
    p was <= 2^64, far from overflow); if not (a key scoring > 64 above its row's
    first tile, or a NaN input), the block is recomputed with a max and rescale at
    every step (lazy=False): FlashAttention-2's plain recurrence.

    Rows get their max in a "first" step (the plain recurrence), after which their
    row sub-blocks are marked ready; pieces whose rows are all ready take lazy steps.
    A lazy step is 7 torch ops (matmul, subtract, exp2, row sum, add, cast, matmul +
    add) against ~15 for the plain one.
    """

    def __init__(self, ctx: _Ctx, seq, band: Band, hk, i0, i1, head: _HeadInputs, pieces, lazy: bool):
        params, group, d = ctx.params, ctx.group, ctx.head_dim
        self.ctx, self.seq, self.band, self.hk, self.head, self.i0 = ctx, seq, band, hk, head, i0
        self.fast_mask = lazy  # a hidden NaN stays NaN, fails finite(): rerun with lazy=False
        rows = (i1 - i0) * group
        self.q = layout.group_rows(seq.q[i0:i1], hk, group, q_scale(params))    # (r, D)
        self.m_i = torch.full((rows, 1), M_FLOOR)
        self.l_i = torch.zeros(rows, 1)
        self.acc = torch.zeros(rows, d)
        sub = max(1, config.FWD_SUB_ROWS // group)
        ready = set()  # sub-blocks whose rows all hold a running max
        for t, (a0, a1, k0, k1) in pieces:
            subs = range((a0 - i0) // sub, (a1 - i0 + sub - 1) // sub)
            if lazy and all(x in ready for x in subs):
                self._lazy_step(a0, a1, t, k0, k1)
            elif self._first_step(a0, a1, t, k0, k1):
                ready.update(subs)

    def finite(self) -> bool:
        # l_i <= 2^64 bounds every p by 2^64 (NaN fails the test too); acc then stays
        # finite for any finite v below ~2^60
        return bool(self.l_i.max() <= LAZY_LIMIT)

    def _scores(self, i0, i1, j0, j1) -> torch.Tensor:
        """(r, w) float32 scores of rows [i0, i1) x keys [j0, j1) in log2 units, with
        softcap, ALiBi and the mask applied."""
        ctx, band, group = self.ctx, self.band, self.ctx.group
        r0, r1 = (i0 - self.i0) * group, (i1 - self.i0) * group
        w = j1 - j0
        s = engine.mm_nt(self.q[r0:r1], self.head.kf[j0:j1])   # (r, w)
        s3 = s.view(i1 - i0, group, w)
        if ctx.params.softcap > 0:
            s.tanh_().mul_(ctx.params.softcap * LOG2E)
        if self.head.slopes is not None:
            s3.addcmul_(alibi_distance(band, i0, i1, j0, j1), self.head.slopes)
        if not band.full(i0, i1, j0, j1):
            mask_(s3, band, i0, i1, j0, j1, fast=self.fast_mask)
        return s

    def _lazy_step(self, i0, i1, t, j0, j1):
        group = self.ctx.group
        r0, r1 = (i0 - self.i0) * group, (i1 - self.i0) * group
        p = self._scores(i0, i1, j0, j1).sub_(self.m_i[r0:r1]).exp2_()
        self.l_i[r0:r1].add_(p.sum(dim=1, keepdim=True))
        if self.ctx.lowp_pv:
            p = p.to(torch.bfloat16)
        self.acc[r0:r1].add_(_pv(self.ctx, self.seq, self.head, self.hk, p, i0, i1, t, j0, j1))

    def _first_step(self, i0, i1, t, j0, j1) -> bool:
        """A step with a row max and rescale. Returns whether every row now has a max."""
        group = self.ctx.group
        r0, r1 = (i0 - self.i0) * group, (i1 - self.i0) * group
        s = self._scores(i0, i1, j0, j1)
        m_i = self.m_i[r0:r1]
        m_new = torch.maximum(m_i, s.amax(dim=1, keepdim=True))
        p = s.sub_(m_new).exp2_()
        alpha = torch.exp2(m_i.sub_(m_new))
        m_i.copy_(m_new)
        self.l_i[r0:r1].mul_(alpha).add_(p.sum(dim=1, keepdim=True))
        if self.ctx.lowp_pv:
            p = p.to(torch.bfloat16)
        acc = self.acc[r0:r1]
        torch.addcmul(_pv(self.ctx, self.seq, self.head, self.hk, p, i0, i1, t, j0, j1), acc, alpha, out=acc)
        return bool((m_new > M_FLOOR).all())
