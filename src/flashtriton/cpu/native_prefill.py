"""The compiled forward: the whole prefill forward (every head, causal, windows,
GQA, varlen; bf16 softcap and ALiBi since session 62) in one C kernel per sequence, for
bf16 / float32 / fp16 (since session 64: the float32 kernel on values widened where they
are read) inputs without dropout (bench/NOTES.md, "Session 5: causal (helper)").

Why: forward.py's torch-ops loop pays ~73 us of fixed cost per tile step and ~250 us
per 512-row block, computes the whole 512 x 512 square on the causal diagonal and
masks half of it; its causal forward was 1.6x faster than its non-causal one, against
~2x of work. This kernel has no per-step cost beyond its loops, skips every 8-row x
32-key block that no row sees, and takes the bf16 score product at bf16 rate
(vdpbf16ps) where the loop needed float32 products; measured at B=1 H=8 N=4096 D=128
on the 2-core VM: non-causal bf16 95-100 ms (loop 170-205), fp32 173-177 ms (loop
205-237), causal 1.90-1.96x faster than non-causal (loop 1.60-1.68x).

Kernel (C, AVX-512, built with the system compiler and cached exactly like the
decode kernel, native._build). Work items are (KV head, block of config.FWD_ROWS / G
query positions), largest first, dynamically scheduled over OpenMP threads; rows are
(query position, head of the group), so K and V are read once per group. Per item,
keys in chunks of 512: K packed as 32-key blocks transposed (16 x 16 vector
transposes; bf16: pairs of d per 32-bit word), V row-wise (bf16: key pairs
interleaved), in per-thread scratch; then per tile of 64 rows x 64 keys:

    S = (q . k) * scale                 8 x 32 register blocks; blocks no row sees skipped
    m' = max(m, rowmax S), alpha = 2^(m - m'), p = 2^(S - m') on the visible lanes only
    l = alpha l + sum p, O = alpha O + P V   (4 rows x 64 columns in registers)

and at the end out = O / l (rounded to bf16 for bf16 inputs), lse = (m + log2 l) ln 2;
a row that sees no key gets out 0, lse +inf; a NaN a row sees makes that row NaN,
a hidden one is never read. exp2 is vectorised (2^n * degree-7 polynomial, < 1e-7
relative). Precision: float32 inputs stay float32 (FMA products and sums); bf16
scores are vdpbf16ps dot products (exact bf16 products, float32 sums, denormal
inputs flushed), P is rounded to bf16 as in forward.py's bf16 P @ V, and P V is a
vdpbf16ps product accumulated in float32 (forward.py also rounds each tile's product
to bf16). Each row's result depends only on its own data and the fixed key order,
not on the thread that computes it: bitwise repeatable, for any thread count. Extra
memory: per-thread scratch for one item (ft_prefill_scratch: ~1.2 MiB at D = 128,
512-row items), independent of the sequence length; nothing N x N.

AMX (bf16, bench/wip/cpu-amx-fwd.md): on CPUs with AMX-TILE / AMX-BF16 a second build of
this source (FT_AMX, -mamx-tile -mamx-bf16) runs both products on tiles (tile_amx):
TDPBF16PS, 32 rows x 32 keys per 2 x 2 block of C tiles. The K and V packings above are
already the tiles' B layout (K blocks only padded to whole 32-column groups of d). Per
64-row tile and step of AKB = 256 keys: S = Q K^T into memory (blocks no row of a 32-row
group sees skipped), the online softmax on AVX-512 as above (max, exp2, sum, P
rounded to bf16; O rescaled in memory when a row's max grows), then O += P V with O
loaded into C tiles once per 32 columns and step. Items hold config.FWD_ROWS_AMX rows
(1024: packing is per item). The process asks Linux for the tile-data permission once
(ft_amx_init, arch_prctl ARCH_REQ_XCOMP_PERM); each OpenMP thread loads the tile
configuration at the start of the parallel region and releases it at the end. Same
precision (exact bf16 products, float32 sums; the sum order inside a tile differs from
vdpbf16ps') and the same guarantees: rows without keys out 0 / lse +inf, bitwise
repeatable for any thread count (a row's result depends only on its data and the fixed
tiling), per-thread scratch only (~1.8 MiB at D = 128, 1024-row items). Its exp2 is
vexp2_bf16 (a degree-4 polynomial, < 2.9e-6 relative: P is rounded to bf16 at once; session 35,
-3.5-6.7% against the degree-7 step, FT_SOFTMAX_OLD; bench/NOTES.md "Session 35"). B=1 H=8
N=4096 D=128 bf16, 2-core VM with AMX: non-causal 328 -> 42-47 ms (SDPA 54-64 ms), causal
167 -> 23-26 ms. Measured split (ablation builds): the two products ~23 ms (~2.9 TFLOP/s
together), softmax ~19 ms, packing ~5 ms, with no overlap between AMX and AVX-512 work;
interleaving the tile work a piece at a time between softmax rows did not change that.

Selection (config.FWD_PATH, FLASHTRITON_CPU_FORWARD): "auto" (default) runs this
kernel when it can be built and takes the problem, otherwise the torch-ops loop (one
RuntimeWarning naming the cause when the build failed, e.g. no C compiler);
"compiled" raises NativeUnavailable instead; "ops" never uses it. Dropout, float32 / fp16
with softcap or ALiBi (library_for says why), and bf16 on CPUs without AVX512-BF16 take
the torch-ops loop (by feature, not by failure); bf16 softcap (tanh in float32 since
session 63, softcap_f32) and ALiBi (native.C_SCORE_FEATURES) run in the AVX-512 kernel's
softmax step, never the AMX one. bf16 takes the AMX build under config.FWD_AMX
(FLASHTRITON_CPU_FORWARD_AMX): "auto" (default) when the CPU lists amx_tile and
amx_bf16, the build succeeds and the permission is granted, else the AVX-512 kernel
(a RuntimeWarning naming the cause when an AMX CPU fails the build or the permission);
"on" raises NativeUnavailable instead; "off" never. forward.LAST_PATH (the bench's path
column) says "compiled-amx" or "compiled".
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
import warnings

import torch

from . import config, native
from .native import NativeUnavailable
from .tiles import LOG2E

C_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#define HAVE_F32 1
#else
#define HAVE_F32 0
#endif
#if defined(__AVX512F__) && defined(__AVX512BF16__) && !defined(FT_NO_BF16)
#define HAVE_BF16 1
#else
#define HAVE_BF16 0
#endif
/* fp16 inputs (session 64): widened to float32 where they are read (q, the K / V packing), the float32 kernel
   between (fp16 x fp16 products are exact in float32: an fp16 matmul with float32 sums), out rounded to fp16 */
#if HAVE_F32 && defined(__FLT16_MAX__) && !defined(FT_NO_F16)
#define HAVE_F16 1
#else
#define HAVE_F16 0
#endif
/* The AMX kernel (tile_amx) is only in the separate build with FT_AMX and -mamx-tile -mamx-bf16
   (native_prefill._amx_library); the plain build never executes a tile instruction. */
#if HAVE_BF16 && defined(FT_AMX) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define HAVE_AMX 1
#include <errno.h>
#include <cpuid.h>
#include <unistd.h>
#include <sys/syscall.h>
#else
#define HAVE_AMX 0
#endif

#define RT 64       /* rows per row tile: its q, P and accumulators stay in L1 / L2 */
#define KT 64       /* keys per key tile (four score vectors per row) */
#define QR 8        /* rows of the score micro-kernel (x 32 keys: 16 accumulators) */
#define PR 4        /* rows of the P @ V micro-kernel (x up to 4 vectors of D) */
#define MAXD 256
#define ART 64      /* AMX path: rows per row tile (two groups of 32 rows = 2 x 2 C tiles of 16 x 16) */
#ifndef AKB
#define AKB 256     /* AMX path: keys per online-softmax step (S: ART x AKB float32 = 64 KiB) */
#endif
#define SB (RT * KT > ART * AKB ? RT * KT : ART * AKB)    /* floats of the S and P buffers */
_Static_assert(RT == ART && AKB % 32 == 0, "item() walks the same row tiles for both kernels");

""" + native.C_SCORE_FEATURES + r"""
/* bits: 1 float32 kernel (AVX-512F), 2 bf16 kernel (AVX512-BF16), 4 bf16 AMX kernel compiled in, 8 fp16 inputs */
int ft_prefill_caps(void) { return HAVE_F32 | (HAVE_BF16 << 1) | (HAVE_AMX << 2) | (HAVE_F16 << 3); }

static inline int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
#if HAVE_F16
/* n fp16 values widened to float32 (exact) */
static inline void widen_f16(float *dst, const char *src, int64_t n) {
    int64_t d = 0;
    for (; d + 16 <= n; d += 16)
        _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + 2 * d))));
    for (; d < n; d++) { _Float16 h; memcpy(&h, src + 2 * d, 2); dst[d] = (float)h; }
}
#endif
static inline uint16_t f32_to_bf16(float f) {       /* round to nearest even, NaN stays NaN */
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#if HAVE_F32
/* 2^x for clamped x (no lane below -127): n = round(x), f = x - n in [-0.5, 0.5], 2^f by Horner's
   rule on the DEG + 1 coefficients c (highest first, c[DEG] = 1), then p * 2^n by scalef (NaN
   propagates). Always inlined with a constant table: the loop unrolls into the FMA chain. */
static inline __attribute__((always_inline)) __m512 exp2_poly_n(__m512 x, const float *c, int deg) {
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(c[0]);
    for (int i = 1; i <= deg; i++) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c[i]));
    return _mm512_scalef_ps(p, n);
}

/* degree 7 (< 1e-7 relative) */
static const float EXP2_C7[8] = {1.525273380405984e-05f, 1.5403530393381606e-04f, 1.3333558146428443e-03f,
                                 9.618129107628477e-03f, 5.550410866482158e-02f, 2.402265069591007e-01f,
                                 6.931471805599453e-01f, 1.0f};

static inline __m512 exp2_core(__m512 x) {
    return exp2_poly_n(x, EXP2_C7, 7);
}

/* Softcap for the bf16 forward (session 63): tanh(x) * c with the tanh in float32, (1 - t) / (1 + t), t = e^-2|x|
   by exp2_core (< 1e-7 relative), so the capped score's absolute error is ~2e-7 c, against the bf16 rounding of
   PyTorch's bf16 scores (2^-9 |s|) that the criterion measures us against; |x| < 2^-10 gives x (x^3 / 3 < 1e-9
   absolute); |x| > 30 clamps t at 2^-86.6 (tanh = 1 in float32). NaN stays NaN (max keeps its second operand),
   +-inf gives +-c. native.C_SCORE_FEATURES' softcap_f (double precision) is the decode's, and this step under
   FT_SOFTCAP_F64 (A/B, bench/cpu/s63_softcap_tanh_ab.py; B = 1, H = 8, N = 4096, D = 128, 2 Zen 4 threads): that
   one 60-64% over the plain call, this one 12-15%. */
static inline __m512 softcap_f32(__m512 x, float c) {
    const __m512 ax = _mm512_abs_ps(x);
    const __m512 y = _mm512_max_ps(_mm512_set1_ps(-86.56170245333781f),
                                   _mm512_mul_ps(ax, _mm512_set1_ps(-2.8853900817779268f)));   /* -2 log2(e) |x| */
    const __m512 t = exp2_core(y);
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 th = _mm512_div_ps(_mm512_sub_ps(one, t), _mm512_add_ps(one, t));
    th = _mm512_mask_mov_ps(th, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0x1p-10f), _CMP_LT_OQ), ax);
    th = _mm512_or_ps(th, _mm512_and_ps(x, _mm512_castsi512_ps(_mm512_set1_epi32((int)0x80000000u))));
    return _mm512_mul_ps(th, _mm512_set1_ps(c));
}

/* 2^x, 16 lanes: 2^n * 2^f, n = round(x), |f| <= 1/2, degree-7 polynomial for 2^f
   (relative error < 1e-7 before rounding). x < -125 gives 0 (x = -inf included);
   NaN stays NaN. Only called with x <= 0 (scores minus their row max) or NaN. */
static inline __m512 vexp2(__m512 x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.0f), _CMP_LT_OQ);
    x = _mm512_mask_mov_ps(x, tiny, _mm512_set1_ps(-125.0f));
    const __m512 r = exp2_core(x);
    return _mm512_maskz_mov_ps((__mmask16)~tiny, r);
}

#if HAVE_AMX
/* vexp2 for the AMX softmax: the same polynomial and rounding, but x is clamped to >= -127
   by one max (NaN stays NaN: max returns its second operand then) instead of the compare,
   blend and zero-mask that make x < -125 exactly 0. The difference, 2^x < 2^-125 instead
   of 0, never reaches a result: P is rounded to bf16 by vcvtneps2bf16 and TDPBF16PS, which
   both flush denormals to 0, and l >= 1 (the row max contributes 2^0) absorbs a sum of
   at most AKB such terms in its rounding. 2 of ~17 vector ops per 16 scores. */
static inline __m512 vexp2_lean(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-127.0f), x);
    return exp2_core(x);
}

/* 2^x for the AMX softmax since session 35: vexp2_lean's clamp and 2^n scaling, a degree-4
   polynomial for 2^f on [-1/2, 1/2] (p(0) = 1 exactly; a relative-error fit, < 2.9e-6 relative
   evaluated in float32) instead of degree 7 (< 1e-7). The P it feeds is rounded to bf16 at once
   (2^-9 relative) and l, a float32 sum of such terms, moves by < 2.9e-6 relative: far below the
   bf16 rounding of the output. Three FMAs fewer of the ~20 vector ops per 16 scores. */
static const float EXP2_C4[5] = {9.5828521318e-03f, 5.5906429536e-02f, 2.4024098662e-01f, 6.9312419272e-01f, 1.0f};

static inline __m512 vexp2_bf16(__m512 x) {
    return exp2_poly_n(_mm512_max_ps(_mm512_set1_ps(-127.0f), x), EXP2_C4, 4);
}
#endif

typedef struct {
    const char *q, *k, *v;      /* q: (n_q, H, D) at head h0; k, v: (n_k, Hk, D) at head hk */
    int64_t qss, qsh, ks, vs;   /* byte strides: q position, q head; k / v position */
    int64_t n_q, n_k, off, left, right, G, D, bf16;
    int64_t f16;                /* fp16 q, k, v, out (the float32 kernel on widened values) */
    float scale;                /* softmax scale * log2(e): multiplies q . k (softmax scale / softcap with softcap) */
    int amx;                    /* bf16 on AMX tiles (tile_amx, with pack()'s padded layout) */
    const float *alibi;         /* ALiBi slopes of the sequence's H heads (natural units); 0: none */
    float softcap2;             /* softcap * log2(e); 0: none */
} args_t;

/* query i sees keys [lo, hi) (tiles.Band's rule, bottom-right aligned) */
static inline void vis(const args_t *a, int64_t i, int64_t *lo, int64_t *hi) {
    int64_t l = a->left < 0 ? 0 : i + a->off - a->left, h = a->right < 0 ? a->n_k : i + a->off + a->right + 1;
    *lo = l < 0 ? 0 : l;
    *hi = h > a->n_k ? a->n_k : h;
}

/* rows of K / V sit a whole head stride apart (a 4 KiB page at Hk = 8, D = 128
   float32), which the hardware prefetchers do not follow: the packing loop asks for
   the row PF keys ahead itself (it was 12% of the kernel's time waiting on loads) */
#define PF 8
static inline void prefetch_row(const char *base, int64_t j, int64_t end, int64_t stride, int64_t bytes) {
    if (j >= end) return;
    const char *p = base + j * stride;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
}

/* pack(): K of keys [s0, s1) as blocks of 32 keys transposed: float32 [blk][D][32],
   bf16 [blk][D/2][32][2] (pairs of d for vdpbf16ps); V as float32 [key][DP], bf16
   [key pair][DP][2]. Padding (keys past s1, columns past D) is zero: a zero p
   times garbage could be NaN.
   AMX (a->amx): these bf16 layouts are already TDPBF16PS's B operand ("VNNI": B row r
   holds, for each of 16 output columns, the bf16 pair of k = 2r, 2r + 1). For S = Q K^T,
   row r of a K block is d pair r of 32 keys: a 16-key half is a B tile of 16 rows x 64 B
   at row stride 128 B. For O += P V, row r of V is key pair r over DP columns: a B tile
   of 16 pairs x 16 columns at row stride 4 DP bytes. Only the padding differs: K blocks
   hold DP / 2 pairs (zero past D / 2: the K = 32 steps of a tile need whole 32-column
   groups of d, q is zero there too), and V is zero up to the next 32-key boundary (a P V
   step takes 16 pairs). */
/* dst[c * 32 + t] = row t's word w0 + c, for 16 rows (NULL: zero) and 16 32-bit
   words: a 16 x 16 transpose in four butterfly stages (stage s swaps the off-diagonal
   s x s blocks of each 2s x 2s block), instead of 256 scalar stores */
static inline void tr16(const uint32_t *const *rows, int64_t w0, uint32_t *dst) {
    __m512 x[16];
    for (int t = 0; t < 16; t++) x[t] = rows[t] ? _mm512_loadu_ps(rows[t] + w0) : _mm512_setzero_ps();
    for (int s = 8; s >= 1; s >>= 1) {
        int32_t ia[16], ib[16];
        for (int c = 0; c < 16; c++) { ia[c] = (c & s) ? 16 + c - s : c; ib[c] = (c & s) ? 16 + c : c + s; }
        const __m512i va = _mm512_loadu_si512(ia), vb = _mm512_loadu_si512(ib);
        for (int i = 0; i < 16; i++) {
            if (i & s) continue;
            const __m512 a0 = x[i], b0 = x[i + s];
            x[i] = _mm512_permutex2var_ps(a0, va, b0);
            x[i + s] = _mm512_permutex2var_ps(a0, vb, b0);
        }
    }
    for (int c = 0; c < 16; c++) _mm512_storeu_ps(dst + c * 32, x[c]);
}

static void pack(const args_t *a, int64_t s0, int64_t s1, float *kp, float *vp, int64_t DP) {
    const int64_t n = s1 - s0, nb = (n + 31) / 32, D = a->D;
    const int64_t es = a->bf16 || a->f16 ? 2 : 4, W = a->bf16 ? D / 2 : D;     /* 32-bit words per packed row */
#if HAVE_F16
    float kf[16][MAXD];     /* fp16: 16 K rows widened, the transposes' float32 rows */
#endif
    const int64_t WP = a->amx ? DP / 2 : W;                 /* words per packed K row (AMX: zero padded) */
    /* K^T blocks: words of 32 keys side by side (bf16: a word is a pair of d) */
    uint32_t *k32 = (uint32_t *)kp;
    for (int64_t b = 0; b < nb; b++) {
        uint32_t *blk = k32 + b * WP * 32;
        memset(blk + W * 32, 0, (size_t)((WP - W) * 32 * 4));
        for (int64_t t0 = 0; t0 < 32; t0 += 16) {
            const uint32_t *rows[16];
            for (int t = 0; t < 16; t++) {
                const int64_t j = b * 32 + t0 + t;
                rows[t] = j < n ? (const uint32_t *)(a->k + (s0 + j) * a->ks) : 0;
#if HAVE_F16
                if (a->f16 && rows[t]) {
                    widen_f16(kf[t], (const char *)rows[t], D);
                    rows[t] = (const uint32_t *)kf[t];
                }
#endif
                prefetch_row(a->k, s0 + j + PF, s1, a->ks, D * es);
                prefetch_row(a->v, s0 + j + PF, s1, a->vs, D * es);
            }
            int64_t w0 = 0;
            for (; w0 + 16 <= W; w0 += 16) tr16(rows, w0, blk + w0 * 32 + t0);
            for (; w0 < W; w0++)
                for (int t = 0; t < 16; t++) blk[w0 * 32 + t0 + t] = rows[t] ? rows[t][w0] : 0;
        }
    }
#if HAVE_BF16
    if (a->bf16) {
        /* V in key pairs: dst[2 d + e] = V[2 pr + e][d] (one 32-bit word per d) */
        uint16_t *v16 = (uint16_t *)vp;
        const int64_t np = a->amx ? rup(n, 32) / 2 : (n + 1) / 2 + 1;
        static const uint16_t LO[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                        8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
        static const uint16_t HI[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                        24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
        const __m512i lo = _mm512_loadu_si512(LO), hi = _mm512_loadu_si512(HI);
        for (int64_t pr = 0; pr < np; pr++) {
            uint16_t *dst = v16 + pr * DP * 2;
            const int64_t j = 2 * pr;
            const uint16_t *r0 = j < n ? (const uint16_t *)(a->v + (s0 + j) * a->vs) : 0;
            const uint16_t *r1 = j + 1 < n ? (const uint16_t *)(a->v + (s0 + j + 1) * a->vs) : 0;
            for (int64_t d0 = 0; d0 < DP; d0 += 32) {
                const int64_t left = D - d0;
                const __mmask32 mk = left >= 32 ? ~(__mmask32)0 : left <= 0 ? 0 : (((__mmask32)1 << left) - 1);
                const __m512i x0 = r0 ? _mm512_maskz_loadu_epi16(mk, r0 + d0) : _mm512_setzero_si512();
                const __m512i x1 = r1 ? _mm512_maskz_loadu_epi16(mk, r1 + d0) : _mm512_setzero_si512();
                _mm512_storeu_si512(dst + 2 * d0, _mm512_permutex2var_epi16(x0, lo, x1));
                _mm512_storeu_si512(dst + 2 * d0 + 32, _mm512_permutex2var_epi16(x0, hi, x1));
            }
        }
        return;
    }
#endif
    {
        for (int64_t j = 0; j < n + 2; j++) {
            float *dst = vp + j * DP;
            if (j < n) {
#if HAVE_F16
                if (a->f16) widen_f16(dst, a->v + (s0 + j) * a->vs, D);
                else
#endif
                memcpy(dst, a->v + (s0 + j) * a->vs, (size_t)D * 4);
                for (int64_t d = D; d < DP; d++) dst[d] = 0.0f;
            } else {
                memset(dst, 0, (size_t)DP * 4);
            }
        }
    }
}

/* S[r][0..32) = scale * (q[r] . k[j]) for QR rows and one block of 32 keys. The dot products are summed as
   the float32 backward sums S^T = K Q^T (native_backward.py): FMA chains of QK_PIECE terms in d order from zero,
   the pieces added in order, then one multiply by the scale. So the backward recomputes bitwise the scores the
   forward's lse came from. Before session 54 one chain ran over all of D here while the backward summed 64-term
   pieces of q pre-multiplied by the scale: the two differed by a few ulps of |S|, which every P of a row
   inherited, and sharp rows magnified it (gradients 3-7x PyTorch's float32 error at softmax scales 0.15-0.3 and
   at D = 256; test_regression_fp32_scores_match_backward). */
#define QK_PIECE 64     /* = native_backward.py's KC */
/* Sequences of one query: chains of 16 (native_backward.py's QK_KC_ONE; session 59). Chains of 64 left such a row's
   largest score, and so its lse, ~5 fp32 ulps off - over the tests' criterion at sharp scales, where PyTorch's
   one-row product (MKL's gemv) sums in shorter parts (test_varlen_paged_fp32_one_query_sharp_scale). At several
   rows MKL's sgemm sums one chain in d order, as QK_PIECE does up to D = 64: 16 there broke a multi-row test. */
#define QK_PIECE_ONE 16
static inline __attribute__((always_inline)) void qk_f32(const float *Q, int64_t DP, const float *kb, int64_t D,
                                                        float scale, float *S, const int64_t piece) {
    __m512 t0[QR], t1[QR];
    for (int64_t d0 = 0; d0 < D; d0 += piece) {
        const int64_t d1 = d0 + piece < D ? d0 + piece : D;
        __m512 c0[QR], c1[QR];
        for (int r = 0; r < QR; r++) { c0[r] = _mm512_setzero_ps(); c1[r] = _mm512_setzero_ps(); }
        for (int64_t d = d0; d < d1; d++) {
            const __m512 k0 = _mm512_loadu_ps(kb + d * 32), k1 = _mm512_loadu_ps(kb + d * 32 + 16);
            for (int r = 0; r < QR; r++) {
                const __m512 x = _mm512_set1_ps(Q[r * DP + d]);
                c0[r] = _mm512_fmadd_ps(x, k0, c0[r]);
                c1[r] = _mm512_fmadd_ps(x, k1, c1[r]);
            }
        }
        for (int r = 0; r < QR; r++) {
            t0[r] = d0 ? _mm512_add_ps(t0[r], c0[r]) : c0[r];
            t1[r] = d0 ? _mm512_add_ps(t1[r], c1[r]) : c1[r];
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r = 0; r < QR; r++) {
        _mm512_storeu_ps(S + r * KT, _mm512_mul_ps(t0[r], sc));
        _mm512_storeu_ps(S + r * KT + 16, _mm512_mul_ps(t1[r], sc));
    }
}

#if HAVE_BF16
static inline __attribute__((always_inline)) void qk_bf16(const uint16_t *Q, int64_t DP, const uint16_t *kb, int64_t D,
                                                         float scale, float *S) {
    __m512 c0[QR], c1[QR];
    for (int r = 0; r < QR; r++) { c0[r] = _mm512_setzero_ps(); c1[r] = _mm512_setzero_ps(); }
    for (int64_t d2 = 0; d2 < D / 2; d2++) {
        const __m512bh k0 = (__m512bh)_mm512_loadu_si512(kb + d2 * 64), k1 = (__m512bh)_mm512_loadu_si512(kb + d2 * 64 + 32);
        for (int r = 0; r < QR; r++) {
            int32_t w; memcpy(&w, Q + r * DP + 2 * d2, 4);
            const __m512bh x = (__m512bh)_mm512_set1_epi32(w);
            c0[r] = _mm512_dpbf16_ps(c0[r], x, k0);
            c1[r] = _mm512_dpbf16_ps(c1[r], x, k1);
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r = 0; r < QR; r++) {
        _mm512_storeu_ps(S + r * KT, _mm512_mul_ps(c0[r], sc));
        _mm512_storeu_ps(S + r * KT + 16, _mm512_mul_ps(c1[r], sc));
    }
}
#endif

/* O[r][c0 .. c0 + NC vectors) += sum_{t in [t0, t1)} P[r][t] V[t] for PR rows */
static inline __attribute__((always_inline)) void pv_f32(const float *P, const float *V, int64_t DP, float *O,
                                                        int64_t t0, int64_t t1, int c0, const int NC) {
    __m512 c[PR][4];
    for (int r = 0; r < PR; r++)
        for (int x = 0; x < NC; x++) c[r][x] = _mm512_loadu_ps(O + r * DP + (c0 + x) * 16);
    for (int64_t t = t0; t < t1; t++) {
        __m512 vv[4];
        for (int x = 0; x < NC; x++) {
            vv[x] = _mm512_loadu_ps(V + t * DP + (c0 + x) * 16);
            __asm__("" : "+v"(vv[x]));   /* one load per vector, not one per row's FMA */
        }
        for (int r = 0; r < PR; r++) {
            const __m512 p = _mm512_set1_ps(P[r * KT + t]);
            for (int x = 0; x < NC; x++) c[r][x] = _mm512_fmadd_ps(p, vv[x], c[r][x]);
        }
    }
    for (int r = 0; r < PR; r++)
        for (int x = 0; x < NC; x++) _mm512_storeu_ps(O + r * DP + (c0 + x) * 16, c[r][x]);
}

#if HAVE_BF16
/* the same with P (bf16) and V in key pairs: t0 even, pairs [t0 / 2, (t1 + 1) / 2);
   V points at the pair of tile key 0 */
static inline __attribute__((always_inline)) void pv_bf16(const uint16_t *P, const uint16_t *V, int64_t DP, float *O,
                                                         int64_t t0, int64_t t1, int c0, const int NC) {
    __m512 c[PR][4];
    for (int r = 0; r < PR; r++)
        for (int x = 0; x < NC; x++) c[r][x] = _mm512_loadu_ps(O + r * DP + (c0 + x) * 16);
    for (int64_t t = t0; t < t1; t += 2) {
        __m512bh vv[4];
        for (int x = 0; x < NC; x++) {
            vv[x] = (__m512bh)_mm512_loadu_si512(V + ((t / 2) * DP + (c0 + x) * 16) * 2);
            __asm__("" : "+v"(vv[x]));
        }
        for (int r = 0; r < PR; r++) {
            int32_t w; memcpy(&w, P + r * KT + t, 4);
            const __m512bh p = (__m512bh)_mm512_set1_epi32(w);
            for (int x = 0; x < NC; x++) c[r][x] = _mm512_dpbf16_ps(c[r][x], p, vv[x]);
        }
    }
    for (int r = 0; r < PR; r++)
        for (int x = 0; x < NC; x++) _mm512_storeu_ps(O + r * DP + (c0 + x) * 16, c[r][x]);
}
#endif

/* rows [r0, r0 + nr) of the item (nr <= RT), keys of segment [s0, s1) packed in kp / vp.
   State per row: m (running max, -inf before any key), l, O (DP floats). */
static int64_t tile(const args_t *a, int64_t r0, int64_t nr, int64_t s0, int64_t s1, const float *kp, const float *vp,
                 const void *Q, float *O, float *S, void *Pbuf, float *m, float *l, const int64_t *rlo,
                 const int64_t *rhi, const float *fx, int64_t DP) {
    const int64_t D = a->D, NV = DP / 16;
    int64_t ulo = s1, uhi = s0;      /* keys some row of the tile sees, within the segment */
    for (int64_t r = 0; r < nr; r++) {
        int64_t lo = rlo[r] > s0 ? rlo[r] : s0, hi = rhi[r] < s1 ? rhi[r] : s1;
        if (lo < hi) { if (lo < ulo) ulo = lo; if (hi > uhi) uhi = hi; }
    }
    if (ulo >= uhi) return 0;
    const int64_t nrp = rup(nr, QR);
    int64_t counted = 0;      /* scores computed (the tests check the skipping) */
    for (int64_t j0 = s0 + (ulo - s0) / 32 * 32; j0 < uhi; j0 += KT) {   /* 32-aligned in the segment */
        const int64_t j1 = j0 + KT < uhi ? j0 + KT : uhi, w = j1 - j0;
        /* scores of each QR-row group, 32-key blocks that some row of the group sees */
        for (int64_t g0 = 0; g0 < nrp; g0 += QR) {
            int64_t glo = j1, ghi = j0;
            for (int64_t r = g0; r < g0 + QR && r < nr; r++) {
                int64_t lo = rlo[r] > j0 ? rlo[r] : j0, hi = rhi[r] < j1 ? rhi[r] : j1;
                if (lo < hi) { if (lo < glo) glo = lo; if (hi > ghi) ghi = hi; }
            }
            for (int64_t b = 0; b < w; b += 32) {
                if (j0 + b >= ghi || j0 + b + 32 <= glo) continue;
                const int64_t blk = (j0 + b - s0) / 32;
                counted += QR * 32;
#if HAVE_BF16
                if (a->bf16) {
                    qk_bf16((const uint16_t *)Q + g0 * DP, DP, (const uint16_t *)kp + blk * (D / 2) * 64, D, a->scale,
                            S + g0 * KT + b);
                    continue;
                }
#endif
                const float *qg = (const float *)Q + g0 * DP, *kg = kp + blk * D * 32;
                if (a->n_q == 1) qk_f32(qg, DP, kg, D, a->scale, S + g0 * KT + b, QK_PIECE_ONE);
                else qk_f32(qg, DP, kg, D, a->scale, S + g0 * KT + b, QK_PIECE);
            }
        }
        /* online softmax, row by row: visible lanes [t0, t1) of the tile */
        for (int64_t r = 0; r < nrp; r++) {
            int64_t t0 = 0, t1 = 0;
            if (r < nr) {
                t0 = (rlo[r] > j0 ? rlo[r] : j0) - j0;
                t1 = (rhi[r] < j1 ? rhi[r] : j1) - j0;
            }
            float *s = S + r * KT;
            if (t0 >= t1) {
                if (a->bf16) memset((uint16_t *)Pbuf + r * KT, 0, KT * 2);
                else memset((float *)Pbuf + r * KT, 0, KT * 4);
                continue;
            }
            const uint64_t vm = (t1 >= 64 ? ~0ull : ((1ull << t1) - 1)) & ~((1ull << t0) - 1);
            if (a->softcap2 != 0.0f || a->alibi)   /* softcap, then ALiBi (fx: the row's slope, diagonal key) */
                for (int x = 0; x < 4; x++) {
                    vf sx = (vf)_mm512_loadu_ps(s + 16 * x);
#ifdef FT_SOFTCAP_F64
                    if (a->softcap2 != 0.0f) sx = softcap_f(sx, a->softcap2);
#else
                    if (a->softcap2 != 0.0f) sx = (vf)softcap_f32((__m512)sx, a->softcap2);
#endif
                    if (a->alibi) sx = alibi_bias(sx, fx[2 * r], fx[2 * r + 1], j0 + 16 * x);
                    _mm512_storeu_ps(s + 16 * x, (__m512)sx);
                }
            __m512 mx = _mm512_set1_ps(-INFINITY);
            for (int x = 0; x < 4; x++)
                mx = _mm512_mask_max_ps(mx, (__mmask16)(vm >> (16 * x)), mx, _mm512_loadu_ps(s + 16 * x));
            const float bm = _mm512_reduce_max_ps(mx);
            if (bm > m[r]) {
                const float alpha = exp2f(m[r] - bm);     /* 0 on the first key (m = -inf) */
                l[r] *= alpha;
                const __m512 al = _mm512_set1_ps(alpha);
                for (int64_t x = 0; x < NV; x++)
                    _mm512_storeu_ps(O + r * DP + 16 * x, _mm512_mul_ps(_mm512_loadu_ps(O + r * DP + 16 * x), al));
                m[r] = bm;
            }
            const __m512 mv = _mm512_set1_ps(m[r]);
            __m512 sum = _mm512_setzero_ps();
            for (int x = 0; x < 4; x++) {
                const __mmask16 k = (__mmask16)(vm >> (16 * x));
                const __m512 p = _mm512_maskz_mov_ps(k, vexp2(_mm512_sub_ps(_mm512_loadu_ps(s + 16 * x), mv)));
                sum = _mm512_add_ps(sum, p);
#if HAVE_BF16
                if (a->bf16) {
                    _mm256_storeu_si256((__m256i *)((uint16_t *)Pbuf + r * KT + 16 * x), (__m256i)_mm512_cvtneps_pbh(p));
                    continue;
                }
#endif
                _mm512_storeu_ps((float *)Pbuf + r * KT + 16 * x, p);
            }
            l[r] += _mm512_reduce_add_ps(sum);
        }
        /* P @ V, PR rows at a time, over the keys some row of the group sees */
        for (int64_t g0 = 0; g0 < nrp; g0 += PR) {
            int64_t glo = j1, ghi = j0;
            for (int64_t r = g0; r < g0 + PR && r < nr; r++) {
                int64_t lo = rlo[r] > j0 ? rlo[r] : j0, hi = rhi[r] < j1 ? rhi[r] : j1;
                if (lo < hi) { if (lo < glo) glo = lo; if (hi > ghi) ghi = hi; }
            }
            if (glo >= ghi) continue;
            glo -= j0; ghi -= j0;
#if HAVE_BF16
            if (a->bf16) {
                glo &= ~1;
                const uint16_t *V = (const uint16_t *)vp + ((j0 - s0) / 2) * DP * 2;
                int c0 = 0;
                for (; c0 + 4 <= NV; c0 += 4) pv_bf16((const uint16_t *)Pbuf + g0 * KT, V, DP, O + g0 * DP, glo, ghi, c0, 4);
                if (NV - c0 == 3) pv_bf16((const uint16_t *)Pbuf + g0 * KT, V, DP, O + g0 * DP, glo, ghi, c0, 3);
                else if (NV - c0 == 2) pv_bf16((const uint16_t *)Pbuf + g0 * KT, V, DP, O + g0 * DP, glo, ghi, c0, 2);
                else if (NV - c0 == 1) pv_bf16((const uint16_t *)Pbuf + g0 * KT, V, DP, O + g0 * DP, glo, ghi, c0, 1);
                continue;
            }
#endif
            const float *V = vp + (j0 - s0) * DP;
            int c0 = 0;
            for (; c0 + 4 <= NV; c0 += 4) pv_f32((const float *)Pbuf + g0 * KT, V, DP, O + g0 * DP, glo, ghi, c0, 4);
            if (NV - c0 == 3) pv_f32((const float *)Pbuf + g0 * KT, V, DP, O + g0 * DP, glo, ghi, c0, 3);
            else if (NV - c0 == 2) pv_f32((const float *)Pbuf + g0 * KT, V, DP, O + g0 * DP, glo, ghi, c0, 2);
            else if (NV - c0 == 1) pv_f32((const float *)Pbuf + g0 * KT, V, DP, O + g0 * DP, glo, ghi, c0, 1);
        }
    }
    return counted;
}

#if HAVE_AMX
/* The AMX path (bf16). Tile registers, all 16 rows x 64 bytes (one palette-1 configuration
   for both products): tmm0-3 the C block (2 x 2 tiles of 16 rows x 16 float32 = 32 rows x
   32 columns), tmm4-5 A (16 rows x 32 bf16 each: rows 0-15 and 16-31), tmm6-7 B (16 rows
   x 16 bf16 pairs: columns 0-15 and 16-31). TDPBF16PS: C[i][n] += sum over its 16 rows r
   of A[i][2r] B[r][n].lo + A[i][2r+1] B[r][n].hi - exact bf16 products, float32 sums
   (denormal inputs flushed, as vdpbf16ps). Per row the result depends only on that row
   of A and on B, so a row's scores / outputs do not depend on the rows it is tiled with. */
static int amx_granted;    /* ft_amx_init() succeeded: this process may use tile data */

static void amx_config(void) {
    unsigned char cfg[64] __attribute__((aligned(64)));
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;                                  /* palette 1; start_row 0 */
    for (int t = 0; t < 8; t++) {
        cfg[16 + 2 * t] = 64;                    /* colsb (uint16, little endian): 64 bytes */
        cfg[48 + t] = 16;                        /* rows */
    }
    _tile_loadconfig(cfg);
}

/* S[32 rows][32 keys] (row stride AKB floats) = Q[32 rows][DP] . K block, unscaled:
   Q bf16 rows at stride DP, kb one packed K block ([DP/2][32 keys][2]) */
static inline __attribute__((always_inline)) void qk_amx(const uint16_t *Q, int64_t DP, const uint16_t *kb,
                                                        float *S) {
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int64_t d0 = 0; d0 < DP; d0 += 32) {
        _tile_loadd(4, Q + d0, DP * 2);                  /* rows 0-15, d [d0, d0 + 32) */
        _tile_loadd(5, Q + 16 * DP + d0, DP * 2);        /* rows 16-31 */
        _tile_loadd(6, kb + d0 * 32, 128);               /* pairs d0/2 .. +16, keys 0-15 */
        _tile_loadd(7, kb + d0 * 32 + 32, 128);          /* keys 16-31 */
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, S, AKB * 4); _tile_stored(1, S + 16, AKB * 4);
    _tile_stored(2, S + 16 * AKB, AKB * 4); _tile_stored(3, S + 16 * AKB + 16, AKB * 4);
}

/* O[32 rows][32 columns] (row stride DP floats) += P[32 rows][32 nb keys] (bf16, row stride
   AKB) V[32 nb keys][32 columns]: V points at the block's first key pair and column, pair
   rows at stride 2 DP bf16. The accumulator goes through the tiles once per nb blocks. */
static inline __attribute__((always_inline)) void pv_amx(const uint16_t *P, const uint16_t *V, int64_t DP, float *O,
                                                        int64_t nb) {
    _tile_loadd(0, O, DP * 4); _tile_loadd(1, O + 16, DP * 4);
    _tile_loadd(2, O + 16 * DP, DP * 4); _tile_loadd(3, O + 16 * DP + 16, DP * 4);
    for (int64_t b = 0; b < nb; b++) {
        _tile_loadd(4, P + 32 * b, AKB * 2);
        _tile_loadd(5, P + 16 * AKB + 32 * b, AKB * 2);
        _tile_loadd(6, V + b * 32 * DP, DP * 4);         /* 16 pairs = 32 keys, columns 0-15 */
        _tile_loadd(7, V + b * 32 * DP + 32, DP * 4);    /* columns 16-31 */
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, O, DP * 4); _tile_stored(1, O + 16, DP * 4);
    _tile_stored(2, O + 16 * DP, DP * 4); _tile_stored(3, O + 16 * DP + 16, DP * 4);
}

/* lanes of score vector x (keys [16 x, 16 x + 16) of the step) inside [t0, t1) */
static inline __mmask16 lanes(int64_t t0, int64_t t1, int64_t x) {
    int64_t lo = t0 - 16 * x, hi = t1 - 16 * x;
    lo = lo < 0 ? 0 : lo;
    hi = hi > 16 ? 16 : hi;
    return hi <= lo ? 0 : (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
}

/* The exp2 argument of score vector v: s * scale - m. FT_SOFTMAX_OLD (tests, A/B): session 34's step
   (the product rounded, then the difference; the degree-7 polynomial; the row max over scaled
   scores); default: one FMA (one rounding), vexp2_bf16, the row max over the raw scores, scaled
   once (scale * max s, or scale * min s for a negative scale: the same value as max(scale * s)). */
#ifdef FT_SOFTMAX_OLD
#define VEXP2 vexp2_lean
#define SM_ARG(v) _mm512_sub_ps(_mm512_mul_ps((v), sc), mv)
#else
#define VEXP2 vexp2_bf16
#define SM_ARG(v) _mm512_fmsub_ps((v), sc, mv)
#endif
#ifndef FT_SOFTMAX_OLD
/* The largest (lo = 0) or smallest (lo = 1) raw score on the visible lanes of vectors [v0, v1) (edge
   masks k0, k1); always inlined with a constant lo, so each call keeps one of the two ops. */
static inline __attribute__((always_inline)) float row_extreme(const float *s, int64_t v0, int64_t v1, __mmask16 k0,
                                                               __mmask16 k1, int lo) {
#define FT_EXT(a, b) (lo ? _mm512_min_ps((a), (b)) : _mm512_max_ps((a), (b)))
    const __m512 init = _mm512_set1_ps(lo ? INFINITY : -INFINITY);
    __m512 e0 = _mm512_mask_mov_ps(init, k0, _mm512_loadu_ps(s + 16 * v0));
    __m512 e1 = init;
    if (v1 - 1 > v0) e1 = _mm512_mask_mov_ps(init, k1, _mm512_loadu_ps(s + 16 * (v1 - 1)));
    int64_t x = v0 + 1;
    for (; x + 2 <= v1 - 1; x += 2) {
        e0 = FT_EXT(e0, _mm512_loadu_ps(s + 16 * x));
        e1 = FT_EXT(e1, _mm512_loadu_ps(s + 16 * x + 16));
    }
    if (x < v1 - 1) e0 = FT_EXT(e0, _mm512_loadu_ps(s + 16 * x));
    return lo ? _mm512_reduce_min_ps(_mm512_min_ps(e0, e1)) : _mm512_reduce_max_ps(_mm512_max_ps(e0, e1));
#undef FT_EXT
}
#endif

/* One row's online-softmax step: s = its AKB scores (unscaled q . k), visible lanes [t0, t1)
   (t0 < t1: nothing; the row's P is then zero), P written as bf16 on vectors [x0, x1) (the
   group's blocks: 0 outside [t0, t1)), O (NV vectors) rescaled in memory when the max grows.
   Interior vectors are unmasked (only the two edge vectors of a row take lane masks), two at
   a time for the exp2 chains to overlap. */
static inline __attribute__((always_inline)) void softmax_row(const float *s, uint16_t *p, float *O, int64_t NV,
                                                             __m512 sc, float *m, float *l, int64_t t0, int64_t t1,
                                                             int64_t x0, int64_t x1) {
    if (t0 >= t1) {
        memset(p + 16 * x0, 0, (size_t)(x1 - x0) * 32);
        return;
    }
    const int64_t v0 = t0 / 16, v1 = (t1 + 15) / 16;     /* vectors with visible lanes, x0 <= v0 < v1 <= x1 */
    const __mmask16 k0 = lanes(t0, t1, v0), k1 = lanes(t0, t1, v1 - 1);
    int64_t x = v0 + 1;
#ifdef FT_SOFTMAX_OLD
    __m512 mx0 = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), k0, _mm512_mul_ps(_mm512_loadu_ps(s + 16 * v0), sc));
    __m512 mx1 = _mm512_set1_ps(-INFINITY);
    if (v1 - 1 > v0) mx1 = _mm512_mask_mov_ps(mx1, k1, _mm512_mul_ps(_mm512_loadu_ps(s + 16 * (v1 - 1)), sc));
    for (; x + 2 <= v1 - 1; x += 2) {
        mx0 = _mm512_max_ps(mx0, _mm512_mul_ps(_mm512_loadu_ps(s + 16 * x), sc));
        mx1 = _mm512_max_ps(mx1, _mm512_mul_ps(_mm512_loadu_ps(s + 16 * x + 16), sc));
    }
    if (x < v1 - 1) mx0 = _mm512_max_ps(mx0, _mm512_mul_ps(_mm512_loadu_ps(s + 16 * x), sc));
    const float bm = _mm512_reduce_max_ps(_mm512_max_ps(mx0, mx1));
#else
    /* max(scale * s) = scale * max s for scale >= 0 (rounding is monotonic), scale * min s for
       scale < 0: the raw scores' extreme, one multiply a row instead of one a vector */
    const float scf = _mm512_cvtss_f32(sc);
    const float bm = scf >= 0.0f ? scf * row_extreme(s, v0, v1, k0, k1, 0) : scf * row_extreme(s, v0, v1, k0, k1, 1);
#endif
    if (bm > *m) {
        const float alpha = exp2f(*m - bm);     /* 0 on the first key (m = -inf) */
        *l *= alpha;
        const __m512 al = _mm512_set1_ps(alpha);
        for (int64_t y = 0; y < NV; y++) _mm512_storeu_ps(O + 16 * y, _mm512_mul_ps(_mm512_loadu_ps(O + 16 * y), al));
        *m = bm;
    }
    const __m512 mv = _mm512_set1_ps(*m);
    for (int64_t y = x0; y < v0; y++) _mm256_storeu_si256((__m256i *)(p + 16 * y), _mm256_setzero_si256());
    for (int64_t y = v1; y < x1; y++) _mm256_storeu_si256((__m256i *)(p + 16 * y), _mm256_setzero_si256());
    /* edges first (masked), then the interior */
    __m512 e = _mm512_maskz_mov_ps(k0, VEXP2(SM_ARG(_mm512_loadu_ps(s + 16 * v0))));
    __m512 sum0 = e, sum1 = _mm512_setzero_ps();
    _mm256_storeu_si256((__m256i *)(p + 16 * v0), (__m256i)_mm512_cvtneps_pbh(e));
    if (v1 - 1 > v0) {
        e = _mm512_maskz_mov_ps(k1, VEXP2(SM_ARG(_mm512_loadu_ps(s + 16 * (v1 - 1)))));
        sum1 = e;
        _mm256_storeu_si256((__m256i *)(p + 16 * (v1 - 1)), (__m256i)_mm512_cvtneps_pbh(e));
    }
    x = v0 + 1;
    for (; x + 2 <= v1 - 1; x += 2) {
        const __m512 ea = VEXP2(SM_ARG(_mm512_loadu_ps(s + 16 * x)));
        const __m512 eb = VEXP2(SM_ARG(_mm512_loadu_ps(s + 16 * x + 16)));
        sum0 = _mm512_add_ps(sum0, ea);
        sum1 = _mm512_add_ps(sum1, eb);
#ifdef FT_SOFTMAX_OLD
        _mm256_storeu_si256((__m256i *)(p + 16 * x), (__m256i)_mm512_cvtneps_pbh(ea));
        _mm256_storeu_si256((__m256i *)(p + 16 * x + 16), (__m256i)_mm512_cvtneps_pbh(eb));
#else
        /* both vectors in one conversion (the same RNE rounding) and one 64-byte store */
        _mm512_storeu_si512((void *)(p + 16 * x), (__m512i)_mm512_cvtne2ps_pbh(eb, ea));
#endif
    }
    if (x < v1 - 1) {
        e = VEXP2(SM_ARG(_mm512_loadu_ps(s + 16 * x)));
        sum0 = _mm512_add_ps(sum0, e);
        _mm256_storeu_si256((__m256i *)(p + 16 * x), (__m256i)_mm512_cvtneps_pbh(e));
    }
    *l += _mm512_reduce_add_ps(_mm512_add_ps(sum0, sum1));
}

/* tile()'s job on AMX: rows [r0, r0 + nr) of the item (nr <= ART; the rows up to the next
   multiple of 32 exist in scratch with zero q and no keys), keys of segment [s0, s1).
   Per step of AKB keys (from a 32-aligned start):
     S  = Q K^T                       32 x 32 blocks that some row of the 32-row group sees
     m' = max(m, rowmax(S scale)), alpha = 2^(m - m'), O *= alpha (in memory, only when m
     grows), p = 2^(S scale - m') on the row's visible lanes, 0 elsewhere; l = alpha l + sum p
     O += P V                         P rounded to bf16, the group's blocks, O through C tiles
   The blocks of a group are the 32-key blocks its rows see, so the straddling ones of a
   causal diagonal / window edge are masked in the softmax and the rest skipped. */
static int64_t tile_amx(const args_t *a, int64_t nr, int64_t s0, int64_t s1, const uint16_t *kp,
                        const uint16_t *vp, const uint16_t *Q, float *O, float *S, uint16_t *P, float *m, float *l,
                        const int64_t *rlo, const int64_t *rhi, int64_t DP) {
    int64_t ulo = s1, uhi = s0;
    for (int64_t r = 0; r < nr; r++) {
        int64_t lo = rlo[r] > s0 ? rlo[r] : s0, hi = rhi[r] < s1 ? rhi[r] : s1;
        if (lo < hi) { if (lo < ulo) ulo = lo; if (hi > uhi) uhi = hi; }
    }
    if (ulo >= uhi) return 0;
    const int64_t ng = (nr + 31) / 32, NV = DP / 16;
    const __m512 sc = _mm512_set1_ps(a->scale);
    int64_t counted = 0;
    for (int64_t j0 = s0 + (ulo - s0) / 32 * 32; j0 < uhi; j0 += AKB) {
        const int64_t j1 = j0 + AKB < uhi ? j0 + AKB : uhi;
        int64_t b0[ART / 32], b1[ART / 32];      /* per group: its 32-key blocks [b0, b1) of the step */
        for (int64_t g = 0; g < ng; g++) {
            int64_t glo = j1, ghi = j0;
            for (int64_t r = 32 * g; r < 32 * g + 32 && r < nr; r++) {
                int64_t lo = rlo[r] > j0 ? rlo[r] : j0, hi = rhi[r] < j1 ? rhi[r] : j1;
                if (lo < hi) { if (lo < glo) glo = lo; if (hi > ghi) ghi = hi; }
            }
            b0[g] = b1[g] = 0;
            if (glo < ghi) { b0[g] = (glo - j0) / 32; b1[g] = (ghi - j0 + 31) / 32; }
        }
        for (int64_t g = 0; g < ng; g++)
            for (int64_t b = b0[g]; b < b1[g]; b++) {
                qk_amx(Q + 32 * g * DP, DP, kp + ((j0 - s0) / 32 + b) * DP * 32, S + 32 * g * AKB + 32 * b);
                counted += 32 * 32;
            }
        /* online softmax, row by row (AVX-512), on the group's vectors [x0, x1) */
        for (int64_t g = 0; g < ng; g++) {
            const int64_t x0 = 2 * b0[g], x1 = 2 * b1[g];
            for (int64_t r = 32 * g; r < 32 * g + 32 && x0 < x1; r++) {
                int64_t t0 = 0, t1 = 0;
                if (r < nr) {
                    t0 = (rlo[r] > j0 ? rlo[r] : j0) - j0;
                    t1 = (rhi[r] < j1 ? rhi[r] : j1) - j0;
                }
                softmax_row(S + r * AKB, P + r * AKB, O + r * DP, NV, sc, &m[r], &l[r], t0, t1, x0, x1);
            }
        }
        for (int64_t g = 0; g < ng; g++) {
            if (b0[g] >= b1[g]) continue;
            const uint16_t *V = vp + ((j0 - s0) / 2 + 16 * b0[g]) * DP * 2;
            for (int64_t dc = 0; dc < DP; dc += 32)
                pv_amx(P + 32 * g * AKB + 32 * b0[g], V + 2 * dc, DP, O + 32 * g * DP + dc, b1[g] - b0[g]);
        }
    }
    return counted;
}
#endif

#define KC 512      /* keys per chunk: its packed K and V (512 KiB float32 at D = 128)
                       stay in L2 while every row tile of the item passes over them */

typedef struct { int64_t cost, hk, i0; } item_t;

static int by_cost(const void *x, const void *y) {      /* largest first, then in order */
    const item_t *a = (const item_t *)x, *b = (const item_t *)y;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    if (a->hk != b->hk) return a->hk < b->hk ? -1 : 1;
    return a->i0 < b->i0 ? -1 : (a->i0 > b->i0);
}

/* One item: KV head hk, queries [i0, i1), rows r = (i - i0) * G + g. Keys in chunks of
   KC (packed once per chunk), row tiles of RT inside; the state of all the item's
   rows (m, l, O) lives in scratch until the last chunk, then out = O / l and
   lse = (m + log2 l) ln 2 are written (a row without keys: 0 and +inf). */
static int64_t item(const args_t *a0, const item_t *it, int64_t bm, char *scratch, int64_t rmax, char *out,
                    int64_t oss, int64_t osh, float *lse, int64_t lsh, int64_t lss, int64_t ksh, int64_t vsh) {
    args_t A = *a0, *a = &A;
    const int64_t G = a->G, D = a->D, hk = it->hk, i0 = it->i0;
    const int64_t i1 = i0 + bm < a->n_q ? i0 + bm : a->n_q, R = (i1 - i0) * G;
    A.q = a0->q + hk * G * a0->qsh;
    A.k = a0->k + hk * ksh;
    A.v = a0->v + hk * vsh;
    const int64_t DP = rup(D, 32), nk = KC + 160, rm = rup(rmax, RT);   /* ft_prefill_scratch's layout */
    float *kp = (float *)scratch, *vp = kp + nk * DP, *Q = vp + nk * DP, *O = Q + rm * DP, *S = O + rm * DP;
    float *Pbuf = S + SB, *m = Pbuf + SB, *l = m + rm;
    int64_t *rlo = (int64_t *)(l + rm), *rhi = rlo + rm;
    float *fx = (float *)(rhi + rm);     /* ALiBi: per row its head's slope and its anchor key */
    int64_t klo = a->n_k, khi = 0, counted = 0;
    const int64_t qes = a->bf16 ? 2 : 4;
    for (int64_t r = 0; r < rup(R, RT); r++) {
        m[r] = -INFINITY; l[r] = 0.0f;
        memset(O + r * DP, 0, (size_t)DP * 4);
        char *qd = (char *)Q + r * DP * qes;
        if (r < R) {
            const int64_t i = i0 + r / G, g = r % G;
            vis(a, i, &rlo[r], &rhi[r]);
            /* ALiBi's anchor max(i + off, 0) (flashtriton/alibi_anchor.py) */
            if (a->alibi) {
                fx[2 * r] = a->alibi[hk * G + g];
                fx[2 * r + 1] = (float)(i + a->off > 0 ? i + a->off : 0);
            }
            if (rlo[r] < rhi[r]) { if (rlo[r] < klo) klo = rlo[r]; if (rhi[r] > khi) khi = rhi[r]; }
#if HAVE_F16
            if (a->f16) widen_f16((float *)qd, a->q + i * a->qss + g * a->qsh, D);
            else
#endif
            memcpy(qd, a->q + i * a->qss + g * a->qsh, (size_t)(D * qes));
            memset(qd + D * qes, 0, (size_t)((DP - D) * qes));
        } else {
            rlo[r] = rhi[r] = 0;
            memset(qd, 0, (size_t)(DP * qes));
        }
    }
    for (int64_t c0 = klo; c0 < khi; c0 += KC) {
        const int64_t c1 = c0 + KC < khi ? c0 + KC : khi;
        int any = 0;
        for (int64_t r = 0; r < R && !any; r++) any = rlo[r] < c1 && rhi[r] > c0;
        if (!any) continue;
        pack(a, c0, c1, kp, vp, DP);
        for (int64_t r0 = 0; r0 < R; r0 += RT) {
            const int64_t nr = R - r0 < RT ? R - r0 : RT;
#if HAVE_AMX
            if (a->amx) {     /* RT == ART: the same row tiles */
                counted += tile_amx(a, nr, c0, c1, (const uint16_t *)kp, (const uint16_t *)vp,
                                    (const uint16_t *)Q + r0 * DP, O + r0 * DP, S, (uint16_t *)Pbuf, m + r0, l + r0,
                                    rlo + r0, rhi + r0, DP);
                continue;
            }
#endif
            counted += tile(a, r0, nr, c0, c1, kp, vp, (const char *)Q + r0 * DP * qes, O + r0 * DP, S, Pbuf,
                            m + r0, l + r0, rlo + r0, rhi + r0, fx + 2 * r0, DP);
        }
    }
    for (int64_t r = 0; r < R; r++) {
        const int64_t i = i0 + r / G, h = hk * G + r % G;
        float *o = O + r * DP;
        char *dst = out + i * oss + h * osh;
        float *lrow = (float *)((char *)lse + h * lsh + i * lss);     /* byte strides */
        if (l[r] > 0.0f) {
            const float inv = 1.0f / l[r];
            for (int64_t d = 0; d < D; d++) o[d] *= inv;
            *lrow = (m[r] + log2f(l[r])) * 0.6931471805599453f;
        } else if (l[r] == 0.0f) {
            for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
            *lrow = INFINITY;                           /* no key: out 0, lse +inf */
        } else {                                        /* NaN */
            for (int64_t d = 0; d < D; d++) o[d] = NAN;
            *lrow = NAN;
        }
        if (a->bf16)
            for (int64_t d = 0; d < D; d++) { uint16_t y = f32_to_bf16(o[d]); memcpy(dst + 2 * d, &y, 2); }
#if HAVE_F16
        else if (a->f16)    /* rounded to nearest even */
            for (int64_t d = 0; d < D; d++) { const _Float16 y = (_Float16)o[d]; memcpy(dst + 2 * d, &y, 2); }
#endif
        else
            memcpy(dst, o, (size_t)D * 4);
    }
    return counted;
}
#endif

/* Asks Linux for this process's permission to use AMX tile data (arch_prctl
   ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; process-wide, so once is enough, and
   OpenMP threads that exist already are covered), then checks it was granted.
   0: granted; 1: not compiled in; 2: the CPU lacks AMX-TILE / AMX-BF16 (CPUID 7.0 EDX
   bits 24 / 22); 3: the permission does not show after the request; 100 + errno: the
   request failed (EINVAL: the kernel does not support AMX, < 5.16; EPERM: refused). */
int ft_amx_init(void) {
#if HAVE_AMX
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !((edx >> 24) & 1) || !((edx >> 22) & 1)) return 2;
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0)
        return 100 + errno;
    unsigned long bits = 0;
    if (syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &bits) != 0 || !((bits >> 18) & 1)) return 3;
    amx_granted = 1;
    return 0;
#else
    return 1;
#endif
}

/* bytes of per-thread scratch for head dim d and rmax rows per item */
int64_t ft_prefill_scratch(int64_t d, int64_t rmax) {
    const int64_t dp = rup(d, 32), nk = KC + 160, rm = rup(rmax, RT);
    return 4 * (2 * nk * dp + 2 * rm * dp + 2 * SB + 2 * rm) + 16 * rm + 8 * rm + 256;
}

/* The forward of one sequence, every head: q (n_q, H, D), k / v (n_k, Hk, D), out like q,
   lse (H, n_q) float32, all with byte strides (the head dim contiguous). Work items are
   (KV head, block of bm query positions), largest first, dynamically scheduled.
   counted (may be NULL): scores computed, masked ones in the 8 x 32 blocks included. ek: the inputs' element kind,
   0 float32, 1 bf16, 2 fp16 (HAVE_F16, ft_prefill_caps bit 8). amx: bf16 on AMX tiles (the FT_AMX build, after
   ft_amx_init() succeeded). alibi: the sequence's H slopes (float32, natural units; 0: none); softcap2: softcap * log2(e) (0: none; scale is then softmax scale / softcap); neither with
   amx. Returns 0; 1 for a problem it does not take; 4 when out of memory; 5 AMX without the permission. */
int ft_prefill_fwd(const char *q, int64_t qss, int64_t qsh, const char *k, int64_t ks, int64_t ksh,
                   const char *v, int64_t vs, int64_t vsh, char *out, int64_t oss, int64_t osh,
                   float *lse, int64_t lsh, int64_t lss, int64_t n_q, int64_t n_k, int64_t Hk, int64_t G,
                   int64_t D, int64_t ek, int64_t left, int64_t right, float scale, int64_t bm,
                   char *scratch, int64_t scratch_per_thread, int64_t *counted, int nthreads, int amx,
                   const float *alibi, float softcap2) {
#if HAVE_F32
    const int64_t bf16 = ek == 1, f16 = ek == 2;
    if (D <= 0 || D > MAXD || ek < 0 || ek > 2 || (bf16 && (D % 2 || !HAVE_BF16)) || (f16 && !HAVE_F16) || bm <= 0)
        return 1;
    if (amx && (!bf16 || !HAVE_AMX || alibi || softcap2 != 0.0f)) return 1;
#if HAVE_AMX
    if (amx && !amx_granted) return 5;     /* a tile instruction would raise SIGILL */
#endif
    const int64_t rmax = bm * G;
    if (scratch_per_thread < ft_prefill_scratch(D, rmax)) return 1;
    args_t a = {q, k, v, qss, qsh, ks, vs, n_q, n_k, n_k - n_q, left, right, G, D, bf16, f16, scale, amx, alibi,
                softcap2};
    const int64_t nb = (n_q + bm - 1) / bm, n_items = Hk * nb;
    item_t *items = malloc(sizeof(item_t) * (size_t)(n_items > 0 ? n_items : 1));
    if (!items) return 4;
    for (int64_t hk = 0; hk < Hk; hk++)
        for (int64_t b = 0; b < nb; b++) {
            int64_t cost = 0;
            for (int64_t i = b * bm; i < (b + 1) * bm && i < n_q; i++) {
                int64_t lo, hi;
                vis(&a, i, &lo, &hi);
                cost += (hi > lo ? hi - lo : 0) + 64;      /* + the per-row fixed work */
            }
            items[hk * nb + b] = (item_t){cost, hk, b * bm};
        }
    qsort(items, (size_t)n_items, sizeof(item_t), by_cost);
    int64_t total = 0;
    #pragma omp parallel num_threads(nthreads) reduction(+ : total)
    {
        char *mine = scratch + (int64_t)omp_get_thread_num() * scratch_per_thread;
#if HAVE_AMX
        if (amx) amx_config();      /* the tile configuration is per thread (other code may have changed it) */
#endif
        #pragma omp for schedule(dynamic, 1)
        for (int64_t x = 0; x < n_items; x++)
            total += item(&a, &items[x], bm, mine, rmax, out, oss, osh, lse, lsh, lss, ksh, vsh);
#if HAVE_AMX
        if (amx) _tile_release();
#endif
    }
    free(items);
    if (counted) *counted = total;
    return 0;
#else
    return 1;
#endif
}
"""

