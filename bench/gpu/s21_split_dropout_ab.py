"""Session 21: the causal dropout backward on the split path (policy.BWD_SPLIT_DROPOUT).

Why: causal dropout ran on bwd.py alone while causal p = 0 takes the split (bwd_ws.py's
fully visible tiles, bwd.py's masked rest), so the features bench read causal dropout
forward+backward at 1.29-1.32x the p = 0 time (backward 1.28-1.35x; non-causal, whose
dropout backward is on bwd_ws.py: 1.16-1.25x). Count (D = 128, causal, 4k, p = 0.1,
16k tokens): the split's p = 0 backward is ~0.94 ms against bwd.py's ~1.10 (features
bench, B = 2 H = 16); dropout's extra work in bwd_ws.py is ~16% of its time (non-causal
ratio), in bwd.py ~10%.

Variants (backward alone, two rounds alternating, gradients against bwd.py's, NaN
counted): bwd.py (today), split (one tile a program: the policy then takes it from
BWD_SPLIT_MIN_N = 4k at D = 128), split-persistent (WS_PERSISTENT gains the masked
dropout kinds at D = 128, TILE_STAGES 1: sm_90a compile 168 registers, dK/dV 512 bytes
spilled; the policy then splits from 1k). Then a NaN stress of the split variants (200
calls a case, gradients compared with the first call's bits).

Prediction: D = 128 causal 4k / 8k backward -10-15% time (p = 0.1); 1k / 2k with the
persistent split -0-8%; the features bench's causal dropout ratio 1.31 -> ~1.18-1.20x.

    PYTHONPATH=src python bench/gpu/s21_split_dropout_ab.py
"""
import torch

from bwd_ab import alternate, backward_call, row, tflops
from flashtriton.launchers import backward, plans, policy

PERSISTENT_DROPOUT_MASKED = {("dkdv", 128, True, True), ("dq", 128, True, True)}
BASE_PERSISTENT = set(backward.WS_PERSISTENT)
VARIANTS = ["bwd.py", "split", "split-persistent"]


def use(name):
    policy.BWD_SPLIT_DROPOUT = name != "bwd.py"
    backward.WS_PERSISTENT = BASE_PERSISTENT | (PERSISTENT_DROPOUT_MASKED if name == "split-persistent" else set())
    plans.clear()


def stress(grad, calls=200):
    first = grad()
    bad = 0
    for _ in range(calls):
        g = grad()
        bad += int(any(x.isnan().any() or not torch.equal(x, y) for x, y in zip(g, first)))
    return bad


def main(device="cuda"):
    for d, n in [(128, 1024), (128, 2048), (128, 4096), (128, 8192), (64, 4096), (64, 8192)]:
        kw = dict(causal=True, dropout_p=0.1)
        b, h, grad = backward_call(d, n, kw, device)
        res, notes = alternate(grad, VARIANTS, use, tflops(b, h, n, d), device)
        print(row(f"D={d} N={n} causal p=0.1 backward TFLOP/s", VARIANTS, res, notes), flush=True)
        if d == 128 and n in (4096, 8192) and device == "cuda":
            for name in VARIANTS[1:]:
                use(name)
                print(f"  stress {name}: {stress(grad)} of 200 calls NaN or not bitwise the first", flush=True)
    use("bwd.py")


if __name__ == "__main__":
    main()
