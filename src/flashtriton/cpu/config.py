"""Tile sizes and precision choices of the CPU backend, with the measurements that
picked them (bench/NOTES.md, "CPU backend", has the full log).

Rows are query rows times the G query heads of a KV head (GQA folds the group into
the rows, so K and V tiles are read once per group). A forward tile is rows x keys
float32: 512 x 1024 x 4 B = 2 MiB, 1 MiB per core when torch's two intra-op threads
split the rows (each core's L2). Sweep at B=1 H=8 N=4096 D=128 bf16, ms:
256x512 227, 256x1024 187, 512x1024 165, 256x2048 174, 512x2048 172: larger tiles
amortise the ~75 us fixed cost of a tile step (a dozen torch ops) until the
elementwise passes spill from L2.
"""
from __future__ import annotations

import os

import torch

# Forward: query rows per block (times G) and keys per tile.
FWD_ROWS = 512
FWD_KEYS = 1024
# Rows of the sub-blocks that a tile cut by a narrow sliding window is computed in
# (Band.steps); the causal diagonal is not cut.
FWD_SUB_ROWS = 128
# Rows of the sub-blocks a tile cut by the causal diagonal (a one-sided window edge)
# is computed in; 0: the tile stays whole, masked. Causal / non-causal at N=4096,
# bf16 / fp32: whole 1.63 / 1.60, 256 rows 1.55 / 1.57, 128 rows 1.44 / 1.43.
FWD_DIAG_ROWS = 0

# Forward path: "auto" (default) runs the compiled kernel of cpu/native_prefill.py
# (bf16 with AVX512-BF16 / float32, even D <= 256, no softcap / ALiBi / dropout) when
# it can be built, else the torch-ops loop of forward.py (one RuntimeWarning naming
# the cause, e.g. no C compiler); "compiled" raises native.NativeUnavailable instead;
# "ops" always takes the torch-ops loop. Set with FLASHTRITON_CPU_FORWARD at import
# or assign here (bench/NOTES.md, "Session 5: causal (helper)").
FWD_PATH = os.environ.get("FLASHTRITON_CPU_FORWARD", "auto")
FWD_PATHS = ("auto", "compiled", "ops")
# bf16 on the compiled forward: AMX tiles (Intel AMX-BF16: both products as TDPBF16PS,
# the softmax between them on AVX-512) or the AVX-512 kernel (vdpbf16ps). "auto"
# (default): AMX when the CPU has amx_tile + amx_bf16, the AMX build compiles and Linux
# grants the process the tile-data permission, else AVX-512 (one RuntimeWarning naming
# the cause when an AMX CPU fails the build / permission); "on": AMX or raise
# native.NativeUnavailable; "off": AVX-512 always. float32 never uses AMX. Set with
# FLASHTRITON_CPU_FORWARD_AMX at import or assign here. The bench's path column says
# "compiled-amx" / "compiled" (bench/wip/cpu-amx-fwd.md has the measurements).
FWD_AMX = os.environ.get("FLASHTRITON_CPU_FORWARD_AMX", "auto")
FWD_AMX_MODES = ("auto", "on", "off")
# AMX path: query rows per work item (times G), instead of FWD_ROWS. Each item packs
# the K / V it sees once per item, so larger items pack less often (B=1 H=8 N=4096 D=128
# bf16: 512 / 1024 / 2048 rows 50.1 / 46.7 / 47.0 ms non-causal, 27.7 / 26.0 / 25.9 causal).
FWD_ROWS_AMX = 1024

