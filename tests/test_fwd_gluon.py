"""kernels/fwd_gluon.py: the hand-scheduled Gluon forward (host side launchers/
forward_gluon.py; the library routes unmasked dense D = 128 forwards from N = 1k and
D = 64 from 2k there (persistent), and causal D = 128 and D = 64 from 4k:
launchers.policy.gluon_fwd, GLUON_FWD_MIN_N, GLUON_FWD_CAUSAL_MIN_N, GLUON_FWD_PERSISTENT). Its kernel needs a Hopper GPU: Gluon kernels do not run
under the Triton interpreter (gluon.jit makes no interpreted function; a launch looks
for a GPU driver), so the numeric tests are GPU-only (sm_90). The launcher's validation
and the routing rule need no GPU and run everywhere; so does the DROPOUT variant's mask
arithmetic (its own functions under the interpreter against the library's mask kernel and
a numpy model, bitwise: test_dropout_mask_arithmetic_matches_library).

Criterion (tests/helpers.py): error against float64 at most 2x PyTorch's same-dtype
error, outputs poisoned (NaN) before the call by the autouse fixture (memory.empty).
"""
import math

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import common, forward_gluon, policy
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE, HAS_CUDA
from helpers import assert_close, check_attention, rand_qkv, reference_pair, spy

IS_HOPPER = HAS_CUDA and torch.cuda.get_device_capability()[0] == 9
hopper = pytest.mark.skipif(not IS_HOPPER, reason="needs a Hopper GPU (compute capability 9.x)")


def check(q, k, v, scale=None, causal=False, window=None, **kw):
    """One call (bottom-right causal when causal, the sliding window (left, right) when
    window) against the float64 reference; returns (o, lse). Rows that see no key
    (causal, Nq > Nk; window, Nq > Nk + right) must give O = 0 and lse = +inf."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    o, lse = attention_fwd_gluon(q, k, v, scale, causal=causal, window=window, **kw)
    b, nq, h, d = q.shape
    assert o.shape == q.shape and o.dtype == q.dtype
    assert lse.shape == (b, h, nq) and lse.dtype == torch.float32
    left, right = window if window is not None else (-1, -1)
    right = 0 if causal else right
    truth, lowp = reference_pair(q, k, v, softmax_scale=scale, window_left=left, window_right=right)
    assert torch.isfinite(o).all() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) or non-finite output"
    assert torch.equal(torch.isposinf(lse).cpu(), torch.isinf(truth["lse"]).cpu()), "lse +inf exactly where no key"
    assert_close("out", o, truth["out"], lowp["out"], 2, q.dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, q.dtype)
    return o, lse


# ---------------------------------------------------------------------------------------
# GPU (Hopper): numerics
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, n", [(1, 128), (2, 1024), (1, 4096)])
def test_matches_reference_gpu(dtype, d, b, n):
    check(*rand_qkv(b, n, n, 4, 4, d, dtype, "cuda"))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (1024, 256), (128, 2048)])
def test_nq_differs_from_nk_gpu(dtype, nq, nk):
    check(*rand_qkv(2, nq, nk, 4, 4, 128, dtype, "cuda"))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
def test_gqa_gpu(dtype, d):
    check(*rand_qkv(2, 1024, 1024, 8, 2, d, dtype, "cuda"))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_repeatable_gpu(dtype):
    q, k, v = rand_qkv(2, 1024, 1024, 8, 2, 128, dtype, "cuda")
    o1, lse1 = attention_fwd_gluon(q, k, v, 0.088)
    o2, lse2 = attention_fwd_gluon(q, k, v, 0.088)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("cfg", [dict(block_n=64, num_stages=4), dict(num_stages=3), dict(pingpong=True),
                                 dict(block_n=64, num_stages=4, pingpong=True)])
def test_configs_gpu(cfg):
    """The A/B script's other configurations (bench/gpu/s23_gluon_fwd_ab.py)."""
    check(*rand_qkv(2, 2048, 2048, 4, 2, 128, torch.bfloat16, "cuda"), **cfg)


@pytest.mark.gpu
@hopper
def test_negative_and_large_scale_gpu():
    q, k, v = rand_qkv(1, 512, 1024, 4, 4, 128, torch.bfloat16, "cuda")
    check(q, k, v, scale=-0.1)
    check(q, k, v, scale=0.5)


@pytest.mark.gpu
@hopper
def test_strided_inputs_gpu():
    """q / k / v views of a packed qkv (heads contiguous: the 2-D descriptor view without a
    copy) and of a (B, H, N, D) tensor (made contiguous by the launcher)."""
    b, n, h, d = 2, 512, 4, 128
    qkv = torch.randn(b, n, 3, h, d, dtype=torch.bfloat16, device="cuda")
    check(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2])
    bhnd = torch.randn(3, b, h, n, d, dtype=torch.float16, device="cuda")
    check(*(x.transpose(1, 2) for x in bhnd))


# ---------------------------------------------------------------------------------------
# GPU (Hopper): causal (CAUSAL: fully visible tiles unmasked, diagonal tiles masked)
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, nq, nk", [(1, 128, 128), (2, 1024, 1024), (1, 1024, 2048), (1, 4096, 4096)])
def test_causal_matches_reference_gpu(dtype, d, b, nq, nk):
    check(*rand_qkv(b, nq, nk, 4, 4, d, dtype, "cuda"), causal=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(1024, 1024), (512, 2048)])
def test_causal_gqa_gpu(dtype, d, nq, nk):
    check(*rand_qkv(2, nq, nk, 8, 2, d, dtype, "cuda"), causal=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(2048, 1024), (1024, 256), (1024, 128)])
def test_causal_rows_without_keys_gpu(d, nq, nk):
    """Nq > Nk: the first Nq - Nk query rows see no key (O = 0, lse = +inf), whole CTAs of
    them included (which still load and mask tile 0)."""
    o, lse = check(*rand_qkv(2, nq, nk, 4, 2, d, torch.bfloat16, "cuda"), causal=True)
    assert (o[:, :nq - nk] == 0).all() and torch.isposinf(lse[:, :, :nq - nk]).all()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("cfg", [dict(block_n=64, num_stages=4), dict(pingpong=True), dict(num_stages=2),
                                 dict(block_n=64, num_stages=4, pingpong=True)])
@pytest.mark.parametrize("nq, nk", [(2048, 2048), (1024, 1536), (1536, 1024)])
def test_causal_configs_gpu(cfg, nq, nk):
    """BLOCK_N = 64: the upper warpgroup's last tile is hidden from all its rows (masked,
    still released); PINGPONG: the turn barriers across both loops; 2 stages: the ring's
    phases flip every other tile across the loops' boundary."""
    check(*rand_qkv(2, nq, nk, 4, 2, 128, torch.bfloat16, "cuda"), causal=True, **cfg)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
def test_causal_negative_and_large_scale_gpu(d):
    q, k, v = rand_qkv(1, 512, 1024, 4, 4, d, torch.bfloat16, "cuda")
    check(q, k, v, scale=-0.1, causal=True)
    check(q, k, v, scale=0.5, causal=True)


@pytest.mark.gpu
@hopper
def test_causal_repeatable_gpu():
    q, k, v = rand_qkv(2, 2048, 2048, 8, 2, 128, torch.bfloat16, "cuda")
    o1, lse1 = attention_fwd_gluon(q, k, v, 0.088, causal=True)
    o2, lse2 = attention_fwd_gluon(q, k, v, 0.088, causal=True)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)


# ---------------------------------------------------------------------------------------
# GPU (Hopper): PERSISTENT against the one-block-a-CTA kernel. Both run the same per-block
# code in the same order (only the barrier phases and the block a CTA takes differ), so
# outputs and lse must be bitwise equal; num_programs small (every CTA loops over many
# blocks, the ring's and q_free's phases wrap many times) and the SM count (default)
# ---------------------------------------------------------------------------------------
def persistent_pair(q, k, v, scale, causal, num_programs):
    o1, lse1 = attention_fwd_gluon(q, k, v, scale, causal=causal)
    o2, lse2 = attention_fwd_gluon(q, k, v, scale, causal=causal, persistent=True, num_programs=num_programs)
    assert torch.isfinite(o2).all() and not torch.isnan(lse2).any(), "unwritten (NaN-poisoned) output"
    assert torch.equal(o1, o2), f"out differs: max {(o1.float() - o2.float()).abs().max().item()}"
    assert torch.equal(lse1, lse2), "lse differs"
    return o2, lse2


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, n", [(2, 1024), (1, 4096), (4, 4096)])   # the last: 512 blocks > 132 SMs
@pytest.mark.parametrize("num_programs", [None, 7, 1])
def test_persistent_bitwise_gpu(causal, d, b, n, num_programs):
    q, k, v = rand_qkv(b, n, n, 4, 4, d, torch.bfloat16, "cuda")
    persistent_pair(q, k, v, d ** -0.5, causal, num_programs)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (1024, 256), (128, 2048), (384, 1280)])
