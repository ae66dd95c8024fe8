"""A compiled decode kernel: split-KV attention of a few query rows over a KV cache,
read once, in one streaming pass (bench/NOTES.md, "Session 4: CPU decode (helper)").

Why C and not torch ops: decoding is a pair of skinny products (M = G = 4 query rows
per KV head) over the whole cache. Every torch formulation measured runs them at
~9-16 GB/s per core (MKL / oneDNN GEMV, bmm, block-diagonal linear, grouped conv,
torch.compile'd reductions: inductor's C++ code for P @ V is one accumulator chain
per (row, 32 columns), latency-bound, ~4.2 ms for the 67 MB of V at L = 32k bf16),
against 36-65 GB/s of read bandwidth measured on the 2-core reference VM. This
kernel reads each cache row once, keeps the softmax state of all query rows of a KV
head in registers / L1, and fuses scores, online softmax and P @ V, so the cache is
the only memory stream.

The C source below is compiled on first use by the system C compiler (`$CC`, else
`cc` / `gcc`) with `-O3 -march=native -fopenmp` (~2.5 s), into a per-user cache
directory keyed by the source, the flags, the compiler and the CPU
(`FLASHTRITON_CACHE_DIR`, default `$XDG_CACHE_HOME/flashtriton` or
`~/.cache/flashtriton`); later processes load the cached library (~3 ms). It runs on
OpenMP with `torch.get_num_threads()` threads: the library asks for libgomp.so.1,
which resolves to the libgomp torch's wheel already loaded (same soname: one thread
pool, checked in /proc/self/maps; a torch built on another OpenMP runtime would get
a second pool).

No silent fallback: `load()` raises NativeUnavailable naming the cause (no
compiler, a compile error); decode.py lets it propagate unless the user selected
the torch-ops path (FLASHTRITON_CPU_DECODE=ops, or config.DECODE_PATH = "ops").

Math (scores in log2 units: the float32 dot products q . k are multiplied by
softmax_scale * log2(e)). The keys [lo_b, hi_b) that some query row of sequence b
sees are cut into `splits` contiguous pieces; a work item is one (sequence, piece),
all KV heads, so each item reads one contiguous stretch of cache rows. Per block of
T = 16 keys: the block's K and V rows are first read in address order (the "touch",
see item(); float32 caches on the AVX-512 step: only an item's first block, the next
block's lines are prefetched into L2 while a block computes, pf_step; bf16 there: the
same, in two phases, scores while the block's V is prefetched, then softmax and P @ V
while the next block's K is), then per KV
head h, for the R = Sq * G rows r (padded to 4):

    s[r, t]  = (q[r] . K[t, h]) * scale    float32 sums of exact products (bf16 inputs:
                                           vdpbf16ps with AVX512-BF16, else float32 FMAs)
    s[r, t]  = c tanh(s[r, t] / c)         with softcap c (the tanh in double precision)
    s[r, t] -= slope_h |max(i + n - Sq, 0) - t|    with ALiBi (C_SCORE_FEATURES; session 62; the anchor
                                           max(., 0) and the lse moved back: session 68, alibi_anchor.py)
    s[r, t]  = -inf where key t is outside row r's range [rlo_i, rhi_i)  (i = r / G)
    m'       = max(m, max_t s[r, t]),  alpha = 2^(m - m'),  p = 2^(s - m')
    l        = alpha l + sum_t p,       acc = alpha acc + sum_t p[r, t] V[t, h]
                                           (float32 p, l and accumulators; bf16 caches
                                           with AVX512-BF16: the products p V take p
                                           rounded to bf16, vdpbf16ps on key pairs,
                                           as the prefill kernel and flash-attn do)

and at the end the pieces of a sequence are merged by logsumexp, in piece order:
M = max m_s, L = sum 2^(m_s - M) l_s, out = sum 2^(m_s - M) acc_s / L,
lse = (M + log2 L) ln 2; a row with no key gets out = 0, lse = +inf. The result
does not depend on the thread count (pieces are fixed by `splits`, merged in order).

Code paths: with AVX-512 (-march=native), float32 caches and bf16 caches with
AVX512-BF16 take head_blk() (intrinsics); the rest (bf16 without AVX512-BF16, CPUs
without AVX-512) the portable GCC-vector-extension step. Tests build the latter here
with FT_NO_BLK512 / FT_NO_DPBF16 (load_variant). Measurements: bench/NOTES.md,
"Session 5: CPU decode (helper)".

AMX (bf16 caches, bench/wip/cpu-decode-amx.md): a second build of this source (FT_AMX,
-mamx-tile -mamx-bf16; load_amx) runs each (block, KV head) on tiles instead (head_amx):
the scores as S^T = K q^T (A = 16 keys x 32 d of K loaded straight from the cache with
its position stride, B = q^T of a 4-row group), P V as two 4-row products per 16 keys x
32 columns with V also loaded straight from the cache (its column pairs as the B
operand; A = (p, 0) or (0, p) pairs gives the even or odd columns), so neither K nor V
is repacked; the online softmax stays head_blk's. Same precision (exact bf16 products,
p rounded to bf16, float32 sums in another order) and the same guarantees (thread-count
independent, bitwise repeatable). The process asks Linux for the tile-data permission
through native_prefill's ft_amx_init (one helper for both kernels); each OpenMP thread
loads the tile configuration at the start of the parallel region and releases it at
the end. decode.compiled_library() selects it (config.DECODE_AMX); the bench's path
column says "compiled-amx".
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time

import torch


class NativeUnavailable(RuntimeError):
    """The compiled decode kernel cannot be built or loaded (the message says why)."""


# The score transforms the decode kernel (below) and the prefill kernel (native_prefill.py) share: softcap and
# ALiBi on 16 float32 scores in log2 units (session 62; before, both features took the torch-ops paths).
C_SCORE_FEATURES = r"""
/* Softcap, 16 lanes: tanh(x) * c, tanh in double precision (its one rounding is the float32 result's), so the
   capped scores of float32 inputs are as exact as PyTorch's float32 tanh. tanh |x| = (1 - t) / (1 + t), t = e^-2|x|
   (no cancellation that matters in double: at |x| = 1e-4 the quotient keeps ~12 digits), |x| < 1e-4 gives x
   (tanh x = x (1 - x^2 / 3), within half an ulp of float32); t by 2^n e^r, |r| <= ln 2 / 2, r's Taylor series to
   r^12 (truncation < 2e-15); |x| > 20 gives t = e^-40 (tanh = 1 in float32). NaN stays NaN, +-inf gives +-1. */
typedef float vf __attribute__((vector_size(64)));
typedef uint32_t vu __attribute__((vector_size(64)));
typedef double vd __attribute__((vector_size(64)));
typedef int64_t vl __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));
static const double EXP_TAYLOR[13] = {   /* 1 / k!, k = 12 .. 0 */
    2.08767569878680989792e-9, 2.50521083854417187751e-8, 2.75573192239858906526e-7, 2.75573192239858906526e-6,
    2.48015873015873015873e-5, 1.98412698412698412698e-4, 1.38888888888888888889e-3, 8.33333333333333333333e-3,
    4.16666666666666666667e-2, 1.66666666666666666667e-1, 0.5, 1.0, 1.0};
static inline vd tanh_d(vd x) {
    const vl sign = (vl)x & (int64_t)0x8000000000000000ull;
    const vd ax = (vd)((vl)x & (int64_t)0x7fffffffffffffffull);
    vd y = -2.0 * ax;
    const vl keep = (y >= -40.0) | (y != y);                                  /* max(y, -40), NaN kept */
    y = (vd)(((vl)y & keep) | ((vl)((vd){0} - 40.0) & ~keep));
    const vd sh = (vd){0} + 6755399441055744.0;       /* 1.5 * 2^52: round to nearest */
    const vd n = (y * 1.4426950408889634 + sh) - sh;
    vd r = y - n * 0.6931471805599453;
    r = r - n * 2.3190468138462996e-17;               /* ln 2 = 0.6931471805599453 + 2.319e-17 */
    vd p = (vd){0} + EXP_TAYLOR[0];
    for (int i = 1; i < 13; i++) p = p * r + EXP_TAYLOR[i];
    const vd t = (vd)((vl)p + __builtin_convertvector(n, vl) * 4503599627370496);   /* p 2^n: n into the exponent */
    const vd th = (1.0 - t) / (1.0 + t);
    const vl small = ax < 1e-4;
    return (vd)(((vl)((vl)th & ~small) | ((vl)ax & small)) | sign);
}
static inline vf softcap_f(vf x, float c) {
    vf8 lo, hi;
    memcpy(&lo, &x, 32);
    memcpy(&hi, (const char *)&x + 32, 32);
    lo = __builtin_convertvector(tanh_d(__builtin_convertvector(lo, vd)), vf8);
    hi = __builtin_convertvector(tanh_d(__builtin_convertvector(hi, vd)), vf8);
    vf r;
    memcpy(&r, &lo, 32);
    memcpy((char *)&r + 32, &hi, 32);
    return r * c;
}

/* ALiBi on one score vector (log2 units) of a row: lane t is key k0 + t; the bias -slope |diag - key| (flash-attn's;
   diag = the key the row's query sits at, i + n_k - n_q, or 0 for a row before every key: item()'s anchor) in log2
   units, added by one FMA. Positions are exact in float32 (< 2^24 keys). */
