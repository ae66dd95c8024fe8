"""Offline sm_90a compile report of kernels/bwd_gluon.py (the hand-scheduled Gluon dK/dV
pass of the backward; host side launchers/backward_gluon.py): registers (ptxas -v, the
kernel-wide allocation), the setmaxnreg values of the partitions, spill bytes, shared
memory, wgmma in the PTX (wgmma.mma_async, against mma.sync), HGMMA / UTMALDG / UTMASTG
and the 'WARPGROUP.DEPBAR.LE gsb0, 0x1' waits (one wgmma group left in flight) in the
SASS, and ptxas's "wgmma serialized" advisories. No GPU needed.

    PYTHONPATH=src python bench/gluon_bwd_compile.py              # the table
    PYTHONPATH=src python bench/gluon_bwd_compile.py --dump OUT    # also OUT/<variant>.{ttgir,ptx,sass}
    PYTHONPATH=src python bench/gluon_bwd_compile.py --quick       # D = 128 and 64, bf16, non-causal only
    PYTHONPATH=src python bench/gluon_bwd_compile.py --jit         # through Triton's JIT binder (below)
    PYTHONPATH=src python bench/gluon_bwd_compile.py --fused [--jit] [--dropout on|off|both] [--dump OUT]
                                                                    # the fused kernel (kernels/bwd_gluon_fused.py),
                                                                    # its DROPOUT variants too (session 26)
    PYTHONPATH=src python bench/gluon_bwd_compile.py --fused --wide [--dump OUT]
                                                                    # the WIDE tile (BLOCK_M = 128 at D = 64,
                                                                    # session 30) against today's D = 64 tile
    PYTHONPATH=src python bench/gluon_bwd_compile.py --fused --defer [--dump OUT]
                                                                    # DEFER_DQ (session 31, plain kernel: a tile's
                                                                    # dQ one ring tile later) against today's
    PYTHONPATH=src python bench/gluon_bwd_compile.py --fused --splitm [--dump OUT]
                                                                    # DQ_SPLIT_M (session 31, the WIDE tile: dQ
                                                                    # split by query rows) against the WIDE tile
    PYTHONPATH=src python bench/gluon_bwd_compile.py --fused --timeline [--dump OUT]
                                                                    # the TIMELINE probe (session 43) at its flag
                                                                    # sets, and through the JIT binder
    PYTHONPATH=src python bench/gluon_bwd_compile.py --fused --window [--dump OUT]
                                                                    # only its WINDOW variants (session 28), with
                                                                    # per-loop instruction counts of the consumers

--jit: the launcher's own arguments (launchers.backward_gluon._launch_args on CPU tensors)
bound by Triton's JIT path with a stub driver (target sm_90a, no GPU) and compiled by
kernel.warmup, as a launch on the H200 would: this checks the launch's argument list
against the kernel's and reports the specializations a GPU run compiles (ints equal to 1,
e.g. group or nheads_k, become constexprs; multiples of 16 get alignment attributes),
whose register allocation may differ from the generic compile of the table.
"""
from __future__ import annotations

import argparse
import re
import os
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language import NVMMASharedLayout
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gluon_fwd_compile import desc_type, sass  # noqa: E402  (bench/ is not a package)
from gluon_fwd_compile import report as fwd_report  # noqa: E402

from flashtriton.bench.compile_report import ptxas_log, resources  # noqa: E402
from flashtriton.kernels.bwd_gluon import DEFAULT_CONFIG, attn_bwd_dkdv_gluon_kernel  # noqa: E402
from flashtriton.kernels.bwd_gluon_fused import (FUSED_CONFIG, FUSED_WIDE_CONFIG, attn_bwd_fused_gluon_kernel,  # noqa: E402
                                                 dq_stage_layout, k_layout)


def vec_desc_type(rows: int) -> str:
    """The kernel type string of a 1-D fp32 host TensorDescriptor with a (rows,) box (lse,
    delta), with the layout launchers/backward_gluon.py gives it."""
    layout = NVMMASharedLayout.get_default_for([rows], tl.float32)
    return f"tensordesc<fp32[{rows}],{layout!r}>"


def compile_dkdv(head_dim=128, dtype="bf16", block_m=None, block_n=None, num_stages=None, causal=False,
                 vec_ptr=False, overlap=False):
    bm, bn, st = DEFAULT_CONFIG[head_dim]
    bm, bn, st = block_m or bm, block_n or bn, num_stages or st
    fn = attn_bwd_dkdv_gluon_kernel
    half = bn // 2
    sig = dict(q_desc=desc_type(dtype, bm, head_dim), do_desc=desc_type(dtype, bm, head_dim),
               k_desc=desc_type(dtype, half, head_dim), v_desc=desc_type(dtype, half, head_dim),
               dk_desc=desc_type(dtype, half, head_dim), dv_desc=desc_type(dtype, half, head_dim),
               lse_desc=vec_desc_type(bm), delta_desc=vec_desc_type(bm), LSE="*fp32", DELTA="*fp32",
               seqlen_q="i32", seqlen_k="i32", nheads="i32", nheads_k="i32", group="i32",
               softmax_scale="fp32", qk_scale="fp32",
               HEAD_DIM="constexpr", BLOCK_M="constexpr", BLOCK_N="constexpr", NUM_STAGES="constexpr",
               CAUSAL="constexpr", VEC_PTR="constexpr", OVERLAP="constexpr")
    const = dict(HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=st, CAUSAL=causal, VEC_PTR=vec_ptr,
                 OVERLAP=overlap)
    src = GluonASTSource(fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))


def fp32_desc_type(rows: int, cols: int, split_m: bool = False) -> str:
    """The kernel type string of the fused kernel's dq_accum descriptor (fp32, (rows, cols)
    box, the launcher's layout: kernels/bwd_gluon_fused.dq_stage_layout, 64-byte swizzle; 128-byte
    for the WIDE tile's 128 rows and for DQ_SPLIT_M's (64, D) box)."""
    layout = dq_stage_layout(rows, split_m)
    return f"tensordesc<fp32[{rows}, {cols}],{layout!r}>"


