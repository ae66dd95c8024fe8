"""Backward pass: FlashAttention-2's recomputation, on transposed tiles.

Float32 math (float32 / fp16 inputs, bf16 where config.products_in_input_precision is False) without
softcap / ALiBi / dropout runs the compiled kernel of native_backward.py by default (config.BWD_PATH,
FLASHTRITON_CPU_BACKWARD; LAST_PATH says which path ran); everything else, and every call where it
does not build, takes the torch-ops loop below.

For one sequence and one KV head, with rows = (query i, head g) pairs as in the
forward pass, P is recomputed from the saved lse, never stored:

    delta = rowsum(dO * O)                                   # (n_q * G,)
    for each key tile [j0, j1):                              # rows of the transposed tiles
        dK_j = dV_j = 0                                      # (w, D) float32
        for each query block that sees the tile:             # causal / window: others skipped
            xT  = k_j @ (q * scale * log2 e)^T - lse * log2 e    # (w, r) S^T - lse, log2 units
            pT  = exp2(xT)                                   # P^T, exact softmax probabilities
            yT  = v_j @ dO^T - delta                         # (w, r) dP^T - delta
            dV_j += [dropout(pT)] @ dO                       # (w, D)
            dsT  = pT * yT                                   # dS^T (dropout: pT * (dropout(dP^T) - delta))
            dK_j += dsT @ q                                  # (w, D)
            dQ^T += k_j^T @ dsT                              # (D, r), ~1.2x the rate of dQ += dsT^T k_j

Keys are the rows of the tiles so that dK_j / dV_j accumulate over the query blocks;
every product reads its operands where they lie (torch.mm / MKL take transposed and
row-strided operands), so no tile is transposed by a copy (the old float32 path spent
29 of 160 ms on dS^T transposes).

Schedule (2026-12-02, an Intel CPU with AMX, 2 cores; bench/wip/cpu-bwd-amx.md): the
(sequence, KV head) items run on one Python thread per intra-op thread, each op
single-threaded (torch releases the GIL); a head's tiles stay in its core's L2 and no
op pays a fork / join. Score tiles are 1024 keys x 1024 rows (float32: 512 rows;
config.BWD_*), kept in a per-thread workspace: fresh multi-MiB tensors per op
page-fault (glibc mmaps them).

Folded subtractions: "- lse" and "- delta" ride along in the products as extra columns,
xT = [k_j, 1] @ [q * q_scale, -lse2]^T and yT = [v_j, 1] @ [dO, -delta]^T (float32): the
GEMM accumulates them in float32 as the separate subtraction did (one rounding either
way); K = D + 1 costs ~2% of a product. exp2 and P * y then run as one compiled pass
(native_bwd.py; torch ops where it does not build). Softcap (tanh comes before lse)
and dropout (dropout(dP) comes before delta) keep the separate passes.

Precision, float32 / fp16 inputs: everything in float32; fp16 converts exactly, so the
score products are exact-input float32 products as before. The compiled exp2 is a
polynomial with relative error < 2e-7 (torch's ~1 ulp).

Precision, bf16 inputs where config.products_in_input_precision (the CPU multiplies bf16
faster than float32; elsewhere bf16 takes the float32 path, as fp16 does): all five products run as
bf16 matmuls (oneDNN, AMX where the CPU has it: ~3-4x the float32 rate per core).
torch on CPU has no bf16 matmul with a float32 result (mm / bmm / addmm(...,
out_dtype=) and _grouped_mm are CUDA-only or refuse it in 2.13, _scaled_mm takes only
float8: checked), so the two score products are rounded to bf16 once, as the same-dtype
PyTorch math rounds them:
  - S^T - u = [k_j, 1, 1] @ [q, -u_hi, -u_lo]^T from the exact bf16 inputs, rounded once
    to bf16, with a per-row shift u = (lse2 - log2(keys the row sees)) / q_scale split into
    two bf16 numbers (config.BWD_BF16_SHIFT; session 36); the float32 pass then forms
    q_scale * (s - u) + q_scale * u - lse2. The rounding error is ~|x| 2^-9 in log2 units
    for x = q_scale * (s - u): near 0 where P is large when logits are large (peaked rows:
    u is about the row's top score), and about q_scale * s where they are small (flat rows:
    lse2 is about log2(keys) + the mean score). Before, the product was S^T itself (error
    |q_scale * s| 2^-9, tens of log2 units with large logits, inconsistent with the
    forward's float32 lse): gradient error / PyTorch's bf16 error was 3.4-7.6 at scale 5
    and up to 4.5 at 0.5 over 75 cases, 0.04-1.65 with the shift (no case worse than
    1.65; level times; bench/NOTES.md "Session 36"). Not at scale 0. Session 66: with
    ALiBi lse2 holds the row's bias too, so log2(keys) gives way to the bias's own
    log-sum, log2 sum_j 2^bias_j (_log2_alibi_weight), which takes the bias out of u:
    with the bias in u, rows far from every key (Nq > Nk) rounded hundreds of log2 units
    (dV 9-90x the criterion's bound), and log2(keys) overstated the spread of rows that
    see many keys (1.2-1.3x).
    With softcap u inverts the tanh, u = atanh((lse2 - log2 keys) / (softcap log2 e)) /
    q_scale (clamped), and q_scale u is added back before the tanh (one-key rows at
    softcap 30 and scale 1: dV 3x the criterion's bound unshifted).
  - yT = dP^T - delta comes out of one product, [v, 1, 1] @ [dO, -delta_hi,
    -delta_lo]^T, with delta split into two bf16 numbers (exact to ~2^-17 delta), so
    the cancellation dP - delta happens in the float32 accumulator and only the
    difference is rounded: more precise than PyTorch's bf16 math, which rounds dP first.
  - P^T (float32 in the pass) is rounded to bf16 for dV += P^T dO, and dS^T = P^T * yT
    is rounded to bf16 once for dK and dQ; every tile's product is rounded to bf16
    before its float32 accumulation, as before. With softcap / ALiBi / dropout the
    float32 passes are torch ops (dS^T = P^T (bf16) * yT in bf16 without softcap /
    dropout).
  Measured: gradient error / the same-dtype PyTorch math's error (both against
  float64; the tests' criterion is <= 3) 0.4-1.9 over 5 shapes x 4 seeds, against
  0.3-1.0 with float32 score products before (seed 0; bench/wip/cpu-bwd-amx.md).
Every op of an item runs on one thread in a fixed order, and items write disjoint
slices of dq / dk / dv, so the result is bitwise repeatable whichever thread takes
which item; no atomics, no merges.
"""
from __future__ import annotations

