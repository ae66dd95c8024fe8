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
import torch

import flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import backward, plans

VARIANTS = {"preprocess": set(), "fused": {64, 128, 256}}


def use(name):
    backward.BWD_FUSED_DELTA = set(VARIANTS[name])
    plans.clear()


def ab(d, n, kw):
    b, h = 16384 // n, 2048 // d
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v, **kw)
    dout = torch.randn_like(out)

    def grad():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    names = list(VARIANTS)
    res, ref, notes = {}, None, {}
    for rnd in range(2):
        for name in (names if rnd == 0 else names[::-1]):
            use(name)
            g = grad()
            nan = sum(int(x.isnan().sum()) for x in g)
            ref = g if ref is None else ref
            same = all(torch.equal(x, y) for x, y in zip(g, ref))
            err = max(((x.float() - y.float()).abs().max() / y.float().abs().max()).item() for x, y in zip(g, ref))
            notes[name] = f"{'bitwise' if same else f'err {err:.1e}'}, NaN {nan}"
            res.setdefault(name, []).append(time_ms(grad, "cuda") * 1e3)
    flops = attention_flops(b, h, n, n, d, bool(kw.get("causal")), "bwd")
    cells = "  ".join(f"{nm} " + " / ".join(f"{x:.0f} us ({flops / x / 1e6:.0f} TFLOP/s)" for x in res[nm])
                      + f" ({notes[nm]})" for nm in names)
    print(f"D={d} N={n} {kw}: {cells}", flush=True)


def main():
    for d, n, kw in [(128, 512, dict(causal=True)), (64, 1024, dict(causal=True)), (64, 2048, dict(causal=True)),
                     (256, 512, {}), (256, 1024, {}), (256, 4096, {}), (256, 512, dict(causal=True)),
                     (256, 1024, dict(causal=True)), (128, 16384, dict(window_size=(1024, 0)))]:
        ab(d, n, kw)
    use("preprocess")


if __name__ == "__main__":
    main()
