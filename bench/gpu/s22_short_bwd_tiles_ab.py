"""Session 22: the short causal backward's bwd.py tiles now that D = 128 takes host-made
descriptors (launchers.common.host_desc_default) - the rows still behind FA2's CUDA kernels
(grid, call 6): D = 128 causal 512 (153 against 155 TFLOP/s), D = 64 causal 512 / 1k (125 /
182 against 138 / 184). Variants: a "dq_short_masked" / "dkdv_short_masked" entry
(configs.default_table: masked calls up to SHORT_SEQLEN) against today's tiles (dQ (128,
64, 8, 3) both; dK/dV (64, 64, 4, 2) at D = 128, dkdv_masked (64, 64, 4, 3) at D = 64).
Eager backward TFLOP/s, two rounds (bwd_ab.alternate).
Prediction: the window's lesson (dQ (64, 64, 4, 2) -5% time there) carries over: +2-6%.
"""
from bwd_ab import alternate, backward_call, row, tflops

from flashtriton.kernels import configs
from flashtriton.launchers import plans

T = configs.Tile
VARIANTS = {"today": {}, "dq 64x64": {"dq": T(64, 64, 4, 2)}, "dq 64x32": {"dq": T(64, 32, 4, 3)},
            "dq 128x32": {"dq": T(128, 32, 8, 3)}, "dkdv 64x128": {"dkdv": T(64, 128, 8, 2)},
            "dkdv 32x64": {"dkdv": T(32, 64, 4, 3)}}


def use_for(d):
    def use(name):
        for kernel in ("dq", "dkdv"):
            table = configs.DEFAULTS.setdefault(kernel + "_short_masked", {})
            table.pop(d, None)
            if kernel in VARIANTS[name]:
                table[d] = VARIANTS[name][kernel]
        plans.clear()
    return use


def main():
    names = list(VARIANTS)
    for d, n in [(128, 512), (64, 512), (64, 1024)]:
        b, h, grad = backward_call(d, n, dict(causal=True))
        try:
            res, notes = alternate(grad, names, use_for(d), tflops(b, h, n, d))
            print(row(f"D={d} N={n} causal", names, res, notes), flush=True)
        except Exception as exc:  # noqa: BLE001  (a tile that does not fit: the case is reported, not fatal)
            print(f"D={d} N={n}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
        use_for(d)("today")


if __name__ == "__main__":
    main()