import math
import threading
from typing import NamedTuple

import torch

from flashtriton import memory

from . import config, engine, layout, native_backward, native_bwd
from .dropout import Dropout
from .forward import q_scale
from .tiles import LOG2E, Band, alibi_distance, alibi_slopes_log2, mask_, tiles


# The path the last backward call took: "compiled" (native_backward.py's C kernel, float32 math) or
# "ops" (the torch-ops loop below); the CPU benchmark reports it.
LAST_PATH: str | None = None


def bwd(dout, q, k, v, out, lse, params, alibi=None, rng=None, varlen=None):
    """Backend entry point: returns (dq, dk, dv), contiguous, shaped like q, k, v."""
    global LAST_PATH
    # float32 math without softcap / ALiBi / dropout: the compiled backward (config.BWD_PATH)
    lib = native_backward.library_for(q, params, alibi, params.dropout_p > 0,
                                      config.products_in_input_precision(q.dtype))
    LAST_PATH = "ops" if lib is None else "compiled"
    if lib is not None:
        with torch.no_grad():
            return native_backward.backward(lib, dout, q, k, v, out, lse, params, varlen)
    nheads, nheads_k = q.shape[-2], k.shape[-2]
    group = nheads // nheads_k
    dq = memory.empty(q.shape, q.dtype, q.device)
    dk = memory.empty(k.shape, k.dtype, k.device)
    dv = memory.empty(v.shape, v.dtype, v.device)
    if varlen is None:
        mq, mk = q.shape[1], k.shape[1]
    else:
        mq, mk = varlen.max_seqlen_q, varlen.max_seqlen_k
    drop = Dropout(params.dropout_p, rng, nheads, mq, mk) if params.dropout_p > 0 else None
    ctx = _Ctx(params, alibi, drop, group, q.shape[-1], config.products_in_input_precision(q.dtype))
    seqs = layout.sequences(q, k, v, varlen, extra=(out, dout, dq), lse=lse)
    items = []
    for seq, (dk_s, dv_s) in zip(seqs, layout.key_views(varlen, dk, dv)):
        band = Band(seq.q.shape[0], seq.k.shape[0], params.window_left, params.window_right)
        items += [(seq, band, hk, dk_s, dv_s) for hk in range(nheads_k)]
    with torch.no_grad():   # a kernel, like the Triton backend's: never part of a graph (create_graph=True)
        _run(items, lambda item, ws: _head(ctx, ws, *item))
    return dq, dk, dv


