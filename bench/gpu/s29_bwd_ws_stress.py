"""Session 29: test_persistent_backward_repeatable_gpu[64-2048-False] failed in call 1 (one
process alone, the gpu_alone part of tests.sh): one of its 10 persistent bwd_ws.py backwards
at D = 64, N = 2k, non-causal (deterministic=True, forced warp specialization) was not
bitwise the one-tile-a-program result. Third sighting (sessions 18, 25, 29), so a race, not
contention. The D = 64 persistent launches use TILE_STAGES = 2 (launchers/backward.py
_tile_stages: a second buffer for the next tile's K / V or Q / dO); at D = 128 that setting
gave wrong gradients in every call, so it is the first suspect.

For each setting, REPEATS backwards on one set of inputs, each compared with the
one-tile-a-program (non-persistent) gradients: how many calls differ, in which tensor (dq:
the dQ kernel, dk / dv: the dK/dV kernel), how many elements, how far (max abs difference,
and over max |reference|). A few-ulp difference in many elements would be a summation
order; a wrong tile is large and local (rows reported).

    PYTHONPATH=src FLASHTRITON_PLANS=0 python bench/gpu/s29_bwd_ws_stress.py [REPEATS]
"""
import os
import sys
import time

os.environ.setdefault("FLASHTRITON_PLANS", "0")
os.environ["FLASHTRITON_WARP_SPEC"] = "1"
os.environ["FLASHTRITON_GPU_SHARED"] = "0"

import torch  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.launchers import backward, plans  # noqa: E402

D = 64
SHAPES = [(8, 2048, 32), (4, 4096, 32), (16, 1024, 32)]   # (B, N, H): 16k tokens, hidden 2048


def grads(out, inputs, dout):
    return [g.clone() for g in torch.autograd.grad(out, inputs, dout, retain_graph=True)]


def setting(name):
    plans.clear()
    if name == "one-tile":
        backward.WS_PERSISTENT = set()
        return
    backward.WS_PERSISTENT = {(kernel, D, False, False) for kernel in ("dkdv", "dq")}
    backward.WS_PERSISTENT_TILE_STAGES = int(name[-1])


def main(argv):
    repeats = int(argv[0]) if argv else 300
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, repeats {repeats}", flush=True)
    default_persistent = set(backward.WS_PERSISTENT)
    for b, n, h in SHAPES:
        torch.manual_seed(n)
        q, k, v = (torch.randn(b, n, h, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = flashtriton.flash_attn_func(q, k, v, deterministic=True)
        dout = torch.randn_like(out)
        setting("one-tile")
        want = grads(out, (q, k, v), dout)
        again = grads(out, (q, k, v), dout)
        print(f"N={n}: one-tile repeat bitwise: {all(torch.equal(x, y) for x, y in zip(want, again))}", flush=True)
        for name in ("persistent-stages2", "persistent-stages1"):
            setting(name)
            bad, worst, first = 0, {}, []
            t0 = time.time()
            for i in range(repeats):
                got = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                for tname, x, y in zip(("dq", "dk", "dv"), got, want):
                    if torch.equal(x, y):
                        continue
                    diff = (x.float() - y.float()).abs()
                    nbad = int((diff > 0).sum())
                    rel = diff.max().item() / y.float().abs().max().item()
                    w = worst.setdefault(tname, [0, 0, 0.0, 0.0])
                    w[0] += 1
                    w[1] = max(w[1], nbad)
                    w[2] = max(w[2], diff.max().item())
                    w[3] = max(w[3], rel)
                    if len(first) < 4:
                        idx = (diff > 0).nonzero()
                        rows = sorted(set(idx[:, 1].tolist()))
                        first.append(f"call {i} {tname}: {nbad} elements, batches {sorted(set(idx[:, 0].tolist()))[:8]}, "
                                     f"heads {sorted(set(idx[:, 2].tolist()))[:8]}, rows {rows[:6]}..{rows[-3:]} "
                                     f"({len(rows)} rows), max {diff.max().item():.2e}, nan {int(torch.isnan(x).sum())}")
                if not all(torch.equal(x, y) for x, y in zip(got, want)):
                    bad += 1
            torch.cuda.synchronize()
            print(f"N={n} {name}: {bad} of {repeats} calls differ ({time.time() - t0:.1f} s); "
                  + "; ".join(f"{t}: {c} calls, up to {e} elements, max abs {m:.2e} ({r:.1e} of max |ref|)"
                              for t, (c, e, m, r) in worst.items()), flush=True)
            for line in first:
                print("   ", line, flush=True)
        backward.WS_PERSISTENT = set(default_persistent)
        backward.WS_PERSISTENT_TILE_STAGES = 2
        del q, k, v, out, dout, want, again
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
