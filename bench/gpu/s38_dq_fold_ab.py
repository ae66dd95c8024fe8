"""Session 38: the fused Gluon backward's DQ_FOLD (session 37, a helper; kernels/bwd_gluon_fused._fused_dq_fold,
prepare_fused(dq_fold=True); not routed): the cast of dq_accum into dq inside the kernel (the last CTA of each
batch x KV head on its arrival counters casts that head group's rows), so no cast_kernel launch. A/B against
the fold off and cuDNN, D = 128, causal and not.

    PYTHONPATH=src timeout 590 python bench/gpu/s38_dq_fold_ab.py     # S38_CASES=2048:0,4096:1 S38_DTYPES=bf16

Cases N:causal on the prefill grid's shapes (16k tokens, hidden 2048: H = Hk = 16, B = 16k / N), N = 2k / 4k /
8k, bf16 and fp16. Each of ours is a whole backward in the library's replayable form: the delta preprocess
(bwd_preprocess_kernel into the call's delta), zero_f32_kernel (dq_accum; with the fold its counters too), the
fused kernel (the route's tile: ROTATE off under causal, policy.fused_band's BAND) and cast_kernel (fold off
only). cuDNN: torch SDPA's backward under CUDNN_ATTENTION (its own preprocess and dq conversion inside).
CUDA-graph replays, two rounds (the second reversed). Before timing: dk / dv BITWISE the fold-off ones, dq
within fp32 summation order (2e-2 x max |dq|), every output finite.

PREDICTION (before the run): the fold saves the cast launch (51 us at 16k tokens x 2048 hidden, the H200
profile; its launch gap too) and pays the in-kernel conversion: 128 MB of fp32 read + 64 MB written by the
converting warpgroups, mostly under other CTAs' work (the heads finish staggered) but holding an SM slot
(~1.5 MB a head at 2k at ~70-100 GB/s a CTA with 64 KB in flight: ~12-20 us a head, ~12 us of SM time
spread over the run) plus a tail (the last head's conversion after the last tile: ~12-20 us at 2k, ~25-45 us
at 8k where a head's slice is 4 MB). Estimate: 2k -25 us a call (-10 .. -40: ~2% of ~1.4 ms), 4k -20 us,
8k -5 .. -15 us (maybe level), causal alike (its heads end more staggered, so a smaller tail).
Routing rule: a policy switch by head dim and kind (plain / causal), on for a kind where dq_fold is >= 1%
faster in both rounds at 2k and 4k in bf16 and fp16 and no worse than -0.5% in either round at 8k; else off.
"""
import os
import time

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (graphs replay the launches anyway)

import torch  # noqa: E402
import triton  # noqa: E402

from flashtriton.bench.common import attention_flops, ratio_cells, short_error, timing_rounds  # noqa: E402
from flashtriton.kernels.bwd import bwd_preprocess_kernel  # noqa: E402
from flashtriton.kernels.bwd_gluon_fused import FUSED_CONFIG  # noqa: E402
from flashtriton.launchers import backward_gluon, forward_gluon, policy  # noqa: E402
from flashtriton.launchers.common import block_d  # noqa: E402

TOKENS, HIDDEN, D = 16384, 2048, 128
CASES = [(int(n), c == "1") for n, c in (x.split(":") for x in
                                         os.environ.get("S38_CASES", "2048:0,2048:1,4096:0,4096:1,8192:0,8192:1")
                                         .split(","))]
DTYPES = [{"bf16": torch.bfloat16, "fp16": torch.float16}[x] for x in os.environ.get("S38_DTYPES", "bf16,fp16")
          .split(",")]


