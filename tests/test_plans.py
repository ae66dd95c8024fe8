"""Launch plans (flashtriton/launchers/plans.py): a dense call seen before replays its
recorded launches. Every replay must give bitwise what the launchers give for the same
inputs, and a path the recorder cannot replay must run the launchers again."""
import os

import pytest
import torch

import flashtriton
from flashtriton.launchers import plans

from conftest import DEVICE, kernel_backends
from helpers import rand_qkv

pytestmark = pytest.mark.skipif("triton" not in kernel_backends(), reason="the Triton launchers' plans")

CASES = [
    dict(),                                                   # dense
    dict(causal=True),
    dict(window_size=(5, 3)),
    dict(heads=(4, 2), dropout_p=0.3),                        # GQA, dropout (an rng input, a key table)
    dict(alibi=True, softcap=2.0),
    dict(warp_spec=True),                                     # the warp-specialized kernels, forced
    dict(warp_spec=True, causal=True),                        # their split backward
    # bwd.py with delta in its dQ kernel (launchers.backward.BWD_FUSED_DELTA: out an input
    # slot, O = None a constant otherwise; review, session 20)
    dict(fused_delta=True),
    dict(fused_delta=True, causal=True),
    dict(fused_delta=True, window_size=(5, 3)),
]


def _call(q, k, v, dout, opts, seed):
    opts = dict(opts)
    opts.pop("heads", None)
    opts.pop("warp_spec", None)
    opts.pop("fused_delta", None)
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = torch.linspace(0.1, 0.5, q.shape[2], device=q.device)
    torch.manual_seed(seed)
    with flashtriton.use_backend("triton"):
        out = flashtriton.flash_attn_func(q, k, v, **opts)
        return (out,) + torch.autograd.grad(out, (q, k, v), dout)


@pytest.mark.parametrize("opts", CASES)
def test_replay_equals_launchers(monkeypatch, opts):
    """Two calls of one signature: the second replays the forward and backward plans,
    and its outputs and gradients equal, bitwise, the launchers' own for its inputs."""
    if opts.get("warp_spec"):
        monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    if opts.get("fused_delta"):
        from flashtriton.launchers import backward
        monkeypatch.setattr(backward, "BWD_FUSED_DELTA", {64, 128, 256})
        monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")           # bwd.py's own path on a GPU too
    hq, hk = opts.get("heads", (2, 2))
    # (the warp-specialized backward pads lse on the host when Nq is not a multiple of
    # 128: unreplayable, tested below; here it gets a multiple)
    shape = (1, 128, 128, hq, hk, 128) if opts.get("warp_spec") else (2, 64, 96, hq, hk, 128)
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    first = rand_qkv(*shape, torch.bfloat16, DEVICE, requires_grad=True)
    _call(*first, torch.randn_like(first[0]), opts, seed=1)
    before = dict(plans.stats)
    second = rand_qkv(*shape, torch.bfloat16, DEVICE, requires_grad=True)
    dout = torch.randn_like(second[0])
    replayed = _call(*second, dout, opts, seed=2)
    assert plans.stats["replayed"] == before["replayed"] + 2, "the second call did not replay fwd and bwd"
    monkeypatch.setenv("FLASHTRITON_PLANS", "0")
    direct = _call(*second, dout, opts, seed=2)
    for name, a, b in zip(("out", "dq", "dk", "dv"), replayed, direct):
        assert torch.equal(a, b), f"{name}: the replay differs from the launchers"


