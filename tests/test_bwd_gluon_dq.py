"""kernels/bwd_gluon_dq.py: the hand-scheduled Gluon dQ kernel (host side launchers/
backward_gluon_dq.py; not routed into the library). Its kernel needs a Hopper GPU: Gluon
kernels do not run under the Triton interpreter, so the numeric tests are GPU-only (sm_90)
and skip under TRITON_INTERPRET=1. The launcher's validation needs no GPU and runs
everywhere.

Inputs: fresh random q, k, v, dO; lse from the float64 reference (fp32, +inf for a row
that sees no key) and delta = rowsum(dO * O) in fp32 from O rounded to the inputs' dtype
(what the forward stores and the preprocess reads). Criterion (tests/helpers.py): dq's
error against the float64 reference gradient at most 3x the error of the same-dtype
PyTorch computation; dq poisoned (NaN) before the call by the autouse fixture
(memory.empty under memory.poison_outputs()).
"""
import math
import os

import pytest
import torch

from flashtriton.kernels import bwd_gluon_dq
from flashtriton.launchers import backward_gluon_dq
from flashtriton.launchers.backward_gluon_dq import dq_gluon, prepare_dq

from conftest import DEVICE, HAS_CUDA
from helpers import assert_close, rand_qkv, reference_pair

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
hopper = pytest.mark.skipif(not IS_HOPPER or INTERPRET,
                            reason="needs a Hopper GPU (compute capability 9.x), not the interpreter")


def dq_inputs(b, nq, nk, h, hk, d, dtype, causal=False, scale=None):
    """(q, k, v, dout, lse, delta, scale, truth, lowp): fresh inputs on the GPU, lse / delta
    as the backward receives them, and reference_pair's float64 / same-dtype gradients."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, "cuda")
    dout = torch.randn_like(q)
    scale = d ** -0.5 if scale is None else scale
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=scale, window_right=0 if causal else -1)
    lse = truth["lse"].float().contiguous()                                      # (B, H, Nq)
    o = truth["out"].to(dtype)                                                   # (B, Nq, H, D) as stored
    delta = (o.float() * dout.float()).sum(-1).transpose(1, 2).contiguous()     # (B, H, Nq)
    return q, k, v, dout, lse, delta, scale, truth, lowp


def check(b, nq, nk, h, hk, d, dtype, causal=False, scale=None, **kw):
    """One call against the float64 reference; returns (dq, inputs)."""
    q, k, v, dout, lse, delta, scale, truth, lowp = dq_inputs(b, nq, nk, h, hk, d, dtype, causal, scale)
    dq = dq_gluon(q, k, v, dout, lse, delta, scale, causal, **kw)
    assert dq.shape == q.shape and dq.dtype == q.dtype and dq.is_contiguous()
    assert torch.isfinite(dq).all(), "unwritten (NaN-poisoned) or non-finite dq"
    assert_close("dq", dq, truth["dq"], lowp["dq"], 3, dtype)
    return dq, (q, k, v, dout, lse, delta, scale)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, n", [(1, 128), (2, 1024), (1, 2048)])
def test_matches_reference_gpu(causal, dtype, d, b, n):
    check(b, n, n, 4, 4, d, dtype, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (1024, 256), (128, 2048), (384, 1280)])
def test_nq_differs_from_nk_gpu(causal, d, nq, nk):
    """Nq < Nk and Nq > Nk (causal: the first Nq - Nk rows see no key, whole CTAs of them
    at (1024, 256), which still load and mask tile 0)."""
    dq, _ = check(2, nq, nk, 4, 4, d, torch.bfloat16, causal)
    if causal and nq > nk:
        assert (dq[:, :nq - nk] == 0).all(), "rows without keys must get dq = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
def test_gqa_gpu(causal, dtype, d):
    """8 query heads on 2 K / V heads: each query head its own dq rows, K / V shared."""
    check(2, 1024, 1024, 8, 2, d, dtype, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(2048, 1024), (1024, 128), (512, 256)])
def test_causal_rows_without_keys_gpu(d, nq, nk):
    """Nq > Nk: rows i < Nq - Nk see no key (lse = +inf, delta = 0): dq exactly 0 there,
    right elsewhere; GQA."""
    dq, (q, k, v, dout, lse, delta, scale) = check(2, nq, nk, 4, 2, d, torch.bfloat16, True)
    assert torch.isposinf(lse[:, :, :nq - nk]).all()
    assert (dq[:, :nq - nk] == 0).all(), "rows without keys must get dq = 0"
    # row Nq - Nk sees one key: a softmax over one score has zero gradient (dS = P (dP -
    # delta) = dO.V0 - dO.O = 0, as O = V0), so its dq is 0 up to rounding; the first GPU
    # run (2026-12-01) found it exactly 0 in one batch. The rows after see >= 2 keys.
    assert (dq[:, nq - nk + 1:].abs().amax(dim=(-1, -2)) > 0).all(), "rows with keys got dq = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d, cfg", [(128, dict(num_stages=2)), (128, dict(num_stages=3, v_stages=2)),
                                    (128, dict(block_n=64, num_stages=4)), (128, dict(block_n=64, num_stages=5)),
                                    (128, dict(block_n=64, num_stages=2, v_stages=1)), (64, dict(num_stages=6)),
                                    (64, dict(num_stages=2)), (64, dict(block_n=64, num_stages=6))])
@pytest.mark.parametrize("nq, nk", [(1024, 1536), (1536, 1024)])
def test_configs_gpu(causal, d, cfg, nq, nk):
    """The A/B's other tiles (bench/gpu/s25_gluon_dq_ab.py) and ring depths: BLOCK_N = 64
    (causal: the upper warpgroup's last tile hidden from all its rows, masked to dS = 0 and
    still released), 2 stages (the rings' phases flip every other tile, across the loops'
    boundary), K and V rings of different depths (3 / 2: the non-causal default at D = 128,
    here causal too; 2 / 1: V's one stage)."""
    check(2, nq, nk, 4, 2, d, torch.bfloat16, causal, **cfg)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 128, 128, 2, 2), (2, 1024, 1024, 4, 4), (1, 2048, 2048, 2, 2),
                                              (2, 256, 1024, 4, 2), (2, 1024, 256, 4, 2), (1, 384, 1280, 8, 2),
                                              (2, 1024, 1024, 8, 2)])