@pytest.mark.parametrize("num_programs", [None, 7])
def test_persistent_gqa_nq_nk_gpu(causal, nq, nk, num_programs):
    """GQA (8 query heads on 2 K / V heads), Nq != Nk (causal Nq > Nk: rows without keys,
    O = 0 and lse = +inf, in both), fp16; also against the float64 reference."""
    q, k, v = rand_qkv(2, nq, nk, 8, 2, 128, torch.float16, "cuda")
    persistent_pair(q, k, v, 0.088, causal, num_programs)
    check(q, k, v, scale=0.088, causal=causal, persistent=True, num_programs=num_programs)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_persistent_reference_and_repeatable_gpu(causal):
    """More CTAs asked than blocks (the launcher clamps the grid), a negative scale, and
    repeated launches from one prepare() (the barriers start fresh every launch)."""
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, "cuda")
    check(q, k, v, scale=-0.1, causal=causal, persistent=True, num_programs=1000)
    q, k, v = rand_qkv(3, 1024, 1024, 6, 3, 128, torch.bfloat16, "cuda")
    launch = forward_gluon.prepare(q, k, v, 0.088, causal=causal, persistent=True, num_programs=5)
    o1, lse1 = (t.clone() for t in launch())
    o2, lse2 = launch()
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
    persistent_pair(q, k, v, 0.088, causal, 5)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("band", [1, 3, 64, 2 ** 28])
@pytest.mark.parametrize("num_programs", [None, 5])
def test_persistent_causal_bands_gpu(band, num_programs):
    """The banded causal order (kernels/fwd_gluon.py _tile_of): bands of 1, of 3 (5 batch x
    heads, so the last band is narrower) and wider than B * H give the one-block result
    bitwise (only the order of the blocks changes). Regression (review, session 24): band =
    2^28 wrapped n_m * band in the kernel's int32 (a negative pid_bh, an lse store before
    the buffer); the launcher now caps band at B * H."""
    q, k, v = rand_qkv(1, 1024, 1024, 5, 5, 128, torch.bfloat16, "cuda")
    o1, lse1 = attention_fwd_gluon(q, k, v, 0.088, causal=True)
    o2, lse2 = attention_fwd_gluon(q, k, v, 0.088, causal=True, persistent=True, num_programs=num_programs,
                                   band=band)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 1024, 1024, 4, 4), (1, 2048, 1024, 8, 2), (2, 1024, 2048, 6, 3),
                                              (1, 4096, 4096, 3, 1)])
