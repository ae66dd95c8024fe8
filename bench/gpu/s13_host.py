"""Session 13: why the eager grid's short rows read far below their graph replays.

D = 64 causal at N = 512 (B = 32, H = 32): eager forward 133 TFLOP/s, graph 234 (cuDNN
255 / 260): ~110 us a call more than the kernel's ~147 us. do_bench queues a 256 MB L2
flush (~60 us of GPU time) before each call, which hides that much host time; so the
forward's host time on that machine must be ~200+ us, against bench.latency's 48-116 us
(inputs without requires_grad). Hypothesis: the autograd path (inputs requiring grad:
the grid's setup) costs the difference.

Host time per call: the GPU is held busy by torch.cuda._sleep, so the timed loop never
waits on it; wall time / calls = host time alone. Then cProfile of the slowest variant.
"""
import cProfile
import pstats
import sys

import torch

import flashtriton
from flashtriton.bench.common import graph_time_ms, host_us, time_ms

CASES = [  # label, B, N, H, D, causal
    ("D64 causal 512", 32, 512, 32, 64, True),
    ("D128 full 512", 32, 512, 16, 128, False),
    ("D128 causal 1k", 16, 1024, 16, 128, True),
]


def main():
    cases = CASES[:1] if "first" in sys.argv[1:] else CASES
    for label, b, n, h, d, causal in cases:
        for rg in (False, True):
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=rg)
                       for _ in range(3))
            dout = torch.randn_like(q)

            def fwd():
                return flashtriton.flash_attn_func(q, k, v, causal=causal)

            def fwd_bwd():
                out = flashtriton.flash_attn_func(q, k, v, causal=causal)
                out.backward(dout)

            line = f"{label:16s} requires_grad={rg!s:5s} fwd host {host_us(fwd, calls=40):7.1f} us"
            if rg:
                line += f"  fwd+bwd host {host_us(fwd_bwd, calls=40):7.1f} us"
            line += f"  fwd eager {time_ms(fwd, 'cuda') * 1e3:7.1f} us  graph {graph_time_ms(fwd) * 1e3:7.1f} us"
            print(line, flush=True)
            if rg and label == CASES[0][0]:
                def fwd_nograd():
                    with torch.no_grad():
                        return flashtriton.flash_attn_func(q, k, v, causal=causal)

                for name, fn in (("forward", fwd), ("forward, no_grad", fwd_nograd),
                                 ("forward+backward", fwd_bwd)):
                    host_us(fn, 5)
                    torch.cuda._sleep(2_000_000_000 // 1000 * 200)
                    prof = cProfile.Profile()
                    prof.enable()
                    for _ in range(20):
                        fn()
                    prof.disable()
                    torch.cuda.synchronize()
                    st = pstats.Stats(prof)
                    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][3])[:40]
                    print(f"--- cProfile, 20 calls of {name} ({label}, requires_grad=True): "
                          "inclusive / own us a call, calls a call ---")
                    for (fname, line, func), (cc, nc, tt, ct, _) in rows:
                        print(f"{ct / 20 * 1e6:8.1f} {tt / 20 * 1e6:8.1f} {nc / 20:6.1f}  "
                              f"{fname.split('site-packages/')[-1].split('/src/')[-1]}:{line}({func})")
                    sys.stdout.flush()
    sys.exit(0)


if __name__ == "__main__":
    main()