def compile_fused(head_dim=128, dtype="bf16", num_stages=None, rotate=True, causal=False, dropout=False,
                  window=False, wide=False, defer=False, splitm=False, band=0, timeline=0, varlen=False,
                  order=True):
    """kernels/bwd_gluon_fused.py's attn_bwd_fused_gluon_kernel. dropout: DROPOUT with the key
    table (*i32), rng_rows (i32) and dropout_p (fp32); without it those three are None
    constexprs, as the launcher passes them (no kernel parameters: the PTX of the variants
    without dropout is that of the kernel before DROPOUT existed). window: WINDOW with
    win_left / win_right (i32, unspecialised as the kernel's do_not_specialize); without it
    both are None constexprs, as the launcher passes them. wide: FUSED_WIDE_CONFIG's tile
    (session 30: BLOCK_M = 128 at D = 64). defer: DEFER_DQ (session 31: a tile's dQ one ring
    tile later, 3 dS^T buffers); without it the constexpr is left out, as the launcher does.
    splitm: DQ_SPLIT_M (session 31, the WIDE tile: each WG's dQ is a 64-row half over the whole
    D; the dq_accum box (BLOCK_M / 2, D), 128-byte swizzle); left out otherwise. band: BAND (session
    36, CAUSAL: rank-major bands of heads on a 1-D grid); left out when 0. timeline: TIMELINE=timeline (session 43
    probe: 1 stamps + the hand-over wait sum, 2 also the other wait sums) with KEYS the int64 stamp buffer (*i64,
    no dropout); left out when 0. varlen: VARLEN (session 50, a packed batch: SCHED *i32, batch i32, DK / DV
    pointers of the dtype; VARLEN_ORDER=order; with dropout also rng_stride, i32, session 51); left out otherwise."""
    bm, bn, st = (FUSED_WIDE_CONFIG if wide else FUSED_CONFIG)[head_dim]
    st = num_stages or st
    fn = attn_bwd_fused_gluon_kernel
    half = bn // 2
    kt = f"tensordesc<{dtype}[{half}, {head_dim}],{k_layout(head_dim)!r}>"     # K / dK: launcher's layout
    sig = dict(q_desc=desc_type(dtype, bm, head_dim), do_desc=desc_type(dtype, bm, head_dim),
               k_desc=kt, v_desc=desc_type(dtype, half, head_dim), dk_desc=kt, dv_desc=desc_type(dtype, half, head_dim),
               dq_desc=fp32_desc_type(bm // 2, head_dim, True) if splitm else fp32_desc_type(bm, head_dim // 2),
               LSE="*fp32", DELTA="*fp32",
               seqlen_q="i32", seqlen_k="i32", nheads="i32", nheads_k="i32", group="i32",
               softmax_scale="fp32", qk_scale="fp32",
               KEYS="*i32" if dropout else ("*i64" if timeline else "constexpr"),
               rng_rows="i32" if dropout else "constexpr",
               dropout_p="fp32" if dropout else "constexpr",
               win_left="i32" if window else "constexpr", win_right="i32" if window else "constexpr",
               HEAD_DIM="constexpr", BLOCK_M="constexpr", BLOCK_N="constexpr", NUM_STAGES="constexpr",
               CAUSAL="constexpr", ROTATE="constexpr", DROPOUT="constexpr", WINDOW="constexpr")
    const = dict(HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=st, CAUSAL=causal, ROTATE=rotate,
                 DROPOUT=dropout, WINDOW=window)
    if defer:
        sig["DEFER_DQ"] = "constexpr"
        const["DEFER_DQ"] = True
    if splitm:
        sig["DQ_SPLIT_M"] = "constexpr"
        const["DQ_SPLIT_M"] = True
    if band:
        sig["BAND"] = "constexpr"
        const["BAND"] = band
    if timeline:
        sig["TIMELINE"] = "constexpr"
        const["TIMELINE"] = timeline
    if varlen:
        ptr = "*bf16" if dtype == "bf16" else "*fp16"
        sig.update(SCHED="*i32", batch="i32", DK=ptr, DV=ptr, VARLEN="constexpr", VARLEN_ORDER="constexpr")
        const.update(VARLEN=True, VARLEN_ORDER=order)
        if dropout:
            sig["rng_stride"] = "i32"           # (session 51: the packed table's column count)
    if not dropout:
        const.update(rng_rows=None, dropout_p=None)
        if not timeline:
            const.update(KEYS=None)
    if not window:
        const.update(win_left=None, win_right=None)
    src = GluonASTSource(fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))


