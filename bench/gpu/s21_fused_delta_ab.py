"""Prepared in session 20 for session 21: bwd.py's backward with the delta preprocess
folded into its dQ kernel (launchers.backward.BWD_FUSED_DELTA, bwd.py FUSED_DELTA).

Why: the preprocess reads O and dO whole, ~35 us a backward on the H200 at every length of
the grid (16k tokens, hidden 2048; s20/call7 profile), 4-6% of the causal backwards at
N = 512 / 1k that bwd.py runs; fused, the dQ program reads one O tile beside its dO tile
and writes delta for the dK/dV kernel, which then runs second. Offline sm_90a
(bench/one_loop_compile.py report): no spill either way (D = 128 dQ 169 -> 178
registers, D = 256 240 -> 255).

Variants (backward alone, time_ms median, plans cleared, two rounds alternating, gradients
against the first variant's, NaN counted): preprocess (today) / fused. Cases where bwd.py
runs alone (FLASHTRITON_WARP_SPEC unset: the policy's choice; rows it sends to the warp-
specialized kernels are skipped by the fused switch and would read level): D = 128 causal
512, D = 64 causal 1k / 2k, D = 256 512 / 1k / 4k causal and not, window (1024, 0) 16k.

Prediction: -25-35 us a backward: D = 128 causal 512 +4-5%, D = 64 causal 1k +3-4%, 2k
+2%, D = 256 +1-3%, window +2%.

    PYTHONPATH=src python bench/gpu/s21_fused_delta_ab.py
"""
from bwd_ab import alternate, backward_call, row
from flashtriton.bench.common import attention_flops
from flashtriton.launchers import backward, plans

VARIANTS = {"preprocess": set(), "fused": {64, 128, 256}}


def use(name):
    backward.BWD_FUSED_DELTA = set(VARIANTS[name])
    plans.clear()


def main():
    names = list(VARIANTS)
    for d, n, kw in [(128, 512, dict(causal=True)), (64, 1024, dict(causal=True)), (64, 2048, dict(causal=True)),
                     (256, 512, {}), (256, 1024, {}), (256, 4096, {}), (256, 512, dict(causal=True)),
                     (256, 1024, dict(causal=True)), (128, 16384, dict(window_size=(1024, 0)))]:
        b, h, grad = backward_call(d, n, kw)
        res, notes = alternate(grad, names, use, lambda ms: ms * 1e3)
        flops = attention_flops(b, h, n, n, d, bool(kw.get("causal")), "bwd")
        for nm in names:    # us, then TFLOP/s
            res[nm] = [f"{us:.0f} us ({flops / us / 1e6:.0f} TFLOP/s)" for us in res[nm]]
        print(row(f"D={d} N={n} {kw}", names, res, notes, "{}"), flush=True)
    use("preprocess")


if __name__ == "__main__":
    main()