MAX_HEAD_DIM = 256
# ft_prefill_fwd's element kind of q / k / v / out (fp16 since session 64: the float32 kernel on widened values)
ELEMENT_KINDS = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
# The AMX build: the same source with FT_AMX, compiled with these on top of native.FLAGS
# (-march=native already implies them on AMX CPUs with a recent compiler; explicit, so an
# older compiler fails loudly here and the AVX-512 kernel runs, with a warning).
AMX_FLAGS = ("-mamx-tile", "-mamx-bf16")

_warned = False
_amx_warned = False
_local = threading.local()


def _open(path: str, amx: bool = False):
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise NativeUnavailable(f"loading the compiled prefill kernel failed: {e}") from e
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ft_prefill_fwd.argtypes = [ptr, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, i64,
                                   i64, i64, i64, i64, i64, i64, i64, i64, ctypes.c_float, i64, ptr, i64, ptr,
                                   ctypes.c_int, ctypes.c_int, ptr, ctypes.c_float]
    lib.ft_prefill_fwd.restype = ctypes.c_int
    lib.ft_prefill_scratch.argtypes = [i64, i64]
    lib.ft_prefill_scratch.restype = i64
    lib.ft_prefill_caps.argtypes = []
    lib.ft_prefill_caps.restype = ctypes.c_int
    lib.ft_amx_init.argtypes = []
    lib.ft_amx_init.restype = ctypes.c_int
    lib.amx = amx       # bf16 calls on this library run the AMX kernel (forward_sequence passes it)
    return lib


