"""bwd.py's rows-first backward grids (kernels/bwd.py ROWS_FIRST, launchers/backward.py
BWD_ROWS_FIRST / bwd_rows_first): a dense call's dK/dV and dQ launches as one 1-D grid whose
consecutive programs are one head's blocks. Each program computes what it computed on the
(B * H, blocks) grid, so the gradients are bitwise equal; the rule is host-side only.
CPU: the rule, and the interpreted kernels against the 2-D grid and the float64 reference.
GPU (marked): D = 256 at the grid's shapes, bitwise against the 2-D grid and the reference."""
import pytest
import torch

from conftest import DEVICE, kernel_backends
from helpers import bwd_py_launches, check_attention, rand_qkv, triton_grads


def _launches(monkeypatch):
    """(kernel name, grid, ROWS_FIRST) of every bwd.py dK/dV and dQ launch."""
    return bwd_py_launches(monkeypatch, lambda grid, kw: (tuple(grid), bool(kw.get("ROWS_FIRST"))))


# --- the rule (host side only) ---------------------------------------------------------

def test_rows_first_rule(monkeypatch):
    """bwd_rows_first: dense, not resumed, both lengths positive, max(Nq, Nk) within the
    BLOCK_D's BWD_ROWS_FIRST entry; absent BLOCK_Ds never."""
    from flashtriton.launchers import backward
    monkeypatch.setattr(backward, "BWD_ROWS_FIRST", {256: 4096})
    rule = backward.bwd_rows_first
    assert rule(256, False, False, 512, 512)
    assert rule(256, False, False, 4096, 4096)
    assert rule(256, False, False, 100, 4096)
    assert not rule(256, False, False, 4097, 512)          # longer than the entry
    assert not rule(256, False, False, 512, 8192)
    assert not rule(256, True, False, 512, 512)            # varlen: its grid maps sequences
    assert not rule(256, False, True, 512, 512)            # the split path's resumed launches
    assert not rule(256, False, False, 0, 512)             # an empty side: the 2-D grid, as before
    assert not rule(128, False, False, 512, 512)           # no entry for BLOCK_D 128
    monkeypatch.setattr(backward, "BWD_ROWS_FIRST", {})
    assert not rule(256, False, False, 512, 512)           # the table's off switch


def test_rows_first_default_table():
    """The shipped default: D = 256 (head dims 129..256) up to 4k, nothing else (D = 64 /
    128 backwards mostly run the Gluon / warp-specialized kernels; not measured there)."""
    from flashtriton.launchers import backward
    assert backward.BWD_ROWS_FIRST == {256: 4096}


# --- the kernels, interpreted (or on the GPU: same tests) --------------------------------

