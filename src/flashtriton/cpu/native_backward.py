"""The compiled float32 backward: dQ, dK, dV of every head and sequence in one C call, for
float32 / fp16 inputs (and bf16 where it takes the float32 path, config.products_in_input_precision
False) without softcap, ALiBi or dropout (those stay on the torch-ops path of backward.py, by
feature). Built with the system C compiler and cached on disk like the other kernels (native._build).

Why: backward.py's float32 path drives five oneDNN GEMMs per tile and runs at their rate on these
tile shapes (84-171 GFLOP/s on the 2-core Zen 4 VM; K = D + 1 = 65 for the score products); the
compiled forward (native_prefill.py) reaches ~155 GFLOP/s all-in with plain AVX-512 FMA micro-kernels.
The same micro-kernel form covers all five backward products. Measured (bench/wip/cpu-bwd-compiled.md,
B=1 H=8 N=2048 D=64 fp32, 2 threads, interleaved, min ms over three runs in different load periods):
backward 106-124 ms (174-203 GFLOP/s) against 157-199 ms for the ops path and 141-177 ms for SDPA's;
causal 57-65 ms (ops 123-157, SDPA 87-113); forward + backward medians 1.25-1.34x SDPA's. One thread:
the products run at ~105-110 GFLOP/s, 92-96% of the micro-kernel's L1-resident rate (114.5 GFLOP/s,
one 512-bit FMA a cycle); packing 3-6% and the exp2 pass 4-5% of the time.

Work items are (sequence, KV head, key piece); an item owns dK / dV of its keys and a dQ of the G
query heads of its KV head (rows = (query i, head g) pairs, row i * G + g, as in backward.py).
Pieces: one per (sequence, KV head) unless there are fewer than config.BWD_C_MIN_ITEMS of those; then
each one's keys are cut (in whole W-key blocks, as evenly as the blocks allow) into up to
ceil(BWD_C_MIN_ITEMS / items) pieces of at least config.BWD_C_MIN_PIECE keys (pieces_for), each with
its own dQ partial; the pieces of a (sequence, KV head) share its packed rows (packed once before the
items, in 256-row chunks over the threads), and after the items dq = scale * (partial 0 + partial 1
+ ...), in piece order. MQA, B=1 H=8 N=2048 D=64 (one item, 8 pieces): 127 ms against 223 ms uncut
(one thread busy) and 161 ms for the ops path; MHA's 8 whole items: 104 ms. The cut depends on the
problem only, never on the thread count, so every item's arithmetic is fixed: the result is bitwise
repeatable for any thread count. Items run largest first (visible scores + packing), dynamically scheduled over OpenMP
threads.

Per item (float32 throughout; sizes for rows = n_q * G, W keys per block, R rows per block):

    pack   Qs = q (rows x DP; unscaled since session 54), Qs^T (D x LT), dO (rows
           x DP), dO^T (D x LT), delta = rowsum(dO * O), lse2 = lse * log2 e; K, V of the piece
           (nk x DP); DP = D rounded up to 16, zero padded; LT = rows + 64, zero padded
    for each key block j of W keys:                       dK_j = dV_j = 0 (W x DP)
        for each block i of R rows that sees block j:     (the exact query range: causal / window
                                                           bands start at the first row that sees j)
            S^T  = (K_j Qs_i^T) q_scale      (W x R)      log2 units (q_scale = softmax_scale log2 e),
                                                          summed as the forward's qk_f32: the same bits
            dP^T = V_j dO_i^T                (W x R)
            P^T  = exp2(S^T - lse2), 0 where hidden;  dS^T = P^T (dP^T - delta), 0 where hidden
            dV_j += P^T dO_i;  dK_j += dS^T Qs_i;  dQ_i += dS K_j
        dk = softmax_scale * dK_j, dv = dV_j
    dq = softmax_scale * dQ

Every product is the AVX-512 "broadcast one A element, FMA a 16-lane row of B" form with B's rows
contiguous: mk() keeps a register tile of up to MR = 6 rows x 4 vectors (24 accumulators) and loops
over the shared dimension. S^T / dP^T: A = K / V rows (broadcast over d), B = Qs^T / dO^T rows
(64 query rows per tile); dV / dK: A = P^T / dS^T rows (broadcast over r), B = dO / Qs rows;
dQ: A = dS^T columns (broadcast dS^T[w][r], stride RS), B = K rows. The tiles S^T and dP^T / dS^T
are W x RS floats per thread (RS = R + 16: a row stride that is not a multiple of 4 KiB, so the
dQ product's strided broadcasts do not fall into a few L1 sets). P^T and dS^T are formed by a
separate pass over the tile (exp2: 2^n times a degree-7 polynomial of f = x - n, |f| <= 1/2,
< 1e-7 relative, as native_prefill.py's; x < -125 gives 0, -inf included; NaN stays NaN).

Precision: float32 inputs stay float32 (fp16 / bf16 convert exactly; their gradients are rounded
once at the end); products are FMA chains in float32 of at most KC = 64 terms in the registers, added
to their accumulator in a fixed order (dV / dK: 64-row pieces of the row blocks in order; dQ: 64-key
pieces of the key blocks, then the key pieces in order; S^T / dP^T: 64-d pieces when D > 64). A
single register chain over a whole 231-row block reached 1.05x the tests' criterion on dK
(test_regression_long_register_sums); with KC = 64 the worst of 18 shapes x seeds was 0.61x (the ops
path: 0.97x). delta is computed as dP's FMA chain (same
order over d), so a row that sees one key (O = V) gets dP - delta = 0 exactly
(test_regression_single_key_rows). Hidden lanes are zeroed after exp2 (masked moves): their P and dS
are exactly 0, so a row that sees no key gets dQ = 0 and a key no row sees dK = dV = 0. NaN inputs propagate to the
gradients they reach (a NaN in a visible score makes its P and dS NaN; test_regression_nan_stays_nan);
as on the ops path, a hidden NaN can still reach a gradient through 0 * NaN in a tile's product.
Shared with the ops path (not a difference): P = exp2(s - lse2) inherits the forward's float32 rounding
of lse (~|lse| ulps), so large logits (scale 0.5 at D = 32) miss the criterion on dQ / dV on both
paths, and rows with one key (window (0, 0)) miss it on dV here and on dQ on the ops path.

Memory: per-thread scratch for one item, O((rows + n_k) * D + W * R) floats (~3.6 MiB at N = 2048,
D = 64, G = 1: Qs, dO, dQ, Qs^T, dO^T, K, V); split items: the packed rows of every (sequence, KV head)
(4 x rows x D floats each, fewer than BWD_C_MIN_ITEMS of them) and the dQ partials (pieces x rows x D);
nothing N x N.

Selection (config.BWD_PATH, FLASHTRITON_CPU_BACKWARD): "auto" (default) runs this kernel when it
builds and takes the problem, else the torch-ops path (one RuntimeWarning naming the cause when the
build failed: no C compiler, a compile error, a CPU without AVX-512F); "compiled" raises
NativeUnavailable instead; "ops" never uses it. Problems it does not take (bf16 multiplied in bf16,
softcap, ALiBi, dropout, head dim > 256) take the ops path under every setting, by feature. backward.LAST_PATH
(the bench's path column) says "compiled" or "ops".
"""
from __future__ import annotations