def test_unreplayable_path_runs_the_launchers(monkeypatch):
    """A misaligned input is copied on the host (launchers/common._descriptor_ready): such a call
    records no plan, and each call runs the launchers."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    q, k, v = rand_qkv(1, 40, 40, 2, 2, 64, torch.float16, DEVICE)
    buf = torch.randn(q.numel() + 1, dtype=q.dtype, device=DEVICE)
    q = buf[1:].view(q.shape)                                   # base 2 bytes off 16-byte alignment
    before = dict(plans.stats)
    with flashtriton.use_backend("triton"):
        a = flashtriton.flash_attn_func(q, k, v)
        b = flashtriton.flash_attn_func(q, k, v)
    assert plans.stats["unreplayable"] == before["unreplayable"] + 2
    assert plans.stats["replayed"] == before["replayed"]
    assert torch.equal(a, b)


def test_new_signature_records_again(monkeypatch):
    """Another shape, dtype or option is another plan: nothing replays across them."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    before = dict(plans.stats)
    with flashtriton.use_backend("triton"):
        for n, causal in ((32, False), (48, False), (48, True)):
            q, k, v = rand_qkv(1, n, n, 2, 2, 64, torch.float16, DEVICE)
            flashtriton.flash_attn_func(q, k, v, causal=causal)
    assert plans.stats["recorded"] == before["recorded"] + 3
    assert plans.stats["replayed"] == before["replayed"]


def test_environment_is_part_of_the_key(monkeypatch):
    """A FLASHTRITON_* variable the launchers read, changed between two calls of one
    signature, makes the second call record again (the key reads the environment on
    every call, through os.environ's own dict on POSIX: plans._env_values); and the
    values it reads are the environment's."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    monkeypatch.delenv("FLASHTRITON_HOST_DESCRIPTORS", raising=False)
    assert plans._env_values() == tuple(os.environ.get(e) for e in plans._ENV)
    q, k, v = rand_qkv(1, 32, 32, 2, 2, 64, torch.float16, DEVICE)
    with flashtriton.use_backend("triton"):
        flashtriton.flash_attn_func(q, k, v)
        before = dict(plans.stats)
        monkeypatch.setenv("FLASHTRITON_HOST_DESCRIPTORS", "1")
        assert plans._env_values() == tuple(os.environ.get(e) for e in plans._ENV)
        flashtriton.flash_attn_func(q, k, v)
        assert plans.stats["recorded"] == before["recorded"] + 1
        flashtriton.flash_attn_func(q, k, v)
        assert plans.stats["replayed"] == before["replayed"] + 1


def test_signed_key_equals_own_signature(monkeypatch):
    """flash_attn_with_kvcache signs its tensors once (plans.sign) for its structure memo
    and the plan key: the key built from that signature is the key plan_key builds itself,
    and a decode call through it records once and then replays; a layout change (another
    stride) records again. The cache value checks (their own plan, one per step) are off
    here, so the counts are the decode plan's alone."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    monkeypatch.setenv("FLASHTRITON_KVCACHE_CHECKS", "0")
    q, k, v = rand_qkv(2, 16, 16, 2, 2, 64, torch.float16, DEVICE)
    inputs = (q, k, None, v, None)
    assert plans.plan_key("decode", inputs, (1,), plans.sign(inputs)) == plans.plan_key("decode", inputs, (1,))
    # distinct k and v caches: one tensor as both would record no plan
    # (test_regression_aliased_inputs_not_replayed)
    kc, vc = (torch.randn(2, 64, 2, 64, dtype=torch.float16, device=DEVICE) for _ in range(2))
    seqlens = torch.tensor([5, 9], dtype=torch.int32, device=DEVICE)
    with flashtriton.use_backend("triton"):
        before = dict(plans.stats)
        out1 = flashtriton.flash_attn_with_kvcache(q[:, :1], kc, vc, cache_seqlens=seqlens)
        out2 = flashtriton.flash_attn_with_kvcache(q[:, :1], kc, vc, cache_seqlens=seqlens)
        assert plans.stats["recorded"] == before["recorded"] + 1
        assert plans.stats["replayed"] == before["replayed"] + 1
        assert torch.equal(out1, out2)
        strided = [torch.randn(2, 64, 4, 64, dtype=torch.float16, device=DEVICE)[:, :, ::2] for _ in range(2)]
        strided[0].copy_(kc)
        strided[1].copy_(vc)
        out3 = flashtriton.flash_attn_with_kvcache(q[:, :1], *strided, cache_seqlens=seqlens)
        assert plans.stats["recorded"] == before["recorded"] + 2
        assert torch.equal(out3, out1)


