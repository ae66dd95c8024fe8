"""Session 61 (offline, sm_90a): hashes of kernels/decode.py's split kernel SASS over the variants a change to its
one-row fp32 path must leave alone (bf16 / fp16 at QK_LEVELS 0; fp32 multi-row at QK_LEVELS 0) and the ones it
changes (fp32 one-row, QK_LEVELS = launchers/common.qk_levels). D = 64 / 128 / 256, with / without a window and
softcap. Run from a tree's root before and after a change and compare:
PYTHONPATH=src python bench/gpu/s61_decode_sass_hash.py > before.txt"""
import hashlib
import inspect
import os
import re
import subprocess
import sys
import tempfile

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.bench.compile_report import _NVBIN
from flashtriton.kernels.decode import decode_split_kernel
from flashtriton.launchers.common import qk_levels
from flashtriton.launchers.decode import DEFAULT_TILES

fn = decode_split_kernel
params = inspect.signature(fn.fn).parameters


def sass_hash(dtype, d, lv, masks, softcap):
    bd = max(16, triton.next_power_of_2(d))
    bn, warps, stages = DEFAULT_TILES[bd]
    ptr = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32"}[dtype]
    const = dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_M=16, BLOCK_N=bn, PAGE_SIZE=0, HAS_BATCH_IDX=False,
                 HAS_LEFTPAD=False, HAS_NEW=False, BLOCK_NEW=16, HAS_ROTARY=False, ROTARY_INTERLEAVED=False,
                 ROTARY_PER_ROW=False, HAS_LEFT=masks, HAS_RIGHT=masks, HAS_ALIBI=False, HAS_SOFTCAP=softcap,
                 SPLIT=True, FUSED_COMBINE=True, KV_TMA=False,
                 DOT_PRECISION="ieee" if dtype == "fp32" else "tf32", PAGE_GATHER=0, QK_LEVELS=lv)
    sig = {}
    for name in params:
        if name in const:
            sig[name] = "constexpr"
        elif name in ("SEQLENS", "BATCH_IDX", "LEFTPAD", "BLOCK_TABLE", "COUNTERS"):
            sig[name] = "*i32"
        elif name in ("Q", "K_CACHE", "V_CACHE", "K_DESC", "V_DESC", "K_NEW", "V_NEW", "O"):
            sig[name] = ptr
        elif name[0].isupper():
            sig[name] = "*fp32"
        elif name in ("qk_scale", "softcap_scale", "softcap_out"):
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, num_stages=stages))
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        with open(cubin, "wb") as f:
            f.write(c.asm["cubin"])
        sass = subprocess.run([os.path.join(_NVBIN, "cuobjdump"), "--dump-sass", cubin],
                              capture_output=True, text=True, check=True).stdout
    sass = "\n".join(line for line in sass.splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/", line))
    return hashlib.sha256(sass.encode()).hexdigest()[:16], len(sass.splitlines())


for dtype in ("bf16", "fp16", "fp32"):
    for d in (64, 128, 256):
        bd = max(16, triton.next_power_of_2(d))
        levels = [0] + ([qk_levels(torch.float32, bd, 1)] if dtype == "fp32" else [])
        for lv in levels:
            for masks, softcap in ((False, False), (True, False), (False, True)):
                h, n = sass_hash(dtype, d, lv, masks, softcap)
                print(f"{dtype} D={d} QK_LEVELS={lv} masks={masks} softcap={softcap}: {h} ({n} lines)", flush=True)
