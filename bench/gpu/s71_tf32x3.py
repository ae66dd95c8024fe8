"""Session 71: float32 inputs' dots as Triton's tf32x3 (FLASHTRITON_ALLOW_TF32=x3: three tf32 tensor-core products a
dot, a = a_hi + a_lo) against true fp32 ("ieee", the default: FMA units) and plain tf32 (FLASHTRITON_ALLOW_TF32=1).
Why: the feature table's float32 row (call 1 of this session, H100, B 2, H 16, N 4096, D 128) reads 25.1 / 216.9 ms
forward / backward in true fp32 against SDPA's fp32 6.0 / 19.1 ms.
Prediction (bench/NOTES.md "Session 71"): tf32x3 forward 2.5-3.5x and backward 3-5x faster than ieee with the fp32
tiles as they are; errors within the fp32 criterion (2x / 3x PyTorch's fp32 math), some 2-4x ieee's.
Per case (B 2, H 16, fresh fp32 inputs): the error of out / dq / dk / dv against float64 over the criterion's bound
(1 = the bound; helpers.ATOL_FLOOR), then forward and forward + backward times (median of triton.testing.do_bench,
rounds in mirrored order, the smaller median); then, tf32x3 only, larger forward / backward tiles at D = 128.
Usage: PYTHONPATH=src:tests python bench/gpu/s71_tf32x3.py [seconds budget]"""
import os
import sys
import time

import torch
import triton

from flashtriton import flash_attn_func
from flashtriton.kernels import configs
from flashtriton.launchers import plans
from helpers import ATOL_FLOOR, max_err, reference_pair   # tests/helpers.py

T0 = time.time()
BUDGET = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
MODES = {"ieee": "0", "x3": "x3", "tf32": "1"}
TREE = {k: dict(configs.DEFAULTS_FP32[k]) for k in ("fwd", "dkdv", "dq")}


def restore():
    for k, v in TREE.items():
        configs.DEFAULTS_FP32[k].clear()
        configs.DEFAULTS_FP32[k].update(v)
    plans.clear()


def inputs(d, n, b=2, h=16):
    q, k, v = (torch.randn(b, n, h, d, device="cuda", requires_grad=True) for _ in range(3))
    return q, k, v, torch.randn_like(q)


def passes(q, k, v, dout, causal=False):
    """(forward without autograd, forward + backward) on these inputs, as functions."""
    def fwd():
        with torch.no_grad():
            flash_attn_func(q, k, v, causal=causal)

    def fwd_bwd():
        out = flash_attn_func(q, k, v, causal=causal)
        torch.autograd.grad(out, (q, k, v), dout)
    return fwd, fwd_bwd


def accuracy(d, causal, n):
    q, k, v, dout = inputs(d, n)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=d ** -0.5, window_right=0 if causal else -1)
    bound = {nm: (2 if nm == "out" else 3) * max_err(lowp[nm], truth[nm]) + ATOL_FLOOR[torch.float32]
             for nm in ("out", "dq", "dk", "dv")}
    del lowp
    parts = []
    for mode, knob in MODES.items():
        os.environ["FLASHTRITON_ALLOW_TF32"] = knob
        plans.clear()
        out = flash_attn_func(q, k, v, causal=causal)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
        r = {nm: max_err(x, truth[nm]) / bound[nm] for nm, x in zip(("out", "dq", "dk", "dv"), (out, dq, dk, dv))}
        parts.append(mode + " " + "/".join(f"{r[nm]:.2f}" for nm in r))
    os.environ["FLASHTRITON_ALLOW_TF32"] = "0"
    del truth
    torch.cuda.empty_cache()
    print(f"accuracy D={d} causal={causal} N={n} (error / bound, out/dq/dk/dv): " + ", ".join(parts), flush=True)


