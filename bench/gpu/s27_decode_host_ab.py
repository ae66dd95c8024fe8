"""Session 27: why a replayed paged-256 decode step looked slower on the host than page 16
and the contiguous cache (issue 5; s26 call 4, checks off: host 65 / 45-68 / 71-85 us,
do_bench 52-54 / 27-36 / 62-64 us for contiguous / page 16 / page 256).

What the CPU machine found (2026-12-01, a helper; tools: the kernel compiled for sm_90 under
a fake driver, and flash_attn_with_kvcache replayed through plans._DirectLaunch with a
stand-in C launcher, /tmp scripts summarised in bench/NOTES.md):
  - every layout's plan is ONE launch of decode_split_kernel, grid (8, 16, 1), fused combine
    (auto_combine: eager -> fused), 16 splits (page 16: gather_splits keeps 16 at 8k),
    BLOCK_N 64, ~71.7 KB shared memory each, no global / profile scratch, direct launch
    built for all three; one allocation a replay (out; lse is a workspace with
    return_softmax_lse=False); the TMA layouts (contiguous, page 256) have 2 descriptor
    slots whose CUtensorMaps are encoded once per base address (0 encodings per replay);
  - the Python host path of a replayed step (API + plan + direct fire, no C launch) costs
    14.2 / 14.5 / 15.0 us (contiguous / page 16 / page 256, CI CPU, median of 7 interleaved
    rounds of 3000 calls): the same within 1 us. So the 20-40 us spread of s26 is not in our
    Python: it is either in the C launcher + cuLaunchKernelEx (the TMA kernels pass two
    128-byte CUtensorMaps by value) or the host's drift: s26's probe ran the layouts one
    after another (contig, then 16, then 256) on a host whose speed moved 2-3x within the
    call (page 16's own "host" read 45.5 then 67.7; its "sync" 42.6 < its "host").

This run separates them, every case interleaved round by round (R rounds, the host's drift
spread over all cases alike), value checks off, Sq = 1, B = 1, L = 8k, Hq 32, Hk 8, D 128:
  cases : contig, paged16, paged256 (the defaults: TMA on contig / 256) and contig-ptr,
          paged256-ptr (FLASHTRITON_DECODE_KV_LOAD=pointer: the same layouts without TMA
          descriptors; every case runs under that variable, set to tma or pointer)
  api   : host us a call, flash_attn_with_kvcache, N calls without a sync
  replay: host us of the plan's replay alone (plans._Plan.replay)
  raw   : host us of the C launcher alone with the replay's argument list (cuLaunchKernelEx
          and its Python-to-C argument parsing)
  py    : api - raw (our Python)
  bench : triton.testing.do_bench (its L2 flush; us), once per case after the rounds
  graph : a CUDA graph of one step, replayed (us, do_bench)
Also the plan's structure per case (launches, direct, descriptors, allocations).

PREDICTION (us, H200 host; the CPU numbers above x ~2-3 on that host):
  - py equal across the five cases within ~3 us (contig / 16 / 256 / ptr variants);
  - raw within ~2 us between the TMA cases and their -ptr variants (a CUtensorMap by value is
    a 128-byte copy); if raw of contig / paged256 exceeds their -ptr cases by >= 5 us, the
    driver's launch of a kernel with tensor-map parameters is the cause (then: encode the
    maps into a device buffer once and pass pointers, or take kv_load="pointer" at B * Hk
    small eagerly);
  - api medians across contig / paged16 / paged256 within ~5 us of each other (s26's
    spread was the host's drift); bench likewise within ~5 us where host-bound;
  - graph 19-22 us each (s26: 19.1 / 21.4 / 19.5); the -ptr variants 1-4 us slower in graphs
    (TMA's gain on the GPU side).

Run on the H200 (from the repo root, ~60 s):
    PYTHONPATH=src python bench/gpu/s27_decode_host_ab.py [rounds=7] [calls=200]
"""
import contextlib
import os
import statistics
import sys
import time

import torch
import triton

from flashtriton import flash_attn_with_kvcache, kvcache
from flashtriton.launchers import plans

B, L, HQ, HK, D = 1, 8192, 32, 8, 128
DTYPE = torch.bfloat16
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 200


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


