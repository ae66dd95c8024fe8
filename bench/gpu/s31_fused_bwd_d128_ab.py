"""Session 31: the fused Gluon backward's DEFER_DQ at D = 128 (kernels/bwd_gluon_fused.py: each
ring tile's dQ wgmmas and TMA reduce-add run one tile later, in the next tile's dQ slot, the last
tile's after the loop; written and compiled offline in session 31 by a helper, never run; not
routed: policy.GLUON_BWD_FUSED_DEFER empty) against the current fused kernel ("old") and cuDNN
(SDPA CUDNN_ATTENTION's backward through aten: autograd of the SDPA output), for issue 4
(backward >= 1.0x cuDNN at D = 128 from 2k; prefill.md: non-causal 0.94-0.96x, causal
0.96-0.99x). Non-causal only: DEFER_DQ is compiled for the plain kernel (causal spilled 148
bytes, 12 local accesses a tile, offline: not offered).

    PYTHONPATH=src timeout 400 python bench/gpu/s31_fused_bwd_d128_ab.py          # checks + A/B, ~3-4 min
    PYTHONPATH=src python bench/gpu/s31_fused_bwd_d128_ab.py checks                # only the correctness part
    S31_D=64 PYTHONPATH=src timeout 400 python bench/gpu/s31_fused_bwd_d128_ab.py  # the same at D = 64 (H = 32)
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_defer.py)

What runs: launchers.backward.bwd (the library's whole backward: delta preprocess, zero, fused
kernel, cast), the fused route forced at every N (policy.GLUON_BWD_FUSED_MIN_N["plain"][D] = 0;
at D = 128 it is 1k already), "old" = the DEFER table empty, "defer" = GLUON_BWD_FUSED_DEFER
["plain"] = {D} (a spy on backward_gluon._run_fused checks DEFER_DQ in the launch). D = 128,
bf16, H = 16 (hidden 2048), 16k tokens (B = 16k / N), N = 2k / 4k / 8k / 16k, non-causal,
deterministic=False, CUDA-graph replays (bench.common.graph_time_ms, L2 flushed; eager where
capture fails, marked *), two rounds, the second in reverse order. First the checks: batch 0 /
head 0 of each variant against float64 (<= 3x PyTorch's bf16 error, dq / dk / dv), finite
everywhere, and defer against old over the whole tensors (dk / dv expected BITWISE: the same
dK / dV wgmmas on the same operands in the same order, ROTATE on in both; dq differs by fp32
summation order only). A variant that fails its check is not timed. TFLOP/s by
attention_flops(..., backward) (2.5x forward).

PREDICTION (written before any run; bench/wip/fused-bwd-d128.md). Per 64 x 128 (query x key)
CTA tile today (offline SASS, sm_90a): tensor 5 matmuls x 2 WGs x 2 x 64 x 64 x 128 = 10.5
MFLOP / 4096 = 2560 cycles; MUFU 2 warps x 33 x 8 = 528 cycles an SMSP; issue 483 + 491 = 974
an SMSP; wgmma shared-memory operand bytes 272 KB + TMA / dS^T / staging / reduce 112 KB = 384
KB (~3000 cycles if 128 B a clock); measured ~4770 cycles (502 TFLOP/s at 16k, ~1.75 GHz,
kernel ~10.8 of 10.95 ms). The two WGs run in lockstep: tile g's dQ needs the other WG's dS^T
half of tile g (ds_ready), so both do their softmax (~600 cycles) and their staging / fences /
reduce tail (~300-500) at the same time, with the tensor pipe idle or half idle meanwhile
(~1000 of the 4770 cycles). DEFER_DQ computes tile g's dQ in tile g + 1: a WG waits for the
other's dS^T of the PREVIOUS tile, so (2 dS^T buffers: the lead bounded by ds_free at ~half a
tile) the WGs can run up to half a tile apart, one's softmax and tail under the other's dV / dK
/ dQ wgmmas. Cost: +46 / +11 instructions a tile (529 / 502, issue still ~21%), the last tile's
dQ after the loop unhidden (1 tile in 32-256 a CTA).
  Non-causal 16k / 8k: +3 to +8% (centre +5%: ~525-530 / ~520 TFLOP/s, ~1.00x cuDNN);
  4k: +3 to +7% (~490-505); 2k: +2 to +6% (~465-480, 32 tiles a CTA: the drain is ~1/32).
  dk / dv bitwise old's; dq within fp32 order (rel. diff ~1e-3 or less).
  Wrong if defer gains < +2% at 8k / 16k: then the lockstep is not the limit and shared-memory
  bandwidth (~3000 of ~4770 cycles by the estimate above) or the per-WG chain's latencies
  are; the next lever is fewer shared-memory bytes a tile (dK's A operand from registers
  again, 8 KB a WG a tile, at a register cost) or the dq-writer partition (store_wait + bar
  + reduce issue off the consumers: ~1-2%).
Offline (bench/gluon_bwd_compile.py --fused --defer, sm_90a): setmaxnreg 240 / 240 / 24, spill
8 bytes (outside the tile loops; 0 local accesses in them, also through the JIT binder with
the launcher's arguments at 2k / 16k), 193 KB shared memory (unchanged: 2 dS^T buffers), tile
loops 529 / 502 instructions a warp (old 483 / 491), 32 MUFU.EX2, 9 BAR.SYNC (old 9). All 28
existing variants' SASS byte-identical (bench/gluon_bwd_fused_sass_hash.py).
"""
import os
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")

