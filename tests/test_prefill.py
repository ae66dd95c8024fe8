"""Forward, lse and gradients of flash_attn_func against the float64 reference.

One suite, every kernel backend: the Triton kernels (on the GPU, or under the
interpreter on the CPU) and the CPU backend when it is present.
"""
import itertools
import math

import pytest
import torch
import triton

import flashtriton
from flashtriton import flash_attn_func

from conftest import DEVICE, kernel_backends
from helpers import assert_close, check_attention, rand_qkv, reference_pair, spy

HEAD_DIMS = [16, 40, 64, 96, 128]
SEQLENS = [(1, 1), (17, 17), (113, 203), (128, 64), (200, 200)]
HEADS = [(4, 4), (4, 2), (4, 1)]      # MHA, GQA, MQA
DTYPES = [torch.float16, torch.bfloat16]


def _cases():
    # Every head dim x seqlen pair x causal; head layout and dtype rotate through the
    # cases so that each appears with every head dim without a full cross product.
    for i, (d, (nq, nk), causal) in enumerate(itertools.product(HEAD_DIMS, SEQLENS, [False, True])):
        yield d, nq, nk, causal, HEADS[i % 3], DTYPES[(i // 3) % 2]


def run_and_check(backend, batch, nq, nk, heads, d, dtype, *, grads=True, **kw):
    h, hk = heads
    q, k, v = rand_qkv(batch, nq, nk, h, hk, d, dtype, DEVICE, requires_grad=grads)
    with flashtriton.use_backend(backend):
        out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True, **kw)
        dout = torch.randn_like(out) if grads else None
        if grads:
            dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    causal = kw.pop("causal", False)
    window = kw.pop("window_size", (-1, -1))
    ref_kw = dict(softmax_scale=kw.pop("softmax_scale", None) or 1 / math.sqrt(d),
                  window_left=window[0], window_right=0 if causal else window[1], **kw)
    truth, lowp = reference_pair(q, k, v, dout, **ref_kw)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == (batch, h, nq) and lse.dtype == torch.float32
    assert_close("out", out, truth["out"], lowp["out"], 2, dtype)
    assert_close("lse", lse, truth["lse"], lowp["lse"], 2, dtype)
    if grads:
        for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
            assert g.shape == {"dq": q, "dk": k, "dv": v}[name].shape
            assert_close(name, g, truth[name], lowp[name], 3, dtype)


@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("d,nq,nk,causal,heads,dtype", list(_cases()))
def test_forward_backward(backend, d, nq, nk, causal, heads, dtype):
    run_and_check(backend, 2, nq, nk, heads, d, dtype, causal=causal)


@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", HEADS)
def test_dtypes_and_head_layouts(backend, dtype, heads):
    run_and_check(backend, 1, 65, 97, heads, 64, dtype, causal=True)


@pytest.mark.parametrize("backend", kernel_backends())
@pytest.mark.parametrize("d", [8, 24, 80, 112, 160, 192, 224, 256])
def test_other_head_dims(backend, d):
    run_and_check(backend, 1, 33, 47, (2, 1), d, torch.bfloat16, causal=d % 16 == 0)


@pytest.mark.parametrize("backend", kernel_backends())
def test_softmax_scale(backend):
    run_and_check(backend, 1, 40, 40, (2, 2), 32, torch.float16, softmax_scale=0.3)


@pytest.mark.parametrize("backend", kernel_backends())
def test_rows_without_keys_give_zero(backend):
    """Causal with Nq > Nk: the first Nq - Nk query rows see no key. They output 0, lse
    +inf, and their gradients are finite zeros."""
    q, k, v = rand_qkv(1, 80, 30, 2, 2, 32, torch.float16, DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert torch.all(out[:, :50] == 0)
    assert torch.all(torch.isinf(lse[:, :, :50])) and torch.all(lse[:, :, :50] > 0)
    assert torch.all(dq[:, :50] == 0)
    for g in (dq, dk, dv):
        assert torch.isfinite(g).all()


@pytest.mark.parametrize("backend", kernel_backends())
def test_nan_stays_in_its_row(backend):
    q, k, v = rand_qkv(1, 50, 50, 2, 2, 32, torch.float16, DEVICE)
    q[0, 7, 1, 3] = float("nan")
    with flashtriton.use_backend(backend):
        out = flash_attn_func(q, k, v)
    assert torch.isnan(out[0, 7, 1]).all()
    finite = torch.ones_like(out, dtype=torch.bool)
    finite[0, 7, 1] = False
    assert torch.isfinite(out[finite]).all()


@pytest.mark.parametrize("backend", kernel_backends())
def test_forward_is_bitwise_repeatable(backend):
    q, k, v = rand_qkv(2, 150, 150, 4, 2, 64, torch.bfloat16, DEVICE)
    with flashtriton.use_backend(backend):
        a = flash_attn_func(q, k, v, causal=True)
        b = flash_attn_func(q, k, v, causal=True)
    assert torch.equal(a, b)


@pytest.mark.parametrize("backend", kernel_backends())
def test_packed_inputs_need_no_copy(backend):
    """Slices of packed qkv / kv tensors have non-trivial strides; they work as they are."""
    qkv = torch.randn(2, 70, 3, 4, 64, dtype=torch.float16, device=DEVICE, requires_grad=True)
    with flashtriton.use_backend(backend):
        out = flashtriton.flash_attn_qkvpacked_func(qkv, causal=True)
        (dqkv,) = torch.autograd.grad(out, qkv, torch.ones_like(out))
    q, k, v = qkv.detach().unbind(2)
    truth, lowp = reference_pair(q, k, v, torch.ones_like(out), softmax_scale=1 / 8, window_right=0)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.float16)
    for i, name in enumerate(("dq", "dk", "dv")):
        assert_close(name, dqkv[:, :, i], truth[name], lowp[name], 3, torch.float16)

    q = torch.randn(2, 33, 4, 64, dtype=torch.bfloat16, device=DEVICE)
    kv = torch.randn(2, 50, 2, 2, 64, dtype=torch.bfloat16, device=DEVICE)
    with flashtriton.use_backend(backend):
        out = flashtriton.flash_attn_kvpacked_func(q, kv)
    truth, lowp = reference_pair(q, kv[:, :, 0], kv[:, :, 1], softmax_scale=1 / 8)
    assert_close("out", out, truth["out"], lowp["out"], 2, torch.bfloat16)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq,nk", [(1023, 1023), (2048, 2048), (4096, 1000), (1, 4096)])
def test_large_shapes_gpu(d, causal, nq, nk):
    run_and_check("triton", 2, nq, nk, (8, 2), d, torch.bfloat16, causal=causal)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["fwd", "dkdv", "dq"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_every_tuner_config_gpu(kernel, d, monkeypatch):
    """Every config the tuner may pick (for unmasked and masked calls) computes the right
    answer. Before 2026-11-30 only the "" and "_masked" tables were patched, so at D = 64
    the short default stood in for every forward candidate (regression)."""
    from flashtriton.kernels import configs
    tiles = dict.fromkeys(configs.tuner_candidates(kernel, d, 300) + configs.tuner_candidates(kernel, d, 300, masked=True))
    for tile in tiles:
        # every table this causal N = 300 call could take its tile from (a short or
        # masked default would otherwise stand in for the candidate)
        for suffix in configs.DEFAULT_TABLES:
            if d in configs.DEFAULTS.get(kernel + suffix, {}):
                monkeypatch.setitem(configs.DEFAULTS[kernel + suffix], d, tile)
        try:
            run_and_check("triton", 1, 300, 300, (4, 2), d, torch.bfloat16, causal=True)
        except Exception as exc:  # report which tile failed
            from triton.runtime.errors import OutOfResources
            if isinstance(exc, OutOfResources):
                continue  # the tuner skips these too
            raise AssertionError(f"tile {tile} of {kernel}: {exc}") from exc


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("layout", ["key rows", "query rows"])
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", [
    (2, 113, 203, (4, 2), 256, dict(causal=True)),                       # GQA, Nq < Nk, masked tiles
    (1, 203, 113, (4, 1), 128, dict(window_size=(40, 7))),               # MQA, Nq > Nk, both window edges
    (1, 96, 96, (2, 2), 64, dict(softcap=5.0, alibi=True)),
    (1, 64, 130, (2, 2), 256, dict(dropout_p=0.3, causal=True)),
])
def test_dkdv_layouts(monkeypatch, layout, b, nq, nk, heads, d, kw):
    """bwd.py's dK/dV kernel in both tile layouts (KEY_ROWS: key rows x query columns;
    False: query rows x key columns, launchers.backward.DKDV_QUERY_ROWS) passes the
    reference check: masks, GQA / MQA, softcap, ALiBi, dropout (under the returned mask).
    The warp-specialized backward is off, so bwd.py takes every call."""
    key_rows = layout == "key rows"
    from helpers import check_attention
    from flashtriton.launchers import backward, common
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    bd = common.block_d(d)
    rows = set() if key_rows else {bd}
    monkeypatch.setattr(backward, "DKDV_QUERY_ROWS", rows)
    from flashtriton.kernels import configs
    if not key_rows and configs.DEFAULTS["dkdv"][bd].block_m < 64:
        # D = 64's default tile has 32 query rows, which keep key rows on a GPU
        monkeypatch.setitem(configs.DEFAULTS["dkdv"], bd, configs.Tile(64, 64, 4, 2))
    from flashtriton.launchers import plans
    launched = spy(monkeypatch, plans, "launch",
                   lambda kernel, grid, *a, **kw: kw.get("KEY_ROWS")
                   if kernel is backward.attn_bwd_dkdv_kernel else None)
    h, hk = heads
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, DEVICE)
    kw = dict(kw)
    if kw.pop("alibi", False):
        kw["alibi_slopes"] = torch.rand(b, h, device=DEVICE, dtype=torch.float32)
    check_attention("triton", q, k, v, seed=nq * 3 + nk, **kw)
    assert [x for x in launched if x is not None] == [key_rows], "bwd.py's dK/dV kernel did not run in this layout"


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", [
    (2, 77, 77, (4, 4), 96, dict(causal=True)),
    (1, 113, 203, (4, 2), 64, dict()),
    (2, 17, 33, (4, 1), 40, dict(causal=True, softcap=5.0)),
    (1, 1, 129, (2, 2), 128, dict(window_size=(20, 3))),
    (1, 64, 48, (2, 1), 192, dict(dropout_p=0.2)),
])
def test_host_descriptors_match_in_kernel_descriptors(monkeypatch, b, nq, nk, heads, d, kw):
    """FLASHTRITON_HOST_DESCRIPTORS=1 (descriptors of the whole (B, N, H, D) tensors, made
    on the host), auto (host_desc_default) and a per-kernel list compute bitwise what the in-kernel
    per-program descriptors (0) compute:
    out, lse, dq, dk, dv, across GQA / MQA, head dims under BLOCK_D, Nq != Nk, masks,
    softcap and dropout; and it passes the reference check on its own."""
    h, hk = heads
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, DEVICE, requires_grad=True)
    dout = torch.randn_like(q)
    results = []
    for flag in ("0", "auto", "1", "dkdv,dq"):
        monkeypatch.setenv("FLASHTRITON_HOST_DESCRIPTORS", flag)
        torch.manual_seed(7)
        with flashtriton.use_backend("triton"):
            out, lse, _ = flash_attn_func(q, k, v, return_attn_probs=True, **kw)
            results.append((out, lse) + torch.autograd.grad(out, (q, k, v), dout))
    for other in results[1:]:
        for name, a, c in zip(("out", "lse", "dq", "dk", "dv"), results[0], other):
            assert torch.equal(a, c), name
    if "dropout_p" not in kw:
        run_and_check("triton", b, nq, nk, heads, d, torch.bfloat16, **kw)


