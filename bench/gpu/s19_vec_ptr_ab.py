"""Prepared in session 18 for session 19 (needs bench/wip/dkdv-vec-ptr-ahead.patch): the
dK/dV loop's pointer loads of lse / delta one iteration ahead (VEC_PTR 2,
launchers.backward.WS_DKDV_VEC_PTR_KIND = 2) against in the iteration after the first
dot (1, the default since session 18, ~8% slower than the faulty 1-D descriptors).

Prediction: the load latency (~600-800 cycles from L2 against an iteration of ~2.6 us at
D = 128, BLOCK_M = 64) hides behind the iteration's last three dots: 2 recovers 4-8% at
8k / 16k (430 -> 445-460 TFLOP/s non-causal), unless its 68 bytes of spill (offline
sm_90a) cost it back.

    PYTHONPATH=src python bench/gpu/s19_vec_ptr_ab.py          # A/B, ~1 min
    PYTHONPATH=src python bench/gpu/s19_vec_ptr_ab.py stress 40      # kind 2 at 8k / 16k, ~3 min
"""
import sys

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import backward, plans


def ab():
    for n, causal in ((8192, False), (16384, False), (8192, True), (16384, True), (4096, False)):
        b, h, d = 16384 // n, 16, 128
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        dout = torch.randn_like(out)

        def grad():
            return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        res, got = {}, {}
        for rep in range(2):
            for kind in ((1, 2) if rep == 0 else (2, 1)):
                backward.WS_DKDV_VEC_PTR_KIND = kind
                backward.WS_DKDV_VEC_PTR = True if n == 4096 else None   # 4k: forced (one tile a program)
                plans.clear()
                got[kind] = grad()
                res.setdefault(kind, []).append(attention_flops(b, h, n, n, d, causal, "bwd") / time_ms(grad, "cuda") / 1e9)
        same = all(torch.equal(x, y) for x, y in zip(got[1], got[2]))
        print(f"N={n} {'causal' if causal else 'plain'}: backward TFLOP/s in-iteration {res[1][0]:.0f} / {res[1][1]:.0f}"
              f"  ahead {res[2][0]:.0f} / {res[2][1]:.0f}  bitwise equal {same}", flush=True)
    backward.WS_DKDV_VEC_PTR_KIND, backward.WS_DKDV_VEC_PTR = 1, None
    plans.clear()


if __name__ == "__main__":
    if sys.argv[1:2] == ["stress"]:
        import subprocess
        import os
        env = dict(os.environ)
        sys.exit(subprocess.call([sys.executable, "-c", (
            "from flashtriton.launchers import backward; backward.WS_DKDV_VEC_PTR_KIND = 2\n"
            "import runpy, sys; sys.argv = ['s18_long_stress.py', '" + sys.argv[2] + "', '128:16384:0:0', "
            "'128:8192:0:0.1', '128:16384:1:0']\n"
            "runpy.run_path('bench/gpu/s18_long_stress.py', run_name='__main__')")], env=env))
    ab()
