import os, re, subprocess, tempfile, sys
sys.path.insert(0, "/work/main/bench")
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
import gluon_fwd_compile as g

@gluon.jit
def probe_kernel(X, Y, lim, SPLIT: gl.constexpr):
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 128, 16])
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
    cols = gl.arange(0, 128, layout=gl.SliceLayout(0, s_layout))
    offs = gl.expand_dims(rows, 1) * 128 + gl.expand_dims(cols, 0)
    s = gl.load(X + offs)                                       # (64, 128) fp32 in the wgmma layout
    if SPLIT:
        s3 = gl.permute(gl.reshape(s, [64, 2, 64]), (0, 2, 1))  # (64, 64, 2): [..., h] = column h * 64 + c
        lo, hi = gl.split(s3)                                   # (64, 64) each
        hl: gl.constexpr = lo.type.layout
        r2 = gl.arange(0, 64, layout=gl.SliceLayout(1, hl)) + lim
        c2 = gl.arange(0, 64, layout=gl.SliceLayout(0, hl))
        lo = gl.where(gl.expand_dims(c2, 0) <= gl.expand_dims(r2, 1), lo, float("-inf"))
        hi = gl.full(hi.shape, float("-inf"), gl.float32, hl)
        s = gl.reshape(gl.permute(gl.join(lo, hi), (0, 2, 1)), [64, 128])
        s = gl.convert_layout(s, s_layout)
    else:
        r = rows + lim
        s = gl.where(gl.expand_dims(cols, 0) <= gl.expand_dims(r, 1), s, float("-inf"))
    gl.store(Y + offs, s)

for split in (False, True):
    src = GluonASTSource(probe_kernel, signature=dict(X="*fp32", Y="*fp32", lim="i32", SPLIT="constexpr"),
                         constexprs={(3,): split})
    try:
        c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))
    except Exception as e:
        print("SPLIT", split, "FAILED:", str(e).splitlines()[0][:300]); continue
    t = g.sass(c)
    ins = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", t)
    ops = [x.split()[0] for x in ins]
    from collections import Counter
    cnt = Counter(o.split(".")[0] for o in ops)
    print("SPLIT", split, "instructions", len(ins), {k: cnt[k] for k in ("ISETP", "FSEL", "SHFL", "PRMT", "STS", "LDS", "MOV", "BAR")})
