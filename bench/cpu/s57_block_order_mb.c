/* Microbenchmark (session 57): which read schedules of the CPU decode's bytes let the hardware stream DRAM under
   the compute? The bf16 8k decode's bytes: K and V, 8192 positions x 8 heads x 256 bytes each (2 x 16 MiB), NTH
   threads (env, default 2), each a contiguous share of the positions; per block of C positions a K phase then a V
   phase. W x 8 independent FMAs a 64-byte line stand in for the compute (W = 1: ~8 cycles a line; the kernel
   computes ~60 cycles a key-head = 8 lines). A 256 MiB read before every run (cold caches).
     gcc -O3 -march=native -fopenmp [-DSCRST=0] bench/cpu/s57_block_order_mb.c -o /tmp/bo && [NTH=1] /tmp/bo W ROUNDS
   With the decode kernel (ft_decode, 2 threads, SPLITS items) alternated in each round (cpu/native.py's C_SOURCE
   written to /tmp/decode.c as in s42_decode_harness.c):
     gcc -O3 -march=native -fopenmp -ffp-contract=fast -fno-math-errno -DWITH_KERNEL [-DSPLITS=8] -I/tmp \
         bench/cpu/s57_block_order_mb.c -o /tmp/bok -lm && /tmp/bok W ROUNDS
   Schemes (medians of rounds that run every scheme in turn):
     addr        address order (position, then head), demand loads only
     hm<C>       each head's rows of a block of C positions in turn, demand loads only
     pf<C>       hm<C> plus prefetcht1 of the next phase's block spread over this phase (the kernel's PF_SPLIT)
     t<C>        hm<C> plus demand loads ("touches") of the next phase's block in address order instead
     tL1_<C>     t<C> with the compute reading a 4 KiB L1-resident buffer instead of the block
     t2d<D>      t2 touching D phases ahead
     b64m<M>     blocks of 64 positions per phase computed in mini-blocks of M positions, touching the next mini-block
                 of the stream (the schedule of bench/wip/cpu-decode-blk-stream.diff); burst: the touches of a head
                 at once; scr<S>: each row also loads (and, SCRST = 1, stores) 4 lines of an S KiB scratch (L1 traffic
                 standing in for the kernel's q, scores and accumulator state); pf64scr<S>: pf64 with that scratch;
                 pf64mix<k>: pf64 with every k-th line a demand load instead of its prefetch (mix4scr8: and the scratch)
   Results and what they decided: bench/NOTES.md, "Session 57". */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#ifdef WITH_KERNEL
#include "decode.c"
#endif
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
#define L 8192L
#define HK 8
#define ROW 256L
#define POSB (HK * ROW)            /* bytes of one position, all heads */
static char *K, *V, *fl;
static volatile float sink;
static int W = 1, NTH = 2;
static void flush(void) { float s = 0; for (long i = 0; i < (256L << 20) / 4; i += 16) s += ((float *)fl)[i]; sink = s; }
#define FM8 "vfmadd231ps %%zmm28, %%zmm29, %%zmm20\n\tvfmadd231ps %%zmm28, %%zmm29, %%zmm21\n\t" \
            "vfmadd231ps %%zmm28, %%zmm29, %%zmm22\n\tvfmadd231ps %%zmm28, %%zmm29, %%zmm23\n\t" \
            "vfmadd231ps %%zmm28, %%zmm29, %%zmm24\n\tvfmadd231ps %%zmm28, %%zmm29, %%zmm25\n\t" \
            "vfmadd231ps %%zmm28, %%zmm29, %%zmm26\n\tvfmadd231ps %%zmm28, %%zmm29, %%zmm27\n\t"