@pytest.mark.parametrize("num_programs", [None, 5])
def test_persistent_scheduled_bitwise_gpu(d, b, nq, nk, h, hk, num_programs):
    """SCHEDULED (the host's longest-first deal, launchers/schedule.py): the one-block
    kernel's result bitwise, Nq > Nk (rows without keys) and Nq < Nk, GQA, few CTAs (long
    lists) and the SM count; repeated launches from one prepare()."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, "cuda")
    o1, lse1 = attention_fwd_gluon(q, k, v, 0.088, causal=True)
    launch = forward_gluon.prepare(q, k, v, 0.088, causal=True, persistent=True, num_programs=num_programs,
                                   scheduled=True)
    o2, lse2 = (t.clone() for t in launch())
    o3, lse3 = launch()
    assert torch.isfinite(o2).all() and not torch.isnan(lse2).any(), "unwritten (NaN-poisoned) output"
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
    assert torch.equal(o2, o3) and torch.equal(lse2, lse3)


@pytest.mark.gpu
@hopper
def test_persistent_scheduled_reference_gpu():
    """SCHEDULED against the float64 reference (fp16, a negative scale, GQA)."""
    q, k, v = rand_qkv(2, 1024, 1536, 8, 2, 128, torch.float16, "cuda")
    check(q, k, v, scale=-0.07, causal=True, persistent=True, num_programs=9, scheduled=True)


@pytest.mark.gpu
@hopper
def test_causal_band_sizes_gpu():
    """causal_band: half the L2 over one KV head's K / V (shared by a GQA group), in [1, n_bh]."""
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    per_head = 2 * 16384 * 128 * 2
    assert forward_gluon.causal_band(dev, 16384, 128, 1, 2, 64) == max(1, int(l2 * 0.5 // per_head))
    assert forward_gluon.causal_band(dev, 16384, 128, 4, 2, 64) == min(64, max(1, int(l2 * 0.5 * 4 // per_head)))
    assert forward_gluon.causal_band(dev, 1 << 22, 128, 1, 2, 64) == 1
    assert forward_gluon.causal_band(dev, 128, 64, 1, 2, 7) == 7


# ---------------------------------------------------------------------------------------
# GPU (Hopper): sliding window (WINDOW: [left-edge masked][unmasked][diagonal masked]
# tiles a warpgroup; session 25, written offline). Rows that see no key appear when
# Nq > Nk + right; windows not tile-aligned, right edges, GQA, PERSISTENT bitwise
# against one block a CTA with few CTAs (the ring's phases wrap across blocks of
# varying n_load)
# ---------------------------------------------------------------------------------------
WINDOWS = [(1024, 0), (100, 0), (256, 64), (0, 0), (127, 129), (-1, 100), (300, -1)]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("window", WINDOWS)
def test_window_matches_reference_gpu(persistent, dtype, d, window):
    check(*rand_qkv(2, 2048, 2048, 4, 4, d, dtype, "cuda"), window=window, persistent=persistent)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("window", [(1024, 0), (100, 0), (256, 64), (1000, 3)])
@pytest.mark.parametrize("nq, nk", [(256, 1024), (128, 2048), (1024, 256), (2048, 1024), (1024, 128), (384, 1280)])
def test_window_gqa_nq_nk_gpu(persistent, d, window, nq, nk):
    """GQA (8 query heads on 2 K / V heads), fp16, Nq < Nk and Nq > Nk (the first
    Nq - Nk - right rows see no key: O = 0, lse = +inf; whole blocks of them load tile 0
    and mask it all), persistent with 7 CTAs."""
    q, k, v = rand_qkv(2, nq, nk, 8, 2, d, torch.float16, "cuda")
    kw = dict(persistent=True, num_programs=7) if persistent else {}
    o, lse = check(q, k, v, scale=0.088, window=window, **kw)
    hidden = max(0, nq - nk - window[1])
    assert (o[:, :hidden] == 0).all() and torch.isposinf(lse[:, :, :hidden]).all()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", [(1024, 0), (100, 0), (256, 64)])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, n", [(2, 1024), (1, 4096)])
@pytest.mark.parametrize("num_programs", [None, 7, 1])
def test_window_persistent_bitwise_gpu(window, d, b, n, num_programs):
    """PERSISTENT runs the same per-block code in the same order as one block a CTA:
    outputs and lse bitwise equal."""
    q, k, v = rand_qkv(b, n, n, 4, 4, d, torch.bfloat16, "cuda")
    o1, lse1 = attention_fwd_gluon(q, k, v, d ** -0.5, window=window)
    o2, lse2 = attention_fwd_gluon(q, k, v, d ** -0.5, window=window, persistent=True, num_programs=num_programs)
    assert torch.isfinite(o2).all() and not torch.isnan(lse2).any(), "unwritten (NaN-poisoned) output"
    assert torch.equal(o1, o2), f"out differs: max {(o1.float() - o2.float()).abs().max().item()}"
    assert torch.equal(lse1, lse2), "lse differs"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("cfg", [dict(block_n=64, num_stages=4), dict(pingpong=True), dict(num_stages=2),
                                 dict(block_n=64, num_stages=4, pingpong=True),
                                 dict(block_n=64, num_stages=4, persistent=True, num_programs=5)])
@pytest.mark.parametrize("window", [(100, 0), (256, 64), (64, 64)])
@pytest.mark.parametrize("nq, nk", [(2048, 2048), (1024, 1536), (1536, 1024)])
def test_window_configs_gpu(cfg, window, nq, nk):
    """BLOCK_N = 64 (several masked tiles a warpgroup at each edge, tiles hidden from a
    whole warpgroup), PINGPONG (the turn barriers across three loops), 2 stages (the
    ring's phases flip every other tile across the loops' boundaries)."""
    check(*rand_qkv(2, nq, nk, 4, 2, 128, torch.bfloat16, "cuda"), window=window, **cfg)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
def test_window_negative_and_large_scale_gpu(d):
    q, k, v = rand_qkv(1, 512, 1024, 4, 4, d, torch.bfloat16, "cuda")
    for window in ((100, 0), (200, 50)):
        check(q, k, v, scale=-0.1, window=window)
        check(q, k, v, scale=0.5, window=window, persistent=True, num_programs=3)


@pytest.mark.gpu
@hopper
def test_window_degenerate_forms_gpu():
    """window_args' rewrites give the other kernels' results bitwise: (-1, -1) the plain,
    (-1, 0) and a left edge past every key the causal; causal=True with (left, -1) is the
    window (left, 0); and repeated launches from one prepare() agree."""
    q, k, v = rand_qkv(2, 1024, 1024, 4, 2, 128, torch.bfloat16, "cuda")
    plain = attention_fwd_gluon(q, k, v, 0.088)
    causal = attention_fwd_gluon(q, k, v, 0.088, causal=True)
    for got, want in ((attention_fwd_gluon(q, k, v, 0.088, window=(-1, -1)), plain),
                      (attention_fwd_gluon(q, k, v, 0.088, window=(-1, 0)), causal),
                      (attention_fwd_gluon(q, k, v, 0.088, window=(1023, 0)), causal),
                      (attention_fwd_gluon(q, k, v, 0.088, causal=True, window=(100, -1)),
                       attention_fwd_gluon(q, k, v, 0.088, window=(100, 0)))):
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    launch = forward_gluon.prepare(q, k, v, 0.088, window=(100, 0), persistent=True, num_programs=5)
    o1, lse1 = (t.clone() for t in launch())
    o2, lse2 = launch()
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("persistent", [False, True])
def test_window_kernel_unbounded_left_is_causal_gpu(monkeypatch, persistent):
    """(review, session 24) The WINDOW kernel itself with a left edge past every key (forced:
    window_args would send that call to CAUSAL) runs CAUSAL's tiles, split and operations:
    bitwise CAUSAL's result. Nq > Nk too (rows without keys)."""
    q, k, v = rand_qkv(2, 1280, 1024, 4, 2, 128, torch.bfloat16, "cuda")
    want = attention_fwd_gluon(q, k, v, 0.088, causal=True)
    nq, nk = q.shape[1], k.shape[1]
    monkeypatch.setattr(forward_gluon, "window_args", lambda *a: (False, True, nq + nk, 0))
    got = attention_fwd_gluon(q, k, v, 0.088, window=(64, 0), persistent=persistent)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


# ---------------------------------------------------------------------------------------
# Validation: no launch happens, so these run on any device (CPU included)
# ---------------------------------------------------------------------------------------
def qkv(b=1, nq=128, nk=256, h=4, hk=2, d=128, dtype=torch.bfloat16):
    return rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8])
def test_rejects_dtype(dtype):
    q, k, v = (t.to(dtype) for t in qkv())
    with pytest.raises(ValueError, match=r"^q: dtype .* not supported \(float16 or bfloat16\)"):
        attention_fwd_gluon(q, k, v, 0.1)


def test_rejects_mixed_dtypes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^q, k, v: dtypes differ"):
        attention_fwd_gluon(q, k.half(), v, 0.1)


@pytest.mark.parametrize("d", [32, 96, 512])     # (256: since the session-31 helper, tests/test_fwd_gluon_d256.py)
def test_rejects_head_dim(d):
    with pytest.raises(ValueError, match=rf"^q: head dim {d} not supported"):
        attention_fwd_gluon(*qkv(d=d), 0.1)


def test_rejects_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^q: expected 4 dimensions"):
        attention_fwd_gluon(q[0], k, v, 0.1)
    with pytest.raises(ValueError, match=r"^k, v: shapes differ"):
        attention_fwd_gluon(q, k, v[:, :128], 0.1)
    with pytest.raises(ValueError, match=r"^k: head dim 64 differs from q's 128"):
        attention_fwd_gluon(q, k[..., :64], v[..., :64], 0.1)
    with pytest.raises(ValueError, match=r"^k: batch 2 differs from q's 1"):
        attention_fwd_gluon(q, *(torch.cat([t, t]) for t in (k, v)), 0.1)
    with pytest.raises(ValueError, match=r"^q: 4 heads not a multiple of k's 3 heads"):
        attention_fwd_gluon(q, *(torch.cat([t, t[:, :, :1]], 2) for t in (k, v)), 0.1)
    with pytest.raises(ValueError, match=r"^k: expected a torch.Tensor, got NoneType"):
        attention_fwd_gluon(q, None, v, 0.1)


@pytest.mark.parametrize("nq, nk, what", [(100, 256, "q: sequence length 100"), (128, 200, "k: sequence length 200"),
                                          (0, 256, "q: sequence length 0"), (128, 0, "k: sequence length 0")])
def test_rejects_sequence_lengths(nq, nk, what):
    with pytest.raises(ValueError, match=rf"^{what} not a positive multiple of BLOCK_"):
        attention_fwd_gluon(*qkv(nq=nq, nk=nk), 0.1)


def test_rejects_block_n_mismatch():
    """Nk = 192 fits BLOCK_N = 64 but not the default 128."""
    q, k, v = qkv(nk=192)
    with pytest.raises(ValueError, match=r"^k: sequence length 192 not a positive multiple of BLOCK_N = 128"):
        attention_fwd_gluon(q, k, v, 0.1)


@pytest.mark.parametrize("scale", [0.0, math.nan, math.inf, "0.1", True])
def test_rejects_scale(scale):
    with pytest.raises(ValueError, match=r"^softmax_scale: expected a finite nonzero number"):
        attention_fwd_gluon(*qkv(), scale)


@pytest.mark.parametrize("num_programs", [0, -3, 2.0, True, "7"])
def test_rejects_num_programs(num_programs):
    with pytest.raises(ValueError, match=r"^num_programs: expected a positive int or None"):
        attention_fwd_gluon(*qkv(), 0.1, persistent=True, num_programs=num_programs)


@pytest.mark.parametrize("band", [0, -1, 1.5, False])
def test_rejects_band(band):
    with pytest.raises(ValueError, match=r"^band: expected a positive int or None"):
        attention_fwd_gluon(*qkv(), 0.1, persistent=True, causal=True, band=band)


@pytest.mark.parametrize("kw", [dict(), dict(persistent=True), dict(causal=True)])
def test_rejects_scheduled_without_persistent_causal(kw):
    with pytest.raises(ValueError, match=r"^scheduled=True needs persistent=True and causal=True"):
        attention_fwd_gluon(*qkv(), 0.1, scheduled=True, **kw)


@pytest.mark.parametrize("kw", [dict(num_programs=3), dict(band=2), dict(causal=True, band=2),
                                dict(persistent=True, band=2)])
def test_rejects_persistent_options_without_persistent(kw):
    """(review, session 24) num_programs / band need persistent=True, band also causal=True:
    a clear error instead of an option silently ignored."""
    with pytest.raises(ValueError, match=r"^(num_programs, band: only with persistent=True|band: only with causal)"):
        attention_fwd_gluon(*qkv(), 0.1, **kw)


@pytest.mark.parametrize("window", [(-2, 0), (0, -3), (0,), (1, 2, 3), 5, (1.0, 0), (True, 0), (0, False), "10,0",
                                    (None, 0)])
def test_rejects_window(window):
    with pytest.raises(ValueError, match=r"^window: expected a pair \(left, right\) of ints >= -1"):
        attention_fwd_gluon(*qkv(), 0.1, window=window)


@pytest.mark.parametrize("window", [(10, 5), (-1, 1)])
def test_rejects_window_right_with_causal(window):
    with pytest.raises(ValueError, match=r"^window: with causal=True the right edge is the diagonal"):
        attention_fwd_gluon(*qkv(), 0.1, causal=True, window=window, persistent=True)


def test_window_args():
    """forward_gluon.window_args: (causal, WINDOW, win_left, win_right) for the kernel."""
    wa = forward_gluon.window_args
    assert wa(None, False, 1024, 2048) == (False, False, 0, 0)
    assert wa(None, True, 1024, 2048) == (True, False, 0, 0)
    assert wa((-1, -1), False, 1024, 2048) == (False, False, 0, 0)
    assert wa([-1, 0], False, 1024, 2048) == (True, False, 0, 0)
    assert wa((-1, -1), True, 1024, 2048) == (True, False, 0, 0)          # causal: right = 0
    assert wa((1024, 0), False, 16384, 16384) == (False, True, 1024, 0)
    assert wa((100, 0), True, 1024, 1024) == (False, True, 100, 0)
    assert wa((100, -1), True, 1024, 1024) == (False, True, 100, 0)       # flash-attn: causal fixes right = 0
    assert wa((256, 64), False, 1024, 2048) == (False, True, 256, 64)
    assert wa((-1, 64), False, 1024, 2048) == (False, True, 3072, 64)     # unbounded side: Nq + Nk
    assert wa((64, -1), False, 1024, 2048) == (False, True, 64, 3072)
    assert wa((2047, 0), False, 1024, 2048) == (True, False, 0, 0)        # left past every key: causal
    assert wa((2046, 0), False, 1024, 2048) == (False, True, 2046, 0)
    assert wa((64, 1023), False, 1024, 2048) == (False, True, 64, 3072)   # right past every key: unbounded
    assert wa((5000, 5000), False, 1024, 2048) == (False, False, 0, 0)    # both: no window


def test_window_checked_before_device():
    """A malformed window is reported before the device check (CPU tensors here)."""
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^window:"):
        forward_gluon.prepare(q, k, v, 0.1, window=(1, 2, 3))



def test_rejects_scheduled_plain():
    """SCHEDULED deals causal or windowed blocks (session 42: windows too, schedule.window_schedule): the window
    (-1, -1), the plain kernel, is refused."""
    with pytest.raises(ValueError, match=r"^scheduled=True does not support window="):
        attention_fwd_gluon(*qkv(), 0.1, persistent=True, scheduled=True, window=(-1, -1))


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
def test_band_follows_the_kernels_causal():
    """(review, session 24) band is checked against the causal the kernel runs (after
    window_args): window (-1, 0) is the causal kernel, so band is accepted (the call gets
    as far as the device check here); causal=True with a left window runs WINDOW, so band
    is refused."""
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        attention_fwd_gluon(*qkv(), 0.1, window=(-1, 0), persistent=True, band=2)
    with pytest.raises(ValueError, match=r"^band: only with causal"):
        attention_fwd_gluon(*qkv(), 0.1, causal=True, window=(100, 0), persistent=True, band=2)


def test_rejects_persistent_pingpong():
    with pytest.raises(ValueError, match=r"^persistent=True does not support pingpong=True"):
        attention_fwd_gluon(*qkv(), 0.1, persistent=True, pingpong=True)


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
def test_rejects_non_hopper_device():
    """Valid shapes on a CPU (or a non-Hopper GPU): a clear error instead of a launch."""
    q, k, v = qkv()
    if HAS_CUDA:
        q, k, v = q.cuda(), k.cuda(), v.cuda()
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        attention_fwd_gluon(q, k, v, 0.1)


def test_default_configs_fit_shared_memory():
    """Q (BLOCK_M x D) plus NUM_STAGES K and V tiles (BLOCK_N x D), 16-bit, within the
    H100 / H200's 227 KB per block (the offline compile reports 224 KB at D = 128, 3 stages)."""
    for d, (bm, bn, stages) in fwd_gluon.DEFAULT_CONFIG.items():
        assert 2 * d * (bm + 2 * stages * bn) + 1024 <= 227 * 1024, d


# ---------------------------------------------------------------------------------------
# The library's route to it (launchers.policy.gluon_fwd)
# ---------------------------------------------------------------------------------------
def test_gluon_route_rule(monkeypatch):
    """Which forwards take the Gluon kernel: dense, unmasked, no ALiBi / softcap / dropout,
    bf16 / fp16, head_dim == 128, min(Nq, Nk) >= GLUON_FWD_MIN_N[128], Nq and Nk multiples
    of its tile, q / k / v as packed rows; never under the interpreter, and only when the
    warp-specialization switch allows (both patched here: the rule itself, on CPU tensors)."""
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    n = policy.GLUON_FWD_MIN_N[128]
    plain = common.AttnParams(0.1)

    def rule(q, k, v, params=plain, alibi=None, varlen=False, bd=128):
        return policy.gluon_fwd(q, k, v, params, alibi, varlen, bd, q.shape[1], k.shape[1])

    q, k, v = rand_qkv(1, n, n, 2, 1, 128, torch.bfloat16, "cpu")
    assert rule(q, k, v) and rule(q.half(), k.half(), v.half())
    assert rule(*rand_qkv(2, n, n + 128, 4, 2, 128, torch.bfloat16, "cpu"))           # GQA, Nq != Nk
    # (causal calls: test_gluon_causal_route_rule; since session 42 causal D = 128 at 1k takes the Gluon kernel too,
    # through policy.GLUON_FWD_O_STAGE's range)
    for p in (common.AttnParams(0.1, window_left=64), common.AttnParams(0.1, softcap=3.0),
              common.AttnParams(0.1, dropout_p=0.1)):
        assert not rule(q, k, v, p)
    # (session 52) D = 128 plain from 512: GLUON_FWD_O_STAGE["plain"]'s range starts below GLUON_FWD_MIN_N[128]
    assert rule(*rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, "cpu"))
    monkeypatch.setattr(policy, "GLUON_FWD_O_STAGE", {})
    assert not rule(q, k, v, common.AttnParams(0.1, window_right=0))
    assert not rule(q, k, v, alibi=torch.ones(2)) and not rule(q, k, v, varlen=True)
    assert not rule(q.float(), k.float(), v.float())
    assert not rule(*rand_qkv(1, n, n, 2, 1, 64, torch.bfloat16, "cpu"), bd=64)         # D = 64: from 4k
    assert not rule(*rand_qkv(1, n, n, 2, 1, 96, torch.bfloat16, "cpu"))                # head_dim < BLOCK_D
    assert not rule(*rand_qkv(1, n // 2, n // 2, 2, 1, 128, torch.bfloat16, "cpu"))     # too short
    assert not rule(*rand_qkv(1, n + 64, n, 2, 1, 128, torch.bfloat16, "cpu"))          # Nq not a tile multiple
    assert not rule(*rand_qkv(1, n, n + 64, 2, 1, 128, torch.bfloat16, "cpu"))          # Nk not a tile multiple
    bhnd = torch.randn(3, 1, 2, n, 128, dtype=torch.bfloat16)
    assert not rule(*(t.transpose(1, 2) for t in bhnd))                                # heads not packed in a row
    # (review, session 23) a right window past the diagonal, at a length the table admits
    assert not rule(q, k, v, common.AttnParams(0.1, window_right=64))
    # batches not consecutive rows (a slice of longer sequences): the (B * N, H * D) view
    # would read batch 1 from batch 0's tail
    big = torch.randn(3, 2, 2 * n, 2, 128, dtype=torch.bfloat16)
    assert not rule(*(t[:, :n] for t in big))
    assert rule(*(t[:, :n].contiguous() for t in big))
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: False)
    assert not rule(q, k, v)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    monkeypatch.setattr(policy, "interpreting", lambda: True)
    assert not rule(q, k, v)


def test_gluon_causal_route_rule(monkeypatch):
    """Causal forwards (window_right == 0, no left window) take the Gluon kernel only at a
    BLOCK_D with an entry in GLUON_FWD_CAUSAL_MIN_N (D = 128 from 2k, 256 from 512, 64 from 4k; patched
    here) and from that
    min(Nq, Nk); windows with a left edge or right > 0 never; the non-causal table does
    not admit causal calls, nor the causal table non-causal ones."""
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    causal = common.AttnParams(0.1, window_right=0)

    def rule(q, k, v, params=causal, bd=128):
        return policy.gluon_fwd(q, k, v, params, None, False, bd, q.shape[1], k.shape[1])

    q, k, v = rand_qkv(1, 1024, 1024, 2, 1, 128, torch.bfloat16, "cpu")
    q64, k64, v64 = rand_qkv(1, 1024, 1024, 2, 1, 64, torch.bfloat16, "cpu")
    # sessions 24 / 32 (128), 30 (64), 33 (256)
    assert policy.GLUON_FWD_CAUSAL_MIN_N == {128: 2048, 64: 4096, 256: 512}
    # session 42: O_STAGE's range (policy.GLUON_FWD_O_STAGE["causal"][128] from 1k) admits D = 128 at 1k
    assert rule(q, k, v) and policy.gluon_fwd_o_stage("causal", 128, 1024, 1024, q.dtype)
    assert not rule(*rand_qkv(1, 1024, 16384, 2, 1, 128, torch.bfloat16, "cpu"))        # max(Nq, Nk) past its range
    monkeypatch.setattr(policy, "GLUON_FWD_O_STAGE", {})
    assert not rule(q, k, v) and not rule(q64, k64, v64, bd=64)                         # 1k: too short / no entry
    assert rule(*rand_qkv(1, 8192, 8192, 2, 1, 128, torch.bfloat16, "cpu"))
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_MIN_N, 128, 1024)
    assert rule(q, k, v) and rule(q.half(), k.half(), v.half())
    assert rule(*rand_qkv(2, 1024, 2048, 4, 2, 128, torch.bfloat16, "cpu"))            # Nq < Nk, GQA
    assert rule(*rand_qkv(2, 2048, 1024, 4, 2, 128, torch.bfloat16, "cpu"))            # Nq > Nk
    assert not rule(*rand_qkv(1, 512, 1024, 2, 1, 128, torch.bfloat16, "cpu"))         # too short
    assert not rule(*rand_qkv(1, 1024 + 64, 1024, 2, 1, 128, torch.bfloat16, "cpu"))   # Nq not a tile multiple
    assert not rule(q64, k64, v64, bd=64)                                               # D = 64: from 16k
    for p in (common.AttnParams(0.1, window_left=64, window_right=0), common.AttnParams(0.1, window_right=64),
              common.AttnParams(0.1, window_right=0, softcap=3.0), common.AttnParams(0.1, window_right=0,
                                                                                     dropout_p=0.1)):
        assert not rule(q, k, v, p)
    assert not policy.gluon_fwd(q, k, v, causal, torch.ones(2), False, 128, 1024, 1024)   # ALiBi
    assert not policy.gluon_fwd(q, k, v, causal, None, True, 128, 1024, 1024)             # varlen
    monkeypatch.setitem(policy.GLUON_FWD_MIN_N, 128, 2048)
    assert not rule(q, k, v, common.AttnParams(0.1))     # non-causal at 1k: GLUON_FWD_MIN_N's (patched) 2k applies
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_MIN_N, 64, 1024)
    assert rule(q64, k64, v64, bd=64)
    assert not rule(q64, k64, v64, common.AttnParams(0.1), bd=64)                      # non-causal D = 64: from 4k
    monkeypatch.setitem(policy.GLUON_FWD_MIN_N, 64, 1024)
    assert rule(q64, k64, v64, common.AttnParams(0.1), bd=64)
    monkeypatch.setattr(policy, "interpreting", lambda: True)
    assert not rule(q, k, v)


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_gluon_gpu(monkeypatch):
    """flash_attn_func at D = 128, N = 2k, B = 2, H = 8 (non-causal, bf16: 256 blocks, so
    the 132-CTA persistent grid loops) runs the Gluon kernel, and its
    output, lse and the backward built on that lse pass the reference criterion; a second
    and third call of the same shape with new inputs are right too: since session 25 they
    replay the first call's launch plan, its Gluon descriptors rebuilt over the new
    tensors (before, the route was unreplayable: a plan kept the first call's pointers)."""
    from flashtriton.launchers import plans

    monkeypatch.setenv("FLASHTRITON_PLANS", "1")      # (conftest turns plans off for the other tests)
    called = spy(monkeypatch, forward_gluon, "fwd_into", record=lambda *a, **kw: kw.get("persistent"))
    n = max(2048, policy.GLUON_FWD_MIN_N[128])
    plans.clear()
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        before = plans.stats["replayed"]
        check_attention("triton", *rand_qkv(2, n, n, 8, 2, 128, torch.bfloat16, "cuda"), check_probs=False)
        if seed > 0:
            assert plans.stats["replayed"] > before, "the forward's plan did not replay"
    assert called == [True], called      # non-causal: the PERSISTENT kernel (GLUON_FWD_PERSISTENT); then replays


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("nq, nk", [(1024, 1024), (1024, 2048), (2048, 1024)])   # the last: rows without keys
def test_flash_attn_func_takes_gluon_causal_gpu(monkeypatch, d, nq, nk):
    """flash_attn_func(causal=True) with GLUON_FWD_CAUSAL_MIN_N patched to route runs the
    Gluon kernel's CAUSAL variant (fwd_into called with causal=True), and its output, lse
    and the backward built on that lse pass the reference criterion. One block a CTA, or
    PERSISTENT where policy.GLUON_FWD_O_STAGE's range takes the call (D = 128 from 1k since
    session 42: the test expected one block a CTA until session 45's GPU run caught it)."""
    monkeypatch.setitem(policy.GLUON_FWD_CAUSAL_MIN_N, d, 1024)
    called = spy(monkeypatch, forward_gluon, "fwd_into",
                 record=lambda *a, **kw: (bool(kw["causal"] if "causal" in kw else a[6]), kw.get("persistent")))
    check_attention("triton", *rand_qkv(1, nq, nk, 4, 2, d, torch.bfloat16, "cuda"), causal=True, check_probs=False)
    persistent = policy.gluon_fwd_o_stage("causal", d, nq, nk, torch.bfloat16)
    assert called and all(c == (True, persistent) for c in called), called


