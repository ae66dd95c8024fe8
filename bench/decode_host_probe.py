"""Host time of a replayed eager decode step, on a CPU-only machine, the GPU launch mocked.

What it measures: the Python host time of `flashtriton.flash_attn_with_kvcache(...)` on the
triton backend, replaying its launch plan (launchers/plans.py), per call, as the decode
benchmark's eager rows run it (flashtriton.bench.decode.ours: inside
`with flashtriton.kvcache.value_checks(False):`, one `with` a call). Shapes: issue 5's
decode step scaled down: B = 1, Sq = 1, Hq = 32, Hk = 8, D = 128, L = 1k (default), bf16,
CPU tensors. Variants (alternated, round after round):
  contig          contiguous cache, causal=False (the benchmark's main row)
  contig_causal   contiguous cache, causal=True (the append rows' "no append" baseline)
  paged256        block_table, page 256, shuffled pool
  paged16         block_table, page 16, shuffled pool
  append_rot      k, v (1 token) + rotary_cos / rotary_sin, causal=True, contiguous
  append_rot_paged16   the same on a page-16 paged cache

How the GPU is mocked, and nothing else: flashtriton is imported WITHOUT TRITON_INTERPRET,
so the kernels are real JITFunctions. Then `triton.knobs.runtime.interpret` is set True,
which is what lets the triton backend take CPU tensors (backends.select) and, with
FLASHTRITON_PLANS=1, lets plans.plan_key build a key for them. A recording's
`kernel[grid](...)` (JITFunction.run) returns a fake CompiledKernel whose launcher looks
like Triton 3.6's nvidia CudaLauncher, so the plan builds a plans._DirectLaunch as on the
H200; a replay then runs all of the library's host work (validation, signing, structure
memo, plan key and lookup, output allocation, the direct launch's argument substitution
and descriptor cache), and only the final C launcher call is a stand-in (a counter, plus
data_ptr() of each tensor argument, as the C launcher takes the address of a pointer
argument that is not an int; its cuPointerGetAttribute is not modelled). Also faked:
plans.driver (current device / stream: two C calls on the GPU) and make_tensordesc_arg
(the CUtensorMap encode, once per cache address, then cached). The recording picks the
GPU's tiles (decode.interpreting patched to False), so page 16 gathers by pointers as on
the H200. Not timed here: the CUDA-only calls (is_cuda / stream-capture checks,
plans.stream_id's torch.cuda call, gpu_shared for the prefill keys). The harness checks
that every timed call replayed (plans.stats["replayed"]) and fired the direct launch
(never the CompiledKernel.run fallback). Absolute times vary with the machine's load:
compare variants and trees within one session, alternating (e.g. an old tree on
PYTHONPATH against the working tree).

Run (from the repo root, venv active):
    python bench/decode_host_probe.py                   # 5 rounds x 2000 calls, median us/call
    python bench/decode_host_probe.py --rounds 7 --calls 3000 --seqlen 1024
    python bench/decode_host_probe.py --profile         # + cProfile (own time, top 18) a variant
    python bench/decode_host_probe.py --variants contig,append_rot
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

if os.environ.get("TRITON_INTERPRET"):
    sys.exit("decode_host_probe: run without TRITON_INTERPRET (the kernels must be JITFunctions)")
os.environ["FLASHTRITON_PLANS"] = "1"
os.environ["FLASHTRITON_BACKEND"] = "triton"

import torch  # noqa: E402
import triton  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton import kvcache  # noqa: E402
from flashtriton.launchers import decode, plans  # noqa: E402

NHEADS, NHEADS_K, HEAD_DIM = 32, 8, 128
_fired = [0]


# ---------------------------------------------------------------------------------------
# the mock: a CompiledKernel whose launcher is a no-op

class _RawLaunch:
    """The C launcher's stand-in: a callable without __code__, as the compiled launcher.
    Triton's C launcher calls data_ptr() on a pointer argument that is not an int (and then
    cuPointerGetAttribute, which this cannot model): so does this, at the positions where
    its first call found tensors (a plan's argument layout is fixed)."""

    def __init__(self):
        self.tensor_pos = None

    def __call__(self, *args):
        _fired[0] += 1
        pos = self.tensor_pos
        if pos is None:
            pos = self.tensor_pos = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        for i in pos:
            args[i].data_ptr()


def _wrap(launcher, tensordesc_meta):
    def inner(*args):           # the shape of triton's wrap_handle_tensordesc closure
        return launcher(*args, tensordesc_meta)
    return inner


class CudaLauncher:             # the name plans._DirectLaunch.build checks
    profile_scratch_size = 0
    global_scratch_size = 0
    global_scratch_align = 1
    num_ctas = 1
    launch_cooperative_grid = False
    launch_pdl = False

    def __init__(self, n_desc):
        raw = _RawLaunch()
        self.launch = _wrap(raw, [{"fake": True}] * n_desc) if n_desc else raw

    def __call__(self, *args, **kwargs):
        raise AssertionError("a replay took CompiledKernel.run, not the direct launch")


class _Src:
    def __init__(self, signature):
        self.signature = signature


class FakeCompiled:
    function = 0
    packed_metadata = ()

    def __init__(self, signature, n_desc):
        self.src = _Src(signature)
        self.run = CudaLauncher(n_desc)

    def launch_metadata(self, *args):
        raise AssertionError("a replay took CompiledKernel.run, not the direct launch")


def _fake_run(self, *args, grid, warmup, **kwargs):
    """JITFunction.run while recording: no compile, a FakeCompiled with the kernel's
    parameter types in the layout plans._DirectLaunch.build reads."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    sig, n_desc = {}, 0
    for i, name in enumerate(self.arg_names):
        x = args[i] if i < len(args) else kwargs.get(name, self.params[i].default)
        if isinstance(x, TensorDescriptor):
            sig[name] = "tensordesc<bf16[%s]>" % ",".join(map(str, x.block_shape))
            n_desc += 1
        elif isinstance(x, torch.Tensor):
            sig[name] = "*" + str(x.dtype).replace("torch.", "")
        elif self.params[i].is_constexpr:
            sig[name] = "constexpr"
        else:
            sig[name] = "fp32" if isinstance(x, float) else "i32"
    return FakeCompiled(sig, n_desc)


class _FakeActive:
    @staticmethod
    def get_current_device():
        return 0

    @staticmethod
    def get_current_stream(device):
        return 0


class _FakeDriver:
    active = _FakeActive()


def _fake_tensordesc_arg(desc, meta):
    return [object()] + list(desc.shape) + list(desc.strides)


def install_mock():
    JITFunction.run = _fake_run
    plans.driver = _FakeDriver()
    import triton.backends.nvidia.driver as nvdriver
    nvdriver.make_tensordesc_arg = _fake_tensordesc_arg
    decode.interpreting = lambda: False            # the GPU's tiles when recording
    triton.knobs.runtime.interpret = True          # CPU tensors on the triton backend, plans on


# ---------------------------------------------------------------------------------------
# inputs (flashtriton.bench.decode.make_inputs, on the CPU)

def make_inputs(seqlen, page_size=0, append=False, batch=1, dtype=torch.bfloat16):
    inp = dict(q=torch.randn(batch, 1, NHEADS, HEAD_DIM, dtype=dtype))
    if page_size:
        blocks = batch * seqlen // page_size
        shape = (blocks, page_size, NHEADS_K, HEAD_DIM)
        inp["block_table"] = torch.randperm(blocks).to(torch.int32).view(batch, seqlen // page_size)
    else:
        shape = (batch, seqlen, NHEADS_K, HEAD_DIM)
    inp["k_cache"] = torch.randn(shape, dtype=dtype)
    inp["v_cache"] = torch.randn(shape, dtype=dtype)
    inp["cache_seqlens"] = torch.full((batch,), seqlen - 1 if append else seqlen, dtype=torch.int32)
    if append:
        inp["k"] = torch.randn(batch, 1, NHEADS_K, HEAD_DIM, dtype=dtype)
        inp["v"] = torch.randn(batch, 1, NHEADS_K, HEAD_DIM, dtype=dtype)
        inv = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
        ang = torch.arange(seqlen, dtype=torch.float32)[:, None] * inv[None, :]
        inp["rotary_cos"], inp["rotary_sin"] = ang.cos().to(dtype), ang.sin().to(dtype)
    return inp


VARIANTS = {
    "contig": dict(page_size=0, append=False, causal=False),
    "contig_causal": dict(page_size=0, append=False, causal=True),
    "paged256": dict(page_size=256, append=False, causal=False),
    "paged16": dict(page_size=16, append=False, causal=False),
    "append_rot": dict(page_size=0, append=True, causal=True),
    "append_rot_paged16": dict(page_size=16, append=True, causal=True),
}


def make_step(name, seqlen):
    v = VARIANTS[name]
    inp = make_inputs(seqlen, v["page_size"], v["append"])
    q = inp.pop("q")
    causal = v["causal"]
    f = flashtriton.flash_attn_with_kvcache
    checks = kvcache.value_checks

    def step():
        with checks(False):
            return f(q, causal=causal, num_splits=0, **inp)
    return step


def time_calls(step, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        step()
    return (time.perf_counter() - t0) / calls * 1e6


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--profile", action="store_true", help="cProfile each variant (own time)")
    ap.add_argument("--top", type=int, default=18)
    args = ap.parse_args(argv)
    install_mock()
    torch.manual_seed(0)
    names = args.variants.split(",")
    steps = {n: make_step(n, args.seqlen) for n in names}
    for n, step in steps.items():           # record, then check that calls replay and fire directly
        step()
        before, fired = plans.stats["replayed"], _fired[0]
        for _ in range(10):
            step()
        assert plans.stats["replayed"] == before + 10, f"{n}: calls did not replay"
        assert _fired[0] > fired, f"{n}: no direct launch fired"
        for _ in range(200):                # warm-up
            step()
    results = {n: [] for n in names}
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            before = plans.stats["replayed"]
            results[n].append(time_calls(steps[n], args.calls))
            assert plans.stats["replayed"] == before + args.calls, f"{n}: a timed call did not replay"
    base = statistics.median(results[names[0]])
    print(f"replayed decode step, host us per call (median of {args.rounds} x {args.calls}; "
          f"B=1 Hq={NHEADS} Hk={NHEADS_K} D={HEAD_DIM} L={args.seqlen} bf16, launch mocked)")
    for n in names:
        xs = sorted(results[n])
        med = statistics.median(xs)
        print(f"  {n:20s} {med:6.2f} us  (min {xs[0]:.2f}, max {xs[-1]:.2f})  {med - base:+.2f} vs {names[0]}")
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
