"""A compiled elementwise pass of the bf16 backward (cpu/backward.py), built with the
system C compiler on first use and cached on disk like the decode kernel (native._build).

For a (w, r) tile of the bf16 path, bf16 in, bf16 out, in one pass over memory:

    x    = c * s + nlse2[col]          s: S^T - u tile (bf16, unscaled; u a per-row shift,
                                       backward.py), nlse2 = c * u - lse * log2 e
    p    = exp2(x)                     P^T, float32
    p16  = bf16(p)                     the operand of dV += P^T dO
    ds16 = bf16(p * y)                 y: dP^T - delta (bf16), the operand of dK / dQ

which torch ops do in five passes (bf16 -> float32 copy, the scale-and-subtract, exp2_,
the bf16 copy of P, the bf16 product): 37 of 98 ms of the one-thread bf16 backward at
B=1 H=8 N=2048 D=64 (2026-12-02 profile, bench/wip/cpu-bwd-amx.md). The float32 values
are those of the ops path but for exp2: a Cephes-style polynomial (2^f on [-1/2, 1/2],
relative error < 2e-7, against Sleef's ~1 ulp in torch.exp2_), far below the bf16
rounding of p that follows; x = -inf (masked) gives exactly 0 (as does any x <= -127:
p < 2^-127 is flushed), NaN stays NaN.
The float32 path (lse and delta folded into its products) has ft_bwd_pds_f32: P = exp2(x)
and dS = P * y in place, one pass instead of exp2_ and mul_. Rounding to bf16 is
round-to-nearest-even, as torch's (vcvtneps2bf16 where AVX512-BF16 exists: the
integer rounding takes 9 of the ~45 vector instructions per 16 elements, twice; 0.46
ns / element without it on the AMX machine). AVX-512 (F, BW, VL) intrinsics,
16 lanes, where -march=native has them (gcc 12 did not vectorise the plain C loop:
5 ns / element), the same math in plain C for the tails and other CPUs; rows are
split over `threads` OpenMP threads.
"""
from __future__ import annotations

import ctypes

import torch

from . import native
from .native import NativeUnavailable

C_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>

static inline float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f2bf(float f) {           /* round to nearest even; NaN stays NaN */
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u;
    return (uint16_t)(((u & 0x7fffffffu) > 0x7f800000u) ? nan : r);
}