import ctypes
import threading
import warnings

import torch

from flashtriton import memory

from . import config, native
from .native import NativeUnavailable

C_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>
#if defined(__AVX512F__) && !defined(FT_NO_VEC)
#include <immintrin.h>
#define HAVE_VEC 1
#else
#define HAVE_VEC 0
#endif

#define MR 6        /* rows of a micro-kernel register tile (x up to 4 vectors: 24 accumulators) */
#define MAXD 256

int ft_bwd_caps(void) { return HAVE_VEC; }

/* FT_PROF builds (load_variant("FT_PROF"), sweeps only): TSC cycles per phase summed over threads in
   ft_prof: 0 packing, 1 S^T and dP^T, 2 the exp2 / dS pass, 3 dV and dK, 4 dQ */
#ifdef FT_PROF
#include <x86intrin.h>
double ft_prof[8];
#define PROF_T(v) uint64_t v = __rdtsc()
#define PROF_ADD(i, t0) \
    do { uint64_t t1_ = __rdtsc(); _Pragma("omp atomic") ft_prof[i] += (double)(t1_ - (t0)); } while (0)
#else
#define PROF_T(v)
#define PROF_ADD(i, t0)
#endif

static inline int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static inline int64_t mn(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t mx(int64_t a, int64_t b) { return a > b ? a : b; }

#if HAVE_VEC
/* C[m][16 v ..] (+)= sum_{k < n} A[m as + k ak] B[k bk + 16 v ..] for m < mr, v < nv (mr, nv constants
   after inlining): broadcast one A element, FMA a 16-lane row of B. The sum starts from zero in the
   registers; load = 0 stores it, load = 1 adds it to C at the end: a two-level sum (a block's terms,
   then the blocks) instead of one chain through C, whose rounding error grew with the sequence length
   (dV up to 3.9x PyTorch's float32 error at N = 1023, G = 2, against <= 2.4x two-level). */
static inline __attribute__((always_inline)) void mk(const int mr, const int nv, int64_t n, const float *A,
                                                    int64_t as, int64_t ak, const float *B, int64_t bk, float *C,
                                                    int64_t cs, int load) {
    __m512 c[MR][4];
    for (int m = 0; m < mr; m++)
        for (int v = 0; v < nv; v++) c[m][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; k++) {
        __m512 b[4];
        for (int v = 0; v < nv; v++) {
            b[v] = _mm512_loadu_ps(B + k * bk + 16 * v);
            __asm__("" : "+v"(b[v]));       /* one load per vector, not one per row's FMA */
        }
        for (int m = 0; m < mr; m++) {
            const __m512 a = _mm512_set1_ps(A[m * as + k * ak]);
            for (int v = 0; v < nv; v++) c[m][v] = _mm512_fmadd_ps(a, b[v], c[m][v]);
        }
    }
    for (int m = 0; m < mr; m++)
        for (int v = 0; v < nv; v++)
            _mm512_storeu_ps(C + m * cs + 16 * v, load ? _mm512_add_ps(_mm512_loadu_ps(C + m * cs + 16 * v), c[m][v])
                                                       : c[m][v]);
}

#define MK_CASE(R_, V_) case (R_) * 8 + (V_): mk(R_, V_, n, A, as, ak, B, bk, C, cs, load); break;
#define MK_ROW(R_) MK_CASE(R_, 1) MK_CASE(R_, 2) MK_CASE(R_, 3) MK_CASE(R_, 4)
static void mk_any(int mr, int nv, int64_t n, const float *A, int64_t as, int64_t ak, const float *B, int64_t bk,
                   float *C, int64_t cs, int load) {
    switch (mr * 8 + nv) {
        MK_ROW(1) MK_ROW(2) MK_ROW(3) MK_ROW(4) MK_ROW(5) MK_ROW(6)
        default: break;
    }
}

#ifndef KC
#define KC 64       /* terms per register sum: longer sums are cut into KC-term pieces added to C in turn */
#endif
/* S^T = K Q^T, dP^T = V dO^T and delta of one-query sequences: pieces of 16 over d, as native_prefill.py's
   QK_PIECE_ONE (the forward's scores; session 59) */
#define QK_KC_ONE 16

/* C (m rows, ncol vectors, row stride cs) (+)= A B over n: tiles of MR rows x 4 vectors; each tile's sum
   in pieces of KC terms (a chain of 231 terms in the registers gave dK 1.05x the tests' criterion,
   test_regression_long_register_sums) */
static void gemm(int64_t m, int64_t ncol, int64_t n, const float *A, int64_t as, int64_t ak, const float *B,
                 int64_t bk, float *C, int64_t cs, int load, const int64_t kc) {
    for (int64_t c0 = 0; c0 < ncol; c0 += 4) {
        const int nv = (int)mn(4, ncol - c0);
        for (int64_t m0 = 0; m0 < m; m0 += MR) {
            const int mr = (int)mn(MR, m - m0);
            const float *a0 = A + m0 * as;
            float *c = C + m0 * cs + 16 * c0;
            for (int64_t k0 = 0; k0 < n; k0 += kc) {
                const int64_t kn = mn(kc, n - k0);
                const int ld = load || k0 > 0;
                if (mr == MR && nv == 4) mk(MR, 4, kn, a0 + k0 * ak, as, ak, B + k0 * bk + 16 * c0, bk, c, cs, ld);
                else mk_any(mr, nv, kn, a0 + k0 * ak, as, ak, B + k0 * bk + 16 * c0, bk, c, cs, ld);
            }
        }
    }
}

/* degree 7 (< 1e-7 relative on [-1/2, 1/2]), highest first */
static const float EXP2_C[8] = {1.525273380405984e-05f, 1.5403530393381606e-04f, 1.3333558146428443e-03f,
                                9.618129107628477e-03f, 5.550410866482158e-02f, 2.402265069591007e-01f,
                                6.931471805599453e-01f, 1.0f};

/* 2^x on 16 lanes: x = n + f, n = round(x), 2^f by Horner, times 2^n (scalef). x < -125 (and -inf) gives
   exactly 0; NaN stays NaN (the compare is false for NaN, and scalef keeps it). */
static inline __m512 vexp2(__m512 x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.0f), _CMP_LT_OQ);
    x = _mm512_mask_mov_ps(x, tiny, _mm512_set1_ps(-125.0f));
    /* x = +inf would give f = inf - inf = NaN: clamp to 128 (2^128 = inf). minps returns its second operand
       when either is NaN, so NaN goes second (the first order turned NaN into +inf: test_regression_nan_stays_nan) */
    x = _mm512_min_ps(_mm512_set1_ps(128.0f), x);
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(EXP2_C[0]);
    for (int i = 1; i < 8; i++) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_C[i]));
    return _mm512_maskz_mov_ps((__mmask16)~tiny, _mm512_scalef_ps(p, n));
}
#endif

