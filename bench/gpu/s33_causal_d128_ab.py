"""Session 33: the causal Gluon forward one block a CTA (the D = 128 causal route from 2k) in the
CAUSAL_BANDS order (kernels/fwd_gluon.py; a session-33 helper, compiled offline only, never run,
not routed: policy.GLUON_FWD_CAUSAL_BANDS empty) against today's order, for issue 4 (D = 128
causal forward >= 1.0x cuDNN from 2k; bf16 grid 0.92 / 0.98 / 0.91x at 2k / 4k / 8k).

    PYTHONPATH=src timeout 300 python bench/gpu/s33_causal_d128_ab.py      # ~2 min, compiles included
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_fwd_gluon_causal_bands.py)
    S33_N=2048,8192 to shorten; S33_DTYPE=fp16 for float16.

What runs (D = 128, H = 16, 16k tokens: B = 16k / N, Nq = Nk, causal; N = 1k, 2k, 4k, 8k, 16k):
  one        forward_gluon.prepare(..., causal=True): one block a CTA, grid (n_m, B * H), each head's
             blocks heaviest first, head after head (the route's kernel today)
  bands      the same with causal_bands=True: the CTAs' linear ids through _tile_of's banded
             heaviest-first order, band = forward_gluon.one_block_band() (the largest divisor of
             B * H within half the L2: 1k 32, 2k 16, 4k 8, 8k 4, 16k 2 heads on the H200)
  bands-all  causal_bands=True, band = B * H: heaviest first over the whole grid (LPT; all heads'
             K / V live at once: session 24's persistent form of it lost to L2 misses)
  lib        flashtriton.flash_attn_func as routed now; cudnn: SDPA's cuDNN backend
Kernel-only (prepare's launch) or the whole call (lib, cudnn) as CUDA-graph replays (bench.common.
graph_or_eager_ms, L2 flushed), two rounds, the second in reverse order. First the outputs: each
variant on batch 0 / head 0 against float64 and bands / bands-all against one over the whole tensor
(expected BITWISE: same blocks, same code per block, only which CTA id runs which block).

MODEL (bench/wip/gluon-causal-d128-gap.md). A block of k key tiles costs k t + F, t = 1.72 us, F =
3.5 us (fit of session 31's one-block kernel-only numbers 452 / 530 / 571 / 606 at 2k / 4k / 8k /
16k with a dispatch simulation: rms 1.6%); the hardware hands CTA ids in linear order to the SM
that frees first (list scheduling over 132 SMs, 2,048 blocks at every N). Today's order ends with
the LAST head's blocks, its heaviest first: those start when the other SMs are nearly done, and
the makespan exceeds the mean SM load by +6.0 / +6.6 / +6.6 / +5.8 / +2.0% at 1k / 2k / 4k / 8k / 16k
(200 runs with 3% per-block jitter). The banded order ends with the light blocks of the last band:
+1.3 / +1.6 / +1.3 / +1.0 / +0.9%.

PREDICTION (written before any run), bands / one, best of two: 1k +2 to +6%, 2k +2 to +6%, 4k +2 to
+6%, 8k +2 to +6%, 16k -1 to +2% (model +4.6 / +4.8 / +5.3 / +4.7 / +1.1%). The low ends allow for
session 31's DYNAMIC persistent kernel (the banded order with an atomic deal, which should have
removed the same tail) measuring 0.95-0.99x one-block: if that loss was the banded order's L2
behaviour rather than its persistent machinery, bands pays it too. bands-all: as bands to
4k, 8k / 16k level to -4% (16 / 32 heads' K / V at once: 128-256 MB over the 50 MB L2). Against
cuDNN (same run): 2k 0.94 -> ~0.98x, 4k ~1.0 -> ~1.05x, 8k ~1.0 -> ~1.05x. Outputs bitwise.
Wrong if bands is within +-1.5% of one at 2k-8k: then the CTA dispatch is not the linear list
the model assumes (or jitter already balances it), the tail is not where the gap is, and what is
left is the fixed per-block cost F (~3.5 us, ~18% of the time at 2k: the design in the .md,
section 5, is the next lever). Wrong the other way if bands gains > +8% (the order also changed
the L2 behaviour: compare bands-all).

Decision for the policy (launchers/policy.py): GLUON_FWD_CAUSAL_BANDS[128] = the shortest N (of
2k, 4k, 8k, 16k) from which bands beats one by >= 1.5% in both rounds and is never more than 1%
behind at a longer N, else no key; the same rule run with S33_DTYPE=fp16 must not contradict it
(the table is per head dim, both dtypes take it). Then flip tests/test_fwd_gluon_causal_bands.py::
test_not_routed_by_default, plans.clear(), the D = 128 causal grid rows (bf16 and fp16, 2k-16k).
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
from flashtriton.launchers import forward_gluon, policy  # noqa: E402

TOKENS, H, D = 16384, 16, 128
DTYPE = torch.float16 if os.environ.get("S33_DTYPE", "bf16") == "fp16" else torch.bfloat16
NS = [int(x) for x in os.environ.get("S33_N", "1024,2048,4096,8192,16384").split(",")]


def inputs(n, seed=0):
    torch.manual_seed(seed)
    b = max(1, TOKENS // n)
    return tuple(torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))


def case(n):
    q, k, v = inputs(n)
    b = q.shape[0]
    scale = D ** -0.5
    flops = attention_flops(b, H, n, n, D, True)
    tag = f"N={n} causal"
    variants = {"one": dict(), "bands": dict(causal_bands=True), "bands-all": dict(causal_bands=True, band=b * H)}
    calls, outs = {}, {}
    for name, kw in variants.items():
        try:
            calls[name] = forward_gluon.prepare(q, k, v, scale, causal=True, **kw)
            outs[name] = tuple(t.clone() for t in calls[name]())
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"{tag} {name}: {short_error(exc)}", flush=True)
            traceback.print_exc()
            calls.pop(name, None)
            outs.pop(name, None)
    dev = q.device
    print(f"{tag} bands: band {forward_gluon.one_block_band(dev, n, D, 1, q.element_size(), b * H)} of {b * H} "
          f"(causal_band {forward_gluon.causal_band(dev, n, D, 1, q.element_size(), b * H)})", flush=True)
    for name in list(calls):
        ok, text = head0_fwd_check(q, k, v, *outs[name], softmax_scale=scale, window_right=0)
        print(f"{tag} {name}: {'ok' if ok else 'FAIL'} {text}", flush=True)
        if name != "one" and "one" in outs:
            print(f"{tag} {name} vs one: {same_outputs(outs['one'], outs[name])}", flush=True)
        if not ok:
            calls.pop(name)
    del outs

    def lib():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, causal=True, softmax_scale=scale)
    calls["lib"] = lib
    sdpa = gpu_providers(include_flex=False)["sdpa-cudnn"]
    calls["cudnn"] = lambda: sdpa(q, k, v, True)
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
    names = ["one", "bands", "bands-all", "lib", "cudnn"]
    cells = " | ".join(" / ".join(f"{x:.0f}" for x in tf.get(name, [])) or "-" for name in names)
    best = {name: max(t) for name, t in tf.items()}
    per_round = ""
    if len(tf.get("bands", [])) == 2 and len(tf.get("one", [])) == 2:
        per_round = " (rounds " + " / ".join(f"{x / y:.3f}" for x, y in zip(tf["bands"], tf["one"])) + ")"
    vs = " / ".join(f"{best[x] / best[ref]:.3f}x" for x, ref in (("bands", "one"), ("bands-all", "one"),
                                                               ("one", "cudnn"), ("bands", "cudnn"))
                    if x in best and ref in best)
    print(f"| {n} | {b} | {cells} | {vs}{per_round} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {DTYPE}, "
          f"GLUON_FWD_CAUSAL_MIN_N {policy.GLUON_FWD_CAUSAL_MIN_N}", flush=True)
    t0 = time.time()
    for n in NS:
        try:
            case(n)
        except Exception as exc:  # noqa: BLE001  (reported, the next case runs)
            print(f"N={n}: {short_error(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()
    print("table rows above: | N | B | one | bands | bands-all | lib | cuDNN (TFLOP/s, 2 rounds) | bands / one, "
          "bands-all / one, one / cuDNN, bands / cuDNN (best of two) (bands / one per round) |", flush=True)
    print(f"total {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