def test_default_table_order():
    """Which DEFAULTS table gives a call its tile: a short window's table first, then for
    causal or windowed calls the short masked table (N <= SHORT_MASKED_SEQLEN) and the masked
    one, then the short table, then the kernel's own; each only where it has the BLOCK_D."""
    from flashtriton.kernels import configs
    t = configs.default_table
    assert t("fwd", 128, 512, masked=True) == "fwd_short_masked"
    assert t("fwd", 128, 4096, masked=True) == "fwd_short_masked"      # SHORT_MASKED_SEQLEN
    assert t("fwd", 128, 8192, masked=True) == "fwd" and t("fwd", 128, 2048) == "fwd"
    assert t("fwd", 128, 512, window_band=300, masked=True) == "fwd_window"
    assert t("fwd", 64, 512, masked=True) == "fwd_short_masked" and t("fwd", 64, 512) == "fwd_short"
    assert t("fwd", 32, 512, masked=True) == "fwd_short" and t("fwd", 128, 1024) == "fwd_short"
    assert t("fwd", 64, 2048) == "fwd" and t("fwd", 256, 512) == "fwd" and t("fwd", 128, 2048) == "fwd"
    assert t("dkdv", 64, 512, masked=True) == "dkdv_masked" and t("dkdv", 64, 512) == "dkdv"
    assert t("dkdv", 256, 1024, masked=True) == "dkdv_short" and t("dkdv", 256, 2048) == "dkdv"
    for kernel in ("fwd", "dkdv", "dq"):
        for d in (16, 32, 64, 128, 256):
            for n in (128, 1024, 4096):
                for masked in (False, True):
                    name = t(kernel, d, n, masked=masked)
                    assert name[len(kernel):] in configs.DEFAULT_TABLES
                    assert configs.default_tile(kernel, d, n, masked=masked) == configs.DEFAULTS[name][d]


def test_host_descriptor_defaults():
    """auto: the forward takes host descriptors always (eager short calls too since session
    22); dQ at BLOCK_D 128 up to 4k, and causal at any length; dK/dV at 64 and 128, causal
    (128 since session 22); never at 256."""
    from flashtriton.launchers import common
    assert common.host_desc_default("fwd", 128, False, 512) and common.host_desc_default("fwd", 64, True, 128)
    assert common.host_desc_default("dq", 128, False, 4096) and not common.host_desc_default("dq", 128, False, 8192)
    assert common.host_desc_default("dq", 128, True, 16384)
    assert not common.host_desc_default("dq", 64, True, 1024)
    assert common.host_desc_default("dkdv", 64, True, 16384) and not common.host_desc_default("dkdv", 64, False, 1024)
    assert common.host_desc_default("dkdv", 128, True, 1024) and not common.host_desc_default("dkdv", 128, False, 1024)
    assert not any(common.host_desc_default(kernel, 256, causal, 512) for kernel in ("dkdv", "dq")
                   for causal in (False, True))


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_regression_short_forward_takes_host_descriptors(monkeypatch):
    """Regression (session 22): eager forwards under 1e11 FLOPs made their TMA descriptors
    in the kernel (4 a program), which cost short calls 40-110 us of GPU time on the H200
    (1.4-1.8x their graph replay's time, where capture already took host-made ones). Now a
    dense fwd.py launch takes host-made descriptors at any size; a varlen one cannot."""
    from flashtriton.launchers import forward, plans
    monkeypatch.delenv("FLASHTRITON_HOST_DESCRIPTORS", raising=False)
    plans.clear()
    launched = spy(monkeypatch, plans, "launch", lambda kernel, grid, *a, **kw: kw.get("HOST_DESC")
                   if kernel is forward.attn_fwd_kernel else None)
    q, k, v = rand_qkv(1, 40, 40, 2, 2, 64, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, causal=True)
    assert [x for x in launched if x is not None] == [True]


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_host_descriptors_flag_is_checked(monkeypatch):
    """A misspelt FLASHTRITON_HOST_DESCRIPTORS is an error, not a silent default."""
    q, k, v = rand_qkv(1, 8, 8, 2, 2, 32, torch.bfloat16, DEVICE)
    monkeypatch.setenv("FLASHTRITON_HOST_DESCRIPTORS", "yes")
    with flashtriton.use_backend("triton"):
        with pytest.raises(ValueError, match=r"^FLASHTRITON_HOST_DESCRIPTORS: must be auto, 0, 1 or a comma-sep"):
            flash_attn_func(q, k, v)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", [
    (2, 256, 256, (4, 4), 128, dict()),
    (1, 128, 384, (4, 2), 96, dict()),                           # GQA, D under BLOCK_D, Nq < Nk
    (2, 384, 128, (4, 1), 128, dict()),                          # MQA, Nq > Nk
    (1, 128, 256, (2, 2), 128, dict(softmax_scale=-0.2)),         # a negative scale: the row min
    (1, 128, 320, (4, 2), 256, dict()),                           # D = 256: 64-key tiles, Nk not a multiple of 128
    (1, 256, 192, (2, 1), 192, dict()),                           # D = 192 under BLOCK_D 256, MQA
    # the MASKED variant (rows through an iota descriptor), bottom-right, Nq <= Nk
    (1, 256, 256, (2, 2), 256, dict(causal=True)),
    (1, 128, 384, (4, 2), 128, dict(causal=True)),                # Nq < Nk, GQA
    (2, 256, 384, (2, 1), 192, dict(causal=True)),                # D = 192, MQA
    (1, 128, 256, (2, 2), 256, dict(causal=True, softmax_scale=-0.2)),  # a negative scale masks with +inf
    (2, 256, 384, (4, 2), 64, dict()),                            # D = 64 (session 22), GQA
    (1, 128, 256, (2, 1), 40, dict(causal=True)),                 # D = 40 under BLOCK_D 64, masked (forced)
    (1, 384, 512, (2, 1), 128, dict(window_size=(70, 0))),        # sliding window: rows whose first tiles hide all keys
    (1, 256, 320, (2, 2), 256, dict(window_size=(100, 30))),      # both edges
    (1, 128, 256, (2, 2), 128, dict(window_size=(-1, 40))),       # a right edge alone
    (1, 256, 256, (2, 2), 128, dict(window_size=(50, 0), softmax_scale=-0.3)),  # left edge, negative scale
])
def test_warp_specialized_forward(monkeypatch, b, nq, nk, heads, d, kw):
    """The warp-specialized forward (kernels/fwd_ws.py), forced with FLASHTRITON_WARP_SPEC=1
    (under the interpreter its arithmetic runs without the specialization), passes the
    reference check on GQA / MQA, Nq != Nk, head dims under BLOCK_D and a negative scale,
    and is the kernel that ran."""
    from flashtriton.launchers import forward
    calls = spy(monkeypatch, forward, "_fwd_warp_spec")
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    run_and_check("triton", b, nq, nk, heads, d, torch.bfloat16, **kw)
    assert calls, "the warp-specialized forward did not run"


