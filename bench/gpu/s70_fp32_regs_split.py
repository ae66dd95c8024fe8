"""Session 70: which true-fp32 backward kernels gain from ptxas's register budget (maxnreg 255), measured apart, and
the fp32 paged forward's tile. Session 69's call (bench/gpu/s69_fp32_regs_time.py, H100) timed maxnreg on every
kernel at once: fwd+bwd D = 192 causal 164 -> 114 ms, D = 128 30.9 -> 29.8 ms, but the forward at D = 192 alone
went 22.2 -> 23.7 / 13.3 -> 14.6 ms (so it is no longer listed), and the paged forward's 32 x 32 x 8 tile beat its
default under maxnreg (8.8 -> 5.8 ms at D = 128, 17.2 -> 15.5 at D = 192).
- backward (forward + backward, the forward's configuration fixed), B = 2, H = 16, N = 2048, D = 128 / 192, causal
  and not; variants: maxnreg off / dQ only / dK dV only / both, at that head dim's block_d;
- paged forward (8 sequences of 1024 queries over 1024 keys, H = 16, Hk = 4, pages of 16, causal), D = 64 / 128 /
  192: session 69's tile (64 x 32 x 4 / 32 x 32 x 4) with maxnreg against the tree's default (at D = 64 the
  same tile without maxnreg), and at D = 64 also 32 x 32 x 8 with maxnreg.
One process; configs patched and plans cleared between variants; every variant's outputs (all three gradients)
checked against the first's (max |diff|). Median of triton.testing.do_bench, rounds in mirrored order (A B .. B A),
the smaller median reported. TFLOP/s by the FlashAttention-2 count (backward 2.5x the forward; causal half).
Usage: PYTHONPATH=src python bench/gpu/s70_fp32_regs_split.py [seconds budget]"""
import sys
import time

import torch
import triton

from flashtriton import flash_attn_func
from flashtriton.kernels import configs
from flashtriton.launchers import plans
from flashtriton.launchers.common import block_d
from s69_fp32_regs_time import paged_causal_batch   # bench/gpu, the script's folder

T0 = time.time()
BUDGET = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
TREE_REGS = {k: tuple(v) for k, v in configs.FP32_MAXNREG_AT.items()}
TREE_PAGED = dict(configs.DEFAULTS_FP32["fwd_paged"])
S69_PAGED = {64: configs.Tile(64, 32, 4, 2), 128: configs.Tile(64, 32, 4, 2), 256: configs.Tile(32, 32, 4, 2)}


def restore():
    configs.FP32_MAXNREG_AT.clear()
    configs.FP32_MAXNREG_AT.update(TREE_REGS)
    configs.DEFAULTS_FP32["fwd_paged"].clear()
    configs.DEFAULTS_FP32["fwd_paged"].update(TREE_PAGED)
    plans.clear()


def run_case(label, variants, fn, flops):
    """variants: name -> function that patches configs (after restore())."""
    if time.time() - T0 > BUDGET:
        print(f"{label}: skipped (budget)", flush=True)
        return
    names = list(variants)
    res, ref = {v: [] for v in names}, None
    for v in names + names[::-1]:
        restore()
        variants[v]()
        plans.clear()
        outs = fn()
        if ref is None:
            ref = outs
        diff = max((o - r).abs().max().item() for o, r in zip(outs, ref))
        ms = triton.testing.do_bench(fn, warmup=5, rep=100)
        res[v].append((ms, diff))
    restore()
    line = ", ".join(f"{v} {min(m for m, _ in r):.3f} ms ({flops / min(m for m, _ in r) * 1e-9:.2f} TFLOP/s, "
                     f"diff {max(d for _, d in r):.1e})" for v, r in res.items())
    print(f"{label}: {line}", flush=True)


def regs(**at):
    def patch():
        for k in ("dq", "dkdv"):
            configs.FP32_MAXNREG_AT.pop(k, None)
        configs.FP32_MAXNREG_AT.update(at)
    return patch


def fwd_bwd_case(d, causal, b=2, h=16, n=2048):
    """(forward + backward on fresh fp32 inputs as a function returning the three gradients, its FLOPs: the
    FlashAttention-2 count, backward 2.5x the forward, causal half)."""
    q, k, v = (torch.randn(b, n, h, d, device="cuda", requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)

    def fwd_bwd():
        out = flash_attn_func(q, k, v, causal=causal)
        return torch.autograd.grad(out, (q, k, v), dout)
    return fwd_bwd, 3.5 * 4 * b * h * n * n * d / (2 if causal else 1)


def backward(cases):
    for d, causal in cases:
        bd = block_d(d)
        fn, fl = fwd_bwd_case(d, causal)
        run_case(f"fwd+bwd D={d} causal={causal}",
                 {"off": regs(), "dq": regs(dq=(bd,)), "dkdv": regs(dkdv=(bd,)), "both": regs(dq=(bd,), dkdv=(bd,))},
                 fn, fl)


def paged_fwd():
    for d in (128, 192, 64):
        bd = block_d(d)
        fn, fl = paged_causal_batch(d)

        def s69():
            configs.DEFAULTS_FP32["fwd_paged"][bd] = S69_PAGED[bd]
            configs.FP32_MAXNREG_AT["fwd_paged"] = (128, 256, 64)

        def tree():
            pass
        variants = {"s69": s69, "tree": tree}
        if d == 64:
            variants = {"s69": s69, "tree": tree, "cand": lambda: (
                configs.DEFAULTS_FP32["fwd_paged"].__setitem__(64, configs.Tile(32, 32, 8, 2)),
                configs.FP32_MAXNREG_AT.__setitem__("fwd_paged", (64, 128, 256)))}
        with torch.no_grad():
            run_case(f"paged fwd D={d} causal", variants, lambda: (fn(),), fl)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    print(f"tree: FP32_MAXNREG_AT {TREE_REGS}, fwd_paged {TREE_PAGED}", flush=True)
    backward([(192, True)])
    paged_fwd()
    backward([(128, True), (192, False), (128, False)])
    print(f"total {time.time() - T0:.0f} s", flush=True)