def test_gluon_window_route_rule(monkeypatch):
    """Sliding-window forwards (a left edge, or a right edge other than the causal 0) take
    the Gluon kernel's WINDOW variant at a BLOCK_D of GLUON_FWD_WINDOW_MIN_N (D = 128 from
    4k, measured in session 25), under gluon_fwd's other rules; the plain and causal calls
    are gluon_fwd's, not this rule's."""
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    assert policy.GLUON_FWD_WINDOW_MIN_N == {128: 4096}
    band = common.AttnParams(0.1, window_left=1024, window_right=0)

    def rule(q, k, v, params=band, bd=128, alibi=None, varlen=False):
        return policy.gluon_fwd_window(q, k, v, params, alibi, varlen, bd, q.shape[1], k.shape[1])

    q, k, v = rand_qkv(1, 4096, 4096, 2, 1, 128, torch.bfloat16, "cpu")
    assert rule(q, k, v) and rule(q.half(), k.half(), v.half())
    assert rule(q, k, v, common.AttnParams(0.1, window_left=-1, window_right=100))         # right edge only
    assert rule(q, k, v, common.AttnParams(0.1, window_left=100, window_right=100))
    for p in (common.AttnParams(0.1), common.AttnParams(0.1, window_right=0),             # plain, causal
              common.AttnParams(0.1, window_left=64, softcap=3.0), common.AttnParams(0.1, window_left=64,
                                                                                     dropout_p=0.1)):
        assert not rule(q, k, v, p)
    assert not rule(q, k, v, alibi=torch.ones(2)) and not rule(q, k, v, varlen=True)
    assert not rule(*rand_qkv(1, 2048, 2048, 2, 1, 128, torch.bfloat16, "cpu"))          # too short
    assert not rule(*rand_qkv(1, 4096, 4096, 2, 1, 64, torch.bfloat16, "cpu"), bd=64)    # no D = 64 entry
    assert not rule(*rand_qkv(1, 4096 + 64, 4096, 2, 1, 128, torch.bfloat16, "cpu"))     # Nq not a tile multiple
    assert not rule(q.float(), k.float(), v.float())
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: False)
    assert not rule(q, k, v)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", [(1024, 0), (300, 200), (-1, 100)])
