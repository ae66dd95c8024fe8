"""Session 29, call 2 (s29_bwd_ws_stress.py): the one-tile-a-program bwd_ws.py backward at
D = 64, N = 4k (B = 4, H = 32, forced warp specialization, persistence off) gave NaN in
dk / dv, in both of the two calls made, while the persistent launch was clean in 300. At
D = 128 the same kind of launch gave NaN in long dK/dV loops through 1-D descriptors
(session 18: launchers/backward.WS_DKDV_DESC_MAX_ROWS = {128: 4096}, pointer loads beyond);
D = 64 has no entry. This probe counts, per length and per setting, the calls with a
non-finite gradient and the calls that differ from the persistent launch (bitwise / max
abs):
  - "desc":    one tile a program, 1-D descriptors (today's D = 64 one-tile launch);
  - "vec_ptr": one tile a program, pointer loads (WS_DKDV_VEC_PTR = True);
and then the default route (no flag) at small-batch shapes whose bwd_ws.py launches have
no more tiles than SMs (so one tile a program): the shapes a user hits.

    PYTHONPATH=src python bench/gpu/s29_bwd_ws_onetile_probe.py [REPEATS]
    (S29_NS=1024,2048: the lengths; S29_DEFAULT=0: no default-route part; S29_DROPOUT=0.1:
    the dropout backward instead (its dQ loop's key descriptors; policy.BWD_WS_DROPOUT_MAX_N).
    After the fix,
    launchers/backward.WS_DKDV_ONE_TILE_VEC_PTR, "desc" takes pointer loads too.)
"""
import os
import sys
import time

os.environ.setdefault("FLASHTRITON_PLANS", "0")
os.environ["FLASHTRITON_GPU_SHARED"] = "0"

import torch  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.launchers import backward, plans  # noqa: E402

D = 64
DEFAULT_PERSISTENT = set(backward.WS_PERSISTENT)


def count(out, inputs, dout, want, repeats):
    nonfinite = differ = 0
    worst = 0.0
    t0 = time.time()
    for _ in range(repeats):
        got = torch.autograd.grad(out, inputs, dout, retain_graph=True)
        if not all(bool(torch.isfinite(g).all()) for g in got):
            nonfinite += 1
        if want is not None and not all(torch.equal(x, y) for x, y in zip(got, want)):
            differ += 1
            worst = max(worst, max((x.float() - y.float()).abs().nan_to_num(float("inf")).max().item()
                                   for x, y in zip(got, want)))
    torch.cuda.synchronize()
    return f"non-finite {nonfinite}, differ {differ} (max abs {worst:.2e}) of {repeats} ({(time.time() - t0) / repeats * 1e3:.2f} ms a call)"


DROPOUT = float(os.environ.get("S29_DROPOUT", "0"))


def forced_dropout(repeats):
    """S29_DROPOUT=p: the dropout backward at D = 64 (always one tile a program there: no
    persistent dropout kind), whose dQ loop reads dropout's column keys through a 1-D
    descriptor each iteration. Reference: bwd.py (FLASHTRITON_WARP_SPEC=0) on the same
    forward (the same rng state, so the same mask); its arithmetic differs, so the count
    that matters is the non-finite one, and the max abs difference should stay at bf16
    rounding (~1e-2 of max |grad|)."""
    for n in [int(x) for x in os.environ.get("S29_NS", "1024,2048,4096,8192").split(",")]:
        b, h = max(1, 16384 // n), 32
        torch.manual_seed(n)
        q, k, v = (torch.randn(b, n, h, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = flashtriton.flash_attn_func(q, k, v, dropout_p=DROPOUT, deterministic=True)
        dout = torch.randn_like(out)
        os.environ["FLASHTRITON_WARP_SPEC"] = "0"
        plans.clear()
        ref = [g.clone() for g in torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)]
        os.environ["FLASHTRITON_WARP_SPEC"] = "1"
        plans.clear()
        nonfinite, worst = 0, 0.0
        t0 = time.time()
        for _ in range(repeats):
            got = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            if not all(bool(torch.isfinite(g).all()) for g in got):
                nonfinite += 1
            worst = max(worst, max(((x.float() - y.float()).abs().nan_to_num(float("inf")).max()
                                    / y.float().abs().max()).item() for x, y in zip(got, ref)))
        torch.cuda.synchronize()
        print(f"N={n} B={b} dropout {DROPOUT} one-tile bwd_ws.py: non-finite {nonfinite} of {repeats}, "
              f"max |diff| / max |bwd.py| {worst:.1e} ({(time.time() - t0) / repeats * 1e3:.2f} ms a call)", flush=True)
        os.environ.pop("FLASHTRITON_WARP_SPEC")
        del q, k, v, out, dout, ref
        torch.cuda.empty_cache()


def forced(repeats):
    os.environ["FLASHTRITON_WARP_SPEC"] = "1"
    for n in [int(x) for x in os.environ.get("S29_NS", "1024,2048,3072,4096,8192").split(",")]:
        b, h = max(1, 16384 // n), 32
        torch.manual_seed(n)
        q, k, v = (torch.randn(b, n, h, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = flashtriton.flash_attn_func(q, k, v, deterministic=True)
        dout = torch.randn_like(out)
        backward.WS_PERSISTENT = set(DEFAULT_PERSISTENT)
        backward.WS_DKDV_VEC_PTR = None
        plans.clear()
        want = [g.clone() for g in torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)]
        print(f"N={n} B={b} persistent: finite {all(bool(torch.isfinite(g).all()) for g in want)}, "
              + count(out, (q, k, v), dout, want, repeats // 3), flush=True)
        backward.WS_PERSISTENT = set()
        for name, vec in (("desc", None), ("vec_ptr", True)):
            backward.WS_DKDV_VEC_PTR = vec
            plans.clear()
            print(f"N={n} B={b} one-tile {name}: " + count(out, (q, k, v), dout, want, repeats), flush=True)
        backward.WS_PERSISTENT = set(DEFAULT_PERSISTENT)
        backward.WS_DKDV_VEC_PTR = None
        del q, k, v, out, dout, want
        torch.cuda.empty_cache()
    os.environ.pop("FLASHTRITON_WARP_SPEC")


def default_route(repeats):
    plans.clear()
    seen = []
    real = backward._ws_programs
    backward._ws_programs = lambda *a, **kw: seen.append(real(*a, **kw)) or seen[-1]
    for b, n, h, causal, det in ((1, 4096, 4, False, True), (1, 4096, 4, False, False), (1, 8192, 2, False, True),
                                 (1, 2048, 8, False, True), (2, 4096, 2, False, False), (1, 8192, 4, True, True)):
        torch.manual_seed(b * n + h)
        q, k, v = (torch.randn(b, n, h, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=det)
        dout = torch.randn_like(out)
        seen.clear()
        first = [g.clone() for g in torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)]
        launches = list(seen)
        print(f"default B={b} N={n} H={h} causal={causal} det={det}: bwd_ws launches (programs, persistent) "
              f"{launches}; " + count(out, (q, k, v), dout, first if det else None, repeats), flush=True)
    backward._ws_programs = real


if __name__ == "__main__":
    r = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    if DROPOUT > 0:
        forced_dropout(r)
        sys.exit(0)
    forced(r)
    if os.environ.get("S29_DEFAULT", "1") == "1":
        default_route(r)