DECODE_CASES = [
    dict(),                                                   # contiguous cache, one split
    dict(page_size=16, snew=1, rotary_dim=64, num_splits=3),  # paged, append + rotary, split (combine)
    dict(page_size=0, snew=2, num_splits=0, seqlen_q=2),      # the split heuristic, Sq > 1
]


@pytest.mark.parametrize("case", DECODE_CASES)
def test_decode_replay_equals_launchers(monkeypatch, case):
    """flash_attn_with_kvcache twice with one signature (other values, other cache
    lengths): the second replays, and its output, lse and caches equal the launchers'.
    A step runs two plans: the cache value checks (kernels/kvcache_checks.py) and the
    decode itself; both must replay. (The checks' kernel path is forced: on CPU tensors
    the values come from torch ops, no plan, and the count of 2 failed there; found by
    a helper, 2026-12-01.)"""
    from flashtriton import kvcache
    from test_kvcache import make_inputs
    case = dict(case)
    num_splits = case.pop("num_splits", 1)
    sq = case.pop("seqlen_q", 1)
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    monkeypatch.setattr(kvcache, "_KERNEL_VALUE_ROWS", True)

    def step(inp):
        call = {k: (v.clone() if k in ("k_cache", "v_cache") else v) for k, v in inp.items() if k != "q"}
        with flashtriton.use_backend("triton"):
            out, lse = flashtriton.flash_attn_with_kvcache(inp["q"], num_splits=num_splits, causal=True,
                                                           return_softmax_lse=True, **call)
        return out, lse, call["k_cache"], call["v_cache"]

    step(make_inputs(2, sq, 4, 2, 64, torch.float16, 96, [40, 70], **case))
    before = dict(plans.stats)
    inp = make_inputs(2, sq, 4, 2, 64, torch.float16, 96, [13, 88], **case)
    replayed = step(inp)
    assert plans.stats["replayed"] == before["replayed"] + 2, "the second step did not replay both plans"
    assert plans.stats["recorded"] == before["recorded"], "the second step recorded a plan"
    monkeypatch.setenv("FLASHTRITON_PLANS", "0")
    direct = step(inp)
    for name, a, b in zip(("out", "lse", "k_cache", "v_cache"), replayed, direct):
        assert torch.equal(a, b), f"{name}: the replay differs from the launchers"


def test_envvars_track_the_environment(monkeypatch):
    """flashtriton.envvars (the per-call reads of decode options, the backend and the
    cache checks) sees every change made through os.environ, as os.environ.get does."""
    from flashtriton import envvars
    from flashtriton.launchers import decode
    names = ("FLASHTRITON_DECODE_TILE", "FLASHTRITON_BACKEND")
    read = envvars.reader(names)
    raw = envvars.raw_reader(names)
    for value in ("64,4,3", None, "32,4,2"):
        if value is None:
            monkeypatch.delenv(names[0], raising=False)
        else:
            monkeypatch.setenv(names[0], value)
        assert read() == tuple(os.environ.get(n) for n in names)
        assert raw() == tuple(None if v is None else os.fsencode(v) for v in read()) or raw() == read()
        assert envvars.value(names[0], "unset") == os.environ.get(names[0], "unset")
        want = (64, 4, 3) if value == "64,4,3" else (32, 4, 2) if value else (0, 0, 0)
        opts = decode._env_options()
        assert (opts.block_n, opts.num_warps, opts.num_stages) == want