static inline vf alibi_bias(vf s, float slope, float diag, int64_t k0) {
    const vf lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const vf dist = (vf){0} + diag - ((vf){0} + (float)k0 + lane);
    const vf ad = (vf)((vu)dist & 0x7fffffffu);          /* |dist| */
    return s + ((vf){0} + slope * -1.4426950408889634f) * ad;
}
"""


C_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef FT_TRACE
#include <omp.h>
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__AVX512BF16__) && defined(__AVX512F__) && !defined(FT_NO_DPBF16)
#define DPBF16 1      /* bf16 scores with vdpbf16ps (AVX512-BF16): q and K stay bf16 */
#else
#define DPBF16 0
#endif

/* GCC / clang vector extensions: 16 float32 lanes (one AVX-512 register; two AVX2
   registers elsewhere). Unaligned loads / stores go through memcpy. */
typedef float vf __attribute__((vector_size(64)));
typedef uint32_t vu __attribute__((vector_size(64)));
#define VL 16
#define T 16        /* keys per score vector; a block is T * NS keys (item below), whose
                       K and V rows (bf16: 256 KiB at NS = 4, Hk = 8, D = 128) stay in L2
                       from the touch to their use */
#define RG 4        /* query rows per register group */
#ifndef NSUB_BF16
#define NSUB_BF16 4 /* bf16 (vdpbf16ps): score vectors (of T keys) per online-softmax step of
                       head_blk, so one max, one rescale and one sum per 64 keys and the
                       P @ V accumulators loaded and stored once per 64 keys. One binary,
                       NS switched at run time, 8 alternations (bench/NOTES.md, "Session
                       14"): 8k -10% after a 128 MB flush, -13% after SDPA, -16% from L3 */
#endif
#ifndef NSUB_F32
#define NSUB_F32 1  /* float32: 2 and 4 measured level / +15% after a flush and +4% / +9%
                       after SDPA (its 64-key block, 512 KiB, is twice bf16's) */
#endif
#define NSUB_MAX 4
#ifndef PF_TOUCH
#define PF_TOUCH 0    /* 1: touch every block even when the previous one prefetched it (measurement knob) */
#endif
#ifndef PF_BF16
#define PF_BF16 1     /* bf16 caches prefetch too (session 43: with PF_SPLIT; 0: touch every block) */
#endif
#ifndef NSUB_AMX
#define NSUB_AMX 8  /* bf16 on AMX (head_amx): groups of 16 keys per block and online-softmax step
                       (8: 128 keys, 512 KiB of K and V at Hk = 8, D = 128). 8 vs 4, L = 8k,
                       interleaved after SDPA (41 rounds, twice): 1040 / 1047 vs 1189 / 1187 us
                       medians; the bench, alternating builds: 1057 / 959 vs 1285 / 1137 us;
                       32k level within the host's noise (bench/wip/cpu-decode-amx.md) */
#endif
#define KP_MAX (NSUB_AMX > NSUB_MAX ? NSUB_AMX : NSUB_MAX)   /* groups of 16 keys per block, any step */
#ifndef PF_DIST_BF16
#define PF_DIST_BF16 1  /* bf16 with PF_BF16: blocks ahead the prefetch reads (measurement knob, session 43) */
#endif
#ifndef PF_SPLIT
#define PF_SPLIT 1      /* bf16 with PF_BF16: K phase then V phase per block (item(); 0: one pass, the next block
                           prefetched as float32 does) */
#endif
#ifndef SPLIT_TOUCH_K
#define SPLIT_TOUCH_K 0   /* measurement knob (session 43): see the touch in item() */
#endif
#define SPLIT_ROWS 64   /* PF_SPLIT: Hk * R at most (the scores of a block, 64 x 4 vectors, on the stack) */
#define PF_RING (PF_DIST_BF16 > 1 ? PF_DIST_BF16 + 1 : 2)   /* pointer arrays item() keeps: blocks j .. j + PFD */
#define MAXR 256    /* rows per KV head the kernel takes (Python checks) */

static inline vf ld_f32(const void *p) { vf v; memcpy(&v, p, sizeof v); return v; }
/* bf16 -> float32 is exact: a bf16 is the high half of a float32. 32 bf16 values
   loaded as 16 32-bit words give two float32 vectors, the even elements (word << 16)
   and the odd ones (word & 0xffff0000): 3 ops, where a widening convert of 16 values
   took 5 (GCC splits it into 256-bit halves). Rows of 32 elements are thus read
   permuted as [0, 2, .., 30, 1, 3, .., 31]: q comes in that order (decode.py; on
   CPUs without AVX512-BF16, else the scores take vdpbf16ps on bf16 q), and the PV
   accumulators come out in it (decode.py undoes it). */
static inline void ld_bf16x2(const void *p, vf *ev, vf *od) {
    vu w; memcpy(&w, p, sizeof w);
    vu e = w << 16, o = w & 0xffff0000u;
    memcpy(ev, &e, sizeof e); memcpy(od, &o, sizeof o);
}
/* The first n elements (a row's partial last 32-column group, session 64), the rest taken as 0 */
static inline void ld_bf16x2_n(const void *p, const int n, vf *ev, vf *od) {
    if (n == 32) { ld_bf16x2(p, ev, od); return; }
    uint16_t h[32] = {0};
    memcpy(h, p, (size_t)n * 2);
    ld_bf16x2(h, ev, od);
}
/* fp16 caches (session 63): 16 fp16 elements widened to float32 (exact: fp16 x fp16 products are exact in
   float32, so FMAs on the widened values are an fp16 matmul with float32 accumulation). vcvtph2ps with AVX-512;
   GCC 12 scalarises the generic vector conversion anyway, so the portable step converts element by element.
   HAVE_F16: the compiler has _Float16 (decode.py takes fp16 caches only then, ft_f16; FT_NO_F16 builds without,
   for the tests). */
#if defined(__FLT16_MAX__) && !defined(FT_NO_F16)
#define HAVE_F16 1
static inline vf ld_f16(const void *p) {
#if defined(__AVX512F__)
    const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    vf v; memcpy(&v, &x, sizeof v); return v;
#else
    _Float16 h[16]; memcpy(h, p, sizeof h);
    vf v; for (int i = 0; i < 16; i++) v[i] = (float)h[i];
    return v;
#endif
}
#else
#define HAVE_F16 0
static inline vf ld_f16(const void *p) { (void)p; return (vf){0}; }   /* never called: ft_f16() is 0 */
#endif
static inline void st_f32(float *p, vf v) { memcpy(p, &v, sizeof v); }
/* The first n elements of 16 (a row's partial last vector, session 64), the rest 0 */
static inline vf ld_f32_n(const void *p, const int n) {
    if (n == 16) return ld_f32(p);
    float x[16] = {0};
    memcpy(x, p, (size_t)n * 4);
    return ld_f32(x);
}
static inline vf ld_f16_n(const void *p, const int n) {
    if (n == 16) return ld_f16(p);
    uint16_t x[16] = {0};
    memcpy(x, p, (size_t)n * 2);
    return ld_f16(x);
}
static inline float bf16_to_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t f32_to_bf16(float f) {       /* round to nearest even, NaN stays NaN */
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* where element d of a row sits in the [even, odd] order of its 32-column group */
static inline int64_t eo(int64_t d) { return (d & ~31) + (d & 1) * 16 + ((d & 31) >> 1); }

typedef int32_t vi __attribute__((vector_size(64)));
#ifdef __clang__
#define SHUF2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#define SHUF1(a, ...) __builtin_shufflevector(a, a, __VA_ARGS__)
#else
#define SHUF2(a, b, ...) __builtin_shuffle(a, b, (vi){__VA_ARGS__})
#define SHUF1(a, ...) __builtin_shuffle(a, (vi){__VA_ARGS__})
#endif
static inline vf vsel(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }
static inline vf vmax(vf a, vf b) { return vsel(a > b, a, b); }
static inline float hsum(vf v) {
    v += SHUF1(v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    v += SHUF1(v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    v += SHUF1(v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    v += SHUF1(v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    return v[0];
}
static inline float hmax(vf v) {
    v = vmax(v, SHUF1(v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
    v = vmax(v, SHUF1(v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
    v = vmax(v, SHUF1(v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
    v = vmax(v, SHUF1(v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
    return v[0];
}

/* 16 vectors P[i] -> one vector whose lane l is the lane sum of P[bitrev4(l)]: a
   transpose-and-add tree (15 two-source shuffle pairs) instead of 16 separate
   horizontal sums. Each level halves the lane block that belongs to one input. */
static inline vf c16(vf a, vf b) { return SHUF2(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23)
                                        + SHUF2(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31); }
static inline vf c8(vf a, vf b) { return SHUF2(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27)
                                       + SHUF2(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31); }
static inline vf c4(vf a, vf b) { return SHUF2(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29)
                                       + SHUF2(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31); }
static inline vf c2(vf a, vf b) { return SHUF2(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30)
                                       + SHUF2(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31); }
/* reduce16's levels after the first, from w[i] = c16(P[2 i], P[2 i + 1]) */
static inline vf reduce16_w(const vf *w) {
    vf x[4];
    for (int i = 0; i < 4; i++) x[i] = c8(w[2 * i], w[2 * i + 1]);
    return c2(c4(x[0], x[1]), c4(x[2], x[3]));
}
static inline vf reduce16(const vf *P) {
    vf w[8];
    for (int i = 0; i < 8; i++) w[i] = c16(P[2 * i], P[2 * i + 1]);
    return reduce16_w(w);
}
static const int BITREV4[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};

/* 2^x for x <= 0 (softmax arguments), 16 lanes: 2^n * 2^f, n = round(x), |f| <= 1/2,
   2^f by its degree-7 Taylor polynomial (truncation < 6e-9 relative, under 0.1 ulp;
   about 1 ulp with the rounding of the Horner steps, like torch's exp2). x < -125
   (p < 3e-38, nothing next to the row max 2^0) gives 0. */
static inline vf vexp2(vf x) {
    const vi tiny = x < -125.0f;
    x = vsel(tiny, (vf){0} - 125.0f, x);
    const vf magic = (vf){0} + 12582912.0f;          /* 1.5 * 2^23: round to nearest */
    vf n = (x + magic) - magic;
    vf f = x - n;
    vf p = (vf){0} + 1.525273380405984e-05f;
    p = p * f + 1.5403530393381606e-04f;
    p = p * f + 1.3333558146428443e-03f;
    p = p * f + 9.618129107628477e-03f;
    p = p * f + 5.550410866482158e-02f;
    p = p * f + 2.402265069591007e-01f;
    p = p * f + 6.931471805599453e-01f;
    p = p * f + 1.0f;
    vi e = __builtin_convertvector(n, vi) << 23;
    return (vf)(((vi)p + e) & ~tiny);
}

typedef struct {
    const char *k, *v;          /* cache bases */
    int64_t sb, sp, sh;         /* byte strides: cache row (or page), position, head */
    int64_t page;               /* 0: contiguous rows; else positions per page */
    const int32_t *table;       /* (B, table_stride) page indices, when paged */
    int64_t table_stride;
    const int64_t *row;         /* (B,) cache row of each sequence (contiguous) */
    const int64_t *start;       /* (B,) cache position of key 0 of each sequence */
    const int64_t *rlo, *rhi;   /* (B, Sq) keys [rlo, rhi) query i sees */
    const int64_t *klo, *khi;   /* (B,) keys some query sees */
    const char *q;              /* (B, Sq, H, D) as given (the cache's dtype), byte strides: */
    int64_t qsb, qss, qsh;
    float qscale;               /* softmax scale * log2(e): multiplies the float32 dot products */
    int64_t B, Hk, Sq, G, R, D, splits, ek;     /* R: rows per KV head, padded to RG; ek: 0 float32, 1 bf16, 2 fp16 */
    int64_t DS;                 /* D rounded up to 32: the q buffer's and the state's row width (columns D .. DS
                                   zero). Since session 64 D is any multiple of 8: a row's last vector (float32 /
                                   fp16: 16 columns; bf16: a 32-column group) may be partial, its loads masked: */
    uint32_t tm16, tm32;        /* the columns of that last vector: 16-lane (float32 / fp16), 32-lane (bf16) masks */
    int64_t amx;                /* bf16 on AMX tiles (head_amx; AMXD builds only) */
    float *work;                /* (B, splits, Hk, R, DS + 16): acc, m, l (14 floats of padding:
                                   64-byte aligned rows) per item */
    const float *alibi;         /* ALiBi slopes (natural units) of sequence b's heads at alibi + b * alibi_bs
                                   (alibi_bs 0: one (H,) vector for all); 0: no ALiBi */
    int64_t alibi_bs;
    const int64_t *nk;          /* (B,) keys of each sequence (its query i sits at key i + nk - Sq); read with alibi */
    float softcap2;             /* softcap * log2(e); 0: no softcap (else qscale is softmax_scale / softcap) */
} args_t;

""" + C_SCORE_FEATURES + r"""
static inline const char *row_ptr(const args_t *a, const char *base, int64_t b, int64_t pos) {
    if (a->page == 0) return base + a->row[b] * a->sb + pos * a->sp;
    int64_t pg = a->table[b * a->table_stride + pos / a->page];
    return base + pg * a->sb + (pos % a->page) * a->sp;
}

/* acc[r + g] += sum_t p[r + g, t] V[t, h] for vectors c0 .. c0 + NC - 1 of the rows:
   RG x NC accumulators in registers while the block's V rows stream through */
static inline __attribute__((always_inline)) void pv_group(const args_t *a, const char *const *vp, int nt,
                                                          int64_t h, const vf *S, float *x0, int64_t W,
                                                          int c0, const int NC, const int BF16, const int H16,
                                                          const int ND, const int NL) {
    vf acc[RG][4];
    for (int g = 0; g < RG; g++)
        for (int c = 0; c < NC; c++) acc[g][c] = ld_f32(x0 + g * W + (c0 + c) * VL);
    for (int t = 0; t < nt; t++) {
        const char *vr = vp[t] + h * a->sh;
        vf vv[4];
        /* the row's last vector (bf16: pair of vectors) holds NL elements; NC = 1: one float32 / fp16 vector */
        for (int c = 0; c < NC; c += 2) {
            const int v = c0 + c;
            if (BF16) ld_bf16x2_n(vr + v * VL * 2, v + 2 == ND ? NL : 32, &vv[c], &vv[c + 1]);
            else if (H16) {
                vv[c] = ld_f16_n(vr + v * VL * 2, v == ND - 1 ? NL : 16);
                if (c + 1 < NC) vv[c + 1] = ld_f16_n(vr + (v + 1) * VL * 2, v + 1 == ND - 1 ? NL : 16);
            } else {
                vv[c] = ld_f32_n(vr + v * VL * 4, v == ND - 1 ? NL : 16);
                if (c + 1 < NC) vv[c + 1] = ld_f32_n(vr + (v + 1) * VL * 4, v + 1 == ND - 1 ? NL : 16);
            }
        }
        for (int g = 0; g < RG; g++) {
            const float p = S[g][t];
            for (int c = 0; c < NC; c++) acc[g][c] += p * vv[c];
        }
    }
    for (int g = 0; g < RG; g++)
        for (int c = 0; c < NC; c++) st_f32(x0 + g * W + (c0 + c) * VL, acc[g][c]);
}

#if defined(__AVX512F__) && !defined(FT_NO_BLK512)
#define BLK512 1      /* the per-(block, head) step below, AVX-512 intrinsics */
#else
#define BLK512 0
#endif
#if BLK512 && DPBF16 && defined(FT_AMX) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define AMXD 1        /* bf16 caches on AMX tiles (head_amx): only the FT_AMX build, -mamx-tile -mamx-bf16 */
#else
#define AMXD 0
#endif
#if AMXD
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if BLK512
/* An empty asm that takes x in a vector register and gives it back: the compiler must keep the
   loaded value, not fold the load into each FMA as a memory operand. Without it GCC 12 turned
   the float32 score loop's 4 K + 4 q loads per 16 FMAs into 32 (every FMA re-reading K and q), and
   that loop ran load-bound at half the FMA rate: 23.6 -> 31.0 M key-heads/s a core cache-resident
   (session 42, bench/wip/cpu-decode-s42.md). Same FMAs in the same order: bitwise the same result. */
#ifdef FT_NO_INREG
#define INREG(x) ((void)0)
#else
#define INREG(x) __asm__("" : "+v"(x))
#endif
#ifndef KG
#define KG 4        /* keys per score step of head_blk */
#endif
/* A row's vectors, the last one (tl) partial: its columns by mask m (args_t's tm16 / tm32), zeros after them. The
   masked loads read nothing past the row (a masked-off element never faults). */
#if DPBF16
static inline __attribute__((always_inline)) __m512bh ld_bf16_tl(const void *p, const int tl, uint32_t m) {
    return (__m512bh)(tl ? _mm512_maskz_loadu_epi16(m, p) : _mm512_loadu_si512(p));
}
#endif
static inline __attribute__((always_inline)) __m512 ld_f32_tl(const void *p, const int tl, uint32_t m) {
    return tl ? _mm512_maskz_loadu_ps((__mmask16)m, p) : _mm512_loadu_ps(p);
}
static inline __attribute__((always_inline)) __m512 ld_f16_tl(const void *p, const int tl, uint32_t m) {
    if (!tl) return (__m512)ld_f16(p);
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)m, p));
}
#ifndef QREG
#define QREG 1      /* bf16 scores (vdpbf16ps) with D <= 128: a row group's q (RG x D / 32 vectors) held in
                       registers for the whole block, KQ keys a step (below) */
#endif
#ifndef KQ
#define KQ 2        /* QREG: keys per score step (KQ x RG accumulators + 16 q + KQ K registers of the 32) */
#endif
/* One row's online-softmax step over ns score vectors of T keys (s[0..ns), scaled to log2 units):
   keys outside [t0, t1) of the block get p = 0; x is the row's state (x[0..D) the unnormalised
   accumulator, x[D] the running max m, x[D + 1] the running sum l). Writes p[0..ns) (all 0 when the
   row sees none of the block's keys) and returns whether it saw any. The accumulator is rescaled
   only when the max moved. Shared by head_blk (AVX-512) and head_amx. */
static inline __attribute__((always_inline)) int row_softmax(float *x, int64_t D, int64_t t0, int64_t t1,
                                                             int ns, const __m512 *s, __m512 *p) {
    for (int q = 0; q < ns; q++) p[q] = _mm512_setzero_ps();
    if (t0 >= t1) return 0;
    __mmask16 valid[KP_MAX];
    __m512 sv[KP_MAX], mx = _mm512_set1_ps(-INFINITY);
    for (int q = 0; q < ns; q++) {
        int64_t a0 = t0 - q * T, a1 = t1 - q * T;
        if (a0 < 0) a0 = 0;
        if (a1 > T) a1 = T;
        valid[q] = a0 < a1 ? (__mmask16)(((1u << a1) - 1u) & ~((1u << a0) - 1u)) : 0;
        sv[q] = _mm512_mask_blend_ps(valid[q], _mm512_set1_ps(-INFINITY), s[q]);
        mx = _mm512_max_ps(mx, sv[q]);
    }
    const float bm = _mm512_reduce_max_ps(mx);
    const float m = x[D], mn = bm > m ? bm : m;
    const __m512 mnv = _mm512_set1_ps(mn);
    __m512 ps = _mm512_setzero_ps();
    for (int q = 0; q < ns; q++) {
        p[q] = _mm512_maskz_mov_ps(valid[q], (__m512)vexp2((vf)_mm512_sub_ps(sv[q], mnv)));
        ps = _mm512_add_ps(ps, p[q]);
    }
    if (mn > m) {               /* rescale only when the max moved */
        const float alpha = exp2f(m - mn);   /* 0 on the first block (m = -inf) */
        x[D + 1] *= alpha;
        const __m512 al = _mm512_set1_ps(alpha);
        for (int64_t d = 0; d < D; d += 16) _mm512_storeu_ps(x + d, _mm512_mul_ps(al, _mm512_loadu_ps(x + d)));
        x[D] = mn;
    }
    x[D + 1] += _mm512_reduce_add_ps(ps);
    return 1;
}
/* The next block's cache lines, fetched into L2 while this block computes (session 42): positions
   [t, t1) of the next block, each position's K then V span of all heads in address order, one
   line per step. pf_step issues n (K, V) line pairs; head_blk spreads a head's share over its
   inner loops, so the fetches overlap the FMAs instead of running before them (the touch did,
   and its loads took 55% of the kernel's samples). prefetcht1: into L2 (Zen 4 documents T1 / T2
   as L2 fills), not L1, where the block (128-256 KiB) would not fit. A prefetch never faults and
   is only issued inside a row's bytes [0, span). */
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T1
#endif
#ifndef PF_HINT_BF16
#define PF_HINT_BF16 PF_HINT   /* bf16 caches' hint (measurement knob; session 43: _MM_HINT_T0 read 0.91 / 1.02x
                                  HEAD's time at 32k against T1's 0.85 / 0.91x, one-pass prefetch) */
#endif
typedef struct { const char *const *kp, *const *vp; int t, t1; int64_t o, span; } pfs_t;   /* vp 0: kp only */
static inline __attribute__((always_inline)) void pf_step(pfs_t *s, int n, const int BF16) {
    for (int i = 0; i < n && s->t < s->t1; i++) {
        if (BF16 && !s->vp) _mm_prefetch(s->kp[s->t] + s->o, PF_HINT_BF16);   /* one array (PF_SPLIT) */
        else if (BF16) {
            _mm_prefetch(s->kp[s->t] + s->o, PF_HINT_BF16);
            _mm_prefetch(s->vp[s->t] + s->o, PF_HINT_BF16);
        }
        else { _mm_prefetch(s->kp[s->t] + s->o, PF_HINT); _mm_prefetch(s->vp[s->t] + s->o, PF_HINT); }
        s->o += 64;
        if (s->o >= s->span) { s->o = 0; s->t++; }
    }
}
/* The rows (at byte offset off: a head) of the n keys in score slots i0 .. i0 + n - 1 (slot i holds key
   bitrev4(i) of a 16-key group whose first nts keys are real); a slot past nts gets any real row (its result is
   dropped). Returns whether any slot is real. */
static inline __attribute__((always_inline)) int key_rows(const char *const *kps, int i0, const int n, int nts,
                                                         int64_t off, const char **kr) {
    int live = 0;
    for (int u = 0; u < n; u++) {
        const int t = BITREV4[i0 + u];
        kr[u] = (t < nts ? kps[t] : kps[0]) + off;
        live |= t < nts;
    }
    return live;
}
/* One block of nt <= T keys, KV head h, every row r < R of the head, AVX-512:
   (1) scores, RG rows at a time: one accumulator per (row, key) over the D / 32 (bf16:
       vdpbf16ps on bf16 q and K) or D / 16 (float32: FMA) column vectors, q in
       registers / L1, then reduce16 puts key t in lane t;
   (2) online softmax of the RG rows (16 keys per vector);
   (3) P @ V: float32 caches by FMA, p broadcast per key; bf16 (DP) by vdpbf16ps on key
       pairs: p rounded to bf16 (as the prefill kernel, and flash-attn, do), the V rows
       of keys t and t + 1 interleaved by 16-bit unpacks, so lane l of a product holds
       p_t v_t[e] + p_t+1 v_t+1[e] in float32. The unpacks work within 128-bit lanes:
       the accumulators of each 32-column group hold its columns in the order pvi()
       gives (the merge undoes it). RG x 4 accumulators in registers per pass. */
static inline __attribute__((always_inline)) void head_blk(const args_t *a, const char *const *kp,
        const char *const *vp, int nt, int64_t h, int64_t j, const char *qh, float *sth,
        const int64_t *lo, const int64_t *hi, const int ND, const int DP, const int H16, const int TL, const int NS,
        pfs_t *pfs, const int PHASE, __m512 *sbuf, const float *sl, const float *dg) {
    /* D: q's and the state's row width (DS, D rounded up to 32): with TL the row's last K / V vector is read by a
       masked load (its columns, zeros after them), and q's zero columns there multiply zeros */
    const int64_t R = a->R, D = a->DS, W = D + 16, sh = a->sh;
    const int NCH = DP ? ND / 2 : ND;          /* column vectors of a K / V row */
    const int QR = DPBF16 && QREG && DP && NCH <= 4;   /* q in registers (the score loop below) */
    /* prefetch steps per inner iteration: this head's line pairs over the iterations of one row
       group (score c loops, then P @ V key loops); what is left goes out after the loops */
    int pfn = 0;
    if (pfs->t < pfs->t1) {
        const int64_t pairs = (pfs->t1 - pfs->t) * ((pfs->span + 63) / 64);   /* steps: 1 or 2 lines each */
        const int64_t iters = (PHASE != 2 ? NS * (T / (QR ? KQ : KG)) * NCH : 0)
                            + (PHASE != 1 ? ((DP ? 2 * NCH : NCH) + 3) / 4 * (DP ? (nt + 1) / 2 : nt) : 0);
        pfn = (int)((pairs + iters - 1) / iters);
    }
    for (int64_t r = 0; r < R; r += RG) {
        __m512 P[RG][T], S[RG][NSUB_MAX];
        const __m512 qs = _mm512_set1_ps(a->qscale);
        __m512 *sst = PHASE ? sbuf + (r / RG) * RG * NSUB_MAX : 0;    /* PHASE 1 / 2: this row group's scores */
        if (PHASE == 2)
            for (int g = 0; g < RG; g++)
                for (int sb = 0; sb < NS; sb++) S[g][sb] = sst[g * NSUB_MAX + sb];
#if DPBF16
        /* QR: the row group's q, RG x NCH vectors, loaded once a block and pinned in registers (INREG):
           GCC otherwise folds a q load into every vdpbf16ps (16 q + 4 K loads a 16 products at KG = 4,
           and the score loop ran at ~38% of the kernel's samples against P @ V's ~24% for as many
           products; session 54, perf on the 2-vCPU Zen 4 VM). The same products summed in the same
           order per (key, row): the same bits. */
        __m512bh qv[RG][4];
        if (QR && PHASE != 2)
            for (int g = 0; g < RG; g++)
                for (int c = 0; c < NCH; c++) {
                    qv[g][c] = (__m512bh)_mm512_loadu_si512(qh + ((r + g) * D + c * 32) * 2);
                    INREG(qv[g][c]);
                }
#endif
      for (int sb = 0; sb < (PHASE == 2 ? 0 : NS); sb++) {
        const char *const *kps = kp + sb * T;
        const int nts = nt - sb * T;
        if (nts <= 0) { for (int g = 0; g < RG; g++) S[g][sb] = _mm512_setzero_ps(); continue; }
#if DPBF16
        if (QR) {
            /* (KQ = 2: slots i0, i0 + 1 are the pair reduce16's first level adds, so it runs here in
               registers, W[g][i0 / 2] = c16(P[g][i0], P[g][i0 + 1]), and the block stores half the vectors) */
            vf W[RG][T / 2];
            for (int i0 = 0; i0 < T; i0 += KQ) {
                const char *kr[KQ];
                if (!key_rows(kps, i0, KQ, nts, h * sh, kr)) {
                    for (int u = 0; u < KQ; u++)
                        for (int g = 0; g < RG; g++) P[g][i0 + u] = _mm512_setzero_ps();
                    if (KQ == 2)
                        for (int g = 0; g < RG; g++) W[g][i0 / 2] = (vf){0};
                    continue;
                }
                __m512 acc[KQ][RG];
                for (int u = 0; u < KQ; u++)
                    for (int g = 0; g < RG; g++) acc[u][g] = _mm512_setzero_ps();
                #pragma GCC unroll 4
                for (int c = 0; c < NCH; c++) {     /* unrolled: qv[g][c] must name a register */
                    pf_step(pfs, pfn, DP);
                    __m512bh kb[KQ];
                    for (int u = 0; u < KQ; u++) kb[u] = ld_bf16_tl(kr[u] + c * 64, TL && c == NCH - 1, a->tm32);
                    for (int g = 0; g < RG; g++)
                        for (int u = 0; u < KQ; u++) acc[u][g] = _mm512_dpbf16_ps(acc[u][g], kb[u], qv[g][c]);
                }
                for (int u = 0; u < KQ; u++)
                    for (int g = 0; g < RG; g++)
                        P[g][i0 + u] = BITREV4[i0 + u] < nts ? acc[u][g] : _mm512_setzero_ps();
                if (KQ == 2)
                    for (int g = 0; g < RG; g++) W[g][i0 / 2] = c16((vf)P[g][i0], (vf)P[g][i0 + 1]);
            }
            for (int g = 0; g < RG; g++)
                S[g][sb] = _mm512_mul_ps((__m512)(KQ == 2 ? reduce16_w(W[g]) : reduce16((const vf *)P[g])), qs);
            if (a->softcap2 != 0.0f)
                for (int g = 0; g < RG; g++) S[g][sb] = (__m512)softcap_f((vf)S[g][sb], a->softcap2);
            if (sl)
                for (int g = 0; g < RG; g++)
                    S[g][sb] = (__m512)alibi_bias((vf)S[g][sb], sl[(r + g) % a->G], dg[r + g], j + sb * T);
            continue;
        }
#endif
        /* KG keys at a time: each q vector loaded once serves KG keys (KG x RG
           accumulators; loads, not FMAs, bound a loop that reloads q per key) */
        for (int i0 = 0; i0 < T; i0 += KG) {
            const char *kr[KG];
            if (!key_rows(kps, i0, KG, nts, h * sh, kr)) {
                for (int u = 0; u < KG; u++)
                    for (int g = 0; g < RG; g++) P[g][i0 + u] = _mm512_setzero_ps();
                continue;
            }
            __m512 acc[KG][RG];
            for (int u = 0; u < KG; u++)
                for (int g = 0; g < RG; g++) acc[u][g] = _mm512_setzero_ps();
            for (int c = 0; c < NCH; c++) {
                pf_step(pfs, pfn, DP);
                if (DP) {
#if DPBF16
                    /* as before session 42: INREG here (with the column loop kept rolled) ran 5-8% faster
                       cache-resident but 1.07-1.15x the time at L = 32k in three of four A/B runs */
                    __m512bh kb[KG];
                    for (int u = 0; u < KG; u++) kb[u] = ld_bf16_tl(kr[u] + c * 64, TL && c == NCH - 1, a->tm32);
                    for (int g = 0; g < RG; g++) {
                        const __m512bh qv = (__m512bh)_mm512_loadu_si512(qh + ((r + g) * D + c * 32) * 2);
                        for (int u = 0; u < KG; u++) acc[u][g] = _mm512_dpbf16_ps(acc[u][g], kb[u], qv);
                    }
#endif
                } else {
                    __m512 kv[KG];
                    for (int u = 0; u < KG; u++) {
                        kv[u] = H16 ? ld_f16_tl(kr[u] + c * 32, TL && c == NCH - 1, a->tm16)
                                    : ld_f32_tl(kr[u] + c * 64, TL && c == NCH - 1, a->tm16);
                        INREG(kv[u]);
                    }
                    for (int g = 0; g < RG; g++) {
                        __m512 qv = _mm512_loadu_ps(qh + ((r + g) * D + c * 16) * 4);
                        INREG(qv);
                        for (int u = 0; u < KG; u++) acc[u][g] = _mm512_fmadd_ps(kv[u], qv, acc[u][g]);
                    }
                }
            }
            for (int u = 0; u < KG; u++)
                for (int g = 0; g < RG; g++)
                    P[g][i0 + u] = BITREV4[i0 + u] < nts ? acc[u][g] : _mm512_setzero_ps();
        }
        for (int g = 0; g < RG; g++) S[g][sb] = _mm512_mul_ps((__m512)reduce16((const vf *)P[g]), qs);
        if (a->softcap2 != 0.0f)
            for (int g = 0; g < RG; g++) S[g][sb] = (__m512)softcap_f((vf)S[g][sb], a->softcap2);
        if (sl)
            for (int g = 0; g < RG; g++)
                S[g][sb] = (__m512)alibi_bias((vf)S[g][sb], sl[(r + g) % a->G], dg[r + g], j + sb * T);
      }
        if (PHASE == 1) {           /* scores only: softmax and P @ V in the PHASE 2 call */
            for (int g = 0; g < RG; g++)
                for (int sb = 0; sb < NS; sb++) sst[g * NSUB_MAX + sb] = S[g][sb];
            continue;
        }
        /* online softmax over the NS score vectors (one max, one rescale, one sum per
           T * NS keys); p of keys a row does not see is 0 */
        float pf[RG][T * NSUB_MAX] __attribute__((aligned(64)));
        uint32_t pw[RG][T * NSUB_MAX / 2] __attribute__((aligned(64)));
        int any = 0;
        for (int g = 0; g < RG; g++) {
            float *x = sth + (r + g) * W;
            int64_t t0 = lo[r + g] - j, t1 = hi[r + g] - j;
            if (t0 < 0) t0 = 0;
            if (t1 > nt) t1 = nt;
            __m512 p[NSUB_MAX];
            any |= row_softmax(x, D, t0, t1, NS, S[g], p);
            for (int sb = 0; sb < NS; sb++) {
                if (DP) {
#if DPBF16
                    _mm256_store_si256((__m256i *)(pw[g] + sb * (T / 2)), (__m256i)_mm512_cvtneps_pbh(p[sb]));
#endif
                } else {
                    _mm512_store_ps(pf[g] + sb * T, p[sb]);
                }
            }
        }
        if (!any) continue;
        /* P @ V, 4 column vectors per pass */
        float *x0 = sth + r * W;
        for (int c0 = 0; c0 < (DP ? 2 * NCH : NCH); c0 += 4) {
            const int NC = (DP ? 2 * NCH : NCH) - c0 < 4 ? (DP ? 2 * NCH : NCH) - c0 : 4;
            __m512 acc[RG][4];
            for (int g = 0; g < RG; g++)
                for (int c = 0; c < NC; c++) acc[g][c] = _mm512_loadu_ps(x0 + g * W + (c0 + c) * 16);
            if (DP) {
#if DPBF16
                for (int t = 0; t < nt; t += 2) {
                    pf_step(pfs, pfn, DP);
                    const char *v0 = vp[t] + h * sh;
                    __m512i vv[4];
                    for (int c = 0; c < NC; c += 2) {
                        const int tl = TL && c0 + c + 2 == 2 * NCH;    /* the row's last group */
                        const __m512i a0 = (__m512i)ld_bf16_tl(v0 + (c0 + c) * 32, tl, a->tm32);
                        const __m512i a1 = t + 1 < nt ? (__m512i)ld_bf16_tl(vp[t + 1] + h * sh + (c0 + c) * 32, tl,
                                                                            a->tm32)
                                                      : _mm512_setzero_si512();
                        vv[c] = _mm512_unpacklo_epi16(a0, a1);
                        vv[c + 1] = _mm512_unpackhi_epi16(a0, a1);
                    }
                    for (int g = 0; g < RG; g++) {
                        const __m512bh pp = (__m512bh)_mm512_set1_epi32((int)pw[g][t >> 1]);
                        for (int c = 0; c < NC; c++) acc[g][c] = _mm512_dpbf16_ps(acc[g][c], (__m512bh)vv[c], pp);
                    }
                }
#endif
            } else {
                for (int t = 0; t < nt; t++) {
                    pf_step(pfs, pfn, DP);
                    const char *v0 = vp[t] + h * sh;
                    __m512 vv[4];
                    for (int c = 0; c < NC; c++) {
                        const int tl = TL && c0 + c == NCH - 1;        /* the row's last vector */
                        vv[c] = H16 ? ld_f16_tl(v0 + (c0 + c) * 32, tl, a->tm16)
                                    : ld_f32_tl(v0 + (c0 + c) * 64, tl, a->tm16);
                    }
                    for (int g = 0; g < RG; g++) {
                        const __m512 pp = _mm512_set1_ps(pf[g][t]);
                        for (int c = 0; c < NC; c++) acc[g][c] = _mm512_fmadd_ps(pp, vv[c], acc[g][c]);
                    }
                }
            }
            for (int g = 0; g < RG; g++)
                for (int c = 0; c < NC; c++) _mm512_storeu_ps(x0 + g * W + (c0 + c) * 16, acc[g][c]);
        }
    }
    pf_step(pfs, 1 << 30, DP);      /* the rest of this head's share (rows without keys skip P @ V) */
}
#endif
/* where element d of a row sits in the accumulators of the vdpbf16ps P @ V (above):
   within its 32-column group, lane 4L + i of the "low" vector holds column 8L + i and
   lane 4L + i of the "high" one column 8L + 4 + i (L, i < 4) */
static inline int64_t pvi(int64_t d) {
    const int64_t e = d & 31;
    return (d & ~31) + ((e >> 2) & 1) * 16 + (e >> 3) * 4 + (e & 3);
}

#if AMXD
/* The AMX step (bf16 caches; the FT_AMX build, after native_prefill's ft_amx_init got the
   tile-data permission for the process). One palette-1 configuration per thread, loaded at
   the start of the parallel region; TDPBF16PS C[m][n] += sum_r A[m][2r] B[r][n].lo +
   A[m][2r+1] B[r][n].hi, exact bf16 products, float32 sums (denormal inputs flushed, as
   vdpbf16ps does). Tiles (rows x bytes per row):
     tmm0  C  scores S^T: 16 keys x 4 query rows float32              16 x 16
     tmm1  A  K: 16 keys x 32 d bf16, read straight from the cache     16 x 64
              (row stride = the position stride: no packing)
     tmm2  B  q^T of the 4-row group, VNNI: [16 d pairs][4 rows][2]    16 x 16
     tmm3  C  O even columns: 4 rows x 16 float32 (d = 32c + 2i)       4 x 64
     tmm4  C  O odd columns (d = 32c + 2i + 1)                         4 x 64
     tmm5  A  P "even": 4 rows x 16 pairs (p_k, 0)                     4 x 64
     tmm6  A  P "odd": 4 rows x 16 pairs (0, p_k)                      4 x 64
     tmm7  B  V: 16 keys x 32 d bf16, straight from the cache          16 x 64
   P V without repacking V: read as a B tile, V row k is 16 pairs (V[k][2i], V[k][2i+1]),
   so A = (p, 0) pairs gives sum_k p_k V[k][2i] (even columns) and A = (0, p) pairs the
   odd ones: two 4-row products per 16 keys x 32 columns, and the accumulators hold each
   32-column group in [even, odd] order (eo(), undone by the merge). The zero half still
   multiplies the other column's value: an inf / NaN in V reaches its neighbour column
   (finite caches are unaffected). The scores come out key-major (C = K q^T) and are
   transposed by 8 two-source permutes per 16 keys x 4 rows (tr16x4). */
static void amx_dec_config(void) {
    unsigned char cfg[64] __attribute__((aligned(64)));
    static const unsigned char rows[8] = {16, 16, 16, 4, 4, 4, 4, 16};
    static const unsigned char colsb[8] = {16, 64, 16, 64, 64, 64, 64, 64};
    memset(cfg, 0, sizeof cfg);
    cfg[0] = 1;                                   /* palette 1 */
    for (int t = 0; t < 8; t++) { cfg[16 + 2 * t] = colsb[t]; cfg[48 + t] = rows[t]; }
    _tile_loadconfig(cfg);
}

/* 1: this thread may use tile data (the process holds XTILEDATA permission) */
static int amx_permitted(void) {
    unsigned long bits = 0;
    return syscall(SYS_arch_prctl, 0x1022 /* ARCH_GET_XCOMP_PERM */, &bits) == 0 && ((bits >> 18) & 1);
}

/* c: 16 keys x 4 rows float32, key-major (c[4 k + g]); out[g]: lane k = key k of row g */
static inline void tr16x4(const float *c, __m512 *out) {
    const __m512 z0 = _mm512_load_ps(c), z1 = _mm512_load_ps(c + 16), z2 = _mm512_load_ps(c + 32),
                 z3 = _mm512_load_ps(c + 48);
    const __m512i i01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i i23 = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i hi = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    /* a: rows 0 | 1 of keys 0-7; b: rows 2 | 3 of keys 0-7; c_, d: the same for keys 8-15 */
    const __m512 a = _mm512_permutex2var_ps(z0, i01, z1), b = _mm512_permutex2var_ps(z0, i23, z1);
    const __m512 c_ = _mm512_permutex2var_ps(z2, i01, z3), d = _mm512_permutex2var_ps(z2, i23, z3);
    out[0] = _mm512_permutex2var_ps(a, lo, c_); out[1] = _mm512_permutex2var_ps(a, hi, c_);
    out[2] = _mm512_permutex2var_ps(b, lo, d); out[3] = _mm512_permutex2var_ps(b, hi, d);
}

/* One block of nt <= 16 NSUB_AMX keys (NG = ceil(nt / 16) groups of 16), KV head h, all R rows, on
   tiles. kb[g] / vb[g]: the first K / V row of group g for head h, rows at stride ks[g]
   bytes (the cache itself, or a staged copy with zero rows past nt: a tile always reads
   16 rows). qT: this head's q^T tiles, [R / 4][D / 32][16][4] uint32. The online softmax
   is head_blk's, unchanged. */
static inline __attribute__((always_inline)) void head_amx(const args_t *a, const char *const *kb,
        const char *const *vb, const int64_t *ks, int nt, int64_t j, const uint32_t *qT, float *sth,
        const int64_t *lo, const int64_t *hi, const int NKC) {
    const int64_t R = a->R, D = a->D, W = D + 16;
    const int NG = (nt + 15) / 16;
    const __m512 qs = _mm512_set1_ps(a->qscale);
    for (int64_t r = 0; r < R; r += RG) {
        __m512 S[NSUB_AMX][RG];
        const uint32_t *qg = qT + (r / RG) * NKC * 64;
        for (int q = 0; q < NSUB_AMX; q++) {
            if (q >= NG) { for (int g = 0; g < RG; g++) S[q][g] = _mm512_setzero_ps(); continue; }
            float c[64] __attribute__((aligned(64)));
            _tile_zero(0);
            for (int cc = 0; cc < NKC; cc++) {
                _tile_loadd(1, kb[q] + cc * 64, ks[q]);
                _tile_loadd(2, qg + cc * 64, 16);
                _tile_dpbf16ps(0, 1, 2);
            }
            _tile_stored(0, c, 16);
            tr16x4(c, S[q]);
            for (int g = 0; g < RG; g++) S[q][g] = _mm512_mul_ps(S[q][g], qs);
        }
        /* online softmax (head_blk's), p rounded to bf16 into the two A layouts */
        uint32_t pe[NSUB_AMX][RG][16] __attribute__((aligned(64)));
        uint32_t po[NSUB_AMX][RG][16] __attribute__((aligned(64)));
        int any = 0;
        for (int g = 0; g < RG; g++) {
            float *x = sth + (r + g) * W;
            int64_t t0 = lo[r + g] - j, t1 = hi[r + g] - j;
            if (t0 < 0) t0 = 0;
            if (t1 > nt) t1 = nt;
            __m512 p[NSUB_AMX], sg[NSUB_AMX];
            for (int q = 0; q < NSUB_AMX; q++) sg[q] = S[q][g];
            any |= row_softmax(x, D, t0, t1, NSUB_AMX, sg, p);
            for (int q = 0; q < NSUB_AMX; q++) {
                /* bf16 p in the low half of each 32-bit pair (p, 0); shifted up: (0, p) */
                const __m512i e = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(p[q]));
                _mm512_store_si512(pe[q][g], e);
                _mm512_store_si512(po[q][g], _mm512_slli_epi32(e, 16));
            }
        }
        if (!any) continue;
        float *x0 = sth + r * W;
        for (int cc = 0; cc < NKC; cc++) {
            _tile_loadd(3, x0 + 32 * cc, W * 4);
            _tile_loadd(4, x0 + 32 * cc + 16, W * 4);
            for (int q = 0; q < NG; q++) {
                _tile_loadd(5, pe[q], 64);
                _tile_loadd(6, po[q], 64);
                _tile_loadd(7, vb[q] + cc * 64, ks[q]);
                _tile_dpbf16ps(3, 5, 7);
                _tile_dpbf16ps(4, 6, 7);
            }
            _tile_stored(3, x0 + 32 * cc, W * 4);
            _tile_stored(4, x0 + 32 * cc + 16, W * 4);
        }
    }
}
#endif

/* One item: sequence b, keys [j0, j1), all KV heads. ND = ceil(D / 16) vectors per row (bf16: DS / 16; with TL the
   row's last vector, bf16 its last 32-column group, may be partial), a compile-time constant in the specialised
   copies below, a run-time value in item_any_*. Rows per KV
   head: R, a multiple of RG (decode.py pads q with zero rows; padding rows r >= Sq * G see no key, so their p is
   0 and their state stays empty). State st: (Hk, R, DS + 16), acc (columns D .. DS stay 0) then m then l per
   row. */
static inline __attribute__((always_inline)) void item(const args_t *a, int64_t b, int64_t j0, int64_t j1,
                                                      float *st, char *qbuf, const int ND, const int BF16,
                                                      const int H16, const int TL) {
    const int64_t Hk = a->Hk, G = a->G, D = a->D, DS = a->DS, R = a->R, Rreal = a->Sq * G, W = DS + 16;
    /* elements of a row's last vector (bf16: 32-column group); whole without TL */
    const int NL = !TL ? (BF16 ? 32 : 16) : BF16 ? (D % 32 ? (int)(D % 32) : 32) : (D % 16 ? (int)(D % 16) : 16);
    vf S[MAXR];                             /* scores, then p, of one (head, block): lane = key */
    const vi IOTA = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    int64_t lo[MAXR], hi[MAXR];
    for (int64_t r = 0; r < R; r++) {
        lo[r] = r < Rreal ? a->rlo[b * a->Sq + r / G] : 0;
        hi[r] = r < Rreal ? a->rhi[b * a->Sq + r / G] : 0;
    }
    /* ALiBi: this sequence's H slopes (head h * G + g at sl[h * G + g]) and each row's anchor key: its
       diagonal, or key 0 for a row before every key (flashtriton/alibi_anchor.py; the merge below moves
       such a row's lse back) */
    const float *sl = a->alibi ? a->alibi + b * a->alibi_bs : 0;
    float dg[MAXR];
    for (int64_t r = 0; sl && r < R; r++) {
        const int64_t p = r / G + a->nk[b] - a->Sq;
        dg[r] = (float)(p > 0 ? p : 0);
    }
    for (int64_t h = 0; h < Hk; h++)
        for (int64_t r = 0; r < R; r++) {
            float *x = st + (h * R + r) * W;
            for (int64_t d = 0; d < DS; d++) x[d] = 0.0f;
            x[DS] = -INFINITY; x[DS + 1] = 0.0f;
        }
    /* this sequence's q rows as (Hk, R, DS), row r = i * G + g of KV head h being
       query i of head h * G + g; padding rows and columns D .. DS zero. bf16 with DPBF16: as given;
       bf16 otherwise: float32 in the [even, odd] order of the K loads; float32: as given; fp16 (H16):
       widened to float32 */
    const int qbf = BF16 && DPBF16;
#if AMXD
    if (BF16 && a->amx) {
        /* q^T tiles (B operand of the scores): head h, row group r / 4, 32-column chunk c:
           [16 d pairs][4 rows] 32-bit words, word (i, g) = q[r + g][32 c + 2 i .. + 1];
           padding rows zero */
        uint32_t *qT = (uint32_t *)qbuf;
        for (int64_t h = 0; h < Hk; h++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < D / 32; c++)
                    for (int64_t i = 0; i < 16; i++) {
                        uint32_t w = 0;
                        if (r < Rreal)
                            memcpy(&w, a->q + b * a->qsb + (r / G) * a->qss + (h * G + r % G) * a->qsh
                                       + (32 * c + 2 * i) * 2, 4);
                        qT[((h * (R / RG) + r / RG) * (D / 32) + c) * 64 + i * 4 + r % RG] = w;
                    }
    } else
#endif
    for (int64_t h = 0; h < Hk; h++)
        for (int64_t r = 0; r < R; r++) {
            char *dst = qbuf + (h * R + r) * DS * (qbf ? 2 : 4);
            if (r >= Rreal || DS != D) memset(dst, 0, (size_t)DS * (qbf ? 2 : 4));
            if (r >= Rreal) continue;
            const char *src = a->q + b * a->qsb + (r / G) * a->qss + (h * G + r % G) * a->qsh;
            if (H16)
                for (int64_t d = 0; d < D; d += VL)
                    st_f32((float *)dst + d, ld_f16_n(src + 2 * d, D - d < VL ? (int)(D - d) : VL));
            else if (qbf || !BF16) memcpy(dst, src, (size_t)D * (qbf ? 2 : 4));
            else for (int64_t d = 0; d < D; d++) {
                uint16_t x; memcpy(&x, src + 2 * d, 2);
                ((float *)dst)[eo(d)] = bf16_to_f32(x);
            }
        }
    /* The block's cache rows are first read in address order (one load per 64-byte
       line of K and V rows, position by position: "touch"), then computed head by head
       from L1 / L2. Reading them head by head straight from DRAM (256-512 bytes per
       row, a 2-4 KiB stride) caps a pure read at ~30 GB/s on the 2-core VM, against
       ~45 for whole rows in order; software prefetches of the next block (per head,
       or in address order) did not close that gap (bench/NOTES.md, "Session 4"). Session 42:
       on the Zen 4 VM the touch and the compute ran in series (the touch's loads were 52%
       of the samples even with the cache in L3); prefetching the next block into L2 spread
       over the compute (pf_step) took float32 at L = 8k from 21 to 33 GB/s on 2 threads. */
    /* rows of this block and of the PFD blocks after it (a ring of PFD + 1 pointer arrays) */
    const char *kpb[PF_RING][T * KP_MAX], *vpb[PF_RING][T * KP_MAX];
    /* keys per block: head_blk takes NS score vectors of T keys per softmax step */
    /* fp16 takes float32's step (session 63: 2 / 4 score vectors measured 0.98-1.08x the time, cold, 8k / 32k) */
    const int NS = BF16 ? NSUB_BF16 : NSUB_F32;
    const int TB = (BF16 && AMXD && a->amx) ? T * NSUB_AMX : (BLK512 && (!BF16 || DPBF16)) ? T * NS : T;
    const int64_t row_bytes = BF16 || H16 ? D * 2 : D * 4;
    const int64_t span = (Hk - 1) * a->sh + row_bytes;   /* bytes of one position's heads */
    /* float32 in head_blk (AVX-512): the next block is prefetched while this one computes (pf_step), so
       only an item's first block is touched; float32 0.64-0.88x the time of the touch (session 42's A/B,
       bench/wip/cpu-decode-s42.md). bf16 (vdpbf16ps): the same prefetch in one pass measured level to 1.25x
       the time at L = 8k / 32k in session 42 and 0.86-0.93x / 1.0-1.16x in session 43, so bf16 takes it split
       in two phases (PF_SPLIT, below). AMX, PF_BF16 0 and the portable step touch every block. */
#ifdef FT_NO_PF
    const int PF = 0;
#else
    const int PF = BLK512 && (!BF16 || (DPBF16 && PF_BF16)) && !(BF16 && AMXD && a->amx);
#endif
    /* prefetch distance in blocks: block j computes while block j + PFD blocks is prefetched */
    const int PFD = BF16 ? PF_DIST_BF16 : 1, NR = PFD + 1;
    const int SPL = BLK512 && DPBF16 && BF16 && PF && PF_SPLIT && Hk * R <= SPLIT_ROWS;   /* two-phase blocks */
    int64_t bi = 0;                                      /* block index within the item */
    for (int64_t j = j0; j < j1; j += TB, bi++) {
        const int nt = (int)(j1 - j < TB ? j1 - j : TB);
        const char **kp = kpb[bi % NR], **vp = vpb[bi % NR];
        const int fresh = !PF || j == j0;
        if (fresh)
            for (int t = 0; t < nt; t++) {
                kp[t] = row_ptr(a, a->k, b, a->start[b] + j + t);
                vp[t] = row_ptr(a, a->v, b, a->start[b] + j + t);
            }
        /* PFD > 1, an item's start: the blocks between this one and the first one prefetched during a
           compute get their pointers now and are prefetched (after this block's touch, below) */
        for (int e = 1; PF && j == j0 && e < PFD; e++) {
            const int64_t je = j + e * TB;
            const int ne = je < j1 ? (int)(j1 - je < TB ? j1 - je : TB) : 0;
            for (int t = 0; t < ne; t++) {
                kpb[(bi + e) % NR][t] = row_ptr(a, a->k, b, a->start[b] + je + t);
                vpb[(bi + e) % NR][t] = row_ptr(a, a->v, b, a->start[b] + je + t);
            }
        }
        const int64_t jn = j + PFD * TB;
        const int ntn = PF && jn < j1 ? (int)(j1 - jn < TB ? j1 - jn : TB) : 0;
        const char **kn = kpb[(bi + PFD) % NR], **vn = vpb[(bi + PFD) % NR];
        for (int t = 0; t < ntn; t++) {
            kn[t] = row_ptr(a, a->k, b, a->start[b] + jn + t);
            vn[t] = row_ptr(a, a->v, b, a->start[b] + jn + t);
        }
#ifndef FT_NO_TOUCH
        if (fresh || PF_TOUCH) {   /* 4-byte loads: every line is touched, nothing past a row's last byte */
            uint32_t sink = 0;
            /* SPLIT_TOUCH_K: an item's first split block touches K only (its K phase prefetches its V) */
            const int konly = SPLIT_TOUCH_K && SPL && !PF_TOUCH;
            for (int t = 0; t < nt; t++)
                for (int64_t o = 0; o < span; o += 64) {
                    uint32_t x, y = 0;
                    memcpy(&x, kp[t] + o, 4);
                    if (!konly) memcpy(&y, vp[t] + o, 4);
                    sink += x + y;
                }
            __asm__ volatile("" : : "r"(sink));   /* keeps the loads (an empty asm reading sink) */
        }
#endif
#if BLK512
        for (int e = 1; PF && j == j0 && e < PFD; e++) {   /* PFD > 1: the blocks in between, at once */
            const int64_t je = j + e * TB;
            const int ne = je < j1 ? (int)(j1 - je < TB ? j1 - je : TB) : 0;
            pfs_t pe = {kpb[(bi + e) % NR], vpb[(bi + e) % NR], 0, ne, 0, span};
            pf_step(&pe, 1 << 30, BF16);
        }
#endif
#if AMXD
        if (BF16 && a->amx) {
            /* per group of 16 keys: tiles read the cache rows in place when the group is
               whole and its rows sit at one stride (always, in a contiguous cache; paged:
               unless the group crosses a page); else (a short last group, a page
               boundary) the group is staged per head, zero rows past nt */
            const int NG = (nt + 15) / 16;
            int reg[NSUB_AMX];
            for (int q = 0; q < NG; q++) {
                reg[q] = nt >= 16 * q + 16;
                for (int t = 1; t < 16 && reg[q]; t++)
                    reg[q] = kp[16 * q + t] == kp[16 * q] + t * a->sp && vp[16 * q + t] == vp[16 * q] + t * a->sp;
            }
            char *stage = qbuf + Hk * R * D * 4;     /* [NG][K, V][16][D] bf16 */
            for (int64_t h = 0; h < Hk; h++) {
                const char *kb[NSUB_AMX], *vb[NSUB_AMX];
                int64_t ks[NSUB_AMX];
                for (int q = 0; q < NG; q++) {
                    if (reg[q]) {
                        kb[q] = kp[16 * q] + h * a->sh; vb[q] = vp[16 * q] + h * a->sh; ks[q] = a->sp;
                        continue;
                    }
                    char *kd = stage + q * 2 * 16 * D * 2, *vd = kd + 16 * D * 2;
                    for (int t = 0; t < 16; t++) {
                        if (16 * q + t < nt) {
                            memcpy(kd + t * D * 2, kp[16 * q + t] + h * a->sh, (size_t)D * 2);
                            memcpy(vd + t * D * 2, vp[16 * q + t] + h * a->sh, (size_t)D * 2);
                        } else {
                            memset(kd + t * D * 2, 0, (size_t)D * 2);
                            memset(vd + t * D * 2, 0, (size_t)D * 2);
                        }
                    }
                    kb[q] = kd; vb[q] = vd; ks[q] = D * 2;
                }
                head_amx(a, kb, vb, ks, nt, j, (const uint32_t *)qbuf + h * R * D / 2, st + h * R * W, lo, hi,
                         ND / 2);
            }
            continue;
        }
#endif
#if BLK512
        if (SPL) {
            /* K phase (scores of every head; V of this block prefetched), then V phase (softmax and P @ V of every
               head; K of the next block prefetched): the same operations per head as the one-pass step, in the
               same order, so the same bits. Each phase fetches the 128 KiB (Hk = 8, D = 128) the other phase reads
               next, instead of the one-pass 256 KiB a block ahead. Session 43, 2026-12-03, the 2-vCPU Zen 4 VM,
               bench/cpu/s43_decode_pf_sweep.py, 2 threads, 15 rounds, time / HEAD's touch (min, median, per-round
               median): L = 32k 0.77 / 0.81 / 0.83, L = 8k 0.95 / 0.93 / 0.91; the one-pass prefetch 0.86 / 0.88 /
               0.88 and 0.97 / 1.07 / 1.11; s42_decode_ab.py, 3 runs of 21 rounds, median time ratio 32k
               0.82 / 0.85 / 0.86, 8k 1.01 / 0.94 / 0.95 (cpu-decode-bf16-pf.md has every run). Why the split
               pays and the one pass does not is not settled: neither reaches the overlap a model of compute and
               fetch rates predicts (the prefetch bookkeeping costs ~16-20% of the compute, cache-resident). */
            __m512 sb_[SPLIT_ROWS * NSUB_MAX] __attribute__((aligned(64)));
            /* the K phase prefetches V of block j + PFD - 1 (this block's at PFD = 1) */
            const int64_t jv = j + (PFD - 1) * TB;
            const int nv = jv < j1 ? (int)(j1 - jv < TB ? j1 - jv : TB) : 0;
            const char *const *vpf = vpb[(bi + PFD - 1) % NR];
            for (int64_t h = 0; h < Hk; h++) {
                pfs_t pf = {vpf, 0, (int)(h * nv / Hk), (int)((h + 1) * nv / Hk), 0, span};
                head_blk(a, kp, vp, nt, h, j, qbuf + h * R * DS * 2, st + h * R * W, lo, hi, ND, 1, 0, TL, NS, &pf, 1,
                         sb_ + h * R * NSUB_MAX, sl ? sl + h * G : 0, dg);
            }
            for (int64_t h = 0; h < Hk; h++) {
                pfs_t pf = {kn, 0, (int)(h * ntn / Hk), (int)((h + 1) * ntn / Hk), 0, span};
                head_blk(a, kp, vp, nt, h, j, qbuf + h * R * DS * 2, st + h * R * W, lo, hi, ND, 1, 0, TL, NS, &pf, 2,
                         sb_ + h * R * NSUB_MAX, 0, 0);
            }
            continue;
        }
#endif
        for (int64_t h = 0; h < Hk; h++) {
#if BLK512
            if (!BF16 || DPBF16) {
                /* this head's share of the next block: positions [h ntn / Hk, (h + 1) ntn / Hk) */
                pfs_t pf = {kn, vn, (int)(h * ntn / Hk), (int)((h + 1) * ntn / Hk), 0, span};
                head_blk(a, kp, vp, nt, h, j, qbuf + h * R * DS * (BF16 ? 2 : 4), st + h * R * W, lo, hi, ND, BF16,
                         H16, TL, NS, &pf, 0, 0, sl ? sl + h * G : 0, dg);
                continue;
            }
#endif
            const float *qh = (const float *)qbuf + h * R * DS;
            /* scores, RG rows at a time, two accumulators per row (even / odd
               vectors: 2 * RG independent FMA chains): slot i of P holds key
               bitrev4(i), so after reduce16 lane t of S[r] is key t's score */
            for (int64_t r = 0; r < R; r += RG) {
                vf P[RG][T];
                for (int i = 0; i < T; i++) {
                    const int t = BITREV4[i];
                    vf acc0[RG], acc1[RG];
                    for (int g = 0; g < RG; g++) { acc0[g] = (vf){0}; acc1[g] = (vf){0}; }
                    if (BF16 && DPBF16 && t < nt) {
#if DPBF16
                        /* 32 bf16 products per instruction, exact products, float32 sums:
                           no conversion, a quarter of the FMA-path instructions */
                        const char *kr = kp[t] + h * a->sh;
                        const uint16_t *qr = (const uint16_t *)qbuf + (h * R + r) * DS;
                        for (int c = 0; c < ND; c += 2) {
                            const __m512bh kb = (__m512bh)(TL && c + 2 == ND
                                                           ? _mm512_maskz_loadu_epi16(a->tm32, kr + c * VL * 2)
                                                           : _mm512_loadu_si512(kr + c * VL * 2));
                            for (int g = 0; g < RG; g++) {
                                const __m512bh qv = (__m512bh)_mm512_loadu_si512(qr + g * DS + c * VL);
                                if (c & 2) acc1[g] = (vf)_mm512_dpbf16_ps((__m512)acc1[g], kb, qv);
                                else acc0[g] = (vf)_mm512_dpbf16_ps((__m512)acc0[g], kb, qv);
                            }
                        }
#endif
                    } else if (t < nt) {
                        const char *kr = kp[t] + h * a->sh;
                        for (int c = 0; c < ND; c += 2) {
                            /* k1 stays 0 past an odd ND (q's columns there are 0); the row's last vector holds NL */
                            vf k0, k1 = (vf){0};
                            if (BF16) ld_bf16x2_n(kr + c * VL * 2, c + 2 == ND ? NL : 32, &k0, &k1);
                            else if (H16) {
                                k0 = ld_f16_n(kr + c * VL * 2, c == ND - 1 ? NL : 16);
                                if (c + 1 < ND) k1 = ld_f16_n(kr + (c + 1) * VL * 2, c + 1 == ND - 1 ? NL : 16);
                            } else {
                                k0 = ld_f32_n(kr + c * VL * 4, c == ND - 1 ? NL : 16);
                                if (c + 1 < ND) k1 = ld_f32_n(kr + (c + 1) * VL * 4, c + 1 == ND - 1 ? NL : 16);
                            }
                            for (int g = 0; g < RG; g++) {
                                acc0[g] += k0 * ld_f32(qh + (r + g) * DS + c * VL);
                                acc1[g] += k1 * ld_f32(qh + (r + g) * DS + (c + 1) * VL);
                            }
                        }
                    }
                    for (int g = 0; g < RG; g++) P[g][i] = acc0[g] + acc1[g];
                }
                for (int g = 0; g < RG; g++) {
                    S[r + g] = reduce16(P[g]) * a->qscale;
                    if (a->softcap2 != 0.0f) S[r + g] = softcap_f(S[r + g], a->softcap2);
                    if (sl) S[r + g] = alibi_bias(S[r + g], sl[h * G + (r + g) % G], dg[r + g], j);
                }
            }
            /* online softmax per row, 16 keys per vector; a row that sees no key of
               the block gets p = 0 */
            for (int64_t r = 0; r < R; r++) {
                float *x = st + (h * R + r) * W;
                int64_t t0 = lo[r] - j, t1 = hi[r] - j;
                if (t0 < 0) t0 = 0;
                if (t1 > nt) t1 = nt;
                if (t0 >= t1) { S[r] = (vf){0}; continue; }
                const vi valid = (IOTA >= (int)t0) & (IOTA < (int)t1);
                const vf sv = vsel(valid, S[r], (vf){0} - INFINITY);
                const float bm = hmax(sv);
                const float m = x[DS], mn = bm > m ? bm : m;
                const vf p = (vf)((vi)vexp2(sv - mn) & valid);
                S[r] = p;
                if (mn > m) {               /* rescale only when the max moved */
                    const float alpha = exp2f(m - mn);   /* 0 on the first block (m = -inf) */
                    x[DS + 1] *= alpha;
                    for (int64_t d = 0; d < DS; d++) x[d] *= alpha;
                    x[DS] = mn;
                }
                x[DS + 1] += hsum(p);
            }
            for (int64_t r = 0; r < R; r += RG) {
                float *x0 = st + (h * R + r) * W;
                int c0 = 0;
                for (; c0 + 4 <= ND; c0 += 4) pv_group(a, vp, nt, h, S + r, x0, W, c0, 4, BF16, H16, ND, NL);
                if (c0 + 2 <= ND) { pv_group(a, vp, nt, h, S + r, x0, W, c0, 2, BF16, H16, ND, NL); c0 += 2; }
                if (c0 < ND) pv_group(a, vp, nt, h, S + r, x0, W, c0, 1, 0, H16, ND, NL);   /* float32 / fp16, ND odd */
            }
        }
    }
}

#define ITEM_ARGS const args_t *a, int64_t b, int64_t j0, int64_t j1, float *st, char *qb
#define SPECIALISE(ND_) \
    static void item_##ND_##_bf16(ITEM_ARGS) { item(a, b, j0, j1, st, qb, ND_, 1, 0, 0); } \
    static void item_##ND_##_f32(ITEM_ARGS) { item(a, b, j0, j1, st, qb, ND_, 0, 0, 0); } \
    static void item_##ND_##_f16(ITEM_ARGS) { item(a, b, j0, j1, st, qb, ND_, 0, HAVE_F16, 0); }
/* D = 16 ND_ with ND_ odd (session 64: 80 only, Phi-1 / Phi-2's head dim; 48 / 112 take the run-time-ND copy below,
   which measured 0.99-1.08x these copies' time at D = 80 / 64 / 128, each copy costing ~0.4 s of the library's
   build): float32 / fp16 take ND_ whole column vectors; bf16 the ND_ + 1 of D rounded up to 32 (NDB_), its last
   32-column group half (TL: that group's K / V loads masked by tm32) */
#define SPECIALISE_ODD(ND_, NDB_) \
    static void item_##NDB_##_bf16t(ITEM_ARGS) { item(a, b, j0, j1, st, qb, NDB_, 1, 0, 1); } \
    static void item_##ND_##_f32(ITEM_ARGS) { item(a, b, j0, j1, st, qb, ND_, 0, 0, 0); } \
    static void item_##ND_##_f16(ITEM_ARGS) { item(a, b, j0, j1, st, qb, ND_, 0, HAVE_F16, 0); }
/* FT_COPIES (tests' variant builds only, load_variant(dims=...)): a bit mask of the specialised copies compiled,
   bit i for COPY_DIMS[i] = 32 / 64 / 80 / 96 / 128 / 192 / 256; the other head dims take the run-time-ND copy. Each
   copy costs ~1.4 s of the library's ~13.5 s build (session 65, this VM), and a variant test needs one or two */
#ifndef FT_COPIES
#define FT_COPIES 127
#endif
#if FT_COPIES & 1
SPECIALISE(2)
#endif
#if FT_COPIES & 2
SPECIALISE(4)
#endif
#if FT_COPIES & 4
SPECIALISE_ODD(5, 6)
#endif
#if FT_COPIES & 8
SPECIALISE(6)
#endif
#if FT_COPIES & 16
SPECIALISE(8)
#endif
#if FT_COPIES & 32
SPECIALISE(12)
#endif
#if FT_COPIES & 64
SPECIALISE(16)
#endif
/* Every other multiple of 8 up to 256 (session 64): ND at run time (the loops over columns stay loops; bf16's q
   registers become stack slots), the last vector partial by the masks (TL) */
#define ND_ANY(a) ((a)->ek == 1 ? (int)((a)->DS / VL) : (int)(((a)->D + VL - 1) / VL))
static void item_any_bf16(ITEM_ARGS) { item(a, b, j0, j1, st, qb, ND_ANY(a), 1, 0, 1); }
static void item_any_f32(ITEM_ARGS) { item(a, b, j0, j1, st, qb, ND_ANY(a), 0, 0, 1); }
static void item_any_f16(ITEM_ARGS) { item(a, b, j0, j1, st, qb, ND_ANY(a), 0, HAVE_F16, 1); }

typedef void (*item_fn)(const args_t *, int64_t, int64_t, int64_t, float *, char *);

/* The copy for head dim D (a multiple of 8, 8 .. 256) and the caches' element kind ek (0 float32, 1 bf16, 2 fp16):
   a specialised one for 32 / 64 / 80 / 96 / 128 / 192 / 256, else the run-time-ND copy */
static item_fn pick(int64_t D, int64_t ek) {
#define PICK(ND_) return ek == 1 ? item_##ND_##_bf16 : ek == 2 ? item_##ND_##_f16 : item_##ND_##_f32
#define PICK_ODD(ND_) return ek == 2 ? item_##ND_##_f16 : item_##ND_##_f32
#if FT_COPIES & 4
    if (ek == 1 && D == 80) return item_6_bf16t;
#endif
    if (D % (ek == 1 ? 32 : 16) == 0)
        switch (D / VL) {
#if FT_COPIES & 1
        case 2: PICK(2);
#endif
#if FT_COPIES & 2
        case 4: PICK(4);
#endif
#if FT_COPIES & 4
        case 5: PICK_ODD(5);
#endif
#if FT_COPIES & 8
        case 6: PICK(6);
#endif
#if FT_COPIES & 16
        case 8: PICK(8);
#endif
#if FT_COPIES & 32
        case 12: PICK(12);
#endif
#if FT_COPIES & 64
        case 16: PICK(16);
#endif
        default: break;
        }
#undef PICK
#undef PICK_ODD
    return ek == 1 ? item_any_bf16 : ek == 2 ? item_any_f16 : item_any_f32;
}


/* 1: bf16 scores take vdpbf16ps (AVX512-BF16 built in) */
int ft_dpbf16(void) { return DPBF16; }
/* 1: float32 caches, and bf16 ones with AVX512-BF16, take head_blk (AVX-512 built in) */
int ft_blk512(void) { return BLK512; }
/* 1: fp16 caches are built in (the compiler has _Float16) */
int ft_f16(void) { return HAVE_F16; }
/* 1: the AMX step (head_amx) is built in (the FT_AMX build with a compiler that has AMX) */
int ft_decode_amx(void) { return AMXD; }
/* 1: this process may use AMX tile data (the permission: native_prefill's ft_amx_init) */
int ft_decode_amx_permitted(void) {
#if AMXD
    return amx_permitted();
#else
    return 0;
#endif
}

/* meta (int64): start (B), cache row (B), klo (B), khi (B), rlo (B * Sq), rhi (B * Sq), and with ALiBi (ft_decode_ex's
   alibi not 0) nk (B), the keys of each sequence. alibi: float32 slopes, sequence b's H at alibi + b * alibi_bs;
   softcap2: softcap * log2(e), 0 without (qscale then softmax_scale / softcap); neither with amx (head_amx has
   neither). ek: the caches' element kind, 0 float32, 1 bf16, 2 fp16 (ft_f16). q, out (B, Sq, H, D) in the cache's
   dtype with byte strides; lse (B, H, Sq) float32 contiguous (natural log); work (B, splits, Hk, R, DS + 16)
   float32, 64-byte aligned (DS: D rounded up to 32; D any multiple of 8 up to 256, pick()). R: rows per KV head
   padded to a multiple of RG. Returns 0, 1 / 2 for a problem the
   kernel does not take (decode.py checks first), 4 when out of memory. */
#ifdef FT_TRACE
/* measurement knob (session 44): TSC stamps of one call. [0] entry, [1] return; per thread t < 4 at 8 + 64 t:
   [0] region entry, [1] after the item loop's barrier, [2] merge end, [3] items done, then per item (start, end, id) */
#include <x86intrin.h>
uint64_t ft_trace[512];
uint64_t ft_rdtsc(void) { return __rdtsc(); }
#define TRACE(i, x) (ft_trace[i] = (x))
#else
#define TRACE(i, x) ((void)0)
#endif
int ft_decode_ex(const char *k, const char *v, int64_t sb, int64_t sp, int64_t sh, int64_t page,
                 const int32_t *table, int64_t table_stride, const int64_t *meta,
                 const char *q, int64_t qsb, int64_t qss, int64_t qsh, float qscale,
                 int64_t B, int64_t Hk, int64_t Sq, int64_t G, int64_t R, int64_t D, int64_t splits, int64_t ek,
                 float *work, char *out, int64_t osb, int64_t oss, int64_t osh, float *lse, int nthreads, int amx,
                 const float *alibi, int64_t alibi_bs, float softcap2) {
    const int64_t DS = (D + 31) & ~(int64_t)31, W = DS + 16, Rreal = Sq * G;
    TRACE(0, __rdtsc());
    if (R > MAXR || R % RG || R < Rreal || D % 8 || D < 8 || D > 16 * VL) return 1;
    if (amx && (ek != 1 || !AMXD || alibi || softcap2 != 0.0f || D != DS)) return 1;
    if (ek == 2 && !HAVE_F16) return 2;
#if AMXD
    if (amx && !amx_permitted()) return 5;     /* a tile instruction would raise SIGILL */
#endif
    item_fn fn = pick(D, ek);
    if (!fn) return 2;
    const int64_t *start = meta, *row = meta + B, *klo = meta + 2 * B, *khi = meta + 3 * B;
    const int64_t *rlo = meta + 4 * B, *rhi = meta + 4 * B + B * Sq;
    args_t a = {k, v, sb, sp, sh, page, table, table_stride, row, start, rlo, rhi, klo, khi, q, qsb, qss, qsh,
                qscale, B, Hk, Sq, G, R, D, splits, ek, DS, D % 16 ? (1u << D % 16) - 1 : 0xffffu,
                D % 32 ? (1u << D % 32) - 1 : 0xffffffffu, amx, work, alibi, alibi_bs, rhi + B * Sq, softcap2};
    const int64_t items = B * splits, per_item = Hk * R * W;
    int oom = 0;
    #pragma omp parallel num_threads(nthreads)
    {
#ifdef FT_TRACE
        const int tid_ = omp_get_thread_num(), tb_ = 8 + 64 * (tid_ & 3);
        int ni_ = 0;
        TRACE(tb_, __rdtsc());
#endif
        /* per thread: an item's q rows, 64-byte aligned (a 64-byte load across two lines
           costs two) */
        char *qbuf = aligned_alloc(64, ((size_t)(Hk * R * DS) * 4 + (size_t)KP_MAX * 2 * 16 * D * 2 + 63)
                                       & ~(size_t)63);   /* + AMX staging (item) */
        if (!qbuf) {
            #pragma omp atomic write
            oom = 1;
        }
#if AMXD
        if (amx) amx_dec_config();      /* per thread (other code may have changed it) */
#endif
        #pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            if (!qbuf) continue;
            const int64_t b = it / splits, s = it % splits;
            const int64_t n = khi[b] - klo[b] > 0 ? khi[b] - klo[b] : 0;
            const int64_t per = (n + splits - 1) / splits;
            int64_t j0 = klo[b] + s * per, j1 = j0 + per;
            if (j1 > klo[b] + n) j1 = klo[b] + n;
            if (j0 > j1) j0 = j1;
#ifdef FT_TRACE
            if (ni_ < 19) { TRACE(tb_ + 4 + 3 * ni_, __rdtsc()); TRACE(tb_ + 6 + 3 * ni_, it); }
#endif
            fn(&a, b, j0, j1, work + it * per_item, qbuf);
#ifdef FT_TRACE
            if (ni_ < 19) TRACE(tb_ + 5 + 3 * ni_++, __rdtsc());
#endif
        }
#ifdef FT_TRACE
        TRACE(tb_ + 3, ni_);
        #pragma omp barrier
        TRACE(tb_ + 1, __rdtsc());
#endif
        free(qbuf);
#if AMXD
        if (amx) _tile_release();
#endif
        /* logsumexp merge of the pieces of each (sequence, KV head, row), in piece
           order, normalised and written to out / lse in q's layout (the loop's
           implicit barrier above makes oom final here) */
        #pragma omp for schedule(static)
        for (int64_t x = 0; x < (oom ? 0 : B * Hk * R); x++) {
            const int64_t b = x / (Hk * R), hr = x % (Hk * R), h = hr / R, r = hr % R;
            if (r >= Rreal) continue;                       /* a padding row */
            const int64_t i = r / G, head = h * G + r % G;
            float M = -INFINITY;
            for (int64_t s = 0; s < splits; s++) {
                float m = work[((b * splits + s) * Hk * R + hr) * W + DS];
                M = m > M ? m : M;
            }
            float o[16 * VL];       /* in the state's column order, DS wide (pvi / eo place columns < D up to DS) */
            for (int64_t d = 0; d < DS; d++) o[d] = 0.0f;
            float L = 0.0f;
            if (M > -INFINITY) {
                for (int64_t s = 0; s < splits; s++) {
                    const float *st = work + ((b * splits + s) * Hk * R + hr) * W;
                    if (!(st[DS] > -INFINITY)) continue;     /* an empty piece */
                    float w = exp2f(st[DS] - M);
                    L += w * st[DS + 1];
                    for (int64_t d = 0; d < DS; d++) o[d] += w * st[d];
                }
            }
            float *lrow = lse + (b * Hk * G + head) * Sq + i;
            char *orow = out + b * osb + i * oss + head * osh;
            if (L > 0.0f) {
                float inv = 1.0f / L;
                for (int64_t d = 0; d < DS; d++) o[d] *= inv;
                *lrow = (M + log2f(L)) * 0.6931471805599453f;
                const int64_t p = i + a.nk[b] - Sq;          /* ALiBi: flash-attn's lse of an anchored row */
                if (alibi && p < 0) *lrow += alibi[b * alibi_bs + head] * (float)p;
            } else {
                *lrow = INFINITY;                           /* no key: out 0, lse +inf */
            }
            if (ek == 1 && BLK512 && DPBF16 && !amx)   /* the vdpbf16ps P @ V order (pvi) */
                for (int64_t d = 0; d < D; d++) { uint16_t y = f32_to_bf16(o[pvi(d)]); memcpy(orow + 2 * d, &y, 2); }
            else if (ek == 1)   /* [even, odd] order (the V loads; AMX: the even / odd products) */
                for (int64_t d = 0; d < D; d++) { uint16_t y = f32_to_bf16(o[eo(d)]); memcpy(orow + 2 * d, &y, 2); }
#if HAVE_F16
            else if (ek == 2)   /* fp16: in order, rounded to nearest even */
                for (int64_t d = 0; d < D; d++) { const _Float16 y = (_Float16)o[d]; memcpy(orow + 2 * d, &y, 2); }
#endif
            else
                memcpy(orow, o, (size_t)D * 4);
        }
#ifdef FT_TRACE
        TRACE(tb_ + 2, __rdtsc());
#endif
    }
    TRACE(1, __rdtsc());
    return oom ? 4 : 0;
}
/* ft_decode_ex without ALiBi (the entry the measurement tools in bench/ call) */
int ft_decode(const char *k, const char *v, int64_t sb, int64_t sp, int64_t sh, int64_t page,
              const int32_t *table, int64_t table_stride, const int64_t *meta,
              const char *q, int64_t qsb, int64_t qss, int64_t qsh, float qscale,
              int64_t B, int64_t Hk, int64_t Sq, int64_t G, int64_t R, int64_t D, int64_t splits, int64_t ek,
              float *work, char *out, int64_t osb, int64_t oss, int64_t osh, float *lse, int nthreads, int amx) {
    return ft_decode_ex(k, v, sb, sp, sh, page, table, table_stride, meta, q, qsb, qss, qsh, qscale, B, Hk, Sq, G, R,
                        D, splits, ek, work, out, osb, oss, osh, lse, nthreads, amx, 0, 0, 0.0f);
}

/* ft_decode with the key ranges and the split count derived here from the int32 index tensors (session 56:
   on the host, lens.tolist(), the range lists and the meta array took ~50-80 us of a cold L = 8k call).
   Sequence b: start = leftpad ? leftpad[b] : 0, n = lens[b] + snew - start keys at cache positions start +
   [0, n); cache row rows ? rows[b] : b (0 when paged: the table maps its pages); query i (of Sq) sees keys
   [lo, hi) by tiles.Band's rule (i + off - left <= j <= i + off + right, off = n - Sq, 0 <= j < n; a negative
   left / right: unbounded); klo / khi: the keys some query of b sees.
   splits: splits_req when > 0, else max(1, min(ceil(per_thread * nthreads / B), width / min_piece)), width the
   widest [klo, khi); work must hold the most (splits_req, else max(1, ceil(per_thread * nthreads / B))).
   k_new / v_new (not null: snew new tokens, byte strides knb / kns / knh and vnb / vns / vnh, the caches' dtype,
   rows of D contiguous, k_new already rotated) are copied into the caches at positions lens[b] + [0, snew) of
   sequence b's row (its pages when paged) before any key is read (session 56: the host's index writes took
   ~0.1-0.2 ms of a cold call). alibi / alibi_bs: as ft_decode_ex's (0: none). */
static int decode_lens(const char *k, const char *v, int64_t sb, int64_t sp, int64_t sh, int64_t page,
                   const int32_t *table, int64_t table_stride, const int32_t *lens, const int32_t *leftpad,
                   const int32_t *rows, int64_t snew, const char *k_new, const char *v_new, int64_t knb, int64_t kns,
                   int64_t knh, int64_t vnb, int64_t vns, int64_t vnh, int64_t left, int64_t right,
                   const char *q, int64_t qsb, int64_t qss, int64_t qsh, float qscale,
                   int64_t B, int64_t Hk, int64_t Sq, int64_t G, int64_t R, int64_t D, int64_t splits_req,
                   int64_t per_thread, int64_t min_piece, int64_t ek,
                   float *work, char *out, int64_t osb, int64_t oss, int64_t osh, float *lse, int nthreads, int amx,
                   const float *alibi, int64_t alibi_bs, float softcap2) {
    if (B <= 0) return 0;
    int64_t stack_meta[64];
    const int64_t need = B * (5 + 2 * Sq);
    int64_t *meta = need <= 64 ? stack_meta : malloc((size_t)need * sizeof(int64_t));
    if (!meta) return 4;
    int64_t *start = meta, *row = meta + B, *klo = meta + 2 * B, *khi = meta + 3 * B;
    int64_t *rlo = meta + 4 * B, *rhi = meta + 4 * B + B * Sq, *nk = rhi + B * Sq;
    int64_t width = 0;
    for (int64_t b = 0; b < B; b++) {
        start[b] = leftpad ? leftpad[b] : 0;
        row[b] = table ? 0 : rows ? rows[b] : b;
        int64_t nb = (int64_t)lens[b] + snew - start[b];
        if (nb < 0) nb = 0;
        nk[b] = nb;
        for (int64_t i = 0; i < Sq; i++) {
            int64_t lo = 0, hi = nb;
            if (left >= 0) { lo = i + nb - Sq - left; if (lo < 0) lo = 0; }
            if (right >= 0) { hi = i + nb - Sq + right + 1; if (hi > nb) hi = nb; }
            rlo[b * Sq + i] = lo; rhi[b * Sq + i] = hi;
        }
        klo[b] = rlo[b * Sq]; khi[b] = rhi[b * Sq + Sq - 1];
        if (b == 0 || khi[b] - klo[b] > width) width = khi[b] - klo[b];
        /* k_new / v_new (B, snew, Hk, D), already rotated: written at cache positions lens[b] + i first */
        for (int64_t i = 0; k_new && i < snew; i++) {
            const int64_t pos = (int64_t)lens[b] + i;
            const int64_t off = table ? (int64_t)table[b * table_stride + pos / page] * sb + (pos % page) * sp
                                      : row[b] * sb + pos * sp;
            for (int64_t h = 0; h < Hk; h++) {
                memcpy((char *)k + off + h * sh, k_new + b * knb + i * kns + h * knh, (size_t)D * (ek ? 2 : 4));
                memcpy((char *)v + off + h * sh, v_new + b * vnb + i * vns + h * vnh, (size_t)D * (ek ? 2 : 4));
            }
        }
    }
    int64_t splits = splits_req;
    if (splits <= 0) {
        splits = (per_thread * nthreads + B - 1) / B;
        if (width / min_piece < splits) splits = width / min_piece;
        if (splits < 1) splits = 1;
    }
    const int rc = ft_decode_ex(k, v, sb, sp, sh, page, table, table_stride, meta, q, qsb, qss, qsh, qscale, B, Hk,
                                Sq, G, R, D, splits, ek, work, out, osb, oss, osh, lse, nthreads, amx, alibi,
                                alibi_bs, softcap2);
    if (meta != stack_meta) free(meta);
    return rc;
}
int ft_decode_lens(const char *k, const char *v, int64_t sb, int64_t sp, int64_t sh, int64_t page,
                   const int32_t *table, int64_t table_stride, const int32_t *lens, const int32_t *leftpad,
                   const int32_t *rows, int64_t snew, const char *k_new, const char *v_new, int64_t knb, int64_t kns,
                   int64_t knh, int64_t vnb, int64_t vns, int64_t vnh, int64_t left, int64_t right,
                   const char *q, int64_t qsb, int64_t qss, int64_t qsh, float qscale,
                   int64_t B, int64_t Hk, int64_t Sq, int64_t G, int64_t R, int64_t D, int64_t splits_req,
                   int64_t per_thread, int64_t min_piece, int64_t ek,
                   float *work, char *out, int64_t osb, int64_t oss, int64_t osh, float *lse, int nthreads, int amx) {
    return decode_lens(k, v, sb, sp, sh, page, table, table_stride, lens, leftpad, rows, snew, k_new, v_new, knb, kns,
                       knh, vnb, vns, vnh, left, right, q, qsb, qss, qsh, qscale, B, Hk, Sq, G, R, D, splits_req,
                       per_thread, min_piece, ek, work, out, osb, oss, osh, lse, nthreads, amx, 0, 0, 0.0f);
}
/* ft_decode_lens with its per-step constants in one array c (session 57: a cold ctypes call costs ~0.8 us an
   argument; decode.CompiledLaunch builds c once a step): c = sb, sp, sh, page, table_stride, snew, knb, kns, knh,
   vnb, vns, vnh, left, right, qsb, qss, qsh, B, Hk, Sq, G, R, D, splits_req, ek, osb, oss, osh, amx, alibi_bs;
   alibi: ALiBi slopes (0: none; see ft_decode_ex); softcap2: softcap * log2(e) (0: none). */
int ft_decode_packed(const int64_t *c, float qscale, const char *k, const char *v, const int32_t *table,
                     const int32_t *lens, const int32_t *leftpad, const int32_t *rows, const char *k_new,
                     const char *v_new, const char *q, float *work, char *out, float *lse, int64_t per_thread,
                     int64_t min_piece, int nthreads, const float *alibi, float softcap2) {
    return decode_lens(k, v, c[0], c[1], c[2], c[3], table, c[4], lens, leftpad, rows, c[5], k_new, v_new,
                       c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], q, c[14], c[15], c[16], qscale,
                       c[17], c[18], c[19], c[20], c[21], c[22], c[23], per_thread, min_piece, c[24], work, out,
                       c[25], c[26], c[27], lse, nthreads, (int)c[28], alibi, c[29], softcap2);
}
"""

