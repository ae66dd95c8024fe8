"""Host time of a replayed eager prefill call, on a CPU-only machine, the GPU launch mocked.

What it measures: the Python host time of `flashtriton.flash_attn_func(q, k, v, causal=...)`
on the triton backend, replaying its launch plan (launchers/plans.py), per call, as an
eager model calls it: D = 128, bf16, H = 16, N = 512 / 1k, inputs that require grad or
not; with --backward also `out.backward(dout)` (the forward + backward of one step).
The host work does not depend on the sizes, the route does: the route is the H200's
(below), the tensors are small CPU ones: B = 4 by default (--batch), which records the
same kernels as the H200's B = 32 (16k tokens) for every variant, forward and backward,
at a fraction of the CPU allocations' cost (torch.empty on the CPU is malloc, not the CUDA
caching allocator: at B = 32 it adds ~15-20 us a call that the GPU does not pay). With
--backward, variants whose backward zeroes or copies buffers (the causal 1k split path)
also time that CPU work: compare those across trees only.

The mock is bench/decode_host_probe.py's (imported from it: read its docstring): the
kernels stay JITFunctions, `triton.knobs.runtime.interpret = True` lets the triton
backend take CPU tensors and plans key them, a recording's launch returns a fake
CompiledKernel whose CudaLauncher look-alike makes the plan build a _DirectLaunch, and
the C launch is a counter. On top of it, the H200's route: `interpreting()` is False in
the launchers that read it (common, forward, backward, policy: the GPU's tiles and
allocator set-up), the warp-specialization switch (policy._warp_spec_switch: Hopper, the
flag, GPU not shared) answers as on an idle H200, and sm_count is 132 (common.DEFAULT_SMS,
what a CPU device reads anyway). So: causal and non-causal 512 / 1k D = 128 record
kernels/fwd_ws.py PERSISTENT (printed per variant). The Gluon forward (policy.gluon_fwd),
which the H200 takes for non-causal from 1k since session 24 and which plans do not
replay, is kept off (its launch cannot be mocked here): the 1k non-causal variant is
fwd_ws.py's route, as before session 24; --gluon leaves gluon_fwd as it is (then that
variant would fail to replay).

Not timed here (as in the decode probe): the CUDA-only calls (is_cuda checks, stream
capture checks, gpu_shared in plans.plan_key, the caching allocator, the real C launch
and its cuPointerGetAttribute). Every timed call is checked to have replayed
(plans.stats["replayed"]) and fired the direct launch. Absolute times vary with the
machine's load: compare variants and trees within one session, alternating.

Run (repo root, venv active, PYTHONPATH=src):
    python bench/prefill_host_probe.py                  # 5 rounds x 2000 calls, median us/call
    python bench/prefill_host_probe.py --profile --top 25
    python bench/prefill_host_probe.py --variants causal512_grad,plain512_nograd --backward
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_host_probe as dhp  # noqa: E402  (sets FLASHTRITON_PLANS=1, FLASHTRITON_BACKEND=triton)

import torch  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.launchers import backward, common, forward, plans, policy  # noqa: E402

NHEADS, HEAD_DIM = 16, 128


def install_h200_route(gluon=False):
    """The decode probe's mock, and the H200's prefill route (see the module doc)."""
    dhp.install_mock()
    off = lambda: False  # noqa: E731
    for mod in (common, forward, backward, policy):
        mod.interpreting = off

    def switch(q):                  # policy._warp_spec_switch on an idle Hopper GPU
        return policy._warp_spec_flag() != "0"
    policy._warp_spec_switch = switch
    if not gluon:
        forward.gluon_fwd = lambda *a, **k: False


def _variant(name):
    """causal512_grad -> (causal, N, requires_grad)."""
    kind, rest = ("causal", name[6:]) if name.startswith("causal") else ("plain", name[5:])
    n, grad = rest.split("_")
    return kind == "causal", int(n), grad == "grad"


VARIANTS = [f"{c}{n}_{g}" for n in (512, 1024) for c in ("causal", "plain") for g in ("grad", "nograd")]


def make_step(name, batch, backward_too):
    causal, n, grad = _variant(name)
    q, k, v = (torch.randn(batch, n, NHEADS, HEAD_DIM, dtype=torch.bfloat16).requires_grad_(grad)
               for _ in range(3))
    f = flashtriton.flash_attn_func
    if backward_too and grad:
        dout = torch.randn(batch, n, NHEADS, HEAD_DIM, dtype=torch.bfloat16)

        def step():
            out = f(q, k, v, causal=causal)
            out.backward(dout)
            q.grad = k.grad = v.grad = None
            return out
        return step

    def step():
        return f(q, k, v, causal=causal)
    return step


def recorded_kernels(step):
    """The kernels the step's plans launch (record afresh)."""
    plans.clear()
    step()
    names = []
    for plan in plans._PLANS.values():
        for ln in plan.launches:
            c = ln.kernel.fn.__name__ if hasattr(ln.kernel, "fn") else getattr(ln.kernel, "__name__", "?")
            persistent = ln.values[ln.kernel.arg_names.index("PERSISTENT")] if "PERSISTENT" in ln.kernel.arg_names else None
            names.append(f"{c}{' PERSISTENT' if persistent else ''} grid={ln.grid}")
    return names


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--backward", action="store_true", help="grad variants time forward + backward")
    ap.add_argument("--gluon", action="store_true", help="leave policy.gluon_fwd on (see the doc)")
    ap.add_argument("--profile", action="store_true", help="cProfile each variant (own time)")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args(argv)
    install_h200_route(args.gluon)
    torch.manual_seed(0)
    names = args.variants.split(",")
    steps = {n: make_step(n, args.batch, args.backward) for n in names}
    for n, step in steps.items():
        print(f"{n:18s} records: {'; '.join(recorded_kernels(step))}")
    for n, step in steps.items():           # record, then check that calls replay and fire directly
        step()
        before, fired = plans.stats["replayed"], dhp._fired[0]
        for _ in range(10):
            step()
        assert plans.stats["replayed"] > before and (plans.stats["replayed"] - before) % 10 == 0, \
            f"{n}: calls did not replay"
        assert dhp._fired[0] > fired, f"{n}: no direct launch fired"
        for _ in range(200):
            step()
    per_call = {n: None for n in names}
    results = {n: [] for n in names}
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            before = plans.stats["replayed"]
            results[n].append(dhp.time_calls(steps[n], args.calls))
            got = plans.stats["replayed"] - before
            per_call[n] = got // args.calls
            assert got % args.calls == 0 and got > 0, f"{n}: a timed call did not replay"
    base = statistics.median(results[names[0]])
    what = "forward + backward (grad variants)" if args.backward else "forward"
    print(f"replayed eager flash_attn_func {what}, host us per call (median of {args.rounds} x {args.calls}; "
          f"B={args.batch} H={NHEADS} D={HEAD_DIM} bf16, launch mocked)")
    for n in names:
        xs = sorted(results[n])
        med = statistics.median(xs)
        print(f"  {n:18s} {med:6.2f} us  (min {xs[0]:.2f}, max {xs[-1]:.2f})  {med - base:+.2f} vs {names[0]}"
              f"  [{per_call[n]} replay(s) a call]")
    if args.profile:
        for n in names:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(args.calls):
                steps[n]()
            pr.disable()
            print(f"\n=== cProfile {n}: {args.calls} calls, own time (tottime) ===")
            pstats.Stats(pr).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
