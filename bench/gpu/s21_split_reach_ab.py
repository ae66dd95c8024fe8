"""Session 21: where the split backward pays now that its resumed launches run in one
loop (launchers.backward.RESUME_ONE_LOOP) and bwd.py's own path folds the delta
preprocess into its dQ kernel (BWD_FUSED_DELTA): the two cases next to the policy's
edges (policy.BWD_SPLIT_PERSISTENT_MIN_N: D = 128 from 1k, D = 64 from 4k).

Variants (as s20_split_short_ab.py): bwd.py (the policy's choice there) and split (forced,
FLASHTRITON_WARP_SPEC=1, the resumed launches as by default).
Prediction: D = 128 causal 512: split ~125 against bwd.py ~135 TFLOP/s (stays on bwd.py);
D = 64 causal 2k: level (~225 each).

    PYTHONPATH=src python bench/gpu/s21_split_reach_ab.py
"""
from bwd_ab import alternate, backward_call, row, tflops, warp_spec


def main(device="cuda"):
    names = ["bwd.py", "split"]
    for d, n in [(128, 512), (64, 2048)]:
        b, h, grad = backward_call(d, n, dict(causal=True), device)
        res, notes = alternate(grad, names, lambda name: warp_spec(None if name == "bwd.py" else "1"),
                               tflops(b, h, n, d), device)
        print(row(f"D={d} N={n} causal backward TFLOP/s", names, res, notes), flush=True)
    warp_spec(None)


if __name__ == "__main__":
    main()