FLAGS = ["-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-ffp-contract=fast", "-fno-math-errno"]

COMPILE_SECONDS: float | None = None   # the last compile in this process (None: loaded from cache)


def _compiler() -> str:
    for c in (os.environ.get("CC"), "cc", "gcc"):
        if c and shutil.which(c):
            return c
    raise NativeUnavailable("no C compiler found (set CC, or install gcc / cc); "
                            "or select the torch-ops decode path: FLASHTRITON_CPU_DECODE=ops")


def _cpu_key() -> str:
    """What -march=native depends on: the CPU's model and feature flags."""
    info = platform.processor() + platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "model name")):
                    info += line
                if line.startswith("flags"):
                    break
    except OSError:
        pass
    return info


def cache_dir() -> str:
    d = os.environ.get("FLASHTRITON_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "flashtriton")
    return d


def _build(defines: tuple = (), source: str = C_SOURCE, stem: str = "decode", extra_flags: tuple = ()) -> str:
    """Path of the compiled library of `source` (the decode kernel unless given; the
    prefill kernel of native_prefill.py shares this builder): from the cache, else
    compiled now. The file name starts with `stem`; extra_flags go after FLAGS (the
    AMX prefill build: -mamx-tile -mamx-bf16)."""
    global COMPILE_SECONDS
    cc = _compiler()
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise NativeUnavailable(f"C compiler {cc!r} does not run: {e}") from e
    flags = FLAGS + list(extra_flags) + [f"-D{x}" for x in defines]
    key = hashlib.sha256("\0".join([source, " ".join(flags), cc, version, _cpu_key()]).encode()).hexdigest()[:20]
    d = cache_dir()
    path = os.path.join(d, f"{stem}_{key}.so")
    if os.path.exists(path):
        return path
    t0 = time.perf_counter()
    try:
        os.makedirs(d, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=d) as tmp:
            src = os.path.join(tmp, f"{stem}.c")
            with open(src, "w") as f:
                f.write(source)
            lib = os.path.join(tmp, f"{stem}.so")
            res = subprocess.run([cc, *flags, src, "-o", lib, "-lm"], capture_output=True, text=True)
            if res.returncode != 0:
                raise NativeUnavailable(f"compiling the {stem} kernel with {cc} failed:\n{res.stderr[-2000:]}")
            os.replace(lib, path)   # atomic: concurrent processes see a whole library or none
    except OSError as e:
        raise NativeUnavailable(f"building the {stem} kernel in {d} failed ({e}); set FLASHTRITON_CACHE_DIR "
                                f"to a writable directory") from e
    COMPILE_SECONDS = time.perf_counter() - t0
    return path


def _open(path: str, amx: bool = False):
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise NativeUnavailable(f"loading the compiled decode kernel failed: {e}") from e
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ft_decode.argtypes = [ptr, ptr, i64, i64, i64, i64, ptr, i64, ptr, ptr, i64, i64, i64, ctypes.c_float,
                              i64, i64, i64, i64, i64, i64, i64, i64, ptr, ptr, i64, i64, i64, ptr, ctypes.c_int,
                              ctypes.c_int]
    lib.ft_decode.restype = ctypes.c_int
    # ft_decode_lens: the entry ft_decode_packed wraps (decode.py calls the packed one; an older revision's
    # decode.py, which the A/B tools load, calls this one)
    lib.ft_decode_lens.argtypes = [ptr, ptr, i64, i64, i64, i64, ptr, i64, ptr, ptr, ptr, i64, ptr, ptr, i64, i64,
                                   i64, i64, i64, i64, i64, i64, ptr, i64, i64, i64, ctypes.c_float, i64, i64, i64,
                                   i64, i64, i64, i64, i64, i64, i64, ptr, ptr, i64, i64, i64, ptr, ctypes.c_int,
                                   ctypes.c_int]
    lib.ft_decode_lens.restype = ctypes.c_int
    lib.ft_decode_packed.argtypes = [ptr, ctypes.c_float] + [ptr] * 12 + [i64, i64, ctypes.c_int, ptr, ctypes.c_float]
    lib.ft_decode_packed.restype = ctypes.c_int
    for name in ("ft_decode_amx", "ft_decode_amx_permitted", "ft_f16"):
        getattr(lib, name).argtypes = []
        getattr(lib, name).restype = ctypes.c_int
    lib.amx = amx       # bf16 calls on this library run the AMX step (decode.CompiledLaunch passes it)
    lib.ft_dpbf16.argtypes = []
    lib.ft_dpbf16.restype = ctypes.c_int
    lib.ft_blk512.argtypes = []
    lib.ft_blk512.restype = ctypes.c_int
    return lib


class LazyLibrary:
    """A library compiled (or taken from the disk cache) and loaded on first use. A failed
    build is remembered and its error raised again, so a process without a compiler
    tries once. Shared by the decode kernel here and native_prefill.py."""

    def __init__(self, build_and_open):
        self._build_and_open = build_and_open
        self._lock = threading.Lock()
        self.lib = None
        self.error: str | None = None

    def get(self):
        if self.lib is not None:
            return self.lib
        with self._lock:
            if self.lib is None:
                if self.error is not None:
                    raise NativeUnavailable(self.error)
                try:
                    self.lib = self._build_and_open()
                except NativeUnavailable as e:
                    self.error = str(e)
                    raise
        return self.lib


_library = LazyLibrary(lambda: _open(_build()))
# bf16 caches where the CPU's bf16 products are the slower ones (config.bf16_products() False;
# session 36): the FT_NO_DPBF16 build, K / V widened to float32 in registers, FMAs instead of
# vdpbf16ps (bench/cpu/s36_decode_nodpbf16_ab.py on session 36's VM: 0.964x / 0.919x the time at L = 8k
# / 32k)
_fma_library = LazyLibrary(lambda: _open(_build(("FT_NO_DPBF16",))))


def _open_amx(path: str):
    """The AMX build (FT_AMX), once this process holds the tile-data permission: requested
    by native_prefill's ft_amx_init (process-wide, one helper for both kernels) and checked
    here with ARCH_GET_XCOMP_PERM."""
    from . import native_prefill
    native_prefill.load_amx()       # raises NativeUnavailable naming the cause
    lib = _open(path, amx=True)
    if not lib.ft_decode_amx():
        raise NativeUnavailable("the AMX decode build has no AMX step (the compiler defined no __AMX_TILE__ / "
                                "__AMX_BF16__, or no AVX512-BF16)")
    if not lib.ft_decode_amx_permitted():
        raise NativeUnavailable("arch_prctl(ARCH_GET_XCOMP_PERM) does not show XTILEDATA")
    return lib


def _build_amx(defines: tuple = ()):
    from .native_prefill import AMX_FLAGS
    return _build(("FT_AMX", *defines), stem="decode_amx", extra_flags=AMX_FLAGS)


_amx_library = LazyLibrary(lambda: _open_amx(_build_amx()))


def load_amx():
    """The AMX decode build with the permission granted (compiled on first use, cached on
    disk); raises NativeUnavailable naming the cause: a CPU without AMX, a compile error,
    the permission refused."""
    from .native_prefill import cpu_has_amx
    if not cpu_has_amx():
        raise NativeUnavailable("this CPU has no AMX (amx_tile / amx_bf16 not in /proc/cpuinfo's flags)")
    return _amx_library.get()


def load():
    """The loaded decode library (compiled on first use); raises NativeUnavailable."""
    return _library.get()


def load_fma():
    """The FT_NO_DPBF16 build (compiled on first use, cached on disk); raises NativeUnavailable."""
    return _fma_library.get()


COPY_DIMS = (32, 64, 80, 96, 128, 192, 256)   # the specialised copies, C's FT_COPIES bits in this order


def load_variant(*defines: str, dims=None):
    """A separately built copy with extra preprocessor defines (tests: FT_NO_DPBF16
    builds the float32-FMA bf16 score path that CPUs without AVX512-BF16 run;
    FT_NO_BLK512 the portable vector-extension step that CPUs without AVX-512 run). dims: the head dims
    (of COPY_DIMS) whose specialised copies the build keeps (FT_COPIES; every other D runs the run-time-ND
    copy); None keeps them all."""
    if dims is not None:
        bad = [d for d in dims if d not in COPY_DIMS]
        if bad:
            raise ValueError(f"dims: {bad} have no specialised copy (COPY_DIMS {COPY_DIMS})")
        defines = (*defines, f"FT_COPIES={sum(1 << COPY_DIMS.index(d) for d in set(dims))}")
    if "FT_AMX" in defines:
        return _open_amx(_build_amx(tuple(d for d in defines if d != "FT_AMX")))
    return _open(_build(tuple(defines)))


MAX_ROWS = 256   # C's MAXR: query rows (Sq * G) per KV head


def supports(dtype: torch.dtype, head_dim: int, rows: int) -> bool:
    """Whether the kernel takes this problem (bf16 / fp16 / float32 cache - fp16 where the
    build has _Float16, ft_f16 - D a multiple of 8 up to 256, at most MAX_ROWS rows per KV head). Since session
    64 every such D: pick() has specialised copies for 32 / 64 / 80 / 96 / 128 / 192 / 256, a run-time-D copy for
    the rest; a row's partial last vector is read by masked loads. AMX takes multiples of 32 only."""
    return (dtype in (torch.bfloat16, torch.float16, torch.float32) and head_dim % 8 == 0 and 8 <= head_dim <= 256
            and rows <= MAX_ROWS)


def state_width(head_dim: int) -> int:
    """The kernel's DS: q's and the partial state's row width, D rounded up to 32 (a work row holds DS + 16 floats:
    DS accumulators, m, l, padding to 64 bytes)."""
    return -(-head_dim // 32) * 32