def fused_table(dump=None, quick=False, dropout=None):
    """The fused kernel's variants: registers, spills, shared memory, HGMMA, the TMA
    reduce-add in the PTX (cp.reduce.async.bulk.tensor, and its count in the SASS as
    UTMAREDG), the bulk-group waits, setmaxnreg."""
    variants = [  # (D, dtype, NUM_STAGES, ROTATE, CAUSAL); None: FUSED_CONFIG's
        (128, "bf16", None, True, False), (128, "fp16", None, True, False), (64, "bf16", None, True, False),
        (64, "fp16", None, True, False), (128, "bf16", None, False, False), (64, "bf16", 2, True, False),
        (128, "bf16", 3, True, False),
        (128, "bf16", None, True, True), (128, "fp16", None, True, True), (64, "bf16", None, True, True),
        (64, "fp16", None, True, True), (128, "bf16", 3, True, True),
    ]
    if quick:
        variants = [variants[0], variants[2], variants[7]]
    # DROPOUT (session 26): each default variant again with dropout (dropout=None: both;
    # True / False: only those)
    drop_variants = [(128, "bf16", None, True, False), (128, "fp16", None, True, False), (64, "bf16", None, True, False),
                     (64, "fp16", None, True, False), (128, "bf16", None, False, False),
                     (128, "bf16", None, True, True), (128, "fp16", None, True, True), (64, "bf16", None, True, True)]
    variants = ([v + (False,) for v in variants] if dropout in (None, False) else []) + \
        ([v + (True,) for v in drop_variants] if dropout in (None, True) else [])
    print("| D | dtype | BM, BN, stages | rotate | causal | dropout | warps | regs (kernel) | setmaxnreg | spill B | smem KB | "
          "wgmma PTX | HGMMA | DEPBAR.LE 1 / 2 | cp.reduce PTX | UTMAREDG | UTMALDG | UTMASTG | wait_group.read | "
          "ptxas wgmma advisories |")
    print("|" + "---|" * 20)
    for d, dt, st, rot, causal, drop in variants:
        bm, bn, st0 = FUSED_CONFIG[d]
        cfg = (bm, bn, st or st0)
        try:
            c = compile_fused(d, dt, cfg[2], rot, causal, drop)
            r, text = report(c)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"| {d} | {dt} | {cfg} | {rot} | {causal} | {drop} | {type(exc).__name__}: "
                  f"{str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''} |", flush=True)
            continue
        ptx = c.asm["ptx"]
        regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
        red_ptx = len(re.findall(r"cp\.reduce\.async\.bulk\.tensor", ptx))
        waits = len(re.findall(r"cp\.async\.bulk\.wait_group\.read", ptx))
        dep2 = len(re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x2", text))
        print(f"| {d} | {dt} | {cfg} | {rot} | {causal} | {drop} | {r['warps']} | {r['regs']} | {regs} | {r['spill_bytes']} | "
              f"{r['smem'] / 1024:.0f} | {r['wgmma_ptx']} | {r['hgmma']} | {r['depbar1']} / {dep2} | {red_ptx} | "
              f"{text.count('UTMAREDG')} | {r['utmaldg']} | {r['utmastg']} | {waits} | "
              f"{'; '.join(r['advisories'])[:160] or 'none'} |", flush=True)
        if dump:
            os.makedirs(dump, exist_ok=True)
            name = (f"fused_d{d}_{dt}_{cfg[0]}x{cfg[1]}x{cfg[2]}{'' if rot else '_norot'}{'_causal' if causal else ''}"
                    f"{'_dropout' if drop else ''}")
            for ext in ("ttgir", "ptx"):
                with open(os.path.join(dump, f"{name}.{ext}"), "w") as f:
                    f.write(c.asm[ext])
            with open(os.path.join(dump, f"{name}.sass"), "w") as f:
                f.write(text)


def tile_loops(text: str) -> list:
    """The consumers' tile loops in the SASS text (session 28): the backward branches whose
    body holds HGMMAs and the TMA reduce (UTMAREDG), in address order, each as a dict: n
    (instructions in the body, branch included), ldl / stl (local-memory accesses in it:
    spills inside the loop), hgmma, and masked (instructions of the body's masked region:
    the forward-branched block holding the '-INF' selects, the part a tile crossing no
    mask edge skips; 0 where there is none). n - masked: a fully visible tile's path."""
    ins = []
    for ln in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", ln)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    out = []
    for a, t in ins:
        m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", t)
        if not m or int(m.group(1), 16) >= a or not t.startswith("@P"):
            continue                  # (a tile loop's back edge is its predicated exit test)
        lo = int(m.group(1), 16)
        body = [(b, x) for b, x in ins if lo <= b <= a]
        if not any("UTMAREDG" in x for _, x in body) or not any("HGMMA" in x for _, x in body):
            continue
        masked = 0
        for b, x in body:
            f = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", x)
            if f and b < int(f.group(1), 16) <= a:
                region = [y for c, y in body if b < c < int(f.group(1), 16)]
                if sum("-INF" in y for y in region) >= 16:
                    masked = max(masked, len(region))
        out.append(dict(start=lo, end=a, n=len(body), ldl=sum("LDL" in x for _, x in body),
                        stl=sum("STL" in x for _, x in body), hgmma=sum("HGMMA" in x for _, x in body),
                        masked=masked))
    # innermost ones only (a range holding another's: the partitions' outer dispatch loop)
    return [o for o in out
            if not any(p is not o and o["start"] <= p["start"] and p["end"] <= o["end"] for p in out)]


def window_table(dump=None):
    """--fused --window (session 28): the WINDOW variants (plain order, no dropout): the
    figures of fused_table plus, per consumer tile loop, its instructions (all; the masked
    region, which only tiles crossing a band edge run; a fully visible tile's path) and the
    local-memory accesses inside it."""
    print("| D | dtype | stages | regs (kernel) | setmaxnreg | spill B | smem KB | HGMMA | UTMAREDG | tile loops: "
          "instr (masked region / visible path), LDL + STL |")
    print("|" + "---|" * 10)
    for d, dt in ((128, "bf16"), (128, "fp16"), (64, "bf16"), (64, "fp16")):
        st = FUSED_CONFIG[d][2]
        c = compile_fused(d, dt, st, False, False, False, window=True)
        r, text = report(c)
        loops = "; ".join(f"{lp['n']} ({lp['masked']} / {lp['n'] - lp['masked']}), {lp['ldl'] + lp['stl']}"
                          for lp in tile_loops(text))
        regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
        print(f"| {d} | {dt} | {st} | {r['regs']} | {regs} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | "
              f"{r['hgmma']} | {text.count('UTMAREDG')} | {loops} |", flush=True)
        if dump:
            os.makedirs(dump, exist_ok=True)
            name = f"fused_d{d}_{dt}_window"
            for ext in ("ttgir", "ptx"):
                with open(os.path.join(dump, f"{name}.{ext}"), "w") as f:
                    f.write(c.asm[ext])
            with open(os.path.join(dump, f"{name}.sass"), "w") as f:
                f.write(text)


def varlen_table(dump=None):
    """--fused --varlen (session 50): the VARLEN variants (a packed batch, the 64-row tile, plain with ROTATE and
    CAUSAL, the dispatch order on) against the dense kernel of the same kind: fused_table's figures plus
    window_table's tile-loop counts."""
    print("| D | dtype | kind | variant | regs (kernel) | setmaxnreg | spill B | smem KB | HGMMA | UTMAREDG | UTMASTG | "
          "tile loops: instr (masked region / visible path), LDL + STL |")
    print("|" + "---|" * 12)
    for d, dt in ((128, "bf16"), (128, "fp16"), (64, "bf16")):
        st = FUSED_CONFIG[d][2]
        for causal in (False, True):
            for varlen in (False, True):
                c = compile_fused(d, dt, st, not causal, causal, False, varlen=varlen)
                r, text = report(c)
                loops = "; ".join(f"{lp['n']} ({lp['masked']} / {lp['n'] - lp['masked']}), {lp['ldl'] + lp['stl']}"
                                  for lp in tile_loops(text))
                regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
                print(f"| {d} | {dt} | {'causal' if causal else 'plain'} | {'VARLEN' if varlen else 'dense'} | "
                      f"{r['regs']} | {regs} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['hgmma']} | "
                      f"{text.count('UTMAREDG')} | {r['utmastg']} | {loops} |", flush=True)
                if dump and varlen:
                    os.makedirs(dump, exist_ok=True)
                    name = f"fused_d{d}_{dt}_varlen{'_causal' if causal else ''}"
                    for ext in ("ttgir", "ptx"):
                        with open(os.path.join(dump, f"{name}.{ext}"), "w") as f:
                            f.write(c.asm[ext])
                    with open(os.path.join(dump, f"{name}.sass"), "w") as f:
                        f.write(text)


def wide_table(dump=None):
    """--fused --wide (session 30): the WIDE tile (FUSED_WIDE_CONFIG, BLOCK_M = 128 at D = 64)
    against today's D = 64 tile, plain and causal: the figures of fused_table plus, per
    consumer tile loop, its instructions, MUFU.EX2, HGMMA and local accesses, and the
    instructions a 64 x 128 (query x key) tile's worth of work (the loop's count / (BLOCK_M /
    64)), the issue-side figure the wide tile is meant to lower."""
    print("| D | dtype | tile | causal | stages | setmaxnreg | spill B | smem KB | HGMMA | UTMAREDG | tile loops: instr "
          "(masked), EX2, HGMMA, LDL + STL | instr a 64-row tile |")
    print("|" + "---|" * 12)
    for d, dt, causal, wide in ((64, "bf16", False, False), (64, "bf16", False, True), (64, "fp16", False, True),
                                (64, "bf16", True, False), (64, "bf16", True, True), (64, "fp16", True, True)):
        bm, _, st = (FUSED_WIDE_CONFIG if wide else FUSED_CONFIG)[d]
        c = compile_fused(d, dt, st, True, causal, False, wide=wide)
        r, text = report(c)
        lps = tile_loops(text)
        ins = [(int(a, 16), t) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
        parts = []
        for lp in lps:
            body = [t for a, t in ins if lp["start"] <= a <= lp["end"]]
            parts.append(f"{lp['n']} ({lp['masked']}), {sum('MUFU.EX2' in t for t in body)}, {lp['hgmma']}, "
                         f"{lp['ldl'] + lp['stl']}")
        per64 = " / ".join(f"{lp['n'] * 64 / bm:.0f}" for lp in lps)
        regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
        print(f"| {d} | {dt} | {'wide ' if wide else ''}{bm}x128 | {causal} | {st} | {regs} | {r['spill_bytes']} | "
              f"{r['smem'] / 1024:.0f} | {r['hgmma']} | {text.count('UTMAREDG')} | {'; '.join(parts)} | {per64} |",
              flush=True)
        if dump:
            os.makedirs(dump, exist_ok=True)
            name = f"fused_d{d}_{dt}_{bm}x128x{st}{'_causal' if causal else ''}{'_wide' if wide else ''}"
            with open(os.path.join(dump, f"{name}.sass"), "w") as f:
                f.write(text)


def defer_table(dump=None):
    """--fused --defer (session 31): DEFER_DQ (a tile's dQ one ring tile later; plain kernel
    only) against today's kernel, offline: spills, shared memory, per consumer tile loop its
    instructions, MUFU.EX2, HGMMA, BAR.SYNC and local accesses; then the launcher's own
    arguments (_fused_launch_args(defer=True)) through Triton's JIT binder (stub driver)."""
    import torch

    from triton.runtime import driver

    from flashtriton.launchers import backward_gluon

    print("| D | dtype | rotate | DEFER_DQ | setmaxnreg | spill B | smem KB | HGMMA | UTMAREDG | tile loops: instr, "
          "EX2, HGMMA, BAR, LDL + STL |")
    print("|" + "---|" * 10)
    for d, dt, rot in ((128, "bf16", True), (128, "fp16", True), (128, "bf16", False), (64, "bf16", True),
                       (64, "fp16", True)):
        for defer in (False, True):
            c = compile_fused(d, dt, None, rot, False, False, defer=defer)
            r, text = report(c)
            ins = [(int(a, 16), t) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
            parts = []
            for lp in tile_loops(text):
                body = [t for a, t in ins if lp["start"] <= a <= lp["end"]]
                parts.append(f"{lp['n']}, {sum('MUFU.EX2' in t for t in body)}, {lp['hgmma']}, "
                             f"{sum('BAR.SYNC' in t for t in body)}, {lp['ldl'] + lp['stl']}")
            regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
            print(f"| {d} | {dt} | {rot} | {defer} | {regs} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | "
                  f"{r['hgmma']} | {text.count('UTMAREDG')} | {'; '.join(parts)} |", flush=True)
            if dump:
                os.makedirs(dump, exist_ok=True)
                with open(os.path.join(dump, f"fused_d{d}_{dt}{'' if rot else '_norot'}"
                                             f"{'_defer' if defer else ''}.sass"), "w") as f:
                    f.write(text)
    driver.set_active(_StubDriver())
    print()
    print("| --jit: D | dtype | B, Nq, Nk, H, Hk | rotate | constexpr ints | regs | spill B | smem KB | HGMMA | "
          "tile loops: instr, LDL + STL |")
    print("|" + "---|" * 10)
    for d, dt, b, nq, nk, h, hk, rot in ((128, torch.bfloat16, 1, 16384, 16384, 16, 16, True),
                                         (128, torch.bfloat16, 8, 2048, 2048, 16, 16, True),
                                         (128, torch.float16, 2, 1024, 1024, 8, 2, True),
                                         (128, torch.bfloat16, 2, 256, 1024, 8, 1, True),
                                         (128, torch.bfloat16, 1, 16384, 16384, 16, 16, False),
                                         (64, torch.bfloat16, 16, 1024, 1024, 32, 32, True)):
        q = torch.randn(b, nq, h, d, dtype=dt)
        k, v = torch.randn(b, nk, hk, d, dtype=dt), torch.randn(b, nk, hk, d, dtype=dt)
        dout, lse, delta = torch.randn_like(q), torch.zeros(b, h, nq), torch.zeros(b, h, nq)
        bm, bn, st = FUSED_CONFIG[d]
        *_, grid, args, kwargs = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, d ** -0.5, bm, bn, st,
                                                                    rot, False, defer=True)
        c = attn_bwd_fused_gluon_kernel.warmup(*args, grid=grid, **kwargs)
        r = resources(c)
        ints = [k for k, v in c.src.signature.items() if v == "constexpr" and k.islower()]
        loops = "; ".join(f"{lp['n']}, {lp['ldl'] + lp['stl']}" for lp in tile_loops(sass(c)))
        print(f"| {d} | {str(dt).split('.')[-1]} | {(b, nq, nk, h, hk)} | {rot} | {', '.join(ints) or '-'} | "
              f"{r['regs']} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['hgmma']} | {loops} |", flush=True)


def splitm_table(dump=None):
    """--fused --splitm (session 31): DQ_SPLIT_M on the WIDE tile (each WG's dQ a 64-row half over
    the whole D: m64n64k16 steps) against the WIDE tile of today (a D-half over all 128 rows:
    m64n32k16), plain and causal, offline: spills, shared memory, HGMMA, UTMAREDG, per consumer
    tile loop its instructions, MUFU.EX2, HGMMA (by shape), BAR.SYNC and local accesses; then the
    launcher's own arguments (_fused_launch_args(split_m=True)) through Triton's JIT binder (stub
    driver), with the dq_accum box the compiled kernel asks of the launch."""
    import collections

    import torch

    from triton.runtime import driver

    from flashtriton.launchers import backward_gluon

    print("| D | dtype | causal | DQ_SPLIT_M | setmaxnreg | spill B | smem KB | HGMMA | UTMAREDG | tile loops: instr "
          "(masked), EX2, HGMMA, BAR, LDL + STL | loop HGMMA shapes |")
    print("|" + "---|" * 11)
    for dt, causal in (("bf16", False), ("fp16", False), ("bf16", True), ("fp16", True)):
        for splitm in (False, True):
            c = compile_fused(64, dt, None, True, causal, False, wide=True, splitm=splitm)
            r, text = report(c)
            ins = [(int(a, 16), t) for a, t in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)]
            parts, shapes = [], collections.Counter()
            for lp in tile_loops(text):
                body = [t for a, t in ins if lp["start"] <= a <= lp["end"]]
                parts.append(f"{lp['n']} ({lp['masked']}), {sum('MUFU.EX2' in t for t in body)}, {lp['hgmma']}, "
                             f"{sum('BAR.SYNC' in t for t in body)}, {lp['ldl'] + lp['stl']}")
                shapes.update(re.search(r"HGMMA\.(\w+)", t).group(1) for t in body if "HGMMA" in t)
            regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
            print(f"| 64 | {dt} | {causal} | {splitm} | {regs} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | "
                  f"{r['hgmma']} | {text.count('UTMAREDG')} | {'; '.join(parts)} | "
                  f"{', '.join(f'{k} {v}' for k, v in sorted(shapes.items()))} |", flush=True)
            if dump:
                os.makedirs(dump, exist_ok=True)
                with open(os.path.join(dump, f"fused_d64_{dt}_wide{'_causal' if causal else ''}"
                                             f"{'_splitm' if splitm else ''}.sass"), "w") as f:
                    f.write(text)
    driver.set_active(_StubDriver())
    print()
    print("| --jit: dtype | B, Nq, Nk, H, Hk | causal | rotate | constexpr ints | spill B | smem KB | HGMMA | "
          "tile loops: instr, LDL + STL | dq_accum box |")
    print("|" + "---|" * 10)
    for dt, b, nq, nk, h, hk, causal, rot in ((torch.bfloat16, 1, 16384, 16384, 32, 32, False, True),
                                              (torch.bfloat16, 8, 2048, 2048, 32, 32, False, True),
                                              (torch.float16, 2, 1024, 1024, 8, 2, False, True),
                                              (torch.bfloat16, 2, 256, 1024, 6, 1, False, True),
                                              (torch.bfloat16, 1, 16384, 16384, 32, 32, False, False),
                                              (torch.bfloat16, 1, 16384, 16384, 32, 32, True, False),
                                              (torch.bfloat16, 2, 384, 1024, 8, 2, True, False)):
        q = torch.randn(b, nq, h, 64, dtype=dt)
        k, v = torch.randn(b, nk, hk, 64, dtype=dt), torch.randn(b, nk, hk, 64, dtype=dt)
        dout, lse, delta = torch.randn_like(q), torch.zeros(b, h, nq), torch.zeros(b, h, nq)
        bm, bn, st = FUSED_WIDE_CONFIG[64]
        *_, grid, args, kwargs = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, bm, bn, st,
                                                                    rot, causal, split_m=True)
        c = attn_bwd_fused_gluon_kernel.warmup(*args, grid=grid, **kwargs)
        r = resources(c)
        ints = [k for k, v in c.src.signature.items() if v == "constexpr" and k.islower()]
        loops = "; ".join(f"{lp['n']}, {lp['ldl'] + lp['stl']}" for lp in tile_loops(sass(c)))
        print(f"| {str(dt).split('.')[-1]} | {(b, nq, nk, h, hk)} | {causal} | {rot} | {', '.join(ints) or '-'} | "
              f"{r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['hgmma']} | {loops} | "
              f"{c.metadata.tensordesc_meta[-1]['block_size']} |", flush=True)


