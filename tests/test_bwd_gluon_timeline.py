"""The fused Gluon backward's TIMELINE probe (kernels/bwd_gluon_fused.py, session 43; prepare_fused(timeline=,
timeline_flags=), bench/gpu/s43_bwd_timeline_probe.py): %globaltimer stamps into an int64 buffer passed as the
kernel's KEYS. The host's slot numbers must be the kernel's; the launch arguments carry the buffer and TIMELINE only
when asked (the binder's key of before otherwise); validation needs no GPU. On a Hopper GPU: dk / dv bitwise the
launch without stamps, every CTA's rows and every ring tile's record written, stamps in order."""
import pytest
import torch

from flashtriton.kernels import bwd_gluon_fused as K
from flashtriton.launchers import backward_gluon
from flashtriton.launchers.backward_gluon import fused_gluon, prepare_fused

from conftest import DEVICE
from helpers import rand_qkv
from test_bwd_gluon import hopper, inputs


def args(b=2, nq=256, nk=256, h=4, hk=2, d=128, dtype=torch.bfloat16):
    q, k, v = rand_qkv(b, nq, nk, h, hk, d, dtype, DEVICE)
    return [q, k, v, torch.randn_like(q), torch.zeros(b, h, nq, device=DEVICE), torch.zeros(b, h, nq, device=DEVICE)]


def test_host_numbers_are_the_kernels():
    """TIMELINE_* (read by the probe) against the kernel's constexprs."""
    assert K.TIMELINE_ROW == K.TL_SLOTS.value and K.TIMELINE_WG == K.TL_WG.value
    assert K.TIMELINE_TILE_WORDS == K.TL_TILE_WORDS.value
    for name, slot in K.TIMELINE_SLOTS.items():
        assert getattr(K, f"TL_{name.upper()}").value == slot, name
    assert len(set(K.TIMELINE_SLOTS.values())) == len(K.TIMELINE_SLOTS)
    assert max(K.TIMELINE_SLOTS.values()) < K.TIMELINE_WG
    for name, word in K.TIMELINE_TILE.items():
        assert getattr(K, f"TT_{name.upper()}").value == word, name
    assert max(K.TIMELINE_TILE.values()) < K.TIMELINE_TILE_WORDS
    for name, bit in K.TIMELINE_FLAGS.items():
        assert getattr(K, f"TL_F_{name.upper()}").value == bit, name
    # rows, then 8 int32 words a (tile, CTA, WG): 8 int64 a (tile, CTA)
    assert K.timeline_numel(10, 3) == 10 * 32 + 3 * 10 * 8
    assert backward_gluon.fused_timeline_numel(2, 256, 4, 512, 2, 64, 128) == K.timeline_numel(4 * 2 * 2, 2 * 4)


def test_timeline_launch_args():
    """The buffer in KEYS' place and TIMELINE=flags; without it KEYS None and no TIMELINE keyword."""
    q, k, v, dout, lse, delta = args()
    base = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.1, 64, 128, 2, True, False)
    buf = torch.zeros(backward_gluon.fused_timeline_numel(2, 256, 4, 256, 2, 64), dtype=torch.int64)
    tl = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, 0.1, 64, 128, 2, True, False, timeline=buf,
                                           timeline_flags=5)
    keys_at = base[5].index(None)               # KEYS: the first None argument (no dropout)
    assert base[5][keys_at] is None and tl[5][keys_at] is buf
    assert "TIMELINE" not in base[6] and tl[6]["TIMELINE"] == 5
    assert [a is b for a, b in zip(base[5], tl[5])].count(False) >= 1 and base[4] == tl[4]


@pytest.mark.parametrize("flags", [0, 16, True, 2.0])
def test_rejects_timeline_flags(flags):
    buf = torch.zeros(10 ** 5, dtype=torch.int64, device=DEVICE)
    with pytest.raises(ValueError, match=r"^timeline_flags: expected an int in 1\.\.15"):
        prepare_fused(*args(), 0.1, False, timeline=buf, timeline_flags=flags)


def test_rejects_timeline_buffer_and_combinations():
    with pytest.raises(ValueError, match=r"^timeline: expected a contiguous int64 tensor"):
        prepare_fused(*args(), 0.1, False, timeline=torch.zeros(10 ** 5, dtype=torch.int32, device=DEVICE))
    buf = torch.zeros(10 ** 5, dtype=torch.int64, device=DEVICE)
    with pytest.raises(ValueError, match=r"^timeline: not with dropout"):
        prepare_fused(*args(), 0.1, False, timeline=buf, defer_dq=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("flags", [1, 5, 15])
def test_timeline_gpu(causal, flags):
    """dk / dv bitwise the launch without stamps (dq within fp32 summation order); the rows' stamps in order
    (entry <= start <= kv <= loop end <= epilogue wait <= end, both WGs), %smid below 1024; with flags 2 every ring
    tile's top / Q / S words written (nonzero) and Q - top, S - Q below 1 ms (mod 2^32)."""
    b, n, h, d = 2, 512, 4, 128
    q, k, v, dout, lse, delta, scale, _, _ = inputs(b, n, n, h, h, d, torch.bfloat16, causal)
    dq0, dk0, dv0 = (t.clone() for t in fused_gluon(q, k, v, dout, lse, delta, scale, causal))
    buf = torch.zeros(backward_gluon.fused_timeline_numel(b, n, h, n, h, 64), dtype=torch.int64, device="cuda")
    dq, dk, dv = prepare_fused(q, k, v, dout, lse, delta, scale, causal, timeline=buf, timeline_flags=flags)()
    torch.cuda.synchronize()
    assert torch.equal(dk, dk0) and torch.equal(dv, dv0), "dk / dv changed by the stamps"
    assert (dq.float() - dq0.float()).abs().max() <= 2e-2 * dq0.float().abs().max()
    ctas, n_m = (n // 128) * b * h, n // 64
    rows = buf[:ctas * 32].view(ctas, 32).cpu()
    s = K.TIMELINE_SLOTS
    for w in (0, 1):
        o = w * K.TIMELINE_WG
        seq = [rows[:, s["entry"]]] + [rows[:, o + s[x]] for x in ("start", "kv", "loop_end", "epi_wait", "end")]
        for a_, b_ in zip(seq, seq[1:]):
            assert (a_ > 0).all() and (b_ >= a_).all()
        assert (rows[:, o + s["smid"]] < 1024).all()
    if flags & 2:
        words = buf[ctas * 32:].view(torch.int32)[:n_m * ctas * 16].view(n_m, ctas, 2, 8).cpu()
        words = words.to(torch.int64) % 2 ** 32
        for r in range(ctas):
            t = n_m - (max((r % (n // 128)) * 128 - 63, 0) + 63) // 64 if causal else n_m
            rec = words[:t, r]
            assert (rec[..., K.TIMELINE_TILE["top"]] != 0).all()
            assert (((rec[..., 1] - rec[..., 0]) % 2 ** 32) < 10 ** 6).all()
            assert (((rec[..., 2] - rec[..., 1]) % 2 ** 32) < 10 ** 6).all()
            assert (words[t:, r] == 0).all()
