/* Session 42: the compiled decode kernel (cpu/native.py's C_SOURCE) timed from C, without Python (the
   per-call host side is ~20-30 us, a tenth of a cache-resident call). Build, from the repository root:

     python -c "from flashtriton.cpu import native; open('/tmp/decode.c', 'w').write(native.C_SOURCE)"
     gcc -O3 -march=native -fopenmp -ffp-contract=fast -fno-math-errno [-DFT_NO_TOUCH -DFT_NO_PF ...] \
         -I/tmp bench/cpu/s42_decode_harness.c -o /tmp/h -lm
     [FLUSH=128] /tmp/h DTYPE L REPS [THREADS [SPLITS]]     DTYPE 0 float32, 1 bf16; FLUSH: MiB read between calls

   The bench's shape: B = 1, Hq = 32, Hk = 8, D = 128, Sq = 1, L keys, random K / V / q (seeded); prints the min
   and median ms, key-heads per second and GB/s (K + V bytes / min), and a checksum of the lse (bitwise
   comparisons between builds). Per-core compute rates: FT_NO_TOUCH at L = 128 (fp32, 1 MiB: L2) and L = 2048
   (bf16, 8 MiB: L3), one thread, SPLITS 4. bench/wip/cpu-decode-s42.md has the figures. */
#include <stdio.h>
#include <time.h>
#include "decode.c"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmpd(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    int bf = atoi(argv[1]), reps = atoi(argv[3]), nth = argc > 4 ? atoi(argv[4]) : 1;
    int64_t L = atoll(argv[2]);
    int64_t splits = argc > 5 ? atoll(argv[5]) : 4 * nth;
    const int64_t Hk = 8, G = 4, D = 128, H = 32, es = bf ? 2 : 4;
    char *k = aligned_alloc(4096, L * Hk * D * es), *v = aligned_alloc(4096, L * Hk * D * es);
    char *q = aligned_alloc(64, H * D * 4), *out = aligned_alloc(64, H * D * 4);
    srand(1);
    for (int64_t i = 0; i < L * Hk * D; i++) {
        float a = (rand() / (float)RAND_MAX - 0.5f) * 3, b = (rand() / (float)RAND_MAX - 0.5f) * 3;
        if (bf) { uint16_t x = f32_to_bf16(a), y = f32_to_bf16(b); memcpy(k + 2 * i, &x, 2); memcpy(v + 2 * i, &y, 2); }
        else { memcpy(k + 4 * i, &a, 4); memcpy(v + 4 * i, &b, 4); }
    }
    for (int64_t i = 0; i < H * D; i++) {
        float a = rand() / (float)RAND_MAX - 0.5f;
        if (bf) { uint16_t x = f32_to_bf16(a); memcpy(q + 2 * i, &x, 2); } else memcpy(q + 4 * i, &a, 4);
    }
    int64_t meta[6] = {0, 0, 0, L, 0, L};
    float *work = aligned_alloc(64, splits * Hk * 4 * (D + 16) * 4 + 64);
    float lse[32];
    double *ts = malloc(reps * sizeof(double));
    const char *fl = getenv("FLUSH"); int64_t fn = fl ? atoll(fl) << 20 : 0;
    /* session 55: written once, so that every page is its own (a calloc'ed buffer reads the kernel's one zero
       page: sessions 42-54's FLUSH runs evicted nothing and timed a warm cache) */
    volatile float *fbuf = fn ? malloc(fn) : 0; float fsink = 0;
    for (int64_t i = 0; i < fn / 4; i++) fbuf[i] = (float)(i & 7);
    for (int r = -2; r < reps; r++) {
        if (fn) { float s0 = 0; for (int64_t i = 0; i < fn / 4; i += 16) s0 += fbuf[i]; fsink += s0; }
        double t0 = now();
        /* qscale 0.1275 = log2(e) / sqrt(128) */
        int rc = ft_decode(k, v, L * Hk * D * es, Hk * D * es, D * es, 0, 0, 0, meta, q, H * D * es, H * D * es,
                           D * es, 0.1275f, 1, Hk, 1, G, 4, D, splits, bf, work, out, H * D * es, H * D * es, D * es,
                           lse, nth, 0);
        if (rc) { printf("rc %d\n", rc); return 1; }
        if (r >= 0) ts[r] = now() - t0;
    }
    qsort(ts, reps, sizeof(double), cmpd);
    double chk = 0; for (int i = 0; i < 32; i++) chk += lse[i];
    printf("%s L=%ld th=%d: min %.3f med %.3f ms  %.1f / %.1f Mkh/s  %.1f GB/s(min)  [lse sum %.4f]\n",
           bf ? "bf16" : "f32 ", (long)L, nth, ts[0] * 1e3, ts[reps / 2] * 1e3, L * Hk / ts[0] / 1e6,
           L * Hk / ts[reps / 2] / 1e6, 2.0 * L * Hk * D * es / ts[0] / 1e9, chk);
    return 0;
}