def timeline_table(dump=None):
    """--fused --timeline (session 43): the TIMELINE probe (kernels/bwd_gluon_fused.py; flags 1 CTA-boundary
    stamps, 2 per-tile stamps, 4 the hand-over wait, 8 the other waits) against the kernel without it, D = 128
    (the probe's case) and the routed D = 64 tile: spills, per consumer tile loop its instructions and local
    accesses, the stamp instructions (CS2R / S2UR of %globaltimer); then the launcher's own arguments
    (_fused_launch_args(timeline=...)) through Triton's JIT binder (stub driver) at the probe's shapes."""
    import torch

    from triton.runtime import driver

    from flashtriton.launchers import backward_gluon

    print("| D | dtype | causal | wide / splitm | TIMELINE | setmaxnreg | spill B | smem KB | tile loops: instr, "
          "LDL + STL | %globaltimer reads |")
    print("|" + "---|" * 10)
    for d, dt, causal, wide in ((128, "bf16", False, False), (128, "fp16", False, False), (128, "bf16", True, False),
                                (128, "fp16", True, False), (64, "bf16", False, True), (64, "bf16", True, True)):
        for flags in (0, 1, 5, 15):
            c = compile_fused(d, dt, None, not causal, causal, False, wide=wide, splitm=wide, timeline=flags)
            r, text = report(c)
            loops = "; ".join(f"{lp['n']}, {lp['ldl'] + lp['stl']}" for lp in tile_loops(text))
            regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
            print(f"| {d} | {dt} | {causal} | {wide} | {flags} | {regs} | {r['spill_bytes']} | "
                  f"{r['smem'] / 1024:.0f} | {loops} | {text.count('GLOBALTIMER')} |", flush=True)
            if dump:
                os.makedirs(dump, exist_ok=True)
                with open(os.path.join(dump, f"fused_d{d}_{dt}{'_causal' if causal else ''}{'_wide' if wide else ''}"
                                             f"_tl{flags}.sass"), "w") as f:
                    f.write(text)
    driver.set_active(_StubDriver())
    print()
    print("| --jit: dtype | B, N, H | causal | TIMELINE | spill B | tile loops: instr, LDL + STL | timeline numel |")
    print("|" + "---|" * 7)
    for dt, b, n, h, causal in ((torch.bfloat16, 8, 2048, 16, False), (torch.bfloat16, 8, 2048, 16, True),
                                (torch.bfloat16, 1, 16384, 16, False)):
        for flags in (1, 5, 15):
            q = torch.randn(b, n, h, 128, dtype=dt)
            k, v = torch.randn_like(q), torch.randn_like(q)
            dout, lse, delta = torch.randn_like(q), torch.zeros(b, h, n), torch.zeros(b, h, n)
            bm, bn, st = FUSED_CONFIG[128]
            numel = backward_gluon.fused_timeline_numel(b, n, h, n, h, bm, bn)
            buf = torch.zeros(numel, dtype=torch.int64)
            *_, grid, args, kwargs = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 128 ** -0.5, bm, bn,
                                                                        st, not causal, causal, timeline=buf,
                                                                        timeline_flags=flags)
            c = attn_bwd_fused_gluon_kernel.warmup(*args, grid=grid, **kwargs)
            r = resources(c)
            loops = "; ".join(f"{lp['n']}, {lp['ldl'] + lp['stl']}" for lp in tile_loops(sass(c)))
            print(f"| {str(dt).split('.')[-1]} | {(b, n, h)} | {causal} | {flags} | {r['spill_bytes']} | {loops} | "
                  f"{numel} |", flush=True)


