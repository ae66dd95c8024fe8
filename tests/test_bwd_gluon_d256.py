"""kernels/bwd_gluon_d256.py: the fused Gluon backward at head dim 256 (a session-32 helper,
offline; WG_S + two dK / dV warpgroups + a loader, 64 keys a CTA, dQ by TMA reduce-add, its dq
non-deterministic). Host side launchers/backward_gluon_d256.py (prepare, bwd_into); routed in session 32
(policy.GLUON_BWD_D256_MIN_N, after bench/gpu/s32_gluon_bwd_d256_ab.py).

CPU: the tile and its shared memory, the launcher's validation (ValueError naming the argument
and the rule, before any launch: dtypes, shapes, head dim, lengths not multiples of 64 such as
1023, flags, stages, grid and int32 bounds, the device), the launch arguments on CPU tensors
(grid, descriptor boxes, constexprs), the launch order (preprocess, zero, kernel, cast) with
plans.launch replaced by a recorder, the route's rule, and an offline sm_90a compile (in a
subprocess: 0 spills, no local memory, shared memory under 227 KB, the HGMMA shapes of the
design) of the plain and causal kernels.
GPU (Hopper): float64 reference with the library's gradient criterion (error <= 3x PyTorch's
same-dtype error, tests/helpers.assert_close; outputs NaN-poisoned before the call by
tests/conftest.py; fresh random inputs, test_bwd_gluon.inputs: lse from the float64 forward,
delta by the library's preprocess), bf16 / fp16, causal and not, N = 64 .. 2048, Nq != Nk both
ways (causal rows that see no key: dq = 0), GQA, ROTATE off, 1 stage, a negative scale, repeat
launches (dk / dv bitwise), bwd_into with the library's preprocess; DQ_ATOMIC (V2: dQ by
red.global.add.v2.f32, dk / dv bitwise V1's).
"""
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from flashtriton.kernels import bwd_gluon_d256, bwd_gluon_fused
from flashtriton.launchers import backward_gluon_d256, plans, policy
from flashtriton.launchers.backward_gluon_d256 import attention_bwd_d256, bwd_into, prepare

from conftest import DEVICE, HAS_CUDA
from helpers import assert_close, rand_qkv
from test_bwd_gluon import IS_HOPPER, hopper, inputs

D = 256
BM, BN, STAGES = bwd_gluon_d256.D256_CONFIG


def args(b=1, nq=128, nk=256, h=4, hk=2, d=D, dtype=torch.bfloat16):
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)
    dout = torch.randn_like(q)
    lse = torch.zeros(b, h, nq, device=DEVICE)
    delta = torch.zeros(b, h, nq, device=DEVICE)
    return [q, k, v, dout, lse, delta]


def call(a, scale=0.1, **kw):
    return attention_bwd_d256(*a, scale, **kw)


# ---------------------------------------------------------------------------------------
# CPU: the tile, shared memory, the route
# ---------------------------------------------------------------------------------------
def test_d256_tile_and_shared_memory():
    """BLOCK_M = BLOCK_N = 64, 2 stages: K + V 64 KB, ring 2 x 64 KB, P^T + dS^T 16 KB, dq staging
    16 KB = 224 KB (+ barriers; compiled 229,752 B) within 227 KB; 3 stages do not fit."""
    assert (BM, BN, STAGES) == (64, 64, 2)
    assert backward_gluon_d256.smem_bytes(2) <= backward_gluon_d256.SMEM_LIMIT == 227 * 1024
    assert backward_gluon_d256.smem_bytes(2) >= 229752          # the offline compile's figure
    assert backward_gluon_d256.smem_bytes(3) > backward_gluon_d256.SMEM_LIMIT
    assert bwd_gluon_d256.DKDV_REGS == 160


