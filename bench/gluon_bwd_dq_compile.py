"""Offline sm_90a compile report of kernels/bwd_gluon_dq.py (the hand-scheduled Gluon dQ
kernel, non-causal and CAUSAL): registers (ptxas -v, the kernel-wide allocation) and the
setmaxnreg values of the partitions, spill bytes, shared memory, wgmma in the PTX
(wgmma.mma_async, against mma.sync), HGMMA / UTMALDG / UTMASTG in the SASS, and the
WARPGROUP.DEPBAR.LE gsb0, 0x1 waits (a wait leaving one wgmma group in flight: dQ_{j-1}
retired while S_j runs). No GPU needed.

    PYTHONPATH=src python bench/gluon_bwd_dq_compile.py              # the table
    PYTHONPATH=src python bench/gluon_bwd_dq_compile.py --dump OUT    # also OUT/<variant>.{ttgir,ptx}
    PYTHONPATH=src python bench/gluon_bwd_dq_compile.py --jit         # the launcher's JIT path too

--jit: the kernel compiled through its JIT binder with the launcher's own arguments
(launchers/backward_gluon_dq.py's descriptors over CPU tensors, a stub driver reporting
sm_90, kernel.warmup), where Triton specializes ints equal to 1 (group, nheads) as
constants: the A/B's shapes (H = Hk, so group = 1), GQA, fp16, one head. 2026-12-01: all
compile with 0 spill bytes; the GQA one's PTX equals the offline compile's.

Results (2026-12-01, Triton 3.6.0; the kernel's docstring has the compiler facts): every
variant 12 warps (.maxnreg 168), setmaxnreg 240 / 240 / 24, no mma.sync, no ptxas wgmma
advisory, 2 UTMASTG; 0 spill bytes (no STL / LDL) in all but one:
    D    dtype       BN  K/V   causal  smem KB  HGMMA  DEPBAR.LE 1  UTMALDG
    128  bf16, fp16  128  3/2  no      224      96     2            16     (default)
    128  bf16, fp16  128  2/2  yes     192      144    4            16     (default)
    64   bf16, fp16  128  4/4  no      160      64     2            8      (default)
    64   bf16, fp16  128  4/4  yes     160      96     4            8      (default)
    128  bf16        128  3/2  yes     224      144    4            16     112 B spill, 28 STL / LDL
    128  bf16        128  2/2  no      192      96     2            16
    128  bf16        64   4/4, 5/5, 2/1  both  192, 224, 112  80 / 120
    64   bf16        128  6/6, 2/2  both  224, 96  64 / 96;  BN 64 6/6: 128 KB, 48 / 72
--jit: the 8 JIT_CASES 0 spill bytes (168 registers; 224 / 192 / 160 KB as above).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gluon_fwd_compile import desc_type, sass  # noqa: E402  (the forward's report: same helpers)

from flashtriton.bench.compile_report import _NVBIN, resources  # noqa: E402
from flashtriton.kernels.bwd_gluon_dq import attn_bwd_dq_gluon_kernel, default_config  # noqa: E402


def compile_dq(head_dim=128, dtype="bf16", block_m=None, block_n=None, k_stages=None, v_stages=None, causal=False,
               v_early=None):
    bm, bn, ks, vs = default_config(head_dim, causal)
    bm, bn, ks, vs = block_m or bm, block_n or bn, k_stages or ks, v_stages or vs
    fn = attn_bwd_dq_gluon_kernel
    half = desc_type(dtype, bm // 2, head_dim)
    sig = dict(q_desc=half, k_desc=desc_type(dtype, bn, head_dim), v_desc=desc_type(dtype, bn, head_dim),
               do_desc=half, dq_desc=half, LSE="*fp32", DELTA="*fp32", seqlen_q="i32", seqlen_k="i32",
               nheads="i32", group="i32", qk_scale="fp32", softmax_scale="fp32",
               HEAD_DIM="constexpr", BLOCK_M="constexpr", BLOCK_N="constexpr", K_STAGES="constexpr",
               V_STAGES="constexpr", CAUSAL="constexpr")
    const = dict(HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn, K_STAGES=ks, V_STAGES=vs, CAUSAL=causal)
    if v_early is not None:                      # (V_EARLY, session 33: left out, the kernel's default False)
        sig["V_EARLY"] = "constexpr"
        const["V_EARLY"] = v_early
    src = GluonASTSource(fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))


def ptxas_advisories(compiled) -> list:
    """ptxas -v's lines about wgmma (e.g. "wgmma serialized ..."): empty when it kept the
    wgmma pipelined as written."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as f:
            f.write(compiled.asm["ptx"])
        err = subprocess.run([os.path.join(_NVBIN, "ptxas"), "-arch=sm_90a", "-v", path, "-o",
                              os.path.join(tmp, "k.cubin")], capture_output=True, text=True).stderr
    return [line.strip() for line in err.splitlines() if "wgmma" in line.lower()]


