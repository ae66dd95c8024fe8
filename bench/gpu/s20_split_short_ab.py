"""Session 20, call 3: with the split path's resumed launches now on halved tiles in
query rows (launchers.backward.RESUME_HALVED / RESUME_QUERY_ROWS, +7% at D = 128 causal
2k), does the split path pay at shorter causal sequences, and at D = 64?

Variants (backward alone, as s20_resume_tiles_ab.py: autograd.grad of a fixed forward,
time_ms median, plans cleared, two rounds in alternating order, gradients against the
first variant's, NaN counted):
  bwd.py        the default policy where it does not take the split (D = 128 below 2k,
                D = 64 below 8k)
  split-bulk    the split forced (FLASHTRITON_WARP_SPEC=1), resumed on the bulk's tiles
                (8 warps, key rows: the session-19 default)
  split-halved  the split forced, resumed on halved tiles in query rows
  split-kr      the split forced, halved tiles in key rows
Cases: D = 128 causal 512 / 1k (BWD_SPLIT_PERSISTENT_MIN_N[128] = 2k: at 1k the split
measured 176 against bwd.py's 192 TFLOP/s with the bulk's resumed tiles, s17); D = 64
causal 2k / 4k / 8k / 16k (split from 8k by default; s20 call 1 at 8k / 16k: halved
+3% at 8k, 16k noisy).

Prediction: D = 128 1k split-halved ~190-200 (the resumed launches are a larger share at
1k than at 2k, where halving gave +8%): level with bwd.py at best; 512 below bwd.py. D = 64:
halved +2-4% at 8k / 16k, the split still behind bwd.py at 2k, level at 4k.

    PYTHONPATH=src python bench/gpu/s20_split_short_ab.py
"""
import os

import torch

import flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import backward, plans


def variants(d):
    return {"bwd.py": (None, set(), set()),
            "split-bulk": ("1", set(), set()),
            "split-halved": ("1", {d}, {d}),
            "split-kr": ("1", {d}, set())}


def use(ws, halved, rows):
    backward.RESUME_TILES, backward.RESUME_HALVED, backward.RESUME_QUERY_ROWS = {}, set(halved), set(rows)
    if ws is None:
        os.environ.pop("FLASHTRITON_WARP_SPEC", None)
    else:
        os.environ["FLASHTRITON_WARP_SPEC"] = ws
    plans.clear()


def ab(d, n, names):
    b, h = 16384 // n, 2048 // d
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v, causal=True)
    dout = torch.randn_like(out)

    def grad():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    table = variants(d)
    res, ref, notes = {}, None, {}
    for rnd in range(2):
        for name in (names if rnd == 0 else names[::-1]):
            use(*table[name])
            g = grad()
            nan = sum(int(x.isnan().sum()) for x in g)
            ref = g if ref is None else ref
            err = max(((x.float() - y.float()).abs().max() / y.float().abs().max()).item() for x, y in zip(g, ref))
            notes[name] = f"err {err:.1e}, NaN {nan}"
            res.setdefault(name, []).append(attention_flops(b, h, n, n, d, True, "bwd") / time_ms(grad, "cuda") / 1e9)
    cells = "  ".join(f"{nm} " + " / ".join(f"{x:.0f}" for x in res[nm]) + f" ({notes[nm]})" for nm in names)
    print(f"D={d} N={n} causal backward TFLOP/s: {cells}", flush=True)


def main():
    for d, n in [(128, 512), (128, 1024), (64, 2048), (64, 4096)]:
        ab(d, n, ["bwd.py", "split-bulk", "split-halved", "split-kr"])
    for d, n in [(64, 8192), (64, 16384)]:
        ab(d, n, ["split-bulk", "split-halved", "split-kr"])
    use(None, {128}, {128})


if __name__ == "__main__":
    main()
