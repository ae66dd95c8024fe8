"""Session 37: the float32 backward's time under config.BWD_KEYS x config.BWD_ROWS_FLOAT32 (cpu/backward.py),
interleaved, on the bench's forward+backward shape (B=1 H=8 D=64; N from argv, default 2048).

    PYTHONPATH=src python bench/cpu/s37_bwd_f32_tiles.py 2048
"""
import sys

import torch

from flashtriton.bench import cpu as bc
from flashtriton.cpu import config

CONFIGS = [(1024, 512), (512, 512), (256, 512), (512, 256), (1024, 256), (2048, 512), (1024, 1024), (256, 256),
           (512, 1024)]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
    q, k, v = (torch.randn(1, n, 8, 64, requires_grad=True) for _ in range(3))
    dout = torch.randn(1, n, 8, 64)
    out = bc._ours(q, k, v)
    saved = config.BWD_KEYS, config.BWD_ROWS_FLOAT32

    def run(keys, rows):
        def f():
            config.BWD_KEYS, config.BWD_ROWS_FLOAT32 = keys, rows
            return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        return f
    try:
        ref = run(*CONFIGS[0])()
        for c in CONFIGS[1:]:   # another tiling sums in another order: float32 rounding only
            diff = max((x - y).abs().max().item() for x, y in zip(run(*c)(), ref))
            assert diff < 1e-5, (c, diff)
        ms = bc.time_interleaved({c: run(*c) for c in CONFIGS}, budget_s=8.0)
    finally:
        config.BWD_KEYS, config.BWD_ROWS_FLOAT32 = saved
    for c, t in ms.items():
        print(c, f"{t:.1f} ms")


if __name__ == "__main__":
    main()