def test_maker_shapes():
    """plans._maker (a replay's allocation, the shape passed as separate ints): the shape,
    dtype and device memory.empty gives, a 0-dim shape included (torch.empty() needs a
    size there)."""
    for shape in ((), (0,), (3,), (2, 0, 4), torch.Size([1, 1, 4, 8])):
        t = plans._maker("empty", (shape, torch.float16, torch.device(DEVICE)))()
        assert t.shape == tuple(shape) and t.dtype == torch.float16 and t.is_contiguous()
    t = plans._maker("arange", (5, torch.device(DEVICE)))()
    assert t.dtype == torch.int32 and t.tolist() == list(range(5))


@pytest.mark.parametrize("plans_on", ["0", "1"])
def test_decode_workspaces_between_calls(monkeypatch, plans_on):
    """The split partials and an unrequested lse live in per-stream workspaces
    (launchers/decode.py, _workspace), which the tests' poisoned allocations otherwise
    bypass: with poisoning off, steps of two shapes interleaved on one stream each give
    bitwise what a poisoned, freshly allocated step gives, an earlier step's output stays
    intact after later steps, and a requested lse is never a workspace."""
    from test_kvcache import make_inputs
    from flashtriton import memory
    monkeypatch.setenv("FLASHTRITON_PLANS", plans_on)

    def step(inp, lse):
        call = {k: v for k, v in inp.items() if k != "q"}
        with flashtriton.use_backend("triton"):
            return flashtriton.flash_attn_with_kvcache(inp["q"], num_splits=3, return_softmax_lse=lse, **call)

    a1 = make_inputs(2, 1, 4, 2, 64, torch.float16, 96, [40, 70])
    b = make_inputs(1, 2, 8, 2, 64, torch.float16, 160, [150], snew=0)
    a2 = make_inputs(2, 1, 4, 2, 64, torch.float16, 96, [13, 88])
    want = [step(x, True) for x in (a1, b, a2)]      # poisoned fresh buffers (the fixture)
    monkeypatch.setattr(memory, "_poison", False)
    got = []
    for x in (a1, b, a2, a1):
        out = step(x, False)
        out_lse, lse = step(x, True)
        got.append((out.clone(), out, out_lse, lse))
    for (kept, out, out_lse, lse), (w_out, w_lse) in zip(got, want + want[:1]):
        assert torch.equal(out, kept), "a later step overwrote an earlier step's output"
        assert torch.equal(out, w_out) and torch.equal(out_lse, w_out)
        assert torch.equal(lse, w_lse)
    lses = [g[3] for g in got]
    assert len({t.data_ptr() for t in lses}) == len(lses), "a requested lse aliases another step's"