def report(compiled) -> dict:
    """resources() (ptxas -v registers and spills, shared memory, HGMMA / UTMALDG) plus the
    setmaxnreg values and wgmma / mma.sync counts in the PTX, UTMASTG and DEPBAR.LE 1 in
    the SASS, and whether ptxas advised that it serialized wgmma."""
    r = resources(compiled)
    ptx = compiled.asm["ptx"]
    text = sass(compiled)
    r.update(
        setmaxnreg=sorted(set(re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx))),
        wgmma_ptx=len(re.findall(r"wgmma\.mma_async", ptx)),
        mma_sync_ptx=len(re.findall(r"\bmma\.sync", ptx)),
        warps=compiled.metadata.num_warps,
        utmastg=text.count("UTMASTG"),
        depbar1=len(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1", text)),
        local=len(re.findall(r"\b(STL|LDL)\b", text)),
        advisories=ptxas_advisories(compiled),
    )
    return r


VARIANTS = [  # (D, dtype, BLOCK_N, K_STAGES, V_STAGES, CAUSAL); None: default_config's
    (128, "bf16", None, None, None, False), (128, "fp16", None, None, None, False),
    (128, "bf16", None, None, None, True), (128, "fp16", None, None, None, True),
    (64, "bf16", None, None, None, False), (64, "fp16", None, None, None, False),
    (64, "bf16", None, None, None, True), (64, "fp16", None, None, None, True),
    # the A/B's alternatives (bench/gpu/s25_gluon_dq_ab.py) and the other tiles the GPU
    # tests run (tests/test_bwd_gluon_dq.py test_configs_gpu)
    (128, "bf16", None, 2, 2, False), (128, "bf16", None, 3, 2, True),
    (128, "bf16", 64, 4, 4, False), (128, "bf16", 64, 4, 4, True),
    (128, "bf16", 64, 5, 5, False), (128, "bf16", 64, 5, 5, True),
    (128, "bf16", 64, 2, 1, False), (128, "bf16", 64, 2, 1, True),
    (64, "bf16", None, 6, 6, False), (64, "bf16", None, 6, 6, True),
    (64, "bf16", None, 2, 2, False), (64, "bf16", None, 2, 2, True),
    (64, "bf16", 64, 6, 6, False), (64, "bf16", 64, 6, 6, True),
]


JIT_CASES = [  # (B, Nq, Nk, H, Hk, D, causal, dtype)
    (1, 4096, 4096, 16, 16, 128, False, "bf16"), (1, 4096, 4096, 16, 16, 128, True, "bf16"),
    (1, 4096, 4096, 32, 32, 64, False, "bf16"), (1, 4096, 4096, 32, 32, 64, True, "bf16"),
    (2, 1024, 512, 8, 2, 128, False, "bf16"), (2, 1024, 1024, 8, 2, 128, True, "fp16"),
    (1, 256, 256, 1, 1, 128, True, "bf16"), (1, 256, 1024, 4, 4, 64, True, "bf16"),
]