def _head(ctx, ws, seq, band, hk, dk_s, dv_s):
    """All gradients of one (sequence, KV head): dK / dV rows of hk, dQ of its G heads."""
    if band.n_k == 0 or band.n_q == 0:
        _empty_head(ctx, seq, band, hk, dk_s, dv_s)
        return
    head = _head_inputs(ctx, ws, seq, band, hk)
    for _, j0, j1 in tiles(0, band.n_k, config.BWD_KEYS):
        _key_tile(ctx, ws, seq, band, hk, dk_s, dv_s, j0, j1, head)
    _write_dq(ctx, seq, hk, head.dq_t)


class _Workspace:
    """The score-sized tiles of one thread, allocated once per call and reused by every
    tile step: a fresh multi-MiB tensor per op is a fresh mmap from glibc, whose page
    faults (kernel time zeroing pages) cost as much as the op (measured: the same loop
    75 - 180 ms from one run to the next, depending on glibc's mmap threshold)."""

    def __init__(self):
        self._bufs = {}

    def get(self, name, rows, cols, dtype):
        """A (rows, cols) contiguous tensor of dtype, uninitialised, named `name`."""
        buf = self._bufs.get((name, dtype))
        if buf is None or buf.numel() < rows * cols:
            buf = self._bufs[(name, dtype)] = torch.empty(max(rows * cols, 1), dtype=dtype)
        return buf[:rows * cols].view(rows, cols)


