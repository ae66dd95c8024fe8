"""The fused Gluon backward's DQ_FOLD (session 37, a helper; not routed): the cast of the fp32 dq accumulator
into dq inside the kernel (kernels/bwd_gluon_fused._fused_dq_fold), so that launch() runs the zero and the
kernel but no cast_kernel. Each consumer warpgroup, once its CTA's dQ reduce-adds are complete (a full
cp.async.bulk.wait_group 0 in every thread, a proxy fence, a CTA-wide sync of the two consumers), adds 1 to
its (batch, KV head)'s counter WG (int32, at dq_accum's flat tail, zeroed with it); the WG that brings
counter WG to Nk / BLOCK_N casts the rows [WG Nq / 2, (WG + 1) Nq / 2) of the group's query heads. Host
side launchers/backward_gluon.py (prepare_fused(..., dq_fold=True), _fused_launch_args, _run_fused).

CPU: validation, launch arguments (DQ_FOLD and its six keywords only when asked; the flat accumulator with
its counters), _run_fused's launches (zero, kernel, no cast) through a recorder, the offline sm_90a compile
(no local memory inside the tile loops; one atomic and one full bulk wait a consumer).
GPU (Hopper, @pytest.mark.gpu): dq with dq_fold=True against dq without (fp32 summation order) and against
float64 by the repo criterion, dk / dv bitwise; D 64 / 128, causal and not, N 128-2048, small and large
B * H, GQA, the other variants (WIDE / DQ_SPLIT_M, DEFER_DQ, BAND, window, dropout), repeated launches with
dq NaN-poisoned in between (the counters are reset by every launch's zero), CUDA-graph replay.
"""
import os
import sys

import pytest
import torch

from flashtriton.kernels import bwd_gluon_fused
from flashtriton.kernels.dq_accum import cast_kernel, zero_f32_kernel
from flashtriton.launchers import backward_gluon, plans
from flashtriton.launchers.backward_gluon import fused_gluon, prepare_fused

from conftest import HAS_CUDA
from helpers import assert_close
from test_bwd_gluon import args, call_fused, inputs

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRETING,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")
FOLD_KW = ("DQ_FOLD", "DQA", "DQ", "dq_cnt_off", "stride_dqb", "stride_dqn", "stride_dqh")


# ---------------------------------------------------------------------------------------
# CPU: validation, launch arguments, launches, offline compile
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", [1, "yes", None, 1.0])
def test_dq_fold_rejects_non_bool(flag):
    with pytest.raises(ValueError, match=r"^dq_fold: expected a bool"):
        call_fused(args(), dq_fold=flag)


def test_dq_fold_valid_call_reaches_the_device_check():
    """A valid dq_fold=True call passes validation and stops at the device check on CPU tensors."""
    if HAS_CUDA:
        pytest.skip("the CPU form (a CUDA machine launches)")
    with pytest.raises(ValueError, match=r"^q: on cpu"):
        call_fused(args(), dq_fold=True)


def test_dq_fold_kernel_keywords_default_off():
    """The kernel's DQ_FOLD is a constexpr defaulting to False and its six arguments are keywords defaulting to
    None (the kernel without it has no such parameters: its SASS is that of before, 36 of 36 variants)."""
    names = bwd_gluon_fused.attn_bwd_fused_gluon_kernel.arg_names
    params = bwd_gluon_fused.attn_bwd_fused_gluon_kernel.params
    assert names[-len(FOLD_KW):] == list(FOLD_KW)
    assert params[-len(FOLD_KW)].default is False
    assert all(p.default is None for p in params[-len(FOLD_KW) + 1:])


@pytest.mark.parametrize("b, nq, nk, h, hk, d", [(2, 256, 512, 4, 2, 128), (1, 128, 128, 6, 1, 64),
                                                 (3, 192, 256, 2, 2, 128)])