# Backward: keys per tile (the rows of the transposed score tile) and query rows per block.
# bwd only, B=1 H=8 N=2048 D=64, heads on threads, fused passes, ms (SDPA's backward 54-61 /
# 81-85 in the same runs; 2026-12-02, AMX machine, bench/wip/cpu-bwd-amx.md): bf16 512x512
# 62, 512x1024 53, 1024x512 51, 768x1024 46, 1024x1024 42-44, 2048x1024 50, 1024x2048 52;
# float32 512x1024 90, 1024x512 86, 1024x1024 91 (before its fused pass: 512x512 99,
# 256x1024 93). A (w, r) float32 tile is 4 MiB; every thread keeps two (bf16: four 2 MiB).
BWD_KEYS = 1024
BWD_ROWS = 1024
# float32 / fp16 backward: at most this many rows per block. Three interleaved rounds,
# fp32 bwd ms: 1024x1024 82.4 / 83.2 / 83.9, 1024x512 77.4 / 81.5 / 76.3, 512x1024 81.9 /
# 77.2 / 78.7 (SDPA's backward 73-80). bf16 keeps 1024 (1024x512: 45-46 against 39-42).
BWD_ROWS_FLOAT32 = 512
# Backward: whether the (sequence, KV head) items run on torch.get_num_threads() Python
# threads with one intra-op thread each (backward._run) instead of one after another
# with every op spread over the threads.
BWD_HEAD_THREADS = True
# Backward path: "auto" (default) runs the compiled float32 backward of cpu/native_backward.py
# (float32 / fp16 inputs, bf16 where it runs in float32; no softcap / ALiBi / dropout) when it can be
# built, else the torch-ops path of backward.py (one RuntimeWarning naming the cause, e.g. no C
# compiler); "compiled" raises native.NativeUnavailable instead; "ops" always takes the torch-ops
# path. Set with FLASHTRITON_CPU_BACKWARD at import or assign here (bench/wip/cpu-bwd-compiled.md).
BWD_PATH = os.environ.get("FLASHTRITON_CPU_BACKWARD", "auto")
BWD_PATHS = ("auto", "compiled", "ops")
# Compiled backward: keys per block (rows of the transposed W x R score tiles) and query rows per
# block (times G), per thread; bench/wip/cpu-bwd-compiled.md has the sweep.
BWD_C_KEYS = 96
BWD_C_ROWS = 256
# Compiled backward: with fewer (sequence, KV head) items than this, each one's keys are cut into
# pieces of at least BWD_C_MIN_PIECE keys (separate dQ partials, summed in order) so that the
# threads have work; from the problem only, never the thread count (bitwise repeatable).
BWD_C_MIN_ITEMS = 8
BWD_C_MIN_PIECE = 256
# Backward without softcap / dropout (bf16: nor ALiBi): P^T and dS^T of a tile in one
# compiled pass (cpu/native_bwd.py) where it builds, else torch-ops passes (bf16: five,
# float32: two).
BWD_FUSED = True
# bf16 backward: fold a per-row shift u = (lse2 - log2(visible keys)) / q_scale into the S^T product as
# two bf16 columns (cpu/backward.py's docstring), so the bf16 rounding of S^T hits s - u, near 0 where
# P is large, instead of s. False: the unshifted product (session 35; off only for the tests' A/B).
BWD_BF16_SHIFT = True


# bf16 inputs: whether the forward and backward multiply in bf16 (AMX / vdpbf16ps / oneDNN's bf16
# matmuls) or convert the inputs to float32 (exactly) and run the float32 kernels. "auto" (default):
# bf16 where this CPU multiplies bf16 faster than float32 (bf16_products_fast: a one-time probe of
# torch.mm), float32 elsewhere; "bf16" / "f32": always that. Why (session 36): a VM CPU without AMX
# whose bf16 products run at half its float32 rate (torch.mm 2048^3, 2 threads: 133 against 259
# GFLOP/s; vdpbf16ps at a quarter of the FMA's rate in a microbenchmark): there the bf16 forward ran
# 483-541 ms against 333-383 ms through float32, at B=1 H=8 N=4096 D=128. Set with
# FLASHTRITON_CPU_BF16 at import or assign here; the tests pin "bf16" (conftest) so that they cover the
# bf16 kernels on any host, and test the other modes by name.
BF16_PRODUCTS = os.environ.get("FLASHTRITON_CPU_BF16", "auto")
BF16_PRODUCTS_MODES = ("auto", "bf16", "f32")
_bf16_fast: bool | None = None


