"""Session 32: the Gluon forward at head dim 256 (kernels/fwd_gluon.py DEFAULT_CONFIG[256] = BLOCK_M
128, BLOCK_N 64, 2 stages; SPLIT_EMPTY, K's and V's stages released apart, the launcher's default
at D = 256; a session-31 helper, compiled offline only, never run, not routed: policy.
GLUON_FWD_MIN_N / GLUON_FWD_CAUSAL_MIN_N have no 256 key) against the library's D = 256 route
(flash_attn_func: fwd_ws.py / fwd.py) and cuDNN (SDPA CUDNN_ATTENTION), for issue 4 (D = 256
forward 0.85-0.93x cuDNN; bf16, 16k tokens, H = 8, ours / cuDNN at N = 2k / 4k / 16k: non-causal
569 / 638, 598 / 666, 589 / 647; causal 4k 512 / 556, 16k 556 / 638).

    PYTHONPATH=src timeout 300 python bench/gpu/s32_gluon_fwd_d256_ab.py     # < 150 s, compiles included
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_d256.py)
    S32_CASES=2048,16384,c4096 ... to shorten (c: causal).

What runs (D = 256, bf16, H = 8, 16k tokens: B = 16k / N, Nq = Nk; non-causal N = 2k / 4k / 16k,
causal N = 4k / 16k):
  non-causal: pers         forward_gluon.prepare(..., persistent=True): the PERSISTENT kernel (the
                           route's variant for plain calls, GLUON_FWD_PERSISTENT), SPLIT_EMPTY
              pers-nosplit the same with split_empty=False (K and V released together)
  causal:     one          prepare(..., causal=True): one block a CTA (the causal route's variant)
              one-nosplit  the same with split_empty=False
  lib         flashtriton.flash_attn_func as routed now (the kernel it takes is printed)
  cudnn       SDPA's cuDNN backend
Kernel-only (prepare's launch) or the whole call (lib, cudnn) as CUDA-graph replays (bench.common.
graph_or_eager_ms, L2 flushed). First the outputs: each Gluon variant and lib on batch 0 / head 0
against float64 (error <= 2x PyTorch's bf16 error, lse too; o / lse finite), and the nosplit
variant against the split one over the whole tensor (expected BITWISE). A variant that fails its
check is not timed. Then two timing rounds, the second in reverse order; TFLOP/s by
attention_flops.

Offline (bench/gluon_fwd_compile.py, sm_90a, Triton 3.6.0): 12 warps, setmaxnreg 240 / 240 / 24,
0 spills (no local memory) in every D = 256 variant, 192 KB + 288 B of shared memory, 80 HGMMA
plain / 120 causal, DEPBAR.LE 1 in every tile loop (the P V wgmma runs under the softmax);
tile loops (SASS instructions a warp, one 64 x 64 tile of one consumer): plain 415 / 413 (406 /
404 without SPLIT_EMPTY), PERSISTENT 412 / 408 without, CAUSAL unmasked ~420, masked ~540.

PREDICTION (written before any run). Per CTA tile (128 query rows x 64 keys) the two consumers'
wgmmas are S 2 x 64 x 64 x 256 and P V 2 x 64 x 256 x 64: 8.4 MFLOP = 2048 tensor cycles at 4096
FLOP / cycle / SM, what a D = 128 tile (128 x 128) costs. Against it:
  - issue: 415 instructions a warp a consumer tile, 2 consumer warps a scheduler: ~830 cycles
    (40%; D = 128: ~920); MUFU 34 a warp x 8 cycles x 2 = 544 (27%; D = 128: 1056). The softmax
    is half as heavy per FLOP as at D = 128, so two consumers hide it easily; the O rescale (128
    FMUL a thread a tile) is the new cost and sits on a consumer's chain between its P V wait
    and its next issue (the other consumer's wgmmas cover it);
  - shared memory: S is m64n64k16 with both operands in shared memory, 4 KB a 32-cycle step =
    128 B / cycle, the SM's shared-memory rate: S runs at the port's limit. Per tile: S reads 2 x
    (Q 32 KB + K 32 KB), P V 2 x 32 KB, TMA writes 64 KB = 256 KB = 2048 cycles at 128 B / cycle
    against 224 KB at D = 128 (+14% per FLOP). This, not the softmax, is the D = 256 limit; it
    is also why BLOCK_N cannot shrink (32: 192 B / cycle) and 80 / 96 (FA3's 80) are out
    (Gluon tensors: powers of 2), 128 does not fit (2 stages: 320 KB; ~290 registers);
  - pipeline: 2 stages only (3 need 256 KB). Without SPLIT_EMPTY the stage of tile j - 1 frees
    after both consumers' P V_{j-1}, in tile j's step, and K_{j+1} goes there: its load is
    exposed at the next step's start (D = 128 with 2 stages measured 5-10% under 3, session
    23). With SPLIT_EMPTY K_j's stage frees when S_j retired (early in step j), V's after P V:
    every load gets about a tile of slack, like 3 stages.
  So, TFLOP/s best of two: pers 2k 540-600, 4k 580-630, 16k 590-640 (D = 128's Gluon kernel
  623-647 at 4k-16k, minus the shared-memory excess, plus the lighter softmax): 0.97-1.08x lib,
  0.88-0.98x cuDNN; causal one 4k 470-530 (lib 512), 16k 540-600 (lib 556): 0.95-1.08x lib.
  pers-nosplit / one-nosplit 3-10% below their split variants (never above by more than 1%).
  Outputs: split and nosplit bitwise. Wrong if pers < 0.95x lib at 16k: then shared memory
  (S's SS wgmma at N = 64) binds harder than estimated, and the next thing is ncu's shared-memory
  pipe / tensor-pipe utilisation of both kernels at 16k (fwd_ws.py at D = 256 takes the same
  64-key tile), or a smaller Q share (Q of 128 rows read twice a tile: a 3-consumer 192-row CTA
  does not fit the registers).
Decision for the policy (launchers/policy.py): GLUON_FWD_MIN_N[256] = the shortest N from which
pers beats lib by >= 2% in both rounds (and at every longer N measured), else no key;
GLUON_FWD_CAUSAL_MIN_N[256] likewise from one against lib (4k or 16k). fwd_gluon.
SPLIT_EMPTY_DEFAULT keeps 256 unless nosplit beats split at two of the non-causal Ns in both
rounds. Then plans.clear() where tests change it; tests/test_fwd_gluon_d256.py::
test_d256_not_routed_by_default asserts the tables without 256 (update it when routing).
"""
import os
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (before flashtriton: the graphs replay the launches anyway)

