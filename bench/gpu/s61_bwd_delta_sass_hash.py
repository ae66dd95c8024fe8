"""Session 61 (offline, sm_90a): SASS hashes of the kernels that compute the backward's delta (bwd.py's
bwd_preprocess_kernel, and its dQ kernel with FUSED_DELTA) for the variants the one-row fp32 change (common.row_dots
at QK_LEVELS > 0) must leave alone: bf16 and fp32 at QK_LEVELS 0, D = 64 / 128 / 256. Run before and after a change
from a tree's root: PYTHONPATH=src python bench/gpu/s61_bwd_delta_sass_hash.py"""
import inspect

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.bench.compile_report import compile_variant, sass_digest
from flashtriton.kernels import configs
from flashtriton.kernels.bwd import bwd_preprocess_kernel


def preprocess(d, dtype):
    fn = bwd_preprocess_kernel
    const = dict(HEAD_DIM=d, BLOCK_D=max(16, triton.next_power_of_2(d)), BLOCK_M=64, IS_VARLEN=False,
                 DQ_ACCUM=None)
    params = inspect.signature(fn.fn).parameters
    for name in ("DOT_PRECISION", "QK_LEVELS"):    # (absent before session 61)
        if name in params:
            const[name] = params[name].default
    sig = {}
    for name in params:
        if name in const:
            sig[name] = "constexpr"
        elif name in ("O", "DO"):
            sig[name] = f"*{dtype}"
        elif name == "DELTA":
            sig[name] = "*fp32"
        elif name == "CU_Q":
            sig[name] = "*i32"
        else:
            sig[name] = "i32"
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, num_stages=1))


for dtype in ("bf16", "fp32"):
    for d in (64, 128, 256):
        h, n = sass_digest(preprocess(d, dtype))
        print(f"preprocess {dtype} D={d}: {h} ({n} lines)", flush=True)
        tile = configs.default_tile("dq", d, 4096, 4 if dtype == "fp32" else 2)
        prec = "ieee" if dtype == "fp32" else "tf32"
        h, n = sass_digest(compile_variant("dq", tile, d, dtype, FUSED_DELTA=True, DOT_PRECISION=prec))
        print(f"dq FUSED_DELTA {dtype} D={d} {tile}: {h} ({n} lines)", flush=True)