typedef struct {
    const float *q, *k, *v, *o, *dout, *lse;   /* q, o, dout (T_q, H, D); k, v (T_k, Hk, D); contiguous */
    float *dq, *dk, *dv;                       /* like q, k, v */
    float *dqp;                                /* dQ partials of split items (piece >= 1), rows x DP each */
    int64_t H, Hk, G, D, DP, left, right, lse_hs, W, bm;
    float q_scale, scale;
} bargs_t;

typedef struct { int64_t cost, seq, hk, piece, j0, j1, part; } bitem_t;

static int by_cost(const void *x, const void *y) {
    const bitem_t *a = x, *b = y;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
    if (a->hk != b->hk) return a->hk < b->hk ? -1 : 1;
    return a->piece < b->piece ? -1 : (a->piece > b->piece);
}

static int64_t rows_floats(int64_t maxrows, int64_t D, int64_t DP);

/* bytes of per-thread scratch (split: the rows are packed in a shared buffer, ft_bwd_rows_bytes) */
int64_t ft_bwd_scratch(int64_t D, int64_t maxrows, int64_t maxk, int64_t W, int64_t R, int64_t split) {
    const int64_t DP = rup(D, 16), RS = rup(R, 16) + 16;
    const int64_t f = (split ? 0 : rows_floats(maxrows, D, DP) + rup(maxrows, 16) * DP) + 2 * rup(maxk, 16) * DP
                      + 2 * W * RS + 2 * W * DP;
    return 4 * f + 4096;
}

/* bytes of the shared packed rows of n (sequence, KV head) pairs (split items) */
int64_t ft_bwd_rows_bytes(int64_t D, int64_t maxrows, int64_t n) {
    return 4 * n * rows_floats(maxrows, D, rup(D, 16)) + 64;
}

