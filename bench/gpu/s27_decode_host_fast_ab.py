"""Session 27 (issue 5): the host path of a replayed flash_attn_with_kvcache step, before and
after the step memo (kvcache._Step: a call of a signature and options seen before replays its
plans directly), B = 1, L = 8k, Hq 32, Hk 8, D 128, bf16, Sq = 1, value checks off and on.

What changed (patch bench/wip/decode-host-fast.patch, a helper, 2026-12-01): one signature a
call (kvcache._signature) finds the structure memo's entry, which keeps the steps seen with
it by their options (kvcache._step_key: exact-typed options, the FLASHTRITON_* variables
read per call, the checks' switch, the interpreter knob, the stream); a hit replays the value
checks' plan (checks on) and the decode plan, skipping the option checks, plan keys and plan
lookups; plans._DirectLaunch fires through a generated function (the ~90-long argument list
written out as a call); a replay allocates with the shape as separate ints (torch.empty(1, 1,
32, 128, ...) parses ~2x faster than with a torch.Size); backends.select reads
FLASHTRITON_BACKEND through envvars.reader and device.type once.
CPU host simulation (bench/decode_host_sim.py, 3 processes a side alternating, each 7
interleaved rounds x 3000 calls; median of the processes' medians, us a call, contig /
paged16 / paged256): checks off 14.7 / 14.8 / 15.3 -> 8.7 / 9.0 / 9.2, checks on 22.1 /
22.6 / 23.4 -> 12.4 / 12.8 / 13.1.

Cases, every one interleaved round by round (R rounds; the host's drift spread alike):
  contig, paged16, paged256 (TMA on contig / 256), each with value checks off and on
  api   : host us a call, flash_attn_with_kvcache, N calls without a sync (checks on: every
          call syncs once, for its value rows: api then holds that wait)
  replay: host us of the decode plan's replay alone (plans._Plan.replay)
  raw   : host us of the decode's C launch alone with the replay's argument list
  py    : api - raw (our Python; checks on: plus the check launch and its sync)
  bench : triton.testing.do_bench of one eager call (us), once per case after the rounds

PREDICTION (H200 host, which ran our Python ~2.5x slower than the CPU machine: s27 call 1
api 38-43 us, raw ~5, py 33-38, replay ~15, against 14-15 us of simulated Python):
  checks off: py 33-38 -> 19-23 us, api 38-43 -> 24-28, replay ~15 -> ~10-12, bench at
  contig ~40 -> 24-29 (the kernel alone: 19 us in a graph, so still host-bound, by
  ~5-10 us); checks on: api / bench down by ~20-25 us from HEAD (simulated Python 21.5 ->
  ~12 us), the check's sync unchanged.

MEASURED (the helper's one run of --ab on the H200, 2026-12-01 15:17 UTC, 2 x 4 rounds x
200 calls a side; median (min), us):
  case         api HEAD -> patch       replay         raw   py                bench HEAD -> patch
  contig off   43.9 (41.4) -> 28.2 (23.8)  16.3 -> 13.7  ~5.3  38.0 -> 21.8  23.8/24.3 -> 24.3/23.8
  contig on    92.1 (87.8) -> 56.3 (54.1)  15.8 -> 13.2  ~5.1  87.1 -> 51.0  75.1/75.4 -> 57.9/57.1
  paged16 off  43.2 (41.4) -> 25.9 (25.3)  15.2 -> 12.7  ~5.0  38.0 -> 20.7  26.9/27.0 -> 27.0/27.1
  paged16 on   90.8 (88.2) -> 57.3 (55.2)  15.0 -> 12.7  ~5.0  85.8 -> 52.2  80.2/91.0 -> 61.4/61.5
  paged256 off 45.9 (42.3) -> 26.5 (25.0)  16.0 -> 13.4  ~5.2  39.9 -> 21.1  25.1/29.9 -> 24.5/25.0
  paged256 on  98.6 (90.2) -> 58.5 (54.7)  16.0 -> 13.3  ~5.2  93.5 -> 52.3  78.8/84.9 -> 59.1/59.2
  Prediction right for py and api with checks off; wrong for bench with checks off: do_bench
  flushes L2 before each call with a long memset kernel, behind which the host's ~26-46 us
  hide, so its eager number (~24-27 us) is the GPU's and did not move; with checks on (a
  sync a call) bench follows the host: 75-91 -> 57-62.

Run on the H200 (from the repo root):
    PYTHONPATH=src python bench/gpu/s27_decode_host_fast_ab.py [rounds=5] [calls=200]
measures this tree (~25 s); with --ab REV it alternates child processes between the source
tree of git revision REV (extracted with git archive; e.g. HEAD~1, the tree before the
patch) and this one, 2 children a side, and prints both (~70-90 s):
    PYTHONPATH=src python bench/gpu/s27_decode_host_fast_ab.py --ab HEAD~1 [rounds=4] [calls=200]
or, where the tree is no git checkout, --ab-src DIR (a copy of the base's src folder).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

B, L, HQ, HK, D = 1, 8192, 32, 8, 128
LAYOUTS = (("contig", 0), ("paged16", 16), ("paged256", 256))
MODES = ("off", "on")


def make(layout: int):
    """layout 0: contiguous; > 0: paged with that page size, pages shuffled in a pool."""
    import torch
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(B, 1, HQ, D, dtype=dt, device=dev)
    lens = torch.full((B,), L, dtype=torch.int32, device=dev)
    if layout == 0:
        kc = torch.randn(B, L, HK, D, dtype=dt, device=dev)
        return dict(q=q, k_cache=kc, v_cache=torch.randn_like(kc), cache_seqlens=lens)
    per_seq = L // layout
    num_blocks = B * per_seq + 7
    table = torch.randperm(num_blocks, device=dev)[:B * per_seq].view(B, per_seq).to(torch.int32)
    kc = torch.randn(num_blocks, layout, HK, D, dtype=dt, device=dev)
    return dict(q=q, k_cache=kc, v_cache=torch.randn_like(kc), cache_seqlens=lens, block_table=table)


class Case:
    def __init__(self, name, layout, mode):
        self.name, self.mode = f"{name}-{mode}", mode
        self.inp = make(layout)
        self.res = {"api": [], "replay": [], "raw": []}
        self.plan = self.inputs = None
        self.raws = []

    def call(self):
        from flashtriton import flash_attn_with_kvcache, kvcache
        if self.mode == "off":
            with kvcache.value_checks(False):
                return flash_attn_with_kvcache(**self.inp)
        return flash_attn_with_kvcache(**self.inp)

    def setup(self):
        """Record the plans, find the decode plan's replay (the last one of a call) and its
        direct launches' argument lists."""
        from flashtriton.launchers import plans
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
        if self.plan is None:
            print(f"{self.name:14s} NO REPLAY (plans {plans.stats})", flush=True)
            return
        for ln in self.plan.launches:
            if ln.direct is None:
                continue
            d = ln.direct
            real, got = d.raw, {}

            def capture(*args, _real=real, _got=got):
                _got["args"] = args
                return _real(*args)

            d.raw = capture
            try:
                self.keep = self.call()     # (its output, whose address the raw launches write)
            finally:
                d.raw = real
            self.raws.append((real, got["args"]))

    def round(self, calls):
        import torch
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            self.call()
        self.res["api"].append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
        if self.plan is not None:
            t0 = time.perf_counter()
            for _ in range(calls):
                self.plan.replay(self.inputs)
            self.res["replay"].append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
        if self.raws:
            t0 = time.perf_counter()
            for _ in range(calls):
                for raw, args in self.raws:
                    raw(*args)
            self.res["raw"].append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()


