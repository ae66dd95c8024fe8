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
    stride) records again."""
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    q, k, v = rand_qkv(2, 16, 16, 2, 2, 64, torch.float16, DEVICE)
    inputs = (q, k, None, v, None)
    assert plans.plan_key("decode", inputs, (1,), plans.sign(inputs)) == plans.plan_key("decode", inputs, (1,))
    cache = torch.randn(2, 64, 2, 64, dtype=torch.float16, device=DEVICE)
    seqlens = torch.tensor([5, 9], dtype=torch.int32, device=DEVICE)
    with flashtriton.use_backend("triton"):
        before = dict(plans.stats)
        out1 = flashtriton.flash_attn_with_kvcache(q[:, :1], cache, cache, cache_seqlens=seqlens)
        out2 = flashtriton.flash_attn_with_kvcache(q[:, :1], cache, cache, cache_seqlens=seqlens)
        assert plans.stats["recorded"] == before["recorded"] + 1
        assert plans.stats["replayed"] == before["replayed"] + 1
        assert torch.equal(out1, out2)
        strided = torch.randn(2, 64, 4, 64, dtype=torch.float16, device=DEVICE)[:, :, ::2]
        strided.copy_(cache)
        out3 = flashtriton.flash_attn_with_kvcache(q[:, :1], strided, strided, cache_seqlens=seqlens)
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
    lengths): the second replays, and its output, lse and caches equal the launchers'."""
    from test_kvcache import make_inputs
    case = dict(case)
    num_splits = case.pop("num_splits", 1)
    sq = case.pop("seqlen_q", 1)
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")

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
    assert plans.stats["replayed"] == before["replayed"] + 1, "the second step did not replay"
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
    for value in ("64,4,3", None, "32,4,2"):
        if value is None:
            monkeypatch.delenv(names[0], raising=False)
        else:
            monkeypatch.setenv(names[0], value)
        assert read() == tuple(os.environ.get(n) for n in names)
        assert envvars.value(names[0], "unset") == os.environ.get(names[0], "unset")
        want = (64, 4, 3) if value == "64,4,3" else (32, 4, 2) if value else (0, 0, 0)
        opts = decode._env_options()
        assert (opts.block_n, opts.num_warps, opts.num_stages) == want


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