static inline float exp2_poly(float x) {
    /* clamp keeping NaN (the comparisons are false for NaN): 2^-127 scales to 0 below */
    x = (x < -127.0f) ? -127.0f : x;
    x = (x > 127.0f) ? 127.0f : x;
    float n = floorf(x + 0.5f);
    float f = x - n;                              /* [-1/2, 1/2] */
    float p = 1.535336188319500e-4f;
    p = p * f + 1.339887440266574e-3f;
    p = p * f + 9.618437357674640e-3f;
    p = p * f + 5.550332471162809e-2f;
    p = p * f + 2.402264791363012e-1f;
    p = p * f + 6.931472028550421e-1f;
    p = p * f + 1.0f;
    int32_t e = (int32_t)n + 127;                 /* n = -127: e = 0, the scale is +0.0 */
    e = e < 0 ? 0 : e;
    uint32_t bits = (uint32_t)e << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && !defined(FT_NO_VEC)
#include <immintrin.h>
#define FT_VEC 1
/* exp2_poly on 16 lanes: the same clamps, polynomial and scale; x <= -127 (and -inf)
   gives exactly 0 (the lane is zeroed), NaN stays NaN (unordered compares are true). */
static inline __m512 exp2_v(__m512 x) {
    __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-127.0f), _CMP_NLE_UQ);
    x = _mm512_max_ps(_mm512_set1_ps(-127.0f), x);        /* max(a, NaN) = NaN: the second operand */
    x = _mm512_min_ps(_mm512_set1_ps(127.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_add_ps(x, _mm512_set1_ps(0.5f)), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(live, p, n);
}

static inline __m512 bf2f_v(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __m256i f2bf_v(__m512 f) {                  /* f2bf on 16 lanes */
#if defined(__AVX512BF16__) && !defined(FT_NO_BF16CVT)
    return (__m256i)_mm512_cvtneps_pbh(f);                 /* one instruction: RNE, NaN stays NaN */
#else
    __m512i u = _mm512_castps_si512(f);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
#endif
}
#endif

/* One row of r elements. */
static void pds_row(const uint16_t *restrict s, const uint16_t *restrict y, const float *restrict nlse2, float c,
                    int64_t r, uint16_t *restrict p16, uint16_t *restrict ds16) {
    int64_t j = 0;
#ifdef FT_VEC
    __m512 cv = _mm512_set1_ps(c);
    for (; j + 16 <= r; j += 16) {
        __m512 sv = bf2f_v(_mm256_loadu_si256((const __m256i *)(s + j)));
        __m512 x = _mm512_fmadd_ps(cv, sv, _mm512_loadu_ps(nlse2 + j));
        __m512 p = exp2_v(x);
        _mm256_storeu_si256((__m256i *)(p16 + j), f2bf_v(p));
        __m512 yv = bf2f_v(_mm256_loadu_si256((const __m256i *)(y + j)));
        _mm256_storeu_si256((__m256i *)(ds16 + j), f2bf_v(_mm512_mul_ps(p, yv)));
    }
#endif
    for (; j < r; j++) {
        float p = exp2_poly(c * bf2f(s[j]) + nlse2[j]);
        p16[j] = f2bf(p);
        ds16[j] = f2bf(p * bf2f(y[j]));
    }
}

/* s, y, p16, ds16: (w, r) bf16 row-major, row strides ls, ly, lp, ld elements;
   nlse2: (r,) float32. */
int ft_bwd_pds_bf16(const uint16_t *s, int64_t ls, const uint16_t *y, int64_t ly, const float *nlse2,
                    float c, int64_t w, int64_t r, uint16_t *p16, int64_t lp, uint16_t *ds16, int64_t ld,
                    int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t i = 0; i < w; i++)
        pds_row(s + i * ls, y + i * ly, nlse2, c, r, p16 + i * lp, ds16 + i * ld);
    return 0;
}

/* float32 tiles, in place: x (w, r) -> P = exp2(x); y (w, r) -> dS = P * y. */
static void pds_row_f32(float *restrict x, float *restrict y, int64_t r) {
    int64_t j = 0;
#ifdef FT_VEC
    for (; j + 16 <= r; j += 16) {
        __m512 p = exp2_v(_mm512_loadu_ps(x + j));
        _mm512_storeu_ps(x + j, p);
        _mm512_storeu_ps(y + j, _mm512_mul_ps(p, _mm512_loadu_ps(y + j)));
    }
#endif
    for (; j < r; j++) {
        float p = exp2_poly(x[j]);
        x[j] = p;
        y[j] *= p;
    }
}

int ft_bwd_pds_f32(float *x, int64_t lx, float *y, int64_t ly, int64_t w, int64_t r, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t i = 0; i < w; i++)
        pds_row_f32(x + i * lx, y + i * ly, r);
    return 0;
}
"""


def _open(path: str):
    try:
        lib = ctypes.CDLL(path)     # CDLL: the GIL is released during calls (worker threads overlap)
    except OSError as e:
        raise NativeUnavailable(f"loading the compiled backward pass failed: {e}") from e
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ft_bwd_pds_bf16.argtypes = [ptr, i64, ptr, i64, ptr, ctypes.c_float, i64, i64, ptr, i64, ptr, i64,
                                    ctypes.c_int]
    lib.ft_bwd_pds_bf16.restype = ctypes.c_int
    lib.ft_bwd_pds_f32.argtypes = [ptr, i64, ptr, i64, i64, i64, ctypes.c_int]
    lib.ft_bwd_pds_f32.restype = ctypes.c_int
    return lib


_library = native.LazyLibrary(lambda: _open(native._build(source=C_SOURCE, stem="bwd_ew")))


def load():
    """The loaded library, or None when it cannot be built here (no compiler ...): the
    backward then keeps its torch-ops passes. The error is remembered (one try)."""
    try:
        return _library.get()
    except NativeUnavailable:
        return None


def load_variant(*defines: str):
    """A separately built copy (tests): FT_NO_BF16CVT rounds to bf16 with integer ops (CPUs
    without AVX512-BF16), FT_NO_VEC takes the plain C loop (CPUs without AVX-512)."""
    return _open(native._build(tuple(defines), source=C_SOURCE, stem="bwd_ew"))


def p_ds_bf16(lib, s16, y16, nlse2, c: float, p16, ds16, threads: int) -> None:
    """p16 = bf16(exp2(c * s16 + nlse2)), ds16 = bf16(p * y16), all (w, r) with unit
    column stride; nlse2 (r,) float32 contiguous."""
    w, r = s16.shape
    for t in (s16, y16, p16, ds16):
        if t.dtype != torch.bfloat16 or t.shape != (w, r) or (r > 1 and t.stride(1) != 1):
            raise ValueError("p_ds_bf16 takes (w, r) bf16 tiles with unit column stride")
    if nlse2.dtype != torch.float32 or nlse2.numel() != r or not nlse2.is_contiguous():
        raise ValueError("p_ds_bf16 takes nlse2 as (r,) float32 contiguous")
    lib.ft_bwd_pds_bf16(s16.data_ptr(), s16.stride(0), y16.data_ptr(), y16.stride(0), nlse2.data_ptr(), c, w, r,
                        p16.data_ptr(), p16.stride(0), ds16.data_ptr(), ds16.stride(0), threads)


def p_ds_f32(lib, xt, yt, threads: int) -> None:
    """In place: xt = exp2(xt) (P^T), yt = P^T * yt (dS^T); (w, r) float32, unit column stride."""
    w, r = xt.shape
    for t in (xt, yt):
        if t.dtype != torch.float32 or t.shape != (w, r) or (r > 1 and t.stride(1) != 1):
            raise ValueError("p_ds_f32 takes (w, r) float32 tiles with unit column stride")
    lib.ft_bwd_pds_f32(xt.data_ptr(), xt.stride(0), yt.data_ptr(), yt.stride(0), w, r, threads)
