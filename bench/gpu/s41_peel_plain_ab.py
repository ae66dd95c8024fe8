"""Session 41: PEEL_PLAIN on the D = 128 causal one-block forward (bench/wip/gluon-fwd-timeline.patch holds it).

The TIMELINE probe (s41_timeline_probe.py) put the masked peel's softmax at ~1.2 us of exposed time a block (a 1-tile
block's stamps 3 -> 4), against ~1.55 us for a whole steady tile. In every block but a head's first, tile 0 is wholly
visible to both warpgroups' rows, so its softmax needs no mask (713 -> 490 SASS a warp a tile). Prediction: ~0.35
us a block, +1.5-2% at 2k, +0.5-1% at 4k, <= +0.5% at 8k; outputs within the criterion (not bitwise: the plain step
forms s * scale - m in one FMA).
Run: git apply bench/wip/gluon-fwd-timeline.patch && PYTHONPATH=src python bench/gpu/s41_peel_plain_ab.py
"""
import torch

from flashtriton.bench.common import attention_flops, head0_fwd_check, ratio_cells, timing_rounds
from flashtriton.launchers import forward_gluon


def main():
    torch.manual_seed(0)
    for dtype in (torch.bfloat16,):
        for n in (2048, 4096, 8192):
            b, h, d = 16384 // n, 16, 128
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(3))
            calls = {}
            for name, pp in (("base", False), ("peel_plain", True)):
                o = torch.empty_like(q)
                lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
                calls[name] = forward_gluon._launch_into(q, k, v, o, lse, d ** -0.5, 128, 128, 3, False, causal=True,
                                                         peel_plain=pp)
                o, lse = calls[name]()
                ok, text = head0_fwd_check(q, k, v, o, lse, softmax_scale=d ** -0.5, window_left=-1, window_right=0)
                print(f"N={n} {name}: {text}", flush=True)
            flops = {name: attention_flops(b, h, n, n, d, True) for name in calls}
            tf = timing_rounds(calls, flops, f"N={n}")
            tf2 = timing_rounds(calls, flops, f"N={n} (again)")
            for name in tf:
                tf[name] += tf2.get(name, [])
            print(f"RESULT N={n} | {ratio_cells(tf, 'base')}", flush=True)
            del q, k, v, calls
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