#if HAVE_VEC
static inline float *carve(float **p, int64_t n) {
    float *r = *p;
    *p += rup(n, 16);
    return r;
}

/* The packed rows of one (sequence, KV head): Qs, dO (rows x DP), Qs^T, dO^T (D x LT), lse2, delta (LT) */
typedef struct { float *Qs, *dO, *QT, *dOT, *lse2, *delta; } rows_t;

static int64_t rows_floats(int64_t maxrows, int64_t D, int64_t DP) {
    const int64_t LT = rup(maxrows, 16) + 64;
    return 2 * rup(maxrows, 16) * DP + 2 * D * LT + 2 * LT;
}

static rows_t carve_rows(float **p, int64_t maxrows, int64_t D, int64_t DP) {
    const int64_t LT = rup(maxrows, 16) + 64;
    rows_t x;
    x.Qs = carve(p, rup(maxrows, 16) * DP);
    x.dO = carve(p, rup(maxrows, 16) * DP);
    x.QT = carve(p, D * LT);
    x.dOT = carve(p, D * LT);
    x.lse2 = carve(p, LT);
    x.delta = carve(p, LT);
    return x;
}

/* seq: (q0, nq, k0, nk, l0) per sequence: rows q0 .. q0 + nq of q / o / dout / dq, k0 .. of k / v / dk / dv,
   lse[l0 + h lse_hs + i]. Packs rows [r0, r1) of KV head hk (r0 a multiple of 16); the call that ends at
   the last row also zeroes the padding past it (the vector loads of S^T / dP^T run past the rows). */
static void pack_rows(const bargs_t *a, const int64_t *sq, int64_t hk, const rows_t *x, int64_t LT, int64_t r0,
                      int64_t r1) {
    const int64_t q0 = sq[0], l0 = sq[4], rows = sq[1] * a->G;
    const int64_t H = a->H, G = a->G, D = a->D, DP = a->DP, h0 = hk * G;
    float *Qs = x->Qs, *dO = x->dO, *QT = x->QT, *dOT = x->dOT, *lse2 = x->lse2, *delta = x->delta;
    /* Qs, dO (row-major, zero padded to DP), lse2 */
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i = r / G, g = r % G, src = ((q0 + i) * H + h0 + g) * D;
        float *qs = Qs + r * DP, *dd = dO + r * DP;
        for (int64_t d = 0; d < D; d++) {
            qs[d] = a->q[src + d];      /* unscaled: S^T sums as the forward's qk_f32, then times q_scale */
            dd[d] = a->dout[src + d];
        }
        for (int64_t d = D; d < DP; d++) qs[d] = dd[d] = 0.0f;
        lse2[r] = a->lse[l0 + (h0 + g) * a->lse_hs + i] * 1.4426950408889634f;
    }
    /* delta = rowsum(dO * O) as dP's FMA chain in d order, so that a row that sees one key (O = V) gets
       dP - delta = 0 exactly (test_regression_single_key_rows); four rows' chains interleaved (one chain
       is FMA-latency bound) */
    for (int64_t rr = r0; rr < r1; rr += 4) {
        const float *y[4], *ov[4];
        float dl[4], pc[4];
        for (int t = 0; t < 4; t++) {
            const int64_t r = mn(rr + t, r1 - 1), src = ((q0 + r / G) * H + h0 + r % G) * D;
            y[t] = a->dout + src;
            ov[t] = a->o + src;
        }
        /* one-query sequences: dP^T's pieces of QK_KC_ONE, added in order; others one chain (one piece of D) */
        const int64_t piece = sq[1] == 1 ? QK_KC_ONE : D;
        for (int64_t d0 = 0; d0 < D; d0 += piece) {
            for (int t = 0; t < 4; t++) pc[t] = 0.0f;
            for (int64_t d = d0; d < mn(D, d0 + piece); d++)
                for (int t = 0; t < 4; t++) pc[t] = fmaf(y[t][d], ov[t][d], pc[t]);
            for (int t = 0; t < 4; t++) dl[t] = d0 ? dl[t] + pc[t] : pc[t];
        }
        for (int t = 0; t < 4 && rr + t < r1; t++) delta[rr + t] = dl[t];
    }
    /* the transposes Qs^T, dO^T, 16 rows at a time */
    for (int64_t rr = r0; rr < r1; rr += 16) {
        const int64_t nr = mn(16, r1 - rr);
        for (int64_t d = 0; d < D; d++)
            for (int64_t t = 0; t < nr; t++) {
                QT[d * LT + rr + t] = Qs[(rr + t) * DP + d];
                dOT[d * LT + rr + t] = dO[(rr + t) * DP + d];
            }
    }
    if (r1 == rows) {
        for (int64_t d = 0; d < D; d++) {
            memset(QT + d * LT + rows, 0, (size_t)(LT - rows) * 4);
            memset(dOT + d * LT + rows, 0, (size_t)(LT - rows) * 4);
        }
        memset(lse2 + rows, 0, (size_t)(LT - rows) * 4);
        memset(delta + rows, 0, (size_t)(LT - rows) * 4);
    }
}

/* One work item. shared: the packed rows of this (sequence, KV head), made before the parallel loop (split
   items), or NULL: packed here into the thread's scratch. */