import torch  # noqa: E402

from flashtriton import reference  # noqa: E402
from flashtriton.bench.common import attention_flops, graph_backward_ms, graph_time_ms, time_ms  # noqa: E402
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import backward_gluon, plans, policy  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

D = int(os.environ.get("S31_D", "128"))
TOKENS, H, DTYPE = 16384, 2048 // D, torch.bfloat16
NS = [int(x) for x in os.environ.get("S31_NS", "2048,4096,8192,16384").split(",")]
CHECK_NS = [int(x) for x in os.environ.get("S31_CHECK_NS", "2048,16384").split(",")]
CASES = [(n, False) for n in NS]
VARIANTS = ("old", "defer")
SEEN = []
_real_run = backward_gluon._run_fused


def _spy(*a, **kw):
    SEEN.append(bool(a[6].get("DEFER_DQ", False)))
    return _real_run(*a, **kw)


backward_gluon._run_fused = _spy


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def setting(name: str, causal: bool) -> None:
    kind = "causal" if causal else "plain"
    policy.GLUON_BWD_FUSED_MIN_N[kind][D] = 0                        # the fused route at every N
    policy.GLUON_BWD_FUSED_DEFER = {"plain": frozenset()}
    if name == "defer":
        policy.GLUON_BWD_FUSED_DEFER[kind] = frozenset({D})
    plans.clear()


def params(causal):
    return AttnParams(D ** -0.5, window_right=0 if causal else -1, deterministic=False)


def make_inputs(n, causal, seed=0):
    torch.manual_seed(seed)
    b = TOKENS // n
    q, k, v = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))
    dout = torch.randn_like(q)
    out, lse = lib_forward.fwd(q, k, v, params(causal))
    return q, k, v, dout, out, lse


def call(causal, inp):
    q, k, v, dout, out, lse = inp
    return lambda: lib_backward.bwd(dout, q, k, v, out, lse, params(causal))


