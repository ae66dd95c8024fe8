"""Session 20, call 6: the split path's resumed tiles by pipelining depth and warps.

Why (s20/call5's profile): for window (1024, 0) at 16k the resumed launches took 328 (dK/dV)
+ 242 (dQ) us for the band's ~22% masked tiles, against the bulk's 553 + 380 for the rest:
~3x the bulk's cost per unit of work. A resumed program does ~3 tiles in two or three
separate loops (no steady state for the pipeliner), so each tile waits out its loads;
with 2 stages, shared memory caps the programs an SM that could hide that latency.

Variants (launchers.backward.RESUME_TILES for D = 128, query rows; dK/dV tile, dQ tile):
  s2   (64, 64, 4, 2) both: the default since call 2
  s1   (64, 64, 4, 1) both: less shared memory, more programs an SM
  s3   (64, 64, 4, 3) both
  w8   (64, 64, 8, 2) both
  s1kv dK/dV (64, 64, 4, 1), dQ (64, 64, 4, 2)
Cases: causal D = 128 at 2k and 16k (the split is the default there; TFLOP/s), window
(1024, 0) at 16k with the split forced (ms; bwd.py's time alongside), two rounds.

Prediction: s1 +0-3% causal (the resumed share is 5-10% of the time), window split
1.55 -> ~1.45 ms (still behind bwd.py's 1.29); w8 and s3 level or slower.

    PYTHONPATH=src python bench/gpu/s20_resume_sweep.py
"""
from bwd_ab import alternate, backward_call, row, tflops, warp_spec
from flashtriton.kernels.configs import Tile
from flashtriton.launchers import backward


def t(s, w=4):
    return Tile(64, 64, w, s)


VARIANTS = {"s2": (t(2), t(2)), "s1": (t(1), t(1)), "s3": (t(3), t(3)), "w8": (t(2, 8), t(2, 8)),
            "s1kv": (t(1), t(2))}


def use(name, ws=None):
    backward.RESUME_TILES = {} if name == "bwd.py" else {128: VARIANTS[name]}
    warp_spec(ws)


def main():
    names = list(VARIANTS)
    for n in (2048, 16384):
        b, h, grad = backward_call(128, n, dict(causal=True))
        res, notes = alternate(grad, names, use, tflops(b, h, n, 128))
        print(row(f"D=128 N={n} causal backward TFLOP/s", names, res, notes), flush=True)
    wnames = ["bwd.py"] + names
    _, _, grad = backward_call(128, 16384, dict(window_size=(1024, 0)))
    res, notes = alternate(grad, wnames, lambda nm: use(nm, None if nm == "bwd.py" else "1"), lambda ms: ms)
    print(row("D=128 N=16384 window (1024, 0) backward ms (split forced)", wnames, res, notes, "{:.3f}"), flush=True)
    use("bwd.py")


if __name__ == "__main__":
    main()