def test_d256_gpu(causal, dtype, b, nq, nk, h, hk):
    """D = 256 (session 33; BLOCK_N 32, 3 / 3 stages): against float64, Nq == Nk, Nq < Nk, Nq > Nk
    (causal: whole CTAs of rows without keys get dq = 0), GQA."""
    dq, _ = check(b, nq, nk, h, hk, 256, dtype, causal)
    if causal and nq > nk:
        assert (dq[:, :nq - nk] == 0).all(), "rows without keys must get dq = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [dict(v_early=True), dict(block_n=64, num_stages=2, v_stages=1, v_early=True),
                                 dict(block_n=64, num_stages=2, v_stages=1), dict(num_stages=2, v_stages=2),
                                 dict(num_stages=3, v_stages=2, v_early=True)])
@pytest.mark.parametrize("nq, nk", [(1024, 1536), (1536, 1024)])
def test_d256_configs_gpu(causal, cfg, nq, nk):
    """D = 256's A/B alternatives: V_EARLY (V_j released once dP_j retired) at 32 and 64 keys, the
    64-key tile with one V stage (spills offline, still right), shallower rings."""
    dq, _ = check(2, nq, nk, 4, 2, 256, torch.bfloat16, causal, **cfg)
    if causal and nq > nk:
        assert (dq[:, :nq - nk] == 0).all(), "rows without keys must get dq = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_d256_repeatable_gpu(causal):
    """D = 256: bitwise the same dq from two launches and from a second prepare_dq."""
    q, k, v, dout, lse, delta, scale, _, _ = dq_inputs(2, 1024, 1024, 8, 2, 256, torch.bfloat16, causal)
    launch = prepare_dq(q, k, v, dout, lse, delta, scale, causal)
    dq1 = launch().clone()
    assert torch.equal(dq1, launch()) and torch.equal(dq1, dq_gluon(q, k, v, dout, lse, delta, scale, causal))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [256, 128])
