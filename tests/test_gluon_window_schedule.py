"""launchers/schedule.py window_schedule (written offline in session 42, routed with O_STAGE in session 43): the
host's longest-first deal of sliding-window blocks for the PERSISTENT Gluon forward (SCHEDULED with WINDOW).

CPU: window_tiles is the kernel's _tile_coords WINDOW n_load (read from its source by
test_fwd_gluon_window_early_q.window_block); the deal lists every block once in the kernel's layout; its makespan in
key tiles is at most the round robin's; the launch passes SCHEDULED with WINDOW, and the kernel's round robin inside a
CUDA graph capture that meets a deal not yet cached. GPU: bitwise the one-block WINDOW kernel's outputs (few CTAs and
the SM count, Nq != Nk, GQA, O_STAGE and EARLY_Q); flash_attn_func's window route, eager and captured.
"""
import contextlib

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import forward_gluon, plans, schedule
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import graph_replay, rand_qkv, spy
from test_fwd_gluon import hopper
from test_fwd_gluon_window_early_q import window_block

BM, BN, _ = fwd_gluon.DEFAULT_CONFIG[128]


@pytest.mark.parametrize("nq, nk, left, right", [(2048, 2048, 1024, 0), (1024, 1536, 100, 37), (1536, 1024, 100, 37),
                                                 (4096, 4096, 256, 256), (2048, 2048, 0, 0), (1024, 1024, 4096, 5)])
def test_window_tiles_match_the_kernel(nq, nk, left, right):
    for m in range(nq // BM):
        assert schedule.window_tiles(m, nq, nk, left, right, BM, BN) == window_block(nq, nk, left, right, m)[1], m


def _unpack(sched, n_prog):
    s = sched.tolist()
    return [s[n_prog + 1 + s[p]:n_prog + 1 + s[p + 1]] for p in range(n_prog)]


@pytest.mark.parametrize("nq, nk, n_bh, n_prog", [(16384, 16384, 16, 132), (4096, 4096, 64, 132), (2048, 1024, 3, 7)])
def test_window_deal_covers_every_block_once_and_beats_round_robin(nq, nk, n_bh, n_prog):
    schedule._CACHE.clear()
    left, right = 1024, 0
    lists = _unpack(schedule.window_schedule("cpu", nq, nk, n_bh, n_prog, left, right, BM, BN), n_prog)
    n_m = nq // BM
    assert sorted(b for lst in lists for b in lst) == list(range(n_m * n_bh))
    cost = [schedule.window_tiles(m, nq, nk, left, right, BM, BN) + schedule.BLOCK_OVERHEAD_TILES for m in range(n_m)]
    rr = [list(range(p, n_m * n_bh, n_prog)) for p in range(n_prog)]     # the kernel's round robin (query fastest)
    assert schedule.makespan(lists, cost, n_m) <= schedule.makespan(rr, cost, n_m)
    assert schedule.window_cached("cpu", nq, nk, n_bh, n_prog, left, right, BM, BN)
    schedule._CACHE.clear()


def test_launch_passes_scheduled_window(monkeypatch):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw: got.append((a, kw)))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)     # (CPU-only torch: no CUDA)
    schedule._CACHE.clear()
    q, k, v = (torch.empty(1, 1024, 2, 128, dtype=torch.bfloat16) for _ in range(3))
    lse = torch.empty(1, 2, 1024, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, torch.empty_like(q), lse, 0.1, BM, BN, 3, False, persistent=True,
                               num_programs=3, scheduled=True, window=(256, 0), o_stage=True)()
    (args, kw), = got
    assert kw["SCHEDULED"] is True and kw["WINDOW"] and kw["O_STAGE"]
    names = [n for n in fwd_gluon.attn_fwd_gluon_kernel.arg_names
             if n.upper() != n or n in ("LSE", "SCHED", "RNG", "O")]
    assert args[names.index("SCHED")] is schedule._CACHE[next(iter(schedule._CACHE))]
    schedule._CACHE.clear()


def test_scheduled_window_under_graph_capture(monkeypatch):
    """A window call routed SCHEDULED whose deal is not on the device yet, met inside a CUDA graph capture, runs the
    kernel's round robin (SCHEDULED=False: the same outputs bitwise; copying the deal would break the capture)."""
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw: got.append(kw))
    schedule._CACHE.clear()
    q, k, v = (torch.empty(1, 1024, 2, 128, dtype=torch.bfloat16) for _ in range(3))
    lse = torch.empty(1, 2, 1024, dtype=torch.float32)

    def launch(capturing):
        monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing)
        forward_gluon._launch_into(q, k, v, torch.empty_like(q), lse, 0.1, BM, BN, 3, False, persistent=True,
                                   num_programs=3, scheduled=True, window=(256, 0), o_stage=True)()
        return got.pop()["SCHEDULED"]

    assert launch(True) is False and not schedule._CACHE
    assert launch(False) is True and len(schedule._CACHE) == 1
    assert launch(True) is True                      # cached now: the capture takes the deal
    schedule._CACHE.clear()


@pytest.mark.gpu
@hopper
def test_flash_attn_func_window_takes_the_deal_gpu(monkeypatch):
    """The routed window forward (D = 128, (1024, 0), 4k: policy.GLUON_FWD_O_STAGE's "window" range): O_STAGE with
    the host's deal, bitwise the one-block WINDOW kernel; then captured in a CUDA graph with the deal not cached yet
    (the kernel's round robin inside the capture), replayed on new inputs, bitwise again."""
    from flashtriton import flash_attn_func

    plans.clear()
    schedule._CACHE.clear()
    seen = spy(monkeypatch, forward_gluon, "_launch_into", lambda *a, **kw: (kw.get("o_stage"), kw.get("scheduled")))
    q, k, v = rand_qkv(1, 4096, 4096, 4, 2, 128, torch.bfloat16, DEVICE)
    out = flash_attn_func(q, k, v, window_size=(1024, 0))
    assert seen == [(True, True)]
    ref, _ = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=(1024, 0))
    assert torch.equal(out, ref)
    plans.clear()
    schedule._CACHE.clear()
    q3, k3, v3 = rand_qkv(1, 4096, 4096, 4, 2, 128, torch.bfloat16, DEVICE)
    gout = graph_replay(lambda q2, k2, v2: flash_attn_func(q2, k2, v2, window_size=(1024, 0)),
                        [x.clone() for x in (q, k, v)], (q3, k3, v3))
    plans.clear()
    ref3, _ = attention_fwd_gluon(q3, k3, v3, 128 ** -0.5, window=(1024, 0))
    assert torch.equal(gout, ref3)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("kw", [dict(o_stage=True), dict(early_q=True), dict()])
@pytest.mark.parametrize("window", [(1024, 0), (100, 37), (256, 256)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2), (2, 1024, 1536, 2, 2), (1, 1536, 1024, 2, 1)])
@pytest.mark.parametrize("num_programs", [None, 5])
def test_scheduled_window_bitwise_one_block_gpu(kw, window, b, nq, nk, h, hk, num_programs):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=window)
    o, lse = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=window, persistent=True, num_programs=num_programs,
                                 scheduled=True, **kw)
    assert torch.isfinite(o).all() and not torch.isnan(lse).any(), "unwritten (NaN-poisoned) output"
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)