@pytest.mark.gpu
def test_replays_launch_directly_gpu(monkeypatch):
    """On the GPU a replay skips Triton's Python launcher (plans._DirectLaunch), for the
    decode kernel with host TMA descriptors and for the prefill kernels: the direct path
    must actually be taken (not fall back) for them, and the replays stay bitwise equal to
    the launchers (test_decode_replay_equals_launchers, test_replay_equals_launchers)."""
    from test_kvcache import make_inputs
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    inp = make_inputs(1, 1, 8, 2, 128, torch.bfloat16, 2048, [2000])
    call = {k: v for k, v in inp.items() if k != "q"}
    q, k, v = rand_qkv(1, 256, 256, 4, 4, 128, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        for _ in range(2):
            flashtriton.flash_attn_with_kvcache(inp["q"], **call)
            flashtriton.flash_attn_func(q, k, v, causal=True)
    assert plans._PLANS, "nothing was recorded"
    for key, plan in plans._PLANS.items():
        for ln in plan.launches:
            assert ln.direct is not None, f"{key[0]}: {ln.kernel.fn.__name__} replays through Triton's launcher"
    descs = [s for plan in plans._PLANS.values() for ln in plan.launches for s in ln.direct.subs if s[1] == "desc"]
    assert descs, "no host descriptor went through the direct path (the decode kernel's TMA loads)"
    # ... and the replays must fire through it (until 2026-11-30 a hook test that was always
    # true under Triton 3.6 sent every replay back through Triton's launcher), bitwise
    # equal to the launchers
    fired = []
    real_fire = plans._DirectLaunch.fire
    monkeypatch.setattr(plans._DirectLaunch, "fire", lambda self, *a: (fired.append(self), real_fire(self, *a)))
    with flashtriton.use_backend("triton"):
        replay = (flashtriton.flash_attn_with_kvcache(inp["q"], **call), flashtriton.flash_attn_func(q, k, v, causal=True))
        monkeypatch.setenv("FLASHTRITON_PLANS", "0")
        direct = (flashtriton.flash_attn_with_kvcache(inp["q"], **call), flashtriton.flash_attn_func(q, k, v, causal=True))
    assert len(fired) == sum(len(plan.launches) for plan in plans._PLANS.values())
    for got, want in zip(replay, direct):
        assert torch.equal(got, want)


def test_direct_launch_needs_no_hooks():
    """plans._no_launch_hooks: Triton 3.6 keeps launch hooks as HookChains (never None), so
    an empty chain must count as no hook, and a registered one must not (a profiler's hook
    would be skipped by the direct launch)."""
    import triton
    rt = triton.knobs.runtime
    assert plans._no_launch_hooks()
    chain = rt.launch_enter_hook
    if not hasattr(chain, "add"):
        pytest.skip("this Triton's hooks are not HookChains")

    def hook(metadata):
        return None
    chain.add(hook)
    try:
        assert not plans._no_launch_hooks()
    finally:
        chain.remove(hook)
    assert plans._no_launch_hooks()


def test_plan_key_policy_flag(monkeypatch):
    """plan_key(policy=False) (decode, whose launchers never consult the warp-specialization
    policy) leaves gpu_shared out of the key: False, and gpu_shared not even asked; the
    default keeps the flag for the prefill launchers."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    monkeypatch.delenv("FLASHTRITON_WARP_SPEC", raising=False)
    asked = []
    monkeypatch.setattr(plans, "gpu_shared", lambda device: asked.append(device) or True)

    class CudaLike:         # is_cuda, for the flag's test (the key's signature is given)
        is_cuda = True
        device = torch.device("cuda", 0)

    t = CudaLike()
    if not plans.triton.knobs.runtime.interpret:
        pytest.skip("the interpreter's key path (a fake CUDA tensor outside it would need a GPU)")
    assert plans.plan_key("fwd", (t,), (1,), ("signed",))[-1] is True
    assert len(asked) == 1
    assert plans.plan_key("decode", (t,), (1,), ("signed",), policy=False)[-1] is False
    assert len(asked) == 1


def _fake_compiled(signature, n_desc, calls):
    """A CompiledKernel whose launcher looks like Triton 3.6's nvidia CudaLauncher (what
    plans._DirectLaunch.build reads), recording each launch's arguments in calls."""

    class RawLauncher:          # a callable without __code__, as the C launcher
        def __call__(self, *args):
            calls.append(args)

    raw = RawLauncher()

    def wrap(launcher, tensordesc_meta):
        def inner(*args):       # the shape of wrap_handle_tensordesc's closure
            return launcher(*args, tensordesc_meta)
        return inner

    class CudaLauncher:
        profile_scratch_size = 0
        global_scratch_size = 0
        launch_cooperative_grid = False
        launch_pdl = False
        launch = wrap(raw, [{"meta": i} for i in range(n_desc)]) if n_desc else raw

    class Src:
        pass

    class Compiled:
        function = "fn"
        packed_metadata = "meta"
        run = CudaLauncher()
        src = Src()

    Compiled.src.signature = dict(enumerate(signature))
    return Compiled()


