"""Session 26: the eager decode step with value checks on, after moving the checks into one
Triton launch (issue 5; kernels/kvcache_checks.py, launchers/kvcache_checks.py).

Before (H200, 2026-12-01, B = 1, L = 8k, Hq = 32, Hk = 8, D = 128, bf16, Sq = 1, eager,
checks OFF, as the decode bench runs it (first read here as "checks on", wrongly)):
contiguous 24.3 us, paged page 16 59.8, page 256 90.1; CUDA-graph replays 19.1 /
21.4 / 19.5. The torch-op checks launched 2 tiny kernels a step on the contiguous cache
and 24 on a paged one (to(int64) x 2, arange, zeros_like, floor divisions, adds, six
comparisons, three logical ops, where, amin, any, bitwise_not, masked_fill_, clamp_min,
gather, stack), each ~1.5 us of host time, all before the one device-to-host copy; now:
one launch replayed through a launch plan, then the copy.

Per case (contiguous, paged 16, paged 256 over a shuffled block pool; checks "new" = the
default kernel path, "torch" = the old torch ops forced on CUDA (kvcache._KERNEL_VALUE_ROWS
= False, the before column in the same run: the old ops plus 1-2 fills of the fixed
(5, B) layout, zeros_like / full_like, so a little slower than the old code), "off" =
`with kvcache.value_checks(False):`):
  sync   : wall time of 200 calls, torch.cuda.synchronize() before and after, / 200
  bench  : triton.testing.do_bench(call) (its L2 flush before each call; us)
  host   : time to issue 200 calls without a sync, / 200 (checks on: each call syncs anyway)
  plans  : plans.stats deltas over the 200 'sync' calls (recorded / replayed / unreplayable)
First, a correctness pass: the kernel's value rows against the torch ops on random index
tensors with out-of-range entries, and one bad block table raising the expected error.

PREDICTION (us, this H200 host; made on the CPU machine, kernel only interpreter-tested):
  checks new : sync  contig 30-40, paged16 30-42, paged256 30-40 (paged within ~2 us of
               contig: one launch whatever the layout); bench contig 24-28, paged16 25-30,
               paged256 24-29 (paged within 10% of contig: the issue's target, eagerly);
  checks torch (before): sync contig 35-45, paged 70-110; bench ~ the numbers above (24 /
               60 / 90);
  checks off : sync and bench 20-28 each layout; host 15-25;
  the kernel path adds ~10-15 us of wall time over "off" (plan lookup, one torch.empty,
  one launch, the sync and the 40-byte copy); plans: 0 recorded, 400 replayed (checks new:
  the checks' plan and the decode plan each call) / 200 (torch, off), 0 unreplayable.

Run on the H200 (from the repo root, < 60 s):
    PYTHONPATH=src python bench/gpu/s26_decode_host_probe.py
"""
import time

import torch
import triton

from flashtriton import flash_attn_with_kvcache, kvcache
from flashtriton.launchers import kvcache_checks, plans

B, L, HQ, HK, D = 1, 8192, 32, 8, 128
DTYPE = torch.bfloat16
CALLS = 200


def make(layout: int):
    """layout 0: contiguous; > 0: paged with that page size, pages shuffled in a pool."""
    dev = "cuda"
    q = torch.randn(B, 1, HQ, D, dtype=DTYPE, device=dev)
    lens = torch.full((B,), L, dtype=torch.int32, device=dev)
    if layout == 0:
        kc = torch.randn(B, L, HK, D, dtype=DTYPE, device=dev)
        return dict(q=q, k_cache=kc, v_cache=torch.randn_like(kc), cache_seqlens=lens)
    per_seq = L // layout
    num_blocks = B * per_seq + 7
    table = torch.randperm(num_blocks, device=dev)[:B * per_seq].view(B, per_seq).to(torch.int32)
    kc = torch.randn(num_blocks, layout, HK, D, dtype=DTYPE, device=dev)
    return dict(q=q, k_cache=kc, v_cache=torch.randn_like(kc), cache_seqlens=lens, block_table=table)


def correctness():
    gen = torch.Generator().manual_seed(0)
    bad = 0
    for trial in range(40):
        b = 1 + trial % 7
        page = (1, 16, 64, 256)[trial % 4]
        mb = (1, 5, 64, 600)[(trial // 4) % 4]
        nb = b * mb + 3
        lens = torch.randint(-2, mb * page + 3, (b,), generator=gen).to(torch.int32)
        lp = (lens.clamp_min(0) // 3).to(torch.int32) if trial % 2 else None
        table = torch.randint(-2, nb + 2, (b, mb), generator=gen).to(torch.int32)
        args = [t.cuda() if t is not None else None for t in (lens, lp, table)]
        for paged in (True, False):
            tbl = args[2] if paged else None
            got = kvcache_checks.value_rows(args[0], args[1], None, tbl, nb, page if paged else 0, trial % 3)
            want = kvcache._value_rows_torch(args[0], None, args[1], tbl, nb, page if paged else 0, trial % 3)
            bad += not torch.equal(got, want)
    inp = make(16)
    inp["block_table"][0, 100] = 10 ** 6
    try:
        flash_attn_with_kvcache(**inp)
        err = "no error raised"
    except ValueError as e:
        err = str(e)
    ok = err.startswith("block_table: entry [0, 100] is 1000000")
    print(f"correctness: kernel vs torch value rows {80 - bad}/80 equal; bad table -> {err[:70]!r} "
          f"{'ok' if ok else 'WRONG'}", flush=True)


def measure(name, inp, mode):
    def call():
        return flash_attn_with_kvcache(**inp)

    def run():
        if mode == "off":
            with kvcache.value_checks(False):
                return call()
        return call()

    kvcache._KERNEL_VALUE_ROWS = False if mode == "torch" else None
    try:
        for _ in range(10):
            run()
        torch.cuda.synchronize()
        before = dict(plans.stats)
        t0 = time.perf_counter()
        for _ in range(CALLS):
            run()
        torch.cuda.synchronize()
        sync_us = (time.perf_counter() - t0) / CALLS * 1e6
        delta = {k: plans.stats[k] - before[k] for k in before}
        bench_us = triton.testing.do_bench(run, warmup=25, rep=200) * 1e3
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            run()
        host_us = (time.perf_counter() - t0) / CALLS * 1e6
        torch.cuda.synchronize()
        print(f"{name:9s} checks {mode:5s}  sync {sync_us:7.1f}  bench {bench_us:7.1f}  host {host_us:7.1f}  "
              f"plans rec/rep/unrep {delta['recorded']}/{delta['replayed']}/{delta['unreplayable']}", flush=True)
    finally:
        kvcache._KERNEL_VALUE_ROWS = None


def main():
    print(f"B={B} L={L} Hq={HQ} Hk={HK} D={D} {DTYPE} Sq=1, {torch.cuda.get_device_name()}", flush=True)
    try:
        correctness()
    except Exception as e:  # noqa: BLE001
        print(f"correctness: ERROR {type(e).__name__}: {e}", flush=True)
    for name, layout in (("contig", 0), ("paged16", 16), ("paged256", 256)):
        try:
            inp = make(layout)
        except Exception as e:  # noqa: BLE001
            print(f"{name}: ERROR making inputs {type(e).__name__}: {e}", flush=True)
            continue
        for rep in range(2):        # twice, alternating the order (the host's speed drifts)
            modes = ("new", "torch", "off") if rep == 0 else ("off", "torch", "new")
            for mode in modes:
                try:
                    measure(name, inp, mode)
                except Exception as e:  # noqa: BLE001
                    print(f"{name:9s} checks {mode:5s}  ERROR {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
