"""Session 21, call 8: the dropout dK/dV loop's pointer loads at 8k (D = 128, 16k tokens).

Why: s21/call7's profile put the dropout dK/dV kernel at 6343 us at 8k non-causal against
3592 without dropout (+77%; +28% at 4k, where the loop's 1-D loads are descriptors), 4448
with descriptors (NaN-prone there, session 18). Offline sm_90a (bytes spilled a thread):
dropout VEC_PTR 2 (today's non-causal) 1476, 2 + RK_AHEAD 1220, 1 756, 1 + RK_AHEAD 908;
masked (split) 1 708, 1 + RK_AHEAD 980; descriptors 300; p = 0 with pointers 68. So the
spill, more than the load's latency, is the first suspect.

Variants (launchers.backward.WS_DKDV_VEC_PTR_KIND, WS_DKDV_RK_AHEAD), two rounds, gradients
against the first variant's (all should be bitwise equal): non-causal p = 0.1 at 8k
(whole call): kind 2 (today), 2 + ahead, 1, 1 + ahead; causal p = 0.1 at 8k with the split
forced: kind 1 (today's), 1 + ahead, 2, 2 + ahead (bwd.py, the policy's choice there, for
reference).
Prediction: kind 1 at least +10% over kind 2 non-causal (half the spill); RK_AHEAD +0-10%.

    PYTHONPATH=src python bench/gpu/s21_rk_ahead_ab.py

Result (s21/call8): not taken, and RK_AHEAD removed; this script ran at commit ba060ea
(the switch exists there only). bench/NOTES.md, "Session 21", calls 7-8.
"""
from bwd_ab import alternate, backward_call, row, tflops, warp_spec
from flashtriton.launchers import backward, plans

VARIANTS = {"k2": (2, False), "k2-ahead": (2, True), "k1": (1, False), "k1-ahead": (1, True)}


def use(name, ws):
    if name == "bwd.py":
        warp_spec(None)
        return
    backward.WS_DKDV_VEC_PTR_KIND, backward.WS_DKDV_RK_AHEAD = VARIANTS[name]
    warp_spec(ws)
    plans.clear()


def main(device="cuda"):
    n = 8192
    for kw, names, ws in [(dict(dropout_p=0.1), ["k2", "k2-ahead", "k1", "k1-ahead"], None),
                          (dict(causal=True, dropout_p=0.1), ["k1", "k1-ahead", "k2", "k2-ahead", "bwd.py"], "1")]:
        b, h, grad = backward_call(128, n, kw, device)
        res, notes = alternate(grad, names, lambda name: use(name, ws), tflops(b, h, n, 128, kw.get("causal", False)),
                               device)
        print(row(f"D=128 N={n} {kw} backward TFLOP/s", names, res, notes), flush=True)
    backward.WS_DKDV_VEC_PTR_KIND, backward.WS_DKDV_RK_AHEAD = None, False
    warp_spec(None)


if __name__ == "__main__":
    main()
