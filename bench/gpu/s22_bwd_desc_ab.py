"""Session 22: host-made descriptors in the short backward (launchers.common.host_desc_default:
dQ at D = 128 up to 4k, dK/dV at D = 64 causal; the rest makes 4-6 descriptors per program
in the kernel). Session 5 measured them eagerly at N >= 1k, before launch plans, when each
cost ~11 us of host time: dK/dV -13 to -22% at D = 128, dQ at D = 64 -6 to -8%. Calls 1-2
here found the forward's in-kernel descriptors cost short eager calls 40-110 us of GPU time.

Cases: the grid's backward rows behind FA2 (D = 128 causal 512, D = 64 causal 512 / 1k,
D = 256 512 / 1k / 2k causal and not); variants FLASHTRITON_HOST_DESCRIPTORS = auto (today),
1 (all), fwd,dkdv, fwd,dq. Eager backward TFLOP/s (the grid's timing), two rounds.
Prediction: host-made dK/dV +5-15% at 512 (4096 programs a kernel, each paying its
descriptors' ~1-2 us), less at 1k, level or behind from 2k; dQ likewise.
"""
import os

from bwd_ab import alternate, backward_call, row, tflops

from flashtriton.launchers import plans

VARIANTS = {"auto": None, "all": "1", "+dkdv": "fwd,dkdv", "+dq": "fwd,dq"}
# call 5: D = 128's dK/dV (bwd.py, and the split path's resumed launches) beyond 1k, where
# dQ takes host descriptors only up to 4k (auto)
VARIANTS5 = {"auto": None, "all": "1", "+dkdv": "fwd,dkdv"}


def use(name):
    flag = VARIANTS[name]
    if flag is None:
        os.environ.pop("FLASHTRITON_HOST_DESCRIPTORS", None)
    else:
        os.environ["FLASHTRITON_HOST_DESCRIPTORS"] = flag
    plans.clear()


def main5():
    """Call 5 (after call 4 found D = 128 causal 512 / 1k +13% / +9% with every kernel's
    descriptors host-made, D = 64 and 256 behind): D = 128 at longer and other calls.
    Prediction: the causal split path's resumed launches gain at 2k-4k (+3-8%), less at
    8k / 16k; the window backward (bwd.py whole) level or behind at 16k (session 5: dK/dV
    host-made lost 13-22% at 4k-16k); causal dropout at 512 (bwd.py) as p = 0 (+10%)."""
    VARIANTS.clear()
    VARIANTS.update(VARIANTS5)
    names = list(VARIANTS)
    for n, kw in [(2048, dict(causal=True)), (4096, dict(causal=True)), (8192, dict(causal=True)),
                  (16384, dict(causal=True)), (512, dict()), (16384, dict(causal=True, window_size=(1024, 0))),
                  (512, dict(causal=True, dropout_p=0.1)), (2048, dict(causal=True, dropout_p=0.1))]:
        b, h, grad = backward_call(128, n, kw)
        res, notes = alternate(grad, names, use, tflops(b, h, n, 128, kw.get("causal", False)))
        print(row(f"D=128 N={n} {kw}", names, res, notes), flush=True)
    use("auto")


def main6():
    """Call 9: D = 64 causal short backward (behind FA2 at 512: 125 against 138) with its
    dK/dV descriptors made in the kernel too (auto makes them on the host at D = 64
    causal, session 5: +4-11% at 1k-16k then, measured eagerly before launch plans).
    Prediction: level (+-3%)."""
    VARIANTS.clear()
    VARIANTS.update({"auto": None, "in-kernel": "fwd"})
    names = list(VARIANTS)
    for n in (512, 1024, 2048):
        b, h, grad = backward_call(64, n, dict(causal=True))
        res, notes = alternate(grad, names, use, tflops(b, h, n, 64, True))
        print(row(f"D=64 N={n} causal", names, res, notes), flush=True)
    use("auto")


def main():
    names = list(VARIANTS)
    for d, n, causal in [(128, 512, True), (128, 1024, True), (64, 512, True), (64, 1024, True), (64, 2048, True),
                         (256, 512, False), (256, 1024, False), (256, 2048, False),
                         (256, 512, True), (256, 1024, True), (256, 2048, True)]:
        b, h, grad = backward_call(d, n, dict(causal=causal))
        res, notes = alternate(grad, names, use, tflops(b, h, n, d, causal))
        print(row(f"D={d} N={n} {'causal' if causal else 'plain'}", names, res, notes), flush=True)
    use("auto")


if __name__ == "__main__":
    import sys
    {"5": main5, "6": main6}.get((sys.argv[1:] or [""])[0], main)()
