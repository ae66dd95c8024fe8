"""bwd.py's one-loop masked backward (kernels/bwd.py ONE_LOOP without RESUME; launchers/
backward.py BWD_MASKED_ONE_LOOP / bwd_one_loop): a masked call's dK/dV and dQ programs run
every tile in one loop, the mask applied to each, instead of masked / fully visible / masked
loops. A mask on a fully visible tile changes nothing, so under the interpreter the gradients
equal the loops' bitwise; on sm_90 the compiled body differs (within the reference check).
CPU: the rule, the interpreted kernels against the loops and the float64 reference.
GPU (marked): D = 256 causal at the grid's short lengths, ragged and Nq != Nk, and the
causal dK/dV tiles bench/gpu/s29_d256_causal_bwd_ab.py times."""
import pytest
import torch

from conftest import DEVICE, kernel_backends
from helpers import bwd_py_launches, check_attention, rand_qkv, triton_grads


def _launches(monkeypatch):
    """(kernel name, ONE_LOOP, RESUME) of every bwd.py dK/dV and dQ launch."""
    return bwd_py_launches(monkeypatch, lambda grid, kw: (bool(kw.get("ONE_LOOP")), bool(kw.get("RESUME"))))


# --- the rule (host side only) ---------------------------------------------------------

def test_one_loop_rule(monkeypatch):
    """bwd_one_loop: bwd.py's own launches of masked calls up to the (kernel, BLOCK_D)
    entry of BWD_MASKED_ONE_LOOP; resumed launches as RESUME_ONE_LOOP, whatever the table."""
    from flashtriton.launchers import backward
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {("dkdv", 256): 1024, ("dq", 256): 512})
    monkeypatch.setattr(backward, "RESUME_ONE_LOOP", {128})
    rule = backward.bwd_one_loop
    assert rule("dkdv", 256, True, False, 512, 512)
    assert rule("dkdv", 256, True, False, 1024, 700)
    assert not rule("dkdv", 256, True, False, 1025, 1024)  # longer than the entry
    assert not rule("dkdv", 256, True, False, 512, 2048)
    assert rule("dq", 256, True, False, 512, 512)
    assert not rule("dq", 256, True, False, 1024, 1024)    # each kernel its own entry
    assert not rule("dkdv", 256, False, False, 512, 512)   # unmasked: one loop already
    assert not rule("dkdv", 128, True, False, 512, 512)    # no entry for BLOCK_D 128
    assert rule("dq", 128, True, True, 512, 512)           # resumed: RESUME_ONE_LOOP's
    assert not rule("dkdv", 256, True, True, 512, 512)
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {})
    assert not rule("dkdv", 256, True, False, 512, 512)    # the table's off switch
    assert not rule("dq", 256, True, False, 512, 512)


def test_one_loop_default_table():
    """As measured on the H200 (bench/gpu/s29_d256_causal_bwd_ab.py, session 29): D = 256,
    both kernels, to 1k (at 2k the three loops are faster); no other head dim."""
    from flashtriton.launchers import backward
    assert backward.BWD_MASKED_ONE_LOOP == {("dkdv", 256): 1024, ("dq", 256): 1024}
    assert backward.bwd_one_loop("dkdv", 256, True, False, 1024, 1024)
    assert not backward.bwd_one_loop("dkdv", 256, True, False, 2048, 2048)
    assert not backward.bwd_one_loop("dq", 256, False, False, 512, 512)      # unmasked: never
    assert not backward.bwd_one_loop("dkdv", 128, True, False, 512, 512)


# --- the kernels, interpreted (or on the GPU: same tests) --------------------------------