def bf16_products_fast() -> bool:
    """Whether a bf16 matmul beats a float32 one on this CPU (torch.mm, 512 x 512 x 512, the
    current intra-op threads, best of five alternating calls each; measured once per process,
    ~10-30 ms). The two rates sat ~2x apart either way on the CPUs measured (bf16 ~2x faster on the
    earlier AMD CPU with AVX512-BF16, more with AMX; 2x slower on session 36's VM), so the 1.0
    threshold is far from both."""
    global _bf16_fast
    if _bf16_fast is None:
        import time

        g = torch.Generator().manual_seed(0)
        a32, b32 = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
        a16, b16 = a32.bfloat16(), b32.bfloat16()
        best = {torch.float32: float("inf"), torch.bfloat16: float("inf")}
        for _ in range(5):
            for a, b in ((a32, b32), (a16, b16)):
                t0 = time.perf_counter()
                torch.mm(a, b)
                best[a.dtype] = min(best[a.dtype], time.perf_counter() - t0)
        _bf16_fast = best[torch.bfloat16] < best[torch.float32]
    return _bf16_fast


def bf16_products() -> bool:
    """Whether bf16 inputs multiply in bf16 (BF16_PRODUCTS, FLASHTRITON_CPU_BF16; "auto": the probe)."""
    mode = checked("BF16_PRODUCTS", "FLASHTRITON_CPU_BF16", BF16_PRODUCTS_MODES)
    return mode == "bf16" or (mode == "auto" and bf16_products_fast())


def products_in_input_precision(dtype: torch.dtype) -> bool:
    """Whether the products that accumulate over tiles (forward P @ V; backward
    dV += P^T dO, dK += dS^T q, dQ += dS k) take P and dS rounded to the input dtype
    and run as low-precision matmuls. bf16: yes where bf16_products() (oneDNN's bf16 matmul
    ran at ~2x its float32 rate or more on the CPUs with AMX or a fast vdpbf16ps); it accumulates
    in fp32 and rounds each tile's product to bf16 before it is added to the float32
    accumulator. fp16 has no fast matmul on these CPUs, so fp16, fp32 and bf16 where
    bf16_products() is False use the float32 engine with P and dS in float32. The score
    products (S = q k^T, and dP = dO v^T in the backward) are always float32-exact."""
    return dtype == torch.bfloat16 and bf16_products()


# Decode: cache positions per round of the lock-step splits (all splits together).
# A round of K and V in float32 scratch is 2 x 1024 x Hk x D x 4 B (8 MiB at Hk = 8,
# D = 128); 512 and 2048 measured the same or slower, 4096 1.5x slower (bench/NOTES.md).
DECODE_CHUNK = 1024

# Decode, direct path (decode._attend_direct, bf16 caches): positions per chunk,
# read in place. At B=1 Hq=32 Hk=8 D=128 L=32k, bf16: 2048 / 4096 / 8192 /
# 16384 positions 11.2 / 10.4 / 11.4 / 29 ms (interleaved, a slow period of the host;
# the float32-scratch path: 23 ms); float32 (not taken now) 16.0 / 15.5 / 15.7 / 15.4.
DECODE_DIRECT_CHUNK = 4096
# The direct path's score weight is block-diagonal, Hk x the useful flops: taken while
# Hk^2 * R <= this (Hk = 8, R = G = 4: 256; MHA with Hk = 32: the lock-step path).
DECODE_DIRECT_MAX = 512
# Cache dtypes the direct path takes. float32 measured the same as the scratch path
# with the block-diagonal product (16.1 vs 15.3 ms at L=32k) and 0.85-0.9x a plain
# strided bmm; it takes the lock-step path reading its rows in place instead.
DECODE_DIRECT_DTYPES = (torch.bfloat16,)
# The lock-step path reads a float32 cache in place (no scratch copy) when one split
# runs (the default at Hk >= threads).
DECODE_FP32_IN_PLACE = True