@pytest.mark.skipif(not __import__("triton").__version__.startswith("3.6."), reason="Triton 3.6's launcher layout")
def test_direct_launch_arguments(monkeypatch):
    """plans._DirectLaunch (the GPU replay's launch, tested here with a stand-in launcher):
    every pointer argument that takes this call's input or allocation gets that tensor's
    address (an input used at several positions, as decode's stand-in for absent pointers,
    at each), a persistent tensor (a workspace, "const") its address from the recording,
    which the launch keeps alive, other constants as recorded, and a host descriptor its
    expansion, encoded once per base address."""
    import triton.backends.nvidia.driver as nvdriver
    encoded = []

    def fake_tensordesc_arg(desc, meta):
        encoded.append(desc.base.data_ptr())
        return [("map", desc.base.data_ptr(), meta["meta"])] + list(desc.shape) + list(desc.strides)

    monkeypatch.setattr(nvdriver, "make_tensordesc_arg", fake_tensordesc_arg)
    workspace = torch.zeros(8)
    slots = [("in", 0), ("const", 7), ("alloc", 0), ("in", 2), ("const", workspace), ("in", 0),
             ("desc", ("in", 1), [4, 8], [8, 1], [2, 8]), ("const", 2.5), ("const", None), ("alloc", 1),
             ("const", True)]
    sig = ["*fp32", "i32", "*fp32", "*fp32", "*fp32", "*fp32", "tensordesc<fp32[2, 8]>", "fp32", "*fp32",
           "*fp32", "constexpr"]
    calls = []
    compiled = _fake_compiled(sig, 1, calls)
    direct = plans._DirectLaunch.build(compiled, slots)
    assert direct is not None
    assert any(t is workspace for t in direct.keep)
    steps = [((torch.zeros(4), torch.zeros(4, 8), torch.zeros(3)), [torch.zeros(2), torch.zeros(5)])
             for _ in range(2)]                             # (all alive: distinct addresses)
    for inputs, allocs in steps:
        for _ in range(2):
            direct.fire(compiled, (3, 2, 1), inputs, allocs, "stream")
            args = calls[-1]
            assert args[:13] == (3, 2, 1, "stream", "fn", False, False, None, None, "meta", None, None, None)
            want = [inputs[0].data_ptr(), 7, allocs[0].data_ptr(), inputs[2].data_ptr(), workspace.data_ptr(),
                    inputs[0].data_ptr(), ("map", inputs[1].data_ptr(), 0), 4, 8, 8, 1, 2.5, None,
                    allocs[1].data_ptr(), True]
            assert list(args[13:]) == want
    assert encoded == [steps[0][0][1].data_ptr(), steps[1][0][1].data_ptr()], "one encoding a base address"


@pytest.mark.gpu
def test_stream_id_is_the_current_stream():
    """plans.stream_id reads the raw handle (torch._C._cuda_getCurrentRawStream, as triton's
    driver does): the same value as torch.cuda.current_stream(device).cuda_stream, on the
    default stream and inside another stream's context, for cuda and cuda:0."""
    for device in (torch.device("cuda"), torch.device("cuda", 0)):
        assert plans.stream_id(device) == torch.cuda.current_stream(device).cuda_stream
        s = torch.cuda.Stream(device)
        with torch.cuda.stream(s):
            assert plans.stream_id(device) == torch.cuda.current_stream(device).cuda_stream == s.cuda_stream
    assert plans.stream_id(torch.device("cpu")) is None


