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
from bwd_ab import alternate, backward_call, row, tflops, warp_spec
from flashtriton.launchers import backward


def variants(d):
    return {"bwd.py": (None, set(), set()),
            "split-bulk": ("1", set(), set()),
            "split-halved": ("1", {d}, {d}),
            "split-kr": ("1", {d}, set())}


def use(ws, halved, rows):
    backward.RESUME_TILES, backward.RESUME_HALVED, backward.RESUME_QUERY_ROWS = {}, set(halved), set(rows)
    warp_spec(ws)


def ab(d, n, names):
    b, h, grad = backward_call(d, n, dict(causal=True))
    table = variants(d)
    res, notes = alternate(grad, names, lambda name: use(*table[name]), tflops(b, h, n, d))
    print(row(f"D={d} N={n} causal backward TFLOP/s", names, res, notes), flush=True)


def main():
    for d, n in [(128, 512), (128, 1024), (64, 2048), (64, 4096)]:
        ab(d, n, ["bwd.py", "split-bulk", "split-halved", "split-kr"])
    for d, n in [(64, 8192), (64, 16384)]:
        ab(d, n, ["split-bulk", "split-halved", "split-kr"])
    use(None, {128}, {128})


if __name__ == "__main__":
    main()