def ptxas_advisories(compiled) -> list:
    """ptxas -v's lines about wgmma (e.g. 'wgmma.mma_async instructions are serialized')."""
    return [ln.strip() for ln in ptxas_log(compiled).splitlines() if "wgmma" in ln.lower()]


def report(compiled) -> dict:
    """gluon_fwd_compile.report's figures plus the wgmma advisories; and the SASS."""
    r = fwd_report(compiled)
    r["advisories"] = ptxas_advisories(compiled)
    return r, sass(compiled)


class _StubDriver:
    """Enough of a Triton driver for the JIT binder to compile for sm_90a without a GPU."""

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


def jit_report(fused=False):
    if fused:
        return jit_report_fused()
    import torch

    from triton.runtime import driver

    from flashtriton.launchers import backward_gluon

    driver.set_active(_StubDriver())
    cases = [  # (D, dtype, causal, vec_ptr, B, Nq, Nk, H, Hk)
        (128, torch.bfloat16, False, True, 1, 16384, 16384, 16, 16), (128, torch.bfloat16, False, False, 1, 16384,
                                                                       16384, 16, 16),
        (128, torch.float16, False, True, 2, 1024, 1024, 8, 2), (128, torch.bfloat16, False, True, 2, 256, 1024, 8, 1),
        (64, torch.bfloat16, False, True, 16, 1024, 1024, 32, 32), (64, torch.float16, False, False, 2, 1024, 1024, 8,
                                                                      2),
        (128, torch.bfloat16, True, True, 2, 1024, 1024, 8, 2), (128, torch.bfloat16, True, False, 2, 1024, 1024, 8,
                                                                   2),
        (64, torch.bfloat16, True, True, 2, 1024, 1024, 8, 2), (128, torch.bfloat16, True, True, 1, 16384, 16384, 16,
                                                                  16),
        (64, torch.bfloat16, False, True, 16, 1024, 1024, 32, 32, True),
    ]
    print("| D | dtype | causal | vec_ptr | overlap | B, Nq, Nk, H, Hk | constexpr ints | regs | spill B | smem KB | "
          "HGMMA |")
    print("|" + "---|" * 11)
    for d, dt, causal, vp, b, nq, nk, h, hk, *rest in cases:
        ov = bool(rest and rest[0])
        q = torch.randn(b, nq, h, d, dtype=dt)
        k, v = torch.randn(b, nk, hk, d, dtype=dt), torch.randn(b, nk, hk, d, dtype=dt)
        dout, lse, delta = torch.randn_like(q), torch.zeros(b, h, nq), torch.zeros(b, h, nq)
        bm, bn, st = DEFAULT_CONFIG[d]
        try:
            dk, dv, grid, args, kwargs = backward_gluon._launch_args(q, k, v, dout, lse, delta, d ** -0.5, causal,
                                                                     bm, bn, st, vp, ov)
            c = attn_bwd_dkdv_gluon_kernel.warmup(*args, grid=grid, **kwargs)
            r = resources(c)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"| {d} | {dt} | {causal} | {vp} | {ov} | {(b, nq, nk, h, hk)} | {type(exc).__name__}: "
                  f"{str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ''} |", flush=True)
            continue
        ints = [k for k, v in c.src.signature.items() if v == "constexpr" and k.islower()]
        print(f"| {d} | {str(dt).split('.')[-1]} | {causal} | {vp} | {ov} | {(b, nq, nk, h, hk)} | "
              f"{', '.join(ints) or '-'} | {r['regs']} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | "
              f"{r['hgmma']} |", flush=True)


