"""Session 42: O_STAGE - O through the last tile's K stage, Q freed before the last P V (PERSISTENT forward).

The TIMELINE probe (s42_timeline_probe.py) found the persistent kernels' consumers waiting 1.2 us (causal, O through
Q's buffer: the next Q loads only after both O stores) or 0.9 us (window, EARLY_Q: O by 34 STG a thread, which
also doubles the block-to-block gap to 0.83 us) for the next block's Q, of ~17 us a 9-16-tile block. A second Q
buffer needs 2 ring stages (measured 18-24% slower, s42_stages_ab.py). O_STAGE: each consumer frees Q right after
its tile loops (q_free, before the last P V), the loader issues the next block's first 2 K / V tiles and then Q,
and O leaves by TMA from the last tile's K buffer (both consumers' last S read it: each waits q_free's phase first)
before that stage goes back to the loader. Prediction: Q wait 1.2 -> ~0.2 us, gap ~0.4 us; causal 2k persistent
+4-6% (and ahead of the one-block kernel by ~5%), window +3-5% over EARLY_Q (0.74 -> ~0.77x causal), plain
persistent 2k +3-5%, long causal blocks (16k) +1%. Outputs must be bitwise the kernels' without it.

Run: git apply bench/wip/gluon-fwd-timeline.patch (and the O_STAGE change) && PYTHONPATH=src python
bench/gpu/s42_o_stage_ab.py
"""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashtriton.launchers import forward_gluon
from s42_timing import kernel_ms


def run_case(name, b, n, h, d, dtype, flops, variants, causal_sdpa=None):
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(3))
    runs, outs = {}, {}
    for vname, kw in variants.items():
        o = torch.full_like(q, float("nan"))
        lse = torch.full((b, h, n), float("nan"), device="cuda", dtype=torch.float32)
        runs[vname] = forward_gluon._launch_into(q, k, v, o, lse, d ** -0.5, 128, 128, 3, False, **kw)
        outs[vname] = (o, lse)
    if causal_sdpa is not None:
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal_sdpa)
        runs["cudnn"] = cudnn
    res = {x: [] for x in runs}
    for _ in range(3):
        for vname, fn in runs.items():
            res[vname].append(flops / kernel_ms(fn) / 1e9)
    for vname in variants:
        runs[vname]()
    torch.cuda.synchronize()
    base = next(iter(variants))
    line = [f"{name} ({str(dtype)[6:]}):"]
    for vname, xs in res.items():
        same = ""
        if vname in outs:
            same = " bitwise" if (torch.equal(outs[vname][0], outs[base][0])
                                  and torch.equal(outs[vname][1], outs[base][1])) else " DIFFERENT"
        line.append(f"  {vname:28s} {' / '.join(f'{x:.0f}' for x in xs)} (best {max(xs):.0f}, "
                    f"{max(xs) / max(res[base]):.3f}x {base}){same}")
    print("\n".join(line), flush=True)
    return outs[base]


def check(b, n, h, d, dtype):
    """O_STAGE against float32 math on one shape (the bitwise comparisons above cover the rest)."""
    torch.manual_seed(1)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(3))
    for kw in (dict(causal=True), dict(window=(256, 0), lean_mask=True), dict()):
        o = torch.full_like(q, float("nan"))
        lse = torch.full((b, h, n), float("nan"), device="cuda", dtype=torch.float32)
        forward_gluon._launch_into(q, k, v, o, lse, d ** -0.5, 128, 128, 3, False, persistent=True, o_stage=True,
                                   **kw)()
        qf, kf, vf = (x.float().transpose(1, 2) for x in (q, k, v))
        s = qf @ kf.transpose(-1, -2) * d ** -0.5
        i = torch.arange(n, device="cuda")
        if "causal" in kw or "window" in kw:
            hide = i[None, :] > i[:, None]
            if "window" in kw:
                hide |= i[None, :] < i[:, None] - kw["window"][0]
            s = s.masked_fill(hide, float("-inf"))
        ref = (s.softmax(-1) @ vf).transpose(1, 2)
        err = (o.float() - ref).abs().max().item()
        lerr = (lse - s.logsumexp(-1)).abs().max().item()
        print(f"check {kw}: max |O - ref| {err:.2e}, max |lse - ref| {lerr:.2e}", flush=True)
        assert err < 2e-2 and lerr < 1e-3


