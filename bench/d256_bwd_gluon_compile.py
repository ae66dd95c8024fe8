"""Offline sm_90a compile report of kernels/bwd_gluon_d256.py (the fused Gluon backward at head
dim 256: WG_S + two dK / dV warpgroups + a loader; a session-32 helper). No GPU needed.

    PYTHONPATH=src python bench/d256_bwd_gluon_compile.py            # the table (~1 min on 2 cores)
    PYTHONPATH=src python bench/d256_bwd_gluon_compile.py --dump OUT  # also OUT/<variant>.{sass,ptx,ttgir}

Two ways in:
  - ast: GluonASTSource with a written signature (as bench/gluon_fwd_compile.py), every variant;
  - jit: the launcher's own arguments (launchers/backward_gluon_d256._launch_args on CPU tensors:
    its descriptors, boxes and scalars) bound by Triton's JIT path with a stub driver
    (bench/gluon_bwd_compile._StubDriver), so the kernel the launcher would run is the one counted
    (the binder specialises integer arguments: group = 1, divisibility).
Per variant: setmaxnreg (PTX), spill bytes (ptxas -v), shared memory (limit 232,448 B an SM), HGMMA
by shape (SASS), UTMALDG / UTMAREDG / UTMASTG, the wgmma-serialisation advisories of ptxas, and each
loop holding HGMMA: its instructions a warp, HGMMA, MUFU.EX2, BAR.SYNC, LDL + STL (spills inside).
The WG_S tile loop is the one with UTMAREDG (its 4 dQ chunks unrolled); WG_0 / WG_1's hold 8 HGMMA
(4 + 4 k16 steps of m64n128) and no reduce.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language import NVMMASharedLayout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))          # bench/

from gluon_bwd_compile import _StubDriver, ptxas_advisories  # noqa: E402
from gluon_fwd_compile import report as fwd_report  # noqa: E402
from gluon_fwd_compile import sass  # noqa: E402

from flashtriton.kernels.bwd_gluon_d256 import D256_CONFIG, DKDV_REGS, attn_bwd_d256_gluon_kernel  # noqa: E402
from flashtriton.kernels.bwd_gluon_fused import dq_stage_layout  # noqa: E402

SMEM_LIMIT = 232448
_DT = {"bf16": tl.bfloat16, "fp16": tl.float16}


def _desc(dtype, rows, cols):
    layout = NVMMASharedLayout.get_default_for([rows, cols], _DT[dtype])
    return f"tensordesc<{dtype}[{rows}, {cols}],{layout!r}>"


def compile_d256(dtype="bf16", causal=False, rotate=True, num_stages=None, dkdv_regs=DKDV_REGS, dq_atomic=False,
                 dkdv_only=None):
    """The kernel through GluonASTSource (no launcher): descriptors typed as the launcher makes
    them (Q / dO box (64, 256), K / V (64, 256), dK / dV (64, 128), dq_accum (64, 64) fp32 at
    dq_stage_layout(64))."""
    fn = attn_bwd_d256_gluon_kernel
    bm, bn, st = D256_CONFIG
    st = num_stages or st
    d = 256
    dql = dq_stage_layout(64)
    sig = dict(q_desc=_desc(dtype, bm, d), do_desc=_desc(dtype, bm, d), k_desc=_desc(dtype, bn, d),
               v_desc=_desc(dtype, bn, d), dk_desc=_desc(dtype, bn, d // 2), dv_desc=_desc(dtype, bn, d // 2),
               dq_desc=f"tensordesc<fp32[{bm}, 64],{dql!r}>", DQ="*fp32", LSE="*fp32", DELTA="*fp32", seqlen_q="i32",
               seqlen_k="i32", nheads="i32", nheads_k="i32", group="i32", softmax_scale="fp32", qk_scale="fp32",
               HEAD_DIM="constexpr", BLOCK_M="constexpr", BLOCK_N="constexpr", NUM_STAGES="constexpr",
               CAUSAL="constexpr", ROTATE="constexpr", DKDV_REGS="constexpr", DQ_ATOMIC="constexpr")
    const = dict(HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=st, CAUSAL=causal, ROTATE=rotate,
                 DKDV_REGS=dkdv_regs, DQ_ATOMIC=dq_atomic)
    if dkdv_only is not None:                    # (DKDV_ONLY, session 33: left out, the kernel's default False)
        sig["DKDV_ONLY"] = "constexpr"
        const["DKDV_ONLY"] = dkdv_only
    # DQ 16-byte aligned, as the JIT specialises a torch tensor's pointer (the v2 reds need 8)
    attrs = {(fn.arg_names.index("DQ"),): [["tt.divisibility", 16]]}
    src = GluonASTSource(fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()},
                         attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))


def compile_jit(dtype, causal, b, nq, nk, h, hk, rotate=True, dq_atomic=False):
    """The launcher's own arguments (CPU tensors) through Triton's JIT binder, stub driver."""
    import torch
    from triton.runtime import driver

    from flashtriton.launchers import backward_gluon_d256

    driver.set_active(_StubDriver())
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    q = torch.randn(b, nq, h, 256, dtype=dt)
    k, v = torch.randn(b, nk, hk, 256, dtype=dt), torch.randn(b, nk, hk, 256, dtype=dt)
    dout, lse, delta = torch.randn_like(q), torch.zeros(b, h, nq), torch.zeros(b, h, nq)
    la = backward_gluon_d256._launch_args(q, k, v, dout, lse, delta, 256 ** -0.5, causal, rotate,
                                          D256_CONFIG[2], dq_atomic=dq_atomic)
    return attn_bwd_d256_gluon_kernel.warmup(*la.args, grid=la.grid, **la.kwargs)


def compile_jit_split(dtype, causal, b, nq, nk, h, hk, dq_tile=None):
    """The split path (session 33; backward_gluon_d256._launch_args(split_dq=True)) through the JIT
    binder, stub driver: (the DKDV_ONLY kernel, the dQ kernel) compiled with the launcher's own
    arguments (the dQ launch's captured from plans.launch on CPU tensors)."""
    import torch
    from triton.runtime import driver

    from flashtriton.launchers import backward_gluon_d256, plans

    driver.set_active(_StubDriver())
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    q = torch.randn(b, nq, h, 256, dtype=dt)
    k, v = torch.randn(b, nk, hk, 256, dtype=dt), torch.randn(b, nk, hk, 256, dtype=dt)
    dout, lse, delta = torch.randn_like(q), torch.zeros(b, h, nq), torch.zeros(b, h, nq)
    la = backward_gluon_d256._launch_args(q, k, v, dout, lse, delta, 256 ** -0.5, causal, True, D256_CONFIG[2],
                                          split_dq=True, dq_tile=dq_tile)
    seen = []
    real = plans.launch
    plans.launch = lambda kernel, grid, *a, **kw: seen.append((kernel, grid, a, kw))
    try:
        la.dq_launch()
    finally:
        plans.launch = real
    kernel, grid, a, kw = seen[0]
    return (attn_bwd_d256_gluon_kernel.warmup(*la.args, grid=la.grid, **la.kwargs),
            kernel.warmup(*a, grid=grid, **kw))


def loops(text: str) -> list:
    """The innermost loops holding HGMMA (a backward branch's body with no other backward branch
    inside), in address order, each as its instructions: the tile loops of WG_0 / WG_1 (8 HGMMA)
    and WG_S (48 HGMMA, 4 UTMAREDG: its dQ chunks unrolled). (The enclosing loops, e.g. the
    partitions' dispatch, are left out.)"""
    ins = [(int(a, 16), t) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
    back = []
    for a, t in ins:
        m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", t)
        if m and int(m.group(1), 16) < a:
            back.append((int(m.group(1), 16), a))
    out = []
    for lo, hi in back:
        if any(lo <= l2 and h2 <= hi and (l2, h2) != (lo, hi) for l2, h2 in back):
            continue                                                   # (encloses another loop)
        body = [x for c, x in ins if lo <= c <= hi]
        if any("HGMMA" in x for x in body):
            out.append(body)
    return out


def row(c) -> dict:
    r = fwd_report(c)
    text = sass(c)
    # HGMMA by shape and operand majorness (.tnspA / .tnspB: an MN-major operand in shared memory)
    shapes = collections.Counter(
        re.search(r"HGMMA\.(\d+x\d+x\d+)", t).group(1) + "".join(re.findall(r"\.tnsp[AB]", t))
        for t in text.splitlines() if "HGMMA." in t)
    lp = []
    for body in loops(text):
        lp.append(dict(n=len(body), hgmma=sum("HGMMA" in x for x in body), ex2=sum("MUFU.EX2" in x for x in body),
                       bar=sum("BAR.SYNC" in x for x in body), local=sum(("LDL" in x) or ("STL" in x) for x in body),
                       redg=sum("UTMAREDG" in x for x in body)))
    return dict(setmaxnreg=", ".join(f"{a} {n}" for a, n in r["setmaxnreg"]), spill=r["spill_bytes"],
                smem=r["smem"], fits=r["smem"] <= SMEM_LIMIT, hgmma=r["hgmma"], shapes=dict(shapes),
                utmaldg=r["utmaldg"], utmaredg=text.count("UTMAREDG"), utmastg=r["utmastg"],
                redg_v2=len(re.findall(r"\bREDG\.E\.ADD\.F32x2", text)),
                local=len(re.findall(r"\b(LDL|STL)\b", text)), advisories=ptxas_advisories(c), loops=lp,
                text=text)


def fmt(name, r) -> str:
    shapes = ", ".join(f"{k} x{v}" for k, v in sorted(r["shapes"].items()))
    lp = "; ".join(f"{x['n']} ({x['hgmma']} HGMMA, {x['ex2']} EX2, {x['bar']} BAR, {x['redg']} REDG, "
                   f"{x['local']} local)" for x in r["loops"])
    return (f"| {name} | {r['setmaxnreg']} | {r['spill']} | {r['smem']} | {'yes' if r['fits'] else 'NO'} | "
            f"{r['hgmma']} | {shapes} | {r['utmaldg']} / {r['utmaredg']} / {r['utmastg']} / {r['redg_v2']} | "
            f"{r['local']} | "
            f"{'; '.join(r['advisories']) or '-'} | {lp} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump", default=None)
    ap.add_argument("--no-jit", action="store_true", help="the ast rows only")
    args = ap.parse_args(argv)
    print("| variant | setmaxnreg | spill B | smem B | fits | HGMMA | HGMMA shapes | UTMALDG / UTMAREDG / UTMASTG / "
          "REDG.F32x2 | "
          "LDL+STL | ptxas wgmma advisories | loops: instr (HGMMA, EX2, BAR, REDG, local) |")
    print("|" + "---|" * 11)
    variants = [("ast bf16", dict()), ("ast fp16", dict(dtype="fp16")), ("ast bf16 causal", dict(causal=True)),
                ("ast fp16 causal", dict(dtype="fp16", causal=True)), ("ast bf16 no-rotate", dict(rotate=False)),
                ("ast bf16 1 stage", dict(num_stages=1)), ("ast bf16 dkdv 152", dict(dkdv_regs=152)),
                ("ast bf16 V2 (dq_atomic)", dict(dq_atomic=True)), ("ast fp16 V2", dict(dtype="fp16", dq_atomic=True)),
                ("ast bf16 V2 causal", dict(dq_atomic=True, causal=True)),
                ("ast bf16 DKDV_ONLY", dict(dkdv_only=True)), ("ast fp16 DKDV_ONLY", dict(dtype="fp16", dkdv_only=True)),
                ("ast bf16 DKDV_ONLY causal", dict(causal=True, rotate=False, dkdv_only=True))]
    results = {}
    for name, kw in variants:
        try:
            results[name] = r = row(compile_d256(**kw))
            print(fmt(name, r), flush=True)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"| {name} | {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]} |", flush=True)
    if not args.no_jit:
        jit_cases = [("jit bf16 16k B=1 H=8", ("bf16", False, 1, 16384, 16384, 8, 8)),
                     ("jit bf16 2k B=8 H=8", ("bf16", False, 8, 2048, 2048, 8, 8)),
                     ("jit bf16 causal 4k B=4", ("bf16", True, 4, 4096, 4096, 8, 8)),
                     ("jit fp16 GQA 1k/2k H=8 Hk=2", ("fp16", False, 2, 1024, 2048, 8, 2)),
                     ("jit fp16 causal GQA 2k/1k", ("fp16", True, 2, 2048, 1024, 8, 2)),
                     ("jit bf16 V2 16k B=1 H=8", ("bf16", False, 1, 16384, 16384, 8, 8, True, True)),
                     ("jit bf16 V2 causal 4k B=4", ("bf16", True, 4, 4096, 4096, 8, 8, True, True))]
        for name, case in jit_cases:
            try:
                results[name] = r = row(compile_jit(*case))
                print(fmt(name, r), flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"| {name} | {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]} |", flush=True)
    if not args.no_jit:
        # the split path (session 33): DKDV_ONLY and the D = 256 dQ kernel with the launcher's arguments
        from gluon_bwd_dq_compile import report as dq_report
        for name, case in (("jit split bf16 4k B=4 H=8", ("bf16", False, 4, 4096, 4096, 8, 8)),
                           ("jit split bf16 causal 16k B=1", ("bf16", True, 1, 16384, 16384, 8, 8)),
                           ("jit split fp16 GQA 1k/2k H=8 Hk=2", ("fp16", False, 2, 1024, 2048, 8, 2))):
            try:
                c_dkdv, c_dq = compile_jit_split(*case)
                results[name + " (DKDV_ONLY)"] = r = row(c_dkdv)
                print(fmt(name + " (DKDV_ONLY)", r), flush=True)
                x = dq_report(c_dq)
                print(f"| {name} (dQ kernel) | {x['setmaxnreg']} | {x['spill_bytes']} | {x['smem']} | "
                      f"{'yes' if x['smem'] <= SMEM_LIMIT else 'NO'} | {x['hgmma']} | - | {x['utmaldg']} / 0 / "
                      f"{x['utmastg']} / 0 | {x['local']} | {'; '.join(x['advisories']) or '-'} | - |", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"| {name} | {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]} |", flush=True)
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        for name, r in results.items():
            with open(os.path.join(args.dump, re.sub(r"\W+", "_", name) + ".sass"), "w") as f:
                f.write(r["text"])
    return results


if __name__ == "__main__":
    main()