#define CLOB "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27"
static inline __m512 line(const char *p, __m512 a) {
    a = _mm512_add_ps(a, _mm512_load_ps((const float *)p));
    for (int w = 0; w < W; w++) __asm__ volatile(FM8 ::: CLOB);
    return a;
}
/* prefetch state: the lines of [pb, pb + n) in address order, `per` of them after each row */
typedef struct { const char *p; long o, n; } pf_t;
static int MIX = 0;   /* pf: every MIX-th line a demand load instead of the prefetch (0: none) */
static unsigned msink;
static inline void pf(pf_t *s, int k) {
    for (int i = 0; i < k && s->o < s->n; i++, s->o += 64) {
        if (MIX && (s->o / 64) % MIX == 0) msink += *(const volatile unsigned *)(s->p + s->o);
        else _mm_prefetch(s->p + s->o, _MM_HINT_T1);
    }
}
static unsigned tsink;
/* scheme 3: a demand load of each line (4 bytes, summed) in place of the prefetch */
static inline unsigned tch(pf_t *s, int k, unsigned x) {
    for (int i = 0; i < k && s->o < s->n; i++, s->o += 64) x += *(const volatile unsigned *)(s->p + s->o);
    return x;
}
static int cmpd(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
static char l1buf[4096] __attribute__((aligned(64)));
/* scheme 0 addr, 1 hm, 2 pf, 3 touch, 4 touch with the compute reading an L1-resident 4 KiB buffer instead of the
   block (does the compute's own L2 traffic disturb the stream?), 5 touch DIST phases ahead (C = 2) */
#ifndef SCRST
#define SCRST 1
#endif
static long DIST = 8, M = 4, SCR = 0, ITEMS = 1;   /* SCR: KiB of scratch each row also loads and stores (L1 pressure) */
static char scr[2][65536] __attribute__((aligned(64)));
static double run(int scheme, long C) {
    flush();
    double t0 = now();
    #pragma omp parallel num_threads(NTH)
    {
        const int id = omp_get_thread_num();
        const long p0 = id * (L / NTH), p1 = p0 + L / NTH;
        __m512 a = _mm512_setzero_ps();
        unsigned x = 0;
        const long ilen = (p1 - p0) / ITEMS;   /* ITEMS > 1 (pf schemes): items of ilen positions; each item's first
                                                  block touched whole first, no prefetch across items (the kernel) */
        for (long b = p0; b < p1; b += C) {
            const long iend = ITEMS > 1 ? p0 + ((b - p0) / ilen + 1) * ilen : p1;
            if (ITEMS > 1 && scheme == 2 && (b - p0) % ilen == 0)
                for (long t = b; t < b + C; t++)
                    for (long o = 0; o < POSB; o += 64) x += *(const volatile unsigned *)(K + t * POSB + o)
                                                          + *(const volatile unsigned *)(V + t * POSB + o);
            if (scheme >= 6) {
                for (int ph = 0; ph < 2; ph++) {
                    const char *X = ph ? V : K;
                    for (long m = b; m < b + C; m += M) {
                        /* the next mini in the stream K[b..b+C), V[b..b+C), K[b+C..) */
                        const char *np = m + M < b + C ? X + (m + M) * POSB : ph ? K + (b + C) * POSB : V + b * POSB;
                        pf_t s = {np, 0, (ph && m + M >= b + C && b + C >= p1) ? 0 : M * POSB};
                        for (int h = 0; h < HK; h++) {
                            if (scheme == 7) x = tch(&s, 4 * M, x);   /* the head's share at once */
                            for (long t = m; t < m + M; t++) {
                                const char *r = X + t * POSB + h * ROW;
                                for (long o = 0; o < ROW; o += 64) a = line(r + o, a);
                                if (scheme == 6) x = tch(&s, 4, x);
                                if (SCR) {   /* 4 lines of scratch read and written a row, cycling over SCR KiB */
                                    char *c = scr[id] + ((t * HK + h) * 256) % (SCR * 1024);
                                    for (int e = 0; e < 4; e++) {
                                        __m512 y = _mm512_load_ps((float *)(c + 64 * e));
                                        if (SCRST) _mm512_store_ps((float *)(c + 64 * e), _mm512_add_ps(y, a)); else a = _mm512_add_ps(a, y);
                                    }
                                }
                            }
                        }
                    }
                }
                continue;
            }
            for (int ph = 0; ph < 2; ph++) {
                const char *X = ph ? V : K;
                if (scheme == 0) {
                    for (long t = b; t < b + C; t++)
                        for (long o = 0; o < POSB; o += 64) a = line(X + t * POSB + o, a);
                    continue;
                }
                /* K phase prefetches this block's V; V phase the next block's K */
                pf_t s = {ph ? K + (b + C) * POSB : V + b * POSB, 0, (ph && b + C >= iend) ? 0 : C * POSB};
                if (scheme == 5) {   /* the block DIST phases ahead of this one: phase index 2 b / C + ph + DIST */
                    const long f = 2 * ((b - p0) / C) + ph + DIST, fb = p0 + (f / 2) * C;
                    s.p = (f & 1 ? V : K) + fb * POSB; s.o = 0; s.n = fb + C <= p1 ? C * POSB : 0;
                }
                const int per = (int)((C * POSB / 64 + HK * C - 1) / (HK * C));   /* lines per row */
                for (int h = 0; h < HK; h++)
                    for (long t = b; t < b + C; t++) {
                        const char *r = scheme == 4 ? l1buf + ((t * HK + h) & 15) * ROW : X + t * POSB + h * ROW;
                        for (long o = 0; o < ROW; o += 64) a = line(r + o, a);
                        if (SCR) {   /* as in scheme 6 */
                            char *c = scr[id] + ((t * HK + h) * 256) % (SCR * 1024);
                            for (int e = 0; e < 4; e++) {
                                __m512 y = _mm512_load_ps((float *)(c + 64 * e));
                                if (SCRST) _mm512_store_ps((float *)(c + 64 * e), _mm512_add_ps(y, a)); else a = _mm512_add_ps(a, y);
                            }
                        }
                        if (scheme == 2) pf(&s, per);
                        if (scheme >= 3) x = tch(&s, per, x);
                    }
            }
        }
        sink = _mm512_reduce_add_ps(a);
        tsink += x;
    }
    return 2 * L * POSB / (now() - t0) / 1e9;
}
#ifdef WITH_KERNEL
/* the compiled decode kernel on the same K / V (bf16 values 1.0), cold like the schemes */
#ifndef SPLITS
#define SPLITS 8
#endif
static char *q, *out, *work; static float lse[32];
static double kernel(void) {
    flush();
    int64_t meta[6] = {0, 0, 0, L, 0, L};
    double t0 = now();
    ft_decode(K, V, L * POSB, POSB, ROW, 0, 0, 0, meta, q, 32 * 256, 32 * 256, 256, 0.1275f, 1, HK, 1, 4, 4, 128, SPLITS, 1,
              (float *)work, out, 32 * 256, 32 * 256, 256, lse, 2, 0);
    return 2 * L * POSB / (now() - t0) / 1e9;
}
#endif
int main(int argc, char **argv) {
    W = argc > 1 ? atoi(argv[1]) : 1;
    if (getenv("NTH")) NTH = atoi(getenv("NTH"));
    K = aligned_alloc(4096, L * POSB); V = aligned_alloc(4096, L * POSB); fl = aligned_alloc(4096, 256L << 20);
    for (long i = 0; i < L * POSB; i += 2) { *(uint16_t *)(K + i) = 0x3f80; *(uint16_t *)(V + i) = 0x3f80; }
    for (long i = 0; i < (256L << 20); i += 4) *(float *)(fl + i) = 1;
#ifdef WITH_KERNEL
    /* rounds of: kernel, pf64, addr, hm16 (cold each); medians and the per-round ratio kernel / pf64 */
    q = aligned_alloc(64, 32 * 256); out = aligned_alloc(64, 32 * 256); work = aligned_alloc(64, 8 * 8 * 4 * 144 * 4 + 64);
    for (int i = 0; i < 32 * 128; i++) ((uint16_t *)q)[i] = 0x3c00 + (i % 7);
    const int R = argc > 2 ? atoi(argv[2]) : 15;
    double k[64], p[64], a[64], h[64], r[64];
    for (int i = 0; i < R; i++) {
        k[i] = kernel(); p[i] = run(2, 64); a[i] = run(0, 64); ITEMS = 4; h[i] = run(2, 64); ITEMS = 1; r[i] = k[i] / p[i];
    }
    qsort(k, R, 8, cmpd); qsort(p, R, 8, cmpd); qsort(a, R, 8, cmpd); qsort(h, R, 8, cmpd); qsort(r, R, 8, cmpd);
    printf("W%d medians GB/s: kernel %.1f (max %.1f) | pf64 %.1f (max %.1f) | addr %.1f (max %.1f) | pf64 4 items %.1f | "
           "kernel / pf64 per round: median %.2f\n", W, k[R / 2], k[R - 1], p[R / 2], p[R - 1], a[R / 2], a[R - 1], h[R / 2],
           r[R / 2]);
    return 0;
#endif
    /* rounds of every scheme in turn (a shared VM's phases change within seconds): medians */
    static const struct { const char *name; int scheme; long C, dist; } S[] = {
        {"addr", 0, 64, 0}, {"pf64", 2, 64, 0}, {"pf16", 2, 16, 0}, {"hm2", 1, 2, 0}, {"t2", 3, 2, 0}, {"t4", 3, 4, 0},
        {"t8", 3, 8, 0}, {"t16", 3, 16, 0}, {"t64", 3, 64, 0}, {"tL1_16", 4, 16, 0}, {"tL1_64", 4, 64, 0},
        {"t2d4", 5, 2, 4}, {"t2d16", 5, 2, 16}, {"b64m4", 6, 64, 4}, {"b64m2", 6, 64, 2}, {"b64m8", 6, 64, 8},
        {"b64m4burst", 7, 64, 4}, {"b64m4scr8", 8, 64, 4}, {"b64m4scr16", 9, 64, 4}, {"b64m4scr24", 10, 64, 4},
        {"b64m4scr32", 11, 64, 4}, {"pf64scr8", 12, 64, 0}, {"pf64scr16", 13, 64, 0},
        {"pf64mix2", 22, 64, 2}, {"pf64mix4", 24, 64, 4}, {"pf64mix8", 28, 64, 8}, {"pf64mix4scr8", 44, 64, 4}};
    const int NSCH = sizeof S / sizeof S[0], RN = argc > 2 ? atoi(argv[2]) : 9;
    double g[32][64];
    for (int i = 0; i < RN; i++)
        for (int j = 0; j < NSCH; j++) {
            DIST = M = S[j].dist;
            const int sc = S[j].scheme;
            MIX = sc >= 20 ? (sc >= 40 ? sc - 40 : sc - 20) : 0;
            SCR = sc >= 40 ? 8 : sc >= 20 ? 0 : sc >= 12 ? 8 * (sc - 11) : sc >= 8 ? 8 * (sc - 7) : 0;
            g[j][i] = run(sc >= 12 ? 2 : sc >= 8 ? 6 : sc, S[j].C);
        }
    printf("W%d, %d rounds, median GB/s:", W, RN);
    for (int j = 0; j < NSCH; j++) {
        qsort(g[j], RN, 8, cmpd);
        printf(" %s %.1f", S[j].name, g[j][RN / 2]);
    }
    printf("\n");
}