import torch  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.bench.common import (attention_flops, graph_or_eager_ms, head0_fwd_check,  # noqa: E402
                                      same_outputs, short_error)
from flashtriton.bench.providers import gpu_providers  # noqa: E402
from flashtriton.launchers import forward_gluon, plans, policy  # noqa: E402

TOKENS, H, D, DTYPE = 16384, 8, 256, torch.bfloat16
CASES = os.environ.get("S32_CASES", "2048,4096,16384,c4096,c16384").split(",")
VARIANTS = {False: {"pers": dict(persistent=True), "pers-nosplit": dict(persistent=True, split_empty=False)},
            True: {"one": dict(), "one-nosplit": dict(split_empty=False)}}
# S32_CAUSAL_EXTRA=1 (session 33, for session 34): the causal forward's other launches at D = 256, for the
# causal 512 cell (1.45x FA2's CUDA kernel, issue 4 asks 1.5x): "one-pp" one block a CTA with PINGPONG,
# "pers" the PERSISTENT launch (GLUON_FWD_PERSISTENT["causal"] is off since session 24: D = 128 measured
# -3% at 512 and -10-16% from 1k with it). Prediction: pers -5 to +5% at 512, behind from 1k; one-pp
# level (D = 128's ping-pong measured level). Run: S32_CASES=c512,c1024 S32_CAUSAL_EXTRA=1.
if os.environ.get("S32_CAUSAL_EXTRA") == "1":
    VARIANTS[True].update({"one-pp": dict(pingpong=True), "pers": dict(persistent=True)})
# S35_BANDS=1,2,4 (session 35): PERSISTENT causal launches with that many batch x heads a band of the tile
# order (forward_gluon.causal_band's default: as many as fill half the L2), for the causal efficiency at
# 8k (0.83x the non-causal TFLOP/s in session 35's grid; issue 4 asks 0.9x).
for _band in filter(None, os.environ.get("S35_BANDS", "").split(",")):
    VARIANTS[True][f"pers-b{_band}"] = dict(persistent=True, band=int(_band))


def inputs(n, seed=0):
    torch.manual_seed(seed)
    b = max(1, TOKENS // n)
    return tuple(torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))