def test_warp_specialized_forward_persistent_rule():
    """Which fwd_ws.py launches loop persistently (launchers.forward._ws_programs): the
    measured kinds of WS_PERSISTENT with more query blocks than programs (masked calls at
    D = 128 and 256, sliding windows included); none without the flat layout."""
    from flashtriton.launchers import common, forward
    q = torch.empty(1, device=DEVICE)
    sms = common.sm_count(q.device)
    many = 8 * sms
    assert forward._ws_programs(q, many, 128, False, False) == (sms, True)
    assert forward._ws_programs(q, many, 128, False, True) == (sms, True)          # dropout
    assert forward._ws_programs(q, many, 256, True, False) == (sms, True)          # causal D = 256
    assert forward._ws_programs(q, sms, 128, False, False) == (sms, False)         # one wave: plain grid
    assert forward._ws_programs(q, many, 128, True, False) == (sms, True)           # causal D = 128
    assert forward._ws_programs(q, many, 64, False, False) == (sms, True)           # plain D = 64 (session 22)
    assert forward._ws_programs(q, many, 256, True, False, left_window=True) == (sms, True)
    assert forward._ws_programs(q, many, 128, False, False, flat=False) == (many, False)
    # the forward's views (common._flat_view): element (b, n, h) at row b * rb + h * rh + n,
    # column h * ch
    x = torch.empty(2, 64, 4, 128)
    assert common._flat_view(x, 128) == (64, 0, 128)
    assert common._flat_view(x.transpose(1, 2).contiguous().transpose(1, 2), 128) == (4 * 64, 64, 0)
    assert common._flat_view(torch.empty(2, 64, 3, 4, 128)[:, :, 1], 128) == (64, 0, 128)
    assert common._flat_view(x[:, :, :, :96], 128) is None
    assert common._flat_view(x[:, :32], 128) == (64, 0, 128)                   # batches apart: still rows
    assert common._flat_view(x[:, :, :1], 128) == (64, 0, 0)
    # the masked deal: head-major up to WS_HEAD_MAJOR_MAX_BLOCKS blocks a head, windows always
    for bd, most in forward.WS_HEAD_MAJOR_MAX_BLOCKS.items():
        assert not forward._deal_block_major(True, False, most, bd) and forward._deal_block_major(True, False, most + 1, bd)
        assert not forward._deal_block_major(True, True, 4 * most, bd)
        assert not forward._deal_block_major(False, False, 4 * most, bd)
    # the persistent kernel's (B * N, H-span) descriptors: heads side by side in a row,
    # batches one after another, a head exactly BLOCK_D wide
    x = torch.empty(2, 64, 4, 128)
    assert common._flat_rows(x, 128)
    assert common._flat_rows(torch.empty(2, 64, 3, 4, 128)[:, :, 1], 128)      # a packed qkv's k
    assert not common._flat_rows(x[:, :, :, :96], 128)                         # D under BLOCK_D
    assert not common._flat_rows(x.transpose(1, 2).contiguous().transpose(1, 2), 128)  # (B, H, N, D) memory
    assert not common._flat_rows(x[:, :32], 128)                               # batches not back to back
    assert common._flat_rows(x[:1, :32], 128)                                  # ... unless one batch


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", [
    (2, 256, 256, (4, 4), 128, dict()),
    (2, 256, 384, (4, 2), 128, dict()),                           # GQA, Nq < Nk
    (1, 256, 256, (2, 2), 256, dict()),                           # D = 256
    (2, 256, 256, (3, 3), 128, dict(packed=True)),                # q, k, v views of one packed tensor
    (2, 256, 384, (4, 2), 128, dict(bhnd=True, causal=True)),     # q, k in (B, H, N, D) memory, transposed
    (2, 256, 256, (2, 2), 128, dict(dropout_p=0.2)),
    (2, 256, 384, (4, 2), 64, dict()),                            # D = 64 (session 22)
    (2, 256, 384, (4, 2), 128, dict(causal=True)),                # masked: heaviest blocks first
    (2, 384, 384, (2, 1), 256, dict(window_size=(70, 0))),
])
@pytest.mark.parametrize("deal", ["head-major", "block-major"])
def test_warp_specialized_forward_persistent(monkeypatch, b, nq, nk, heads, d, kw, deal):
    """fwd_ws.py's persistent loop (PERSISTENT, launchers.forward.WS_PERSISTENT): three
    programs dealing out every query block in snake rounds give bitwise what one program a
    block gives (same tile, same key order; the outputs are poisoned first, so a block the
    loop skips fails), and the launch really was persistent. Masked calls under both deals
    (head-major snake rounds, block-major)."""
    from flashtriton.launchers import forward
    if deal == "block-major" and not ("causal" in kw or "window_size" in kw):
        pytest.skip("the deal differs only for masked calls")
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    monkeypatch.setattr(forward, "WS_PERSISTENT_PROGRAMS", 3)
    monkeypatch.setattr(forward, "WS_HEAVY_FIRST", True)          # masked: the block-major deal
    monkeypatch.setattr(forward, "WS_PERSISTENT_WINDOWS", True)
    # masked calls: head-major snake rounds, or block-major (every head's last block first)
    monkeypatch.setattr(forward, "WS_HEAD_MAJOR_MAX_BLOCKS", {bd_: 10**6 if deal == "head-major" else 0
                                                              for bd_ in (64, 128, 256)})
    launched = []
    real = forward._ws_programs
    monkeypatch.setattr(forward, "_ws_programs", lambda *a: launched.append(real(*a)) or launched[-1])
    kw = dict(kw)                    # the parametrized dict is shared by both deals: pop from a copy
    if kw.pop("packed", False):
        q, k, v = torch.randn(b, nq, 3, heads[0], d, dtype=torch.bfloat16, device=DEVICE).unbind(2)
    else:
        q, k, v = rand_qkv(b, nq, nk, *heads, d, torch.bfloat16, DEVICE)
    if kw.pop("bhnd", False):
        q, k = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k))
    bd = max(16, triton.next_power_of_2(d))
    runs = []
    for persistent in (True, False):
        masked = kw.get("causal", False) or "window_size" in kw
        monkeypatch.setattr(forward, "WS_PERSISTENT", {(bd, masked, "dropout_p" in kw)} if persistent else set())
        torch.manual_seed(7)
        with flashtriton.use_backend("triton"):
            runs.append(flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2])
    assert launched[0] == (3, True) and launched[1][1] is False, launched
    for got, want in zip(*runs):
        assert torch.equal(got, want)


@pytest.mark.gpu
@pytest.mark.gpu_alone
@pytest.mark.parametrize("d,causal", [(128, False), (128, True), (64, False)])
def test_persistent_forward_repeatable_gpu(monkeypatch, d, causal):
    """Regression (session 16): the persistent fwd_ws.py made each tile's descriptors in
    the same global-scratch slots, and one consumer warpgroup rewrote the output
    descriptor for its next tile while the other still stored through it: 29-87 of 42-276
    persistent calls a case differed from one tile a program under a 3-process stress on
    the H200. Now they are made once, over every (batch, head); 20 calls at 2048 tiles are
    bitwise those of one tile a program (D = 64 too: persistent by default since session 22)."""
    from flashtriton.launchers import forward, plans, policy
    q, k, v = rand_qkv(8, 2048, 2048, 2048 // d, 2048 // d, d, torch.bfloat16, DEVICE)
    # fwd_ws.py, not the Gluon forward the library takes at D = 128 from 1k since session 24
    monkeypatch.setattr(policy, "GLUON_FWD_MIN_N", {})
    monkeypatch.setattr(policy, "GLUON_FWD_CAUSAL_MIN_N", {})
    monkeypatch.setattr(forward, "WS_PERSISTENT", set())
    plans.clear()
    want = flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)[:2]
    monkeypatch.setattr(forward, "WS_PERSISTENT", {(d, causal, False)})
    plans.clear()                                                  # plans key on the environment only
    launched = []
    real = forward._ws_programs
    monkeypatch.setattr(forward, "_ws_programs", lambda *a: launched.append(real(*a)) or launched[-1])
    for _ in range(20):
        got = flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)[:2]
        assert all(torch.equal(x, y) for x, y in zip(got, want))
    assert launched and all(p for _, p in launched), "the persistent kernel did not run"


def test_warp_spec_rule(monkeypatch):
    """Which calls the warp-specialized forward computes: unmasked attention (key count a
    multiple of the tile) in bf16 / fp16 at BLOCK_D 64 (dense, persistent: warp_spec_mode),
    128 and 256, not with varlen, ALiBi or softcap; with dropout (its keys hashed in the
    kernel since session 9); the MASKED variant (causal, windows with a right edge) at
    D = 128 / 256 by default, any tiled D when forced; FLASHTRITON_WARP_SPEC is checked."""
    from flashtriton.launchers import common, policy
    monkeypatch.delenv("FLASHTRITON_WARP_SPEC", raising=False)
    bf16, plain = torch.bfloat16, common.AttnParams(0.1)
    rule = policy.warp_spec_plain
    assert rule(bf16, plain, None, False, 128, 128, 256) and rule(torch.float16, plain, None, False, 128, 256, 128)
    assert not rule(bf16, plain, None, False, 128, 128, 200)      # a ragged key count needs the mask
    assert not rule(bf16, plain, None, False, 128, 200, 256)      # query blocks must not straddle heads
    assert not rule(bf16, plain, None, False, 32, 128, 256)
    assert not rule(torch.float32, plain, None, False, 128, 128, 256)
    # D = 64 (session 22): dense and unmasked only (persistent: warp_spec_mode), no dropout
    # unless forced, never varlen (tests/test_varlen.py::test_warp_spec_varlen_rule)
    drop = common.AttnParams(0.1, dropout_p=0.1)
    assert rule(bf16, plain, None, False, 64, 128, 256) and not rule(bf16, drop, None, False, 64, 128, 256)
    q64 = torch.empty(1, 128, 2, 64, dtype=bf16)
    switch = policy._warp_spec_switch
    monkeypatch.setattr(policy, "_warp_spec_switch", lambda q: True)       # as on a Hopper GPU
    assert not policy.warp_spec_varlen(q64, plain, None, 64) and policy.warp_spec_varlen(q64, plain, None, 128)
    assert policy.warp_spec_varlen(q64, plain, None, 256) and not policy.warp_spec_varlen(q64, plain, None, 256, "bwd")
    monkeypatch.setattr(policy, "_warp_spec_switch", switch)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    assert rule(bf16, drop, None, False, 64, 128, 256)
    monkeypatch.delenv("FLASHTRITON_WARP_SPEC")
    for p in (common.AttnParams(0.1, window_right=0), common.AttnParams(0.1, window_left=4),
              common.AttnParams(0.1, softcap=3.0)):
        assert not rule(bf16, p, None, False, 128, 128, 256)
    assert policy.WARP_SPEC_DROPOUT_FWD and rule(bf16, common.AttnParams(0.1, dropout_p=0.1), None, False,
                                                  128, 128, 256)
    # the backward takes dropout (stressed under load in session 9)
    assert policy.WARP_SPEC_DROPOUT_BWD and rule(bf16, common.AttnParams(0.1, dropout_p=0.1), None, False,
                                                  128, 128, 256, kernel="bwd")
    assert rule(bf16, plain, None, False, 256, 128, 320) and not rule(bf16, plain, None, False, 256, 128, 288)
    # the MASKED forward: bottom-right causal or windows with a right edge, 0 < Nq <= Nk,
    # at D = 256 (any tiled D when forced)
    causal_rule, causal = policy.warp_spec_masked_fwd, common.AttnParams(0.1, window_right=0)
    window = common.AttnParams(0.1, window_left=64, window_right=0)
    assert causal_rule(bf16, causal, None, False, 256, 128, 320)
    assert causal_rule(bf16, causal, None, False, 128, 128, 256)    # D = 128: when persistent (warp_spec_mode)
    assert not causal_rule(bf16, causal, None, False, 256, 256, 128)                # Nq > Nk: rows without keys
    assert causal_rule(bf16, window, None, False, 256, 128, 128)
    assert not causal_rule(bf16, window, None, False, 128, 128, 128)                # D = 128 windows: fwd.py
    assert not causal_rule(bf16, common.AttnParams(0.1, window_right=0, dropout_p=0.1), None, False, 256, 128, 128)
    assert not causal_rule(bf16, plain, None, False, 256, 128, 128)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    assert causal_rule(bf16, causal, None, False, 128, 128, 256)
    assert causal_rule(bf16, window, None, False, 128, 128, 256)
    assert not causal_rule(bf16, common.AttnParams(0.1, window_left=64), None, False, 128, 128, 256)  # no right edge
    monkeypatch.delenv("FLASHTRITON_WARP_SPEC")
    assert not rule(bf16, plain, torch.ones(2), False, 128, 128, 256) and not rule(bf16, plain, None, True, 128, 8, 256)
    assert not rule(bf16, plain, None, False, 128, 0, 256)
    q = torch.empty(1, 8, 2, 128, dtype=bf16)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    assert not policy.warp_spec_applies(q, plain, None, False, 128, 8, 8)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "yes")
    with pytest.raises(ValueError, match=r"^FLASHTRITON_WARP_SPEC: must be auto, 0 or 1"):
        policy.warp_spec_applies(q, plain, None, False, 128, 8, 8)


