"""config.BF16_PRODUCTS (FLASHTRITON_CPU_BF16; session 36): bf16 inputs multiply in bf16 ("bf16", the
tests' default via conftest), through the float32 kernels on exact float32 copies ("f32"), or by a
one-time probe of this CPU's bf16 and float32 matmul speed ("auto", the library's default)."""
import pytest
import torch

from flashtriton import backends

from conftest import DEVICE
from helpers import check_attention, rand_qkv

pytestmark = pytest.mark.skipif(not backends.cpu_available() or DEVICE != "cpu", reason="CPU backend tests")

if backends.cpu_available():
    import flashtriton
    from flashtriton.cpu import config, forward


def _fwd(q, k, v, **kw):
    with flashtriton.use_backend("cpu"):
        return flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]


@pytest.mark.parametrize("causal", [False, True])
def test_f32_mode_is_the_float32_forward_rounded(monkeypatch, causal):
    """"f32": out is the float32 forward of the exactly converted inputs rounded to bf16 once, lse
    its lse, bitwise; the path name says so; the whole call (backward included) meets the criterion."""
    monkeypatch.setattr(config, "BF16_PRODUCTS", "f32")
    q, k, v = rand_qkv(2, 113, 97, 6, 2, 80, torch.bfloat16, DEVICE)
    out, lse = _fwd(q, k, v, causal=causal)
    assert forward.LAST_PATH.endswith("-f32") and out.dtype == torch.bfloat16
    out32, lse32 = _fwd(q.float(), k.float(), v.float(), causal=causal)
    assert torch.equal(out, out32.bfloat16()) and torch.equal(lse, lse32)
    check_attention("cpu", q, k, v, causal=causal)
    check_attention("cpu", q, k, v, window_size=(20, 5), softmax_scale=6.0)       # large logits, a window


def test_bf16_mode_multiplies_in_bf16(monkeypatch):
    monkeypatch.setattr(config, "BF16_PRODUCTS", "bf16")
    assert config.products_in_input_precision(torch.bfloat16)
    q, k, v = rand_qkv(1, 64, 64, 2, 2, 64, torch.bfloat16, DEVICE)
    _fwd(q, k, v)
    assert not forward.LAST_PATH.endswith("-f32")


def test_auto_mode_follows_the_probe(monkeypatch):
    monkeypatch.setattr(config, "BF16_PRODUCTS", "auto")
    for fast in (True, False):
        monkeypatch.setattr(config, "_bf16_fast", fast)
        assert config.bf16_products() is fast and config.products_in_input_precision(torch.bfloat16) is fast
        assert not config.products_in_input_precision(torch.float16)
        q, k, v = rand_qkv(1, 64, 64, 2, 2, 64, torch.bfloat16, DEVICE)
        _fwd(q, k, v)
        assert forward.LAST_PATH.endswith("-f32") is not fast


def test_probe_runs_once(monkeypatch):
    """The probe measures once a process and keeps its answer (a bool)."""
    monkeypatch.setattr(config, "_bf16_fast", None)
    first = config.bf16_products_fast()
    assert isinstance(first, bool) and config._bf16_fast is first
    calls = []
    monkeypatch.setattr(torch, "mm", lambda *a, **kw: calls.append(1))
    assert config.bf16_products_fast() is first and not calls


def test_rejects_unknown_mode(monkeypatch):
    monkeypatch.setattr(config, "BF16_PRODUCTS", "fp8")
    with pytest.raises(ValueError, match=r"FLASHTRITON_CPU_BF16 / config.BF16_PRODUCTS must be one of"):
        config.products_in_input_precision(torch.bfloat16)


@pytest.mark.parametrize("seqlen", [1, 113, 1023])
def test_f32_mode_decode_takes_the_fma_build(monkeypatch, seqlen):
    """"f32": a bf16 cache's compiled decode runs the FT_NO_DPBF16 build (K / V widened to float32,
    FMAs; path "compiled-f32"), out and lse against float64 within 2x PyTorch's bf16 error, like the
    vdpbf16ps build's ("bf16")."""
    from flashtriton import reference
    from flashtriton.cpu import decode

    from helpers import assert_close
    q = torch.randn(2, 1, 8, 128, dtype=torch.bfloat16)
    kc, vc = (torch.randn(2, seqlen, 2, 128, dtype=torch.bfloat16) for _ in range(2))
    out64, lse64 = reference.attention(q.double(), kc.double(), vc.double(), softmax_scale=128 ** -0.5)
    outlp, _ = reference.attention(q, kc, vc, softmax_scale=128 ** -0.5)
    for mode, path in (("f32", "compiled-f32"), ("bf16", "compiled")):
        monkeypatch.setattr(config, "BF16_PRODUCTS", mode)
        monkeypatch.setattr(config, "DECODE_AMX", "off")
        with flashtriton.use_backend("cpu"):
            out, lse = flashtriton.flash_attn_with_kvcache(q, kc, vc, return_softmax_lse=True)
        assert decode.LAST_PATH == path
        assert torch.isfinite(out).all()
        assert_close(f"{mode} out", out, out64, outlp, 2, torch.bfloat16)
        assert (lse.double() - lse64).abs().max() < 1e-4
