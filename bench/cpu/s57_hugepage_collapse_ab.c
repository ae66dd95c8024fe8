/* Session 57: bf16 8k decode cold (2 threads, 8 splits, a 256 MiB read between calls), a 4 KiB-page cache (A) against
   the same bytes collapsed into 2 MiB pages (B, madvise MADV_COLLAPSE, Linux >= 6.1), rounds alternating A and B.
     python -c "from flashtriton.cpu import native; open('/tmp/decode.c', 'w').write(native.C_SOURCE)"
     gcc -O3 -march=native -fopenmp -ffp-contract=fast -fno-math-errno -I/tmp bench/cpu/s57_hugepage_collapse_ab.c -o /tmp/hp -lm
     /tmp/hp ROUNDS
   Results: bench/NOTES.md, "Session 57". */
#include <stdio.h>
#include <time.h>
#include <sys/mman.h>
#include "decode.c"
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmpd(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    const int64_t L = 8192, Hk = 8, D = 128, H = 32, es = 2, n = L * Hk * D * es;
    int reps = argc > 1 ? atoi(argv[1]) : 15, nth = 2;
    char *buf[2][2];
    for (int c = 0; c < 2; c++) for (int x = 0; x < 2; x++) {
        buf[c][x] = aligned_alloc(4096, n + (4 << 20));
        srand(1 + x);
        for (int64_t i = 0; i < n / 2; i++) { uint16_t v = f32_to_bf16((rand() / (float)RAND_MAX - 0.5f) * 3); memcpy(buf[c][x] + 2 * i, &v, 2); }
    }
    /* B: collapse the 2 MiB-aligned interior */
    double tc = now(); int fails = 0;
    for (int x = 0; x < 2; x++) {
        uintptr_t s = ((uintptr_t)buf[1][x] + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1), e = ((uintptr_t)buf[1][x] + n) & ~(uintptr_t)((2 << 20) - 1);
        if (madvise((void *)s, e - s, MADV_COLLAPSE)) { perror("madvise"); fails++; }
    }
    printf("collapse: %.1f ms (%d failed)\n", (now() - tc) * 1e3, fails);
    char *q = aligned_alloc(64, H * D * 4), *out = aligned_alloc(64, H * D * 4);
    for (int64_t i = 0; i < H * D; i++) { uint16_t v = f32_to_bf16(rand() / (float)RAND_MAX - 0.5f); memcpy(q + 2 * i, &v, 2); }
    int64_t meta[6] = {0, 0, 0, L, 0, L};
    float *work = aligned_alloc(64, 8 * Hk * 4 * (D + 16) * 4 + 64), lse[32];
    int64_t fn = 256L << 20; volatile float *fb = malloc(fn); for (int64_t i = 0; i < fn / 4; i++) fb[i] = 1; float fs = 0;
    double t[2][64], r[64];
    for (int i = -1; i < reps; i++)
        for (int c = 0; c < 2; c++) {
            float s0 = 0; for (int64_t k = 0; k < fn / 4; k += 16) s0 += fb[k]; fs += s0;
            double t0 = now();
            ft_decode(buf[c][0], buf[c][1], n, Hk * D * es, D * es, 0, 0, 0, meta, q, H * D * es, H * D * es, D * es,
                      0.1275f, 1, Hk, 1, 4, 4, D, 8, 1, work, out, H * D * es, H * D * es, D * es, lse, nth, 0);
            if (i >= 0) t[c][i] = now() - t0;
        }
    for (int i = 0; i < reps; i++) r[i] = t[1][i] / t[0][i];
    qsort(t[0], reps, 8, cmpd); qsort(t[1], reps, 8, cmpd); qsort(r, reps, 8, cmpd);
    printf("4K %.3f ms, 2M %.3f ms (medians), per-round ratio 2M/4K median %.3f  [%g]\n", t[0][reps / 2] * 1e3, t[1][reps / 2] * 1e3, r[reps / 2], fs);
    FILE *f = fopen("/proc/self/smaps_rollup", "r"); char line[256]; while (fgets(line, 256, f)) if (strstr(line, "AnonHuge")) fputs(line, stdout);
}
