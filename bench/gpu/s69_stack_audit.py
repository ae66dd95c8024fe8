"""Session 69: the stack frame (local memory a thread, ptxas -v) of the Triton kernels' default tiles, compiled for
sm_90a offline (no GPU). The driver reserves a kernel's stack frame for every thread the card can hold (2048 x 132
on the H100 / H200), so a kernel with kilobytes of stack costs ~GBs of device memory a process at launch, and
spills cost time in its loops. Covers the prefill forward / dK-dV / dQ (16-bit default tables and fp32's, one-row
fp32 with QK_LEVELS), the paged forward and the decode split kernel, plain and causal.
Output: one line a variant (kernel, dtype, D, tile, flags, registers, stack bytes, spill stores / loads).
Usage (repo root): PYTHONPATH=src python bench/gpu/s69_stack_audit.py [prefill|paged|decode ...] [--maxnreg]
(--maxnreg: every fp32 prefill / paged variant with maxnreg 255, configs.FP32_MAXNREG; the launchers pass it
where configs.FP32_MAXNREG_AT lists; the decode kernel takes none)"""
import sys

import torch

from flashtriton.bench import compile_report as cr
from flashtriton.bench import decode as bench_decode
from flashtriton.kernels import configs
from flashtriton.launchers import decode as decode_launcher
from flashtriton.launchers.common import block_d, qk_levels

MAXNREG = "--maxnreg" in sys.argv    # maxnreg 255 on every fp32 variant (configs.FP32_MAXNREG); without it, none


def maxnreg(kernel, dtype):
    return configs.FP32_MAXNREG if MAXNREG and dtype == "fp32" else None


def report(name, compiled):
    f = cr.frame(compiled)
    print(f"{name}: regs {f['regs']} stack {f['stack']} spill st/ld {f['spill_stores']} / {f['spill_loads']}",
          flush=True)


def prefill():
    for kernel in ("fwd", "dkdv", "dq"):
        for d in (64, 128, 192):
            bd = block_d(d)
            for causal in (False, True):
                rows = [("bf16", configs.default_tile(kernel, bd, 4096, 2, masked=causal), 0),
                        ("fp32", configs.DEFAULTS_FP32[kernel][bd], 0),
                        ("fp32", configs.default_tile(kernel, bd, 4096, 4, rows=1), qk_levels(torch.float32, bd, 1))]
                for dtype, tile, lv in rows:
                    prec = "ieee" if dtype == "fp32" else "tf32"
                    try:
                        c = cr.compile_variant(kernel, tile, d, dtype, maxnreg=maxnreg(kernel, dtype),
                                               HAS_RIGHT=causal, DOT_PRECISION=prec, QK_LEVELS=lv)
                    except Exception as exc:  # noqa: BLE001 (reported)
                        print(f"{kernel} {dtype} D={d} {tuple(tile.__dict__.values())} causal={causal} QK_LEVELS={lv}: "
                              f"{type(exc).__name__} {str(exc)[:80]}", flush=True)
                        continue
                    report(f"{kernel} {dtype} D={d} {tuple(tile.__dict__.values())} causal={causal} QK_LEVELS={lv}", c)


def paged():
    for d in (64, 128, 192):
        bd = block_d(d)
        for dtype, rows in (("bf16", 64), ("fp32", 64), ("fp32", 1)):
            tile = configs.default_tile("fwd_paged", bd, rows, 2 if dtype == "bf16" else 4, rows=rows)
            lv = qk_levels(torch.float32, bd, 1) if (dtype == "fp32" and rows == 1) else 0
            const = dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, PAGE_SIZE=16,
                         PAGE_GATHER=2, HAS_LEFT=False, HAS_RIGHT=True, HAS_ALIBI=False, HAS_SOFTCAP=False,
                         DOT_PRECISION="ieee" if dtype == "fp32" else "tf32", KV_TMA=False, QK_LEVELS=lv)
            report(f"fwd_paged {dtype} D={d} {tuple(tile.__dict__.values())} rows={rows} QK_LEVELS={lv}",
                   cr.compile_paged(const, dtype, tile.num_warps, tile.num_stages, maxnreg("fwd_paged", dtype)))


def decode():
    for d in (64, 128, 192):
        bd = block_d(d)
        for dtype in ("bf16", "fp32"):
            bn, warps, stages = decode_launcher.default_tile(d, 0, False, 0, 2 if dtype == "bf16" else 4)
            lv = qk_levels(torch.float32, bd, 1) if dtype == "fp32" else 0
            c = bench_decode.compile_split_kernel(d, dtype, warps, stages, BLOCK_N=bn, QK_LEVELS=lv,
                                                  DOT_PRECISION="ieee" if dtype == "fp32" else "tf32")
            report(f"decode {dtype} D={d} (16, {bn}, {warps}, {stages}) QK_LEVELS={lv}", c)


if __name__ == "__main__":
    parts = [a for a in sys.argv[1:] if a != "--maxnreg"] or ["prefill", "paged", "decode"]
    for part in parts:
        globals()[part]()
