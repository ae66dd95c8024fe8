/* Microbenchmark (session 54): the CPU decode's two-phase block schedule (native.py PF_SPLIT: a K phase reading
   K rows head by head while V of the block is prefetched, a V phase reading V rows while the next block's K is),
   with FMAs per line standing in for the compute, over two 64 MiB buffers (bf16 32k x 8 x 128 each): s0 that
   schedule, s1 the same reads in address order without prefetches, s2 prefetching two phases ahead.
   gcc -O2 -march=native -fopenmp s54_stream_order_mb.c -o mb && ./mb
   Session 54: s1 0.85-0.93x s0's time; s2 level with s0 (bench/NOTES.md, "Session 54"). */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define NH (67108864L)          /* each of K and V: 64 MiB (bf16 32k x 8 x 128) */
#define POS 64
#define HK 8
#define ROW 256
#define BLK (POS * HK * ROW)
static char *K, *V, *flush;
static volatile float sinkf;
static inline __m512 wk(__m512 a, __m512 v, int n) { const __m512 x = _mm512_set1_ps(1.0001f);
    for (int w = 0; w < n; w++) { a = _mm512_fmadd_ps(a, x, v); __asm__("" : "+v"(a)); } return a; }
/* scheme 0: split (K phase: K rows head-major + prefetch V of this block; V phase: V rows head-major + prefetch K of next)
   scheme 1: split, address-order reads (no prefetch)
   scheme 2: split, prefetch distance 2 phases (K phase prefetches next block's K... i.e. V of this and K of next interleaved)
   wk_k / wk_v: FMAs per line in each phase. small: L2-resident */
static double run(int scheme, int wkk, int wkv, int small) {
    double t0 = now();
    #pragma omp parallel num_threads(2)
    {
        int id = omp_get_thread_num();
        long off = id * (NH / 2);
        long nb = (NH / 2) / BLK;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (long b = 0; b < nb; b++) {
            long bo = off + (small ? (b & 1) : b) * BLK, no = off + (small ? ((b + 1) & 1) : b + 1) * BLK;
            int more = !small && b + 1 < nb;
            for (int ph = 0; ph < 2; ph++) {
                char *src = (ph ? V : K) + bo;
                char *pfb = scheme == 1 || small ? 0 : ph == 0 ? V + bo : (more ? K + no : 0);
                char *pfb2 = scheme == 2 && !small && more ? (ph == 0 ? K + no : V + no) : 0;
                long po = 0;
                for (int i = 0; i < POS * HK; i++) {
                    int h = i / POS, t = i % POS;
                    if (scheme == 1) { t = i / HK; h = i % HK; }
                    char *row = src + (long)t * HK * ROW + h * ROW;
                    for (int l = 0; l < ROW; l += 64) {
                        __m512 v = _mm512_loadu_ps(row + l);
                        a0 = _mm512_add_ps(a0, v);
                        if (ph) { a1 = wk(a1, v, wkv); } else { a2 = wk(a2, v, wkk); }
                        if (pfb) _mm_prefetch(pfb + po, _MM_HINT_T1);
                        if (pfb2) _mm_prefetch(pfb2 + po, _MM_HINT_T1);
                        po += 64;
                    }
                }
            }
        }
        float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
        #pragma omp atomic
        sinkf += s;
    }
    return now() - t0;
}
int main(void) {
    K = aligned_alloc(4096, NH); V = aligned_alloc(4096, NH); flush = aligned_alloc(64, 64 << 20);
    memset(K, 1, NH); memset(V, 1, NH);
    int w[][2] = {{1, 3}, {2, 4}, {1, 2}};
    for (unsigned k = 0; k < 3; k++)
        for (int r = 0; r < 2; r++) {
            double tc = run(0, w[k][0], w[k][1], 1);
            printf("wk %d/%d compute-only %.2f |", w[k][0], w[k][1], tc * 1e3);
            for (int s = 0; s < 3; s++) { memset(flush, r, 64 << 20); printf(" s%d %.2f", s, run(s, w[k][0], w[k][1], 0) * 1e3); }
            printf(" ms\n");
        }
}
