"""Session 14: host time of replayed eager calls, HEAD (bench/gpu/_old/src, untracked copy
of the tree before the change) against the working tree, run by s14c.sh in alternating
processes. The change: replays launch through Triton's C launcher directly
(plans._DirectLaunch) and decode steps reuse per-stream workspaces for the split partials
and an unrequested lse (launchers/decode.py).

Prediction (written before the run, from bench/gpu/s14_decode_prof.py's cProfile: ~20% of
a replayed decode step in Triton's Python launcher and descriptor objects, 3 of its 4
torch.empty calls ~5 us each): decode B = 1, L = 8k host 111-121 -> ~75-90 us; a prefill
forward -10-15 us; forward+backward -20-30 us (about five launches).

Host time per call with the GPU held busy (torch.cuda._sleep), 3 x 100 calls, min of
the medians; then the decode bench's eager metric (read flush before each call).
"""
import os
import sys
import time

import torch

import flashtriton
from flashtriton.bench import decode as bd
from flashtriton.bench.common import time_ms


def host_us(fn, calls=100):
    # (bench.common.host_us with reps=3, written out here: this script also runs against
    # older trees, whose bench.common lacks it)
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(3):
        torch.cuda._sleep(300_000_000)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        best.append((t1 - t0) / calls * 1e6)
    return min(best)


def _host_desc_rows(fwd):
    """The forward with host-made descriptors forced (FLASHTRITON_HOST_DESCRIPTORS=1; the
    default keeps in-kernel ones below 1e11 FLOPs for their host cost): host time, and
    eager / graph time (do_bench), against the default."""
    from flashtriton.bench.common import graph_time_ms
    rows = []
    for flag in ("auto", "1"):
        os.environ["FLASHTRITON_HOST_DESCRIPTORS"] = flag
        rows += [(f"fwd 1k desc={flag} host", host_us(fwd)),
                 (f"fwd 1k desc={flag} eager", time_ms(fwd, "cuda") * 1e3),
                 (f"fwd 1k desc={flag} graph", graph_time_ms(fwd) * 1e3)]
    os.environ.pop("FLASHTRITON_HOST_DESCRIPTORS")
    return rows


def main():
    tag = sys.argv[1]
    d8 = bd.make_inputs(1, 8192, "cuda")
    d128 = bd.make_inputs(1, 131072, "cuda")
    q, k, v = (torch.randn(1, 1024, 16, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)

    def fwd():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, causal=True)

    def fwd_bwd():
        out = flashtriton.flash_attn_func(q, k, v, causal=True)
        out.backward(dout)

    rows = [("decode B=1 8k host", host_us(lambda: bd.ours(d8))),
            ("prefill fwd 1k host", host_us(fwd)),
            ("prefill fwd+bwd 1k host", host_us(fwd_bwd)),
            *_host_desc_rows(fwd),
            ("decode B=1 8k eager(read flush)", time_ms(lambda: bd.ours(d8), "cuda", flush="read") * 1e3),
            ("decode B=1 128k eager(read flush)", time_ms(lambda: bd.ours(d128), "cuda", flush="read") * 1e3)]
    print(f"[{tag}] " + "  ".join(f"{name} {us:.1f}" for name, us in rows), flush=True)


if __name__ == "__main__":
    main()