def test_regression_foreign_descriptor_unreplayable():
    """Regression (session 23): _Plan.build classified any argument it did not know as a
    constant, so a launch given a Gluon TensorDescriptor (the Gluon forward's route,
    launchers/forward_gluon.py; not triton.tools' class) would have been replayed with
    the first call's descriptor, i.e. its pointers. Such a launch makes the plan
    unreplayable; the same launch with triton.tools' descriptor records a desc slot, and
    since session 25 so does one with Gluon's (rebuilt with its layout)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
    from triton.tools.tensor_descriptor import TensorDescriptor

    x = torch.randn(64, 128).to(torch.bfloat16)
    out = torch.empty_like(x)
    layout = gl.NVMMASharedLayout.get_default_for([64, 128], gl.bfloat16)

    def recorded(desc):
        rec = plans._Recorder((x,))
        rec.launches.append((None, (1,), (desc, out), {}, None))
        rec.allocs.append((out, "empty", None))
        return plans._Plan.build(rec, (out,))

    plan = recorded(TensorDescriptor(x, [64, 128], [128, 1], [64, 128]))
    assert plan is not None and plan.launches[0].subs[0] == (0, ("desc", ("in", 0), [64, 128], [128, 1], [64, 128]))

    class Foreign:          # any other descriptor-like object over a tensor
        def __init__(self, base):
            self.base = base
    assert recorded(Foreign(x)) is None
    # since session 25 Gluon's descriptor is rebound too, with its layout: the replay
    # builds a new one over the next call's tensor
    plan = recorded(GluonDescriptor(x, [64, 128], [128, 1], [64, 128], layout))
    assert plan is not None
    slot = plan.launches[0].subs[0]
    assert slot == (0, ("desc", ("in", 0), [64, 128], [128, 1], [64, 128], layout))
    y = torch.randn(64, 128).to(torch.bfloat16)
    again = plans._resolve(slot[1], (y,), [])
    assert type(again) is GluonDescriptor and again.base is y and again.layout == layout
    assert list(again.shape) == [64, 128] and list(again.block_shape) == [64, 128]


@pytest.mark.skipif("triton" not in kernel_backends(), reason="launch plans are the triton backend's")
def test_regression_aliased_inputs_not_replayed(monkeypatch):
    """Regression (session 23, review): a call with one tensor as two inputs,
    flash_attn_func(q, k, k), recorded a plan binding both positions to input 1; a later
    call of the same signature with distinct k2, v2 replayed k2 in place of v2 (max error
    1.46 under the interpreter). Such a call records no plan; the next call is right."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    plans.clear()
    q, k, _ = rand_qkv(1, 64, 64, 2, 2, 32, torch.float16, DEVICE)
    with flashtriton.use_backend("triton"):
        flashtriton.flash_attn_func(q, k, k)
        k2, v2 = torch.randn_like(k), torch.randn_like(k)
        got = flashtriton.flash_attn_func(q, k2, v2)
        plans.clear()
        want = flashtriton.flash_attn_func(q, k2, v2)
    assert torch.equal(got, want)


def test_regression_unpoisoned_replay_allocates_fresh(monkeypatch):
    """A replay outside poison_outputs allocates through the plan's own makers (_Plan.makers,
    session 25) instead of memory.make: its outputs are fresh tensors each call (never an
    earlier call's), of the launchers' dtype and shape, and bitwise the launchers' values;
    under poison_outputs, or while a plan is being recorded, replays take memory.make."""
    from flashtriton import memory
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    monkeypatch.setattr(memory, "_poison", False)
    q, k, v = rand_qkv(2, 64, 64, 2, 2, 64, torch.float16, DEVICE)
    with flashtriton.use_backend("triton"):
        monkeypatch.setenv("FLASHTRITON_PLANS", "0")
        want = flashtriton.flash_attn_func(q, k, v, causal=True)
        monkeypatch.setenv("FLASHTRITON_PLANS", "1")
        plans.clear()
        outs = [flashtriton.flash_attn_func(q, k, v, causal=True) for _ in range(3)]
    assert plans.stats["replayed"] >= 2
    (plan,) = plans._PLANS.values()
    assert plan.makers is not None, "the unpoisoned replays did not take the makers"
    for out in outs:
        assert out.dtype == want.dtype and out.shape == want.shape and torch.equal(out, want)
    assert len({o.data_ptr() for o in outs}) == len(outs), "a replay returned an earlier call's buffer"
    calls = []
    monkeypatch.setattr(memory, "make", lambda kind, spec: calls.append(kind) or memory.empty(*spec)
                        if kind == "empty" else memory.arange_i32(*spec))
    with memory.poison_outputs(), flashtriton.use_backend("triton"):
        assert torch.equal(flashtriton.flash_attn_func(q, k, v, causal=True), want)
    assert calls, "a poisoned replay did not allocate through memory.make"
