"""Session 36: the fused Gluon backward's BAND launch order (kernels/bwd_gluon_fused.py _fused_pids,
prepare_fused(band=); not routed) against band 0, causal, D = 128 and D = 64 at the route's tiles.

    PYTHONPATH=src timeout 400 python bench/gpu/s36_fused_band_ab.py     # S36F_CASES=128:8192 to shorten
    S36F_CTAS=128,256,512 S36F_DTYPE=fp16 ...    # bands by policy.fused_band's rule (the second run)

Cases D:N on the prefill grid's shapes (16k tokens, hidden 2048: H = Hk = 2048 / D, B = 16k / N), bf16,
causal. Each variant is a whole fused backward as prepare_fused's launch runs it (zero dq_accum, the
kernel, the cast; delta precomputed: the same for every band), CUDA-graph replays, two rounds (the second
reversed). dk / dv must be BITWISE band 0's (dq: fp32 summation order).

Why: band 0's grid (Nk / 128, B * Hk) launches one head's key blocks heaviest to lightest, then the next
head's: the heavy blocks of the last heads start late. Session 35's BAND on the D = 256 dQ pass: +4-9%
of the pass at 4k / 8k, 0.95-1.0x at 16k; session 36's whole D = 256 backward: +1-2% (noise-level).

PREDICTION (before the run): D = 128 causal backward 0.96-0.99x cuDNN at 4k-16k; the fused kernel's CTAs
average ~n_q / 2 tiles with ~31 waves at 4k (B * Hk = 64, 32 key blocks: 2,048 CTAs on 132 SMs), so the
tail the order can fix is ~1/31 of the time at 4k, more at 16k (B * Hk = 16: 2,048 CTAs too, but one
head's 128 blocks range 128 .. 1 tiles); bands 4-16: +0-3% at 4k-16k, level at 2k. Routing rule: a band
>= 2% ahead of band 0 in both rounds at 4k, 8k and 16k (D = 128) -> policy table by head dim.

Second run (call C): the first run's best bands sat near 256 CTAs a band (2k band 16, 4k band 8, 8k
band 2-4, 16k none), so policy.fused_band's rule (the largest power-of-two band with band x Nk / 128 <=
C CTAs) for C = 128 / 256 / 512, D = 128 at 512-16k in bf16 and 2k-8k in fp16. PREDICTION: C = 256
+2-5% at 1k-2k, +1-2% at 4k-8k, level at 16k (band 2). Routing rule: GLUON_BWD_FUSED_BAND[128] = C if
that C is >= 1.5% ahead in both rounds at 2 or more lengths and no worse than -1% in either round at any.
"""
import os
import time

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (graphs replay the launches anyway)

import torch  # noqa: E402

from flashtriton import reference  # noqa: E402
from flashtriton.bench.common import attention_flops, ratio_cells, short_error, timing_rounds  # noqa: E402
from flashtriton.launchers import backward_gluon  # noqa: E402
from flashtriton.launchers.backward_gluon import fused_block_m, fused_split_m  # noqa: E402

TOKENS, HIDDEN = 16384, 2048
DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}[os.environ.get("S36F_DTYPE", "bf16")]
CASES = [tuple(int(x) for x in c.split(":")) for c in
         os.environ.get("S36F_CASES", "128:8192,128:4096,128:16384,128:2048,64:8192,64:16384").split(",")]
# S36F_CTAS (the second run): bands by policy.fused_band's rule for these CTAs a band instead of the
# fixed bands 2 / 4 / 8 / 16 (0: band 0)
CTAS = [int(x) for x in os.environ.get("S36F_CTAS", "").split(",") if x]


def case(d, n):
    torch.manual_seed(d + n)
    b, h = TOKENS // n, HIDDEN // d
    q, k, v, dout = (torch.randn(b, n, h, d, device="cuda", dtype=DTYPE) for _ in range(4))
    scale = d ** -0.5
    # lse / out from the library's forward (the route's inputs), delta by its preprocess
    from flashtriton.launchers import forward_gluon
    out, lse = forward_gluon.prepare(q, k, v, scale, causal=True)()
    delta = backward_gluon.delta_of(out, dout)
    wide = fused_block_m(d, True, False, False, n)
    kw = dict(wide=True) if wide else {}
    if wide and fused_split_m(d, True, wide):
        kw["dq_split_m"] = True
    bands = [x for x in (0, 2, 4, 8, 16) if (b * h) % max(x, 1) == 0]
    if CTAS:
        from flashtriton.launchers.policy import fused_band
        bands = sorted({0} | {fused_band(d, n // 128, b * h, c) for c in CTAS})
    calls, outs = {}, {}
    for band in bands:
        name = f"band{band}"
        print(f"D={d} N={n} {name} {kw}: first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[name] = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, True, band=band, **kw)
            outs[name] = [t.clone() for t in calls[name]()]
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"D={d} N={n} {name}: {short_error(exc)}", flush=True)
            calls.pop(name, None)
    ref = outs.get("band0")
    for name in list(calls):
        dq, dk, dv = outs[name]
        same = ref is not None and torch.equal(dk, ref[1]) and torch.equal(dv, ref[2])
        dqd = (dq.float() - ref[0].float()).abs().max().item() if ref is not None else float("nan")
        finite = all(bool(torch.isfinite(t).all()) for t in outs[name])
        print(f"D={d} N={n} {name}: dk / dv bitwise band0 {same}, dq max diff {dqd:.2e}, finite {finite}", flush=True)
        if not (same and finite):
            calls.pop(name)
    # batch 0, head 0 of band 0 against float64
    if ref is not None:
        a = [t[:1, :, :1] for t in (q, k, v)]
        kw64 = dict(softmax_scale=scale, window_right=0)
        truth = reference.attention_grad(dout[:1, :, :1].double(), *(t.double() for t in a), **kw64)
        lowp = reference.attention_grad(dout[:1, :, :1], *a, **kw64)
        ok = all((g[:1, :, :1].double() - t).abs().max() <= 3 * (lp.double() - t).abs().max() + 1e-4
                 for g, t, lp in zip(ref, truth, lowp))
        print(f"D={d} N={n} band0 head 0 against float64: {'ok' if ok else 'WRONG'}", flush=True)
    flops = attention_flops(b, h, n, n, d, True, "bwd")
    tf = timing_rounds(calls, {name: flops for name in calls}, f"D={d} N={n}")
    cells = ratio_cells(tf, "band0")
    print(f"| {d} | {n} | {b} | {str(DTYPE)[6:]} | {cells} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for d, n in CASES:
        try:
            case(d, n)
        except Exception as exc:  # noqa: BLE001
            print(f"D={d} N={n}: {short_error(exc)}", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
