"""Session 40: EARLY_LSE in the fused Gluon backward (kernels/bwd_gluon_fused.py: lse's layout conversion, STS +
WG barrier + LDS, issued under the S / dP^T wgmmas instead of after S's wait). One process times ONE setting
(FLASHTRITON_S40_EARLY_LSE=1 / 0, read when the kernel module is imported); bench/gpu/s40c.sh runs the settings in
alternating processes (1, 0, 0, 1), each with its own TRITON_CACHE_DIR, and compares the saved gradients bitwise.

    FLASHTRITON_S40_EARLY_LSE=1 PYTHONPATH=src python bench/gpu/s40_early_lse_ab.py OUT_PREFIX [cudnn]

What runs: the library's whole backward (launchers.backward.bwd; fused route forced at every N), D = 128, H = 16,
bf16, 16k tokens, N = 2k (causal and not) and 8k causal, CUDA-graph replays (bench.common.graph_or_eager_ms); at 2k the
gradients are checked against float64 (batch 0 / head 0, <= 3x PyTorch's bf16 error) and saved for the bitwise
comparison. "cudnn" also times SDPA CUDNN_ATTENTION's backward on the same inputs.

PREDICTION (before any run). Session 40's profile (s40b, causal 2k): 2,000 of 37,800 stall samples of the fused
backward (5.3%; ~8% of the consumers' own, the parked padding warps left out) are short-scoreboard waits on
FMUL lse * log2(e) right after the LDS.128 of lse's conversion, which follows S's wgmma wait; 456 more wait on the
STS of the converted value (the global load). EARLY_LSE moves STS / barrier / LDS before the wait (offline SASS:
LDS.128 x 4 now ahead of WARPGROUP.DEPBAR.LE gsb0, 1), at a cost: 108 spill bytes at D = 128 (0 before; 3 LDL a
tile, of addresses), 92 causal (8 before). Expected +0.5-2% at D = 128 (the other WG's wgmmas already fill part
of that wait), bitwise the same gradients. Taken only if >= +1% against 0 in both EARLY_LSE=1 processes in every case.
"""
import os
import sys

os.environ.setdefault("FLASHTRITON_PLANS", "0")
sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402

from fused_bwd_ab import DTYPE, TOKENS, Setup, Variant, _call, _cudnn_ms, _inputs, _setting  # noqa: E402
from flashtriton.bench.common import attention_flops, graph_or_eager_ms, head0_grad_check, head0_grad_refs  # noqa
from flashtriton.kernels import bwd_gluon_fused  # noqa: E402

CASES = [(2048, False), (2048, True), (8192, True)]
OLD = Variant("unused", "GLUON_BWD_FUSED_DEFER", ("plain",), launched=lambda kw: True, expect=lambda on: True)
S = Setup(OLD, d=128, h=16, cases=CASES, check_ns=[2048])


def main():
    prefix = sys.argv[1]
    with_cudnn = len(sys.argv) > 2 and sys.argv[2] == "cudnn"
    tag = f"EARLY_LSE={int(bool(bwd_gluon_fused.EARLY_LSE))}"
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {tag}", flush=True)
    for n, causal in CASES:
        inp = _inputs(S, n, causal)
        _setting(S, "old", causal)
        if n in S.check_ns:
            q, k, v, dout, _, _ = inp
            refs = head0_grad_refs(q, k, v, dout, softmax_scale=S.d ** -0.5, window_right=0 if causal else -1)
            g = [t.clone() for t in _call(S, causal, inp)()]
            ok, text = head0_grad_check(g, refs)
            print(f"check N={n} causal={causal} {tag}: {'ok' if ok else 'FAILED'}; {text}", flush=True)
            torch.save([t.cpu() for t in g], f"{prefix}_{n}_{int(causal)}.pt")
        ms, mark = graph_or_eager_ms(_call(S, causal, inp))
        fl = attention_flops(TOKENS // n, S.h, n, n, S.d, causal, "bwd")
        line = f"N={n} causal={causal} {tag}: {ms * 1e3:.1f}{mark} us {fl / ms / 1e9:.0f} TFLOP/s"
        if with_cudnn:
            cms = _cudnn_ms(S, causal, inp)
            line += f" | cudnn {cms * 1e3:.1f} us {fl / cms / 1e9:.0f} TFLOP/s"
        print(line, flush=True)
        del inp
        torch.cuda.empty_cache()


if __name__ == "__main__":
    assert DTYPE == torch.bfloat16
    main()