class Case:
    def __init__(self, name, layout, kv_load):
        self.name, self.kv_load = name, kv_load
        self.inp = make(layout)
        self.res = {"api": [], "replay": [], "raw": []}
        self.plan = self.inputs = None

    def call(self):
        with kvcache.value_checks(False):
            return flash_attn_with_kvcache(**self.inp)

    @contextlib.contextmanager
    def env(self):
        """kv_load through FLASHTRITON_DECODE_KV_LOAD (read every call by every case alike;
        an options() block would add its own host time to the -ptr cases only)."""
        os.environ["FLASHTRITON_DECODE_KV_LOAD"] = self.kv_load
        try:
            yield
        finally:
            del os.environ["FLASHTRITON_DECODE_KV_LOAD"]

    def setup(self):
        """Record the plan (first call), find it and the inputs its replay takes."""
        known = set(map(id, plans._PLANS.values()))
        seen = {}
        real_replay = plans._Plan.replay

        def spy(plan, inputs):
            seen["plan"], seen["inputs"] = plan, inputs
            return real_replay(plan, inputs)

        self.call()
        plans._Plan.replay = spy
        try:
            self.call()
        finally:
            plans._Plan.replay = real_replay
        self.plan, self.inputs = seen.get("plan"), seen.get("inputs")
        new = [p for p in plans._PLANS.values() if id(p) not in known]
        p = self.plan
        if p is None:
            print(f"{self.name:13s} NO REPLAY (plans {plans.stats})", flush=True)
            return
        desc = [(ln.kernel.fn.__name__, ln.grid, ln.direct is not None,
                 len(ln.direct.descs) if ln.direct else None) for ln in p.launches]
        print(f"{self.name:13s} plan: {len(p.launches)} launch(es) (kernel, grid, direct, descriptors) {desc}; "
              f"allocations a replay {len(p.allocs)}; new plans {len(new)}", flush=True)
        # the raw C launch: the argument list of one direct fire, replayed as is
        self.raws = []
        for ln in p.launches:
            d = ln.direct
            if d is None:
                continue
            real = d.raw
            got = {}

            def capture(*args, _real=real, _got=got):
                _got["args"] = args
                return _real(*args)

            d.raw = capture
            try:
                self.keep = self.call()     # (its output, whose address the raw launches write)
            finally:
                d.raw = real
            self.raws.append((real, got["args"]))

    def round(self):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            self.call()
        self.res["api"].append((time.perf_counter() - t0) / CALLS * 1e6)
        torch.cuda.synchronize()
        if self.plan is not None:
            p, inputs = self.plan, self.inputs
            t0 = time.perf_counter()
            for _ in range(CALLS):
                p.replay(inputs)
            self.res["replay"].append((time.perf_counter() - t0) / CALLS * 1e6)
            torch.cuda.synchronize()
        if getattr(self, "raws", None):
            t0 = time.perf_counter()
            for _ in range(CALLS):
                for raw, args in self.raws:
                    raw(*args)
            self.res["raw"].append((time.perf_counter() - t0) / CALLS * 1e6)
            torch.cuda.synchronize()


def med(v):
    return f"{statistics.median(v):6.1f} (min {min(v):5.1f})" if v else "   n/a"


def main():
    print(f"B={B} L={L} Hq={HQ} Hk={HK} D={D} {DTYPE} Sq=1, checks off, {torch.cuda.get_device_name()}, "
          f"{ROUNDS} rounds x {CALLS} calls", flush=True)
    cases = []
    for name, layout, kv_load in (("contig", 0, "tma"), ("paged16", 16, "tma"), ("paged256", 256, "tma"),
                                  ("contig-ptr", 0, "pointer"), ("paged256-ptr", 256, "pointer")):
        try:
            c = Case(name, layout, kv_load)
            with c.env():
                c.setup()
            cases.append(c)
        except Exception as e:  # noqa: BLE001
            print(f"{name}: ERROR {type(e).__name__}: {e}", flush=True)
    for r in range(ROUNDS):
        order = cases if r % 2 == 0 else cases[::-1]
        for c in order:
            try:
                with c.env():
                    c.round()
            except Exception as e:  # noqa: BLE001
                print(f"{c.name}: round {r} ERROR {type(e).__name__}: {e}", flush=True)
    print("host us a call, median (min) over rounds:", flush=True)
    for c in cases:
        py = [a - b for a, b in zip(c.res["api"], c.res["raw"])]
        print(f"{c.name:13s} api {med(c.res['api'])}  replay {med(c.res['replay'])}  raw {med(c.res['raw'])}  "
              f"py {med(py)}", flush=True)
    for c in cases:
        try:
            with c.env():
                bench = triton.testing.do_bench(c.call, warmup=25, rep=200) * 1e3
            with kvcache.value_checks(False), c.env():
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        flash_attn_with_kvcache(**c.inp)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    flash_attn_with_kvcache(**c.inp)
            graph = triton.testing.do_bench(g.replay, warmup=25, rep=200) * 1e3
            print(f"{c.name:13s} bench {bench:6.1f}  graph {graph:6.1f}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{c.name:13s} bench/graph ERROR {type(e).__name__}: {e}", flush=True)
    print(f"plans {plans.stats}", flush=True)


if __name__ == "__main__":
    main()
