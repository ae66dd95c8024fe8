"""Session 22, call 11 (ran at commit 7b0f13e, as s23_dkdv_parts_ab.py; the PART kernel and
launchers.backward.DKDV_PARTS were reverted after it: it lost 10-40% at D = 256, bench/NOTES.md
"Session 22"): bwd.py's dK/dV as two launches, dV alone then dK
alone (launchers.backward.DKDV_PARTS, the kernel's PART), against the one launch, where
bwd.py runs the whole backward: D = 256 at every length (no warp-specialized backward
there), D = 64 causal and D = 128 causal at 512.

Offline sm_90a (bench/dkdv_parts_compile.py, D = 256, query rows): the one launch spills
1068 B (64 x 32, plus 256 mma.sync for its 32-row dK / dV) to 1352 B (128 x 64); as parts,
(64, 64, 8, 2) spills 0 / 80 B (dV / dK), (128, 64, 8, 1) 0 / 480 B, all wgmma. Apart, the
dK/dV phase computes S = Q K^T twice (5 matmuls instead of 4; the backward 8 instead of 7).
Prediction: D = 256 backward +10-25% at 512-2k (FA2 197 / 225 / 243 non-causal against
our 166 / 202 / 245), less or none from 4k; D = 64 / 128 level or behind (they spill
little as one launch).

    PYTHONPATH=src python bench/gpu/s22_dkdv_parts_ab.py            # on the H200, at 7b0f13e
    TRITON_INTERPRET=1 FLASHTRITON_BACKEND=triton PYTHONPATH=src python bench/gpu/s22_dkdv_parts_ab.py --smoke
"""
import sys

from bwd_ab import alternate, backward_call, row, tflops

from flashtriton.kernels import configs
from flashtriton.launchers import backward, plans

T = configs.Tile
VARIANTS = {"one launch": None, "parts 64x64x8": T(64, 64, 8, 2), "parts 128x64x8": T(128, 64, 8, 1),
            "parts 64x32x4": T(64, 32, 4, 2)}


def use_for(d):
    def use(name):
        backward.DKDV_PARTS = {} if VARIANTS[name] is None else {d: VARIANTS[name]}
        plans.clear()
    return use


def main(device="cuda", quick=False):
    names = list(VARIANTS)
    cases = [(256, n, c) for c in (False, True) for n in (512, 1024, 2048, 4096, 16384)]
    cases += [(128, 512, True), (64, 512, True), (64, 1024, True)]
    if device != "cuda":
        cases = cases[:1] + cases[5:6]
    elif quick:                 # session 22's last device seconds: D = 256 up to 2k
        cases = [(256, n, c) for c in (False, True) for n in (512, 1024, 2048)]
    for d, n, causal in cases:
        if device != "cuda":
            n = 64
        b, h, grad = backward_call(d, n, dict(causal=causal), device)
        res, notes = alternate(grad, names, use_for(d), tflops(b, h, n, d, causal), device)
        print(row(f"D={d} N={n} {'causal' if causal else 'plain'} backward TFLOP/s", names, res, notes), flush=True)
    backward.DKDV_PARTS = {}


if __name__ == "__main__":
    main("cpu" if "--smoke" in sys.argv[1:] else "cuda", quick="--quick" in sys.argv[1:])
