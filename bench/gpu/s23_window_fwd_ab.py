"""Session 23: the D = 128 sliding-window forward on the persistent fwd_ws.py.

Today a window (a left edge) at D = 128 runs fwd.py (policy.WARP_SPEC_MASKED_FWD["window"]
= {256}): session 9 measured fwd_ws.py one tile a program at 316 against fwd.py's 371 band
TFLOP/s at 16k (s9_window_ws_ab.py). Since session 16 fwd_ws.py's masked launch is
persistent with a head-major deal for windows (launchers.forward.WS_PERSISTENT has (128,
True, False), WS_PERSISTENT_WINDOWS), which lifted causal D = 128 at 16k from fwd.py's 470
to 500 and windowed D = 256 from 452 to 495 (4k / 16k); never measured for D = 128 windows.

Shape as bench.features' window case: (1024, 0), N = 16k, B = 1, H = 16, D = 128, bf16;
also N = 4k, B = 4. Forward ms (eager, plans on, no grad), two rounds in alternating order,
outputs compared. Prediction: fwd_ws.py persistent 0.30 ms against fwd.py's 0.334 at 16k
(band TFLOP/s ~395 -> ~440, i.e. 0.79x -> ~0.88x of our causal forward), 4k level to +10%.

    cd bench/gpu && PYTHONPATH=../../src python s23_window_fwd_ab.py
"""
import torch

import flashtriton
from flashtriton.bench.common import time_ms
from flashtriton.launchers import plans, policy

from fwd_ab import alternate_outputs


def band_flops(b, h, n, d, left):
    """FA2 count over the (query, key) pairs inside the band j in [i - left, i]."""
    pairs = sum(min(i, left) + 1 for i in range(n))
    return 4 * b * h * pairs * d


def use(windows):
    def apply():
        policy.WARP_SPEC_MASKED_FWD["window"] = windows
        plans.clear()
    return apply


def main():
    base = set(policy.WARP_SPEC_MASKED_FWD["window"])
    variants = {"fwd.py": use(base), "fwd_ws persistent": use(base | {128})}
    for b, n in ((1, 16384), (4, 4096)):
        h, d, left = 16, 128, 1024
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        call = lambda: flashtriton.flash_attn_func(q, k, v, window_size=(left, 0))     # noqa: E731
        res, outs = alternate_outputs(variants, call, lambda: time_ms(call, "cuda"))
        ref = outs["fwd.py"]
        flops = band_flops(b, h, n, d, left)
        cells = []
        for name, ms in res.items():
            o = outs[name]
            diff = "bitwise" if torch.equal(o, ref) else f"maxdiff {float((o - ref).abs().max()):.1e}"
            cells.append(f"{name} {' / '.join(f'{x:.3f}' for x in ms)} ms "
                         f"({' / '.join(f'{flops / x / 1e9:.0f}' for x in ms)} band TFLOP/s; {diff}, "
                         f"NaN {bool(o.isnan().any())})")
        print(f"window ({left}, 0) B={b} N={n} H={h} D={d}: " + "  ".join(cells), flush=True)
    use(base)()


if __name__ == "__main__":
    main()
