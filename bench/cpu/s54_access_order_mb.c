/* Microbenchmark (session 54): 128 MiB read in 128 KiB blocks of 64 positions x 8 heads x 256 bytes, FMAs per
   line standing in for compute: order 0 head-major (the decode's), 1 sub-block major, 2 address order; pf 1
   prefetches the next block in address order, one line per line read. Session 54, work 2 (compute alone 2.3-2.5
   ms): o2 pf0 2.5-2.7 ms (the memory hidden under the compute), o0 pf1 3.0-3.2, o0 pf0 7.2-7.9.
   gcc -O2 -march=native -fopenmp s54_access_order_mb.c -o mb && ./mb */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define N (134217728L)
#define POS 64
#define HK 8
#define ROW 256
#define BLK (POS * HK * ROW)   /* 128 KiB: one phase's K (or V) */
static char *buf, *flush;
static volatile float sinkf;
/* order 0: head-major (for h: for t), 1: sub-block major (for sb of 16: for h: for t in sb), 2: address order.
   pf 1: prefetcht1 the next block in address order, spread one line per line read. */
static double run(int order, int pf, int work, int small) {
    double t0 = now();
    #pragma omp parallel num_threads(2)
    {
        int id = omp_get_thread_num();
        char *p = buf + id * (N / 2);
        long nb = (N / 2) / BLK;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, x = _mm512_set1_ps(1.0001f);
        for (long b = 0; b < nb; b++) {
            char *blk = small ? p + (b & 1) * BLK : p + b * BLK;
            char *nxt = small ? 0 : p + (b + 1) * BLK;
            long po = 0; int dopf = pf && !small && b + 1 < nb;
            for (int i = 0; i < POS * HK; i++) {
                int h, t;
                if (order == 0) { h = i / POS; t = i % POS; }
                else if (order == 1) { int sb = i / (16 * HK), r = i % (16 * HK); h = r / 16; t = sb * 16 + r % 16; }
                else { t = i / HK; h = i % HK; }
                char *row = blk + (long)t * HK * ROW + h * ROW;
                for (int l = 0; l < ROW; l += 64) {
                    __m512 v = _mm512_loadu_ps(row + l);
                    a0 = _mm512_add_ps(a0, v);
                    for (int w = 0; w < work; w++) { a1 = _mm512_fmadd_ps(a1, x, v); a2 = _mm512_fmadd_ps(a2, x, v); a3 = _mm512_fmadd_ps(a3, x, v); }
                    if (dopf) { _mm_prefetch(nxt + po, _MM_HINT_T1); po += 64; }
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
    buf = aligned_alloc(1 << 21, N); flush = aligned_alloc(64, 64 << 20);
    memset(buf, 1, N);
    for (int work = 2; work <= 4; work += 2)
        for (int r = 0; r < 2; r++) {
            double tc = run(0, 0, work, 1);
            printf("work %d compute-only %.2f ms |", work, tc * 1e3);
            for (int order = 0; order < 3; order++)
                for (int pf = 0; pf < 2; pf++) {
                    memset(flush, r, 64 << 20);
                    double t = run(order, pf, work, 0);
                    printf(" o%d pf%d %.2f", order, pf, t * 1e3);
                }
            printf("\n");
        }
}