CASES = [
    (2, 77, 77, (4, 4), 256, dict(causal=True)),               # ragged last blocks
    (1, 40, 100, (4, 2), 192, dict(causal=True)),              # GQA, Nq < Nk
    (1, 100, 40, (2, 1), 256, dict(causal=True)),              # MQA, Nq > Nk: rows that see nothing
    (1, 100, 70, (2, 1), 160, dict(window_size=(20, 5))),      # both window edges
    (1, 64, 64, (2, 2), 256, dict(causal=True, softcap=5.0)),
    (1, 64, 48, (2, 1), 192, dict(causal=True, dropout_p=0.2)),
]


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", CASES)
def test_one_loop_equals_loops(monkeypatch, b, nq, nk, heads, d, kw):
    """dq, dk, dv with one loop against the three loops: bitwise under the interpreter
    (close on a GPU), and both launches took ONE_LOOP."""
    from flashtriton.launchers import backward, common, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")           # bwd.py takes every call
    bd = common.block_d(d)
    h, hk = heads
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, DEVICE)
    dout = torch.randn(b, nq, h, d, dtype=torch.bfloat16, device=DEVICE)
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {})
    plans.clear()
    want = triton_grads(q, k, v, dout, **kw)
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {("dkdv", bd): 1 << 20, ("dq", bd): 1 << 20})
    plans.clear()
    launched = _launches(monkeypatch)
    got = triton_grads(q, k, v, dout, **kw)
    assert sorted(x[0] for x in launched) == ["dkdv", "dq"], launched
    assert all(one and not resume for _, one, resume in launched), launched
    for name, x, y in zip(("dq", "dk", "dv"), got, want):
        if DEVICE == "cpu":
            assert torch.equal(x, y), f"{name} differs from the three loops'"
        else:
            torch.testing.assert_close(x, y, atol=2e-2, rtol=2e-2, msg=f"{name} far from the three loops'")


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_one_loop_not_for_unmasked(monkeypatch):
    """A call without a mask keeps its launches (they have one loop already)."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {("dkdv", 256): 1 << 20, ("dq", 256): 1 << 20})
    plans.clear()
    launched = _launches(monkeypatch)
    q, k, v = rand_qkv(1, 50, 50, 2, 2, 256, torch.bfloat16, DEVICE)
    triton_grads(q, k, v, torch.randn_like(q))
    assert launched and not any(one for _, one, _ in launched), launched


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_one_loop_reference(monkeypatch):
    """One loop with the rows-first grids (dense) passes the float64 reference check, causal
    with GQA and Nq != Nk."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {("dkdv", 256): 4096, ("dq", 256): 4096})
    plans.clear()
    launched = _launches(monkeypatch)
    q, _, _ = rand_qkv(1, 90, 90, 4, 2, 256, torch.bfloat16, DEVICE)
    _, k, v = rand_qkv(1, 90, 130, 4, 2, 256, torch.bfloat16, DEVICE)
    check_attention("triton", q, k, v, causal=True, check_probs=False)
    assert launched and all(one for _, one, _ in launched), launched


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_one_loop_varlen_reference(monkeypatch):
    """Varlen causal calls (the (heads, block slots) grid) with one loop: the reference check,
    a zero-length sequence included."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {("dkdv", 256): 1 << 20, ("dq", 256): 1 << 20})
    plans.clear()
    launched = _launches(monkeypatch)
    cu = torch.tensor([0, 30, 30, 100], dtype=torch.int32, device=DEVICE)
    q, k, v = (torch.randn(100, 2, 256, dtype=torch.bfloat16, device=DEVICE) for _ in range(3))
    check_attention("triton", q, k, v, varlen=(cu, cu, 70, 70), causal=True, check_probs=False)
    assert launched and all(one for _, one, _ in launched), launched


# --- GPU: the shapes the change is for -----------------------------------------------------

# The causal dK/dV tiles the A/B times besides the short default (64, 32, 4, 2), as
# configs.DEFAULTS["dkdv_short_masked"][256] (None: no such entry, the default).
GPU_TILES = [None, (64, 64, 8, 2), (64, 32, 8, 2)]


@pytest.mark.gpu
@pytest.mark.parametrize("tile", GPU_TILES)
@pytest.mark.parametrize("nq,nk", [(512, 512), (1024, 1024), (700, 700), (512, 1024), (1024, 700)])
def test_one_loop_d256_gpu(monkeypatch, nq, nk, tile):
    """D = 256, H = 8, causal, bf16 (batch 2 of the grid's batches; 700: ragged last blocks;
    Nq != Nk both ways): one loop against the three loops (close) and the reference check,
    at the short dK/dV tile and the causal candidates."""
    from flashtriton.kernels import configs
    from flashtriton.launchers import backward, plans
    if tile is not None:
        monkeypatch.setitem(configs.DEFAULTS, "dkdv_short_masked", {256: configs.Tile(*tile)})
    b, h, d = 2, 8, 256
    q, _, _ = rand_qkv(b, nq, nq, h, h, d, torch.bfloat16, DEVICE)
    _, k, v = rand_qkv(b, nk, nk, h, h, d, torch.bfloat16, DEVICE)
    dout = torch.randn(b, nq, h, d, dtype=torch.bfloat16, device=DEVICE)
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {})
    plans.clear()
    # deterministic=True: bwd.py's kernels whatever policy.GLUON_BWD_D256_MIN_N["causal"] says
    # (the fused Gluon D = 256 backward takes deterministic=False calls from its length; its split
    # path deterministic=True ones too, switched off here)
    from flashtriton.launchers import policy
    monkeypatch.setattr(policy, "GLUON_BWD_D256_SPLIT_DETERMINISTIC", False)
    want = triton_grads(q, k, v, dout, causal=True, deterministic=True)
    monkeypatch.setattr(backward, "BWD_MASKED_ONE_LOOP", {("dkdv", 256): 4096, ("dq", 256): 4096})
    plans.clear()
    launched = _launches(monkeypatch)
    got = triton_grads(q, k, v, dout, causal=True, deterministic=True)
    assert sorted(x[0] for x in launched) == ["dkdv", "dq"] and all(one for _, one, _ in launched), launched
    for name, x, y in zip(("dq", "dk", "dv"), got, want):
        assert torch.isfinite(x).all(), name
        torch.testing.assert_close(x, y, atol=2e-2, rtol=2e-2, msg=f"{name} far from the three loops'")
    check_attention("triton", q[:1], k[:1], v[:1], causal=True, check_probs=False)
    plans.clear()
