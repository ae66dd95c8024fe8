"""Session 23: the hand-scheduled Gluon forward (kernels/fwd_gluon.py, first GPU run)
against fwd_ws.py (Triton's automatic warp specialization, what flash_attn_func runs for
these calls), D = 128, non-causal, bf16, 16k tokens, H = 16, N = 1k / 2k / 4k / 8k / 16k.

Per N: every Gluon configuration is checked against flash_attn_func's output (max abs
difference) and against float64 on one (batch, head) (the tests' criterion: error <= 2x
PyTorch's bf16 error), then all are timed in two rounds, the second in reverse order
(time_ms: median, L2 flushed; the Gluon kernel launched from prebuilt descriptors, so its
host work is not timed; flash_attn_func eagerly as the library runs it). A configuration
that fails to compile, hangs nothing but errs, or is wrong is printed and left out.

(Calls 5 and 6 ran it with the launcher in kernels/fwd_gluon.py and flash_attn_func on
fwd_ws.py; since the route to the Gluon kernel (policy.gluon_fwd) "fwd_ws" switches it off
and "library" is flash_attn_func as routed.)

    PYTHONPATH=src python bench/gpu/s23_gluon_fwd_ab.py                  # the A/B (~2-3 min)
    PYTHONPATH=src python bench/gpu/s23_gluon_fwd_ab.py smoke [CONFIG]   # one small call per config, checked

Run `smoke` first under `timeout` (a barrier mistake shows as a hang, not an error).

Offline (bench/gluon_fwd_compile.py, sm_90a, 2026-12-01): 12 warps (consumers 2 x 4 warps,
setmaxnreg 240 each, loader warpgroup 24), 0 spills, 160 KB shared memory (base), 64
wgmma.mma_async, S and P V wgmma in flight together (WARPGROUP.DEPBAR.LE gsb0, 0x1).

Prediction: correct everywhere (out within 2x bf16 error; differs from fwd_ws.py by about
one bf16 ulp of the output). Speed: base (BLOCK_N 128, 2 stages) 560-600 TFLOP/s at
N >= 2k, i.e. level with fwd_ws.py to +7%; pingpong +0-4% over base; BLOCK_N 64 behind
(-5-10%: twice the barrier traffic, half-size wgmma); at N = 1k all within 5% of each
other (one CTA per 128 rows: 2048 CTAs on 132 SMs, a tail of ~0.5 wave). The gap to
cuDNN's ~600-625 closes only with a persistent loop, which this prototype lacks.
"""
import sys

import torch

import flashtriton
from flashtriton import reference
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import forward_gluon as fwd_gluon
from flashtriton.launchers import plans, policy

D, H, TOKENS, DTYPE = 128, 16, 16384, torch.bfloat16
CONFIGS = {  # name -> attention_fwd_gluon keyword arguments
    "gluon": {},
    "gluon-pp": dict(pingpong=True),
    "gluon-s3": dict(num_stages=3),
    "gluon-bn64": dict(block_n=64, num_stages=4),
}


def inputs(n, b=None):
    torch.manual_seed(0)
    b = b or TOKENS // n
    return [torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3)]


def check_one_head(q, k, v, o, lse, scale):
    """(ok, text): batch 0, head 0 against float64, with the tests' criterion."""
    args = [t[:1, :, :1] for t in (q, k, v)]
    out64, lse64 = reference.attention(*(t.double() for t in args), softmax_scale=scale)
    out16, lse16 = reference.attention(*args, softmax_scale=scale)
    err = (o[:1, :, :1].double() - out64).abs().max().item()
    base = (out16.double() - out64).abs().max().item()
    err_lse = (lse[:1, :1].double() - lse64).abs().max().item()
    base_lse = (lse16.double() - lse64).abs().max().item()
    ok = err <= 2 * base + 1e-4 and err_lse <= 2 * base_lse + 1e-4 and torch.isfinite(o).all().item()
    return ok, f"f64 err {err:.1e} (bf16 torch {base:.1e}), lse {err_lse:.1e} ({base_lse:.1e})"


def smoke(names):
    """One small call per config (B = 2, N = 1024, GQA 16 / 4), checked: run it first, under timeout."""
    torch.manual_seed(0)
    q = torch.randn(2, 1024, H, D, device="cuda", dtype=DTYPE)
    k, v = (torch.randn(2, 1024, 4, D, device="cuda", dtype=DTYPE) for _ in range(2))
    scale = D ** -0.5
    for name in names:
        try:
            o, lse = fwd_gluon.attention_fwd_gluon(q, k, v, scale, **CONFIGS[name])
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, o, lse, scale)
            ref = fwd_ws_call(q, k, v)
            print(f"smoke {name}: {'ok' if ok else 'WRONG'}, {text}, vs flash_attn_func "
                  f"{(o.float() - ref.float()).abs().max().item():.1e}", flush=True)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"smoke {name}: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}", flush=True)


def route(on: bool):
    """The Gluon route (policy.gluon_fwd) on or off: GLUON_FWD_MIN_N emptied or restored,
    plans cleared (they key on the call, not on that table). Off, flash_attn_func runs
    fwd_ws.py."""
    policy.GLUON_FWD_MIN_N.clear()
    if on:
        policy.GLUON_FWD_MIN_N.update(_GLUON_MIN_N)
    plans.clear()


_GLUON_MIN_N = dict(policy.GLUON_FWD_MIN_N)


def fwd_ws_call(q, k, v):
    route(False)
    try:
        return flashtriton.flash_attn_func(q, k, v)
    finally:
        route(True)


def main():
    scale = D ** -0.5
    for n in (1024, 2048, 4096, 8192, 16384):
        q, k, v = inputs(n)
        b = q.shape[0]
        flops = attention_flops(b, H, n, n, D, False)
        with torch.no_grad():
            ref = fwd_ws_call(q, k, v)
            lib = lambda: flashtriton.flash_attn_func(q, k, v)      # noqa: E731
            calls = {"fwd_ws": lib, "library": lib}
            notes = {"fwd_ws": "reference", "library": "flash_attn_func as routed (eager, host work included)"}
            for name, kw in CONFIGS.items():
                try:
                    launch = fwd_gluon.prepare(q, k, v, scale, **kw)
                    o, lse = launch()
                    torch.cuda.synchronize()
                    ok, text = check_one_head(q, k, v, o, lse, scale)
                    diff = (o.float() - ref.float()).abs().max().item()
                    notes[name] = f"{'ok' if ok else 'WRONG'}, vs fwd_ws {diff:.1e}, {text}"
                    if ok:
                        calls[name] = launch
                except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                    notes[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"
            res = {name: [] for name in calls}
            for rnd in range(2):
                for name in (list(calls) if rnd == 0 else list(calls)[::-1]):
                    route(name != "fwd_ws")
                    res[name].append(flops / time_ms(calls[name], "cuda") / 1e9)
        route(True)
        print(f"N={n} B={b}: " + "  ".join(f"{nm} " + " / ".join(f"{x:.0f}" for x in r) for nm, r in res.items()),
              flush=True)
        for name, note in notes.items():
            print(f"    {name}: {note}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["smoke"]:
        smoke(sys.argv[2:] or list(CONFIGS))
    else:
        main()