def test_d256_route_rule(monkeypatch):
    """Which backwards take the D = 256 kernel (policy.gluon_bwd_d256, routed in session 32 from
    bench/gpu/s32_gluon_bwd_d256_ab.py): deterministic=False, plain and canonical causal from 512
    (session 33; session 32: 1k / 2k), no window / dropout / ALiBi / softcap, Nq and Nk multiples of 64, lse (B, H, Nq)
    packed fp32, dout of q's dtype; the 64 / 128 fused route's tables know no 256. Rule only
    (CPU tensors, switch patched)."""
    from flashtriton.launchers import common

    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    assert policy.GLUON_BWD_D256_MIN_N == {"plain": 512, "causal": 512}
    assert D not in bwd_gluon_fused.FUSED_CONFIG
    fast, causal = common.AttnParams(0.1, deterministic=False), common.AttnParams(0.1, window_right=0,
                                                                                   deterministic=False)

    def rule(q, k, v, params=fast, bd=D, lse=None, dout=None, alibi=None, varlen=False):
        b, nq, h, _ = q.shape
        lse = torch.zeros(b, h, nq) if lse is None else lse
        return policy.gluon_bwd_d256(q, k, v, q if dout is None else dout, lse, params, alibi, varlen, bd, nq,
                                     k.shape[1])

    q, k, v = rand_qkv(1, 1024, 1024, 2, 1, D, torch.bfloat16, "cpu")
    assert rule(q, k, v) and rule(q.half(), k.half(), v.half())
    assert rule(q, k, v, causal)
    assert rule(*rand_qkv(1, 512, 512, 2, 2, D, torch.bfloat16, "cpu"))
    assert rule(*rand_qkv(1, 512, 512, 2, 2, D, torch.bfloat16, "cpu"), causal)
    assert not rule(*rand_qkv(1, 448, 448, 2, 2, D, torch.bfloat16, "cpu"), causal)     # causal: from 512
    assert rule(*rand_qkv(1, 2048, 2048, 2, 2, D, torch.bfloat16, "cpu"), causal)
    assert rule(*rand_qkv(1, 2048, 2048 + 64, 4, 2, D, torch.bfloat16, "cpu"))           # Nk a multiple of 64, GQA
    assert rule(*rand_qkv(1, 2048 + 64, 2048, 2, 1, D, torch.bfloat16, "cpu"))           # Nq too
    assert not rule(*rand_qkv(1, 2048 + 1, 2048, 2, 1, D, torch.bfloat16, "cpu"))        # not a multiple
    assert not rule(*rand_qkv(1, 448, 4096, 2, 1, D, torch.bfloat16, "cpu"))             # min(Nq, Nk) < 512
    # deterministic: the split path only (Nq a multiple of 128; test_bwd_gluon_d256_split)
    assert rule(q, k, v, common.AttnParams(0.1))
    assert not rule(*rand_qkv(1, 2048 + 64, 2048, 2, 1, D, torch.bfloat16, "cpu"), common.AttnParams(0.1))
    for p in (common.AttnParams(0.1, window_left=64, deterministic=False),
              common.AttnParams(0.1, window_right=64, deterministic=False),
              common.AttnParams(0.1, softcap=3.0, deterministic=False),
              common.AttnParams(0.1, dropout_p=0.1, deterministic=False)):
        assert not rule(q, k, v, p)
    assert not rule(q, k, v, alibi=torch.ones(2))
    assert not rule(q.float(), k.float(), v.float())
    assert not rule(q, k, v, lse=torch.zeros(1, 2, 1024, dtype=torch.float16))
    assert not rule(q, k, v, dout=q.half())
    q128, k128, v128 = rand_qkv(1, 1024, 1024, 2, 1, 128, torch.bfloat16, "cpu")
    assert not rule(q128, k128, v128, bd=128)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: False)
    assert not rule(q, k, v)


def test_regression_d256_route_scale_zero(monkeypatch):
    """Regression (review, session 32): softmax_scale=0.0 passes the API's checks (a finite float),
    and policy.gluon_bwd_d256 admitted it, but bwd_into validates as prepare does and its
    check_inputs refuses a zero scale: a D = 256 backward from 1k with softmax_scale=0 raised
    ValueError on Hopper instead of running. The rule now keeps such calls on the Triton route."""
    from flashtriton.launchers import common

    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    q, k, v = rand_qkv(1, 1024, 1024, 2, 1, D, torch.bfloat16, "cpu")
    lse = torch.zeros(1, 2, 1024)
    for scale, routed in ((0.1, True), (-0.1, True), (0.0, False), (-0.0, False)):
        params = common.AttnParams(scale, deterministic=False)
        assert policy.gluon_bwd_d256(q, k, v, q, lse, params, None, False, D, 1024, 1024) is routed, scale


@pytest.mark.parametrize("nq, nk, h, hk, causal, scale", [
    (1024, 1024, 2, 1, False, 0.0625), (2048, 2048, 4, 2, True, -0.3), (2048 + 64, 2048, 2, 2, True, 1.0),
    (1024, 4096, 6, 3, False, 1e-3)])
def test_regression_d256_route_within_bwd_into_contract(monkeypatch, nq, nk, h, hk, causal, scale):
    """Every call policy.gluon_bwd_d256 admits passes bwd_into's own validation (check_inputs, the
    output and delta checks; CPU tensors: all but the device check), so the route never turns a
    valid call into a ValueError (review, session 32: softmax_scale = 0 did)."""
    from flashtriton.launchers import common

    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    q, k, v = rand_qkv(1, nq, nk, h, hk, D, torch.bfloat16, "cpu")
    dout = torch.randn_like(q)
    lse = torch.zeros(1, h, nq)
    params = common.AttnParams(scale, window_right=0 if causal else -1, deterministic=False)
    assert policy.gluon_bwd_d256(q, k, v, dout, lse, params, None, False, D, nq, nk)
    delta = torch.empty(lse.shape)
    backward_gluon_d256.check_inputs(q, k, v, dout, lse, delta, params.softmax_scale, params.window_right == 0, True,
                                     None)