def jit_report_fused():
    """--fused --jit: launchers.backward_gluon._fused_launch_args (the fused launcher's own
    descriptors and arguments, CPU tensors) bound by Triton's JIT path with the stub driver."""
    import torch

    from triton.runtime import driver

    from flashtriton.launchers import backward_gluon

    driver.set_active(_StubDriver())
    cases = [  # (D, dtype, B, Nq, Nk, H, Hk[, rotate, causal])
        (128, torch.bfloat16, 1, 16384, 16384, 16, 16), (128, torch.float16, 2, 1024, 1024, 8, 2),
        (128, torch.bfloat16, 2, 256, 1024, 8, 1), (64, torch.bfloat16, 16, 1024, 1024, 32, 32),
        (64, torch.float16, 2, 1024, 256, 8, 2), (128, torch.bfloat16, 1, 16384, 16384, 16, 16, False),
        (128, torch.bfloat16, 1, 16384, 16384, 16, 16, True, True), (128, torch.float16, 2, 2048, 1024, 8, 2, True, True),
        (64, torch.bfloat16, 2, 1024, 1024, 8, 2, True, True),
        # DROPOUT (session 26): the launcher's key table, B * Nq and p
        (128, torch.bfloat16, 1, 16384, 16384, 16, 16, True, False, True), (128, torch.bfloat16, 1, 4096, 4096, 16, 16,
                                                                            True, False, True),
        (128, torch.float16, 2, 1024, 1024, 8, 2, True, True, True), (64, torch.bfloat16, 2, 1024, 1024, 8, 2, True,
                                                                      False, True),
        (64, torch.bfloat16, 2, 1024, 1024, 8, 2, True, True, True),
        # WINDOW (session 28): (left, right) as the 10th entry (flash-attn's, -1 unbounded)
        (128, torch.bfloat16, 1, 16384, 16384, 16, 16, False, False, False, (1024, 0)),
        (128, torch.bfloat16, 4, 4096, 4096, 16, 16, False, False, False, (1024, 0)),
        (128, torch.float16, 2, 2048, 1024, 8, 2, False, False, False, (128, 128)),
        (64, torch.bfloat16, 2, 1024, 2048, 8, 2, False, False, False, (0, 256)),
        (64, torch.bfloat16, 1, 16384, 16384, 16, 16, False, False, False, (-1, 128)),
    ]
    print("| D | dtype | B, Nq, Nk, H, Hk | rotate | causal | dropout | window | constexpr ints | regs | spill B | smem KB | "
          "HGMMA | dq box |")
    print("|" + "---|" * 13)
    for d, dt, b, nq, nk, h, hk, *rest in cases:
        rot = rest[0] if rest else True
        causal = bool(len(rest) > 1 and rest[1])
        drop = bool(len(rest) > 2 and rest[2])
        window = rest[3] if len(rest) > 3 else None
        q = torch.randn(b, nq, h, d, dtype=dt)
        k, v = torch.randn(b, nk, hk, d, dtype=dt), torch.randn(b, nk, hk, d, dtype=dt)
        dout, lse, delta = torch.randn_like(q), torch.zeros(b, h, nq), torch.zeros(b, h, nq)
        bm, bn, st = FUSED_CONFIG[d]
        try:
            keys = torch.zeros(backward_gluon.keys_numel(b, nq, nk, h), dtype=torch.int32) if drop else None
            win = None
            if window is not None:
                causal, win = backward_gluon._fused_window(window, causal, nq, nk)
            *_, grid, args, kwargs = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, d ** -0.5, bm, bn,
                                                                        st, rot, causal, dropout_p=0.1 if drop else 0.0,
                                                                        keys=keys, win=win)
            c = attn_bwd_fused_gluon_kernel.warmup(*args, grid=grid, **kwargs)
            r = resources(c)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"| {d} | {dt} | {(b, nq, nk, h, hk)} | {rot} | {causal} | {drop} | {window} | {type(exc).__name__}: "
                  f"{str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ''} |", flush=True)
            continue
        ints = [k for k, v in c.src.signature.items() if v == "constexpr" and k.islower()]
        print(f"| {d} | {str(dt).split('.')[-1]} | {(b, nq, nk, h, hk)} | {rot} | {causal} | {drop} | {window} | "
              f"{', '.join(ints) or '-'} | "
              f"{r['regs']} | {r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['hgmma']} | "
              f"{c.metadata.tensordesc_meta[-1]['block_size']} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jit", action="store_true")
    ap.add_argument("--fused", action="store_true", help="the fused kernel (kernels/bwd_gluon_fused.py)")
    ap.add_argument("--dropout", choices=("both", "on", "off"), default="both",
                    help="--fused: the variants with DROPOUT, without, or both (default)")
    ap.add_argument("--window", action="store_true", help="--fused: only the WINDOW variants, with tile-loop counts")
    ap.add_argument("--timeline", action="store_true",
                    help="--fused: the TIMELINE probe (session 43) at its flag sets against the kernel without it, "
                         "and through the JIT binder with the launcher's arguments")
    ap.add_argument("--varlen", action="store_true",
                    help="--fused: the VARLEN variants (session 50, a packed batch) against the dense kernel")
    ap.add_argument("--wide", action="store_true",
                    help="--fused: only the WIDE tile (BLOCK_M = 128 at D = 64, session 30) against today's D = 64")
    ap.add_argument("--defer", action="store_true",
                    help="--fused: DEFER_DQ (session 31: a tile's dQ one ring tile later) against today's, and "
                         "through the JIT binder with the launcher's arguments")
    ap.add_argument("--splitm", action="store_true",
                    help="--fused: DQ_SPLIT_M (session 31: the WIDE tile's dQ split by query rows, not by D) against "
                         "the WIDE tile of today, and through the JIT binder with the launcher's arguments")
    args = ap.parse_args(argv)
    if args.fused and args.timeline:
        timeline_table(args.dump)
        return
    if args.fused and args.splitm:
        splitm_table(args.dump)
        return
    if args.fused and args.defer:
        defer_table(args.dump)
        return
    if args.fused and args.varlen:
        varlen_table(args.dump)
        return
    if args.fused and args.wide:
        wide_table(args.dump)
        return
    if args.fused and args.window and not args.jit:
        window_table(args.dump)
        return
    if args.fused and args.jit:
        jit_report(fused=True)
        return
    if args.fused:
        fused_table(args.dump, args.quick, {"both": None, "on": True, "off": False}[args.dropout])
        return
    if args.jit:
        jit_report()
        return
    variants = [  # (D, dtype, NUM_STAGES, CAUSAL, VEC_PTR[, OVERLAP]); None: DEFAULT_CONFIG's
        (128, "bf16", None, False, True), (128, "fp16", None, False, True), (128, "bf16", None, False, False),
        (128, "fp16", None, False, False), (128, "bf16", 3, False, True), (128, "bf16", 4, False, True),
        (64, "bf16", None, False, True), (64, "fp16", None, False, True), (64, "bf16", None, False, False),
        (64, "bf16", 2, False, True),
        (128, "bf16", None, True, True), (128, "fp16", None, True, True), (128, "bf16", None, True, False),
        (64, "bf16", None, True, True), (64, "fp16", None, True, True), (64, "bf16", None, True, False),
        # OVERLAP (non-causal): clean at D = 64; serialized by ptxas at D = 128
        (64, "bf16", None, False, True, True), (64, "fp16", None, False, False, True),
        (128, "bf16", None, False, True, True),
    ]
    if args.quick:
        variants = [(128, "bf16", None, False, True), (64, "bf16", None, False, True)]
    print("| D | dtype | BM, BN, stages | causal | vec_ptr | overlap | warps | regs (kernel) | setmaxnreg | spill B | "
          "smem KB | wgmma PTX | mma.sync | HGMMA | DEPBAR.LE 1 | UTMALDG | UTMASTG | ptxas wgmma advisories |")
    print("|" + "---|" * 18)
    for d, dt, st, causal, vp, *rest in variants:
        ov = bool(rest and rest[0])
        bm, bn, st0 = DEFAULT_CONFIG[d]
        cfg = (bm, bn, st or st0)
        try:
            c = compile_dkdv(d, dt, *cfg, causal=causal, vec_ptr=vp, overlap=ov)
            r, text = report(c)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"| {d} | {dt} | {cfg} | {causal} | {vp} | {ov} | {type(exc).__name__}: "
                  f"{str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ''} |", flush=True)
            continue
        regs = ", ".join(f"{a} {n}" for a, n in r["setmaxnreg"])
        print(f"| {d} | {dt} | {cfg} | {causal} | {vp} | {ov} | {r['warps']} | {r['regs']} | {regs} | "
              f"{r['spill_bytes']} | {r['smem'] / 1024:.0f} | {r['wgmma_ptx']} | {r['mma_sync_ptx']} | {r['hgmma']} | "
              f"{r['depbar1']} | {r['utmaldg']} | {r['utmastg']} | {'; '.join(r['advisories'])[:160] or 'none'} |",
              flush=True)
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            name = (f"d{d}_{dt}_{cfg[0]}x{cfg[1]}x{cfg[2]}{'_causal' if causal else ''}{'_tma' if not vp else ''}"
                    f"{'_overlap' if ov else ''}")
            for ext in ("ttgir", "ptx"):
                with open(os.path.join(args.dump, f"{name}.{ext}"), "w") as f:
                    f.write(c.asm[ext])
            with open(os.path.join(args.dump, f"{name}.sass"), "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