static void item(const bargs_t *a, const int64_t *sq, const bitem_t *it, float *scr, int64_t maxrows,
                 int64_t maxk, const rows_t *shared) {
    const int64_t q0 = sq[0], nq = sq[1], k0 = sq[2], nk = sq[3];
    const int64_t H = a->H, Hk = a->Hk, G = a->G, D = a->D, DP = a->DP, hk = it->hk, h0 = hk * G;
    const int64_t rows = nq * G, off = nk - nq, W = a->W, bm = a->bm;
    const int64_t LT = rup(maxrows, 16) + 64, RS = rup(bm * G, 16) + 16, NVD = DP / 16;
    const int64_t pj0 = it->j0, pj1 = it->j1;
    float *p = scr;
    rows_t mine;
    if (!shared) mine = carve_rows(&p, maxrows, D, DP);
    const rows_t *x = shared ? shared : &mine;
    const float *Qs = x->Qs, *dO = x->dO, *QT = x->QT, *dOT = x->dOT, *lse2 = x->lse2, *delta = x->delta;
    float *Kp = carve(&p, rup(maxk, 16) * DP), *Vp = carve(&p, rup(maxk, 16) * DP);
    float *S = carve(&p, W * RS), *Y = carve(&p, W * RS), *dKa = carve(&p, W * DP), *dVa = carve(&p, W * DP);
    /* dQ of this item: in the scratch for a whole item, its partial for a piece */
    float *dqo = it->part >= 0 ? a->dqp + it->part * rup(maxrows, 16) * DP : carve(&p, rup(maxrows, 16) * DP);
    PROF_T(tp0);
    memset(dqo, 0, (size_t)(rows * DP) * 4);
    if (!shared) pack_rows(a, sq, hk, &mine, LT, 0, rows);
    for (int64_t j = pj0; j < pj1; j++) {
        const int64_t src = ((k0 + j) * Hk + hk) * D;
        float *kk = Kp + (j - pj0) * DP, *vv = Vp + (j - pj0) * DP;
        memcpy(kk, a->k + src, (size_t)D * 4);
        memcpy(vv, a->v + src, (size_t)D * 4);
        for (int64_t d = D; d < DP; d++) kk[d] = vv[d] = 0.0f;
    }
    PROF_ADD(0, tp0);
    const int64_t qkc = nq == 1 ? QK_KC_ONE : KC;  /* S^T / dP^T pieces over d (QK_KC_ONE) */
    const float dk_scale = a->scale;                /* Qs is q unscaled (pack_rows) */
    const __m512 qsc = _mm512_set1_ps(a->q_scale);  /* S^T = K Q^T times softmax_scale log2 e: the forward's S */
    for (int64_t j0 = pj0; j0 < pj1; j0 += W) {
        const int64_t j1 = mn(pj1, j0 + W), w = j1 - j0;
        const float *Kj = Kp + (j0 - pj0) * DP, *Vj = Vp + (j0 - pj0) * DP;
        int any = 0;
        /* the queries that see a key of [j0, j1): j - off - right <= i <= j - off + left */
        const int64_t i_lo = a->right < 0 ? 0 : mx(0, j0 - off - a->right);
        const int64_t i_hi = a->left < 0 ? nq : mn(nq, j1 - 1 - off + a->left + 1);
        for (int64_t i0 = i_lo; i0 < i_hi; i0 += bm) {
            const int64_t i1 = mn(i_hi, i0 + bm), rb = i0 * G, R = (i1 - i0) * G, NR = (R + 15) / 16;
            /* S^T = K_j Qs^T, dP^T = V_j dO^T: (w, R), 64 rows (4 vectors) at a time */
            PROF_T(ta);
            gemm(w, NR, D, Kj, DP, 1, QT + rb, LT, S, RS, 0, qkc);
            gemm(w, NR, D, Vj, DP, 1, dOT + rb, LT, Y, RS, 0, qkc);
            PROF_ADD(1, ta);
            PROF_T(tb);
            /* P^T = exp2(S^T - lse2), dS^T = P^T (dP^T - delta), both 0 on hidden lanes (and past R) */
            for (int64_t t = 0; t < w; t++) {
                const int64_t j = j0 + t;
                const int64_t ia = a->right < 0 ? 0 : j - off - a->right;
                const int64_t ib = a->left < 0 ? nq : j - off + a->left + 1;
                const int64_t ra = mx(0, mx(ia, i0) * G - rb), rz = mn(R, mn(ib, i1) * G - rb);
                float *s = S + t * RS, *y = Y + t * RS;
                for (int64_t c = 0; c < NR * 16; c += 16) {
                    int64_t lo = ra - c, hi = rz - c;
                    lo = lo < 0 ? 0 : lo;
                    hi = hi > 16 ? 16 : hi;
                    const __mmask16 vis = lo >= hi ? 0 : (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
                    if (!vis) {
                        _mm512_storeu_ps(s + c, _mm512_setzero_ps());
                        _mm512_storeu_ps(y + c, _mm512_setzero_ps());
                        continue;
                    }
                    /* the forward's S: the product rounded on its own (the empty asm keeps -ffp-contract from
                       fusing it into the subtraction, as GCC 12 did: one vfmsub, not the forward's bits) */
                    __m512 sq = _mm512_mul_ps(_mm512_loadu_ps(s + c), qsc);
                    __asm__("" : "+v"(sq));
                    const __m512 x = _mm512_sub_ps(sq, _mm512_loadu_ps(lse2 + rb + c));
                    const __m512 pv = _mm512_maskz_mov_ps(vis, vexp2(x));
                    const __m512 dy = _mm512_sub_ps(_mm512_loadu_ps(y + c), _mm512_loadu_ps(delta + rb + c));
                    _mm512_storeu_ps(s + c, pv);
                    _mm512_storeu_ps(y + c, _mm512_maskz_mul_ps(vis, pv, dy));
                }
            }
            PROF_ADD(2, tb);
            PROF_T(tc);
            /* dV_j (+)= P^T dO, dK_j (+)= dS^T Qs: (w, DP) over the R rows; the first block overwrites */
            gemm(w, NVD, R, S, RS, 1, dO + rb * DP, DP, dVa, DP, any, KC);
            gemm(w, NVD, R, Y, RS, 1, Qs + rb * DP, DP, dKa, DP, any, KC);
            PROF_ADD(3, tc);
            PROF_T(td);
            /* dQ (R, DP) += dS K_j over the w keys: A = dS^T read down its columns */
            gemm(R, NVD, w, Y, 1, RS, Kj, DP, dqo + rb * DP, DP, 1, KC);
            PROF_ADD(4, td);
            any = 1;
        }
        for (int64_t j = j0; j < j1; j++) {
            float *dk = a->dk + ((k0 + j) * Hk + hk) * D, *dv = a->dv + ((k0 + j) * Hk + hk) * D;
            if (!any) {
                memset(dk, 0, (size_t)D * 4);
                memset(dv, 0, (size_t)D * 4);
                continue;
            }
            for (int64_t d = 0; d < D; d++) {
                dk[d] = dKa[(j - j0) * DP + d] * dk_scale;
                dv[d] = dVa[(j - j0) * DP + d];
            }
        }
    }
    if (it->part < 0) {     /* the only piece: dq straight from dQ */
        for (int64_t r = 0; r < rows; r++) {
            float *dst = a->dq + ((q0 + r / G) * H + h0 + r % G) * D;
            for (int64_t d = 0; d < D; d++) dst[d] = dqo[r * DP + d] * a->scale;
        }
    }
}
#endif

/* The backward of every sequence and head. seqs: nseq x (q0, nq, k0, nk, l0). pieces: key pieces per
   (sequence, KV head) (>= 1; from the problem, not the thread count). dqp: (nseq * Hk * pieces) x
   rup(maxrows, 16) x DP floats when pieces > 1, else unused; rowbuf: ft_bwd_rows_bytes(D, maxrows, nseq * Hk)
   bytes when pieces > 1 (the packed rows, shared by the pieces of a (sequence, KV head) and packed before
   them in 256-row chunks over the threads), else unused. W keys per block, bm query positions per block.
   Returns 0; 1 for a problem it does not take; 4 out of memory. */
int ft_bwd_f32(const float *q, const float *k, const float *v, const float *o, const float *dout, const float *lse,
               int64_t lse_hs, const int64_t *seqs, int64_t nseq, int64_t H, int64_t Hk, int64_t D, int64_t left,
               int64_t right, float scale, float q_scale, int64_t W, int64_t bm, int64_t pieces, float *dq, float *dk,
               float *dv, float *dqp, char *rowbuf, char *scratch, int64_t per_thread, int nthreads) {
#if HAVE_VEC
    if (D <= 0 || D > MAXD || W <= 0 || bm <= 0 || pieces <= 0 || Hk <= 0 || H % Hk) return 1;
    const int64_t G = H / Hk, DP = rup(D, 16);
    int64_t maxrows = 0, maxk = 0;
    for (int64_t s = 0; s < nseq; s++) { maxrows = mx(maxrows, seqs[5 * s + 1] * G); maxk = mx(maxk, seqs[5 * s + 3]); }
    const int split = pieces > 1;
    if (per_thread < ft_bwd_scratch(D, maxrows, maxk, W, bm * G, split) || (split && (!dqp || !rowbuf))) return 1;
    bargs_t a = {q, k, v, o, dout, lse, dq, dk, dv, dqp, H, Hk, G, D, DP, left, right, lse_hs, W, bm, q_scale, scale};
    const int64_t n_items = nseq * Hk * pieces;
    bitem_t *items = malloc(sizeof(bitem_t) * (size_t)(n_items > 0 ? n_items : 1));
    if (!items) return 4;
    int64_t x = 0;
    for (int64_t s = 0; s < nseq; s++) {
        const int64_t nq = seqs[5 * s + 1], nk = seqs[5 * s + 3], off = nk - nq;
        /* pieces of whole W-key blocks, as even as blocks allow (22 blocks in 8 pieces: 2 or 3 each, not 3 x 7 + 1) */
        const int64_t nblk = (nk + W - 1) / W;
        for (int64_t hk = 0; hk < Hk; hk++)
            for (int64_t pc = 0; pc < pieces; pc++) {
                const int64_t j0 = mn(nk, pc * nblk / pieces * W), j1 = mn(nk, (pc + 1) * nblk / pieces * W);
                int64_t cost = (split ? 0 : G * nq * 4) + (j1 - j0) * 4;      /* packing */
                for (int64_t i = 0; i < nq; i++) {
                    const int64_t lo = mx(j0, left < 0 ? 0 : i + off - left);
                    const int64_t hi = mn(j1, right < 0 ? nk : i + off + right + 1);
                    cost += hi > lo ? (hi - lo) * G : 0;
                }
                items[x++] = (bitem_t){cost, s, hk, pc, j0, j1, pieces > 1 ? (s * Hk + hk) * pieces + pc : -1};
            }
    }
    qsort(items, (size_t)n_items, sizeof(bitem_t), by_cost);
    const int64_t CH = 256, nch = (maxrows + CH - 1) / CH + 1, LT = rup(maxrows, 16) + 64;
    rows_t *packed = 0;
    if (split) {
        packed = malloc(sizeof(rows_t) * (size_t)(nseq * Hk > 0 ? nseq * Hk : 1));
        if (!packed) { free(items); return 4; }
        float *rp = (float *)(((uintptr_t)rowbuf + 63) & ~(uintptr_t)63);
        for (int64_t y = 0; y < nseq * Hk; y++) packed[y] = carve_rows(&rp, maxrows, D, DP);
        #pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
        for (int64_t t = 0; t < nseq * Hk * nch; t++) {
            const int64_t y = t / nch, c = t % nch, *sq = seqs + 5 * (y / Hk), rows = sq[1] * G;
            if (c * CH < rows || (c == 0 && rows == 0))
                pack_rows(&a, sq, y % Hk, &packed[y], LT, c * CH, mn(rows, (c + 1) * CH));
        }
    }
    #pragma omp parallel num_threads(nthreads)
    {
        char *base = scratch + (int64_t)omp_get_thread_num() * per_thread;
        float *mine = (float *)(((uintptr_t)base + 63) & ~(uintptr_t)63);     /* 64-byte aligned */
        #pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < n_items; t++)
            item(&a, seqs + 5 * items[t].seq, &items[t], mine, maxrows, maxk,
                 split ? &packed[items[t].seq * Hk + items[t].hk] : 0);
    }
    free(items);
    free(packed);
    if (pieces > 1) {
        /* dq = scale * (sum of the partials in piece order), per (sequence, KV head) and 256-row chunk */
        const int64_t ps = rup(maxrows, 16) * DP;
        #pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
        for (int64_t t = 0; t < nseq * Hk * nch; t++) {
            const int64_t y = t / nch, c = t % nch, s = y / Hk, hk = y % Hk;
            const int64_t q0 = seqs[5 * s], nq = seqs[5 * s + 1];
            const float *part = dqp + (s * Hk + hk) * pieces * ps;
            for (int64_t r = c * CH; r < mn(nq * G, (c + 1) * CH); r++) {
                float *dst = dq + ((q0 + r / G) * H + hk * G + r % G) * D;
                for (int64_t d = 0; d < D; d++) {
                    float acc = part[r * DP + d];
                    for (int64_t pc = 1; pc < pieces; pc++) acc += part[pc * ps + r * DP + d];
                    dst[d] = acc * scale;
                }
            }
        }
    }
    return 0;
#else
    return 1;
#endif
}
"""

# Tiles: config.BWD_C_KEYS keys per block (the rows of the transposed score tiles), config.BWD_C_ROWS query
# rows per block (max(1, BWD_C_ROWS // G) query positions).
MAX_HEAD_DIM = 256

_warned = False
_local = threading.local()


def _open(path: str):
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise NativeUnavailable(f"loading the compiled backward kernel failed: {e}") from e
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ft_bwd_f32.argtypes = [ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, i64, i64, i64, i64, i64, i64,
                               ctypes.c_float, ctypes.c_float, i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, i64,
                               ctypes.c_int]
    lib.ft_bwd_f32.restype = ctypes.c_int
    lib.ft_bwd_scratch.argtypes = [i64, i64, i64, i64, i64, i64]
    lib.ft_bwd_scratch.restype = i64
    lib.ft_bwd_rows_bytes.argtypes = [i64, i64, i64]
    lib.ft_bwd_rows_bytes.restype = i64
    lib.ft_bwd_caps.argtypes = []
    lib.ft_bwd_caps.restype = ctypes.c_int
    if not lib.ft_bwd_caps():
        raise NativeUnavailable("the compiled backward needs AVX-512F (the compiler defined no __AVX512F__ "
                                "for -march=native on this CPU)")
    return lib


_library = native.LazyLibrary(lambda: _open(native._build(source=C_SOURCE, stem="backward")))


def load():
    """The loaded library (compiled on first use, then cached on disk); raises NativeUnavailable
    naming the cause (no C compiler, a compile error, a CPU without AVX-512)."""
    return _library.get()


def load_variant(*defines: str):
    """A separately built copy with extra defines (tests / sweeps)."""
    return _open(native._build(tuple(defines), source=C_SOURCE, stem="backward"))


def backward_path() -> str:
    return config.checked("BWD_PATH", "FLASHTRITON_CPU_BACKWARD", config.BWD_PATHS)


def library_for(q, params, alibi, dropout: bool, lowp: bool):
    """The library when this backward call runs compiled, else None (backward.py's torch-ops path).
    Taken: float32 / fp16 inputs, and bf16 where it runs in float32 (lowp False), head dim <= 256,
    no softcap, ALiBi or dropout. config.BWD_PATH "compiled" raises NativeUnavailable when the
    library cannot be built; "auto" warns once and returns None; "ops" returns None."""
    global _warned
    path = backward_path()
    if path == "ops":
        return None
    if lowp or q.dtype not in (torch.float32, torch.float16, torch.bfloat16) or q.shape[-1] > MAX_HEAD_DIM \
            or params.softcap > 0 or alibi is not None or dropout:
        return None
    try:
        return load()
    except NativeUnavailable as e:
        if path == "compiled":
            raise
        if not _warned:
            _warned = True
            warnings.warn(f"flashtriton cpu: the compiled backward kernel is unavailable, using torch ops ({e})",
                          RuntimeWarning, stacklevel=3)
        return None


def _scratch(nbytes: int) -> torch.Tensor:
    """A reusable per-calling-thread byte buffer (fresh multi-MiB allocations page-fault)."""
    buf = getattr(_local, "buf", None)
    if buf is None or buf.numel() < nbytes:
        buf = _local.buf = torch.empty(nbytes, dtype=torch.uint8)
    return buf


def _f32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float32).contiguous()


def pieces_for(n_items: int, max_k: int, keys: int) -> int:
    """Key pieces per (sequence, KV head): 1 when there are config.BWD_C_MIN_ITEMS items or more, else enough
    to make that many, each of at least config.BWD_C_MIN_PIECE keys. From the problem only (never the thread
    count): the result stays bitwise the same for any thread count."""
    if n_items >= config.BWD_C_MIN_ITEMS or n_items == 0:
        return 1
    want = -(-config.BWD_C_MIN_ITEMS // n_items)
    blocks = -(-max_k // keys)
    most = max(1, max_k // max(config.BWD_C_MIN_PIECE, keys))
    return max(1, min(want, most, blocks))


def backward(lib, dout, q, k, v, out, lse, params, varlen=None):
    """(dq, dk, dv) like q, k, v: the compiled backward of every sequence and head (the module docstring).
    Dense (B, N, H, D) or varlen (total, H, D) with lse (B, H, N) / (H, total)."""
    from .tiles import LOG2E
    nheads, nheads_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    group = nheads // nheads_k
    q32, k32, v32, o32, do32 = (_f32(t) for t in (q, k, v, out, dout))
    lse32 = lse.to(torch.float32).contiguous()
    if varlen is None:
        b, n_q, n_k = q.shape[0], q.shape[1], k.shape[1]
        seqs = [(s * n_q, n_q, s * n_k, n_k, s * nheads * n_q) for s in range(b)]
        lse_hs = n_q
    else:
        cq, ck = varlen.cu_seqlens_q.tolist(), varlen.cu_seqlens_k.tolist()
        seqs = [(cq[s], cq[s + 1] - cq[s], ck[s], ck[s + 1] - ck[s], cq[s]) for s in range(len(cq) - 1)]
        lse_hs = q.shape[0]
    f32 = torch.float32
    # the results (memory.empty: the tests poison fresh outputs), or float32 buffers rounded into them
    res = [memory.empty(t.shape, t.dtype, t.device) for t in (q, k, v)]
    dq, dk, dv = (r if r.dtype == f32 else torch.empty(r.shape, dtype=f32) for r in res)
    if seqs:
        keys = config.BWD_C_KEYS
        bm = max(1, config.BWD_C_ROWS // group)
        max_rows = max(s[1] for s in seqs) * group
        max_k = max(s[3] for s in seqs)
        pieces = pieces_for(len(seqs) * nheads_k, max_k, keys)
        dqp = rowbuf = None
        if pieces > 1:      # dQ partials and the packed rows shared by the pieces
            dp = -(-d // 16) * 16
            dqp = torch.empty(len(seqs) * nheads_k * pieces * (-(-max_rows // 16) * 16) * dp, dtype=f32)
            rowbuf = torch.empty(lib.ft_bwd_rows_bytes(d, max_rows, len(seqs) * nheads_k), dtype=torch.uint8)
        threads = torch.get_num_threads()
        per = (lib.ft_bwd_scratch(d, max_rows, max_k, keys, bm * group, int(pieces > 1)) + 4095) // 4096 * 4096
        buf = _scratch(per * threads)
        table = torch.tensor(seqs, dtype=torch.int64).reshape(-1)
        rc = lib.ft_bwd_f32(q32.data_ptr(), k32.data_ptr(), v32.data_ptr(), o32.data_ptr(), do32.data_ptr(),
                            lse32.data_ptr(), lse_hs, table.data_ptr(), len(seqs), nheads, nheads_k, d,
                            params.window_left, params.window_right, params.softmax_scale,
                            params.softmax_scale * LOG2E, keys, bm, pieces, dq.data_ptr(), dk.data_ptr(),
                            dv.data_ptr(), None if dqp is None else dqp.data_ptr(),
                            None if rowbuf is None else rowbuf.data_ptr(), buf.data_ptr(), per, threads)
        if rc != 0:
            raise RuntimeError(f"compiled backward kernel failed (code {rc}: 1 a problem it does not take, D={d}; "
                               f"4 out of memory)")
    for r, g in zip(res, (dq, dk, dv)):
        if r is not g:
            r.copy_(g)
    return tuple(res)
