"""A compiled kernel for the pieces of the causal / sliding-window forward that the
torch-ops loop of forward.py handles worst: the key tiles cut by the band's edges
(the causal diagonal), bench/NOTES.md "Session 5: causal (helper)".

Why: forward.py drives oneDNN products and vectorised torch ops over 512 x 1024
tiles; on the causal diagonal that loop computes the whole 512 x 512 square, masks
half of it, and pays a first-step max / rescale (~15 torch ops). This kernel computes
only the visible part of the edge pieces of one KV head (all its row blocks, work
split over OpenMP threads by row block) and returns the online-softmax state of every
row - running max m (log2 units), l = sum 2^(s - m), acc = sum 2^(s - m) v,
unnormalised - which forward._Block then continues with lazy steps over the fully
visible tiles and normalises. Nothing changes for a non-causal call (no edge pieces).

Kernel (C, AVX-512; built and cached exactly like the decode kernel of native.py):
per item (a row block [i0, i1) x its edge key segments), K of the segment is packed
as 32-key blocks transposed and V row-wise (bf16: key pairs interleaved), both in
per-thread scratch; then per tile of 64 rows (query position x group head) and 64
keys: S = (q . k) * scale on 8 x 32 register blocks, skipping 32-key blocks that no
row of the 8 sees; the online softmax per row over the visible lanes (vector exp2:
2^n * poly(f), n = round(x), degree 7); acc += P V on 4 rows x 64 columns of D in
registers. Precision: float32 inputs stay float32 (FMA); bf16 scores are
vdpbf16ps dot products (exact bf16 products, float32 sums), P is rounded to bf16
(as forward.py does for its bf16 P @ V) and P V is a vdpbf16ps product accumulated
in float32. Each row's result depends only on its own data and the fixed tile order,
not on the thread that runs it: bitwise repeatable.

Selection (config.FWD_EDGE_PATH, FLASHTRITON_CPU_PREFILL_EDGE): "auto" (default) runs
this kernel when it can be built and takes the problem, and otherwise the torch-ops
path (with one warning naming the cause when the build failed, e.g. no C compiler);
"compiled" raises NativeUnavailable instead; "ops" never uses it. Taken problems:
bf16 (needs AVX512-BF16) / float32 inputs, even head dim <= 256, no softcap, ALiBi or
dropout; everything else takes the torch-ops path (by feature).
"""
from __future__ import annotations

import ctypes
import threading
import warnings

import torch

from . import config, native
from .native import NativeUnavailable

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

#define RT 64       /* rows per row tile: its q, P and accumulators stay in L1 / L2 */
#define KT 64       /* keys per key tile (four score vectors per row) */
#define QR 8        /* rows of the score micro-kernel (x 32 keys: 16 accumulators) */
#define PR 4        /* rows of the P @ V micro-kernel (x up to 4 vectors of D) */
#define MAXD 256

/* 1 when the float32 / bf16 kernels are compiled in (AVX-512F; AVX512-BF16) */
int ft_prefill_caps(void) { return HAVE_F32 | (HAVE_BF16 << 1); }

static inline int64_t rup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* bytes of per-thread scratch for head dim d and at most max_keys keys per item */
int64_t ft_prefill_scratch(int64_t d, int64_t max_keys) {
    const int64_t dp = rup(d, 32), nk = rup(max_keys, 32) + 160;
    return 4 * (nk * dp          /* K^T blocks */
                + nk * dp        /* V */
                + RT * dp        /* q rows */
                + RT * dp        /* accumulators */
                + RT * KT        /* scores */
                + RT * KT)       /* P */
           + 4 * 256;
}

#if HAVE_F32
/* 2^x, 16 lanes: 2^n * 2^f, n = round(x), |f| <= 1/2, degree-7 polynomial for 2^f
   (relative error < 1e-7 before rounding). x < -125 gives 0 (x = -inf included);
   NaN stays NaN. Only called with x <= 0 (scores minus their row max) or NaN. */
static inline __m512 vexp2(__m512 x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.0f), _CMP_LT_OQ);
    x = _mm512_mask_mov_ps(x, tiny, _mm512_set1_ps(-125.0f));
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.525273380405984e-05f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.5403530393381606e-04f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618129107628477e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550410866482158e-02f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402265069591007e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931471805599453e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    const __m512 r = _mm512_scalef_ps(p, n);       /* p * 2^n, NaN propagates */
    return _mm512_maskz_mov_ps((__mmask16)~tiny, r);
}

