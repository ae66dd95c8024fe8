"""Session 16: the persistent fwd_ws.py's repeatability in ONE process (no other load),
old kernel (descriptors made per tile, bench/gpu/s16_old_fwd_ws.py) against the new one
(descriptors made once over (B * N, H-span)). Each persistent call is compared bitwise with
one tile a program; for a differing call, the rows that differ and the largest difference
are printed (a whole wrong tile reads ~1; a rounding difference ~1e-2). Decides whether a
single-process GPU test can catch the race."""
import sys

import torch

import flashtriton
from flashtriton.launchers import forward, plans

sys.path.insert(0, "bench/gpu")
import s16_old_fwd_ws  # noqa: E402

NEW = forward.attn_fwd_ws_kernel
CASES = [(128, 2048, {}), (256, 16384, dict(causal=True)), (128, 2048, dict(dropout_p=0.1))]


def run(calls):
    kinds = set(forward.WS_PERSISTENT)
    for name, kern in (("old", s16_old_fwd_ws.attn_fwd_ws_kernel), ("new", NEW)):
        forward.attn_fwd_ws_kernel = kern
        for d, n, kw in CASES:
            h, b = (16 if d == 128 else 8), 16384 // n
            bad = 0
            detail = []
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            forward.WS_PERSISTENT = set()
            plans.clear()
            torch.manual_seed(3)
            with torch.no_grad():
                want = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]
            forward.WS_PERSISTENT = kinds
            plans.clear()
            for i in range(calls):
                torch.manual_seed(3)
                with torch.no_grad():
                    got = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]
                if not all(torch.equal(x, y) for x, y in zip(got, want)):
                    bad += 1
                    if len(detail) < 3:
                        diff = (got[0].float() - want[0].float()).abs()
                        rows = (diff.amax(-1) > 0).nonzero()
                        detail.append(f"max {diff.max().item():.3g}, {rows.shape[0]} (b, n, h) rows differ, "
                                      f"first {rows[:2].tolist()}, lse max diff "
                                      f"{(got[1] - want[1]).abs().max().item():.3g}")
            print(f"{name} D={d} N={n} {kw}: {bad} of {calls} differ", *detail, sep="\n   ", flush=True)
    forward.attn_fwd_ws_kernel = NEW


if __name__ == "__main__":
    run(int(sys.argv[1]) if sys.argv[1:] else 40)
