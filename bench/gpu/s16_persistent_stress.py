"""Session 16 (prepared in session 15): stress of the persistent fwd_ws.py. Its producer
re-creates each tile's q / K / V descriptors in the same global-scratch slots, possibly
while the previous tile's last K / V loads are still queued (bench/NOTES.md, Session 15,
"Next GPU session" 4). Every call of the persistent kernel is compared bitwise with one
tile a program on the same inputs, fresh inputs every few calls; run it in several
processes at once (`s16_persistent_stress.py 30 & ...`) so that the GPU is shared.
Prints the count of calls and of mismatches per case; any mismatch is a bug."""
import sys

import torch

import flashtriton
from flashtriton.launchers import forward, plans

CASES = [  # (D, N, kwargs): unmasked, dropout, causal (block-major deal), window; 16k tokens
    (128, 512, {}), (128, 2048, {}), (256, 1024, {}), (128, 2048, dict(dropout_p=0.1)),
    (256, 2048, dict(causal=True)), (256, 16384, dict(causal=True)), (256, 4096, dict(window_size=(1024, 0))),
]


def main(seconds_per_case: float):
    import time
    kinds = set(forward.WS_PERSISTENT)
    for d, n, kw in CASES:
        h, b = (16 if d == 128 else 8), 16384 // n
        calls = bad = 0
        t_end = time.time() + seconds_per_case
        while time.time() < t_end:
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            outs = []
            for persistent in (False, True, True, True):
                forward.WS_PERSISTENT = kinds if persistent else set()
                plans.clear()
                torch.manual_seed(3)
                with torch.no_grad():
                    outs.append(flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2])
            forward.WS_PERSISTENT = kinds
            for o in outs[1:]:
                calls += 1
                bad += not all(torch.equal(x, y) for x, y in zip(o, outs[0]))
        print(f"D={d} N={n} {kw}: {calls} persistent calls, {bad} differ", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]) if sys.argv[1:] else 20.0)
