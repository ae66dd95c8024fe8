"""Session 19: D = 256 backward tiles at short sequences (bwd.py; no warp-specialized
backward at D = 256). The grid (16k tokens, H = 8) has it behind FA2 CUDA there:
non-causal 158 / 194 TFLOP/s at N = 512 / 1k (FA2 197 / 224), causal 100 / 147 (FA2
140 / 180). The defaults were sized at 4k-8k (configs.DEFAULTS dkdv (128, 64, 8, 1)
in the query-rows layout, dq (128, 32, 8, 3)); the tuner's candidate list has no
query-rows dK/dV tile at D = 256 but (64, 64, 8, 2).

Variants: the dK/dV tile with dQ at its default, then the dQ tile with dK/dV at its
default (backward = preprocess + dK/dV + dQ, so each kernel's share shows in the total),
each at N = 512 / 1k, causal and not, backward alone (autograd.grad of a fixed forward,
median of do_bench, plans cleared per variant). Two rounds in alternating order.

Prediction: at 512 / 1k a 64-row dK/dV tile with 2 stages (the 128-row one has one stage:
no pipelining in loops of 4-8 query tiles) +10-25% on the dK/dV part; dQ within 5%.

    PYTHONPATH=src python bench/gpu/s19_d256_bwd_tiles.py
"""
import os

os.environ["FLASHTRITON_PLANS"] = "0"     # variants change module tables
os.environ["FLASHTRITON_GPU_SHARED"] = "0"  # the compile workers below hold CUDA contexts
SMOKE = os.environ.get("S19_SMOKE") == "1"  # CPU dry run under the interpreter: tiny shapes
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["FLASHTRITON_BACKEND"] = "triton"   # CPU tensors would take the CPU backend
DEVICE = "cpu" if SMOKE else "cuda"

import torch  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.bench.common import attention_flops, time_ms  # noqa: E402
from flashtriton.kernels import configs  # noqa: E402
from flashtriton.launchers import plans  # noqa: E402

DKDV = [(128, 64, 8, 1), (64, 64, 8, 2), (64, 64, 4, 2), (64, 32, 4, 2), (64, 64, 8, 1)]
DQ = [(128, 32, 8, 3), (64, 32, 4, 2), (64, 64, 8, 2), (128, 32, 8, 2)]


def run(n, causal, kernel, tile):
    table = configs.DEFAULTS[kernel]
    saved = table[256]
    table[256] = configs.Tile(*tile)
    plans.clear()
    try:
        b, h, d = (1, 1, 256) if SMOKE else (16384 // n, 8, 256)
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, n, h, d, device=DEVICE, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        dout = torch.randn_like(out)
        grads = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        ms = time_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), DEVICE)
        return attention_flops(b, h, n, n, d, causal, "bwd") / ms / 1e9, grads
    except Exception as exc:  # a tile that does not fit: reported
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}", None
    finally:
        table[256] = saved
        plans.clear()


def _compile(job):
    run(512, *job)          # fills Triton's on-disk cache; the timing is not used
    return job


def main():
    import concurrent.futures as cf
    import multiprocessing as mp
    jobs = [(c, kern, t) for c in (False, True) for kern, ts in (("dkdv", DKDV), ("dq", DQ)) for t in ts]
    with cf.ProcessPoolExecutor(9, mp_context=mp.get_context("spawn")) as pool:
        list(pool.map(_compile, jobs))
    measure()


def measure(lengths=(512, 1024)):
    for n, causal in ((n, c) for n in lengths for c in (False, True)):
        for kernel, tiles in (("dkdv", DKDV), ("dq", DQ)):
            res, ref = {}, None
            for rnd in range(2):
                for tile in (tiles if rnd == 0 else tiles[::-1]):
                    r, g = run(n, causal, kernel, tile)
                    if isinstance(r, str):
                        res[tile] = [r]
                        continue
                    if ref is None:
                        ref = g
                    else:
                        err = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                                  for a, b in zip(g, ref))
                        if err > 0.02:      # relative to the largest gradient: bf16 rounding is ~4e-3
                            r = f"WRONG ({err:.3g})"
                    res.setdefault(tile, []).append(r)
            cells = "  ".join(f"{t}: " + " / ".join(x if isinstance(x, str) else f"{x:.0f}" for x in v)
                              for t, v in res.items())
            print(f"N={n} causal={causal} {kernel} (first = default): {cells}", flush=True)


if __name__ == "__main__":
    if SMOKE:
        DKDV[:], DQ[:] = DKDV[:2], DQ[:2]
        measure((128,))
    else:
        main()