typedef struct {
    const char *q, *k, *v;      /* q: (n_q, H, D) at head h0; k, v: (n_k, Hk, D) at head hk */
    int64_t qss, qsh, ks, vs;   /* byte strides: q position, q head; k / v position */
    int64_t n_q, n_k, off, left, right, G, D, bf16;
    float scale;                /* softmax scale * log2(e): multiplies q . k */
    float *m, *l, *acc;         /* (n_q * G) / (n_q * G) / (n_q * G, D): row i * G + g */
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
   times garbage could be NaN. */
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
    const int64_t es = a->bf16 ? 2 : 4, W = D * es / 4;     /* 32-bit words per row */
    /* K^T blocks: words of 32 keys side by side (bf16: a word is a pair of d) */
    uint32_t *k32 = (uint32_t *)kp;
    for (int64_t b = 0; b < nb; b++) {
        uint32_t *blk = k32 + b * W * 32;
        for (int64_t t0 = 0; t0 < 32; t0 += 16) {
            const uint32_t *rows[16];
            for (int t = 0; t < 16; t++) {
                const int64_t j = b * 32 + t0 + t;
                rows[t] = j < n ? (const uint32_t *)(a->k + (s0 + j) * a->ks) : 0;
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
        const int64_t np = (n + 1) / 2 + 1;
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
                memcpy(dst, a->v + (s0 + j) * a->vs, (size_t)D * 4);
                for (int64_t d = D; d < DP; d++) dst[d] = 0.0f;
            } else {
                memset(dst, 0, (size_t)DP * 4);
            }
        }
    }
}