def test_flash_attn_func_takes_gluon_window_gpu(monkeypatch, window):
    """flash_attn_func(window_size=...) at a length GLUON_FWD_WINDOW_MIN_N admits (patched
    to 1k here) runs the Gluon WINDOW kernel (fwd_into called with the window), and its
    output, lse and backward pass the reference criterion."""
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_MIN_N, 128, 1024)
    called = spy(monkeypatch, forward_gluon, "fwd_into", record=lambda *a, **kw: kw.get("window"))
    check_attention("triton", *rand_qkv(2, 1024, 1536, 4, 2, 128, torch.bfloat16, "cuda"), window_size=window,
                    check_probs=False)
    assert called == [window], called


def test_regression_window_bool_edge_reaches_gluon_as_int(monkeypatch):
    """Regression (review, session 25): window_size=(True, -1) passes the API's checks
    (bool is an int) and every other path reads the edge as 1, but the Gluon WINDOW route
    passed it on as a bool, which forward_gluon.window_args refuses (ValueError on Hopper at
    D = 128 from 4k). The API now turns the edges into ints for every path. CPU: the route
    forced, fwd_into replaced by a check of its window through window_args."""
    from flashtriton import flash_attn_func
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: False)
    monkeypatch.setattr(forward, "gluon_fwd_window", lambda *a: True)
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, scheduled=False, window=None):
        got.append(forward_gluon.window_args(window, causal, q.shape[1], k.shape[1]))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    import flashtriton

    q, k, v = rand_qkv(1, 16, 16, 2, 1, 128, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, window_size=(True, -1))
    assert got == [(False, True, 1, 32)], got


# ---------------------------------------------------------------------------------------
# DROPOUT (session 26, written offline): the library's mask, bitwise. The Gluon kernel
# cannot run here, so its mask arithmetic is checked through the very functions its
# consumers call: kernels/fwd_gluon.py dropout_block_row_keys / dropout_keep_min /
# dropout_tile_hash / dropout_keep_select (triton.jit,
# generated with Gluon's semantic inside the kernel) and kernels/common.py's hashes, run
# here in a probe kernel that takes one warpgroup's rows and one key tile per program as
# _dropout_setup / _dropout_tile do, against launchers.forward.dropout_mask (the S_dmask
# kernel, kernels/common.py dropout_keep: the definition) and against a numpy model.
# ---------------------------------------------------------------------------------------
import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from flashtriton.kernels.common import (DROPOUT_GROUP, dropout_col_seeds, dropout_in_group_key,  # noqa: E402
                                        dropout_keep_keys, dropout_keep_scale, dropout_threshold)
from helpers import RNG_HIGH, dropout_rng  # noqa: E402