def test_dq_fold_launch_args(b, nq, nk, h, hk, d):
    """DQ_FOLD and its keywords only when asked; positional arguments, grid and other keywords unchanged; the
    accumulator one flat fp32 allocation of B Nq H D + 2 B Hk elements (the counters at dq_cnt_off), the
    descriptor over it, dq's strides."""
    q, k, v, dout, lse, delta = args(b=b, nq=nq, nk=nk, h=h, hk=hk, d=d)
    bm, bn, st = bwd_gluon_fused.FUSED_CONFIG[d]
    base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, bm, bn, st, True)
    fold = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, bm, bn, st, True, dq_fold=True)
    assert not any(name in base[6] for name in FOLD_KW)
    assert base[3].shape == (b, nq, h, d)
    dq, acc, kw = fold[0], fold[3], dict(fold[6])
    n = b * nq * h * d
    assert acc.dtype == torch.float32 and acc.dim() == 1 and acc.numel() == n + 2 * b * hk and acc.is_contiguous()
    assert kw.pop("DQ_FOLD") is True and kw.pop("DQA") is acc and kw.pop("DQ") is dq
    assert kw.pop("dq_cnt_off") == n
    assert (kw.pop("stride_dqb"), kw.pop("stride_dqn"), kw.pop("stride_dqh")) == dq.stride()[:3]
    assert kw == base[6] and fold[4] == base[4] and len(fold[5]) == len(base[5])
    assert fold[5][6].base is acc                                # the reduce-adds go where the fold reads
    assert list(fold[5][6].shape) == [b * nq, h * d]


def test_dq_fold_launch_args_other_variants():
    """dq_fold combines with the other switches (their keywords kept)."""
    q, k, v, dout, lse, delta = args(b=2, nq=256, nk=256, h=4, hk=2, d=64)
    kw = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 128, 128, 2, False, True,
                                           split_m=True, band=2, dq_fold=True)[6]
    assert kw["DQ_FOLD"] and kw["DQ_SPLIT_M"] and kw["BAND"] == 2


class _Stub:
    """Stands for attn_bwd_fused_gluon_kernel: kernel[grid](*args, **kw) records them, writes nothing."""
    def __init__(self, seen):
        self.seen = seen

    def __getitem__(self, grid):
        return lambda *a, **kw: self.seen.append((grid, a, kw))


@pytest.mark.parametrize("fold", [False, True])
def test_run_fused_launches(monkeypatch, fold):
    """_run_fused (replayable, the library's form): the zero over the whole flat buffer (counters included),
    the kernel, and the cast only without dq_fold; the eager form: zero_ and the kernel, no copy_ with it."""
    seen, launched = [], []
    monkeypatch.setattr(backward_gluon, "attn_bwd_fused_gluon_kernel", _Stub(seen))
    monkeypatch.setattr(backward_gluon, "FUSED_DQ_ZERO_IN_PREPROCESS", False)

    def launch(kernel, grid, *a, **kw):
        launched.append((kernel, grid, a, kw))
        if kernel is zero_f32_kernel:
            a[0].zero_()                                       # (stands for the launch, CPU tensors)
    monkeypatch.setattr(plans, "launch", launch)
    q, k, v, dout, lse, delta = (t.cpu() for t in args(b=2, nq=128, nk=256, h=4, hk=2, d=128))
    dq, dk, dv, acc, grid, a, kw = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 2,
                                                                     True, dq_fold=fold)
    acc.fill_(float("nan"))
    backward_gluon._run_fused(dq, dk, dv, acc, grid, a, kw, replayable=True)
    kinds = [x[0] for x in launched]
    if fold:
        assert kinds == [zero_f32_kernel, backward_gluon.attn_bwd_fused_gluon_kernel], kinds
    else:
        assert kinds == [zero_f32_kernel, backward_gluon.attn_bwd_fused_gluon_kernel, cast_kernel], kinds
    assert launched[0][2][0] is acc and launched[0][2][1] == acc.numel()
    assert torch.equal(acc.view(torch.int32), torch.zeros_like(acc.view(torch.int32)))   # counters too
    # the eager form (replayable=False): dq untouched by the host with dq_fold (the kernel writes it)
    dq.fill_(7.0)
    acc.fill_(float("nan"))
    backward_gluon._run_fused(dq, dk, dv, acc, grid, a, kw, replayable=False)
    assert not torch.isnan(acc).any()
    if fold:
        assert (dq == 7.0).all(), "the host cast dq although the kernel does it"
    else:
        assert (dq == 0).all()


_COMPILE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import gluon_bwd_compile as g
d, causal = int(sys.argv[2]), sys.argv[3] == "1"
out = {}
for fold in (False, True):
    c = g.compile_fused(d, "bf16", None, True, causal, False, dq_fold=fold)
    r, text = g.report(c)
    ptx = c.asm["ptx"]
    out[str(fold)] = dict(spill=r["spill_bytes"], smem=r["smem"], loops=[(lp["n"], lp["ldl"] + lp["stl"])
                          for lp in g.tile_loops(text)], atom=ptx.count("atom.global.gpu.acq_rel.add"),
                          full=ptx.count("cp.async.bulk.wait_group 0;"), hgmma=text.count("HGMMA"))