def lib_route(q, k, v, causal) -> str:
    """Which forward flash_attn_func takes for this call now (fwd_into spied once)."""
    seen = []
    real = forward_gluon.fwd_into

    def spy(*a, **kw):
        seen.append(f"gluon causal={kw.get('causal')} persistent={kw.get('persistent')}")
        return real(*a, **kw)
    forward_gluon.fwd_into = spy
    try:
        plans.clear()
        with torch.no_grad():
            flashtriton.flash_attn_func(q, k, v, causal=causal)
        torch.cuda.synchronize()
    finally:
        forward_gluon.fwd_into = real
        plans.clear()
    return seen[0] if seen else "not Gluon (fwd_ws.py / fwd.py)"


def case(n, causal):
    q, k, v = inputs(n)
    b = q.shape[0]
    scale = D ** -0.5
    flops = attention_flops(b, H, n, n, D, causal)
    wr = 0 if causal else -1
    tag = f"N={n}{' causal' if causal else ''}"
    calls, outs = {}, {}
    names = list(VARIANTS[causal])
    for name, kw in VARIANTS[causal].items():
        print(f"{tag} {name}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[name] = forward_gluon.prepare(q, k, v, scale, causal=causal, **kw)
            outs[name] = tuple(t.clone() for t in calls[name]())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"{tag} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            calls.pop(name, None)
            outs.pop(name, None)
    for name in list(calls):
        ok, text = head0_fwd_check(q, k, v, *outs[name], softmax_scale=scale, window_right=wr)
        print(f"{tag} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if name != names[0] and names[0] in outs:
            print(f"{tag} {name} vs {names[0]}: {same_outputs(outs[names[0]], outs[name])}", flush=True)
        if not ok:
            calls.pop(name)                                  # wrong: not timed
    print(f"{tag} lib routes to: {lib_route(q, k, v, causal)} (GLUON_FWD_MIN_N {policy.GLUON_FWD_MIN_N}, "
          f"GLUON_FWD_CAUSAL_MIN_N {policy.GLUON_FWD_CAUSAL_MIN_N})", flush=True)
    with torch.no_grad():
        o_lib = flashtriton.flash_attn_func(q, k, v, causal=causal, softmax_scale=scale)
    ok, text = head0_fwd_check(q, k, v, o_lib, None, softmax_scale=scale, window_right=wr)
    print(f"{tag} lib: {'ok' if ok else 'FAIL'} {text}", flush=True)
    if names[0] in outs:
        print(f"{tag} lib vs {names[0]} out max {(o_lib.float() - outs[names[0]][0].float()).abs().max().item():.1e}",
              flush=True)
    if ok:
        def lib():
            with torch.no_grad():
                return flashtriton.flash_attn_func(q, k, v, causal=causal, softmax_scale=scale)
        calls["lib"] = lib
    del outs, o_lib
    sdpa = gpu_providers(include_flex=False)["sdpa-cudnn"]
    calls["cudnn"] = lambda: sdpa(q, k, v, causal)
    times = {name: [] for name in calls}
    order0 = list(calls)
    for rnd, order in enumerate((order0, order0[::-1])):
        for name in order:
            try:
                ms, star = graph_or_eager_ms(calls[name])
            except Exception as exc:  # noqa: BLE001
                print(f"{tag} round {rnd + 1} {name}: {short_error(exc)}", flush=True)
                continue
            times[name].append(ms)
            print(f"{tag} round {rnd + 1} {name}: {ms:.3f} ms{star} {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
    tf = {name: [flops / ms / 1e9 for ms in t] for name, t in times.items() if t}
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in names + ["lib", "cudnn"])
    best = {name: max(t) for name, t in tf.items()}
    main, other = names[0], names[1]
    extra = tuple((x, main) for x in names[2:])                      # S32_CAUSAL_EXTRA's variants against one
    vs = " / ".join(f"{best[x] / best[ref]:.3f}x" for x, ref in ((main, "lib"), (main, "cudnn"), (other, main)) + extra
                    if x in best and ref in best)
    print(f"| {n} | {'yes' if causal else 'no'} | {b} | {cells} | {vs} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    t0 = time.time()
    for c in CASES:
        causal = c.startswith("c")
        n = int(c[1:] if causal else c)
        try:
            case(n, causal)
        except Exception as exc:  # noqa: BLE001  (reported, the next case runs)
            print(f"N={n}: {short_error(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("table rows above: | N | causal | B | Gluon split (pers / one; 2 rounds) | nosplit | lib | cuDNN | "
          "split vs lib / vs cuDNN / nosplit vs split (best of two) |", flush=True)
    print(f"total {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
