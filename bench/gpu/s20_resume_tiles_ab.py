"""Prepared in session 19 for session 20: the split
path's resumed launches (bwd.py RESUME: the causal backward's masked rest after bwd_ws.py)
on smaller tiles (launchers.backward.RESUME_TILES) and in the query-rows dK/dV layout
(RESUME_QUERY_ROWS).

Why: at causal D = 128, N = 16k the resumed launches took 387 + 230 of 6752 us (9%, s19
profile) for ~3% of the tiles. Offline sm_90a (bench/resume_compile.py): today's resumed
dK/dV tile (64 x 128, 8 warps, key rows) spills 2332 bytes a thread at 255 registers; 64 x
64 with 4 warps in query rows 328, 64 x 32 188; the resumed dQ (128 x 64, 8 warps, 3
stages) 0 bytes, 64 x 64 with 4 warps 0 bytes at less shared memory (97 against 161 KB:
two programs an SM). D = 64: 2560 bytes today, (128, 64) query rows 580, (128, 32) 160.

Variants (backward alone, autograd.grad of a fixed forward, time_ms median, plans cleared;
two rounds in alternating order; gradients compared with the default's, NaN counted):
  default        the bulk's tiles, 8 warps, key rows
  kr64           dK/dV (64, 64, 4, 2) key rows, dQ (64, 64, 4, 2)
  qr64           dK/dV (64, 64, 4, 2) query rows, dQ (64, 64, 4, 2)
  qr32           dK/dV (64, 32, 4, 2) query rows, dQ (64, 64, 4, 2)
D = 64 (bulk 128 x 128 both): default, qr64 = dK/dV (128, 64, 4, 2) query rows + dQ (64, 128,
4, 2), kr64 the same in key rows, qr32 dK/dV (128, 32, 4, 2) query rows.
Cases: D = 128 causal at 2k / 4k / 8k / 16k (16k tokens, H = 16; the split path runs from
2k), D = 64 causal at 8k / 16k (H = 32; split from 8k).

Also window (1024, 0) at 16k: bwd.py (the default) against the split path forced
(FLASHTRITON_WARP_SPEC=1) with today's and the smaller resumed tiles; ms.

Prediction: the resumed share halves: D = 128 causal backward +4-6% at 16k, +6-10% at 8k,
+8-15% at 2k / 4k (404 -> ~425, 352 -> ~380, 261 / 335 -> ~290 / ~365 TFLOP/s); qr64 or
qr32 best (spills), kr64 in between; D = 64 +3-6%. Window: the split with small resumed
tiles ~1.45-1.55 ms, still behind bwd.py's 1.29 (the bulk's short loops, not only the
resumed edges, cost it).

    PYTHONPATH=src python bench/gpu/s20_resume_tiles_ab.py
"""
import os

SMOKE = os.environ.get("S20_SMOKE") == "1"     # CPU dry run under the interpreter (tiny shapes, 32 x 32 bulk)
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["FLASHTRITON_WARP_SPEC"] = "1"
    os.environ["FLASHTRITON_BACKEND"] = "triton"   # CPU tensors would take the CPU backend

import torch  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.bench.common import attention_flops, time_ms  # noqa: E402
from flashtriton.kernels.configs import Tile  # noqa: E402
from flashtriton.launchers import backward, plans  # noqa: E402

VARIANTS = {
    128: {"default": ({}, set()),
          "kr64": ({128: (Tile(64, 64, 4, 2), Tile(64, 64, 4, 2))}, set()),
          "qr64": ({128: (Tile(64, 64, 4, 2), Tile(64, 64, 4, 2))}, {128}),
          "qr32": ({128: (Tile(64, 32, 4, 2), Tile(64, 64, 4, 2))}, {128})},
    64: {"default": ({}, set()),
         "kr64": ({64: (Tile(128, 64, 4, 2), Tile(64, 128, 4, 2))}, set()),
         "qr64": ({64: (Tile(128, 64, 4, 2), Tile(64, 128, 4, 2))}, {64}),
         "qr32": ({64: (Tile(128, 32, 4, 2), Tile(64, 128, 4, 2))}, {64})},
}
CASES = [(128, 2048), (128, 4096), (128, 8192), (128, 16384), (64, 8192), (64, 16384)]
DEVICE = "cuda"
if SMOKE:
    VARIANTS = {128: {"default": ({}, set(), "1"), "qr": ({128: (Tile(32, 16, 4, 1), Tile(16, 32, 4, 1))}, {128}, "1")}}
    CASES, DEVICE = [(128, 96)], "cpu"


def use(d, name, variants=None):
    tiles, rows = (variants or VARIANTS[d])[name][:2]
    backward.RESUME_TILES, backward.RESUME_QUERY_ROWS = dict(tiles), set(rows)
    plans.clear()


def ab(d, n, kw, variants, label):
    """Backward alone under each variant (two rounds, alternating order); TFLOP/s for
    causal cases, ms for windows. A variant's third item, when present, is the value of
    FLASHTRITON_WARP_SPEC it runs under ("1": the split path forced)."""
    b, h = (1, 2) if SMOKE else (16384 // n, 2048 // d)
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device=DEVICE, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v, **kw)
    dout = torch.randn_like(out)

    def grad():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    names = list(variants)
    res, ref, notes = {}, None, {}
    for rnd in range(2):
        for name in (names if rnd == 0 else names[::-1]):
            use(d, name, variants)
            ws = variants[name][2] if len(variants[name]) > 2 else None
            if ws is None:
                os.environ.pop("FLASHTRITON_WARP_SPEC", None)
            else:
                os.environ["FLASHTRITON_WARP_SPEC"] = ws
            try:
                g = grad()
                nan = sum(int(x.isnan().sum()) for x in g)
                if ref is None:
                    ref = g
                err = max(((x.float() - y.float()).abs().max() / y.float().abs().max()).item() for x, y in zip(g, ref))
                notes[name] = f"err {err:.1e}, NaN {nan}"
                ms = time_ms(grad, DEVICE)
                res.setdefault(name, []).append(attention_flops(b, h, n, n, d, True, "bwd") / ms / 1e9
                                                if kw.get("causal") else ms)
            except Exception as exc:  # a tile that does not fit: reported
                notes[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
    fmt = "{:.0f}" if kw.get("causal") else "{:.3f}"
    cells = "  ".join(f"{nm} " + " / ".join(fmt.format(x) for x in res.get(nm, [])) + f" ({notes[nm]})" for nm in names)
    print(f"D={d} N={n} {label}: {cells}", flush=True)
    os.environ.pop("FLASHTRITON_WARP_SPEC", None)


# Window (1024, 0) at 16k (issue 3: backward 0.61x causal's TFLOP/s on bwd.py, the default;
# the split path measured 1.71 ms against bwd.py's 1.29 in session 19, call 1): is the
# split with cheaper resumed launches faster than bwd.py? ms, lower is better.
WINDOW = {"bwd.py": ({}, set()),
          "split": ({}, set(), "1"),
          "split-qr64": ({128: (Tile(64, 64, 4, 2), Tile(64, 64, 4, 2))}, {128}, "1"),
          "split-qr32": ({128: (Tile(64, 32, 4, 2), Tile(64, 64, 4, 2))}, {128}, "1")}


def main():
    for d, n in CASES:
        ab(d, n, dict(causal=True), VARIANTS[d], "causal backward TFLOP/s")
    if not SMOKE:
        ab(128, 16384, dict(window_size=(1024, 0)), WINDOW, "window (1024, 0) backward ms")
    use(128, "default")


if __name__ == "__main__":
    main()
