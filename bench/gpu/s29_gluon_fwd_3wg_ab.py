"""Session 29: the Gluon forward with THREE consumer warpgroups (kernels/fwd_gluon.py
NUM_CONSUMERS = 3: plain PERSISTENT, 64 query rows a consumer, 192 a CTA, D = 64; written and
compiled offline in session 29, never run, not routed: policy.GLUON_FWD_CONSUMERS = {64: 2})
against the routed 2-consumer kernel (128 rows a CTA) and cuDNN (SDPA CUDNN_ATTENTION), for
issue 4 (forward >= 1.0x cuDNN at D = 64 from 2k; session 24-28: 0.93-0.99x).

    PYTHONPATH=src timeout 170 python bench/gpu/s29_gluon_fwd_3wg_ab.py      # ~1-2 min, compiles included
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_3wg.py)

What runs: forward_gluon.prepare(..., persistent=True) with num_consumers=2 / 3 (each its own
compiled kernel; 3 stages both; the 3-consumer kernel also with 4 stages: "3wg-s4"), kernel-only
as CUDA-graph replays (bench.common.graph_time_ms, L2 flushed), and cuDNN through SDPA (a graph
too). D = 64, bf16, H = 32, 16k tokens (B = 16k / N), N = 2k / 4k / 16k. First the outputs:
each Gluon variant on batch 0 / head 0 against float64 (error <= 2x PyTorch's bf16 error, lse
too), and 3wg against 2wg over the whole tensor (expected BITWISE: every row meets the same
tiles in the same order through the same 64-row wgmma shapes and softmax code). Then two
timing rounds, the second in reverse order; TFLOP/s by attention_flops. A variant that
fails its check is not timed.

Offline (bench/gluon_fwd_compile.py, sm_90a, Triton 3.6.0, session 29): D = 64 bf16 PERSISTENT
  2 consumers: 12 warps, .maxnreg 168, setmaxnreg 240 / 240 / 24, 0 spills, 112 KB shared
  3 consumers: 16 warps, .maxnreg 128, setmaxnreg 168 (default = consumer 0) / 160 / 160 / 24
               (outside the partitions 256 / 80), 0 spills, 120 KB shared (Q 24 KB + 3 x 32 KB)
  One consumer's tile loop (one 64 x 128 tile, SASS instructions a warp): 409-411 in both
  kernels (66 MUFU.EX2, 66 FFMA, 68 FMNMX, 68 FADD, 34 FMUL, 32 F2FP, 8 SHFL, 2 mbarrier
  waits, 2 BAR.SYNC, 8 HGMMA issues in 2 groups, DEPBAR.LE 1 then 0): the same code, three
  copies instead of two. The 2-consumer kernels' SASS is byte-identical to before (all 56
  variants of gluon_fwd_compile.py's table, addresses stripped).

PREDICTION (written before any run). Per 64 x 128 tile of one consumer warpgroup at D = 64
(its 4 warps one on each SM sub-partition, SMSP):
  tensor: S 64x128x64 + P V 64x64x128 = 2.10 MFLOP / 4096 FLOP a clock an SM = 512 cycles;
  MUFU:   66 EX2 a warp x 8 cycles (16 a clock an SM = 4 an SMSP) = 528 cycles of its SMSP's MUFU;
  issue:  411 instructions a warp = 411 of its SMSP's issue cycles.
  So the three resources cost ~the same per tile (MUFU 528 ~ tensor 512 > issue 411): a
  consumer's step is a CHAIN through all three (S wgmma -> row max -> 66 EX2 -> row sum ->
  wait P V -> O rescale, P pack), which no consumer can shorten alone. Session 28's profile
  (2 consumers, N = 4k): tensor 45.8% busy, issue 38% -> 2 x 512 / 0.458 = ~2240 cycles per
  pair of tiles, i.e. each consumer's chain ~2200 cycles for 512 + 528 + 411 of work (the
  rest: the S wgmma queued behind the other consumer's pair, latencies, 2 warpgroup
  BAR.SYNC a tile, 33% of stalls at a barrier). With 3 consumers the per-SM work for 3 tiles
  is tensor 1536, MUFU 1584, issue 1233 cycles an SMSP; if each chain grows by the extra
  queueing of its S behind one more consumer's wgmmas (+256-512 cycles -> 2450-2700), the
  period for 3 tiles is ~2450-2700 cycles against 3 x 1120 = 3360 now: 1.25-1.37x as an
  upper model. Discounted for what the model leaves out (the 4th warp a scheduler and the
  issue / MUFU interference of 3 softmaxes, 168 / 160 registers instead of 240, the dead
  consumer in the last block of a sequence when N is not a multiple of 192: 2048 = 10 x 192
  + 128 wastes 1/33 of the work at 2k / 4k, 16384 = 85 x 192 + 64 wastes ~0.5% at 16k):
  3wg / 2wg time ratio +8 to +20% faster (centre +12%) at 4k and 16k, +5-15% at 2k (21.3
  blocks a CTA: wave tail 22 / 21.33 as today's 32 / 31.03), i.e. D = 64 4k ~480 (430 in
  session 24), 16k ~500 (449), 2k ~450 TFLOP/s; against cuDNN >= 1.03x from 4k (today
  0.93-0.99x). 4 stages: level with 3 (+-2%: 192 rows a K / V tile lower the load rate a
  FLOP by 1/3). Outputs bitwise the 2-consumer kernel's. Wrong if the 3-consumer kernel
  gains < 3% at 4k: then the chain is not queueing-bound but MUFU / issue-bound inside an
  SMSP, and the next lever is the exp2 share on FMA (session 14's EXP_POLY) in this kernel.
"""
import os
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (before flashtriton: prepare() alone is timed anyway)

