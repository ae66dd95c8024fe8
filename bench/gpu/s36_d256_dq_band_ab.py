"""Session 36: the D = 256 causal backward's split path with the dQ kernel's BAND launch order
(launchers/backward_gluon_d256.bwd_into(..., split_dq=True, dq_band=b)) against band 0, as WHOLE
backwards (the delta preprocess, the DKDV_ONLY kernel and the dQ kernel), as the route runs them.

    PYTHONPATH=src timeout 300 python bench/gpu/s36_d256_dq_band_ab.py     # S36_CASES=8192:2 to shorten

Cases N:B at H = 8 (the prefill grid's D = 256 shapes, 16k tokens: 4k:4, 8k:2, 16k:1) and 8k:8 (B * H =
64). Bands 0 / 2 / 4 / 8 that divide B * H; dq must be BITWISE band 0's, dk / dv too (the same
kernels); CUDA-graph replays (bench.common.timing_rounds), two rounds, the second reversed.

PREDICTION (before the run). Session 35's dQ-only A/B (s35/callB): band 4 +4-9% of the dQ pass at 4k /
8k, 0.996x / 0.954x at 16k. The dQ pass is ~55% of the causal split backward at 8k (ncu, s35: 5.04 ms
dQ of ~9.1 ms), so the whole backward: band 4 +2-5% at 4k / 8k; at 16k (B * H = 8: two bands) level
to -2%. Routing rule: GLUON_BWD_D256_SPLIT_DQ_BAND["causal"] = the band >= 2% ahead of band 0 in both
rounds at 4k and 8k (B * H >= 4 bands there) and not behind at 8k:8; the policy's B * H >= 4 * band
rule leaves 16k (B * H = 8) on band 0 unless band 2 wins there too.
"""
import os
import time

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (graphs replay the launches anyway)

import torch  # noqa: E402

from flashtriton.bench.common import attention_flops, ratio_cells, short_error, timing_rounds  # noqa: E402
from flashtriton.launchers import backward_gluon, backward_gluon_d256, forward_gluon  # noqa: E402

H, D, DTYPE = 8, 256, torch.bfloat16
CASES = [tuple(int(x) for x in c.split(":")) for c in
         os.environ.get("S36_CASES", "8192:2,4096:4,16384:1,8192:8").split(",")]


def case(n, b):
    torch.manual_seed(n + b)
    q, k, v, dout = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(4))
    scale = D ** -0.5
    out, lse = forward_gluon.prepare(q, k, v, scale, causal=True)()
    bufs = {}

    def call_of(band):
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        bufs[band] = (dq, dk, dv)

        def call():
            delta = backward_gluon.delta_of(out, dout)
            backward_gluon_d256.bwd_into(q, k, v, dout, lse, delta, scale, True, dq, dk, dv, split_dq=True,
                                         dq_band=band)
        return call

    bands = [x for x in (0, 2, 4, 8) if (b * H) % max(x, 1) == 0]
    calls = {}
    for band in bands:
        print(f"N={n} B={b} band{band}: first run {time.strftime('%H:%M:%S')}", flush=True)
        try:
            calls[f"band{band}"] = call_of(band)
            calls[f"band{band}"]()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"N={n} B={b} band{band}: {short_error(exc)}", flush=True)
            calls.pop(f"band{band}", None)
    ref = bufs[0]
    for band in bands[1:]:
        if f"band{band}" not in calls:
            continue
        same = all(torch.equal(a, r) for a, r in zip(bufs[band], ref))
        print(f"N={n} B={b} band{band}: bitwise band0 {same}", flush=True)
        if not same:
            calls.pop(f"band{band}")
    print(f"N={n} B={b} band0 finite {all(bool(torch.isfinite(t).all()) for t in ref)}", flush=True)
    flops = attention_flops(b, H, n, n, D, True, "bwd")
    tf = timing_rounds(calls, {name: flops for name in calls}, f"N={n} B={b}")
    cells = ratio_cells(tf, "band0")
    print(f"| {n} | {b} | {cells} |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for n, b in CASES:
        try:
            case(n, b)
        except Exception as exc:  # noqa: BLE001
            print(f"N={n} B={b}: {short_error(exc)}", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
