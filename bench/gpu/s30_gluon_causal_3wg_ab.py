"""Session 30: the CAUSAL Gluon forward with THREE consumer warpgroups (kernels/fwd_gluon.py
NUM_CONSUMERS = 3 with CAUSAL, one block a CTA: 192-row blocks, each 64-row consumer computing
only the key tiles its rows reach, the rest of the block's tiles drained; written and compiled
offline by a session-29 helper, never run, not routed: policy.GLUON_FWD_CAUSAL_CONSUMERS =
{64: 2}) against the 2-consumer causal Gluon kernel (128-row blocks), the library's routed
causal forward (flash_attn_func: fwd_ws.py below GLUON_FWD_CAUSAL_MIN_N[64] = 16k, the
2-consumer Gluon kernel from there) and cuDNN (SDPA CUDNN_ATTENTION), for issue 4 (D = 64
forward >= 1.0x cuDNN; causal grid bf16 16k tokens, H = 32, ours / cuDNN: 2k 357 / 383, 4k
393 / 434, 8k 403 / 430, 16k 431 / 446).

    PYTHONPATH=src timeout 300 python bench/gpu/s30_gluon_causal_3wg_ab.py     # ~2-4 min, compiles included
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_causal_3wg.py)
    S30_N=2048,16384 ... to shorten.

What runs (D = 64, bf16, H = 32, 16k tokens: B = 16k / N, N = 2k / 4k / 8k / 16k, Nq = Nk):
  2wg     forward_gluon.prepare(..., causal=True): the 2-consumer causal kernel, one block a CTA
  3wg     the same with num_consumers=3 (3 stages)
  3wg-s4  the same with 4 stages (offline: 248 bytes of spills against 160)
  lib     flashtriton.flash_attn_func(q, k, v, causal=True) as routed now (the kernel it takes
          is printed: fwd_into spied once before timing)
  cudnn   SDPA's cuDNN backend, causal
Kernel-only (prepare's launch) or the whole call (lib, cudnn) as CUDA-graph replays (bench.common.
graph_time_ms, L2 flushed). First the outputs: each Gluon variant and lib on batch 0 / head 0
against float64 (error <= 2x PyTorch's bf16 error, lse too; o / lse finite), and 3wg against
2wg over the whole tensor (expected BITWISE: every 64-row group gets the same tiles, unmasked /
masked split and softmax code in both kernels; tests/test_fwd_gluon_causal_3wg.py checks the
split offline). A variant that fails its check is not timed. Then two timing rounds, the
second in reverse order; TFLOP/s by attention_flops(causal=True).

Offline (bench/gluon_fwd_compile.py, sm_90a, Triton 3.6.0, session 29 helper):
  2 consumers causal D = 64: 12 warps, setmaxnreg 240 / 240 / 24, 0 spills, 112 KB shared;
    tile loops 449 / 448 (unmasked), 672 / 672 (masked) instructions a warp.
  3 consumers causal D = 64: 16 warps, .maxnreg 128, setmaxnreg 168 / 160 / 160 / 24, 120 KB
    shared, 108 HGMMA, 5 UTMALDG, 3 UTMASTG; tile loops 451 / 451 / 447 (unmasked, 0 spills),
    717 / 717 / 728 (masked: 6 + 6, 6 + 6, 2 + 2 STL + LDL; one tile a consumer a block);
    SPILLS 160 bytes (4 stages 248), 12 spill instructions a consumer outside the loops (once
    a block). The 2-consumer kernels' SASS: byte-identical to before (61 variants).

PREDICTION (written before any run). Why 3 consumers should win here as in the plain kernel
(s29: 1.09-1.15x): a consumer's 64 x 128 tile step is a chain through tensor (512 cycles),
MUFU (528) and issue (~451), about equal, so two consumers cannot hide each other's softmax;
a third chain in flight fills the pipes. Causal specifics:
  + the unmasked loop (most tiles) is the same code as in the 2-consumer kernel (451 vs 449);
  + 1.5x fewer blocks: the per-block fixed cost (Q load, pipeline fill, epilogue with the O
    store, the peeled tile without overlap) is amortised over 192 rows instead of 128, which
    matters at 2k (11 blocks a head, ~8.5 tiles a consumer a block);
  + the drained tiles cost no compute (masking them to p = 0 would have cost 6% at 2k);
  - a masked tile (one a consumer a block, + the peel) is 717 instructions with 12 spill
    accesses against 672 without (~+1% of a block at 2k, less beyond);
  - the last block of a sequence is partial: 2048 = 10 x 192 + 128 and 8192 = 42 x 192 + 128
    (2 of 3 consumers live), 4096 = 21 x 192 + 64 and 16384 = 85 x 192 + 64 (1 live, on the
    heaviest block, which runs first): ~2% of the SM time at 2k / 4k, < 1% at 8k / 16k;
  - 160 / 168 registers: the masked step is a few registers short (the spills above).
  So: 3wg / 2wg time ratio (best of two rounds, same run) 1.08-1.18x at 4k / 8k / 16k (centre
  1.12x), 1.06-1.16x at 2k; 3wg TFLOP/s about 2k ~380, 4k ~440, 8k ~465, 16k ~490; against
  cuDNN >= 1.0x from 4k (1.08x at 16k), ~1.0x at 2k; against lib (fwd_ws.py at 2k-8k) +6-15%.
  3wg-s4 level with 3wg or up to 3% slower (more spills, the same loads a FLOP). Outputs
  bitwise the 2-consumer kernel's. Wrong if 3wg / 2wg < 1.04x at 8k / 16k: then the causal
  costs (masked tiles, partial blocks, spills) or the one-block-a-CTA launch eat the gain; the
  first thing to look at is the masked loop (ncu: local memory traffic, the masked loop's
  share of the issue) and the last block's single consumer at 4k / 16k.
Decision for the policy (launchers/policy.py): GLUON_FWD_CAUSAL_CONSUMERS[64] = 3 if 3wg beats
2wg at every N in both rounds; GLUON_FWD_CAUSAL_MIN_N[64] down to the shortest N from which 3wg
beats lib in both rounds (then plans.clear() in tests that change it; tests/
test_fwd_gluon_causal_3wg.py::test_gluon_fwd_causal_consumers_switch asserts the default).
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

TOKENS, H, D, DTYPE = 16384, 32, 64, torch.bfloat16
NS = [int(x) for x in os.environ.get("S30_N", "2048,4096,8192,16384").split(",")]
VARIANTS = {"2wg": dict(), "3wg": dict(num_consumers=3), "3wg-s4": dict(num_consumers=3, num_stages=4)}
COLUMNS = ["2wg", "3wg", "3wg-s4", "lib", "cudnn"]


def inputs(n, seed=0):
    torch.manual_seed(seed)
    b = max(1, TOKENS // n)
    return tuple(torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))


def lib_route(q, k, v) -> str:
    """Which forward flash_attn_func takes for this causal call now (fwd_into spied once)."""
    seen = []
    real = forward_gluon.fwd_into

    def spy(*a, **kw):
        seen.append(f"gluon causal persistent={kw.get('persistent')} consumers={kw.get('num_consumers', 2)}")
        return real(*a, **kw)
    forward_gluon.fwd_into = spy
    try:
        plans.clear()
        with torch.no_grad():
            flashtriton.flash_attn_func(q, k, v, causal=True)
        torch.cuda.synchronize()
    finally:
        forward_gluon.fwd_into = real
        plans.clear()
    return seen[0] if seen else "not Gluon (fwd_ws.py / fwd.py)"


def case(n):
    q, k, v = inputs(n)
    b = q.shape[0]
    scale = D ** -0.5
    flops = attention_flops(b, H, n, n, D, True)
    calls, outs = {}, {}
    for name, kw in VARIANTS.items():
        print(f"N={n} {name}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[name] = forward_gluon.prepare(q, k, v, scale, causal=True, **kw)
            outs[name] = tuple(t.clone() for t in calls[name]())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"N={n} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            calls.pop(name, None)
            outs.pop(name, None)
    for name in list(calls):
        ok, text = head0_fwd_check(q, k, v, *outs[name], softmax_scale=scale, window_right=0)
        print(f"N={n} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if name != "2wg" and "2wg" in outs:
            print(f"N={n} {name} vs 2wg: {same_outputs(outs['2wg'], outs[name])}", flush=True)
        if not ok:
            calls.pop(name)                                  # wrong: not timed
    print(f"N={n} lib routes to: {lib_route(q, k, v)} (GLUON_FWD_CAUSAL_MIN_N {policy.GLUON_FWD_CAUSAL_MIN_N}, "
          f"GLUON_FWD_CAUSAL_CONSUMERS {policy.GLUON_FWD_CAUSAL_CONSUMERS})", flush=True)
    with torch.no_grad():
        o_lib = flashtriton.flash_attn_func(q, k, v, causal=True, softmax_scale=scale)
    ok, text = head0_fwd_check(q, k, v, o_lib, None, softmax_scale=scale, window_right=0)
    print(f"N={n} lib: {'ok' if ok else 'FAIL'} {text}", flush=True)
    if "2wg" in outs:
        print(f"N={n} lib vs 2wg out max {(o_lib.float() - outs['2wg'][0].float()).abs().max().item():.1e}", flush=True)
    if ok:
        def lib():
            with torch.no_grad():
                return flashtriton.flash_attn_func(q, k, v, causal=True, softmax_scale=scale)
        calls["lib"] = lib
    del outs, o_lib
    sdpa = gpu_providers(include_flex=False)["sdpa-cudnn"]
    calls["cudnn"] = lambda: sdpa(q, k, v, True)
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
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in COLUMNS)
    best = {name: max(t) for name, t in tf.items()}
    ratio = f"{best['3wg'] / best['2wg']:.3f}x" if "3wg" in best and "2wg" in best else "-"
    vs = " / ".join(f"{best[x] / best[ref]:.3f}x" for x, ref in (("3wg", "cudnn"), ("3wg", "lib"))
                    if x in best and ref in best)
    print(f"| {n} | {b} | {cells} | {ratio} | {vs} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for n in NS:
        try:
            case(n)
        except Exception as exc:  # noqa: BLE001  (reported, the next N runs)
            print(f"N={n}: {short_error(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("table rows above: | N | B | 2wg TFLOP/s (2 rounds) | 3wg | 3wg-s4 | lib | cuDNN | 3wg / 2wg (best) | "
          "3wg vs cuDNN / vs lib (best) |", flush=True)


if __name__ == "__main__":
    main()
