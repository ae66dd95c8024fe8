"""Session 56 (offline; for the next GPU session): session 55's fp32 one-query gap (bench/gpu/s55_fp32_probe.py, the
prefill kernels) probed for flash_attn_with_kvcache - decode steps with one query row, fp32 caches, GQA (8 heads, 2 KV
heads), lengths 113 / 77 of 128, scales -0.2 / 0.2 / default, D = 192 / 128 / 64, 8 seeds. Prints ours / PyTorch-fp32
error ratios per cell (the tests' criterion: ours <= 2 x PyTorch's fp32 error + floor, both against float64, the fp32
reference on the inputs' device as in tests/test_kvcache.py) and the failures.

    PYTHONPATH=src python bench/gpu/s56_kvcache_fp32_probe.py [cuda|cpu]
(cpu: the Triton kernel under TRITON_INTERPRET=1, to check the script.)"""
import sys

import torch

sys.path.insert(0, "tests")
import flashtriton  # noqa: E402
from flashtriton import flash_attn_with_kvcache, kvcache, reference_decode  # noqa: E402
from helpers import ATOL_FLOOR, max_err  # noqa: E402

DEV = sys.argv[1] if len(sys.argv) > 1 else "cuda"


def case(d, scale, seed):
    torch.manual_seed(seed)
    q = torch.randn(2, 1, 8, d, device=DEV)
    kc, vc = torch.randn(2, 128, 2, d, device=DEV), torch.randn(2, 128, 2, d, device=DEV)
    lens = torch.tensor([113, 77], dtype=torch.int32, device=DEV)
    with flashtriton.use_backend("triton"):
        out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, softmax_scale=scale)
    params = kvcache._attn_params(scale if scale is not None else d ** -0.5, -1, -1, 0.0)

    def ref(dt):
        return reference_decode.kvcache_fwd(q, kc.clone(), vc.clone(), None, None, None, None, lens, None, None,
                                            None, params, True, None, 0, compute_dtype=dt)[0]
    r64, r32 = ref(torch.float64), ref(torch.float32)
    e, e0 = max_err(out, r64), max_err(r32, r64)
    return e, e0, e <= 2 * e0 + ATOL_FLOOR[torch.float32]


for d in ((192, 128, 64) if DEV == "cuda" else (64,)):
    for scale in (-0.2, 0.2, None):
        rs = [case(d, scale, s) for s in range(8 if DEV == "cuda" else 2)]
        print(f"kvcache D={d:3d} scale={scale}: ours/torch32 " + " ".join(f"{e / max(e0, 1e-30):5.2f}" for e, e0, _ in rs)
              + f"  ours max {max(e for e, _, _ in rs):.2e}  fails {sum(not ok for *_, ok in rs)}", flush=True)
