"""kernels/fwd_gluon.py EARLY_Q (a session-29 helper; level alone in session 30, routed with LEAN_MASK in session 31): the
PERSISTENT 2-consumer forward (the WINDOW variant is the target, issue 3) in which each consumer
arrives on q_free as soon as the S wgmma of the block's last ring tile completed and O leaves by
global stores from registers, so that the next block's Q loads under this block's last tile.
Host side launchers/forward_gluon.py (early_q=True, persistent=True), switch launchers.policy.
GLUON_FWD_WINDOW_EARLY_Q ({128: 4096}), A/B bench/gpu/s30_gluon_window_ab.py.

CPU: the early arrival, from the kernel's own lines (the peel's predicate, the loops' bounds and
q_last), fires exactly once a block and on the block's last ring tile, for every window block
whose tile range (also the kernel's lines) is checked against a brute-force visibility model;
the loader's prefetch count; validation; launch arguments; fwd_into's guard; the policy switch
and the route. GPU (Hopper): against float64 with the repo criterion (tests/helpers.py) for
windows (1024, 0), (256, 256), (100, 37), Nq != Nk both ways (rows that see no key: O = 0, lse =
+inf), GQA, few CTAs (every CTA loops over many blocks); bitwise equal to the one-block WINDOW
kernel and the PERSISTENT one without EARLY_Q (the per-row arithmetic is unchanged).
"""
import contextlib
import re

import pytest
import torch

from flashtriton.kernels import fwd_gluon
from flashtriton.launchers import forward_gluon, plans, policy
from flashtriton.launchers.forward_gluon import attention_fwd_gluon

from conftest import DEVICE
from helpers import rand_qkv
from test_fwd_gluon import check, hopper

BM, BN, _ = fwd_gluon.DEFAULT_CONFIG[128]        # (128, 128, 3)
HALF = BM // 2


# ---------------------------------------------------------------------------------------
# CPU: the kernel's own lines
# ---------------------------------------------------------------------------------------
def _code(fn) -> str:
    src = fn.src
    return src[src.index('"""', src.index('"""') + 3) + 3:]      # after the docstring


def _window_line(name: str) -> str:
    src = _code(fwd_gluon._tile_coords)
    src = src[src.index("    elif WINDOW:"):src.index("    else:\n        n_load = n_tiles")]
    hits = re.findall(rf"^\s*{name} = ([^#\n]+)", src, flags=re.M)
    assert len(hits) == 1, name
    return hits[0].strip()


