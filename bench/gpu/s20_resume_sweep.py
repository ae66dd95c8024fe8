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
import os

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.kernels.configs import Tile
from flashtriton.launchers import backward, plans


def t(s, w=4):
    return Tile(64, 64, w, s)


VARIANTS = {"s2": (t(2), t(2)), "s1": (t(1), t(1)), "s3": (t(3), t(3)), "w8": (t(2, 8), t(2, 8)),
            "s1kv": (t(1), t(2))}


def use(name, ws=None):
    backward.RESUME_TILES = {} if name == "bwd.py" else {128: VARIANTS[name]}
    if ws is None:
        os.environ.pop("FLASHTRITON_WARP_SPEC", None)
    else:
        os.environ["FLASHTRITON_WARP_SPEC"] = ws
    plans.clear()


def ab(n, kw, names, ws, label):
    d = 128
    b, h = 16384 // n, 2048 // d
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v, **kw)
    dout = torch.randn_like(out)

    def grad():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    res, ref, notes = {}, None, {}
    for rnd in range(2):
        for name in (names if rnd == 0 else names[::-1]):
            use(name, None if name == "bwd.py" else ws)
            g = grad()
            nan = sum(int(x.isnan().sum()) for x in g)
            ref = g if ref is None else ref
            err = max(((x.float() - y.float()).abs().max() / y.float().abs().max()).item() for x, y in zip(g, ref))
            notes[name] = f"err {err:.1e}, NaN {nan}"
            ms = time_ms(grad, "cuda")
            res.setdefault(name, []).append(attention_flops(b, h, n, n, d, True, "bwd") / ms / 1e9
                                            if kw.get("causal") else ms)
    fmt = "{:.0f}" if kw.get("causal") else "{:.3f}"
    print(f"D={d} N={n} {label}: " + "  ".join(
        f"{nm} " + " / ".join(fmt.format(x) for x in res[nm]) + f" ({notes[nm]})" for nm in names), flush=True)


def main():
    names = list(VARIANTS)
    ab(2048, dict(causal=True), names, None, "causal backward TFLOP/s")
    ab(16384, dict(causal=True), names, None, "causal backward TFLOP/s")
    ab(16384, dict(window_size=(1024, 0)), ["bwd.py"] + names, "1", "window (1024, 0) backward ms (split forced)")
    use("bwd.py")


if __name__ == "__main__":
    main()
