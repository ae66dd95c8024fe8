"""flashtriton.memory: the output allocators, poisoned under the tests' autouse fixture and plain outside it."""
import pytest
import torch

from flashtriton import memory


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.int32])
def test_empty_like_poisoned(dtype):
    """Under poison_outputs (every test's fixture) empty_like fills as empty() does: NaN, or the int max."""
    t = torch.ones(3, 5, 2, dtype=dtype).transpose(0, 2)
    out = memory.empty_like(t)
    assert out.shape == t.shape and out.dtype == dtype and out.device == t.device and out.is_contiguous()
    if dtype.is_floating_point:
        assert torch.isnan(out).all()
    else:
        assert (out == torch.iinfo(dtype).max).all()


def test_empty_like_plain_is_contiguous_and_hooked(monkeypatch):
    """Session 54 (the CPU decode's output by torch.empty_like, cold ~half torch.empty's cost): outside the poison
    the tensor is contiguous whatever t's strides (torch.empty_like would keep a permuted t's layout) and the
    allocation hook sees empty()'s spec, so a replayed plan allocates the same."""
    monkeypatch.setattr(memory, "_poison", False)
    seen = []
    monkeypatch.setattr(memory, "alloc_hook", lambda t, kind, spec: seen.append((t, kind, spec)))
    t = torch.randn(2, 7, 4, 8).permute(0, 2, 1, 3)
    out = memory.empty_like(t)
    assert out.shape == t.shape and out.dtype == t.dtype and out.is_contiguous()
    assert len(seen) == 1 and seen[0][0] is out and seen[0][1] == "empty"
    assert seen[0][2] == (t.shape, t.dtype, t.device)
    assert memory.make(*seen[0][1:]).shape == t.shape


def test_cpu_decode_unpoisoned_strided_q(monkeypatch):
    """The CPU decode's output outside the poison (the bench's and users' path; the suite otherwise runs poisoned):
    a q that is a permuted view gives a contiguous out equal to the poisoned run's, bitwise."""
    import flashtriton
    from flashtriton import backends
    if not backends.cpu_available():
        pytest.skip("no CPU backend")
    torch.manual_seed(3)
    q = torch.randn(2, 32, 1, 64, dtype=torch.bfloat16).transpose(1, 2)     # (B, 1, H, D), strided
    kc = torch.randn(2, 100, 8, 64, dtype=torch.bfloat16)
    vc = torch.randn(2, 100, 8, 64, dtype=torch.bfloat16)
    lens = torch.tensor([100, 37], dtype=torch.int32)
    with flashtriton.use_backend("cpu"):
        want = flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
        monkeypatch.setattr(memory, "_poison", False)
        got = flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
    assert got.is_contiguous() and not torch.isnan(want).any()
    assert torch.equal(got, want)