def timed(label, variants, fn, flops):
    """variants: name -> (knob, patch function). Mirrored rounds, the smaller median."""
    if time.time() - T0 > BUDGET:
        print(f"{label}: skipped (budget)", flush=True)
        return
    names = list(variants)
    res = {v: [] for v in names}
    for v in names + names[::-1]:
        knob, patch = variants[v]
        restore()
        patch()
        os.environ["FLASHTRITON_ALLOW_TF32"] = knob
        try:
            fn()
            res[v].append(triton.testing.do_bench(fn, warmup=3, rep=60))
        except Exception as e:   # a tile that does not compile or fit: say so, go on
            res[v].append(float("nan"))
            print(f"  {label} {v}: {type(e).__name__}: {str(e)[:160]}", flush=True)
    os.environ["FLASHTRITON_ALLOW_TF32"] = "0"
    restore()
    print(f"{label}: " + ", ".join(f"{v} {min(r):.3f} ms ({flops / min(r) * 1e-9:.1f} TFLOP/s)"
                                   for v, r in res.items()), flush=True)


def modes_case(d, causal, n):
    q, k, v, dout = inputs(d, n)
    fl = 4 * 2 * 16 * n * n * d / (2 if causal else 1)
    fwd, fwd_bwd = passes(q, k, v, dout, causal)
    plain = {m: (knob, lambda: None) for m, knob in MODES.items()}
    timed(f"fwd D={d} causal={causal} N={n}", plain, fwd, fl)
    timed(f"fwd+bwd D={d} causal={causal} N={n}", plain, fwd_bwd, 3.5 * fl)


def tile_patch(kernel, bd, t):
    def patch():
        if t is not None:
            configs.DEFAULTS_FP32[kernel][bd] = t
    return patch


def tiles_case(d=128, n=2048):
    q, k, v, dout = inputs(d, n)
    fl = 4 * 2 * 16 * n * n * d
    bd = triton.next_power_of_2(d)
    fwd, fwd_bwd = passes(q, k, v, dout)

    def fits(kernel, t):
        return configs._smem_estimate(kernel, t, bd, 4) <= configs.SMEM_BYTES
    T = configs.Tile
    fwd_tiles = [None, T(64, 64, 4, 2), T(128, 32, 8, 2), T(128, 64, 8, 2), T(64, 64, 4, 3)]
    timed(f"x3 fwd tiles D={d} N={n}", {str(t or "default"): ("x3", tile_patch("fwd", bd, t))
                                        for t in fwd_tiles if t is None or fits("fwd", t)}, fwd, fl)
    bwd = {"default": ("x3", lambda: None)}
    for a, b in ((T(32, 64, 4, 2), T(64, 32, 4, 2)), (T(64, 64, 4, 2), T(64, 64, 4, 2)),
                 (T(32, 128, 8, 2), T(128, 32, 8, 2)), (T(64, 128, 8, 2), T(128, 64, 8, 2))):
        if fits("dkdv", a) and fits("dq", b):
            def patch(a=a, b=b):
                configs.DEFAULTS_FP32["dkdv"][bd] = a
                configs.DEFAULTS_FP32["dq"][bd] = b
            bwd[f"dkdv {a.block_m}x{a.block_n}x{a.num_warps} dq {b.block_m}x{b.block_n}x{b.num_warps}"] = ("x3", patch)
    timed(f"x3 fwd+bwd tiles D={d} N={n}", bwd, fwd_bwd, 3.5 * fl)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    print(f"fp32 tiles: {TREE}", flush=True)
    if os.environ.get("S71_SKIP_FIRST") != "1":   # call 3 of session 71 ran from tiles_case on
        for d, causal, n in ((128, False, 2048), (128, True, 2048), (64, False, 2048), (192, True, 2048)):
            accuracy(d, causal, n)
        modes_case(128, False, 2048)
    tiles_case()
    modes_case(128, True, 2048)
    modes_case(64, False, 2048)
    modes_case(192, False, 2048)
    print(f"total {time.time() - T0:.0f} s", flush=True)