def cudnn_grad(q, k, v, dout, causal):
    """grad() = cuDNN's dq, dk, dv (torch SDPA, CUDNN_ATTENTION) on (B, H, N, D) views."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(qg.transpose(1, 2), kg.transpose(1, 2), vg.transpose(1, 2),
                                             is_causal=causal)
    dout_t = dout.transpose(1, 2)

    def grad():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.autograd.grad(out, (qg, kg, vg), dout_t, retain_graph=True)
    return grad


def ours(q, k, v, dout, out, lse, delta, scale, causal, fold):
    """A whole backward as the library's fused route runs it (preprocess, zero, kernel, cast unless fold)."""
    b, n, h, d = q.shape
    bm, bn, st = FUSED_CONFIG[d]
    band = policy.fused_band(d, n // bn, b * h) if causal else 0
    dq, dk, dv, acc, grid, args, kwargs = backward_gluon._fused_launch_args(
        q, k, v, dout, lse, delta, scale, bm, bn, st, not causal, causal, band=band, dq_fold=fold)

    def preprocess(dq_accum):
        bwd_preprocess_kernel[(b * h, triton.cdiv(n, 64))](
            out, dout, delta, delta, out.stride(0), out.stride(1), out.stride(2),
            dout.stride(0), dout.stride(1), dout.stride(2), delta.stride(0), delta.stride(1), h, n,
            HEAD_DIM=d, BLOCK_D=block_d(d), BLOCK_M=64, IS_VARLEN=False)

    def call():
        backward_gluon._run_fused(dq, dk, dv, acc, grid, args, kwargs, replayable=True, preprocess=preprocess)
        return dq, dk, dv
    return call


def case(n, causal, dtype):
    torch.manual_seed(n + causal)
    b, h = TOKENS // n, HIDDEN // D
    q, k, v, dout = (torch.randn(b, n, h, D, device="cuda", dtype=dtype) for _ in range(4))
    scale = D ** -0.5
    out, lse = forward_gluon.prepare(q, k, v, scale, causal=causal)()
    delta = backward_gluon.delta_of(out, dout)
    label = f"D={D} N={n} B={b} {'causal' if causal else 'plain'} {str(dtype)[6:]}"
    calls, outs = {}, {}
    for name, fold in (("fold0", False), ("fold1", True)):
        print(f"{label} {name}: first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[name] = ours(q, k, v, dout, out, lse, delta, scale, causal, fold)
            outs[name] = [t.clone() for t in calls[name]()]
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"{label} {name}: {short_error(exc)}", flush=True)
            calls.pop(name, None)
    if "fold0" in outs and "fold1" in outs:
        (dq0, dk0, dv0), (dq1, dk1, dv1) = outs["fold0"], outs["fold1"]
        same = torch.equal(dk0, dk1) and torch.equal(dv0, dv1)
        dqd = (dq1.float() - dq0.float()).abs().max().item()
        ok = dqd <= 2e-2 * dq0.float().abs().max().item()
        finite = all(bool(torch.isfinite(t).all()) for t in outs["fold1"])
        print(f"{label} fold1: dk / dv bitwise fold0 {same}, dq max diff {dqd:.2e} ({'ok' if ok else 'WRONG'}), "
              f"finite {finite}", flush=True)
        if not (same and ok and finite):
            calls.pop("fold1")
    try:
        calls["cudnn"] = cudnn_grad(q, k, v, dout, causal)
        calls["cudnn"]()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        calls.pop("cudnn", None)
        print(f"{label} cudnn unavailable: {short_error(exc)}", flush=True)
    flops = attention_flops(b, h, n, n, D, causal, "bwd")
    tf = timing_rounds(calls, {name: flops for name in calls}, label)
    cells = ratio_cells(tf, "fold0")
    us = {name: [flops / t / 1e6 for t in x] for name, x in tf.items()}      # TFLOP/s -> us a call
    delta_us = ""
    if "fold0" in us and "fold1" in us:
        delta_us = " / ".join(f"{b1 - b0:+.1f}" for b0, b1 in zip(us["fold0"], us["fold1"]))
    print(f"| {n} | {'causal' if causal else 'plain'} | {b} | {str(dtype)[6:]} | {cells} | fold1 - fold0 us a "
          f"round: {delta_us} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for dtype in DTYPES:
        for n, causal in CASES:
            try:
                case(n, causal, dtype)
            except Exception as exc:  # noqa: BLE001
                print(f"N={n} causal={causal} {dtype}: {short_error(exc)}", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