/* S[r][0..32) = scale * (q[r] . k[j]) for QR rows and one block of 32 keys */
static inline __attribute__((always_inline)) void qk_f32(const float *Q, int64_t DP, const float *kb, int64_t D,
                                                        float scale, float *S) {
    __m512 c0[QR], c1[QR];
    for (int r = 0; r < QR; r++) { c0[r] = _mm512_setzero_ps(); c1[r] = _mm512_setzero_ps(); }
    for (int64_t d = 0; d < D; d++) {
        const __m512 k0 = _mm512_loadu_ps(kb + d * 32), k1 = _mm512_loadu_ps(kb + d * 32 + 16);
        for (int r = 0; r < QR; r++) {
            const __m512 x = _mm512_set1_ps(Q[r * DP + d]);
            c0[r] = _mm512_fmadd_ps(x, k0, c0[r]);
            c1[r] = _mm512_fmadd_ps(x, k1, c1[r]);
        }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r = 0; r < QR; r++) {
        _mm512_storeu_ps(S + r * KT, _mm512_mul_ps(c0[r], sc));
        _mm512_storeu_ps(S + r * KT + 16, _mm512_mul_ps(c1[r], sc));
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
                 const int64_t *rhi, int64_t DP) {
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
                qk_f32((const float *)Q + g0 * DP, DP, kp + blk * D * 32, D, a->scale, S + g0 * KT + b);
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

/* One item: queries [i0, i1) (rows i * G + g), key segments [sa0, sa1) then [sb0, sb1). */
static int64_t item(const args_t *a, const int64_t *it, char *scratch, int64_t max_keys) {
    const int64_t i0 = it[0], i1 = it[1], G = a->G, D = a->D;
    const int64_t DP = rup(D, 32), nk = rup(max_keys, 32) + 160;
    float *kp = (float *)scratch, *vp = kp + nk * DP, *Q = vp + nk * DP, *O = Q + RT * DP, *S = O + RT * DP;
    void *Pbuf = S + RT * KT;
    const int64_t rows = (i1 - i0) * G;
    int64_t rlo[RT], rhi[RT];
    float m[RT], l[RT];
    int64_t kofs = 0, counted = 0;
    /* both segments packed one after the other (each from a 32-key block boundary) */
    const int64_t nseg = 2;
    float *kps[2], *vps[2];
    for (int64_t sgi = 0; sgi < nseg; sgi++) {
        const int64_t s0 = it[2 + 2 * sgi], s1 = it[3 + 2 * sgi];
        kps[sgi] = kp + kofs * DP;
        vps[sgi] = vp + kofs * DP;
        if (s0 < s1) {
            pack(a, s0, s1, kps[sgi], vps[sgi], DP);
            kofs += rup(s1 - s0, 32) + 32;
        }
    }
    for (int64_t r0 = 0; r0 < rows; r0 += RT) {
        const int64_t nr = rows - r0 < RT ? rows - r0 : RT;
        const int64_t nrp = rup(nr, QR);
        for (int64_t r = 0; r < nrp; r++) {
            m[r] = -INFINITY; l[r] = 0.0f;
            memset(O + r * DP, 0, (size_t)DP * 4);
            if (r < nr) {
                const int64_t row = i0 * G + r0 + r, i = row / G, g = row % G;
                vis(a, i, &rlo[r], &rhi[r]);
                const char *src = a->q + i * a->qss + g * a->qsh;
                if (a->bf16) {
                    memcpy((uint16_t *)Q + r * DP, src, (size_t)D * 2);
                    memset((uint16_t *)Q + r * DP + D, 0, (size_t)(DP - D) * 2);
                } else {
                    memcpy(Q + r * DP, src, (size_t)D * 4);
                    memset(Q + r * DP + D, 0, (size_t)(DP - D) * 4);
                }
            } else {
                rlo[r] = rhi[r] = 0;
                if (a->bf16) memset((uint16_t *)Q + r * DP, 0, (size_t)DP * 2);
                else memset(Q + r * DP, 0, (size_t)DP * 4);
            }
        }
        for (int64_t sgi = 0; sgi < nseg; sgi++) {
            const int64_t s0 = it[2 + 2 * sgi], s1 = it[3 + 2 * sgi];
            if (s0 < s1) counted += tile(a, r0, nr, s0, s1, kps[sgi], vps[sgi], Q, O, S, Pbuf, m, l, rlo, rhi, DP);
        }
        for (int64_t r = 0; r < nr; r++) {
            const int64_t row = i0 * G + r0 + r;
            a->m[row] = m[r] > -1e38f ? m[r] : -1e38f;    /* forward.M_FLOOR: a row without keys */
            a->l[row] = l[r];
            memcpy(a->acc + row * D, O + r * DP, (size_t)D * 4);
        }
    }
    return counted;
}
#endif

/* The diagonal pieces of one KV head: items (n_items, 6) int64 = (i0, i1, sa0, sa1,
   sb0, sb1), each over every head of the group. Writes m, l, acc of rows i * G + g
   for i in [i0, i1) (the state of forward._Block: log2-unit max, sum of exp2(s - m),
   unnormalised P @ V). counted (may be NULL): the number of scores computed, masked
   ones included. Returns 0; 1 for a problem it does not take. */
int ft_prefill_diag(const char *q, int64_t qss, int64_t qsh, const char *k, int64_t ks, const char *v, int64_t vs,
                    int64_t n_q, int64_t n_k, int64_t left, int64_t right, int64_t G, int64_t D, int64_t bf16,
                    float scale, const int64_t *items, int64_t n_items, int64_t max_keys, char *scratch,
                    int64_t scratch_per_thread, float *m, float *l, float *acc, int64_t *counted,
                    int nthreads) {
#if HAVE_F32
    if (D <= 0 || D > MAXD || (bf16 && (D % 2 || !HAVE_BF16))) return 1;
    if (scratch_per_thread < ft_prefill_scratch(D, max_keys)) return 1;
    args_t a = {q, k, v, qss, qsh, ks, vs, n_q, n_k, n_k - n_q, left, right, G, D, bf16, scale, m, l, acc};
    int64_t total = 0;
    #pragma omp parallel num_threads(nthreads) reduction(+ : total)
    {
        char *mine = scratch + (int64_t)omp_get_thread_num() * scratch_per_thread;
        #pragma omp for schedule(dynamic, 1)
        for (int64_t x = 0; x < n_items; x++) total += item(&a, items + 6 * x, mine, max_keys);
    }
    if (counted) *counted = total;
    return 0;
#else
    return 1;
#endif
}
"""

MAX_HEAD_DIM = 256
ITEM_FIELDS = 6          # (i0, i1, sa0, sa1, sb0, sb1) per item

_lock = threading.Lock()
_lib = None
_error: str | None = None
_warned = False
_local = threading.local()


def _open(path: str):
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise NativeUnavailable(f"loading the compiled prefill kernel failed: {e}") from e
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ft_prefill_diag.argtypes = [ptr, i64, i64, ptr, i64, ptr, i64, i64, i64, i64, i64, i64, i64, i64,
                                    ctypes.c_float, ptr, i64, i64, ptr, i64, ptr, ptr, ptr, ptr, ctypes.c_int]
    lib.ft_prefill_diag.restype = ctypes.c_int
    lib.ft_prefill_scratch.argtypes = [i64, i64]
    lib.ft_prefill_scratch.restype = i64
    lib.ft_prefill_caps.argtypes = []
    lib.ft_prefill_caps.restype = ctypes.c_int
    return lib


def load():
    """The loaded library (compiled on first use, then cached on disk); raises
    NativeUnavailable naming the cause."""
    global _lib, _error
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            if _error is not None:
                raise NativeUnavailable(_error)
            try:
                _lib = _open(native._build(source=C_SOURCE, stem="prefill"))
            except NativeUnavailable as e:
                _error = str(e)
                raise
    return _lib


def load_variant(*defines: str):
    """A separately built copy with extra defines (tests: FT_NO_BF16 builds a library
    without the bf16 kernel, as on CPUs without AVX512-BF16)."""
    return _open(native._build(tuple(defines), source=C_SOURCE, stem="prefill"))


def edge_path() -> str:
    p = config.FWD_EDGE_PATH
    if p not in config.FWD_EDGE_PATHS:
        raise ValueError(f"FLASHTRITON_CPU_PREFILL_EDGE / config.FWD_EDGE_PATH must be one of "
                         f"{config.FWD_EDGE_PATHS}, got {p!r}")
    return p


def library_for(dtype: torch.dtype, head_dim: int, params, alibi, dropout: bool):
    """The library when the edge pieces of this problem run compiled, else None (the
    torch-ops path). "compiled" raises NativeUnavailable when the library cannot be
    built; "auto" warns once and returns None."""
    global _warned
    path = edge_path()
    if path == "ops":
        return None
    if dtype not in (torch.bfloat16, torch.float32) or head_dim % 2 or head_dim > MAX_HEAD_DIM \
            or params.softcap > 0 or alibi is not None or dropout:
        return None
    try:
        lib = load()
    except NativeUnavailable as e:
        if path == "compiled":
            raise
        if not _warned:
            _warned = True
            warnings.warn(f"flashtriton cpu: the compiled causal-edge kernel is unavailable, using torch ops "
                          f"({e})", RuntimeWarning, stacklevel=3)
        return None
    caps = lib.ft_prefill_caps()
    return lib if caps & (2 if dtype == torch.bfloat16 else 1) else None


def _scratch(nbytes: int) -> torch.Tensor:
    """A reusable per-calling-thread byte buffer (a fresh multi-MiB allocation
    page-faults on first touch, ~20x a warm refill on the reference VM)."""
    buf = getattr(_local, "buf", None)
    if buf is None or buf.numel() < nbytes:
        buf = _local.buf = torch.empty(nbytes, dtype=torch.uint8)
    return buf


def edge_state(lib, seq, hk: int, group: int, scale: float, left: int, right: int, items: list,
               m: torch.Tensor, l_: torch.Tensor, acc: torch.Tensor) -> int:
    """Runs the kernel on `items` [(i0, i1, sa0, sa1, sb0, sb1), ...] of KV head hk of
    sequence `seq` (layout.Seq); writes m, l (n_q * G, 1) and acc (n_q * G, D) float32
    at rows i * G + g of every item's queries. Returns the number of scores the kernel
    computed (masked ones in its 8 x 32 blocks included)."""
    q, k, v = seq.q, seq.k, seq.v
    n_q, n_k, d = q.shape[0], k.shape[0], q.shape[-1]
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        raise ValueError("the compiled edge kernel needs unit-stride head dims")
    es = q.element_size()
    flat = [x for it in items for x in it]
    arr = (ctypes.c_int64 * len(flat))(*flat)
    max_keys = max(it[3] - it[2] + it[5] - it[4] for it in items)
    threads = torch.get_num_threads()
    per = lib.ft_prefill_scratch(d, max_keys)
    per = (per + 4095) // 4096 * 4096
    buf = _scratch(per * threads)
    counted = ctypes.c_int64(0)
    rc = lib.ft_prefill_diag(
        q.data_ptr() + hk * group * q.stride(1) * es, q.stride(0) * es, q.stride(1) * es,
        k.data_ptr() + hk * k.stride(1) * es, k.stride(0) * es, v.data_ptr() + hk * v.stride(1) * es,
        v.stride(0) * es, n_q, n_k, left, right, group, d, int(q.dtype == torch.bfloat16), scale, arr, len(items),
        max_keys, buf.data_ptr(), per, m.data_ptr(), l_.data_ptr(), acc.data_ptr(), ctypes.byref(counted), threads)
    if rc != 0:
        raise RuntimeError(f"compiled prefill edge kernel refused the problem (code {rc}, D={d}, dtype={q.dtype})")
    return counted.value