@triton.jit
def _gluon_dropout_probe(OUT, RNG, nheads, seqlen_q, seqlen_k, dropout_p, rng_rows, rng_stride,
                         HALF_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Grid (B * H, Nq / HALF_M, Nk / BLOCK_N): program (bh, m, n) writes the keep scale of
    one warpgroup's HALF_M rows x one key tile into OUT (B, H, Nq, Nk) fp32, with the Gluon
    consumer's arguments: q_row = b * Nq + the warpgroup's first row, q_col = h * HEAD_DIM,
    start_n = the tile's first key (key0_g + g * BLOCK_N in the kernel)."""
    pid_bh = tl.program_id(0)
    b = pid_bh // nheads
    h = pid_bh % nheads
    q_row = b * seqlen_q + tl.program_id(1) * HALF_M
    q_col = h * HEAD_DIM
    start_n = tl.program_id(2) * BLOCK_N
    seed = tl.load(RNG)
    rng_offset = tl.load(RNG + 1)
    # _dropout_setup
    rows = tl.arange(0, HALF_M)
    rk = fwd_gluon.dropout_block_row_keys(seed, rng_offset, q_col // HEAD_DIM, q_row, rows, rng_rows, rng_stride)
    cs_in, cs_group, cs_mult = dropout_col_seeds(seed)
    keep_min = fwd_gluon.dropout_keep_min(dropout_p)
    # _dropout_tile: the in-group keys of the tile's columns (hashed once a program in the
    # kernel when BLOCK_N == DROPOUT_GROUP, at columns 0..BLOCK_N: the same values); the
    # kernel's select is inline PTX (ASM=True), the interpreter's its tl.where form
    cb = dropout_in_group_key(cs_in, start_n % DROPOUT_GROUP + tl.arange(0, BLOCK_N))
    x = fwd_gluon.dropout_tile_hash(rk, cb, cs_group, cs_mult, start_n)
    keep = fwd_gluon.dropout_keep_select(tl.full([HALF_M, BLOCK_N], 1.0, tl.float32), x, keep_min, tl.float32,
                                         False)
    offs_m = tl.program_id(1) * HALF_M + rows
    offs_n = start_n + tl.arange(0, BLOCK_N)
    tl.store(OUT + pid_bh.to(tl.int64) * seqlen_q * seqlen_k + offs_m[:, None] * seqlen_k + offs_n[None, :], keep)


def gluon_probe_mask(b, h, nq, nk, p, rng, half_m=64, block_n=128, head_dim=128):
    out = torch.full((b, h, nq, nk), -1.0, dtype=torch.float32, device=rng.device)
    _gluon_dropout_probe[(b * h, nq // half_m, nk // block_n)](
        out, rng, h, nq, nk, p, b * nq, nk, HALF_M=half_m, BLOCK_N=block_n, HEAD_DIM=head_dim)
    return out


def library_mask(b, h, nq, nk, p, rng):
    from flashtriton.launchers import forward
    q = torch.empty((b, nq, h, 64), dtype=torch.bfloat16, device=rng.device)
    k = torch.empty((b, nk, h, 64), dtype=torch.bfloat16, device=rng.device)
    return forward.dropout_mask(q, k, common.AttnParams(0.1, dropout_p=p), rng)


_M32 = np.uint64(0xFFFFFFFF)


def _np_fmix32(x):
    x = x.astype(np.uint32)
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x85EBCA6B)
    x = x ^ (x >> np.uint32(13))
    x = x * np.uint32(0xC2B2AE35)
    return x ^ (x >> np.uint32(16))


def numpy_mask(b, h, nq, nk, p, seed, offset):
    """An independent model of the kernel's arithmetic (numpy uint32 / uint64, wrapping):
    counters offset + (head * B * Nq + batch * Nq + row) * Nk, row keys, group keys and
    multipliers, in-group keys, the fp32 threshold, the keep test on the top 23 bits, and
    the keep-scale float trick (common.dropout_keep_scale) evaluated in float32."""
    with np.errstate(over="ignore"):
        s_lo = np.uint32(seed & 0xFFFFFFFF)
        s_hi = np.uint32((seed >> 32) & 0xFFFFFFFF)
        heads, batches, rows = np.meshgrid(np.arange(h, dtype=np.uint64), np.arange(b, dtype=np.uint64),
                                           np.arange(nq, dtype=np.uint64), indexing="ij")
        row_id = np.uint64(offset) + (heads * np.uint64(b * nq) + batches * np.uint64(nq) + rows) * np.uint64(nk)
        r_lo = (row_id & _M32).astype(np.uint32)
        r_hi = (row_id >> np.uint64(32)).astype(np.uint32)
        rk = _np_fmix32(_np_fmix32(r_lo ^ s_lo) ^ r_hi ^ s_hi).transpose(1, 0, 2)     # (B, H, Nq)
        cs_in, cs_group, cs_mult = (_np_fmix32(np.array([s_hi ^ np.uint32(c)]))[0]
                                    for c in (0x5BD1E995, 0x27D4EB2F, 0x1B873593))
        col = np.arange(nk, dtype=np.uint32)
        group = col // np.uint32(128)
        ck = _np_fmix32((col % np.uint32(128)) ^ cs_in) ^ _np_fmix32(group ^ cs_group)
        mk = _np_fmix32(group ^ cs_mult) | np.uint32(1)
        x = (rk[..., None] ^ ck) * mk                                                   # (B, H, Nq, Nk)
        thr = np.uint32(min(np.float32(p) * np.float32(4294967296.0), np.float32(4294967040.0)))
        keep = (x >> np.uint32(9)) >= (thr >> np.uint32(9))
        u = ((x >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32)
        c = np.array([(thr >> np.uint32(9)) | np.uint32(0x3F800000)], dtype=np.uint32).view(np.float32)[0]
        c = np.float32(c * np.float32(8388608.0) - np.float32(1.0))
        scale = np.clip(u * np.float32(8388608.0) - c, np.float32(0), np.float32(1))
    assert np.array_equal(scale, keep.astype(np.float32)), "the keep-scale trick is not the keep test"
    return torch.from_numpy(keep)


@pytest.mark.parametrize("b, h, nq, nk, block_n", [(2, 3, 128, 384, 128), (1, 2, 256, 128, 128),
                                                   (2, 2, 128, 256, 64)])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.93])
@pytest.mark.parametrize("rng_kind", ["api", "large"])
def test_dropout_mask_arithmetic_matches_library(b, h, nq, nk, block_n, p, rng_kind):
    """The Gluon kernel's dropout arithmetic (dropout_block_row_keys, dropout_keep_min,
    dropout_tile_hash, dropout_keep_select (its tl.where form) and
    the common.py hashes, with its per-warpgroup / per-tile arguments) gives the library's
    keep mask bitwise: against launchers.forward.dropout_mask (S_dmask's kernel, i.e.
    common.dropout_keep, which fwd_ws.py, fwd.py and the backward's key table agree with)
    and against a numpy model, over every (batch, head, row, column) of several shapes
    (Nq != Nk, several column groups, BLOCK_N 64: the per-tile in-group hash), three p and
    two rng states (the API's draw, and seed / offset with high words set, so the 64-bit
    counter and both seed words matter)."""
    if rng_kind == "api":
        rng = dropout_rng(7, DEVICE)
    else:
        rng = torch.tensor([RNG_HIGH - 12345, (1 << 40) + 977], dtype=torch.int64, device=DEVICE)
    ours = gluon_probe_mask(b, h, nq, nk, p, rng, block_n=block_n)
    assert ((ours == 0) | (ours == 1)).all(), "keep scale not exactly 0 / 1 (or unwritten)"
    lib = library_mask(b, h, nq, nk, p, rng)
    assert torch.equal(ours.bool().cpu(), lib.cpu())
    seed, offset = (int(x) for x in rng.cpu())
    assert torch.equal(numpy_mask(b, h, nq, nk, p, seed, offset), lib.cpu())
    rate = 1 - lib.float().mean().item()
    assert abs(rate - p) < 0.05, rate


# The kernel's keep test (session 26): x >= keep_min (unsigned; keep_min = the threshold with
# its low 9 bits cleared, fwd_gluon.dropout_keep_min) as a select, against the library's
# float form (common.dropout_keep_scale: the top 23 bits of x against the threshold's, as an
# FFMA.SAT) and its integer definition ((x >> 9) >= (T >> 9), common.dropout_keep_keys).
@triton.jit
def _keep_forms_probe(X, P, OUT_SCALE, OUT_SELECT, OUT_KEYS, OUT_P_OLD, OUT_P_NEW, dropout_p, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(X + offs).to(tl.uint32, bitcast=True)
    p = tl.load(P + offs)
    threshold = dropout_threshold(dropout_p)
    keep_min = fwd_gluon.dropout_keep_min(dropout_p)
    zero = tl.zeros([N], tl.uint32)
    one = tl.full([N], 1, tl.uint32)
    # rk = x, ck = 0, mk = 1: (rk ^ ck) * mk = x, so each form sees x itself
    scale = dropout_keep_scale(x, zero, one, threshold)
    tl.store(OUT_SCALE + offs, scale)
    tl.store(OUT_SELECT + offs, fwd_gluon.dropout_keep_select(tl.full([N], 1.0, tl.float32), x, keep_min,
                                                              tl.float32, False))
    tl.store(OUT_KEYS + offs, dropout_keep_keys(x, zero, one, threshold).to(tl.int32))
    # the P operand: the old kernel's (p * keep scale).to(bf16) and the new select's
    tl.store(OUT_P_OLD + offs, (p * scale).to(tl.bfloat16))
    tl.store(OUT_P_NEW + offs, fwd_gluon.dropout_keep_select(p, x, keep_min, tl.bfloat16, False))


def _edge_words(thr):
    """32-bit words around the threshold, its 512-multiple floor, and the ends."""
    base = thr & ~0x1FF
    cands = [0, 1, 511, 512, 513, 0x7FFFFFFF, 0x80000000, 0xFFFFFDFF, 0xFFFFFE00, 0xFFFFFF00, 0xFFFFFFFF]
    for c in (thr, base, base + 512):
        cands += [c + d for d in range(-3, 4)]
    return np.array([c % (1 << 32) for c in cands], dtype=np.uint64).astype(np.uint32)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.85, 1e-9, 1.2e-7, 3e-6, 0.999999, 1.0 - 2.0 ** -24, 0.3333333])