def _run(items, fn):
    """fn(item, workspace) for every item. With several intra-op threads and several
    items, runs the items on min(items, threads) Python threads, each with threads //
    that many intra-op threads (one on a 2-core machine; torch ops release the GIL),
    taking the next item when done (config.BWD_HEAD_THREADS): a head is then computed
    start to end by its own core(s), its tiles staying in that L2, with no fork / join
    per op. Every item writes its own slices of dq / dk / dv, and every op of an item
    runs with the same thread count whichever Python thread runs it, so the result
    does not depend on which thread took which item: bitwise repeatable."""
    total = torch.get_num_threads()
    n = min(len(items), total) if config.BWD_HEAD_THREADS else 1
    if n <= 1:
        ws = _Workspace()
        for item in items:
            fn(item, ws)
        return
    per = total // n
    todo = iter(items)
    lock = threading.Lock()
    errors = []

    def worker():
        torch.set_num_threads(per)      # this thread's own setting (OpenMP / MKL thread-local)
        ws = _Workspace()
        with torch.no_grad():           # grad mode is thread-local: a new thread starts enabled
            while not errors:
                with lock:
                    item = next(todo, None)
                if item is None:
                    return
                try:
                    fn(item, ws)
                except BaseException as e:  # re-raised by the caller's thread
                    errors.append(e)

    threads = [threading.Thread(target=worker, name=f"flashtriton-cpu-bwd-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


class _Ctx(NamedTuple):
    params: object
    alibi: object
    drop: object
    group: int
    head_dim: int
    lowp: bool


def _write_dq(ctx, seq, hk, dq_t):
    """dQ^T (D, n_q * G) float32 -> dq[:, hk * G:(hk + 1) * G] (n_q, G, D), times the scale."""
    n_q = seq.q.shape[0]
    g = ctx.group
    seq.extra[2][:, hk * g:(hk + 1) * g].copy_(dq_t.mul_(ctx.params.softmax_scale).t().view(n_q, g, ctx.head_dim))


class _HeadInputs(NamedTuple):
    """One (sequence, KV head)'s operands; rows = n_q * G (query i, head g) pairs.

    S^T = kx_j @ qx^T and dP^T = vx_j @ dox^T; the extra columns fold the lse / delta
    subtraction into the products (module docstring): float32 kx = [k, 1],
    qx = [q * q_scale, -lse2] (no extra column with softcap), vx = [v, 1],
    dox = [dO, -delta]; bf16 kx = [k, 1, 1], qx = [q, -u_hi, -u_lo] (unscaled; u the
    per-row shift of the module docstring; no extra columns with softcap or scale 0),
    vx = [v, 1, 1], dox = [dO, -delta_hi, -delta_lo] (delta split into two bf16
    numbers, exact to ~2^-17). With dropout, vx and dox have no extra columns
    (dropout(dP) - delta does not fold)."""
    lowp: bool
    kx: torch.Tensor        # (n_k, D [+ 1]) float32 / (n_k, D) bf16
    qx: torch.Tensor        # (rows, D [+ 1]) float32 / (rows, D) bf16
    vx: torch.Tensor        # (n_k, D [+ 1 | 2])
    dox: torch.Tensor       # (rows, D [+ 1 | 2])
    k: torch.Tensor         # (n_k, D) view of kx: the weight of dQ += dS k
    q: torch.Tensor         # (rows, D) view of qx: the weight of dK += dS^T q (float32: q * q_scale)
    do: torch.Tensor        # (rows, D) view of dox: the weight of dV += P^T dO
    lse2: torch.Tensor      # (1, rows) float32 lse in log2 units (not folded: softcap)
    nlse2: torch.Tensor     # (1, rows) -lse2, bf16 with the shift: q_scale * u - lse2 (S^T's float32 pass adds it)
    qu: object              # (1, rows) q_scale * u (bf16 with the shift: softcap's pass adds it before tanh), or None
    delta: torch.Tensor     # (1, rows) float32 rowsum(dO * O) (not folded: dropout)
    fold_lse: bool
    fold_delta: bool
    slopes_t: object        # (1, 1, G) -slope * log2 e, or None
    dq_t: torch.Tensor      # (D, rows) float32 dQ^T accumulator: dQ^T += k_j^T dS^T, ~1.2x dQ += dS k_j's
                            # rate (M = D, N = rows: 173 vs 152 GFLOP/s fp32, 606 vs 529 bf16, one thread)


def _rows(ws, name, x, hk, group, dtype, extra, scale=1.0):
    """(n, H, D) -> (n * G, D + extra) in dtype: row i * G + g = x[i, hk * G + g] * scale
    (extra columns left uninitialised), or (n, Hk, D) -> (n, D + extra) with group=None.
    In the workspace buffer `name`: reused by the next head of this thread (fresh
    per-head tensors page-faulted: these copies took 1.2 ns / element, 14 ms of the
    one-thread float32 backward)."""
    n, d = x.shape[0], x.shape[-1]
    g = 1 if group is None else group
    res = ws.get(name, n * g, d + extra, dtype).view(n, g, d + extra)
    res[:, :, :d].copy_(x[:, hk:hk + 1] if group is None else x[:, hk * group:(hk + 1) * group])
    if scale != 1.0:
        res[:, :, :d].mul_(scale)
    return res.view(-1, d + extra)


def _visible(band: Band) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(n_q,) int64 each: the diagonal position p = i + off of every query row and the range
    [lo, hi) of keys it sees (empty when hi <= lo)."""
    i = torch.arange(band.n_q)
    p = i + band.off
    lo = torch.zeros_like(i) if band.left < 0 else (p - band.left).clamp(min=0)
    hi = torch.full_like(i, band.n_k) if band.right < 0 else (p + band.right + 1).clamp(max=band.n_k)
    return p, lo, hi


def _log2_visible(band: Band, group: int) -> torch.Tensor:
    """(1, n_q * G) float32 log2 of the number of keys each row sees (at least 1)."""
    _, lo, hi = _visible(band)
    return (hi - lo).clamp(min=1).float().log2().repeat_interleave(group).view(1, -1)


def _log2_alibi_weight(band: Band, slopes: torch.Tensor) -> torch.Tensor:
    """(1, n_q * G) float32: log2 of sum over the keys row (i, g) sees of 2^(slopes[g] |a - j|),
    a = max(i + off, 0) the row's ALiBi anchor (tiles.alibi_distance), the ALiBi bias's own
    log-sum (0 for a row that sees none). Closed form: two geometric series a
    row (keys left of the anchor and right of it), in float64, each summed from its largest term
    and taken relative to the row's largest bias `top` (slopes are -ALiBi slope * log2 e: at the
    nearest key for the usual positive ALiBi slope, at the farthest for a negative one), so that
    nothing overflows or underflows."""
    p, lo, hi = _visible(band)
    p = p.clamp(min=0)                                          # the anchor (the mask keeps i + off)
    seen = (hi > lo).view(-1, 1)
    a_l, b_l = p - torch.minimum(hi - 1, p), p - lo            # distances of keys j <= p
    a_r, b_r = torch.maximum(lo, p + 1) - p, hi - 1 - p          # distances of keys j > p
    near = torch.where(p < lo, lo - p, torch.where(p >= hi, p - (hi - 1), torch.zeros_like(p)))
    far = torch.maximum(p - lo, hi - 1 - p)
    sl = slopes.reshape(1, -1).double()                           # (1, G) log2 units a position
    top = torch.where(sl <= 0, sl * near.double().view(-1, 1), sl * far.double().view(-1, 1))
    ln2 = math.log(2.0)
    step = -sl.abs() * ln2                                        # ln of the ratio, from the largest term on

    def series(a, b):   # sum_{d = a}^{b} 2^(sl d - top), 0 where b < a; (n_q, G)
        n = (b - a + 1).clamp(min=0).double().view(-1, 1)
        start = torch.where(sl <= 0, a.double().view(-1, 1), b.double().view(-1, 1))
        first = torch.exp((sl * start - top) * ln2)
        ratio = torch.where(step < 0, torch.expm1(step * n) / torch.expm1(step).clamp(max=-1e-300), n)
        return torch.where(n > 0, first * ratio, torch.zeros_like(first))

    total = series(a_l, b_l) + series(a_r, b_r)
    res = torch.where(seen & (total > 0), total.log2() + top, torch.zeros_like(total))
    return res.float().reshape(1, -1)


def _head_inputs(ctx, ws, seq, band, hk) -> _HeadInputs:
    group, d, params = ctx.group, ctx.head_dim, ctx.params
    n_q = seq.q.shape[0]
    h0 = hk * group
    out, dout, _ = seq.extra
    f32 = torch.float32
    fold_delta = ctx.drop is None
    # dO rows in float32 (float32 path: with the -delta column of the folded dP^T product)
    ex = 1 if fold_delta and not ctx.lowp else 0
    do32 = _rows(ws, "do32", dout, hk, group, f32, ex)
    # (1, rows) rowsum(dO * O), O read in place from out's strided rows (no copy of its head slice)
    prod = ws.get("o32", n_q * group, d, f32).view(n_q, group, d)
    delta = torch.mul(do32.view(n_q, group, -1)[:, :, :d], out[:, h0:h0 + group], out=prod).sum(dim=2).view(1, -1)
    lse2 = seq.lse[h0:h0 + group].t().reshape(1, n_q * group) * LOG2E
    slopes = alibi_slopes_log2(ctx.alibi, seq.index, h0, group)
    nlse2, qu = -lse2, None
    if ctx.lowp:
        bf = torch.bfloat16
        fold_lse = False
        qsc = q_scale(params)
        shift = config.BWD_BF16_SHIFT and qsc != 0
        ex = 2 if shift else 0
        kx = _rows(ws, "kx", seq.k, hk, None, bf, ex)
        qx = _rows(ws, "qx", seq.q, hk, group, bf, ex)
        if shift:
            # S^T - u in one product, [k, 1, 1] @ [q, -u_hi, -u_lo]^T, u = sh / q_scale per row with
            # sh = lse2 - log2(keys seen) (0 where lse = +inf: rows without keys), so that the bf16
            # rounding of the product meets values near 0 where P is large: |x| <~ log2 N there, not
            # |q_scale * s| (large logits: 3.4-7.6x PyTorch's bf16 gradient error at scale 5 before, ~20x at 20;
            # test_regression_bf16_large_logits). The float32 pass then adds q_scale * (u_hi + u_lo) -
            # lse2 (the represented shift, so its bf16 split costs nothing but the rounding of S^T - u).
            # With ALiBi the bias's own log-sum replaces log2(keys seen): it takes the row's bias out of u
            # (rows far from every key, Nq > Nk: dV 9-90x the criterion's bound with the bias in) and counts
            # the keys the bias leaves weight to (Nq << Nk: 1.2-1.3x the criterion's bound with the key count;
            # test_regression_alibi_far_rows_grads).
            sh = lse2 - (_log2_visible(band, group) if slopes is None else _log2_alibi_weight(band, slopes))
            sh = torch.where(torch.isfinite(sh), sh, torch.zeros_like(sh))
            if params.softcap > 0:
                # softcap: sh is softcap log2(e) tanh(q_scale s) at the heavy keys, so u inverts the tanh
                # (clamped where they saturate it; any u is exact, only the rounding moves), and the
                # float32 pass adds q_scale * u back before the tanh (one-key rows at scale 1, softcap
                # 30: dV 3x the criterion's bound before; test_regression_bf16_softcap_shift)
                t = (sh / (params.softcap * LOG2E)).clamp(-1 + 2 ** -12, 1 - 2 ** -12)
                sh = torch.atanh(t)
            u = sh / qsc
            u_hi = u.to(bf)
            u_lo = (u - u_hi.float()).to(bf)
            kx[:, d:] = 1.0
            qx[:, d] = -u_hi[0]
            qx[:, d + 1] = -u_lo[0]
            qu = (u_hi.float() + u_lo.float()) * qsc
            nlse2 = qu - lse2
        ex = 2 if fold_delta else 0
        vx = _rows(ws, "vx", seq.v, hk, None, bf, ex)
        dox = _rows(ws, "dox", dout, hk, group, bf, ex)
        if fold_delta:
            hi = delta[0].to(bf)
            vx[:, d:] = 1.0
            dox[:, d] = -hi
            dox[:, d + 1] = (hi.float() - delta[0]).to(bf)   # -(delta - hi), exact to ~2^-17 delta
    else:
        fold_lse = params.softcap == 0
        ex = 1 if fold_lse else 0
        kx = _rows(ws, "kx", seq.k, hk, None, f32, ex)
        qx = _rows(ws, "qx", seq.q, hk, group, f32, ex, q_scale(params))
        if fold_lse:
            kx[:, d] = 1.0
            qx[:, d] = -lse2[0]
        ex = 1 if fold_delta else 0
        vx = _rows(ws, "vx", seq.v, hk, None, f32, ex)
        dox = do32
        if fold_delta:
            vx[:, d] = 1.0
            dox[:, d] = -delta[0]
    return _HeadInputs(ctx.lowp, kx, qx, vx, dox, kx[:, :d], qx[:, :d], dox[:, :d], lse2, nlse2, qu, delta, fold_lse,
                       fold_delta, None if slopes is None else slopes.view(1, 1, group),
                       ws.get("dq_t", d, n_q * group, f32).zero_())


def _empty_head(ctx, seq, band, hk, dk, dv):
    """A sequence without queries or without keys: all its gradients are zero."""
    g = ctx.group
    if band.n_q:
        seq.extra[2][:, hk * g:(hk + 1) * g].zero_()
    if band.n_k:
        dk[:, hk].zero_()
        dv[:, hk].zero_()


def _key_tile(ctx, ws, seq, band: Band, hk, dk, dv, j0, j1, head: _HeadInputs):
    """dK, dV of keys [j0, j1) of KV head hk, and their dQ contributions."""
    params, group, d, drop = ctx.params, ctx.group, ctx.head_dim, ctx.drop
    lowp, softcap = head.lowp, params.softcap > 0
    h0 = hk * group
    rows = config.BWD_ROWS if lowp else min(config.BWD_ROWS, config.BWD_ROWS_FLOAT32)
    bm = max(1, rows // group)  # query positions per block
    w = j1 - j0
    qsc = q_scale(params)
    # float32 inputs: dK / dV accumulate straight into dk / dv's strided rows (the GEMM's ldc; the
    # first block's product with beta = 0 overwrites, nothing is zeroed or copied), dK's scale rides
    # in alpha. Else float32 accumulators, scaled and copied at the end. In the float32 path q carries
    # q_scale, so dK's factor is softmax_scale / q_scale, written without dividing (scale 0: q_scale
    # is 0 too; test_regression_scale_zero).
    dk_alpha = params.softmax_scale if lowp else (params.softcap if softcap else 1.0 / LOG2E)
    direct = not lowp and dk.dtype == torch.float32
    if direct:
        dk_acc, dv_acc = dk[j0:j1, hk], dv[j0:j1, hk]
    else:
        dk_acc, dv_acc = ws.get("dk_acc", w, d, torch.float32), ws.get("dv_acc", w, d, torch.float32)
    beta_next = 0.0     # the GEMMs' beta for the next query block: the first one overwrites
    kx_j, vx_j, k_j = head.kx[j0:j1], head.vx[j0:j1], head.k[j0:j1]
    i_lo, i_hi = band.query_range(j0, j1)
    # bf16 without softcap / ALiBi / dropout: P and dS in one compiled pass (native_bwd.py). Not with
    # softmax_scale = 0: the pass scales S after the mask, and 0 * -inf is NaN (the ops path below
    # masks after scaling; test_regression_scale_zero)
    lib = native_bwd.load() if lowp and config.BWD_FUSED and not softcap and drop is None \
        and head.slopes_t is None and qsc != 0 else None
    # float32 / fp16 without softcap / dropout: exp2 and dS = P * (dP - delta) in one compiled pass
    lib32 = native_bwd.load() if not lowp and config.BWD_FUSED and not softcap and drop is None else None
    for _, i0, i1 in tiles(i_lo, i_hi, bm):
        r0, r1 = i0 * group, i1 * group
        r = r1 - r0
        beta, beta_next = beta_next, 1.0
        if lib is not None:
            s16 = torch.mm(kx_j, head.qx[r0:r1].t(), out=ws.get("s16", w, r, torch.bfloat16))  # (w, r) S^T
            if not band.full(i0, i1, j0, j1):
                # s16 is unscaled and the pass multiplies it by qsc: a negative scale would turn a -inf
                # hidden score into +inf (NaN gradients), so it hides them as +inf, which qsc makes -inf
                # (test_regression_negative_scale_masked_bf16)
                mask_(s16.view(w, i1 - i0, group).permute(1, 2, 0), band, i0, i1, j0, j1,
                      hidden=math.inf if qsc < 0 else -math.inf)
            y16 = torch.mm(vx_j, head.dox[r0:r1].t(), out=ws.get("dp16", w, r, torch.bfloat16))  # dP^T - delta
            p16, ds16 = ws.get("p16", w, r, torch.bfloat16), ws.get("ds16", w, r, torch.bfloat16)
            native_bwd.p_ds_bf16(lib, s16, y16, head.nlse2[0, r0:r1], qsc, p16, ds16, torch.get_num_threads())
            _acc(dv_acc, torch.mm(p16, head.do[r0:r1]), beta)
            _acc(dk_acc, torch.mm(ds16, head.q[r0:r1]), beta)
            head.dq_t[:, r0:r1].add_(torch.mm(k_j.t(), ds16))
            continue
        st = ws.get("st", w, r, torch.float32)
        lse_left = not head.fold_lse
        if lowp:                                               # S^T, unscaled, rounded to bf16 once
            st.copy_(torch.mm(kx_j, head.qx[r0:r1].t(), out=ws.get("s16", w, r, torch.bfloat16)))
            if softcap:                                        # st = q_scale * s (the shift added back)
                if head.qu is None:
                    st.mul_(qsc)
                else:
                    torch.add(head.qu[:, r0:r1], st, alpha=qsc, out=st)
            else:                                              # st = q_scale * s - lse2, one pass
                torch.add(head.nlse2[:, r0:r1], st, alpha=qsc, out=st)
                lse_left = False
        else:
            st = engine.mm(kx_j, head.qx[r0:r1].t(), out=st)  # (w, r) S^T [- lse2]
        if softcap:
            tanh_t = st.tanh_()                                # kept for the derivative
            st = torch.mul(tanh_t, params.softcap * LOG2E)
        st3 = st.view(w, i1 - i0, group)
        if head.slopes_t is not None:
            st3.addcmul_(alibi_distance(band, i0, i1, j0, j1).permute(2, 0, 1), head.slopes_t)
        if not band.full(i0, i1, j0, j1):
            mask_(st3.permute(1, 2, 0), band, i0, i1, j0, j1)
        if lse_left:
            st.sub_(head.lse2[:, r0:r1])
        # (w, r) dP^T - delta (folded), or dP^T
        if lowp:
            dpt = torch.mm(vx_j, head.dox[r0:r1].t(), out=ws.get("dp16", w, r, torch.bfloat16))
        else:
            dpt = engine.mm(vx_j, head.dox[r0:r1].t(), out=ws.get("dp", w, r, torch.float32))
        if lib32 is not None:                                  # P^T = exp2(st), dS^T = P^T * dpt: one pass
            native_bwd.p_ds_f32(lib32, st, dpt, torch.get_num_threads())
            pt = st
            engine.addmm_(dv_acc, pt, head.do[r0:r1], beta=beta)
            engine.addmm_(dk_acc, dpt, head.q[r0:r1], beta=beta, alpha=dk_alpha if direct else 1.0)
            engine.addmm_(head.dq_t[:, r0:r1], k_j.t(), dpt)
            continue
        pt = st.exp2_()                                        # (w, r) P^T
        if drop is not None:
            dpt = dpt.float() if lowp else dpt
            keep_t = drop.keep(seq.index, h0, group, i0, i1, j0, j1).permute(2, 0, 1)  # (w, bm, G)
            pdt = pt.view(w, i1 - i0, group).masked_fill(~keep_t, 0.0).mul_(drop.scale).view(w, -1)
            dpt.view(w, i1 - i0, group).masked_fill_(~keep_t, 0.0).mul_(drop.scale)
            dpt.sub_(head.delta[:, r0:r1])
        else:
            pdt = pt
        if lowp:
            p16 = ws.get("p16", w, r, torch.bfloat16).copy_(pdt)
            _acc(dv_acc, torch.mm(p16, head.do[r0:r1]), beta)
            if drop is None and not softcap:                   # dS^T = P^T (dP^T - delta), bf16
                ds16 = torch.mul(dpt, p16, out=ws.get("ds16", w, r, torch.bfloat16))
            else:
                dst = dpt.float().mul_(pt) if dpt.dtype != torch.float32 else dpt.mul_(pt)
                if softcap:
                    dst.mul_(tanh_t.square_().neg_().add_(1.0))
                ds16 = dst.to(torch.bfloat16)
            _acc(dk_acc, torch.mm(ds16, head.q[r0:r1]), beta)
            head.dq_t[:, r0:r1].add_(torch.mm(k_j.t(), ds16))
        else:
            engine.addmm_(dv_acc, pdt, head.do[r0:r1], beta=beta)
            dst = dpt.mul_(pt)                                 # (w, r) dS^T, natural units
            if softcap:
                dst.mul_(tanh_t.square_().neg_().add_(1.0))    # d cap*tanh(x/cap) / dx = 1 - tanh^2
            engine.addmm_(dk_acc, dst, head.q[r0:r1], beta=beta, alpha=dk_alpha if direct else 1.0)
            engine.addmm_(head.dq_t[:, r0:r1], k_j.t(), dst)
    if beta_next == 0.0:            # no query block sees these keys (windows): zero gradients
        dk[j0:j1, hk].zero_()
        dv[j0:j1, hk].zero_()
    elif not direct:                # dS is w.r.t. scale * q.k (float32 path: q carries q_scale)
        torch.mul(dk_acc, dk_alpha, out=dk[j0:j1, hk])
        dv[j0:j1, hk].copy_(dv_acc)


def _acc(acc, prod, beta):
    """acc = prod for a key tile's first query block (beta 0.0), else acc += prod."""
    if beta == 0.0:
        acc.copy_(prod)
    else:
        acc.add_(prod)