def test_warp_spec_mode_rule(monkeypatch):
    """Which path each pass takes on a Hopper GPU ("auto"): the whole-call kernels for
    unmasked calls but the short forwards of FWD_SHORT_ON_FWD_PY; the split path only in the backward, causal at min(Nq, Nk) >=
    BWD_SPLIT_MIN_N without a left window (the forward split and shorter or windowed
    backward splits measured slower); the backward only at head_dim == BLOCK_D with the
    heads of a row contiguous in q and dout (its 2-D column descriptors)."""
    from flashtriton.launchers import common, policy
    monkeypatch.setattr(policy, "warp_spec_applies", lambda *a, **k: True)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "auto")
    n = policy.BWD_SPLIT_MIN_N[128]
    q = torch.empty(1, n, 2, 128, dtype=torch.bfloat16)
    plain, causal = common.AttnParams(0.1), common.AttnParams(0.1, window_right=0)
    window = common.AttnParams(0.1, window_left=1024, window_right=0)

    def mode(p, nq, nk, kernel, qq=q, dout=q, bd=128, persistent=None):
        return policy.warp_spec_mode(qq, p, None, False, bd, nq, nk, kernel=kernel, dout=dout,
                                     bwd_persistent=persistent)
    assert mode(plain, n, n, "fwd") == "whole" and mode(plain, n, n, "bwd") == "whole"
    assert mode(causal, n, n, "fwd") is None and mode(causal, n, n, "bwd") == "split"
    assert mode(causal, n // 2, n, "bwd") is None
    assert mode(plain, n, n + 1, "bwd") == "split"                    # ragged: the split path
    assert mode(window, n, n, "bwd") is None
    q96 = torch.empty(1, n, 2, 96, dtype=torch.bfloat16)
    assert mode(plain, n, n, "fwd", qq=q96) == "whole" and mode(plain, n, n, "bwd", qq=q96, dout=q96) is None
    heads_apart = torch.empty(1, 2, n, 128, dtype=torch.bfloat16).transpose(1, 2)   # (B, N, H, D), stride_h N*D
    assert mode(plain, n, n, "bwd", dout=heads_apart) is None and mode(plain, n, n, "bwd", qq=heads_apart) is None
    # D = 64: the split from BWD_SPLIT_MIN_N[64], the whole backward from BWD_WHOLE_MIN_N[64]
    n64, w64 = policy.BWD_SPLIT_MIN_N[64], policy.BWD_WHOLE_MIN_N[64]
    q64 = torch.empty(1, n64, 2, 64, dtype=torch.bfloat16)
    assert mode(causal, n64, n64, "bwd", qq=q64, dout=q64, bd=64) == "split"
    assert mode(causal, n64 // 2, n64, "bwd", qq=q64, dout=q64, bd=64) is None
    assert mode(plain, n64, n64 + 1, "bwd", qq=q64, dout=q64, bd=64) == "split"     # ragged: the split path
    assert mode(plain, w64, w64, "bwd", qq=q64, dout=q64, bd=64) == "whole"
    assert mode(plain, w64 // 2, w64 // 2, "bwd", qq=q64, dout=q64, bd=64) is None
    # D = 64 forwards (session 22): fwd_ws.py only unmasked and persistent (more query
    # blocks than SMs, the flat layout)
    assert mode(plain, w64 // 2, w64 // 2, "fwd", qq=q64, dout=q64, bd=64) is None     # 16 query blocks: one wave
    many64 = torch.empty(32, 512, 32, 64, dtype=torch.bfloat16)                        # 4096 query blocks
    assert mode(plain, 512, 512, "fwd", qq=many64, bd=64) == "whole"
    assert mode(plain, 256, 256, "fwd", qq=many64[:, :256], bd=64) is None             # under 512: not timed
    sms = common.sm_count(many64.device)
    wave = torch.empty(1, 512, sms // 4, 64, dtype=torch.bfloat16)                    # tiles == SMs at 512 ...
    if sms % 4 == 0:
        assert policy.fwd_persistent_launch(wave, 64, 512) is False
    one_more = torch.empty(1, 512, sms // 4 + 1, 64, dtype=torch.bfloat16)            # ... and a few more
    assert policy.fwd_persistent_launch(one_more, 64, 512) is True
    assert mode(causal, 512, 512, "fwd", qq=many64, bd=64) is None
    assert mode(plain, 512, 512, "fwd", qq=many64.transpose(1, 2).contiguous().transpose(1, 2), bd=64) == "whole"
    assert mode(plain, 512, 512, "fwd", qq=many64[..., :40], bd=64) is None            # D under BLOCK_D: no flat view
    # session 17: where the bwd_ws.py launch would be persistent, D = 64's whole backward
    # from the start and D = 128's split from BWD_SPLIT_PERSISTENT_MIN_N ...
    yes, no = (lambda masked: True), (lambda masked: False)
    assert mode(plain, 512, 512, "bwd", qq=q64, dout=q64, bd=64, persistent=yes) == "whole"
    assert mode(plain, 512, 512, "bwd", qq=q64, dout=q64, bd=64, persistent=no) is None
    n2 = policy.BWD_SPLIT_PERSISTENT_MIN_N[128]
    assert mode(causal, n2, n2, "bwd", persistent=yes) == "split" and mode(causal, n2, n2, "bwd", persistent=no) is None
    assert mode(causal, n2 // 2, n2 // 2, "bwd", persistent=yes) is None
    n4 = policy.BWD_SPLIT_PERSISTENT_MIN_N[64]                     # D = 64 too (session 20)
    assert n4 < n64
    assert mode(causal, n4, n4, "bwd", qq=q64, dout=q64, bd=64, persistent=yes) == "split"
    assert mode(causal, n4, n4, "bwd", qq=q64, dout=q64, bd=64, persistent=no) is None
    assert mode(causal, n4 // 2, n4 // 2, "bwd", qq=q64, dout=q64, bd=64, persistent=yes) is None
    # ... and D = 128 bwd_ws.py at any length (session 18: the dK/dV loop's vectors by
    # pointers beyond launchers.backward.WS_DKDV_DESC_MAX_ROWS, no cap)
    assert mode(plain, 4 * n, 4 * n, "bwd") == "whole" and mode(causal, 4 * n, 4 * n, "bwd") == "split"
    # ... but a dropout backward only to BWD_WS_DROPOUT_MAX_N (its dQ loop's 1-D key loads)
    drop = common.AttnParams(0.1, dropout_p=0.1)
    top = policy.BWD_WS_DROPOUT_MAX_N[128]
    assert mode(drop, top, top, "bwd") == "whole" and mode(drop, 2 * top, 2 * top, "bwd") is None
    # D = 64 dropout backwards never, forced or not (policy.BWD_WS_NO_DROPOUT; session 29:
    # always one tile a program there, whose descriptor loads gave NaN in the dK/dV loop;
    # session 30: its pointer loads with dropout do not compile in Triton 3.6)
    n64w = policy.BWD_WHOLE_MIN_N[64]
    assert mode(plain, n64w, n64w, "bwd", qq=q64, dout=q64, bd=64) == "whole"
    assert mode(drop, n64w, n64w, "bwd", qq=q64, dout=q64, bd=64) is None
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    assert mode(drop, 2 * top, 2 * top, "bwd") == "whole"                           # forced: the tests reach it
    assert mode(drop, n64w, n64w, "bwd", qq=q64, dout=q64, bd=64) is None
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "auto")
    q256 = torch.empty(1, 256, 2, 256, dtype=torch.bfloat16)
    assert mode(plain, 256, 256, "fwd", qq=q256, bd=256) == "whole"
    assert mode(causal, 1024, 1024, "fwd", qq=q256, bd=256) == "whole"                # the MASKED variant
    # short forwards that fwd.py computes faster (FWD_SHORT_ON_FWD_PY): causal D = 256 up to
    # 512 (session 13); unmasked D = 128 at every length since the persistent fwd_ws.py
    assert mode(causal, 512, 512, "fwd", qq=q256, bd=256) is None                     # 8 query blocks: one wave
    many256 = torch.empty(32, 512, 8, 256, dtype=torch.bfloat16)
    assert mode(causal, 512, 512, "fwd", qq=many256, bd=256) == "whole"               # persistent (session 22)
    # causal D = 128 (session 16): fwd_ws.py from N = 1k when its launch is persistent (more
    # query blocks than SMs), fwd.py otherwise
    many = torch.empty(16, 1024, 16, 128, dtype=torch.bfloat16)                       # 1024 query blocks
    assert mode(causal, 1024, 1024, "fwd", qq=many) == "whole"
    assert mode(causal, 512, 512, "fwd", qq=many) == "whole"                          # 512 since session 22
    assert mode(causal, 256, 256, "fwd", qq=many) is None                             # 256: not timed
    assert mode(causal, 1024, 1024, "fwd", qq=many[:1, :, :8]) is None                # 64 blocks: one wave
    # ... and only in a layout the persistent kernel reads (common._flat_view): (B, N, H, D)
    # or (B, H, N, D) memory, not D under BLOCK_D nor heads that overlap a row's span;
    # unmasked D = 128 up to 1k likewise
    bhnd = torch.empty(16, 16, 1024, 128, dtype=torch.bfloat16).transpose(1, 2)
    odd = torch.empty_strided((16, 1024, 16, 128), (16 * (1024 * 128 + 64), 128, 1024 * 128 + 64, 1),
                              dtype=torch.bfloat16)                       # stride_h not a multiple of stride_n
    assert common._flat_view(odd, 128) is None
    assert mode(causal, 1024, 1024, "fwd", qq=bhnd) == "whole"
    assert policy.warp_spec_mode(many, causal, None, False, 128, 1024, 1024, kv=(odd, many)) is None
    assert policy.warp_spec_mode(many, causal, None, False, 128, 1024, 1024, kv=(bhnd, many)) == "whole"
    assert mode(causal, 1024, 1024, "fwd", qq=many[..., :96]) is None
    assert mode(plain, 1024, 1024, "fwd", qq=odd) is None and mode(plain, 2048, 2048, "fwd", qq=odd) == "whole"
    assert policy.warp_spec_mode(many, plain, None, False, 128, 512, 512, kv=(many, odd)) is None
    assert mode(plain, 512, 512, "fwd", qq=bhnd) == "whole"
    assert mode(plain, 512, 512, "fwd") == "whole" and mode(plain, 1024, 2048, "fwd") == "whole"
    assert mode(plain, 1024, 1024, "bwd") == "whole"                                  # the backward keeps it
    assert mode(plain, 256, 256, "bwd", qq=q256, dout=q256, bd=256) is None            # nor a D = 256 backward one
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    assert mode(causal, 128, 128, "fwd") == "whole" and mode(causal, 128, 128, "bwd") == "split"
    assert mode(plain, 128, 128, "bwd", qq=q64, dout=q64, bd=64) == "whole"


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d", [
    (2, 256, 256, (4, 4), 128),
    (1, 128, 384, (4, 2), 128),                                  # GQA: one program sums its group
    (2, 384, 128, (4, 1), 128),                                  # MQA, Nq > Nk
    (1, 256, 384, (4, 2), 64),                                   # D = 64
])
def test_warp_specialized_backward(monkeypatch, b, nq, nk, heads, d):
    """The warp-specialized dK/dV and dQ kernels (kernels/bwd_ws.py), forced with
    FLASHTRITON_WARP_SPEC=1, give gradients within the reference bound, and ran.
    Regression (H200, session 7): dK/dV read q and dO through a reshaped 3-D descriptor
    and were wrong on the GPU (errors 0.3-2.8) while right under the interpreter."""
    from flashtriton.launchers import backward
    calls = spy(monkeypatch, backward, "_bwd_warp_spec")
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    run_and_check("triton", b, nq, nk, heads, d, torch.bfloat16)
    assert calls, "the warp-specialized backward did not run"


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", [
    # (the whole-call path needs Nq, Nk multiples of the GPU tiles, 128; interpreted tiles are 32 x 32)
    (2, 128, 128, (2, 2), 128, dict()),                           # 16 key / query blocks: 5 rounds and 1 tile
    (1, 128, 256, (4, 2), 128, dict()),                           # GQA, Nq < Nk
    (2, 256, 128, (2, 2), 64, dict()),                            # D = 64, Nq > Nk
    (2, 128, 256, (2, 1), 128, dict(causal=True)),                # the split path (PARTIAL), MQA, Nq < Nk
    (2, 128, 128, (3, 3), 128, dict(packed=True)),                # q, k, v views of one packed tensor
    (2, 128, 128, (2, 2), 128, dict(dropout_p=0.3)),              # the key table's descriptors
    (2, 128, 128, (2, 2), 128, dict(causal=True, dropout_p=0.3)),  # the split path with dropout
])
@pytest.mark.parametrize("deal", ["head-major", "block-major"])
def test_warp_specialized_backward_persistent(monkeypatch, b, nq, nk, heads, d, kw, deal):
    """bwd_ws.py's persistent loops (PERSISTENT, launchers.backward.WS_PERSISTENT): three
    programs dealing out every key block (dK/dV) and query block (dQ) in snake rounds give
    bitwise the gradients of one program a block (same tile, same order of the inner loop;
    outputs are poisoned, so a tile the loop skips fails), through descriptors made once
    over the (B * N, H-span) views, and both launches really were persistent. Causal runs
    the split path (bwd_ws.py PARTIAL, then bwd.py), under both deals."""
    from flashtriton.launchers import backward
    masked = kw.get("causal", False)
    if deal == "block-major" and not masked:
        pytest.skip("the deal differs only for masked calls")
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    monkeypatch.setattr(backward, "WS_PERSISTENT_PROGRAMS", 3)
    monkeypatch.setattr(backward, "WS_HEAD_MAJOR_MAX_BLOCKS", 10**6 if deal == "head-major" else 0)
    launched = []
    real = backward._ws_programs
    monkeypatch.setattr(backward, "_ws_programs", lambda *a: launched.append((a[1], real(*a))) or launched[-1][1])
    if kw.pop("packed", False):
        qkv = torch.randn(b, nq, 3, heads[0], d, dtype=torch.bfloat16, device=DEVICE, requires_grad=True)
        q, k, v = qkv.unbind(2)
        assert q.stride(1) == 3 * heads[0] * d                        # rows 3 heads' spans apart
    else:
        q, k, v = rand_qkv(b, nq, nk, *heads, d, torch.bfloat16, DEVICE, requires_grad=True)
    torch.manual_seed(7)
    with flashtriton.use_backend("triton"):
        out = flash_attn_func(q, k, v, **kw)
    dout = torch.randn_like(out)
    runs = []
    for persistent in (True, False):
        kinds = {(kernel, d, masked, "dropout_p" in kw) for kernel in ("dkdv", "dq")}
        monkeypatch.setattr(backward, "WS_PERSISTENT", kinds if persistent else set())
        with flashtriton.use_backend("triton"):
            runs.append(torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
    assert launched == [("dkdv", (3, True)), ("dq", (3, True))] + [(kern, (n, False)) for kern, (n, _) in
                                                                   launched[2:]], launched
    assert len(launched) == 4
    for name, got, want in zip(("dq", "dk", "dv"), *runs):
        assert not want.isnan().any(), f"{name}: an element nothing wrote"
        assert torch.equal(got, want), f"{name}: persistent differs from one tile a program"


@pytest.mark.gpu
@pytest.mark.gpu_alone
@pytest.mark.parametrize("d,n,causal", [(128, 2048, False), (128, 4096, True), (64, 2048, False)])
def test_persistent_backward_repeatable_gpu(monkeypatch, d, n, causal):
    """The persistent bwd_ws.py on the GPU (session 17): 10 calls at
    hundreds of tiles a kernel give bitwise the gradients of one tile a program (the
    forward's per-tile descriptors raced there: test_persistent_forward_repeatable_gpu).
    Causal runs the split path."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    q, k, v = rand_qkv(16384 // n, n, n, 2048 // d, 2048 // d, d, torch.bfloat16, DEVICE, requires_grad=True)
    # deterministic=True: these lengths' default calls take the fused Gluon backward since
    # session 25 (policy.gluon_bwd_fused), whose dq is not bitwise repeatable
    out = flash_attn_func(q, k, v, causal=causal, deterministic=True)
    dout = torch.randn_like(out)
    monkeypatch.setattr(backward, "WS_PERSISTENT", set())
    plans.clear()                                                  # plans key on the environment only
    want = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    monkeypatch.setattr(backward, "WS_PERSISTENT", {(kernel, d, causal, False) for kernel in ("dkdv", "dq")})
    plans.clear()
    launched = []
    real = backward._ws_programs
    monkeypatch.setattr(backward, "_ws_programs", lambda *a: launched.append(real(*a)) or launched[-1])
    for _ in range(10):
        got = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        assert all(torch.equal(x, y) for x, y in zip(got, want))
    assert launched and all(p for _, p in launched), "the persistent kernels did not run"



@pytest.mark.gpu
@pytest.mark.gpu_alone
def test_dkdv_long_loop_repeatable_gpu():
    """Regression (session 18): bwd_ws.py's dK/dV at D = 128, N = 16k (one tile a program,
    a 256-tile loop) gave NaN dk / dv in ~3% of calls with its lse / delta loads through
    1-D descriptors; beyond WS_DKDV_DESC_MAX_ROWS they are pointer loads. 100 calls (with
    the descriptors ~95% likely to catch one) are NaN-free and bitwise the first."""
    from flashtriton.launchers import backward, plans
    assert backward._dkdv_vec_ptr(128, 1, 16384)
    plans.clear()
    q, k, v = rand_qkv(1, 16384, 16384, 16, 16, 128, torch.bfloat16, DEVICE, requires_grad=True)
    out = flash_attn_func(q, k, v, deterministic=True)     # (the default takes the fused Gluon backward)
    dout = torch.randn_like(out)
    launched = []
    real = backward._ws_programs
    backward._ws_programs = lambda *a: launched.append((a[1], real(*a))) or launched[-1][1]
    try:
        want = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        # a dQ launch: only the launcher asks for one (the policy's question is dK/dV's)
        assert any(kern == "dq" for kern, _ in launched), "bwd_ws.py did not run"
        assert not any(t.isnan().any() for t in want)
        for _ in range(100):
            got = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            assert all(torch.equal(x, y) for x, y in zip(got, want))
    finally:
        backward._ws_programs = real

def test_warp_specialized_backward_persistent_rule(monkeypatch):
    """Which bwd_ws.py launches loop persistently (launchers.backward._ws_programs): by
    default the measured kinds (session 17), D = 128 up to WS_PERSISTENT_MAX_N; the kinds in WS_PERSISTENT with more tiles than
    programs and the flat layout; the masked deal block-major beyond
    WS_HEAD_MAJOR_MAX_BLOCKS blocks a head, for causal-like masks only."""
    from flashtriton.launchers import backward, common
    dev = torch.device(DEVICE)
    sms = common.sm_count(dev)
    many = 8 * sms
    assert backward.WS_PERSISTENT_PROGRAMS is None
    assert backward._ws_programs(dev, "dq", many, 128, False, False, True, 4096) == (sms, True)
    assert backward._ws_programs(dev, "dq", many, 128, False, False, True, 8192) == (many, False)  # MAX_N
    assert backward._ws_programs(dev, "dq", many, 64, False, False, True, 16384) == (sms, True)
    for kernel in ("dkdv", "dq"):     # the split path's dropout launches (session 21)
        assert backward._ws_programs(dev, kernel, many, 128, True, True, True, 4096) == (sms, True)
        assert backward._ws_programs(dev, kernel, many, 64, True, True, True, 4096) == (many, False)
    monkeypatch.setattr(backward, "WS_PERSISTENT", set())
    assert backward._ws_programs(dev, "dq", many, 128, False, False, True) == (many, False)
    monkeypatch.setattr(backward, "WS_PERSISTENT", {("dq", 128, False, False), ("dkdv", 64, True, False)})
    assert backward._ws_programs(dev, "dq", many, 128, False, False, True) == (sms, True)
    assert backward._ws_programs(dev, "dq", sms, 128, False, False, True) == (sms, False)      # one wave
    assert backward._ws_programs(dev, "dq", many, 128, False, False, False) == (many, False)   # not flat
    assert backward._ws_programs(dev, "dkdv", many, 128, False, False, True) == (many, False)
    assert backward._ws_programs(dev, "dq", many, 128, False, True, True) == (many, False)    # dropout
    assert backward._ws_programs(dev, "dkdv", many, 64, True, False, True) == (sms, True)
    most = backward.WS_HEAD_MAJOR_MAX_BLOCKS
    causal, window = common.AttnParams(0.1, window_right=0), common.AttnParams(0.1, window_left=64, window_right=0)
    for kernel in ("dkdv", "dq"):
        assert backward._deal_block_major(kernel, causal, most + 1)
        assert not backward._deal_block_major(kernel, causal, most)
        assert not backward._deal_block_major(kernel, window, 4 * most)
        assert not backward._deal_block_major(kernel, common.AttnParams(0.1), 4 * most)
    monkeypatch.setattr(backward, "WS_HEAVY_FIRST", False)
    assert backward._deal_block_major("dkdv", causal, most + 1)              # dK/dV: its first keys are heaviest
    assert not backward._deal_block_major("dq", causal, most + 1)
    # the tile-start loads double-buffered at D = 64; one buffer from D = 128 (2 was wrong on the H200)
    assert backward._tile_stages(64, False) == backward._tile_stages(64, True) == backward.WS_PERSISTENT_TILE_STAGES
    assert backward._tile_stages(128, True) == backward._tile_stages(128, False) == 1


def test_persistent_backward_ragged_rule(monkeypatch):
    """Regression (session 17, H200): a causal (2, 96, 160) backward ran persistent on the
    split path and its dq differed from one tile a program - the flat descriptors' last
    query block ran into the next batch's rows. Persistent bwd_ws.py launches now need Nq
    and Nk multiples of the tiles (backward._ws_flat), and _ws_persistent_call says no.
    With the GPU's tiles (the interpreter's 32 x 32 would divide every length here)."""
    from flashtriton.launchers import backward, policy
    from flashtriton.launchers.common import AttnParams
    monkeypatch.setattr(backward, "_bwd_ws_tiles", lambda bd: policy.BWD_WARP_SPEC_TILES[bd])
    causal = AttnParams(0.1, window_right=0)
    for (nq, nk), want in [((96, 160), False), ((128, 256), True), ((256, 96), False), ((128, 192), False)]:
        q = torch.randn(128, nq, 2, 128, dtype=torch.bfloat16, device=DEVICE)
        k = v = torch.randn(128, nk, 1, 128, dtype=torch.bfloat16, device=DEVICE)
        assert backward._ws_flat((q, k, v, q), 128, nq, nk) == want
        assert backward._ws_persistent_call(q, k, v, q, 128, causal, True) == want, (nq, nk)


def test_warp_spec_off_while_gpu_shared(monkeypatch):
    """Session 17: under "auto" the warp-specialized kernels are left while other
    processes share the GPU (they gave NaN under time-slicing), and a launch plan records
    the flag in its key and decides from that same value (so a plan recorded alone never
    replays on a shared GPU); "1" keeps them."""
    from flashtriton.launchers import plans, policy
    q = torch.empty(1, 8, 2, 128, dtype=torch.bfloat16)
    shared = [False]
    monkeypatch.setattr(policy, "interpreting", lambda: False)
    monkeypatch.setattr(policy, "_compute_capability", lambda idx: (9, 0))
    monkeypatch.setattr(policy, "gpu_shared", lambda dev: shared[0])
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "auto")
    assert policy._warp_spec_switch(q)
    shared[0] = True
    assert not policy._warp_spec_switch(q)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    assert policy._warp_spec_switch(q)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "auto")
    rec = plans._Recorder(())
    rec.shared = False                                  # the key said "alone": the recording follows it
    monkeypatch.setattr(plans._state, "recorder", rec, raising=False)
    assert policy._warp_spec_switch(q)
    monkeypatch.setattr(plans._state, "recorder", None)
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    monkeypatch.setattr(plans, "gpu_shared", lambda dev: shared[0])
    monkeypatch.setattr(plans.triton.knobs.runtime, "interpret", False)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    key_shared = plans.plan_key("fwd", (q,), ())
    shared[0] = False
    key_alone = plans.plan_key("fwd", (q,), ())
    assert key_shared != key_alone and key_shared[-1] is True and key_alone[-1] is False
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")    # the flag changes nothing there: not in the key
    shared[0] = True
    assert plans.plan_key("fwd", (q,), ())[-1] is False


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,p", [
    (2, 256, 256, (2, 2), 128, 0.2),                             # (4 heads before session 80: CI time)
    (1, 128, 384, (4, 2), 128, 0.5),                             # GQA, Nq < Nk
    (1, 128, 256, (2, 2), 256, 0.3),                             # D = 256 (the backward: bwd.py)
])
def test_warp_specialized_dropout(monkeypatch, b, nq, nk, heads, d, p):
    """Dropout in the warp-specialized forward and backward (forced): the output and
    gradients match the reference under the mask dropout_mask() returns for the same
    seed, and the kernels ran.
    Regression (H200, sessions 8 and 9): the warp-specialized forward with dropout, its
    keys read from the key table through descriptors, wrote a wrong lse for row 0 at
    D = 256 in every call, and at D = 128 under load ("S_dmask's sign disagrees with the
    keep mask" here). It hashes the keys itself now."""
    from helpers import check_attention
    from flashtriton.launchers import backward, forward, policy
    calls = spy(monkeypatch, forward, "_fwd_warp_spec", lambda *a, **k: k.get("rng"))
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    q, k, v = rand_qkv(b, nq, nk, *heads, d, torch.bfloat16, DEVICE)
    bwd_calls = spy(monkeypatch, backward, "_bwd_warp_spec", lambda *a, **k: a[11])
    res = check_attention("triton", q, k, v, dropout_p=p, seed=nq + nk)
    assert not res["keep"].all()
    assert calls and calls[0] is not None, "the warp-specialized forward did not take the dropout call"
    if d in policy.BWD_WARP_SPEC_TILES:
        assert bwd_calls and bwd_calls[0] is not None, "the warp-specialized backward did not take the dropout call"


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", [
    (2, 200, 200, (2, 2), 128, dict(causal=True)),               # ragged, causal (2 heads: CI time)
    (1, 113, 203, (4, 2), 128, dict(causal=True)),               # Nq < Nk, GQA
    (1, 203, 113, (2, 1), 128, dict(causal=True)),               # Nq > Nk: rows that see no key, MQA
    (1, 150, 150, (2, 2), 128, dict(window_size=(-1, 5))),        # a right window edge alone
    (2, 77, 90, (2, 2), 128, dict()),                            # ragged, not causal
    (1, 260, 230, (2, 1), 128, dict(window_size=(70, 0))),        # sliding window: both edges masked
    (1, 200, 200, (2, 2), 128, dict(window_size=(40, 25))),
    (1, 200, 230, (2, 1), 64, dict(causal=True)),                 # D = 64
    (1, 150, 150, (2, 2), 64, dict(window_size=(-1, 5))),         # D = 64 windows: VEC_PTR 2 under
    (1, 260, 230, (2, 1), 64, dict(window_size=(70, 0))),         # both edges (review, session 30)
])
def test_warp_specialized_split_backward(monkeypatch, b, nq, nk, heads, d, kw):
    """The split backward: the warp-specialized kernels (bwd_ws.py, PARTIAL) do the fully
    visible tiles, bwd.py's kernels resume (RESUME) with the masked ones; forced with
    FLASHTRITON_WARP_SPEC=1, the gradients pass the reference check and both ran."""
    from flashtriton.launchers import backward
    calls = spy(monkeypatch, backward, "_bwd_warp_spec", lambda *a, **k: k.get("partial"))
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    run_and_check("triton", b, nq, nk, heads, d, torch.bfloat16, **kw)
    assert calls == [True], calls


# Shapes of the split path's resumed-launch tests: every mask edge the resumed tiles meet.
RESUME_SHAPES = [
    (2, 200, 200, (2, 2), 128, dict(causal=True)),               # ragged, causal (2 heads: CI time)
    (1, 113, 203, (4, 2), 128, dict(causal=True)),               # Nq < Nk, GQA
    (1, 203, 113, (2, 1), 128, dict(causal=True)),               # Nq > Nk, MQA
    (1, 260, 230, (2, 1), 128, dict(window_size=(70, 0))),        # both edges masked
    (1, 200, 200, (2, 2), 128, dict(window_size=(40, 25))),
]


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", RESUME_SHAPES)
@pytest.mark.parametrize("query_rows", [False, True])
def test_split_backward_smaller_resumed_tiles(monkeypatch, b, nq, nk, heads, d, kw, query_rows):
    """The split path's resumed launches (bwd.py RESUME) on tiles smaller than the bulk's
    (launchers.backward.RESUME_TILES: dK/dV halving the key block, dQ halving the query
    block) do every tile the bulk left: the part of a sub-block's fully visible tiles the
    bulk's block did not see as well as the masked ones, in either dK/dV layout
    (RESUME_QUERY_ROWS). Gradients pass the reference check; both resumed launches ran
    with the smaller tile, the layout asked for and the bulk's size passed. On the GPU
    the bulk is 64 x 128 / 128 x 64 and the resumed tiles 64 x 64 (review, session 19:
    otherwise no GPU test compiled the BULK_N / BULK_M kernels)."""
    from flashtriton.kernels import bwd as bwd_kernels
    from flashtriton.kernels import configs
    from flashtriton.launchers import backward, plans
    ws_dkdv, ws_dq = backward._bwd_ws_tiles(128)      # the bulk's (32 x 32 under the interpreter)
    small_dkdv = configs.Tile(ws_dkdv.block_m, ws_dkdv.block_n // 2, 4, 1 if DEVICE == "cpu" else 2)
    small_dq = configs.Tile(ws_dq.block_m // 2, ws_dq.block_n, 4, 1 if DEVICE == "cpu" else 2)
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    monkeypatch.setattr(backward, "RESUME_TILES", {128: (small_dkdv, small_dq)})
    monkeypatch.setattr(backward, "RESUME_QUERY_ROWS", {128} if query_rows else set())
    launched = []
    real = plans.launch

    def record(kernel, grid, *args, **kwargs):
        if kwargs.get("RESUME"):
            launched.append((kernel, kwargs["BLOCK_M"], kwargs["BLOCK_N"], kwargs.get("BULK_N"), kwargs.get("BULK_M"),
                             kwargs.get("KEY_ROWS")))
        return real(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(plans, "launch", record)
    run_and_check("triton", b, nq, nk, heads, d, torch.bfloat16, **kw)
    assert launched == [(bwd_kernels.attn_bwd_dkdv_kernel, small_dkdv.block_m, small_dkdv.block_n, ws_dkdv.block_n,
                         None, not query_rows),
                        (bwd_kernels.attn_bwd_dq_kernel, small_dq.block_m, small_dq.block_n, None, ws_dq.block_m,
                         None)], launched


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", RESUME_SHAPES + [
    (1, 150, 170, (2, 2), 128, dict(window_size=(30, -1))),       # left edge only (review, session 20)
])
@pytest.mark.parametrize("halved", [False, True])
def test_split_backward_resumed_in_one_loop(monkeypatch, b, nq, nk, heads, d, kw, halved):
    """launchers.backward.RESUME_ONE_LOOP: the resumed launches run their tiles (masked
    and fully visible, around the bulk's) in one loop with the mask on every tile. Same
    tiles, same order, and a mask on a fully visible tile changes nothing: the gradients
    are bitwise those of the four-loop kernels under the interpreter (on sm_90 the one
    compiled body rounds some fully visible tiles differently: both pass the reference
    check); both resumed launches ran with ONE_LOOP, on the bulk's tiles or halved ones."""
    from flashtriton.kernels import configs
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    if halved:
        ws_dkdv, ws_dq = backward._bwd_ws_tiles(128)
        stages = 1 if DEVICE == "cpu" else 2
        monkeypatch.setattr(backward, "RESUME_TILES", {128: (
            configs.Tile(ws_dkdv.block_m, ws_dkdv.block_n // 2, 4, stages),
            configs.Tile(ws_dq.block_m // 2, ws_dq.block_n, 4, stages))})
    h, hk = heads
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, torch.bfloat16, DEVICE, requires_grad=True)
    launched = []
    real = plans.launch

    def record(kernel, grid, *args, **kwargs):
        if kwargs.get("RESUME"):
            launched.append(kwargs.get("ONE_LOOP", False))
        return real(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(plans, "launch", record)

    def grads(one_loop):
        monkeypatch.setattr(backward, "RESUME_ONE_LOOP", {128} if one_loop else set())
        plans.clear()
        with flashtriton.use_backend("triton"):
            out = flash_attn_func(q, k, v, **kw)
        dout = torch.randn(out.shape, generator=torch.Generator(DEVICE).manual_seed(7), device=DEVICE,
                           dtype=out.dtype)
        return torch.autograd.grad(out, (q, k, v), dout)
    four, one = grads(False), grads(True)
    assert launched == [False, False, True, True], launched
    if DEVICE == "cpu":
        for x, y in zip(one, four):
            assert torch.equal(x, y)
    # both against the reference on the same inputs (regression, session 21: a second
    # random draw here met a bf16 output in [4, 8) one ulp off, 3.08e-2 against PyTorch's
    # 1.46e-2, in the forward, which this switch does not touch)
    for one_loop in (set(), {128}):
        monkeypatch.setattr(backward, "RESUME_ONE_LOOP", one_loop)
        plans.clear()
        check_attention("triton", q, k, v, check_probs=False, **kw)


def _backward_launches(monkeypatch):
    """Record (kernel, FUSED_DELTA) of every backward launch (preprocess, dK/dV, dQ)."""
    from flashtriton.kernels import bwd as bwd_kernels
    from flashtriton.launchers import plans
    kernels = (bwd_kernels.bwd_preprocess_kernel, bwd_kernels.attn_bwd_dkdv_kernel, bwd_kernels.attn_bwd_dq_kernel)
    launched = []
    real = plans.launch

    def record(kernel, grid, *args, **kwargs):
        if kernel in kernels:
            launched.append((kernel, bool(kwargs.get("FUSED_DELTA"))))
        return real(kernel, grid, *args, **kwargs)
    monkeypatch.setattr(plans, "launch", record)
    return launched


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("b,nq,nk,heads,d,kw", [
    (2, 113, 113, (4, 2), 40, dict(causal=True)),
    (1, 17, 203, (2, 1), 96, {}),
    (2, 150, 100, (4, 4), 80, dict(window_size=(30, 10))),
    (1, 1, 17, (2, 2), 64, dict(causal=True)),                   # one query row
    (1, 70, 70, (2, 2), 192, dict(softcap=5.0)),
])
def test_fused_delta_backward(monkeypatch, b, nq, nk, heads, d, kw):
    """launchers.backward.BWD_FUSED_DELTA: bwd.py's dQ kernel computes delta = rowsum(dO *
    O) for its own rows and runs before the dK/dV kernel, which reads it; no preprocess
    launch. Gradients pass the reference check (a wrong or missing delta fails dK and dQ)."""
    from flashtriton.kernels import bwd as bwd_kernels
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")               # bwd.py on a GPU too
    monkeypatch.setattr(backward, "BWD_FUSED_DELTA", {64, 128, 256})
    plans.clear()
    launched = _backward_launches(monkeypatch)
    run_and_check("triton", b, nq, nk, heads, d, torch.bfloat16, **kw)
    assert launched == [(bwd_kernels.attn_bwd_dq_kernel, True), (bwd_kernels.attn_bwd_dkdv_kernel, False)], launched


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_fused_delta_not_on_the_split_path(monkeypatch):
    """BWD_FUSED_DELTA applies to bwd.py's own path only: the split path's bwd_ws.py
    kernels and its resumed dK/dV read delta first, so the preprocess stays there (review,
    session 20: without the guard no test failed, and the split would read an unwritten
    delta)."""
    from flashtriton.kernels import bwd as bwd_kernels
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")               # the split path, forced
    monkeypatch.setattr(backward, "BWD_FUSED_DELTA", {64, 128, 256})
    plans.clear()
    launched = _backward_launches(monkeypatch)
    run_and_check("triton", 1, 113, 203, (4, 2), 128, torch.bfloat16, causal=True)
    assert launched == [(bwd_kernels.bwd_preprocess_kernel, False), (bwd_kernels.attn_bwd_dkdv_kernel, False),
                        (bwd_kernels.attn_bwd_dq_kernel, False)], launched


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
def test_fused_delta_needs_out_strided_as_dout(monkeypatch):
    """The fused dQ kernel reads O with dO's strides: a dout of other strides (a transposed
    view) keeps the preprocess kernel, and the gradients stay right."""
    from flashtriton.kernels import bwd as bwd_kernels
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "0")
    monkeypatch.setattr(backward, "BWD_FUSED_DELTA", {64, 128, 256})
    plans.clear()
    q, k, v = rand_qkv(2, 70, 70, 4, 2, 64, torch.bfloat16, DEVICE, requires_grad=True)
    with flashtriton.use_backend("triton"):
        out = flash_attn_func(q, k, v, causal=True)
    dout = torch.randn(2, 4, 70, 64, dtype=out.dtype, device=DEVICE).transpose(1, 2)   # (B, N, H, D) view
    assert dout.stride() != out.stride()
    launched = _backward_launches(monkeypatch)
    got = torch.autograd.grad(out, (q, k, v), dout)
    assert launched == [(bwd_kernels.bwd_preprocess_kernel, False), (bwd_kernels.attn_bwd_dkdv_kernel, False),
                        (bwd_kernels.attn_bwd_dq_kernel, False)], launched
    monkeypatch.setattr(backward, "BWD_FUSED_DELTA", set())
    plans.clear()
    with flashtriton.use_backend("triton"):
        out2 = flash_attn_func(q, k, v, causal=True)
    want = torch.autograd.grad(out2, (q, k, v), dout)
    for x, y in zip(got, want):
        assert torch.equal(x, y)


def test_resume_tiles_rule(monkeypatch):
    """RESUME_TILES must keep the bulk's dK/dV BLOCK_M and dQ BLOCK_N and divide the other
    side (the resumed program finds the bulk's block of its tile by integer division)."""
    from flashtriton.kernels import configs
    from flashtriton.launchers import backward
    ws_dkdv, ws_dq = backward._bwd_ws_tiles(128)
    for bad in ((configs.Tile(ws_dkdv.block_m // 2, ws_dkdv.block_n, 4, 1), ws_dq),
                (ws_dkdv, configs.Tile(ws_dq.block_m, ws_dq.block_n // 2, 4, 1)),
                (configs.Tile(ws_dkdv.block_m, 3 * ws_dkdv.block_n // 4, 4, 1), ws_dq),
                (ws_dkdv, configs.Tile(3 * ws_dq.block_m // 4, ws_dq.block_n, 4, 1))):
        monkeypatch.setattr(backward, "RESUME_TILES", {128: bad})
        with pytest.raises(ValueError, match="RESUME_TILES"):
            backward._resume_tiles(128)
    monkeypatch.setattr(backward, "RESUME_TILES", {})
    assert backward._resume_tiles(128)[2:] == (ws_dkdv.block_n, ws_dq.block_m)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("kw", [dict(causal=True), dict(window_size=(70, 0))])
def test_warp_specialized_heavy_first_is_a_permutation(monkeypatch, kw):
    """WS_HEAVY_FIRST (fwd_ws.py's masked forward and bwd_ws.py's dQ kernel hand out a
    head's query blocks in reverse order) only reorders programs: output, lse and
    gradients are bitwise those of the ascending order, and every block is still written
    (outputs poisoned)."""
    from flashtriton.launchers import backward, forward
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    q, k, v = rand_qkv(1, 256, 256, 2, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    dout = torch.randn_like(q)

    def run():
        with flashtriton.use_backend("triton"):
            out, lse, _ = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
            return (out, lse) + torch.autograd.grad(out, (q, k, v), dout)

    monkeypatch.setattr(backward, "WS_HEAVY_FIRST", False)
    monkeypatch.setattr(forward, "WS_HEAVY_FIRST", False)
    base = run()
    monkeypatch.setattr(backward, "WS_HEAVY_FIRST", True)
    monkeypatch.setattr(forward, "WS_HEAVY_FIRST", True)
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), run(), base):
        assert not a.isnan().any(), f"{name}: an element nothing wrote"
        assert torch.equal(a, b), f"{name}: differs from the ascending order"


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("causal, dropout_p, nq, nk, d, kind", [
    *((c, p, nq, nk, 128, kind) for kind in (1, 2)
      for c, p, nq, nk in ((False, 0.0, 128, 128), (True, 0.0, 128, 128), (False, 0.2, 128, 128), (True, 0.0, 113, 161))),
    (False, 0.0, 128, 128, 64, 2), (True, 0.0, 113, 161, 64, 2),      # D = 64: only VEC_PTR 2, no dropout
    (True, 0.0, 200, 230, 64, 2)])                                      # (launchers.backward.WS_DKDV_VEC_PTR1_FAILS)
def test_dkdv_ws_vector_pointer_loads(monkeypatch, causal, dropout_p, nq, nk, d, kind):
    """bwd_ws.py's dK/dV with its loop's 1-D vectors (lse, delta, dropout's row keys) by
    pointer loads (VEC_PTR, launchers.backward.WS_DKDV_VEC_PTR) gives bitwise the
    gradients of the descriptor loads (the same values reach the same arithmetic), whole
    call and split path, GQA, ragged counts (padded lse rows). Regression: session 18's
    NaN dk / dv of the descriptor loads at D = 128, 8k / 16k (a GPU fault; this pins the
    pointer path's indexing), also at D = 64 (the pointer path's indexing there; that every
    one-tile D = 64 launch takes it by default is test_one_tile_dkdv_d64_pointer_loads's)."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR_KIND", kind)     # 2: one iteration ahead
    # 113: lse padded; GQA 2 / 1 (4 / 2 before session 80: CI time)
    q, k, v = rand_qkv(2, nq, nk, 2, 1, d, torch.bfloat16, DEVICE, requires_grad=True)
    runs = []
    for flag in (False, True):
        monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR", flag)
        plans.clear()
        torch.manual_seed(7)
        with flashtriton.use_backend("triton"):
            out = flash_attn_func(q, k, v, causal=causal, dropout_p=dropout_p)
            runs.append(torch.autograd.grad(out, (q, k, v), torch.ones_like(out) * 0.5 + out.detach()))
    for name, a, b in zip(("dq", "dk", "dv"), *runs):
        assert not b.isnan().any() and torch.equal(a, b), name


def test_dkdv_vec_ptr_rule(monkeypatch):
    """The dK/dV loop reads its vectors by pointers once group * Nq passes
    WS_DKDV_DESC_MAX_ROWS at that BLOCK_D (GQA lengthens the loop), and WS_DKDV_VEC_PTR
    forces either way."""
    from flashtriton.launchers import backward
    top = backward.WS_DKDV_DESC_MAX_ROWS[128]
    assert not backward._dkdv_vec_ptr(128, 1, top) and backward._dkdv_vec_ptr(128, 1, top + 1)
    assert backward._dkdv_vec_ptr(128, 2, top // 2 + 64) and not backward._dkdv_vec_ptr(64, 8, 16 * top)
    monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR", True)
    assert backward._dkdv_vec_ptr(64, 1, 128)


def test_dkdv_vec_ptr_kind_rule(monkeypatch):
    """Pointer loads one iteration ahead (VEC_PTR 2) for unmasked dK/dV loops, in the
    iteration (1) under a causal or window mask, as measured on the H200
    (launchers.backward.WS_DKDV_VEC_PTR_KIND), except at D = 64, where 1 does not compile
    (WS_DKDV_VEC_PTR1_FAILS: 2 under masks too); the module value forces either."""
    from flashtriton.launchers import backward
    from flashtriton.launchers.common import AttnParams
    base = AttnParams(softmax_scale=0.1)
    causal, window = AttnParams(softmax_scale=0.1, window_right=0), AttnParams(softmax_scale=0.1, window_left=1024)
    assert backward._dkdv_vec_ptr_kind(base, 128) == 2
    assert backward._dkdv_vec_ptr_kind(causal, 128) == 1 and backward._dkdv_vec_ptr_kind(window, 128) == 1
    assert backward.WS_DKDV_VEC_PTR1_FAILS == {64}
    assert backward._dkdv_vec_ptr_kind(causal, 64) == 2 and backward._dkdv_vec_ptr_kind(window, 64) == 2
    monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR_KIND", 1)
    assert backward._dkdv_vec_ptr_kind(base, 128) == 1


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("case", ["vec_ptr1", "dropout"])
def test_ws_dkdv_compile_guards(monkeypatch, case):
    """Regression (session 30): the D = 64 dK/dV kernel compiles neither VEC_PTR 1 nor dropout
    with pointer loads (Triton 3.6). Should a table change send such a launch anyway (the
    kind forced to 1; policy.BWD_WS_NO_DROPOUT emptied), the launcher raises a
    NotImplementedError naming it before the launch instead of Triton's compile failure."""
    from flashtriton.launchers import backward, plans, policy
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    monkeypatch.setattr(backward, "WS_PERSISTENT", set())
    plans.clear()
    if case == "vec_ptr1":
        monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR_KIND", 1)
        kw, nq, nk, match = dict(causal=True), 113, 161, r"VEC_PTR = 1 at BLOCK_D 64"
    else:
        monkeypatch.setattr(policy, "BWD_WS_NO_DROPOUT", set())
        kw, nq, nk, match = dict(dropout_p=0.2), 128, 128, r"with dropout at BLOCK_D 64"
    q, k, v = rand_qkv(1, nq, nk, 2, 2, 64, torch.bfloat16, DEVICE, requires_grad=True)
    with flashtriton.use_backend("triton"):
        out = flash_attn_func(q, k, v, deterministic=True, **kw)
        with pytest.raises(NotImplementedError, match=match):
            torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    plans.clear()


def test_varlen_ws_backward_loop_rule(monkeypatch):
    """bwd_ws_varlen.py (1-D lse / delta descriptor loads in its dK/dV loop, no VEC_PTR)
    takes varlen backwards only while group x max_seqlen_q is within
    WS_DKDV_DESC_MAX_ROWS, or when forced."""
    from flashtriton.launchers import backward
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "auto")
    top = backward.WS_DKDV_DESC_MAX_ROWS[128]
    assert backward._varlen_ws_loop_ok(128, 1, top) and not backward._varlen_ws_loop_ok(128, 2, top)
    assert backward._varlen_ws_loop_ok(64, 8, 4 * top)                       # no rule at BLOCK_D 64
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    assert backward._varlen_ws_loop_ok(128, 2, top)


def test_dkdv_vec_ptr_launch_is_one_tile(monkeypatch):
    """With pointer loads the dK/dV launch stays one tile a program (the persistent kernel
    with them never ran on a GPU), in the launch and in the policy's persistence question;
    dQ keeps its persistence. GQA group 4 at Nq = 2048 passes WS_DKDV_DESC_MAX_ROWS."""
    from flashtriton.launchers import backward, common
    monkeypatch.setattr(backward, "WS_PERSISTENT_PROGRAMS", 2)
    monkeypatch.setattr(backward, "_flat_rows", lambda t, bd: True)
    q = torch.empty(1, 2048, 8, 128, dtype=torch.bfloat16)
    k = torch.empty(1, 2048, 2, 128, dtype=torch.bfloat16)
    params = common.AttnParams(0.1)
    assert backward._dkdv_vec_ptr(128, 4, 2048)
    assert not backward._ws_persistent_call(q, k, k, q, 128, params, False)
    monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR", False)
    assert backward._ws_persistent_call(q, k, k, q, 128, params, False)
    monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR", None)
    monkeypatch.setattr(backward, "WS_VEC_PTR_PERSISTENT", True)            # the experiment switch
    assert backward._ws_persistent_call(q, k, k, q, 128, params, False)


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("vec_ptr", [False, True])
def test_dkdv_vec_ptr_launch_flat_argument(monkeypatch, vec_ptr):
    """The launch itself (not only the policy's question): with pointer loads the dK/dV
    launch is asked for one tile a program (flat=False to _ws_programs), the dQ launch keeps
    the flat layout's persistence."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    monkeypatch.setattr(backward, "WS_DKDV_VEC_PTR", vec_ptr)
    plans.clear()
    asked = []
    real = backward._ws_programs
    monkeypatch.setattr(backward, "_ws_programs", lambda *a: asked.append((a[1], a[6])) or real(*a))
    q, k, v = rand_qkv(2, 128, 128, 4, 2, 128, torch.bfloat16, DEVICE, requires_grad=True)
    with flashtriton.use_backend("triton"):
        out = flash_attn_func(q, k, v)
        torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert ("dq", True) in asked, asked                         # the shapes are flat
    assert ("dkdv", not vec_ptr) in asked and ("dkdv", vec_ptr) not in asked, asked


@pytest.mark.skipif("triton" not in kernel_backends(), reason="a Triton launch variant")
@pytest.mark.parametrize("persistent, causal, dropout_p, nq, nk, expect", [
    (False, False, 0.0, 128, 128, (False, 2)),      # one tile, unmasked: loads one iteration ahead
    (True, False, 0.0, 128, 128, (True, 0)),        # persistent: descriptors (clean)
    (False, True, 0.0, 113, 161, (False, 2)),       # ragged causal: the split's PARTIAL launch, one tile
                                                    # (VEC_PTR 1 does not compile at D = 64: session 30)
    (False, False, 0.2, 128, 128, None),            # dropout: bwd.py (policy.BWD_WS_NO_DROPOUT), no launch
])
def test_one_tile_dkdv_d64_pointer_loads(monkeypatch, persistent, causal, dropout_p, nq, nk, expect):
    """Regression (session 29): a one-tile-a-program dK/dV launch at D = 64 reads its loop's
    lse / delta by pointers (launchers.backward.WS_DKDV_ONE_TILE_VEC_PTR; VEC_PTR 2, under a
    mask too since session 30: 1 does not compile there), since with descriptors it gave NaN
    dk / dv in ~10% of large calls on the H200; the persistent launch keeps its descriptors
    (clean); dropout takes bwd.py (policy.BWD_WS_NO_DROPOUT). The default rule, not a forced
    WS_DKDV_VEC_PTR. Gradients within the float64 criterion (without dropout)."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    if persistent:
        monkeypatch.setattr(backward, "WS_PERSISTENT_PROGRAMS", 2)      # 4 key blocks > 2 programs
    else:
        monkeypatch.setattr(backward, "WS_PERSISTENT", set())
    plans.clear()
    calls = spy(monkeypatch, plans, "launch", lambda kernel, grid, *a, **kw: (
        (kw.get("PERSISTENT"), kw.get("VEC_PTR")) if kernel is backward.attn_bwd_dkdv_ws_kernel else None))
    q, k, v = rand_qkv(2, nq, nk, 2, 2, 64, torch.bfloat16, DEVICE, requires_grad=True)
    with flashtriton.use_backend("triton"):
        out = flash_attn_func(q, k, v, causal=causal, dropout_p=dropout_p, deterministic=True)
        dout = torch.randn_like(out)
        grads = torch.autograd.grad(out, (q, k, v), dout)
    seen = [c for c in calls if c is not None]
    assert seen == ([expect] if expect else []), seen
    assert all(torch.isfinite(g).all() for g in grads)
    if dropout_p == 0:
        ref64, ref_lowp = reference_pair(q, k, v, dout, softmax_scale=64 ** -0.5, window_right=0 if causal else -1)
        for name, got in zip(("dq", "dk", "dv"), grads):
            assert_close(name, got, ref64[name], ref_lowp[name], 3, q.dtype)


@pytest.mark.gpu
@pytest.mark.gpu_alone
def test_one_tile_dkdv_d64_repeatable_gpu(monkeypatch):
    """Regression (session 29, H200): 40 one-tile-a-program backwards at D = 64, N = 1k,
    16k tokens, H = 32 (forced warp specialization, persistence off: ~4000 programs) are
    all finite and bitwise the persistent launch's. With descriptor loads ~7.5% of such
    calls had NaN dk / dv (bench/gpu/s29_bwd_ws_onetile_probe.py), so 40 calls would pass
    the old code with probability ~4%."""
    from flashtriton.launchers import backward, plans
    monkeypatch.setenv("FLASHTRITON_WARP_SPEC", "1")
    q, k, v = rand_qkv(16, 1024, 1024, 32, 32, 64, torch.bfloat16, DEVICE, requires_grad=True)
    out = flash_attn_func(q, k, v, deterministic=True)
    dout = torch.randn_like(out)
    plans.clear()
    want = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    assert all(torch.isfinite(w).all() for w in want)
    monkeypatch.setattr(backward, "WS_PERSISTENT", set())
    plans.clear()
    for i in range(40):
        got = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        assert all(torch.equal(x, y) for x, y in zip(got, want)), f"call {i}"