def _schedule(nq, nk, causal, rotate):
    """A Python mirror of the kernel's tile schedule (kernels/bwd_gluon_d256.py: bwd_gluon._block_coords
    with BLOCK_M = BLOCK_N = 64, bwd_gluon_fused._rotation / _tile_row for one head): per key block
    n0, the list of (query tile's first row m, rel, masked) in ring order."""
    n_q = nq // BM
    out = {}
    for pid_n in range(nk // BN):
        n0 = pid_n * BN
        j0 = min(-(-max(n0 - (nk - nq) - BM + 1, 0) // BM), n_q - 1) if causal else 0
        n_m = n_q - j0
        rot = (pid_n * n_m) // (nk // BN) if rotate and not causal else 0
        rel0 = j0 * BM + (nk - nq) - n0
        tiles = []
        for g in range(n_m):
            j = (g % n_m + rot) % n_m
            rel = rel0 + j * BM
            tiles.append(((j0 + j) * BM, rel, causal and rel < BN - 1))
        out[n0] = tiles
    return out


@pytest.mark.parametrize("nq, nk", [(64, 64), (128, 1024), (1024, 128), (320, 192), (192, 320), (2048, 2048)])
@pytest.mark.parametrize("causal", [False, True])
def test_schedule_covers_the_visible_pairs(nq, nk, causal):
    """The mirror of the kernel's schedule: every (query, key) pair the bottom-right mask shows is in
    exactly one visited tile of its key block and kept there (c <= r + rel in masked tiles), every
    visited pair of an unmasked tile is visible, the masked tiles are exactly one a head and block
    (rel = 0, the diagonal) or none, and ROTATE visits every tile once (a permutation)."""
    sched = _schedule(nq, nk, causal, rotate=True)
    off = nk - nq
    for n0, tiles in sched.items():
        rows = [m for m, _, _ in tiles]
        assert len(set(rows)) == len(rows)
        masked = [t for t in tiles if t[2]]
        assert len(masked) <= 1 and all(rel == 0 for _, rel, _ in masked)
        for m, rel, is_masked in tiles:
            assert rel % 64 == 0 and (rel >= 0 or not causal)        # (rel is read under CAUSAL only)
            for c in (0, 31, 63):
                for r in (0, 17, 63):
                    visible = n0 + c <= m + r + off
                    kept = (c <= r + rel) if is_masked else True
                    if not is_masked:
                        assert not causal or visible, (n0, m, c, r)
                    assert kept == visible or not causal, (n0, m, c, r)
        if causal:
            # the query rows that see key n0 + c are >= n0 + c - off: all in visited tiles
            first_row = max(n0 - off, 0)
            assert min(rows) <= first_row
        else:
            assert sorted(rows) == [j * 64 for j in range(nq // 64)]


# ---------------------------------------------------------------------------------------
# CPU: validation (no launch: any device)
# ---------------------------------------------------------------------------------------
def _bad_dtype(a):
    a[:4] = [t.float() for t in a[:4]]


def _mixed(a):
    a[3] = a[3].half()


@pytest.mark.parametrize("mutate, message", [
    (_bad_dtype, r"^q: dtype .* not supported \(float16 or bfloat16\)"),
    (_mixed, r"^q, k, v, dout: dtypes differ"),
    (lambda a: a.__setitem__(4, a[4].half()), r"^lse: dtype .* not supported \(float32\)"),
    (lambda a: a.__setitem__(5, a[5][:, :, :64]), r"^delta: shape .* expected \(B, H, Nq\)"),
    (lambda a: a.__setitem__(4, a[4][0]), r"^lse: expected 3 dimensions"),
])
def test_rejects_through_the_shared_contract(mutate, message):
    """The tensor, dtype and shape rules are backward_gluon.check_inputs' (tested case by case in
    tests/test_bwd_gluon.py); the D = 256 entry must run them before anything else."""
    a = args()
    mutate(a)
    with pytest.raises(ValueError, match=message):
        call(a)


@pytest.mark.parametrize("d", [64, 128, 192])
def test_rejects_head_dim(d):
    with pytest.raises(ValueError, match=rf"^q: head dim {d} not supported \(one of \[256\]\)"):
        call(args(d=d))


def test_rejects_shapes():
    q, k, v, dout, lse, delta = args()
    with pytest.raises(ValueError, match=r"^q: expected 4 dimensions"):
        call([q[0], k, v, dout, lse, delta])
    with pytest.raises(ValueError, match=r"^k, v: shapes differ"):
        call([q, k, v[:, :128], dout, lse, delta])
    with pytest.raises(ValueError, match=r"^dout: shape .* differs from q's"):
        call([q, k, v, dout[:, :64], lse, delta])
    with pytest.raises(ValueError, match=r"^k: batch 2 differs from q's 1"):
        call([q, torch.cat([k, k]), torch.cat([v, v]), dout, lse, delta])
    with pytest.raises(ValueError, match=r"^q: 4 heads not a multiple of k's 3 heads"):
        call([q, *(torch.cat([t, t[:, :, :1]], 2) for t in (k, v)), dout, lse, delta])
    with pytest.raises(ValueError, match=r"^k: expected a torch.Tensor, got NoneType"):
        call([q, None, v, dout, lse, delta])


@pytest.mark.parametrize("nq, nk, what", [
    (1023, 1024, "q: sequence length 1023 not a positive multiple of BLOCK_M = 64"),
    (1024, 1023, "k: sequence length 1023 not a positive multiple of BLOCK_N = 64"),
    (100, 256, "q: sequence length 100 not a positive multiple of BLOCK_M = 64"),
    (128, 96, "k: sequence length 96 not a positive multiple of BLOCK_N = 64"),
    (0, 256, "q: sequence length 0"), (128, 0, "k: sequence length 0")])
def test_rejects_sequence_lengths(nq, nk, what):
    """Awkward lengths (1023 and the like) are not supported by this kernel (BLOCK_M = BLOCK_N =
    64 whole tiles, no masked edge): refused, the Triton route takes them."""
    with pytest.raises(ValueError, match=rf"^{what}"):
        call(args(nq=nq, nk=nk, h=2, hk=2))


def test_accepts_multiples_of_64_not_128():
    """Nk = 192 (a multiple of 64, not of the D = 128 kernel's 128): past validation (to the device
    check on a CPU; launched on a Hopper GPU, where the GPU tests cover it)."""
    a = args(nq=192, nk=192, h=2, hk=2)
    if IS_HOPPER:
        a = [t.cuda() for t in a]
        call(a)
    else:
        with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
            call(a)


def test_rejects_grid_rows():
    """B * Hk above 65535 (the grid's second dimension): a ValueError first. Expanded views."""
    b, n = 65536, 64
    q, k, v, dout = (torch.empty(1, n, 1, D, dtype=torch.bfloat16, device=DEVICE).expand(b, n, 1, D)
                     for _ in range(4))
    lse, delta = (torch.empty(1, 1, n, device=DEVICE).expand(b, 1, n) for _ in range(2))
    with pytest.raises(ValueError, match=r"^k: B \* Hk = 65536 above 65535"):
        call([q, k, v, dout, lse, delta])


def test_rejects_rotate_start_tile_overflow():
    """ROTATE's int32 start tile (program_id * n_m) would wrap at (Nk / 64 - 1) * (Nq / 64) >= 2^31:
    refused, naming rotate (rotate=False, or causal, pass this rule). Expanded views: no memory."""
    n = 64 * 46342                                        # (46342 - 1) * 46342 >= 2^31
    q, k, v, dout = (torch.empty(1, 1, 1, D, dtype=torch.bfloat16, device=DEVICE).expand(1, n, 1, D)
                     for _ in range(4))
    lse, delta = (torch.empty(1, 1, 1, device=DEVICE).expand(1, 1, n) for _ in range(2))
    with pytest.raises(ValueError, match=r"^rotate: .* not below 2\^31"):
        call([q, k, v, dout, lse, delta])
    for kw in (dict(rotate=False), dict(causal=True)):
        assert backward_gluon_d256.check_inputs(q, k, v, dout, lse, delta, 0.1, kw.get("causal", False),
                                                kw.get("rotate", True), None)[-1] == 2


@pytest.mark.parametrize("scale", [0.0, math.nan, math.inf, "0.1", True])
def test_rejects_scale(scale):
    with pytest.raises(ValueError, match=r"^softmax_scale: expected a finite nonzero number"):
        call(args(), scale)


def test_rejects_flags_and_stages():
    with pytest.raises(ValueError, match=r"^causal: expected a bool"):
        call(args(), causal=1)
    with pytest.raises(ValueError, match=r"^rotate: expected a bool"):
        call(args(), rotate=None)
    for st in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=r"^num_stages: expected a positive int or None"):
            call(args(), num_stages=st)
    with pytest.raises(ValueError, match=r"^num_stages: 3 stages need 289 KB of shared memory at D = 256"):
        call(args(), num_stages=3)
    with pytest.raises(ValueError, match=r"^dq_atomic: expected a bool"):
        call(args(), dq_atomic=1)


def test_rejects_dq_atomic_int32_offsets():
    """DQ_ATOMIC's red.global.add addresses are int32 element offsets into dq_accum: B * Nq * H * D
    >= 2^31 refused (naming dq_atomic); the TMA path (int32 coordinates) takes it. Expanded views."""
    b, n, h = 1, 1024 * 1024, 8                          # 2^20 x 8 x 256 = 2^31 elements
    q, dout = (torch.empty(1, 1, 1, D, dtype=torch.bfloat16, device=DEVICE).expand(b, n, h, D) for _ in range(2))
    k, v = (torch.empty(1, 1, 1, D, dtype=torch.bfloat16, device=DEVICE).expand(b, n, 1, D) for _ in range(2))
    lse, delta = (torch.empty(1, 1, 1, device=DEVICE).expand(b, h, n) for _ in range(2))
    with pytest.raises(ValueError, match=r"^dq_atomic: B \* Nq \* H \* D = 2147483648 elements"):
        backward_gluon_d256.check_inputs(q, k, v, dout, lse, delta, 0.1, True, True, None, True)
    assert backward_gluon_d256.check_inputs(q, k, v, dout, lse, delta, 0.1, True, True, None, False)[-1] == 2


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
def test_rejects_non_hopper_device():
    """Valid shapes on a CPU (or a non-Hopper GPU): a clear error instead of a launch."""
    a = args()
    if HAS_CUDA:
        a = [t.cuda() for t in a]
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        call(a)


def test_bwd_into_validates_outputs():
    q, k, v, dout, lse, delta = args()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    with pytest.raises(ValueError, match=r"^dq: expected a contiguous tensor of q's shape, dtype and device"):
        bwd_into(q, k, v, dout, lse, delta, 0.1, False, dq[:, :64], dk, dv)
    with pytest.raises(ValueError, match=r"^dk: expected a contiguous tensor of k's shape"):
        bwd_into(q, k, v, dout, lse, delta, 0.1, False, dq, dk.half(), dv)
    with pytest.raises(ValueError, match=r"^dv: expected a contiguous tensor of v's shape"):
        bwd_into(q, k, v, dout, lse, delta, 0.1, False, dq, dk, dv.transpose(1, 2).contiguous().transpose(1, 2))
    with pytest.raises(ValueError, match=r"^delta: strides .* not contiguous"):
        bwd_into(q, k, v, dout, lse, delta.transpose(1, 2).contiguous().transpose(1, 2), 0.1, False, dq, dk, dv,
                 preprocess=lambda _: None)
    with pytest.raises(ValueError, match=r"^q: head dim 128 not supported"):
        a = args(d=128)
        bwd_into(*a, 0.1, False, torch.empty_like(a[0]), torch.empty_like(a[1]), torch.empty_like(a[2]))


# ---------------------------------------------------------------------------------------
# CPU: launch arguments and order (no launch)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True])
def test_launch_args(causal):
    """The grid (Nk / 64, B * Hk), the descriptors' boxes (Q / dO / K / V (64, 256); dK / dV (64,
    128): a WG's D-half; dq_accum (64, 64) fp32 at the 64-byte swizzle of the staging), the
    scalars and constexprs (ROTATE off under causal), dq_accum (B, Nq, H, D) fp32."""
    b, nq, nk, h, hk = 2, 192, 320, 6, 2
    q, k, v, dout, lse, delta = args(b, nq, nk, h, hk)
    la = backward_gluon_d256._launch_args(q, k, v, dout, lse, delta, 0.0625, causal, True, 2)
    assert la.grid == (nk // 64, b * hk)
    q_desc, do_desc, k_desc, v_desc, dk_desc, dv_desc, dq_desc, dq_ptr, lse_a, delta_a, *scalars = la.args
    assert dq_ptr is la.dq_accum
    for dsc in (q_desc, do_desc, k_desc, v_desc):
        assert list(dsc.block_shape) == [64, 256]
    for dsc in (dk_desc, dv_desc):
        assert list(dsc.block_shape) == [64, 128]
        assert list(dsc.shape) == [b * nk, hk * D]
    assert list(dq_desc.block_shape) == [64, 64] and dq_desc.layout == bwd_gluon_fused.dq_stage_layout(64)
    assert list(dq_desc.shape) == [b * nq, h * D] and dq_desc.base is la.dq_accum
    assert la.dq_accum.shape == (b, nq, h, D) and la.dq_accum.dtype == torch.float32
    assert scalars[:5] == [nq, nk, h, hk, h // hk]
    assert scalars[5] == 0.0625 and abs(scalars[6] - 0.0625 * 1.4426950408889634) < 1e-12
    assert la.kwargs == dict(HEAD_DIM=D, BLOCK_M=64, BLOCK_N=64, NUM_STAGES=2, CAUSAL=causal, ROTATE=not causal,
                             DQ_ATOMIC=False, num_warps=4)
    la2 = backward_gluon_d256._launch_args(q, k, v, dout, lse, delta, 0.0625, causal, True, 2, dq_atomic=True)
    assert la2.kwargs["DQ_ATOMIC"] is True and la2.args[7] is la2.dq_accum
    assert la.dq.shape == q.shape and la.dk.shape == k.shape and la.dv.shape == v.shape
    assert la.dk.is_contiguous() and la.dv.is_contiguous()


def test_launch_order(monkeypatch):
    """_run: the caller's preprocess first (called with None), then the zero of dq_accum, the kernel,
    the cast into dq, all through plans.launch (replayable by a launch plan)."""
    q, k, v, dout, lse, delta = args()
    la = backward_gluon_d256._launch_args(q, k, v, dout, lse, delta, 0.1, False, True, 2)
    seen = []
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw: seen.append((kernel, grid, a)))
    backward_gluon_d256._run(la, preprocess=lambda x: seen.append(("pre", x)))
    assert seen[0] == ("pre", None)
    from flashtriton.kernels.dq_accum import cast_kernel, zero_f32_kernel
    assert [s[0] for s in seen[1:]] == [zero_f32_kernel, bwd_gluon_d256.attn_bwd_d256_gluon_kernel, cast_kernel]
    assert seen[1][2][0] is la.dq_accum and seen[3][2][:2] == (la.dq_accum, la.dq)
    assert seen[2][1] == la.grid


def test_d256_route_records_and_replays_plan(monkeypatch):
    """The library's D = 256 route (launchers.backward._bwd -> backward_gluon_d256.bwd_into), the
    Gluon kernel stubbed, CPU tensors under the interpreter, FLASHTRITON_PLANS=1: the launches in
    order (delta preprocess, zero, kernel, cast), the kernel's descriptors over the call's own
    tensors (q / dout / k / v inputs, dk / dv / dq_accum allocations), the launches recorded into a
    launch plan, and a second call of the same signature replayed from it with every descriptor
    rebound to the second call's tensors (as backward_gluon.fused_into's route,
    tests/test_bwd_gluon.py::test_fused_route_launches_with_switches)."""
    from flashtriton.kernels.bwd import bwd_preprocess_kernel
    from flashtriton.kernels.dq_accum import cast_kernel, zero_f32_kernel
    from flashtriton.launchers import backward, common

    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        pytest.skip("the CPU form of this test (the Gluon kernel stubbed)")
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    seen = []

    class Stub:
        """Stands for attn_bwd_d256_gluon_kernel: records its args, adds nothing to dq_accum."""
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append((grid, a, kw))
    monkeypatch.setattr(backward_gluon_d256, "attn_bwd_d256_gluon_kernel", Stub())
    monkeypatch.setattr(backward_gluon_d256, "_check_device", lambda q, what: None)
    monkeypatch.setattr(backward, "gluon_bwd_d256", lambda *a, **kw: True)
    launched = []
    real_launch = plans.launch

    def launch(kernel, grid, *args, **kwargs):
        launched.append((kernel, args, kwargs))
        return real_launch(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(plans, "launch", launch)
    params = common.AttnParams(0.1, window_right=0, deterministic=False)

    def fresh():
        q, k, v = rand_qkv(1, 128, 192, 4, 2, D, torch.bfloat16, "cpu")
        out, dout = torch.randn_like(q), torch.randn_like(q)
        return dout, q, k, v, out, torch.randn(1, 4, 128)

    plans.clear()
    try:
        first = fresh()
        dq, dk, dv = backward.bwd(*first, params)
        kinds = [kk for kk, _, _ in launched]
        assert kinds == [bwd_preprocess_kernel, zero_f32_kernel, backward_gluon_d256.attn_bwd_d256_gluon_kernel,
                         cast_kernel], kinds
        acc = launched[1][1][0]
        assert acc.dtype == torch.float32 and acc.shape == first[1].shape
        grid, a, kw = seen[-1]
        assert grid == (192 // 64, 2) and kw["CAUSAL"] is True and kw["ROTATE"] is False
        dout, q, k, v = first[:4]
        assert [a[i].base for i in range(4)] == [q, dout, k, v]
        assert a[4].base is dk and a[5].base is dv and a[6].base is acc and a[7] is acc
        assert launched[-1][1][0] is acc and launched[-1][1][1] is dq
        assert torch.equal(dq, torch.zeros_like(dq))
        assert len(plans._PLANS) == 1, "the D = 256 route's launches did not make a plan"
        n_launches, n_seen = len(launched), len(seen)
        second = fresh()
        dq2, dk2, _ = backward.bwd(*second, params)
        assert len(launched) == n_launches, "the second call ran the launchers instead of the plan"
        assert len(seen) == n_seen + 1, "the plan did not replay the kernel"
        _, a2, _ = seen[-1]
        dout2, q2, k2, v2, out2 = second[:5]
        assert [a2[i].base for i in range(4)] == [q2, dout2, k2, v2]
        assert a2[4].base is dk2 and a2[6].base is not acc and a2[6].base is a2[7]
        assert list(a2[6].block_shape) == [64, 64] and a2[6].layout == a[6].layout
        assert torch.equal(dq2, torch.zeros_like(dq2))
        torch.testing.assert_close(a2[9], (out2.float() * dout2.float()).sum(-1).transpose(1, 2), rtol=1e-5,
                                   atol=1e-4)                                  # delta of the second call
    finally:
        plans.clear()


# ---------------------------------------------------------------------------------------
# CPU: offline sm_90a compile
# ---------------------------------------------------------------------------------------
_COMPILE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import d256_bwd_gluon_compile as g
out = {}
for name, kw in (("plain", dict()), ("causal", dict(causal=True)), ("v2", dict(dq_atomic=True))):
    r = g.row(g.compile_d256(**kw))
    r.pop("text")
    out[name] = r
print(json.dumps(out))
"""


def test_d256_compiles_offline():
    """sm_90a, no GPU: 0 spills and no local memory, setmaxnreg 168 / 160 / 160 / 24, shared memory
    within 227 KB, HGMMA as designed (S^T / dP^T 32 m64n64k16 both K-major, dQ 16 m64n64k16
    .tnspA.tnspB, dK / dV 16 m64n128k16 .tnspB), no wgmma-serialisation advisory, 4 TMA reduces,
    and three tile loops (WG_0 / WG_1: 8 HGMMA; WG_S: 48 HGMMA, 32 EX2, 4 UTMAREDG). DQ_ATOMIC (V2,
    plain): 0 spills, dQ 8 m64n128k16 .tnspA.tnspB, no UTMAREDG, 64 REDG.E.ADD.F32x2."""
    pytest.importorskip("triton.experimental.gluon")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=os.path.join(root, "src"))
    res = subprocess.run([sys.executable, "-c", _COMPILE, os.path.join(root, "bench")], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout.strip().splitlines()[-1])
    v2 = r.pop("v2")
    assert v2["spill"] == 0 and v2["local"] == 0 and v2["fits"] and v2["utmaredg"] == 0, v2
    assert v2["shapes"] == {"64x64x16": 32, "64x128x16.tnspA.tnspB": 8, "64x128x16.tnspB": 16}, v2
    assert v2["redg_v2"] == 64, v2
    for name, x in r.items():
        assert x["spill"] == 0 and x["local"] == 0, (name, x)
        assert x["fits"] and x["smem"] <= 232448, (name, x)
        assert "dec 168" in x["setmaxnreg"] and "inc 160" in x["setmaxnreg"], (name, x)
        assert x["shapes"] == {"64x64x16": 32, "64x64x16.tnspA.tnspB": 16, "64x128x16.tnspB": 16}, (name, x)
        assert not x["advisories"], (name, x)
        assert x["utmaredg"] == 4, (name, x)
        loops = sorted(x["loops"], key=lambda lp: lp["hgmma"])
        assert [lp["hgmma"] for lp in loops] == [8, 8, 48], (name, x)
        assert loops[2]["ex2"] == 32 and loops[2]["redg"] == 4 and loops[2]["n"] < 800, (name, x)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
def check(b, nq, nk, h, hk, dtype, causal=False, scale=None, **kw):
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(b, nq, nk, h, hk, D, dtype, causal, scale)
    dq, dk, dv = attention_bwd_d256(q, k, v, dout, lse, delta, scale, causal, **kw)
    assert dq.shape == q.shape and dq.dtype == q.dtype and dk.shape == k.shape and dv.shape == v.shape
    assert dk.dtype == k.dtype and dv.dtype == v.dtype
    for name, t in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert torch.isfinite(t).all(), f"{name}: unwritten (NaN-poisoned) or non-finite output"
    assert_close("dq", dq, truth[0], lowp[0], 3, dtype)
    assert_close("dk", dk, truth[1], lowp[1], 3, dtype)
    assert_close("dv", dv, truth[2], lowp[2], 3, dtype)
    return (q, k, v, dout, lse, delta, scale), (dq, dk, dv)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [64, 128, 1024, 2048])
def test_d256_matches_reference_gpu(dtype, causal, n):
    """Nq = Nk = n (64: one ring tile a CTA; 2048: 32 tiles, the ring's phases wrap 16 times)."""
    check(2 if n <= 1024 else 1, n, n, 2, 2, dtype, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 256, 1024, 4, 2), (2, 1024, 256, 4, 2), (1, 64, 192, 6, 1),
                                              (2, 320, 192, 6, 2), (1, 1024, 2048, 4, 4)])
def test_d256_nq_differs_from_nk_gpu(causal, b, nq, nk, h, hk):
    """Nq != Nk both ways, GQA (the group's heads walked one after another, their dq rows apart),
    lengths multiples of 64 but not of 128; odd tile counts a CTA (the P^T / dS^T buffer's and the
    ring's parities end mid-pair)."""
    check(b, nq, nk, h, hk, torch.bfloat16, causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("nq, nk", [(2048, 1024), (1024, 128), (384, 128)])
def test_d256_causal_rows_without_keys_gpu(nq, nk):
    """Nq > Nk, causal: the first Nq - Nk query rows see no key (lse = +inf): dq = 0 there."""
    _, (dq, _, _) = check(2, nq, nk, 4, 2, torch.bfloat16, causal=True)
    assert not dq[:, :nq - nk].any(), "rows that see no key must get dq = 0"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 128, 128, 2, 2), (2, 1024, 1024, 4, 2), (1, 320, 192, 6, 2)])
def test_d256_dq_atomic_gpu(dtype, causal, b, nq, nk, h, hk):
    """DQ_ATOMIC (V2: dQ by red.global.add.v2.f32 from the accumulator registers, P^T / dS^T
    double-buffered): the reference criterion, and dk / dv bitwise V1's (the same dK / dV wgmmas on
    the same operands in the same order; only dQ's path and the buffers differ). A wrong pairing of
    the v2 reds (pack = 2) shows here as a dq error."""
    (q, k, v, dout, lse, delta, scale), (_, dk, dv) = check(b, nq, nk, h, hk, dtype, causal, dq_atomic=True)
    _, dk1, dv1 = attention_bwd_d256(q, k, v, dout, lse, delta, scale, causal)
    assert torch.equal(dk, dk1) and torch.equal(dv, dv1)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("num_stages", [1, 2])
@pytest.mark.parametrize("rotate", [True, False])
def test_d256_stages_and_rotation_gpu(num_stages, rotate):
    """Both ring depths that fit, ROTATE on and off; group x tiles = 3 x 5 = 15 a CTA."""
    check(1, 320, 256, 6, 2, torch.bfloat16, num_stages=num_stages, rotate=rotate)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_d256_negative_and_large_scale_gpu(causal):
    check(1, 512, 1024, 4, 4, torch.bfloat16, causal, scale=-0.1)
    check(1, 256, 256, 2, 2, torch.float16, causal, scale=0.5)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_d256_repeatable_gpu(causal):
    """Launches again into the same buffers: dk / dv bitwise (deterministic), dq within fp32
    summation order."""
    q, k, v, dout, lse, delta, scale, _, _ = inputs(2, 1024, 1024, 4, 2, D, torch.bfloat16, causal)
    launch = prepare(q, k, v, dout, lse, delta, scale, causal)
    dq1, dk1, dv1 = (t.clone() for t in launch())
    for _ in range(3):
        dq2, dk2, dv2 = launch()
        assert torch.equal(dk1, dk2) and torch.equal(dv1, dv2)
        assert (dq1.float() - dq2.float()).abs().max().item() <= 1e-2 * dq1.float().abs().max().item()


@pytest.mark.gpu
@hopper
def test_d256_bwd_into_with_preprocess_gpu():
    """bwd_into (the route's form) with a delta preprocess run first: the same gradients as prepare
    with delta_of (dk / dv bitwise)."""
    q, k, v, dout, lse, delta, scale, truth, lowp = inputs(2, 512, 512, 4, 2, D, torch.bfloat16, False)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    delta2 = torch.full_like(delta, float("nan"))
    bwd_into(q, k, v, dout, lse, delta2, scale, False, dq, dk, dv, preprocess=lambda _: delta2.copy_(delta))
    ref = attention_bwd_d256(q, k, v, dout, lse, delta, scale, False)
    assert torch.equal(dk, ref[1]) and torch.equal(dv, ref[2])
    assert_close("dq", dq, truth[0], lowp[0], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_d256_route_plans_and_deterministic_gpu(monkeypatch, causal):
    """flash_attn_func at D = 256 with launch plans on (FLASHTRITON_PLANS=1; conftest turns them
    off elsewhere): deterministic=True takes the D = 256 Gluon backward's split path only (session 34,
    policy.GLUON_BWD_D256_SPLIT_DETERMINISTIC; the plans cleared after it); deterministic=False
    does, once (the launchers), then two more calls of the same signature with new inputs replay
    the forward's and the backward's plans (bwd_into not called again), every call's gradients
    within the repo criterion against float64 (a replay binding the first call's tensors would
    fail here). Review, session 32: the route's plan replay had no GPU test."""
    import flashtriton
    from flashtriton.launchers import backward
    from helpers import reference_pair

    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    seen = []
    run = backward_gluon_d256.bwd_into
    split = []
    monkeypatch.setattr(backward.backward_gluon_d256, "bwd_into",
                        lambda *a, **kw: (seen.append(a[7]), split.append(kw.get("split_dq")), run(*a, **kw)))
    n = policy.GLUON_BWD_D256_MIN_N["causal" if causal else "plain"]
    plans.clear()
    try:
        for det, seed in ((True, 0), (False, 1), (False, 2), (False, 3)):
            torch.manual_seed(seed)
            q, k, v = (t.requires_grad_() for t in rand_qkv(2, n, n, 4, 2, D, torch.bfloat16, "cuda"))
            dout = torch.randn_like(q)
            before = plans.stats["replayed"]
            out = flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=det)
            grads = torch.autograd.grad(out, (q, k, v), dout)
            if det:
                assert seen == [causal] and split == [True], "deterministic=True: not the split path"
            elif seed == 1:
                assert seen == [causal], seen
            else:
                assert seen == [causal], "the backward ran its launchers again instead of the plan"
                assert plans.stats["replayed"] == before + 2, "the forward's and backward's plans did not replay"
            truth, lowp = reference_pair(q, k, v, dout, softmax_scale=D ** -0.5, window_right=0 if causal else -1)
            for i, name in enumerate(("dq", "dk", "dv")):
                assert torch.isfinite(grads[i]).all(), name
                assert_close(name, grads[i], truth[name], lowp[name], 3, torch.bfloat16)
            if det:
                seen.clear()
                plans.clear()          # (the deterministic=False calls start from their launchers)
    finally:
        plans.clear()


@pytest.mark.gpu
@hopper
def test_regression_d256_scale_zero_library_call_gpu():
    """Regression (review, session 32; CPU: test_regression_d256_route_scale_zero): flash_attn_func
    at D = 256 and a routed length with softmax_scale=0.0 (valid: uniform attention, dq = dk = 0)
    raised ValueError from bwd_into's check; now the Triton route takes it and the gradients pass
    the reference criterion."""
    import flashtriton
    from helpers import reference_pair

    n = policy.GLUON_BWD_D256_MIN_N["plain"]
    q, k, v = (t.requires_grad_() for t in rand_qkv(1, n, n, 2, 2, D, torch.bfloat16, "cuda"))
    dout = torch.randn_like(q)
    out = flashtriton.flash_attn_func(q, k, v, softmax_scale=0.0, deterministic=False)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    truth, lowp = reference_pair(q, k, v, dout, softmax_scale=0.0)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)     # (the Gluon forward's)
    for i, name in enumerate(("dq", "dk", "dv")):
        assert_close(name, grads[i], truth[name], lowp[name], 3, torch.bfloat16)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal,packed", [(False, False), (True, False), (False, True)])
def test_d256_library_route_gpu(monkeypatch, causal, packed):
    """flash_attn_func's backward (deterministic=False) at D = 256 takes the kernel as routed
    (bwd_into seen by a spy), gradients by the repo criterion against float64; packed: q, k, v
    views of one (B, N, 3, H, D) tensor (rows with stride 3 * H * D: the descriptors read them in
    place) and GQA off."""
    import flashtriton
    from flashtriton import reference
    from flashtriton.launchers import backward

    seen = []
    run = backward_gluon_d256.bwd_into
    split = []
    monkeypatch.setattr(backward.backward_gluon_d256, "bwd_into",
                        lambda *a, **kw: (seen.append(a[7]), split.append(kw.get("split_dq")), run(*a, **kw)))
    n = policy.GLUON_BWD_D256_MIN_N["causal" if causal else "plain"]
    if packed:
        qkv = torch.randn(1, n, 3, 2, D, device="cuda", dtype=torch.bfloat16).requires_grad_()
        q, k, v = qkv.unbind(2)
        leaves = (qkv,)
    else:
        q, k, v = (t.requires_grad_() for t in rand_qkv(1, n, n, 4, 2, D, torch.bfloat16, "cuda"))
        leaves = (q, k, v)
    dout = torch.randn(q.shape, device="cuda", dtype=torch.bfloat16)
    out = flashtriton.flash_attn_func(q, k, v, causal=causal, deterministic=False)
    grads = torch.autograd.grad(out, leaves, dout)
    assert seen == [causal], "the D = 256 Gluon backward did not launch"
    if packed:
        grads = grads[0].unbind(2)
    kw = dict(softmax_scale=D ** -0.5, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout.double(), *(t.detach().double() for t in (q, k, v)), **kw)
    lowp = reference.attention_grad(dout, *(t.detach() for t in (q, k, v)), **kw)
    for i, name in enumerate(("dq", "dk", "dv")):
        assert_close(name, grads[i], truth[i], lowp[i], 3, torch.bfloat16)