def cudnn_ms(causal, inp) -> float:
    """SDPA CUDNN_ATTENTION's backward (aten's cudnn attention backward) as the grid times it:
    forward+backward captured together minus the forward alone (bench.common.graph_backward_ms;
    a backward captured without its forward fails: autograd runs it on the forward's stream,
    and the failed capture left the CUDA generator unusable, session 30 call A)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, dout, _, _ = inp
    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))

    def fwd():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=D ** -0.5)

    return graph_backward_ms(fwd, (qt, kt, vt), dout.transpose(1, 2))

def check_one_head(causal, inp, grads) -> tuple:
    q, k, v, dout, _, _ = inp
    args = [t[:1, :, :1] for t in (q, k, v)]
    kw = dict(softmax_scale=D ** -0.5, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout[:1, :, :1].double(), *(t.double() for t in args), **kw)
    lowp = reference.attention_grad(dout[:1, :, :1], *args, **kw)
    ok, res = True, []
    for i, name in enumerate(("dq", "dk", "dv")):
        o = grads[i][:1, :, :1].double()
        err = (o - truth[i]).abs().max().item()
        base = (lowp[i].double() - truth[i]).abs().max().item()
        good = err <= 3 * base + 1e-4 and torch.isfinite(grads[i]).all().item()
        ok = ok and good
        res.append(f"{name} {err:.1e} (torch {base:.1e}){'' if good else ' WRONG'}")
    return ok, "f64 err " + ", ".join(res)


BAD = set()


def checks():
    for n, causal in CASES:
        if n not in CHECK_NS:
            continue
        inp = make_inputs(n, causal)
        grads = {}
        for name in VARIANTS:
            tag = f"check N={n} causal={causal} {name}"
            try:
                setting(name, causal)
                SEEN.clear()
                print(f"{tag}: launching {time.strftime('%H:%M:%S')}", flush=True)
                g = [t.clone() for t in call(causal, inp)()]
                torch.cuda.synchronize()
                want = name == "defer"
                routed = "route ok" if SEEN == [want] else f"ROUTE WRONG (DEFER_DQ launched: {SEEN})"
                ok, text = check_one_head(causal, inp, g)
                if not ok or SEEN != [want]:
                    BAD.add((name, causal))
                grads[name] = g
                print(f"{tag}: {'ok' if ok else 'FAILED'} {routed}; {text}", flush=True)
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                BAD.add((name, causal))
                print(f"{tag}: ERROR {short(exc)}", flush=True)
                traceback.print_exc(limit=3)
        if len(grads) == 2:
            a, o = grads["defer"], grads["old"]
            dq = ((a[0].float() - o[0].float()).abs().max() / o[0].float().abs().max()).item()
            bit = torch.equal(a[1], o[1]) and torch.equal(a[2], o[2])
            dk = (a[1].float() - o[1].float()).abs().max().item()
            print(f"check N={n} causal={causal} defer vs old: dk/dv {'bitwise' if bit else f'differ (dk max {dk:.1e})'}"
                  f", dq rel diff {dq:.1e}", flush=True)
        del inp, grads
        torch.cuda.empty_cache()


def timed(fn) -> tuple:
    try:
        return graph_time_ms(fn), ""
    except Exception as exc:  # noqa: BLE001
        print(f"  (graph capture failed: {short(exc)}; eager)", flush=True)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def ab():
    rows = {}
    names = list(VARIANTS) + ["cudnn"]
    for rnd in range(2):
        for n, causal in (CASES if rnd == 0 else CASES[::-1]):
            inp = make_inputs(n, causal)
            for name in (names if rnd == 0 else names[::-1]):
                if (name, causal) in BAD:
                    continue
                try:
                    if name == "cudnn":
                        ms, mark = cudnn_ms(causal, inp), ""
                    else:
                        setting(name, causal)
                        ms, mark = timed(call(causal, inp))
                    rows.setdefault((n, causal, name), []).append(ms)
                    tf = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd") / ms / 1e9
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: {ms * 1e3:.1f}{mark} us "
                          f"{tf:.0f} TFLOP/s", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: ERROR {short(exc)}", flush=True)
            del inp
            torch.cuda.empty_cache()
    print(f"\nD = {D}, H = {H}")
    print("\n| N | causal | old TFLOP/s (r1 / r2) | defer | cuDNN | defer / old (best) | old, defer vs cuDNN (best) |")
    print("|---|---|---|---|---|---|---|")
    for n, causal in CASES:
        fl = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd")
        tf = {name: [fl / ms / 1e9 for ms in rows.get((n, causal, name), [])] for name in names}
        cells = [" / ".join(f"{x:.0f}" for x in tf[name]) or "-" for name in names]
        best = {name: max(v) for name, v in tf.items() if v}
        ratio = f"{best['defer'] / best['old']:.3f}x" if "defer" in best and "old" in best else "-"
        vs = " / ".join(f"{best[x] / best['cudnn']:.2f}x" for x in VARIANTS if x in best and "cudnn" in best)
        print(f"| {n} | {'yes' if causal else 'no'} | {' | '.join(cells)} | {ratio} | {vs or '-'} |", flush=True)


def main(argv):
    what = argv[1] if len(argv) > 1 else "all"
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    checks()
    if what != "checks":
        ab()
    print(f"done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv)