print(json.dumps(out))
"""


@pytest.mark.parametrize("d, causal", [(128, False), (128, True), (64, False), (64, True)])
def test_dq_fold_compiles_without_local_memory_in_the_loops(d, causal):
    """Offline sm_90a (bench/gluon_bwd_compile.py in a subprocess, outside the test session's interpreter
    mode): with DQ_FOLD the two consumer tile loops hold no local load or store, the spills stay few (session
    37: 28 bytes plain D = 128, all after the loops; 8 causal as without; 0 at D = 64), the shared memory
    that of the kernel without it plus the fold's mbarrier, one acq_rel atomic and one full bulk wait a
    consumer, the same HGMMAs."""
    import json
    import subprocess

    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench"), str(d), str(int(causal))],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    base, fold = r["False"], r["True"]
    assert len(fold["loops"]) == 2 and all(loc == 0 for _, loc in fold["loops"]), fold
    assert fold["spill"] <= 32, fold
    assert 0 < fold["smem"] - base["smem"] <= 64, (base, fold)
    assert fold["atom"] == 2 and fold["full"] == 2 and base["atom"] == 0 and base["full"] == 0, (base, fold)
    assert fold["hgmma"] == base["hgmma"], (base, fold)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def _poison(*ts):
    for t in ts:
        t.fill_(float("nan"))


def check_fold(b, nq, nk, h, hk, d, dtype, causal=False, calls=2, **kw):
    """prepare_fused with and without dq_fold on the same inputs: every call's outputs NaN-poisoned before
    it (a head whose counters did not reach their target leaves its dq NaN); dk / dv bitwise, dq within
    fp32 summation order of the unfolded one and against float64 by the repo criterion."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(b, nq, nk, h, hk, d, dtype, causal)
    base = prepare_fused(q, k, v, dout, lse, delta, scale, causal, **kw)
    dq0, dk0, dv0 = (t.clone() for t in base())
    fold = prepare_fused(q, k, v, dout, lse, delta, scale, causal, dq_fold=True, **kw)
    for i in range(calls):
        outs = fold()
        _poison(*outs)
        dq, dk, dv = fold()
        for name, t in (("dq", dq), ("dk", dk), ("dv", dv)):
            assert torch.isfinite(t).all(), f"call {i} {name}: unwritten (NaN-poisoned) or non-finite output"
        assert torch.equal(dk, dk0) and torch.equal(dv, dv0), f"call {i}: dk / dv not bitwise the unfolded ones"
        err = (dq.float() - dq0.float()).abs().max().item()
        assert err <= 2e-2 * dq0.float().abs().max().item(), (i, err)
        assert_close("dq", dq, truth[0], lowp[0], 3, dtype)
    assert_close("dk", dk0, truth[1], lowp[1], 3, dtype)
    assert_close("dv", dv0, truth[2], lowp[2], 3, dtype)
    return q, dq


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [128, 256, 1024, 2048])
@pytest.mark.parametrize("b, h, hk", [(1, 2, 2), (4, 16, 16)])
def test_dq_fold_matches_gpu(d, causal, n, b, h, hk):
    if b * h * n > 4 * 16 * 1024:
        pytest.skip("the float64 reference's memory: large B * H up to N = 1024")
    check_fold(b, n, n, h, hk, d, torch.bfloat16, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("nq, nk, h, hk, causal", [(256, 1024, 8, 2, False), (1024, 256, 6, 1, True),
                                                   (64, 128, 4, 4, False), (192, 384, 8, 2, True),
                                                   (1024, 1024, 8, 1, True)])
def test_dq_fold_gqa_and_lengths_gpu(d, dtype, nq, nk, h, hk, causal):
    """GQA (a KV head's counters cover its group's query heads), Nq != Nk both ways, Nq = 64 (one tile a
    head: the halves 32 rows each), rows without keys (dq = 0 through the fold)."""
    q, dq = check_fold(2, nq, nk, h, hk, d, dtype, causal)
    if causal and nq > nk:
        assert (dq[:, :nq - nk] == 0).all(), "rows without keys must get dq = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, causal, kw", [
    (64, False, dict(wide=True)), (64, True, dict(wide=True, dq_split_m=True)),
    (64, False, dict(wide=True, dq_split_m=True)), (128, False, dict(defer_dq=True)),
    (128, True, dict(band=2)), (128, False, dict(window=(256, 0))), (64, False, dict(window=(128, 128))),
    (128, False, dict(rotate=False))])