def test_band_order_bitwise_gpu(causal, d):
    """BAND (session 35's launch-order A/B): the same per-block work in another order, so dq is
    bitwise band 0's for every band dividing B * H (2 x 6 heads: bands 2, 3, 6, 12)."""
    q, k, v, dout, lse, delta, scale, _, _ = dq_inputs(2, 1024, 1024, 6, 2, d, torch.bfloat16, causal)
    ref = prepare_dq(q, k, v, dout, lse, delta, scale, causal)().clone()
    assert torch.isfinite(ref).all()
    for band in (2, 3, 6, 12):
        assert torch.equal(prepare_dq(q, k, v, dout, lse, delta, scale, causal, band=band)(), ref), band


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [128, 64])
def test_negative_and_large_scale_gpu(causal, d):
    check(1, 512, 1024, 4, 4, d, torch.bfloat16, causal, scale=-0.1)
    check(1, 512, 1024, 4, 4, d, torch.bfloat16, causal, scale=0.5)


@pytest.mark.gpu
@hopper
def test_strided_inputs_gpu():
    """q / k / v / dout views of packed tensors (heads contiguous: the 2-D descriptor view
    without a copy) and of a (B, H, N, D) tensor (made contiguous by the launcher), and a
    non-contiguous lse / delta (copied)."""
    b, n, h, d = 2, 512, 4, 128
    q, k, v, dout, lse, delta, scale, truth, lowp = dq_inputs(b, n, n, h, h, d, torch.bfloat16)
    packed = torch.stack([q, k, v, dout], dim=2)                        # (B, N, 4, H, D)
    bhnd = torch.stack([q, k, v, dout]).transpose(2, 3).contiguous().transpose(2, 3)   # (4, B, N, H, D) strided
    lse_t = lse.transpose(1, 2).contiguous().transpose(1, 2)             # (B, H, Nq), not contiguous
    for args in ((packed[:, :, 0], packed[:, :, 1], packed[:, :, 2], packed[:, :, 3]), tuple(bhnd)):
        dq = dq_gluon(*args, lse_t, delta, scale)
        assert torch.isfinite(dq).all()
        assert_close("dq", dq, truth["dq"], lowp["dq"], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_repeatable_gpu(causal, dtype):
    """Bitwise the same dq from two launches of one prepare_dq (the barriers start fresh
    every launch) and from a second prepare_dq."""
    q, k, v, dout, lse, delta, scale, _, _ = dq_inputs(2, 2048, 2048, 8, 2, 128, dtype, causal)
    launch = prepare_dq(q, k, v, dout, lse, delta, scale, causal)
    dq1 = launch().clone()
    dq2 = launch()
    dq3 = dq_gluon(q, k, v, dout, lse, delta, scale, causal)
    assert torch.equal(dq1, dq2) and torch.equal(dq1, dq3)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(1024, 1024), (512, 1024), (1024, 512)])
def test_matches_library_dq_gpu(causal, d, nq, nk):
    """With the library's own forward (out, lse; flash_attn_func) and delta from its out:
    the same criterion as flash_attn_func's backward dq passes (rows without keys 0 in
    both)."""
    import flashtriton

    q, k, v = rand_qkv(2, nq, nk, 4, 2, d, torch.bfloat16, "cuda")
    dout = torch.randn_like(q)
    scale = d ** -0.5
    qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
    # deterministic=True: the library's dQ kernel (the default takes the fused Gluon backward)
    out, lse, _ = flashtriton.flash_attn_func(qg, kg, vg, causal=causal, return_attn_probs=True, deterministic=True)
    dq_lib, = torch.autograd.grad(out, (qg,), dout)
    delta = (out.detach().float() * dout.float()).sum(-1).transpose(1, 2).contiguous()
    dq = dq_gluon(q, k, v, dout, lse.detach().contiguous(), delta, scale, causal)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=scale, window_right=0 if causal else -1)
    assert torch.isfinite(dq).all(), "unwritten (NaN-poisoned) or non-finite dq"
    assert_close("dq", dq, truth["dq"], lowp["dq"], 3, torch.bfloat16)
    assert_close("library dq", dq_lib, truth["dq"], lowp["dq"], 3, torch.bfloat16)
    if causal and nq > nk:
        assert (dq[:, :nq - nk] == 0).all() and (dq_lib[:, :nq - nk] == 0).all()