# Decode path (decode.kvcache_fwd): "compiled" (default) runs the compiled C kernel of
# cpu/native.py for bf16 / float32 caches without softcap / ALiBi (everything else
# takes the torch-ops paths above, by feature, not by failure); "ops" always takes the
# torch-ops paths. Set with FLASHTRITON_CPU_DECODE=compiled|ops at import, or assign
# here. "compiled" raises native.NativeUnavailable (naming the cause: no C compiler, a
# compile error) instead of falling back. At B=1 Hq=32 Hk=8 D=128 L=32k, 2 threads,
# in the benchmark (right after SDPA): bf16 4.6-5.3 ms / fp32 8.2-9.7 ms, 25-33 GB/s,
# against 11 / 17.5 ms for the ops paths (bench/NOTES.md, "Session 4").
DECODE_PATH = os.environ.get("FLASHTRITON_CPU_DECODE", "compiled")
DECODE_PATHS = ("compiled", "ops")
# Compiled path: key pieces (splits) per sequence, at most; the number used gives the
# (sequence, piece) items about DECODE_ITEMS_PER_THREAD items per thread (dynamic
# scheduling evens out the tails) while every piece keeps DECODE_MIN_PIECE keys.
# L = 8k, B = 1, 2 threads: 2 / 4 / 8 / 16 / 32 pieces bf16 2.16 / 1.84 / 1.75 / 1.70 /
# 1.82 ms, fp32 3.19 / 2.68 / 2.57 / 2.54 / 2.58 ms (medians, interleaved with SDPA).
DECODE_ITEMS_PER_THREAD = 4
DECODE_MIN_PIECE = 256
# bf16 caches on the compiled decode path: AMX tiles for both products (native.py's
# head_amx, the FT_AMX build). "auto" (default): AMX when the CPU lists amx_tile +
# amx_bf16, the AMX build compiles and Linux grants the tile-data permission, else the
# AVX-512 kernel (one RuntimeWarning naming the cause when an AMX CPU fails the build /
# permission); "on": AMX or raise native.NativeUnavailable; "off": AVX-512 always.
# float32 never uses AMX. Set with FLASHTRITON_CPU_DECODE_AMX at import or assign here.
# decode.LAST_PATH (the bench's path column) says "compiled-amx" / "compiled"
# (bench/wip/cpu-decode-amx.md has the measurements).
DECODE_AMX = os.environ.get("FLASHTRITON_CPU_DECODE_AMX", "auto")
DECODE_AMX_MODES = ("auto", "on", "off")


# One-row forwards (flash_attn_func with Nq = 1, flash_attn_varlen_func with one query a sequence: a generation loop
# that does not call flash_attn_with_kvcache) of at least ONE_ROW_DECODE_MIN_NK keys, without dropout, run the
# decode kernel (forward._fwd_one_row; the GPU's launchers/policy.ONE_ROW_DECODE likewise): the prefill kernels'
# rows are one a head there, so each head streams its K / V on its own, where the decode kernel splits the keys over
# the threads and reads each KV byte once per GQA group. B = 1, Hq = 32, Hk = 8, D = 128, 2 threads (session 60,
# bench/cpu/s60_one_row_cpu.py): prefill route against flash_attn_with_kvcache, bf16 8k 4.88 / 0.85 ms, 32k 21.5 /
# 4.9, fp32 8k 8.5 / 2.9, 32k 37.1 / 10.6. The route against the prefill route (bench/cpu/
# s60_one_row_cpu_threshold.py, three alternated rounds): bf16 0.90-0.93x at Nk = 1-64, 0.74x at 128, 0.39x at 1k,
# 0.18x at 8k; fp32 0.76-0.81x at 1-64, 0.63x at 128, 0.29x at 1k, 0.24x at 8k - faster at every length, so every
# one-row call takes it (the GPU's threshold is its host time; here the threads' work dominates).
ONE_ROW_DECODE = True
ONE_ROW_DECODE_MIN_NK = 1


def checked(attr: str, env: str, allowed: tuple) -> str:
    """This module's setting `attr` (set from the environment variable `env`), checked against
    `allowed`: ValueError naming both and the allowed values otherwise. The path / mode getters of
    native_prefill.py and decode.py use it."""
    value = globals()[attr]
    if value not in allowed:
        raise ValueError(f"{env} / config.{attr} must be one of {allowed}, got {value!r}")
    return value