def library(q, k, v, causal):
    from flashtriton import flash_attn_func
    return lambda: flash_attn_func(q, k, v, causal=causal)


def route_cases():
    """Call 4: the lengths around the first measurement, to set policy.GLUON_FWD_O_STAGE's ranges. "library" is
    the route before this session (fwd_ws.py / the one-block kernel / the 3-consumer kernel, per the tables)."""
    from flashtriton.launchers import plans, policy
    policy.GLUON_FWD_O_STAGE = {}           # the route before this session
    plans.clear()
    h = 16
    for d, n, causal in ((128, 1024, True), (128, 2048, True), (128, 4096, True), (64, 2048, True),
                         (64, 4096, True), (128, 1024, False), (128, 4096, False), (64, 2048, False)):
        b = 16384 // n
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, n, h * 128 // d, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        hh = h * 128 // d
        fl = (2 if causal else 4) * b * hh * n * n * d
        runs = {"library (route before)": library(q, k, v, causal)}
        for name, kw in (("persistent O_STAGE", dict(persistent=True, o_stage=True)),
                         ("scheduled O_STAGE", dict(persistent=True, scheduled=True, o_stage=True))):
            if name.startswith("scheduled") and not causal:
                continue
            o = torch.empty_like(q)
            lse = torch.empty(b, hh, n, device="cuda", dtype=torch.float32)
            runs[name] = forward_gluon._launch_into(q, k, v, o, lse, d ** -0.5, 128, 128, 3, False, causal=causal,
                                                    **kw)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def cudnn(qt=qt, kt=kt, vt=vt, causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        runs["cudnn"] = cudnn
        res = {x: [] for x in runs}
        for _ in range(3):
            for name, fn in runs.items():
                res[name].append(fl / kernel_ms(fn) / 1e9)
        print(f"D={d} N={n} {'causal' if causal else 'plain'} (bf16, H={hh}, B={b}):")
        for name, xs in res.items():
            print(f"  {name:24s} {' / '.join(f'{x:.0f}' for x in xs)} (best {max(xs):.0f}, "
                  f"{max(xs) / max(res['cudnn']):.3f}x cuDNN)", flush=True)
    n, b, w = 4096, 4, 1024
    band = sum(min(i, w) + 1 for i in range(n))
    run_case("window (1024, 0) 4k", b, n, 16, 128, torch.bfloat16, 4 * b * 16 * band * 128, {
        "persistent EARLY_Q LEAN (routed)": dict(window=(w, 0), persistent=True, early_q=True, lean_mask=True),
        "persistent LEAN O_STAGE": dict(window=(w, 0), persistent=True, lean_mask=True, o_stage=True),
    })


def main():
    d, h = 128, 16
    if "route" in sys.argv:
        route_cases()
        return
    check(2, 1024, 4, d, torch.bfloat16)
    only = sys.argv[1:]
    for dtype in (torch.bfloat16, torch.float16):
        for n in (2048, 4096, 16384):
            if only and "causal" not in only:
                break
            b = 16384 // n
            fl = 2 * b * h * n * n * d
            run_case(f"causal {n}", b, n, h, d, dtype, fl, {
                "one block (routed)": dict(causal=True),
                "persistent": dict(causal=True, persistent=True),
                "persistent O_STAGE": dict(causal=True, persistent=True, o_stage=True),
                "scheduled O_STAGE": dict(causal=True, persistent=True, scheduled=True, o_stage=True),
            }, causal_sdpa=True)
        if dtype == torch.float16:
            break
        n, b, w = 16384, 1, 1024
        band = sum(min(i, w) + 1 for i in range(n))
        run_case("window (1024, 0) 16k", b, n, h, d, dtype, 4 * h * band * d, {
            "persistent EARLY_Q LEAN (routed)": dict(window=(w, 0), persistent=True, early_q=True, lean_mask=True),
            "persistent LEAN O_STAGE": dict(window=(w, 0), persistent=True, lean_mask=True, o_stage=True),
            "persistent LEAN": dict(window=(w, 0), persistent=True, lean_mask=True),
        })
        for n in (2048, 8192):
            b = 16384 // n
            run_case(f"plain {n}", b, n, h, d, dtype, 4 * b * h * n * n * d, {
                "persistent (routed)": dict(persistent=True),
                "persistent O_STAGE": dict(persistent=True, o_stage=True),
            }, causal_sdpa=False)


if __name__ == "__main__":
    main()