def _amx_init_error(rc: int) -> str:
    if rc == 1:
        return "the AMX build has no AMX kernel (the compiler defined no __AMX_TILE__ / __AMX_BF16__)"
    if rc == 2:
        return "CPUID reports no AMX-TILE / AMX-BF16"
    if rc == 3:
        return "arch_prctl(ARCH_GET_XCOMP_PERM) does not show XTILEDATA after the request"
    if rc >= 100:
        err = rc - 100
        return (f"arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed: errno {err} "
                f"({os.strerror(err)}; EINVAL: a kernel without AMX support, < 5.16)")
    return f"ft_amx_init returned {rc}"


def _open_amx(path: str):
    """The AMX build, after this process got the permission to use tile data."""
    lib = _open(path, amx=True)
    rc = lib.ft_amx_init()
    if rc != 0 or not lib.ft_prefill_caps() & 4:
        raise NativeUnavailable(f"the AMX forward kernel cannot run: {_amx_init_error(rc or 1)}")
    return lib


_library = native.LazyLibrary(lambda: _open(native._build(source=C_SOURCE, stem="prefill")))
_amx_library = native.LazyLibrary(lambda: _open_amx(native._build(("FT_AMX",), source=C_SOURCE, stem="prefill_amx",
                                                                  extra_flags=AMX_FLAGS)))