def measure(rounds: int, calls: int) -> dict:
    """{case: {api, replay, raw, py: [us a round], bench: us}} for this process's flashtriton."""
    import torch
    import triton
    cases = [Case(n, layout, m) for n, layout in LAYOUTS for m in MODES]
    for c in cases:
        c.setup()
    for r in range(rounds):
        for c in (cases if r % 2 == 0 else cases[::-1]):
            c.round(calls)
    out = {}
    for c in cases:
        res = dict(c.res)
        res["py"] = [a - b for a, b in zip(res["api"], res["raw"])]
        res["bench"] = triton.testing.do_bench(c.call, warmup=25, rep=100) * 1e3
        out[c.name] = res
    out["_device"] = torch.cuda.get_device_name()
    return out


def med(v):
    return f"{statistics.median(v):6.1f} (min {min(v):5.1f})" if v else "   n/a        "


def report(label: str, runs: list):
    """One side's table, every round of every child pooled (bench: each child's value)."""
    print(f"{label}: host us a call, median (min) over rounds; bench us (each run)", flush=True)
    for name in runs[0]:
        if name.startswith("_"):
            continue
        pool = {k: [x for r in runs for x in r[name][k]] for k in ("api", "replay", "raw", "py")}
        bench = " / ".join(f"{r[name]['bench']:.1f}" for r in runs)
        print(f"  {name:14s} api {med(pool['api'])}  replay {med(pool['replay'])}  raw {med(pool['raw'])}  "
              f"py {med(pool['py'])}  bench {bench}", flush=True)


def ab(rev: str, rounds: int, calls: int, base_src: str = ""):
    """Children alternating between REV's source tree (or base_src, a src folder) and this
    one, 2 a side."""
    here = os.path.abspath("src")
    if not base_src:
        base = tempfile.mkdtemp(prefix="decode_host_base_")
        subprocess.run(f"git archive {rev} src | tar -x -C {base}", shell=True, check=True)
        base_src = os.path.join(base, "src")
    runs = {rev: [], "this tree": []}
    for _ in range(2):
        for label, src in ((rev, os.path.abspath(base_src)), ("this tree", here)):
            env = dict(os.environ, PYTHONPATH=src)
            got = subprocess.run([sys.executable, __file__, "--child", str(rounds), str(calls)], env=env,
                                 capture_output=True, text=True)
            if got.returncode != 0:
                print(f"{label}: child failed\n{got.stderr[-3000:]}", flush=True)
                return
            runs[label].append(json.loads(got.stdout.strip().splitlines()[-1]))
    print(f"B={B} L={L} Hq={HQ} Hk={HK} D={D} bf16 Sq=1, {runs[rev][0]['_device']}, "
          f"2 x {rounds} rounds x {calls} calls a side, children alternating", flush=True)
    for label, r in runs.items():
        report(label, r)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--child"]:
        print(json.dumps(measure(int(args[1]), int(args[2]))), flush=True)
        return
    if args[:1] == ["--ab"]:
        rest = [int(a) for a in args[2:]]
        ab(args[1], *(rest + [4, 200][len(rest):]))
        return
    if args[:1] == ["--ab-src"]:                # a base src folder (no git repository at hand)
        rest = [int(a) for a in args[2:]]
        ab("base", *(rest + [4, 200][len(rest):]), base_src=args[1])
        return
    rest = [int(a) for a in args]
    rounds, calls = (rest + [5, 200][len(rest):])[:2]
    got = measure(rounds, calls)
    print(f"B={B} L={L} Hq={HQ} Hk={HK} D={D} bf16 Sq=1, {got['_device']}, {rounds} rounds x {calls} calls",
          flush=True)
    report("this tree", [got])


if __name__ == "__main__":
    main()
