"""launchers/schedule.py: the host's longest-first deal of causal query blocks to the CTAs
of the persistent Gluon forward (kernels/fwd_gluon.py SCHEDULED). CPU only: the deal's
coverage, layout and balance; the kernel's use of it is tested on the GPU in
tests/test_fwd_gluon.py (test_persistent_scheduled_*)."""
import pytest

from flashtriton.launchers import schedule


@pytest.mark.parametrize("nq, nk", [(1024, 1024), (2048, 1024), (1024, 2048), (128, 128), (4096, 4096)])
def test_causal_tiles_match_kernel_rule(nq, nk):
    """n_load of kernels/fwd_gluon.py _tile_coords: the tiles the block's last row reaches,
    at least 1, at most Nk / BLOCK_N; counted here by brute force over the rows."""
    bm, bn = 128, 128
    for m in range(nq // bm):
        last_row = m * bm + bm - 1
        reach = last_row + nk - nq          # the last key the block's last row sees
        want = min(max((reach + 1 + bn - 1) // bn if reach >= 0 else 0, 1), nk // bn)
        assert schedule.causal_tiles(m, nq, nk, bm, bn) == want, m


@pytest.mark.parametrize("n_m, n_bh, n_prog, band", [(16, 128, 132, 30), (128, 16, 132, 3), (8, 5, 7, 2),
                                                     (4, 3, 1, 1), (3, 2, 50, 7)])
def test_deal_covers_every_block_once(n_m, n_bh, n_prog, band):
    costs = [m + 1.5 for m in range(n_m)]
    lists = schedule.lpt_deal(costs, n_bh, n_prog, band)
    flat = sorted(b for lst in lists for b in lst)
    assert flat == list(range(n_m * n_bh))
    packed = schedule.pack(lists).tolist()
    offsets, blocks = packed[:n_prog + 1], packed[n_prog + 1:]
    assert offsets[0] == 0 and offsets[-1] == n_m * n_bh and offsets == sorted(offsets)
    for p, lst in enumerate(lists):
        assert blocks[offsets[p]:offsets[p + 1]] == lst


def test_deal_balances_better_than_round_robin():
    """16k causal, 16 heads (2048 blocks of 1..128 tiles), 132 CTAs, bands of 3: the
    longest-first deal's largest load is within one longest block of the mean (LPT), the
    round-robin deal of the banded order (kernels/fwd_gluon.py _tile_of) well above it."""
    n_m, n_bh, n_prog, band = 128, 16, 132, 3
    costs = [schedule.causal_tiles(m, 16384, 16384, 128, 128) + schedule.BLOCK_OVERHEAD_TILES for m in range(n_m)]
    lpt = schedule.lpt_deal(costs, n_bh, n_prog, band)
    mean = sum(costs) * n_bh / n_prog
    assert schedule.makespan(lpt, costs, n_m) <= mean + max(costs)
    # the kernel's banded round robin
    rr = [[] for _ in range(n_prog)]
    for t in range(n_m * n_bh):
        span = n_m * band
        first = (t // span) * band
        width = min(band, n_bh - first)
        r = t % span
        m, bh = n_m - 1 - r // width, first + r % width
        rr[t % n_prog].append(bh * n_m + m)
    assert schedule.makespan(lpt, costs, n_m) < 0.95 * schedule.makespan(rr, costs, n_m)


def test_deal_keeps_bands_together():
    """Blocks are dealt band by band: in every CTA's list, the band index never decreases
    (the CTAs running together read one band's K / V)."""
    n_m, n_bh, band = 16, 10, 3
    lists = schedule.lpt_deal([m + 1.0 for m in range(n_m)], n_bh, 7, band)
    for lst in lists:
        bands = [(b // n_m) // band for b in lst]
        assert bands == sorted(bands)


def test_schedule_cached():
    a = schedule.causal_schedule("cpu", 1024, 1024, 8, 5, 2, 128, 128)
    b = schedule.causal_schedule("cpu", 1024, 1024, 8, 5, 2, 128, 128)
    assert a is b and a.dtype.is_floating_point is False and a.numel() == 5 + 1 + 8 * 8
