"""kernels/fwd_gluon.py's ONE_LOOP (session 39, offline): the CAUSAL one-block forward's consumers run their fully
visible and diagonal key tiles in one loop, the mask by a uniform branch in the step (_consume_tile's MIXED), instead
of two loops. Why: the bf16 P carried from the first loop into the second became 64 16-bit values that ptxas
repacked with 32 PRMT in every step (offline sm_90a: unmasked step 490 -> 461 SASS a warp at D = 128, 451 -> 420 at
D = 64 with three consumers; bench/NOTES.md "Session 39"). Host side launchers/forward_gluon.py (check_one_loop,
prepare / attention_fwd_gluon's one_loop); not routed.

CPU: validation before any launch; the launch arguments (ONE_LOOP only where asked and causal). GPU (Hopper):
outputs BITWISE the two-loop kernel's (the same arithmetic for every tile) and within the float64 criterion, with
two consumers (D = 128, D = 256 with OWN_TILES) and three (D = 64), Nq != Nk both ways (rows that see no key),
GQA, a negative scale, fp16; outputs NaN-poisoned before each call (conftest).
"""
import contextlib

import pytest
import torch

from flashtriton.launchers import forward_gluon
from flashtriton.launchers.forward_gluon import attention_fwd_gluon, check_one_loop

from helpers import rand_qkv
from test_fwd_gluon import check, hopper


# ---------------------------------------------------------------------------------------
# CPU: validation, launch arguments
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, msg", [
    (dict(one_loop=1), r"^one_loop: expected a bool, got 1"),
    (dict(one_loop=True, causal=False), r"^one_loop=True: the causal forward one block a CTA only"),
    (dict(one_loop=True, causal=True, persistent=True), r"^one_loop=True: the causal forward one block"),
    (dict(one_loop=True, causal=True, window=(64, 0)), r"^one_loop=True: the causal forward one block"),
    (dict(one_loop=True, causal=True, pingpong=True), r"^one_loop=True: the causal forward one block"),
    (dict(one_loop=True, causal=True, dropout_p=0.1), r"^one_loop=True: the causal forward one block"),
])
def test_one_loop_rejected_before_any_launch(kw, msg):
    args = dict(one_loop=False, causal=False, window=None, persistent=False, pingpong=False, dropout_p=0.0)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        check_one_loop(**args)
    q, k, v = rand_qkv(1, 256, 256, 2, 2, 128, torch.bfloat16, "cpu")
    if "dropout_p" not in kw:                    # through prepare, on CPU tensors, before the device check
        with pytest.raises(ValueError, match=msg):
            forward_gluon.prepare(q, k, v, 0.1, **kw)


@pytest.mark.parametrize("causal, one_loop, want", [(True, True, True), (True, False, False), (False, True, False)])
def test_one_loop_launch_arguments(monkeypatch, causal, one_loop, want):
    """_launch_into passes ONE_LOOP=True only for a causal call that asks for it (absent otherwise: the kernel's
    constexpr default, the launch of before)."""
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(forward_gluon.plans, "launch", lambda kernel, grid, *a, **k: got.append(k))
    q, k, v = rand_qkv(1, 256, 256, 2, 2, 128, torch.bfloat16, "cpu")
    o, lse = torch.empty_like(q), torch.empty(1, 2, 256)
    forward_gluon._launch_into(q, k, v, o, lse, 0.1, 128, 128, 3, False, causal=causal, one_loop=one_loop)()
    assert len(got) == 1 and got[0].get("ONE_LOOP", False) is want and got[0]["CAUSAL"] is causal


# ---------------------------------------------------------------------------------------
# GPU (Hopper): bitwise the two-loop kernel, and the reference
# ---------------------------------------------------------------------------------------
_SHAPES = [
    (2, 512, 512, 8, 8),
    (1, 128, 128, 2, 2),        # one block: the peel and at most the diagonal
    (1, 1024, 1024, 4, 2),      # GQA
    (1, 384, 768, 4, 1),        # Nq < Nk
    (2, 768, 384, 4, 4),        # Nq > Nk: rows that see no key
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, kw", [(128, {}), (64, dict(num_consumers=3)), (256, dict(own_tiles=True))])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("b, nq, nk, h, hk", _SHAPES)
def test_one_loop_bitwise_gpu(d, kw, dtype, b, nq, nk, h, hk):
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, "cuda")
    o1, lse1 = check(q, k, v, causal=True, one_loop=True, **kw)
    o2, lse2 = attention_fwd_gluon(q, k, v, d ** -0.5, causal=True, **kw)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d, kw", [(128, {}), (64, dict(num_consumers=3)), (128, dict(block_n=64, num_stages=4))])
def test_one_loop_negative_scale_bitwise_gpu(d, kw):
    q, k, v = rand_qkv(2, 768, 896, 4, 2, d, torch.bfloat16, "cuda")
    o1, lse1 = check(q, k, v, scale=-0.05, causal=True, one_loop=True, **kw)
    o2, lse2 = attention_fwd_gluon(q, k, v, -0.05, causal=True, **kw)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