CASES = [
    (2, 77, 77, (4, 4), 256, dict()),                          # ragged last blocks
    (2, 77, 77, (4, 4), 256, dict(causal=True)),
    (1, 40, 100, (4, 2), 192, dict(causal=True)),              # GQA, Nq < Nk
    (1, 100, 40, (2, 1), 160, dict(window_size=(20, 5))),      # MQA, Nq > Nk, window
    (1, 64, 64, (2, 2), 256, dict(softcap=5.0)),
    (1, 64, 48, (2, 1), 192, dict(dropout_p=0.2)),
]


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", CASES)
def test_rows_first_bitwise_equal(monkeypatch, b, nq, nk, heads, d, kw):
    """dq, dk, dv with the rows-first grids equal the (B * H, blocks) grids' bitwise, and
    both launches took it (a 1-D grid of B * heads * blocks, ROWS_FIRST=True)."""
    from flashtriton.launchers import backward, common, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")           # bwd.py takes every call
    bd = common.block_d(d)
    h, hk = heads
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, DEVICE)
    dout = torch.randn(b, nq, h, d, dtype=torch.bfloat16, device=DEVICE)
    monkeypatch.setattr(backward, "BWD_ROWS_FIRST", {})
    plans.clear()
    want = triton_grads(q, k, v, dout, **kw)
    monkeypatch.setattr(backward, "BWD_ROWS_FIRST", {bd: 1 << 20})
    plans.clear()
    launched = _launches(monkeypatch)
    got = triton_grads(q, k, v, dout, **kw)
    assert sorted(x[0] for x in launched) == ["dkdv", "dq"], launched
    for name, grid, rows_first in launched:
        assert rows_first and len(grid) == 1, launched
    for name, x, y in zip(("dq", "dk", "dv"), got, want):
        assert torch.equal(x, y), f"{name} differs from the 2-D grid's"


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_rows_first_grid_sizes(monkeypatch):
    """The 1-D grids hold as many programs as the 2-D ones: B * Hk * key blocks (dK/dV) and
    B * H * query blocks (dQ), at the launch's own tile (the interpreter's 32 x 32)."""
    from flashtriton.kernels import configs
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    b, nq, nk, h, hk, d = 2, 70, 100, 4, 2, 256
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, DEVICE)
    dout = torch.randn(b, nq, h, d, dtype=torch.bfloat16, device=DEVICE)
    grids = {}
    for table in ({}, {256: 1 << 20}):
        monkeypatch.setattr(backward, "BWD_ROWS_FIRST", table)
        plans.clear()
        launched = _launches(monkeypatch)
        triton_grads(q, k, v, dout)
        grids[bool(table)] = {name: grid for name, grid, _ in launched}
    if DEVICE == "cpu":
        t = configs.INTERPRETER_TILE
        assert grids[False] == {"dkdv": (b * hk, -(-nk // t.block_n)), "dq": (b * h, -(-nq // t.block_m))}
    for name in ("dkdv", "dq"):
        two = grids[False][name]
        assert grids[True][name] == (two[0] * two[1],), grids


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_rows_first_reference(monkeypatch):
    """The rows-first backward (the default table at D = 256) passes the float64 reference
    check, causal with GQA."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    monkeypatch.setattr(backward, "BWD_ROWS_FIRST", {256: 4096})
    plans.clear()
    launched = _launches(monkeypatch)
    q, k, v = rand_qkv(1, 90, 90, 4, 2, 256, torch.bfloat16, DEVICE)
    check_attention("triton", q, k, v, causal=True, check_probs=False)
    assert launched and all(rf for _, _, rf in launched), launched


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_rows_first_not_for_varlen(monkeypatch):
    """Varlen calls keep their (heads, block slots) grid (cu_blocks maps the slots)."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    monkeypatch.setattr(backward, "BWD_ROWS_FIRST", {256: 1 << 20})
    plans.clear()
    launched = _launches(monkeypatch)
    seqlens = [30, 70]
    cu = torch.tensor([0, 30, 100], dtype=torch.int32, device=DEVICE)
    q, k, v = (torch.randn(100, 2, 256, dtype=torch.bfloat16, device=DEVICE) for _ in range(3))
    check_attention("triton", q, k, v, varlen=(cu, cu, max(seqlens), max(seqlens)), causal=True, check_probs=False)
    assert launched and all(not rf and len(grid) == 2 for _, grid, rf in launched), launched


def test_regression_d256_gpu_cases_need_deterministic(monkeypatch):
    """Regression (review, session 32): test_rows_first_d256_gpu ran flash_attn_func with its
    default deterministic=False at D = 256, N = 1k / 2k; since session 32 those calls take the
    fused Gluon D = 256 backward on Hopper (policy.gluon_bwd_d256), so no bwd.py launch was seen
    and the test would fail on the next GPU run. Its calls now pass deterministic=True, which the
    rule never routes. CPU: the rule at the GPU test's shapes, the switch patched."""
    from flashtriton.launchers import common, policy
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    # (since session 34 deterministic=True calls take the D = 256 split path unless this is off,
    # as test_rows_first_d256_gpu sets it)
    monkeypatch.setattr(policy, "GLUON_BWD_D256_SPLIT_DETERMINISTIC", False)
    routed = []
    for n in (512, 1024, 2048, 700):
        for causal in (False, True):
            q, k, v = rand_qkv(2, n, n, 8, 8, 256, torch.bfloat16, "cpu")
            lse = torch.zeros(2, 8, n)
            for det in (False, True):
                params = common.AttnParams(256 ** -0.5, window_right=0 if causal else -1, deterministic=det)
                if policy.gluon_bwd_d256(q, k, v, q, lse, params, None, False, 256, n, n):
                    assert not det, (n, causal)
                    routed.append((n, causal))
    assert (1024, False) in routed and (2048, True) in routed, routed   # why the GPU test needs the flag


# --- GPU: the shapes the change is for -----------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("n", [512, 1024, 2048, 700])
@pytest.mark.parametrize("causal", [False, True])
def test_rows_first_d256_gpu(monkeypatch, n, causal):
    """D = 256, H = 8, the grid's tiles ((64, 32, 4, 2) up to 1k, (128, 64, 8, 1) beyond;
    dQ (128, 32, 8, 3)): rows first bitwise equal to the 2-D grid, and the reference check
    (batch 2 of the grid's 16k-token batches; 700: ragged last blocks). deterministic=True: since
    session 32 deterministic=False D = 256 calls from 1k (causal 2k) take the fused Gluon
    backward (policy.GLUON_BWD_D256_MIN_N), which launches no bwd.py kernel
    (test_regression_d256_gpu_cases_need_deterministic); and since session 34 the split path takes
    deterministic=True calls too unless policy.GLUON_BWD_D256_SPLIT_DETERMINISTIC is off (set here)."""
    from flashtriton.launchers import backward, plans, policy
    monkeypatch.setattr(policy, "GLUON_BWD_D256_SPLIT_DETERMINISTIC", False)
    b, h, d = 2, 8, 256
    q, k, v = rand_qkv(b, n, n, h, h, d, torch.bfloat16, DEVICE)
    dout = torch.randn(b, n, h, d, dtype=torch.bfloat16, device=DEVICE)
    monkeypatch.setattr(backward, "BWD_ROWS_FIRST", {})
    plans.clear()
    want = triton_grads(q, k, v, dout, causal=causal, deterministic=True)
    monkeypatch.setattr(backward, "BWD_ROWS_FIRST", {256: 4096})
    plans.clear()
    launched = _launches(monkeypatch)
    got = triton_grads(q, k, v, dout, causal=causal, deterministic=True)
    assert sorted(x[0] for x in launched) == ["dkdv", "dq"] and all(rf for _, _, rf in launched), launched
    for name, x, y in zip(("dq", "dk", "dv"), got, want):
        assert torch.equal(x, y), f"{name} differs from the 2-D grid's"
    check_attention("triton", q[:1], k[:1], v[:1], causal=causal, check_probs=False)


@pytest.mark.gpu
def test_rows_first_d256_gqa_dropout_gpu(monkeypatch):
    """GQA with dropout at D = 256 (the dK/dV kernel's column keys by its own key block):
    bitwise the 2-D grid."""
    from flashtriton.launchers import backward, plans
    q, k, v = rand_qkv(2, 1024, 1024, 8, 2, 256, torch.bfloat16, DEVICE)
    dout = torch.randn(2, 1024, 8, 256, dtype=torch.bfloat16, device=DEVICE)
    res = []
    for table in ({}, {256: 4096}):
        monkeypatch.setattr(backward, "BWD_ROWS_FIRST", table)
        plans.clear()
        res.append(triton_grads(q, k, v, dout, causal=True, dropout_p=0.1))
    for name, x, y in zip(("dq", "dk", "dv"), *res):
        assert torch.equal(x, y), f"{name} differs from the 2-D grid's"
