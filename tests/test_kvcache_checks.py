"""The value checks' kernel (kernels/kvcache_checks.py, launchers/kvcache_checks.py)
against their torch version (kvcache._value_rows_torch), element for element, and the
API's error messages through the kernel's path.

On the GPU the API gathers the checked values with the kernel; on CPU tensors (this
machine: the interpreter) with torch ops. These tests call the kernel directly, so it
is held to the torch version under the interpreter too."""
import pytest
import torch

import flashtriton
from flashtriton import flash_attn_with_kvcache, kvcache
from flashtriton.launchers import kvcache_checks

from conftest import DEVICE

import test_kvcache


def _random_case(gen, batch, max_blocks, page_size, num_blocks, snew, leftpad, batch_idx, strided):
    """Index tensors with some entries out of range (negative, >= num_blocks, lengths past
    the capacity, leftpad past the length): what the checks must report as the torch
    version does."""
    def ints(lo, hi, shape):
        return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(torch.int32)
    capacity = max_blocks * page_size
    seqlens = ints(0, capacity - snew + 1, (batch,))
    if batch > 1:
        seqlens[0] = capacity - snew                            # the full table
        seqlens[-1] = ints(-3, capacity + 5, (1,))[0]           # maybe out of range
    lp = None
    if leftpad:
        lp = (seqlens.clamp_min(0).to(torch.float64) * torch.rand(batch, generator=gen, dtype=torch.float64))
        lp = lp.to(torch.int32)
        if batch > 2:
            lp[1] = ints(-2, capacity + 2, (1,))[0]
    idx = ints(-1, num_blocks + 1, (batch,)) if batch_idx else None
    table = ints(0, num_blocks, (batch, max_blocks))
    n_bad = int(ints(0, 4, (1,))[0])
    for _ in range(n_bad):
        b = int(ints(0, batch, (1,))[0])
        c = int(ints(0, max_blocks, (1,))[0])
        table[b, c] = int(ints(-5, 0, (1,))[0]) if c % 2 else num_blocks + int(ints(0, 3, (1,))[0])
    if strided:     # non-unit strides everywhere (views into larger tensors)
        seqlens = torch.stack([seqlens, seqlens], 1)[:, 0]
        lp = torch.stack([lp, lp], 1)[:, 1] if lp is not None else None
        idx = torch.stack([idx, idx], 1)[:, 0] if idx is not None else None
        table = table.t().contiguous().t()
    dev = DEVICE
    mv = (lambda t: t.to(dev) if t is not None else None)
    return mv(seqlens), mv(lp), mv(idx), mv(table)


def _both(seqlens, lp, idx, table, num_blocks, page_size, snew, block_c=0):
    got = kvcache_checks.value_rows(seqlens, lp, idx, table, num_blocks, page_size, snew, block_c=block_c)
    want = kvcache._value_rows_torch(seqlens, idx, lp, table, num_blocks, page_size, snew)
    return got, want


