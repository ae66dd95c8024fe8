"""Session 21, call 7: why the dropout backward on bwd_ws.py reads ~20% lower at 8k than
at 4k (s21/call5: non-causal 366 -> 295 TFLOP/s; p = 0 does not drop so). Per-kernel GPU
time (torch.profiler, 10 calls) of the backward, non-causal and causal, p = 0 and 0.1, at
4k and 8k (16k tokens, D = 128), with the policy's choice (8k causal dropout: bwd.py) and
with the split forced at 8k causal. Then the dK/dV loop's 1-D loads by descriptors at 8k
(WS_DKDV_DESC_MAX_ROWS raised: the NaN-prone form of session 18, timed here only, 10 calls).

Prediction: the extra time at 8k sits in the dK/dV kernel (its row keys by pointer loads
beyond 4096 query rows, WS_DKDV_DESC_MAX_ROWS), the dQ kernel scaling as at p = 0.

    PYTHONPATH=src python bench/gpu/s21_dropout_profile.py
"""
from bwd_ab import backward_call, kernel_profile, warp_spec
from flashtriton.launchers import backward, plans


def main():
    for n in (4096, 8192):
        for kw in (dict(), dict(dropout_p=0.1), dict(causal=True), dict(causal=True, dropout_p=0.1)):
            b, h, grad = backward_call(128, n, kw)
            plans.clear()
            total, cells = kernel_profile(grad)
            print(f"N={n} {kw}: {total:.0f} us: {cells}", flush=True)
            if n == 8192 and kw.get("dropout_p"):
                if kw.get("causal"):
                    warp_spec("1")
                    total, cells = kernel_profile(grad)
                    print(f"  split forced: {total:.0f} us: {cells}", flush=True)
                    warp_spec(None)
                old = backward.WS_DKDV_DESC_MAX_ROWS
                backward.WS_DKDV_DESC_MAX_ROWS = {128: 1 << 20}
                if kw.get("causal"):
                    warp_spec("1")
                plans.clear()
                total, cells = kernel_profile(grad)
                print(f"  descriptor loads: {total:.0f} us: {cells}", flush=True)
                backward.WS_DKDV_DESC_MAX_ROWS = old
                warp_spec(None)


if __name__ == "__main__":
    main()