import torch  # noqa: E402

from flashtriton.bench.common import (attention_flops, graph_or_eager_ms, head0_fwd_check,  # noqa: E402
                                      same_outputs, short_error)
from flashtriton.bench.providers import gpu_providers  # noqa: E402
from flashtriton.launchers import forward_gluon  # noqa: E402

TOKENS, H, D, DTYPE = 16384, 32, 64, torch.bfloat16
NS = [int(x) for x in os.environ.get("S29_N", "2048,4096,16384").split(",")]
VARIANTS = {"2wg": dict(num_consumers=2), "3wg": dict(num_consumers=3), "3wg-s4": dict(num_consumers=3, num_stages=4)}


def inputs(n, seed=0):
    torch.manual_seed(seed)
    b = max(1, TOKENS // n)
    return tuple(torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))


def case(n):
    q, k, v = inputs(n)
    b = q.shape[0]
    scale = D ** -0.5
    flops = attention_flops(b, H, n, n, D, False)
    calls, outs = {}, {}
    for name, kw in VARIANTS.items():
        print(f"N={n} {name}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[name] = forward_gluon.prepare(q, k, v, scale, persistent=True, **kw)
            outs[name] = tuple(t.clone() for t in calls[name]())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"N={n} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            calls.pop(name, None)
            outs.pop(name, None)
    for name in list(calls):
        ok, text = head0_fwd_check(q, k, v, *outs[name], softmax_scale=scale)
        print(f"N={n} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if name != "2wg" and "2wg" in outs:
            print(f"N={n} {name} vs 2wg: {same_outputs(outs['2wg'], outs[name])}", flush=True)
        if not ok:
            calls.pop(name)                                  # wrong: not timed
    del outs
    sdpa = gpu_providers(include_flex=False)["sdpa-cudnn"]
    calls["cudnn"] = lambda: sdpa(q, k, v, False)
    times = {name: [] for name in calls}
    names = list(calls)
    for rnd, order in enumerate((names, names[::-1])):
        for name in order:
            try:
                ms, star = graph_or_eager_ms(calls[name])
            except Exception as exc:  # noqa: BLE001
                print(f"N={n} round {rnd + 1} {name}: {short_error(exc)}", flush=True)
                continue
            times[name].append(ms)
            print(f"N={n} round {rnd + 1} {name}: {ms:.3f} ms{star} {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
    tf = {name: [flops / ms / 1e9 for ms in t] for name, t in times.items() if t}
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in VARIANTS)
    best = {name: max(t) for name, t in tf.items()}
    ratio = f"{best['3wg'] / best['2wg']:.3f}x" if "3wg" in best and "2wg" in best else "-"
    vs = " / ".join(f"{best[x] / best['cudnn']:.3f}x" for x in ("2wg", "3wg") if x in best and "cudnn" in best)
    print(f"| {n} | {b} | {cells} | {' / '.join(f'{x:.0f}' for x in tf.get('cudnn', []))} | {ratio} | {vs} |",
          flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for n in NS:
        try:
            case(n)
        except Exception as exc:  # noqa: BLE001  (reported, the next N runs)
            print(f"N={n}: {short_error(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("table rows above: | N | B | 2wg TFLOP/s (2 rounds) | 3wg | 3wg-s4 | cuDNN | 3wg / 2wg (best) | "
          "2wg / 3wg vs cuDNN (best) |", flush=True)


if __name__ == "__main__":
    main()