@pytest.mark.parametrize("paged", [True, False])
def test_kernel_matches_torch_random(paged):
    gen = torch.Generator().manual_seed(1234)
    for trial in range(24):
        batch = [1, 2, 3, 5, 8][trial % 5]
        page_size = [1, 2, 16, 64, 256][trial % 5] if paged else 1
        max_blocks = [1, 3, 17, 40, 64][(trial // 5) % 5]
        num_blocks = max(1, batch * max_blocks // 2 + trial)
        snew = [0, 1, 3][trial % 3]
        snew = min(snew, max_blocks * page_size)
        leftpad, batch_idx, strided = trial % 2 == 0, trial % 3 == 0 and not paged, trial % 4 == 1
        seqlens, lp, idx, table = _random_case(gen, batch, max_blocks, page_size, num_blocks, snew, leftpad,
                                               batch_idx, strided)
        if not paged:
            table = None
        for block_c in (16, 0):      # 16: many loop steps over the table; 0: the default
            got, want = _both(seqlens, lp, idx, table, num_blocks, page_size if paged else 0, snew, block_c)
            assert got.dtype == torch.int64 and got.shape == (5, batch)
            assert torch.equal(got.cpu(), want.cpu()), (trial, block_c, got, want)


def test_kernel_first_bad_column_and_range():
    """The first bad USED column wins; bad entries outside [leftpad // page, ceil((end +
    snew) / page)) are ignored; none: -1 and the entry of column 0."""
    table = torch.tensor([[7, -1, 99, 3, -4, 5],
                          [-2, 1, 2, 3, 4, 50],
                          [1, 2, 3, 4, 5, 6]], dtype=torch.int32, device=DEVICE)
    page = 4
    seqlens = torch.tensor([11, 13, 24], dtype=torch.int32, device=DEVICE)
    leftpad = torch.tensor([8, 4, 0], dtype=torch.int32, device=DEVICE)
    got, want = _both(seqlens, leftpad, None, table, 10, page, 0)
    assert torch.equal(got.cpu(), want.cpu())
    # seq 0: used columns 2..2 -> col 2 (99); seq 1: cols 1..3 -> none; seq 2: none
    assert got[3].tolist() == [2, -1, -1] and got[4].tolist() == [99, -2, 1]
    got, want = _both(seqlens, leftpad, None, table, 10, page, 8)     # snew = 8: two more pages each
    assert torch.equal(got.cpu(), want.cpu())
    assert got[3].tolist() == [2, 5, -1]


def test_kernel_huge_table():
    """128 x 8192 block table, every column used (a long context of small pages), the
    bad entries far into the rows: the loop over column blocks must reach them."""
    batch, max_blocks, page, num_blocks = 128, 8192, 1, 1 << 20
    gen = torch.Generator().manual_seed(7)
    table = torch.randint(0, num_blocks, (batch, max_blocks), generator=gen, dtype=torch.int64).to(torch.int32)
    table[5, 8191] = num_blocks
    table[77, 4100] = -1
    table[77, 6000] = -3
    table[127, 1023] = num_blocks + 4
    seqlens = torch.full((batch,), max_blocks * page, dtype=torch.int32)
    seqlens[6] = 8191 * page                                          # the bad column of row 5 ... row 6 fine
    table[6, 8191] = -9                                               # unused: ignored
    table, seqlens = table.to(DEVICE), seqlens.to(DEVICE)
    got, want = _both(seqlens, None, None, table, num_blocks, page, 0)
    assert torch.equal(got.cpu(), want.cpu())
    bad = {b: (c, v) for b, (c, v) in enumerate(zip(got[3].tolist(), got[4].tolist())) if c >= 0}
    assert bad == {5: (8191, num_blocks), 77: (4100, -1), 127: (1023, num_blocks + 4)}


def test_kernel_no_table_rows():
    seqlens = torch.tensor([3, -1, 40], dtype=torch.int32, device=DEVICE)
    idx = torch.tensor([2, 0, 9], dtype=torch.int32, device=DEVICE)
    got, want = _both(seqlens, None, idx, None, 3, 0, 1)
    assert torch.equal(got.cpu(), want.cpu())
    assert got.cpu().tolist() == [[3, -1, 40], [0, 0, 0], [2, 0, 9], [-1, -1, -1], [0, 0, 0]]


VALUE_CASES = [b for b in test_kvcache.BAD if b[0] in (
    "cache_seqlens negative", "append overflows", "seqlens past capacity", "block_table out of range",
    "block_table negative", "batch idx out of range", "batch idx repeated", "leftpad past seqlens",
    "rotary too short")]


@pytest.mark.parametrize("name,make,exc,msg", VALUE_CASES, ids=[b[0] for b in VALUE_CASES])
def test_api_messages_through_kernel(monkeypatch, name, make, exc, msg):
    """The value errors of test_kvcache.test_bad_input, with the values gathered by the
    kernel (the GPU's path) instead of the torch ops."""
    assert len(VALUE_CASES) == 9
    monkeypatch.setattr(kvcache, "_KERNEL_VALUE_ROWS", True)
    calls = []
    real = kvcache_checks.value_rows
    monkeypatch.setattr(kvcache_checks, "value_rows", lambda *a, **k: calls.append(1) or real(*a, **k))
    test_kvcache.test_bad_input(name, make, exc, msg)
    assert calls == [1]


@pytest.mark.parametrize("paged", [False, True])
def test_api_good_call_through_kernel(monkeypatch, paged):
    """A valid call passes the kernel's checks (leftpad, append) and attends as before."""
    inp = test_kvcache.make_inputs(2, 1, 4, 2, 32, torch.float16, 32, [10, 20], snew=1,
                                   page_size=8 if paged else 0)
    inp = {k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}
    inp["cache_leftpad"] = torch.tensor([3, 9], dtype=torch.int32, device=DEVICE)
    q = inp.pop("q")
    kw = {k: v for k, v in inp.items() if k in ("k_cache", "v_cache", "k", "v", "cache_seqlens", "block_table",
                                                "cache_leftpad", "cache_batch_idx", "rotary_cos", "rotary_sin")}
    with flashtriton.use_backend("triton"):
        kc, vc = kw["k_cache"].clone(), kw["v_cache"].clone()
        want = flash_attn_with_kvcache(q, **{**kw, "k_cache": kc, "v_cache": vc}, causal=True)
        monkeypatch.setattr(kvcache, "_KERNEL_VALUE_ROWS", True)
        got = flash_attn_with_kvcache(q, **kw, causal=True)
    assert torch.equal(got, want)


def test_kernel_through_launch_plan(monkeypatch):
    """With launch plans on (the GPU's default), the second call of a signature replays the
    recorded launch: with new tensors and values it must still match the torch version."""
    from flashtriton.launchers import plans
    monkeypatch.setenv("FLASHTRITON_PLANS", "1")
    gen = torch.Generator().manual_seed(99)
    before = dict(plans.stats)
    for trial in range(3):
        seqlens, lp, _, table = _random_case(gen, 4, 9, 16, 20, 1, True, False, False)
        table[trial % 4, trial] = 20 + trial                  # one bad entry (used when in range)
        got, want = _both(seqlens, lp, None, table, 20, 16, 1)
        assert torch.equal(got.cpu(), want.cpu()), (trial, got, want)
    assert plans.stats["recorded"] - before["recorded"] == 1
    assert plans.stats["replayed"] - before["replayed"] == 2
