"""Session 69: the true-fp32 Triton kernels with and without ptxas's register budget (Triton's maxnreg = 255, "on" at
every kernel and head dim; "off" = none, ptxas's own choice, 32-168 registers with heavy spills; the library passes
it where configs.FP32_MAXNREG_AT lists, so its figure is "on" there and "off" elsewhere), and a candidate tile
("cand", with maxnreg), in one process
(configs patched, plans cleared between variants; each variant's output checked against the first's, max |diff|).
Median of triton.testing.do_bench, two rounds in mirrored order (A B C C B A). TFLOP/s by the FlashAttention-2
count (backward 2.5x the forward's FLOPs; causal half).
- dense forward B = 2, H = 16, N = 2048, D = 64 / 128 / 192, causal and not;
- dense backward (dK/dV + dQ kernels and the preprocess) at D = 128 / 192, causal;
- paged forward (kernels/fwd_paged.py), 8 sequences of 1024 queries over 1024 keys, H = 16, Hk = 4, pages of 16,
  causal, D = 128 / 192;
- one-row forward (the few-rows tile), B = 1, Hq = 32, Hk = 8, Nq = 1, Nk = 8192, D = 128.
Usage: PYTHONPATH=src python bench/gpu/s69_fp32_regs_time.py [seconds budget]"""
import sys
import time

import torch
import triton

from flashtriton import flash_attn_func, flash_attn_varlen_func, paged
from flashtriton.kernels import configs
from flashtriton.launchers import plans
from flashtriton.launchers.common import block_d

T0 = time.time()
BUDGET = float(sys.argv[1]) if len(sys.argv) > 1 else 240.0
SHIPPED = dict(configs.FP32_MAXNREG_AT)
ALL = {k: (16, 32, 64, 128, 256) for k in ("fwd", "fwd_paged", "dkdv", "dq")}
DEF = {k: dict(v) for k, v in configs.DEFAULTS_FP32.items()}
CAND = configs.Tile(32, 32, 8, 2)


def setup(variant, kernels, bd):
    configs.FP32_MAXNREG_AT.clear()
    configs.DEFAULTS_FP32.update({k: dict(v) for k, v in DEF.items()})
    if variant != "off":
        configs.FP32_MAXNREG_AT.update(ALL)
    if variant == "cand":
        for k in kernels:
            configs.DEFAULTS_FP32[k][bd] = CAND
    plans.clear()


def run_case(label, kernels, bd, fn, flops, variants=("off", "on", "cand")):
    if time.time() - T0 > BUDGET:
        print(f"{label}: skipped (budget)", flush=True)
        return
    res, ref = {v: [] for v in variants}, None
    for v in list(variants) + list(reversed(variants)):
        setup(v, kernels, bd)
        out = fn()
        if ref is None:
            ref = out
        diff = (out - ref).abs().max().item()
        ms = triton.testing.do_bench(fn, warmup=10, rep=100)
        res[v].append((ms, diff))
    configs.FP32_MAXNREG_AT.clear()
    configs.FP32_MAXNREG_AT.update(SHIPPED)
    line = ", ".join(f"{v} {min(m for m, _ in r):.3f} ms ({flops / min(m for m, _ in r) * 1e-9:.2f} TFLOP/s, "
                     f"diff {max(d for _, d in r):.1e})" for v, r in res.items())
    print(f"{label}: {line}", flush=True)


def dense():
    b, h, n = 2, 16, 2048
    for d in (192, 128, 64):
        bd = block_d(d)
        for causal in (False, True):
            q, k, v = (torch.randn(b, n, h, d, device="cuda") for _ in range(3))
            fl = 4 * b * h * n * n * d / (2 if causal else 1)
            with torch.no_grad():
                run_case(f"fwd D={d} causal={causal}", ["fwd"], bd,
                         lambda: flash_attn_func(q, k, v, causal=causal), fl)
        if d == 64:
            continue
        q, k, v = (torch.randn(b, n, h, d, device="cuda", requires_grad=True) for _ in range(3))
        dout = torch.randn_like(q)

        def bwd():
            out = flash_attn_func(q, k, v, causal=True)
            return torch.autograd.grad(out, (q, k, v), dout)[0]
        fl = 4 * b * h * n * n * d / 2
        run_case(f"fwd+bwd D={d} causal=True", ["dkdv", "dq"], bd, bwd, 3.5 * fl, variants=("off", "on"))


def paged_causal_batch(d, seqs=8, n=1024, h=16, hk=4, page=16):
    """(the causal paged forward on fresh fp32 inputs as a function, its FLOPs): seqs sequences of n queries over n
    keys in pages of `page`."""
    cu = torch.arange(seqs + 1, dtype=torch.int32, device="cuda") * n
    q = torch.randn(seqs * n, h, d, device="cuda")
    k = torch.randn(seqs * n, hk, d, device="cuda")
    v = torch.randn_like(k)
    kc, vc, table = paged.scatter_to_pages(k, v, [n] * seqs, page)
    return (lambda: flash_attn_varlen_func(q, kc, vc, cu, cu, n, n, block_table=table, causal=True),
            4 * seqs * n * n * h * d / 2)


def paged_rows():
    for d in (128, 192):
        fn, fl = paged_causal_batch(d)
        run_case(f"paged fwd D={d} causal", ["fwd_paged"], block_d(d), fn, fl)


def one_row():
    q = torch.randn(1, 1, 32, 128, device="cuda")
    k, v = (torch.randn(1, 8192, 8, 128, device="cuda") for _ in range(2))
    run_case("one-row fwd D=128 Nk=8192", ["fwd_few_rows"], 128, lambda: flash_attn_func(q, k, v),
             4 * 32 * 8192 * 128, variants=("off", "on"))


if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    paged_rows()
    dense()
    one_row()
    print(f"total {time.time() - T0:.0f} s", flush=True)