def test_dropout_keep_select_is_the_library_keep(p):
    """fwd_gluon.dropout_keep_min + dropout_keep_select (its tl.where form, what the kernel's
    inline setp.ge.u32 / selp.b32 computes) give the library's keep decision bitwise: against
    common.dropout_keep_scale (the float form the kernel used before, and bwd / fwd_ws use)
    and common.dropout_keep_keys over 2^20 random 32-bit words plus the words around the
    threshold and its 512-multiple floor, for p from tiny (threshold >> 9 = 0: all kept)
    to the cap below 2^32; and the same against a numpy model in integers and float32. The
    bf16 P operand (select, then the conversion) is bitwise the old (p * keep).to(bf16)."""
    n = 1 << 20
    gen = np.random.default_rng(int(p * 1e9) + 5)
    thr = int(np.uint32(min(np.float32(p) * np.float32(4294967296.0), np.float32(4294967040.0))))
    words = gen.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    edge = _edge_words(thr)
    words[:edge.size] = edge
    x = torch.from_numpy(words.view(np.int32)).to(DEVICE)
    probs = torch.rand(n, generator=torch.Generator().manual_seed(3)).to(DEVICE)     # softmax-like p in [0, 1)
    out = [torch.empty(n, dtype=dt, device=DEVICE) for dt in (torch.float32, torch.float32, torch.int32)]
    p16 = [torch.empty(n, dtype=torch.bfloat16, device=DEVICE) for _ in range(2)]
    _keep_forms_probe[(n // 4096,)](x, probs, *out, *p16, p, N=4096)
    scale, select, keys = (t.cpu().numpy() for t in out)
    assert torch.equal(p16[0].view(torch.int16), p16[1].view(torch.int16)), "P operand not bitwise the old one"
    assert set(np.unique(select)) <= {0.0, 1.0}
    assert np.array_equal(select, scale)
    assert np.array_equal(select, keys.astype(np.float32))
    # numpy: the integer definition, the new compare, and the float trick in float32
    with np.errstate(over="ignore"):
        t = np.uint32(thr)
        keep_def = (words >> np.uint32(9)) >= (t >> np.uint32(9))
        keep_new = words >= (t & np.uint32(0xFFFFFE00))
        u = ((words >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32)
        c = np.array([(t >> np.uint32(9)) | np.uint32(0x3F800000)], dtype=np.uint32).view(np.float32)[0]
        c = np.float32(c * np.float32(8388608.0) - np.float32(1.0))
        keep_flt = np.clip(u * np.float32(8388608.0) - c, np.float32(0), np.float32(1))
    assert np.array_equal(keep_new, keep_def)
    assert np.array_equal(keep_flt, keep_def.astype(np.float32))
    assert np.array_equal(select, keep_def.astype(np.float32))


def test_dropout_keep_min_all_thresholds_numpy():
    """The integer argument behind dropout_keep_min, over every threshold floor: for each
    T >> 9 = k (0 .. 2^23 - 1) and the words 512 k - 1, 512 k, 512 k + 511 (the edges of
    the floor's step), (x >> 9) >= (T >> 9) iff x >= T & ~0x1FF, for T = 512 k and
    512 k + 511 (the step's ends)."""
    k = np.arange(1 << 23, dtype=np.uint64)
    for t in (k * 512, k * 512 + 511):
        t32 = t.astype(np.uint32)
        for x in (k * 512 - 1, k * 512, k * 512 + 511, k * 512 + 512):
            x32 = (x % (1 << 32)).astype(np.uint32)
            assert np.array_equal((x32 >> np.uint32(9)) >= (t32 >> np.uint32(9)),
                                  x32 >= (t32 & np.uint32(0xFFFFFE00)))


def test_dropout_numpy_model_counter_layout():
    """The numpy model's counter layout is the one the key table of the backward uses
    (kernels/dropout_keys.py: rk of (head, row) at rng_offset + (head * rng_rows + row) *
    rng_stride): one rk entry checked against a from-scratch row hash."""
    from flashtriton.launchers.common import _dropout_keys
    b, h, nq, nk = 2, 3, 128, 256
    rng = torch.tensor([RNG_HIGH - 5, (1 << 33) + 3], dtype=torch.int64, device=DEVICE)
    keys = _dropout_keys(rng, h, b * nq, nk).cpu().numpy().view(np.uint32)
    seed, offset = (int(x) for x in rng.cpu())
    with np.errstate(over="ignore"):
        s_lo, s_hi = np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32)
        for head, row in ((0, 0), (2, b * nq - 1), (1, 77)):
            rid = (offset + (head * b * nq + row) * nk) % (1 << 64)
            rk = _np_fmix32(_np_fmix32(np.array([np.uint32(rid & 0xFFFFFFFF) ^ s_lo])) ^ np.uint32(rid >> 32) ^ s_hi)
            assert keys[nk + head * b * nq + row] == rk[0]


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, math.nan, "0.1", True, None])
def test_rejects_dropout_p(p):
    rng = dropout_rng(0, DEVICE)
    with pytest.raises(ValueError, match=r"^dropout_p: expected a number in \[0, 1\)"):
        attention_fwd_gluon(*qkv(), 0.1, dropout_p=p, rng=rng)


def test_rejects_dropout_rng():
    with pytest.raises(ValueError, match=r"^rng: dropout_p > 0 needs the \(seed, offset\) int64 tensor"):
        attention_fwd_gluon(*qkv(), 0.1, dropout_p=0.1)
    # (made on DEVICE, not moved there: .to("cuda") copies the strided one into a contiguous
    # tensor, which passed the check; session 26's GPU run)
    for bad in (torch.zeros(2, dtype=torch.int32, device=DEVICE), torch.zeros(3, dtype=torch.int64, device=DEVICE),
                torch.zeros(4, dtype=torch.int64, device=DEVICE)[::2]):
        with pytest.raises(ValueError, match=r"^rng: expected a contiguous int64 tensor of 2 elements"):
            attention_fwd_gluon(*qkv(), 0.1, dropout_p=0.1, rng=bad)
    with pytest.raises(ValueError, match=r"^rng: only with dropout_p > 0"):
        attention_fwd_gluon(*qkv(), 0.1, rng=dropout_rng(0, DEVICE))
    if HAS_CUDA:
        q, k, v = (t.cuda() for t in qkv())
        with pytest.raises(ValueError, match=r"^rng: on cpu"):
            attention_fwd_gluon(q, k, v, 0.1, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64))


@pytest.mark.skipif(IS_HOPPER, reason="a Hopper GPU launches instead")
def test_valid_dropout_reaches_the_device_check():
    """Valid dropout arguments pass the checks (the call gets as far as the device check)."""
    with pytest.raises(ValueError, match=r"needs a CUDA \(Hopper\) device|needs compute capability 9"):
        attention_fwd_gluon(*qkv(), 0.1, dropout_p=0.1, rng=dropout_rng(0, DEVICE), causal=True)


def test_gluon_dropout_route_rule(monkeypatch):
    """Dropout forwards take the Gluon DROPOUT variant only where GLUON_FWD_DROPOUT_MIN_N
    has an entry for their kind: as shipped plain and causal D = 128 from 4k, no window;
    patched, the plain / causal / window kinds separately, under the Gluon kernels'
    other rules."""
    assert policy.GLUON_FWD_DROPOUT_MIN_N == {"plain": {128: 4096}, "causal": {128: 4096}}
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    plain = common.AttnParams(0.1, dropout_p=0.1)
    causal = common.AttnParams(0.1, window_right=0, dropout_p=0.1)
    window = common.AttnParams(0.1, window_left=256, window_right=0, dropout_p=0.1)

    def rule(q, k, v, params=plain, alibi=None, varlen=False, bd=128):
        return policy.gluon_fwd_dropout(q, k, v, params, alibi, varlen, bd, q.shape[1], k.shape[1])

    q4, k4, v4 = rand_qkv(1, 4096, 4096, 2, 1, 128, torch.bfloat16, "cpu")
    assert rule(q4, k4, v4) and rule(q4, k4, v4, causal) and not rule(q4, k4, v4, window)   # as shipped
    q, k, v = rand_qkv(1, 1024, 1024, 2, 1, 128, torch.bfloat16, "cpu")
    assert not any(rule(q, k, v, p) for p in (plain, causal, window))               # 1k: below 4k
    monkeypatch.setattr(policy, "GLUON_FWD_DROPOUT_MIN_N", {})
    assert not any(rule(q4, k4, v4, p) for p in (plain, causal, window))            # the empty table
    monkeypatch.setitem(policy.GLUON_FWD_DROPOUT_MIN_N, "plain", {128: 1024})
    assert rule(q, k, v) and rule(q.half(), k.half(), v.half())
    assert rule(*rand_qkv(2, 1024, 1152, 4, 2, 128, torch.bfloat16, "cpu"))           # GQA, Nq != Nk
    assert not rule(q, k, v, causal) and not rule(q, k, v, window)
    assert not rule(q, k, v, common.AttnParams(0.1))                                  # no dropout: gluon_fwd's
    assert not rule(q, k, v, common.AttnParams(0.1, dropout_p=1.0))
    assert not rule(q, k, v, common.AttnParams(0.1, softcap=3.0, dropout_p=0.1))
    assert not rule(q, k, v, alibi=torch.ones(2)) and not rule(q, k, v, varlen=True)
    assert not rule(*rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, "cpu"))          # too short
    assert not rule(*rand_qkv(1, 1024 + 64, 1024, 2, 1, 128, torch.bfloat16, "cpu"))  # Nq not a tile multiple
    assert not rule(q.float(), k.float(), v.float())
    assert not rule(*rand_qkv(1, 1024, 1024, 2, 1, 64, torch.bfloat16, "cpu"), bd=64)  # no D = 64 entry
    monkeypatch.setitem(policy.GLUON_FWD_DROPOUT_MIN_N, "causal", {128: 1024})
    monkeypatch.setitem(policy.GLUON_FWD_DROPOUT_MIN_N, "window", {128: 1024})
    assert rule(q, k, v, causal) and rule(q, k, v, window)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: False)
    assert not rule(q, k, v)
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)
    monkeypatch.setattr(policy, "interpreting", lambda: True)
    assert not rule(q, k, v)