# ---------------------------------------------------------------------------------------
# Validation: no launch happens, so these run on any device (CPU included)
# ---------------------------------------------------------------------------------------
def dq_args(b=1, nq=128, nk=256, h=4, hk=2, d=128, dtype=torch.bfloat16):
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)
    dout = torch.randn_like(q)
    lse = torch.randn(b, h, nq, dtype=torch.float32, device=DEVICE)
    delta = torch.randn(b, h, nq, dtype=torch.float32, device=DEVICE)
    return q, k, v, dout, lse, delta


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8])
def test_rejects_dtype(dtype):
    q, k, v, dout, lse, delta = dq_args()
    q, k, v, dout = (t.to(dtype) for t in (q, k, v, dout))
    with pytest.raises(ValueError, match=r"^q: dtype .* not supported \(float16 or bfloat16\)"):
        dq_gluon(q, k, v, dout, lse, delta, 0.1)


def test_rejects_mixed_dtypes():
    q, k, v, dout, lse, delta = dq_args()
    with pytest.raises(ValueError, match=r"^q, k, v: dtypes differ"):
        dq_gluon(q, k.half(), v, dout, lse, delta, 0.1)
    with pytest.raises(ValueError, match=r"^dout: dtype torch.float16 differs from q's torch.bfloat16"):
        dq_gluon(q, k, v, dout.half(), lse, delta, 0.1)


@pytest.mark.parametrize("d", [32, 96, 192])
def test_rejects_head_dim(d):
    with pytest.raises(ValueError, match=rf"^q: head dim {d} not supported"):
        dq_gluon(*dq_args(d=d), 0.1)


@pytest.mark.parametrize("d", [32, 192])
def test_regression_head_dim_message_names_dq_head_dims(d):
    """Regression (review, session 32): dq_gluon's head-dim error came from the forward's
    check_inputs, so it listed the forward's head dims; it names this kernel's head dims now
    (256 among them since session 33)."""
    with pytest.raises(ValueError, match=rf"^q: head dim {d} not supported \(one of \[64, 128, 256\]\)"):
        dq_gluon(*dq_args(d=d), 0.1)


def test_rejects_shapes():
    q, k, v, dout, lse, delta = dq_args()
    with pytest.raises(ValueError, match=r"^q: expected 4 dimensions"):
        dq_gluon(q[0], k, v, dout, lse, delta, 0.1)
    with pytest.raises(ValueError, match=r"^k, v: shapes differ"):
        dq_gluon(q, k, v[:, :128], dout, lse, delta, 0.1)
    with pytest.raises(ValueError, match=r"^k: batch 2 differs from q's 1"):
        dq_gluon(q, *(torch.cat([t, t]) for t in (k, v)), dout, lse, delta, 0.1)
    with pytest.raises(ValueError, match=r"^q: 4 heads not a multiple of k's 3 heads"):
        dq_gluon(q, *(torch.cat([t, t[:, :, :1]], 2) for t in (k, v)), dout, lse, delta, 0.1)
    with pytest.raises(ValueError, match=r"^k: expected a torch.Tensor, got NoneType"):
        dq_gluon(q, None, v, dout, lse, delta, 0.1)
    with pytest.raises(ValueError, match=r"^dout: expected a torch.Tensor, got NoneType"):
        dq_gluon(q, k, v, None, lse, delta, 0.1)
    with pytest.raises(ValueError, match=r"^dout: shape \(1, 128, 4, 64\) differs from q's \(1, 128, 4, 128\)"):
        dq_gluon(q, k, v, dout[..., :64], lse, delta, 0.1)