_NS = dict(gl=type("gl", (), dict(minimum=staticmethod(min), maximum=staticmethod(max),
                                  cdiv=staticmethod(lambda a, b: -(-a // b)))))


def _ev(expr, **env):
    return eval(expr, dict(_NS), env)  # noqa: S307  (the kernel's own integer arithmetic)


def window_block(nq, nk, left, right, pid_m):
    """(t_lo, n_load, n_left0, n_left1, n_full0, n_full1) of block pid_m by _tile_coords' WINDOW lines
    (every // there has a non-negative left operand: Python's floor is the GPU's truncation)."""
    diag = pid_m * BM + nk - nq
    env = dict(diag=diag, win_left=left, win_right=right, BLOCK_N=BN, BLOCK_M=BM, HALF_M=HALF, n_tiles=nk // BN)
    for name in ("lo", "hi", "t_lo", "t_hi", "n_load", "n_left0", "n_left1", "n_full0", "n_full1"):
        env[name] = _ev(_window_line(name), **env)
    return env["t_lo"], env["n_load"], env["n_left0"], env["n_left1"], env["n_full0"], env["n_full1"]


def consumer_tiles(t0, n_tiles, n_left, n_full):
    """The ring tiles of one consumer in the order _fwd_consume's peel and three WINDOW loops visit
    them (bounds read from its source) and, per tile, whether EARLY_Q's q_free predicate fires."""
    code = _code(fwd_gluon._fwd_consume)
    peel_pred = re.search(r"mbarrier\.arrive\(q_free, pred=([^)]+)\)", code).group(1)
    q_last = re.search(r"^\s*q_last = ([^#\n]+)", code, flags=re.M).group(1).strip()
    ranges = re.findall(r"for j in range\(([^,]+), ([^)]+)\):", code[code.index("    if WINDOW:"):])
    assert len(ranges) == 4        # WINDOW's two, the plain branch's (not WINDOW's), the masked one
    ranges = [ranges[0], ranges[1], ranges[3]]
    tile_pred = re.search(r"mbarrier\.arrive\(q_free, pred=([^)]+)\)", _code(fwd_gluon._consume_tile)).group(1)
    # the masked loop ends at n_main: n_tiles, unless KEY_HALF (session 51: plain VARLEN only, never with WINDOW)
    assert re.search(r"else:\n\s+n_main = n_tiles\n", code), "n_main's default changed"
    env = dict(t0=t0, n_tiles=n_tiles, n_left=n_left, n_full=n_full, n_main=n_tiles)
    ql = _ev(q_last, **env)
    out = [(t0, bool(_ev(peel_pred, **env)))]
    for lo, hi in ranges:
        for j in range(_ev(lo, **env), _ev(hi, **env)):
            out.append((j, bool(_ev(tile_pred, j=j, q_last=ql))))
    return out


_WINDOWS = [(1024, 0), (256, 256), (100, 37), (0, 0), (127, 0), (128, 0), (0, 300), (5000, 1), (64, 64)]
_SHAPES = [(128, 128), (256, 1024), (1024, 256), (1024, 1024), (2048, 2048), (640, 384)]


@pytest.mark.parametrize("left, right", _WINDOWS)
@pytest.mark.parametrize("nq, nk", _SHAPES)
def test_tile_range_matches_visibility(nq, nk, left, right):
    """Each block loads exactly the key tiles some of its rows see (a block no row of which sees a
    key loads tile 0 alone), and per half [n_left, n_full) is fully visible to all its rows, the
    peel and the rest are masked; 1 <= n_left <= n_full <= n_load (the EARLY_Q test's premise)."""
    key = torch.arange(nk)
    for pid_m in range(nq // BM):
        t_lo, n_load, *split = window_block(nq, nk, left, right, pid_m)
        rows = pid_m * BM + torch.arange(BM)
        d = rows + nk - nq
        vis = (key[None, :] >= (d - left)[:, None]) & (key[None, :] <= (d + right)[:, None])    # (BM, nk)
        tiles = vis.view(BM, nk // BN, BN).any(2)                                               # (BM, tiles)
        seen = tiles.any(0).nonzero().flatten().tolist()
        if seen:
            assert seen == list(range(t_lo, t_lo + n_load)), (pid_m, seen, t_lo, n_load)
        else:
            assert (t_lo, n_load) == (0, 1)
        for h in range(2):
            n_left, n_full = split[h], split[2 + h]
            assert 1 <= n_left <= n_full <= n_load
            full = vis[h * HALF:(h + 1) * HALF].view(HALF, nk // BN, BN).all(2).all(0)          # (tiles,)
            for j in range(n_left, n_full):
                assert full[t_lo + j], (pid_m, h, j)


@pytest.mark.parametrize("left, right", _WINDOWS)
@pytest.mark.parametrize("nq, nk", _SHAPES)
@pytest.mark.parametrize("t0", [0, 7, 12])
def test_early_q_arrives_once_on_the_last_tile(nq, nk, left, right, t0):
    """For every block and half (any ring offset t0): the peel and loops visit t0 .. t0 + n_load - 1
    once each in order, and q_free's predicate fires exactly once, on the last of them (after
    which the consumer reads Q no more, so the next block's Q may land)."""
    for pid_m in range(nq // BM):
        _, n_load, nl0, nl1, nf0, nf1 = window_block(nq, nk, left, right, pid_m)
        for n_left, n_full in ((nl0, nf0), (nl1, nf1)):
            got = consumer_tiles(t0, n_load, n_left, n_full)
            assert [j for j, _ in got] == list(range(t0, t0 + n_load))
            assert [j for j, fire in got if fire] == [t0 + n_load - 1]


def test_loader_prefetches_one_tile_before_q_with_early_q():
    """EARLY_Q's loader issues only the first K / V tile before waiting q_free (the later ones
    wait for the previous block's last stages, released after q_free completes)."""
    code = _code(fwd_gluon._fwd_load_persistent)
    branch = code[code.index("        if EARLY_Q:"):code.index("        else:\n            n_pre")]
    assert re.search(r"n_pre = gl\.minimum\(n_load, 1\)", branch)
    assert code.index("n_pre = gl.minimum(n_load, NUM_STAGES)") > code.index("if EARLY_Q:")


def qkv(b=1, nq=512, nk=512, h=4, hk=2, d=128, dtype=torch.bfloat16):
    return (torch.empty(b, nq, h, d, dtype=dtype), torch.empty(b, nk, hk, d, dtype=dtype),
            torch.empty(b, nk, hk, d, dtype=dtype))


@pytest.mark.parametrize("kw", [
    dict(early_q=True),                                              # not persistent
    dict(early_q=True, persistent=True, dropout_p=0.1, rng=torch.zeros(2, dtype=torch.int64)),
    dict(early_q=True, persistent=True, pingpong=True),
    dict(early_q=1, persistent=True),                                # not a bool
])
def test_rejects_early_q_outside_its_variant(kw):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="early_q"):
        forward_gluon.prepare(q, k, v, 0.125, window=(256, 0), **kw)


def test_rejects_early_q_with_three_consumers():
    q, k, v = qkv(d=64, nq=384, nk=384)
    with pytest.raises(ValueError, match="early_q"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, num_consumers=3, early_q=True)


def test_valid_early_q_call_reaches_the_device_check():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="CUDA"):
        forward_gluon.prepare(q, k, v, 0.125, persistent=True, window=(256, 0), early_q=True)


def _recorded_launch(monkeypatch, early_q, o=None):
    got = []
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(plans, "launch", lambda kernel, grid, *a, **kw: got.append((grid, a, kw)))
    q, k, v = qkv()
    o = torch.empty_like(q) if o is None else o
    lse = torch.empty(1, 4, 512, dtype=torch.float32)
    forward_gluon._launch_into(q, k, v, o, lse, 0.125, BM, BN, 3, False, persistent=True, num_programs=3,
                               window=(256, 0), early_q=early_q)()
    assert len(got) == 1
    return got[0], o


def test_launch_arguments_early_q(monkeypatch):
    """EARLY_Q=True with PERSISTENT and WINDOW; o itself is the argument after rng_stride (the
    kernel's O); the window sides as window_args gives them."""
    (grid, args, kw), o = _recorded_launch(monkeypatch, True)
    assert grid == (3,)
    assert kw["EARLY_Q"] is True and kw["PERSISTENT"] and kw["WINDOW"] and not (kw["DROPOUT"] or kw["CAUSAL"])
    names = [n for n in fwd_gluon.attn_fwd_gluon_kernel.arg_names if n.upper() != n or n in ("LSE", "SCHED", "RNG", "O")]
    assert args[names.index("O")] is o
    assert (args[names.index("win_left")], args[names.index("win_right")]) == (256, 0)


def test_launch_arguments_without_early_q_unchanged(monkeypatch):
    (grid, args, kw), _ = _recorded_launch(monkeypatch, False)
    assert "EARLY_Q" not in kw and kw["PERSISTENT"] and kw["WINDOW"]


def test_launch_refuses_early_q_with_padded_output_rows(monkeypatch):
    """The kernel stores O at row stride H * D: a padded o must not reach it."""
    q, _, _ = qkv()
    padded = torch.empty(1, 512, 5, 128, dtype=q.dtype)[:, :, :4]
    with pytest.raises(AssertionError, match="packed"):
        _recorded_launch(monkeypatch, True, o=padded)


@pytest.mark.parametrize("kw, expect", [
    (dict(persistent=True, window=(256, 0), early_q=True), (True, True)),
    (dict(persistent=True, window=(256, 0)), (True, False)),
    (dict(persistent=False, window=(256, 0), early_q=True), (False, False)),     # EARLY_Q is persistent only
    (dict(persistent=True, window=(256, 0), early_q=True, dropout_p=0.1,
          rng=torch.zeros(2, dtype=torch.int64)), (True, False)),
])
def test_fwd_into_early_q_guard(monkeypatch, kw, expect):
    got = []

    def fake(q, k, v, o, lse, scale, block_m, block_n, stages, pingpong, causal=False, persistent=False,
             num_programs=None, band=None, scheduled=False, window=None, dropout_p=0.0, rng=None, num_consumers=2,
             early_q=False):
        got.append((persistent, early_q))
        return lambda: None
    monkeypatch.setattr(forward_gluon, "_launch_into", fake)
    q, k, v = qkv()
    forward_gluon.fwd_into(q, k, v, torch.empty_like(q), None, 0.125, **kw)
    got_padded = []
    if expect[1]:
        monkeypatch.setattr(forward_gluon, "_launch_into", lambda *a, **k2: got_padded.append(k2) or (lambda: None))
        out = torch.empty(1, 512, 5, 128, dtype=q.dtype)[:, :, :4]
        forward_gluon.fwd_into(q, k, v, out, None, 0.125, **kw)
        assert "early_q" not in got_padded[0]                      # padded rows: the TMA store path
    assert got == [expect]


def test_window_early_q_switch(monkeypatch):
    """Routed in session 31 (bench/gpu/s31_window_lean_mask_ab.py, EARLY_Q with LEAN_MASK +5.4%
    at 16k): D = 128 from min(Nq, Nk) = 4096; the table's min(Nq, Nk) and head dims only."""
    assert policy.GLUON_FWD_WINDOW_EARLY_Q == {128: 4096}
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_EARLY_Q, 128, 8192)
    assert not policy.gluon_fwd_window_early_q(128, 4096, 8192)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_EARLY_Q, 128, 4096)
    assert policy.gluon_fwd_window_early_q(128, 4096, 8192)
    assert not policy.gluon_fwd_window_early_q(128, 2048, 8192)
    assert not policy.gluon_fwd_window_early_q(64, 16384, 16384)


@pytest.mark.parametrize("table, expect", [({}, (False, False)), ({128: 256}, (True, True))])
def test_route_passes_early_q(monkeypatch, table, expect):
    """launchers.forward's window route hands the switch to fwd_into as persistent + early_q (CPU:
    the route forced, fwd_into replaced by a recorder)."""
    from flashtriton import flash_attn_func
    import flashtriton
    from flashtriton.launchers import forward

    monkeypatch.setattr(forward, "gluon_fwd", lambda *a: False)
    monkeypatch.setattr(forward, "gluon_fwd_window", lambda *a: True)
    monkeypatch.setattr(policy, "GLUON_FWD_WINDOW_EARLY_Q", dict(table))
    plans.clear()
    got = []

    def fake_fwd_into(q, k, v, out, lse, scale, causal=False, persistent=False, window=None, early_q=False, **kw):
        got.append((persistent, early_q, window))
        out.zero_()
        lse.zero_()
    monkeypatch.setattr(forward_gluon, "fwd_into", fake_fwd_into)
    q, k, v = rand_qkv(1, 512, 512, 2, 1, 128, torch.bfloat16, DEVICE)
    with flashtriton.use_backend("triton"):
        flash_attn_func(q, k, v, window_size=(256, 0))
    plans.clear()
    assert got == [expect + ((256, 0),)], got


# ---------------------------------------------------------------------------------------
# GPU (Hopper)
# ---------------------------------------------------------------------------------------
@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("window", [(1024, 0), (256, 256), (100, 37)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [
    (1, 2048, 2048, 4, 4),
    (2, 1024, 1536, 4, 2),      # Nq < Nk, GQA
    (1, 1536, 1024, 2, 1),      # Nq > Nk: with (100, 37) rows that see no key (O = 0, lse = +inf)
])
@pytest.mark.parametrize("num_programs", [None, 3])
def test_early_q_matches_reference_gpu(dtype, window, b, nq, nk, h, hk, num_programs):
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, dtype, DEVICE)
    check(q, k, v, window=window, persistent=True, num_programs=num_programs, early_q=True)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("d", [128, 64])
def test_early_q_rows_without_keys_gpu(d):
    """Nq - Nk = 1024 > right: the first 1024 - 37 rows see no key (whole blocks of them)."""
    q, k, v = rand_qkv(1, 2048, 1024, 2, 2, d, torch.bfloat16, DEVICE)
    o, lse = check(q, k, v, window=(100, 37), persistent=True, num_programs=5, early_q=True)
    assert (o[:, :1024 - 37] == 0).all() and torch.isposinf(lse[:, :, :1024 - 37]).all()


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("window", [(1024, 0), (256, 256), (100, 37), (-1, -1), (-1, 0)])
@pytest.mark.parametrize("b, nq, nk, h, hk", [(1, 4096, 4096, 4, 2), (2, 1024, 1536, 2, 2), (1, 1536, 1024, 2, 1)])
def test_early_q_bitwise_current_kernels_gpu(window, b, nq, nk, h, hk):
    """The per-row arithmetic is unchanged: bitwise the one-block kernel's and the PERSISTENT one's
    without EARLY_Q (window (-1, -1): the plain kernel, (-1, 0): CAUSAL)."""
    q, k, v = rand_qkv(b, nq, nk, h, hk, 128, torch.bfloat16, DEVICE)
    scale = 128 ** -0.5
    ref_o, ref_lse = attention_fwd_gluon(q, k, v, scale, window=window)
    per_o, per_lse = attention_fwd_gluon(q, k, v, scale, window=window, persistent=True, num_programs=7)
    o, lse = attention_fwd_gluon(q, k, v, scale, window=window, persistent=True, num_programs=7, early_q=True)
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_lse)
    assert torch.equal(o, per_o) and torch.equal(lse, per_lse)


@pytest.mark.gpu
@hopper
def test_flash_attn_func_takes_early_q_gpu(monkeypatch):
    """The route with the switch on: the EARLY_Q launch, right against float64 (check's criterion
    through the library's own entry point: the same result as attention_fwd_gluon)."""
    from flashtriton import flash_attn_func

    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_EARLY_Q, 128, 1024)
    monkeypatch.setitem(policy.GLUON_FWD_WINDOW_MIN_N, 128, 1024)
    plans.clear()
    seen = []
    real = forward_gluon._launch_into
    monkeypatch.setattr(forward_gluon, "_launch_into", lambda *a, **kw: seen.append(kw.get("early_q")) or real(*a, **kw))
    q, k, v = rand_qkv(1, 2048, 2048, 4, 4, 128, torch.bfloat16, DEVICE)
    out = flash_attn_func(q, k, v, window_size=(256, 0))
    # (before the reference, whose own launch goes through the same spy: session 30's first
    # GPU run failed here on [True, None])
    assert seen == [True]
    plans.clear()
    ref, _ = attention_fwd_gluon(q, k, v, 128 ** -0.5, window=(256, 0))
    assert torch.equal(out, ref)
