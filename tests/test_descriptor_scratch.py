"""The in-kernel descriptors' global scratch (launchers.common._alloc_descriptor_scratch):
torch.empty per launch by default; FLASHTRITON_DESC_SCRATCH=ring hands slots out in order
from one buffer (session 16's experiment on the multi-process fault)."""
import pytest
import torch

from flashtriton.launchers import common


def test_scratch_ring_order_alignment_and_wrap():
    """Slots come in order, aligned, never overlapping until the ring wraps; the first
    slot after a wrap starts at 0 (the oldest)."""
    ring = common.ScratchRing(4096, device="cpu")
    a = ring.take(1000, 128)
    b = ring.take(1000, 128)
    assert a.data_ptr() == ring.buf.data_ptr() and b.data_ptr() == ring.buf.data_ptr() + 1024
    c = ring.take(1000, 128)
    assert c.data_ptr() == ring.buf.data_ptr() + 2048
    d = ring.take(1500, 128)                       # 3072 + 1500 > 4096: wraps to 0
    assert d.data_ptr() == ring.buf.data_ptr() and d.numel() == 1500
    e = ring.take(100, 256)
    assert e.data_ptr() == ring.buf.data_ptr() + 1536


def test_scratch_mode_checked(monkeypatch):
    """A bad FLASHTRITON_DESC_SCRATCH is an error naming the variable and its values."""
    monkeypatch.setenv("FLASHTRITON_DESC_SCRATCH", "rings")
    with pytest.raises(ValueError, match=r"^FLASHTRITON_DESC_SCRATCH: must be torch \(the default\) or ring"):
        common._alloc_descriptor_scratch(128, 128, 0)


@pytest.mark.gpu
@pytest.mark.gpu_alone
def test_scratch_ring_launches_gpu(monkeypatch):
    """With the ring, the persistent forward (descriptors in scratch) gives bitwise the
    default allocator's result, and consecutive launches get different addresses."""
    import flashtriton
    from flashtriton.launchers import plans, policy
    # fwd_ws.py's forward, not the Gluon kernel the library takes at this shape since session 24
    monkeypatch.setattr(policy, "GLUON_FWD_MIN_N", {})
    plans.clear()
    q, k, v = (torch.randn(8, 2048, 16, 128, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    want = flashtriton.flash_attn_func(q, k, v)
    monkeypatch.setenv("FLASHTRITON_DESC_SCRATCH", "ring")
    plans.clear()
    seen = []
    real = common.ScratchRing.take
    monkeypatch.setattr(common.ScratchRing, "take", lambda self, *a: seen.append(real(self, *a)) or seen[-1])
    for _ in range(3):
        assert torch.equal(flashtriton.flash_attn_func(q, k, v), want)
    assert len(seen) >= 3 and len({t.data_ptr() for t in seen}) == len(seen)