def test_rejects_lse_and_delta():
    q, k, v, dout, lse, delta = dq_args()
    with pytest.raises(ValueError, match=r"^lse: expected a torch.Tensor, got list"):
        dq_gluon(q, k, v, dout, [0.0], delta, 0.1)
    with pytest.raises(ValueError, match=r"^lse: dtype torch.float16 not supported \(float32\)"):
        dq_gluon(q, k, v, dout, lse.half(), delta, 0.1)
    with pytest.raises(ValueError, match=r"^lse: expected shape \(B, H, Nq\) = \(1, 4, 128\), got \(1, 128, 4\)"):
        dq_gluon(q, k, v, dout, lse.transpose(1, 2), delta, 0.1)
    with pytest.raises(ValueError, match=r"^delta: expected shape \(B, H, Nq\) = \(1, 4, 128\), got \(1, 4, 64\)"):
        dq_gluon(q, k, v, dout, lse, delta[..., :64], 0.1)
    with pytest.raises(ValueError, match=r"^delta: dtype torch.float64 not supported \(float32\)"):
        dq_gluon(q, k, v, dout, lse, delta.double(), 0.1)


@pytest.mark.parametrize("nq, nk, what", [(100, 256, "q: sequence length 100"), (128, 200, "k: sequence length 200"),
                                          (0, 256, "q: sequence length 0"), (128, 0, "k: sequence length 0")])
def test_rejects_sequence_lengths(nq, nk, what):
    with pytest.raises(ValueError, match=rf"^{what} not a positive multiple of BLOCK_"):
        dq_gluon(*dq_args(nq=nq, nk=nk), 0.1)


def test_rejects_block_n_mismatch():
    """Nk = 192 fits BLOCK_N = 64 but not the default 128."""
    with pytest.raises(ValueError, match=r"^k: sequence length 192 not a positive multiple of BLOCK_N = 128"):
        dq_gluon(*dq_args(nk=192), 0.1)


@pytest.mark.parametrize("scale", [0.0, math.nan, math.inf, "0.1", True])
def test_rejects_scale(scale):
    with pytest.raises(ValueError, match=r"^softmax_scale: expected a finite nonzero number"):
        dq_gluon(*dq_args(), scale)


@pytest.mark.parametrize("causal", [1, None, "yes"])
def test_rejects_causal(causal):
    with pytest.raises(ValueError, match=r"^causal: expected a bool"):
        dq_gluon(*dq_args(), 0.1, causal)


@pytest.mark.parametrize("block_n", [16, 256, 0, True])
def test_rejects_block_n(block_n):
    with pytest.raises(ValueError, match=r"^block_n: expected 32, 64, 128 or None"):
        dq_gluon(*dq_args(), 0.1, block_n=block_n)


@pytest.mark.parametrize("num_stages", [1, 0, 2.0, True])
def test_rejects_num_stages(num_stages):
    with pytest.raises(ValueError, match=r"^num_stages: expected an int >= 2 \(K ring"):
        dq_gluon(*dq_args(), 0.1, num_stages=num_stages)


@pytest.mark.parametrize("v_stages", [0, -1, 1.0, False])
def test_rejects_v_stages(v_stages):
    with pytest.raises(ValueError, match=r"^v_stages: expected an int >= 1 \(V ring\)"):
        dq_gluon(*dq_args(), 0.1, v_stages=v_stages)


def test_rejects_shared_memory_overflow():
    """D = 128, BLOCK_N 128: 3 K and 3 V stages need 256 KB (3 / 2: 224 KB, the default)."""
    with pytest.raises(ValueError, match=r"^num_stages: 3 K and 3 V stages of 128 x 128 tiles need 256 KB"):
        dq_gluon(*dq_args(), 0.1, num_stages=3)
    with pytest.raises(ValueError, match=r"^num_stages: 2 K and 5 V stages of 128 x 128 tiles need 288 KB"):
        dq_gluon(*dq_args(), 0.1, num_stages=2, v_stages=5)


@pytest.mark.skipif(IS_HOPPER and not INTERPRET, reason="a Hopper GPU launches instead")
def test_rejects_non_hopper_device():
    """Valid shapes on a CPU (or a non-Hopper GPU): a clear error instead of a launch."""
    args = dq_args()
    if HAS_CUDA:
        args = tuple(t.cuda() for t in args)
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        dq_gluon(*args, 0.1)