@pytest.mark.parametrize("causal, window_size, expect", [
    (False, (-1, -1), dict(causal=False, window=None, persistent=True)),
    (True, (-1, -1), dict(causal=True, window=None, persistent=False)),
    (False, (256, 0), dict(causal=False, window=(256, 0), persistent=False)),
    (True, (256, -1), dict(causal=False, window=(256, 0), persistent=False)),
])
def test_dropout_route_passes_rng(monkeypatch, causal, window_size, expect):
    """launchers.forward routes a dropout call that gluon_fwd_dropout accepts to fwd_into
    with the call's rng (the API's draw: the same state S_dmask and the backward use),
    dropout_p, the kernel kind (the canonical causal as causal=True, other windows as
    window=) and PERSISTENT as the no-dropout rule has it. CPU: the rule forced, fwd_into
    replaced by a recorder."""
    from flashtriton import flash_attn_func
    from flashtriton.launchers import forward
    import flashtriton

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: False)
    monkeypatch.setattr(forward, "gluon_fwd_dropout", lambda *a: True)
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, scheduled=False, window=None,
                      dropout_p=0.0, rng=None):
        got.append(dict(causal=causal, window=window, persistent=persistent, dropout_p=dropout_p, rng=rng.clone()))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, DEVICE)
    torch.manual_seed(3)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, dropout_p=0.2, causal=causal, window_size=window_size)
    assert len(got) == 1, got
    call = got[0]
    assert {n: call[n] for n in expect} == expect, call
    assert call["dropout_p"] == 0.2 and torch.equal(call["rng"].cpu(), dropout_rng(3, DEVICE).cpu())


# ---------------------------------------------------------------------------------------
# GPU (Hopper): DROPOUT numerics (session 26: written offline, first run by the next GPU
# session; bench/gpu/s26_gluon_dropout_fwd_ab.py smoke first)
# ---------------------------------------------------------------------------------------
def decode_mask_gpu(b, nq, nk, h, hk, d, p, rng, causal=False, window=None, **kw):
    """The Gluon kernel's keep mask read back from its output: q = 0 (every visible key
    weighs 1), v[j] = 2^(j // d) e_(j % d) (fp16: exact), so out[i, c] * l_i (1 - p) =
    sum over the keys j = c (mod d) of keep[i, j] 2^(j // d), l_i the row's visible keys.
    Returns keep (B, H, Nq, Nk) bool (False where hidden) and the visibility mask."""
    assert nk // d <= 4, "at most 4 keys a column (values < 16 stay exact in fp16)"
    q = torch.zeros((b, nq, h, d), dtype=torch.float16, device="cuda")
    k = torch.randn((b, nk, hk, d), dtype=torch.float16, device="cuda")
    j = torch.arange(nk, device="cuda")
    v1 = torch.zeros((nk, d), dtype=torch.float16, device="cuda")
    v1[j, j % d] = (2.0 ** (j // d)).half()
    v = v1[None, :, None, :].expand(b, nk, hk, d).contiguous()
    o, lse = attention_fwd_gluon(q, k, v, 0.1, causal=causal, window=window, dropout_p=p, rng=rng, **kw)
    left, right = window if window is not None else (-1, -1)
    right = 0 if causal else right
    i = torch.arange(nq, device="cuda")[:, None]
    diag = i + nk - nq
    vis = torch.ones((nq, nk), dtype=torch.bool, device="cuda")
    if right >= 0:
        vis &= j[None, :] <= diag + right
    if left >= 0:
        vis &= j[None, :] >= diag - left
    count = vis.sum(1).float()                                                   # (Nq,)
    vals = torch.round(o.float().permute(0, 2, 1, 3) * (count * (1.0 - p))[None, None, :, None]).to(torch.int64)
    bits = (vals[..., None] >> torch.arange(nk // d, device="cuda")) & 1          # (B, H, Nq, d, groups)
    keep = bits.permute(0, 1, 2, 4, 3).reshape(b, h, nq, nk).bool()
    return keep & vis, vis


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("causal, window", [(False, None), (True, None), (False, (100, 30))])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 256, 256, 4, 4), (1, 128, 256, 6, 2), (2, 256, 128, 3, 1)])
def test_dropout_mask_bitwise_gpu(persistent, causal, window, d, b, nq, nk, h, hk):
    """The Gluon DROPOUT forward drops exactly the library's mask (launchers.forward.
    dropout_mask, S_dmask's) at every visible (batch, head, row, key): decoded from its
    output (decode_mask_gpu), GQA, Nq != Nk, causal, a window, PERSISTENT with 3 CTAs."""
    rng = torch.tensor([RNG_HIGH - 99, (1 << 35) + 5], dtype=torch.int64, device="cuda")
    kw = dict(persistent=True, num_programs=3) if persistent else {}
    keep, vis = decode_mask_gpu(b, nq, nk, h, hk, d, 0.3, rng, causal=causal, window=window, **kw)
    lib = library_mask(b, h, nq, nk, 0.3, rng)
    assert torch.equal(keep, lib & vis)


def check_dropout_gpu(q, k, v, p, seed, causal=False, window=None, **kw):
    """The Gluon DROPOUT forward against the float64 reference with the library's mask for
    rng = dropout_rng(seed) (the API's draw) and against the library's own dropout forward
    (launchers.forward.fwd: fwd_ws.py unmasked, fwd.py masked) for the same rng: lse within
    the criterion of each other's reference, out within the float64 criterion."""
    from flashtriton.launchers import forward
    scale = q.shape[-1] ** -0.5
    rng = dropout_rng(seed, q.device)
    o, lse = attention_fwd_gluon(q, k, v, scale, causal=causal, window=window, dropout_p=p, rng=rng, **kw)
    left, right = window if window is not None else (-1, -1)
    right = 0 if causal else right
    params = common.AttnParams(scale, window_left=left, window_right=right, dropout_p=p)
    keep = forward.dropout_mask(q, k, params, rng)
    truth, lowp = reference_pair(q, k, v, softmax_scale=scale, window_left=left, window_right=right, dropout_p=p,
                                 dropout_mask=keep)
    assert torch.isfinite(o).all() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) or non-finite output"
    assert_close("out", o, truth["out"], lowp["out"], 2, q.dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, q.dtype)
    o_lib, lse_lib = forward.fwd(q, k, v, params, rng=rng)
    assert_close("out (library)", o_lib, truth["out"], lowp["out"], 2, q.dtype)
    fin = torch.isfinite(truth["lse"])
    assert torch.equal(torch.isposinf(lse), torch.isposinf(lse_lib))
    assert (lse[fin] - lse_lib[fin]).abs().max().item() <= 1e-4 * (1 + lse_lib[fin].abs().max().item())
    return o, lse


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(2, 1024, 1024, 4, 4), (1, 512, 1536, 8, 2), (2, 1024, 256, 4, 2)])
def test_dropout_matches_reference_gpu(dtype, d, causal, b, nq, nk, h, hk):
    check_dropout_gpu(*rand_qkv(b, nq, nk, h, hk, d, dtype, "cuda"), 0.1, seed=11, causal=causal)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [dict(persistent=True, num_programs=7), dict(block_n=64, num_stages=4),
                                 dict(pingpong=True)])
def test_dropout_configs_gpu(causal, cfg):
    """PERSISTENT (7 CTAs: the ring and the per-block dropout setup across blocks), BLOCK_N 64
    (the in-group keys hashed per tile), PINGPONG."""
    check_dropout_gpu(*rand_qkv(2, 1024, 1024, 4, 2, 128, torch.bfloat16, "cuda"), 0.17, seed=5, causal=causal,
                      **cfg)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", [(256, 0), (100, 30)])
def test_dropout_window_gpu(window):
    check_dropout_gpu(*rand_qkv(1, 1024, 1024, 4, 2, 128, torch.bfloat16, "cuda"), 0.1, seed=2, window=window)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
def test_dropout_persistent_bitwise_and_repeatable_gpu(causal):
    """PERSISTENT (few CTAs) gives the one-block result bitwise; a repeated launch too."""
    q, k, v = rand_qkv(2, 2048, 2048, 4, 2, 128, torch.bfloat16, "cuda")
    rng = dropout_rng(4, "cuda")
    o1, lse1 = attention_fwd_gluon(q, k, v, 0.088, causal=causal, dropout_p=0.1, rng=rng)
    o2, lse2 = attention_fwd_gluon(q, k, v, 0.088, causal=causal, dropout_p=0.1, rng=rng, persistent=True,
                                   num_programs=5)
    o3, lse3 = attention_fwd_gluon(q, k, v, 0.088, causal=causal, dropout_p=0.1, rng=rng)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
    assert torch.equal(o1, o3) and torch.equal(lse1, lse3)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [128, 64])
def test_flash_attn_func_takes_gluon_dropout_gpu(monkeypatch, causal, d):
    """flash_attn_func(dropout_p=0.1) with GLUON_FWD_DROPOUT_MIN_N patched to route runs the
    Gluon DROPOUT kernel, and its out, lse, S_dmask (sign = the keep mask) and the
    library's backward (which regenerates the mask from the same keys) pass the reference
    criterion with the library's mask."""
    monkeypatch.setitem(policy.GLUON_FWD_DROPOUT_MIN_N, "causal" if causal else "plain", {d: 512})
    called = spy(monkeypatch, forward_gluon, "fwd_into", record=lambda *a, **kw: kw.get("dropout_p"))
    check_attention("triton", *rand_qkv(2, 1024, 1024, 4, 2, d, torch.bfloat16, "cuda"), causal=causal,
                    dropout_p=0.1, seed=9)
    assert called == [0.1], called


def test_gluon_kind():
    """policy.gluon_kind, the key of the Gluon routing tables: plain / canonical causal /
    any other window (a left edge with right 0 is a window, not causal)."""
    kind = lambda **kw: policy.gluon_kind(common.AttnParams(0.1, **kw))  # noqa: E731
    assert kind() == "plain"
    assert kind(window_right=0) == "causal"
    assert kind(window_left=256, window_right=0) == "window"
    assert kind(window_right=64) == "window" and kind(window_left=8) == "window"
