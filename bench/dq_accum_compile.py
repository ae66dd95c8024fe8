"""Offline sm_90a compile of the launches around the fused Gluon backward (session 29): the
delta preprocess (kernels/bwd.py's bwd_preprocess_kernel) without and with DQ_ACCUM (the
dq accumulator zeroed in the same launch: backward_gluon.FUSED_DQ_ZERO_IN_PREPROCESS) and
kernels/dq_accum.py's cast_kernel without and with REVERSE, as launchers/backward.py /
backward_gluon._run_fused launch them (BLOCK_M 64, BLOCK_D = D, 4 warps; the cast's 4096
elements a program). No GPU: Triton's bundled ptxas / cuobjdump.

Arguments typed as the routed launches specialise them (pointers, strides, Nq and the
cast's n multiples of 16; H = 16 is too, but nheads is left unhinted, the H = 4 case).
Prints registers, spill bytes, global loads / stores in the SASS and a hash of the SASS
(the old variants' hashes equal from this tree and from main: unchanged code):

    PYTHONPATH=src python bench/dq_accum_compile.py
    PYTHONPATH=/path/to/main/src python bench/dq_accum_compile.py --old-only   # main's kernels
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.bench.compile_report import _NVBIN, resources
from flashtriton.kernels.bwd import bwd_preprocess_kernel
from flashtriton.kernels.dq_accum import BLOCK, cast_kernel


def _compile(fn, sig: dict, const: dict, div16=()):
    """div16: the arguments Triton's launch would specialise as multiples of 16 (pointers of
    torch's allocations, the strides and Nq of the routed shapes): without the hint the
    loads and stores compile unvectorised (4-byte accesses, ~2x the registers)."""
    attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k in div16}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()},
                    attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, num_stages=3))


def _sass(compiled) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        with open(cubin, "wb") as f:
            f.write(compiled.asm["cubin"])
        out = subprocess.run([os.path.join(_NVBIN, "cuobjdump"), "--dump-sass", cubin], capture_output=True,
                             text=True).stdout
    # the instructions only (no addresses, no file header)
    return "\n".join(line.split("*/", 1)[-1].split("/*")[0].strip() for line in out.splitlines()
                     if line.strip().startswith("/*") and "*/" in line)


def preprocess(d: int, zero: bool):
    sig = {n: "i32" for n in bwd_preprocess_kernel.arg_names}
    sig.update(O="*bf16", DO="*bf16", DELTA="*fp32", CU_Q="*fp32")
    const = dict(HEAD_DIM=d, BLOCK_D=d, BLOCK_M=64, IS_VARLEN=False)
    if zero:
        sig["DQ_ACCUM"] = "*fp32"
    elif "DQ_ACCUM" in bwd_preprocess_kernel.arg_names:          # (main's kernel has no DQ_ACCUM)
        const["DQ_ACCUM"] = None
    for k in const:
        sig[k] = "constexpr"
    div16 = ["O", "DO", "DELTA", "CU_Q", "stride_ob", "stride_on", "stride_oh", "stride_dob", "stride_don",
             "stride_doh", "stride_db", "stride_dh", "seqlen_q"] + (["DQ_ACCUM"] if zero else [])
    return _compile(bwd_preprocess_kernel, sig, const, div16)


def cast(dtype: str, reverse: bool):
    sig = dict(SRC="*fp32", DST=f"*{dtype}", n="i32", BLOCK="constexpr")
    const = dict(BLOCK=BLOCK)
    if "REVERSE" in cast_kernel.arg_names:
        sig["REVERSE"] = "constexpr"
        const["REVERSE"] = reverse
    elif reverse:
        raise SystemExit("cast_kernel has no REVERSE here (main's tree?)")
    return _compile(cast_kernel, sig, const, ["SRC", "DST", "n"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--old-only", action="store_true", help="only the variants main has (no DQ_ACCUM, no REVERSE)")
    args = ap.parse_args(argv)
    rows = [(f"preprocess D={d}", lambda d=d: preprocess(d, False)) for d in (64, 128)]
    rows += [(f"cast {t}", lambda t=t: cast(t, False)) for t in ("bf16", "fp16")]
    if not args.old_only:
        rows += [(f"preprocess D={d} DQ_ACCUM", lambda d=d: preprocess(d, True)) for d in (64, 128)]
        rows += [(f"cast {t} REVERSE", lambda t=t: cast(t, True)) for t in ("bf16", "fp16")]
    print("| kernel | regs | spill B | LDG | STG | SASS instr | SASS sha1 |")
    print("|---|---|---|---|---|---|---|")
    for name, make in rows:
        c = make()
        r = resources(c)
        sass = _sass(c)
        lines = sass.splitlines()
        print(f"| {name} | {r['regs']} | {r['spill_bytes']} | {sum('LDG' in x for x in lines)} | "
              f"{sum('STG' in x for x in lines)} | {len(lines)} | {hashlib.sha1(sass.encode()).hexdigest()[:12]} |")


if __name__ == "__main__":
    main()
