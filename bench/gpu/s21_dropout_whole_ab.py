"""Session 21: the non-causal dropout backward, bwd_ws.py's whole call against bwd.py, at
4k / 8k (policy.BWD_WS_DROPOUT_MAX_N = 8k lets bwd_ws.py take both). Why: the split path's
dropout bulk lost to bwd.py at 8k (s21/call4: D = 128 causal 288 -> 226 TFLOP/s) while it
won at 4k; if the whole call also loses at 8k, the cap is too long.
Prediction: whole >= bwd.py at 4k (session 9: 2.046 against 2.271 ms at B = 2), and
level or behind at 8k.

    PYTHONPATH=src python bench/gpu/s21_dropout_whole_ab.py
"""
from bwd_ab import alternate, backward_call, row, tflops
from flashtriton.launchers import plans, policy

VARIANTS = ["bwd_ws", "bwd.py"]


def use(name):
    policy.WARP_SPEC_DROPOUT_BWD = name == "bwd_ws"
    plans.clear()


def main(device="cuda"):
    for d, n in [(128, 4096), (128, 8192)]:
        b, h, grad = backward_call(d, n, dict(dropout_p=0.1), device)
        res, notes = alternate(grad, VARIANTS, use, tflops(b, h, n, d, causal=False), device)
        print(row(f"D={d} N={n} non-causal p=0.1 backward TFLOP/s", VARIANTS, res, notes), flush=True)
    use("bwd_ws")


if __name__ == "__main__":
    main()