def jit_check():
    """The JIT path (see the module doc): one row per JIT_CASES entry."""
    import torch
    from triton.runtime import driver

    from flashtriton.launchers import backward_gluon_dq
    from flashtriton.launchers.common import LOG2E
    from flashtriton.launchers.forward_gluon import _desc

    class StubDriver:       # enough of a driver for the binder and warmup (no launch)
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

    driver.set_active(StubDriver())        # (left active: the script ends after this)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    print("| B, Nq, Nk, H, Hk | D | causal | dtype | regs | spill B | smem KB | HGMMA | PTX as offline |")
    print("|" + "---|" * 9)
    for b, nq, nk, h, hk, d, causal, dt in JIT_CASES:
        q = torch.randn(b, nq, h, d, dtype=dtypes[dt])
        k, v = (torch.randn(b, nk, hk, d, dtype=dtypes[dt]) for _ in range(2))
        dout, dq = torch.randn_like(q), torch.empty_like(q)
        lse, delta = torch.randn(b, h, nq), torch.randn(b, h, nq)
        bm, bn, ks, vs = default_config(d, causal)
        backward_gluon_dq.check_dq_inputs(q, k, v, dout, lse, delta, 0.1, causal, bm, bn, ks, vs)
        descs = [_desc(t, rows)[1] for t, rows in ((q, bm // 2), (k, bn), (v, bn), (dout, bm // 2), (dq, bm // 2))]
        kern = attn_bwd_dq_gluon_kernel.warmup(
            *descs, lse, delta, nq, nk, h, h // hk, 0.1 * LOG2E, 0.1, grid=(nq // bm, b * h), HEAD_DIM=d,
            BLOCK_M=bm, BLOCK_N=bn, K_STAGES=ks, V_STAGES=vs, CAUSAL=causal, num_warps=4)
        r = resources(kern)

        def strip(text):
            return "\n".join(x for x in text.splitlines() if not x.strip().startswith(("//", ".loc", ".file")))
        same = strip(kern.asm["ptx"]) == strip(compile_dq(d, dt, causal=causal).asm["ptx"])
        print(f"| {b}, {nq}, {nk}, {h}, {hk} | {d} | {causal} | {dt} | {r['regs']} | {r['spill_bytes']} | "
              f"{r['smem'] / 1024:.0f} | {r['hgmma']} | {same} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump", default=None)
    ap.add_argument("--quick", action="store_true", help="the default tiles only (8 variants)")
    ap.add_argument("--jit", action="store_true", help="also compile through the JIT binder (stub driver)")
    args = ap.parse_args(argv)
    variants = [v for v in VARIANTS if not args.quick or v[2:5] == (None, None, None)]
    print("| D | dtype | BM, BN, K / V stages | causal | warps | regs (kernel) | setmaxnreg | spill B | smem KB | "
          "wgmma PTX | mma.sync | HGMMA | DEPBAR.LE 1 | UTMALDG | UTMASTG | STL/LDL | ptxas wgmma advisories |")
    print("|" + "---|" * 17)
    for d, dt, bn, ks, vs, causal in variants:
        bm, bn0, ks0, vs0 = default_config(d, causal)
        cfg = (bm, bn or bn0, ks or ks0, vs or vs0)
        try:
            c = compile_dq(d, dt, *cfg, causal=causal)
            r = report(c)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"| {d} | {dt} | {cfg} | {causal} | {type(exc).__name__}: "
                  f"{str(exc).strip().splitlines()[-1][:160]} |", flush=True)
            continue
        regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
        print(f"| {d} | {dt} | {cfg} | {causal} | {r['warps']} | {r['regs']} | {regs} | {r['spill_bytes']} | "
              f"{r['smem'] / 1024:.0f} | {r['wgmma_ptx']} | {r['mma_sync_ptx']} | {r['hgmma']} | {r['depbar1']} | "
              f"{r['utmaldg']} | {r['utmastg']} | {r['local']} | {'; '.join(r['advisories']) or 'none'} |", flush=True)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            name = f"dq_d{d}_{dt}_{cfg[0]}x{cfg[1]}_k{cfg[2]}v{cfg[3]}{'_causal' if causal else ''}"
            for ext in ("ttgir", "ptx"):
                with open(os.path.join(args.dump, f"{name}.{ext}"), "w") as f:
                    f.write(c.asm[ext])
    if args.jit:
        jit_check()


if __name__ == "__main__":
    main()