def test_default_configs_fit_shared_memory():
    """Q and dO (BLOCK_M x D each) plus K_STAGES K and V_STAGES V tiles (BLOCK_N x D), 16-bit,
    within the launcher's limit (227 KB less 1 KB; offline: 224 KB at D = 128, 192 KB
    causal, 160 KB at D = 64)."""
    for causal in (False, True):
        for d in bwd_gluon_dq.DEFAULT_CONFIG:
            bm, bn, ks, vs = bwd_gluon_dq.default_config(d, causal)
            assert backward_gluon_dq.smem_bytes(d, bm, bn, ks, vs) <= backward_gluon_dq.SMEM_LIMIT, (d, causal)
            assert bm == 128 and ks >= 2 and vs >= 1, (d, causal)
    assert bwd_gluon_dq.default_config(128, False) == (128, 128, 3, 2)
    assert bwd_gluon_dq.default_config(128, True) == (128, 128, 2, 2)
    # D = 256 (session 33): Q + dO 128 KB, K / V tiles of 32 keys 16 KB each, 3 / 3 stages: 224 KB
    assert bwd_gluon_dq.default_config(256, False) == bwd_gluon_dq.default_config(256, True) == (128, 32, 3, 3)
    assert backward_gluon_dq.smem_bytes(256, 128, 32, 3, 3) == 224 * 1024


def test_d256_shared_memory_limits():
    """D = 256: BLOCK_N 64 with 2 K / 1 V stages fits (224 KB, the A/B's alternative with v_early),
    2 / 2 does not (256 KB); BLOCK_N 32 with 4 / 3 does not (240 KB)."""
    a = dq_args(d=256)
    with pytest.raises(ValueError, match=r"^num_stages: 2 K and 2 V stages of 64 x 256 tiles need 256 KB"):
        dq_gluon(*a, 0.1, block_n=64, num_stages=2)
    with pytest.raises(ValueError, match=r"^num_stages: 4 K and 3 V stages of 32 x 256 tiles need 240 KB"):
        dq_gluon(*a, 0.1, num_stages=4, v_stages=3)
    assert backward_gluon_dq.smem_bytes(256, 128, 64, 2, 1) <= backward_gluon_dq.SMEM_LIMIT


@pytest.mark.parametrize("v_early", [1, None, "yes"])
def test_rejects_v_early(v_early):
    with pytest.raises(ValueError, match=r"^v_early: expected a bool"):
        dq_gluon(*dq_args(), 0.1, v_early=v_early)


_COMPILE_D256 = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import gluon_bwd_dq_compile as g
out = {}
for name, args in (("plain", (256, "bf16", None, None, None, None, False)),
                   ("causal", (256, "bf16", None, None, None, None, True)),
                   ("fp16-causal", (256, "fp16", None, None, None, None, True)),
                   ("v_early", (256, "bf16", None, None, None, None, False, True))):
    c = g.compile_dq(*args)
    r = g.report(c)
    out[name] = dict(spill=r["spill_bytes"], smem=r["smem"], local=r["local"], hgmma=r["hgmma"],
                     advisories=r["advisories"], setmaxnreg=r["setmaxnreg"], utmastg=r["utmastg"])
print(json.dumps(out))
"""


def test_d256_compiles_offline():
    """sm_90a, no GPU (bench/gluon_bwd_dq_compile.py): the D = 256 default tile (BLOCK_N 32, 3 / 3)
    plain, causal, fp16 causal and V_EARLY: 0 spill bytes, no local memory, shared memory within
    227 KB, setmaxnreg 240 for the consumers, no wgmma-serialisation advisory, 2 TMA stores."""
    import json
    import subprocess
    import sys

    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE_D256, os.path.join(root, "bench")], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    for name, x in r.items():
        assert x["spill"] == 0 and x["local"] == 0, (name, x)
        assert x["smem"] <= 232448, (name, x)
        assert ["inc", "240"] in x["setmaxnreg"], (name, x)
        assert not x["advisories"] and x["utmastg"] == 2, (name, x)


@pytest.mark.parametrize("band, msg", [(-1, "expected a non-negative int"), (True, "expected a non-negative int"),
                                       (2.0, "expected a non-negative int"), (3, "3 does not divide B \\* H = 4")])
def test_rejects_band(band, msg):
    with pytest.raises(ValueError, match=r"^band: " + msg):
        prepare_dq(*dq_args(), 0.1, True, band=band)