def test_dq_fold_other_variants_gpu(d, causal, kw):
    """Every kernel variant reaches the epilogue, hence the fold, once a CTA (WINDOW's key blocks that no
    row sees visit one masked tile; BAND's 1-D grid)."""
    check_fold(2, 1024, 1024, 8, 4, d, torch.bfloat16, causal, **kw)


def test_run_fused_fold_keeps_the_zero_launch_with_zero_in_preprocess(monkeypatch):
    """FUSED_DQ_ZERO_IN_PREPROCESS zeroes the accumulator in the delta preprocess, not the counters behind it:
    with the fold the zero launch stays (preprocess(None), zero, kernel)."""
    seen, launched, pre = [], [], []
    monkeypatch.setattr(backward_gluon, "attn_bwd_fused_gluon_kernel", _Stub(seen))
    monkeypatch.setattr(backward_gluon, "FUSED_DQ_ZERO_IN_PREPROCESS", True)
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw: launched.append(kernel))
    q, k, v, dout, lse, delta = (t.cpu() for t in args(b=1, nq=128, nk=128, h=2, hk=2, d=64))
    dq, dk, dv, acc, grid, a, kw = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.125, 64, 128, 4,
                                                                     True, dq_fold=True)
    backward_gluon._run_fused(dq, dk, dv, acc, grid, a, kw, replayable=True, preprocess=pre.append)
    assert pre == [None] and launched == [zero_f32_kernel, backward_gluon.attn_bwd_fused_gluon_kernel], launched


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_dq_fold_replayable_form_gpu(causal):
    """The library's form of the launches (_run_fused(replayable=True): zero_f32_kernel over the accumulator
    and its counters, the kernel, no cast), three calls with dq poisoned in between."""
    b, n, h, hk, d = 2, 1024, 8, 2, 128
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(b, n, n, h, hk, d, torch.bfloat16, causal)
    dq0 = fused_gluon(q, k, v, dout, lse, delta, scale, causal)[0].clone()
    dq, dk, dv, acc, grid, a, kw = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, scale, 64, 128, 2,
                                                                     not causal, causal, dq_fold=True)
    for i in range(3):
        _poison(dq)
        backward_gluon._run_fused(dq, dk, dv, acc, grid, a, kw, replayable=True)
        torch.cuda.synchronize()
        assert torch.isfinite(dq).all(), f"call {i}: dq not written"
        assert (dq.float() - dq0.float()).abs().max() <= 2e-2 * dq0.float().abs().max(), i
        assert_close("dq", dq, truth[0], lowp[0], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_dq_fold_dropout_gpu(causal):
    """DROPOUT: dq with the fold against dq without (the same table)."""
    from flashtriton.launchers import common
    from helpers import dropout_rng
    b, n, h, hk, d = 2, 512, 4, 2, 128
    q, k, v, dout, lse, delta, scale, _, _ = inputs(b, n, n, h, hk, d, torch.bfloat16, causal)
    keys = common._dropout_keys(dropout_rng(3, "cuda"), h, b * n, n)
    kw = dict(dropout_p=0.2, keys=keys)
    dq0, dk0, dv0 = (t.clone() for t in fused_gluon(q, k, v, dout, lse, delta, scale, causal, **kw))
    dq, dk, dv = fused_gluon(q, k, v, dout, lse, delta, scale, causal, dq_fold=True, **kw)
    assert torch.isfinite(dq).all() and torch.equal(dk, dk0) and torch.equal(dv, dv0)
    assert (dq.float() - dq0.float()).abs().max() <= 2e-2 * dq0.float().abs().max()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_dq_fold_cuda_graph_replay_gpu(causal):
    """launch() captured in a CUDA graph (the zero and the kernel) and replayed three times with dq poisoned
    in between: every replay resets the counters and casts every head again."""
    b, n, h, hk, d = 2, 1024, 8, 4, 128
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(b, n, n, h, hk, d, torch.bfloat16, causal)
    dq0 = fused_gluon(q, k, v, dout, lse, delta, scale, causal)[0].clone()
    launch = prepare_fused(q, k, v, dout, lse, delta, scale, causal, dq_fold=True)
    dq, dk, dv = launch()                                       # compiled before the capture
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        launch()
        with torch.cuda.graph(graph, stream=stream):
            launch()
    torch.cuda.current_stream().wait_stream(stream)
    for i in range(3):
        _poison(dq)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.isfinite(dq).all(), f"replay {i}: dq not written (counters not reset?)"
        assert (dq.float() - dq0.float()).abs().max() <= 2e-2 * dq0.float().abs().max(), i
        assert_close("dq", dq, truth[0], lowp[0], 3, torch.bfloat16)