def load():
    """The loaded library (compiled on first use, then cached on disk); raises
    NativeUnavailable naming the cause."""
    return _library.get()


def load_variant(*defines: str):
    """A separately built copy with extra defines (tests: FT_NO_BF16 builds a library
    without the bf16 kernel, as on CPUs without AVX512-BF16; AKB=n the AMX build with
    n keys per softmax step, for sweeps: with FT_AMX it is an AMX build, permission
    requested)."""
    if "FT_AMX" in defines:
        return _open_amx(native._build(tuple(defines), source=C_SOURCE, stem="prefill_amx", extra_flags=AMX_FLAGS))
    return _open(native._build(tuple(defines), source=C_SOURCE, stem="prefill"))


@functools.lru_cache(maxsize=None)
def cpu_has_amx() -> bool:
    """Whether the CPU (and the kernel: Linux hides the flags it does not support)
    lists amx_tile and amx_bf16 in /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"amx_tile", "amx_bf16"} <= flags
    except OSError:
        pass
    return False


def load_amx():
    """The AMX build with the permission granted (compiled on first use, cached on
    disk); raises NativeUnavailable naming the cause: a CPU without AMX, a compile
    error, the permission refused."""
    if not cpu_has_amx():
        raise NativeUnavailable("this CPU has no AMX (amx_tile / amx_bf16 not in /proc/cpuinfo's flags)")
    return _amx_library.get()


def forward_path() -> str:
    return config.checked("FWD_PATH", "FLASHTRITON_CPU_FORWARD", config.FWD_PATHS)


def amx_mode() -> str:
    return config.checked("FWD_AMX", "FLASHTRITON_CPU_FORWARD_AMX", config.FWD_AMX_MODES)


def path_name(lib) -> str:
    """The forward path a library from library_for() runs: "compiled-amx", "compiled" or "ops"."""
    return "ops" if lib is None else ("compiled-amx" if lib.amx else "compiled")


def library_for(q, k, v, params, alibi, dropout: bool):
    """The library when this forward call runs compiled, else None (the torch-ops
    path of forward.py). Taken: bf16 (with AVX512-BF16) / float32 / fp16 (session 64: the
    float32 kernel on values widened where they are read, where the compiler has _Float16)
    q, k, v with unit stride in the head dim, an even head dim <= 256, no dropout; softcap
    and ALiBi for bf16 only (session 62), on the AVX-512 kernel, never the AMX one (whose
    softmax step has neither). float32 and fp16 with either keep the torch-ops loop: their
    backward is the torch-ops one, which recomputes the loop's scores exactly; after this kernel's (its
    own sum order, its double-precision tanh then) the float32 gradients at D = 256 missed the
    criterion in 4 of 72 draws against 0 of 72 (bench/NOTES.md, session 62).
    config.FWD_PATH "compiled" raises NativeUnavailable when the library cannot be
    built; "auto" warns once and returns None; "ops" returns None.
    bf16 then takes the AMX build (config.FWD_AMX, FLASHTRITON_CPU_FORWARD_AMX): "auto"
    when the CPU has AMX, the build succeeds and Linux grants the permission, else the
    AVX-512 kernel (one RuntimeWarning naming the cause when the CPU has AMX but the
    build or the permission failed; silently on CPUs without AMX); "on" raises
    NativeUnavailable instead of falling back; "off" never uses it. float32 never does."""
    global _warned, _amx_warned
    path = forward_path()
    amx = amx_mode()
    if path == "ops":
        return None
    d = q.shape[-1]
    if q.dtype not in ELEMENT_KINDS or k.dtype != q.dtype or v.dtype != q.dtype \
            or d % 2 or d > MAX_HEAD_DIM or dropout or min(q.stride(-1), k.stride(-1), v.stride(-1)) != 1 \
            or (q.dtype != torch.bfloat16 and (params.softcap > 0 or alibi is not None)):
        return None
    if q.dtype == torch.bfloat16 and amx != "off" and params.softcap == 0 and alibi is None:
        try:
            return load_amx()
        except NativeUnavailable as e:
            if amx == "on":
                raise
            if cpu_has_amx() and not _amx_warned:
                _amx_warned = True
                warnings.warn(f"flashtriton cpu: the AMX forward kernel is unavailable, using the AVX-512 one "
                              f"({e})", RuntimeWarning, stacklevel=3)
    try:
        lib = load()
    except NativeUnavailable as e:
        if path == "compiled":
            raise
        if not _warned:
            _warned = True
            warnings.warn(f"flashtriton cpu: the compiled forward kernel is unavailable, using torch ops "
                          f"({e})", RuntimeWarning, stacklevel=3)
        return None
    caps = lib.ft_prefill_caps()
    return lib if caps & {torch.bfloat16: 2, torch.float32: 1, torch.float16: 8}[q.dtype] else None


def _scratch(nbytes: int) -> torch.Tensor:
    """A reusable per-calling-thread byte buffer (a fresh multi-MiB allocation
    page-faults on first touch, ~20x a warm refill on the reference VM)."""
    buf = getattr(_local, "buf", None)
    if buf is None or buf.numel() < nbytes:
        buf = _local.buf = torch.empty(nbytes, dtype=torch.uint8)
    return buf


def forward_sequence(lib, seq, group: int, scale: float, left: int, right: int, bm: int, softcap: float = 0.0,
                     alibi=None) -> int:
    """The forward of one sequence (layout.Seq: q (n_q, H, D), k / v (n_k, Hk, D), out =
    seq.extra[0] like q, lse (H, n_q)), every head, written to out and lse. bm: query
    positions per work item. scale: q_scale's (softmax scale / softcap with softcap);
    alibi: the float32 slopes, (H,) or (B, H) (the row seq.index). Returns the number of
    scores the kernel computed (masked ones in its 8 x 32 blocks included; the tests check
    the causal skipping with it)."""
    q, k, v, out, lse = seq.q, seq.k, seq.v, seq.extra[0], seq.lse
    n_q, n_k, nheads_k, d = q.shape[0], k.shape[0], k.shape[1], q.shape[-1]
    if n_q == 0:
        return 0
    if min(t.stride(-1) for t in (q, k, v, out)) != 1:   # library_for checks q, k, v; out is made contiguous
        raise ValueError("the compiled forward needs unit-stride head dims")
    es = q.element_size()
    threads = torch.get_num_threads()
    per = lib.ft_prefill_scratch(d, bm * group)
    per = (per + 4095) // 4096 * 4096
    buf = _scratch(per * threads)
    counted = ctypes.c_int64(0)
    slopes = None if alibi is None else (alibi if alibi.dim() == 1 else alibi[seq.index])   # unit stride (validate)
    rc = lib.ft_prefill_fwd(
        q.data_ptr(), q.stride(0) * es, q.stride(1) * es, k.data_ptr(), k.stride(0) * es, k.stride(1) * es,
        v.data_ptr(), v.stride(0) * es, v.stride(1) * es, out.data_ptr(), out.stride(0) * es, out.stride(1) * es,
        lse.data_ptr(), lse.stride(0) * 4, lse.stride(1) * 4, n_q, n_k, nheads_k, group, d,
        ELEMENT_KINDS[q.dtype], left, right, scale, bm, buf.data_ptr(), per, ctypes.byref(counted), threads,
        int(lib.amx and q.dtype == torch.bfloat16), None if slopes is None else slopes.data_ptr(),
        softcap * LOG2E if softcap > 0 else 0.0)
    if rc != 0:
        raise RuntimeError(f"compiled forward kernel failed (code {rc}: 1 a problem it does not take, D={d}, "
                           f"dtype={q.dtype}; 4 out of memory; 5 AMX without the permission)")
    return counted.value
