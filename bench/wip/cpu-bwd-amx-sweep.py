"""Backward-only timing of the CPU backend against SDPA's backward (same inputs,
interleaved), B=1 H=8 N=2048 D=64, one tile configuration per process (bench/wip/cpu-bwd-amx.md):

    flock /tmp/cpu-bench.lock env PYTHONPATH=src python bench/wip/cpu-bwd-amx-sweep.py bfloat16 1024x1024x1

argv[2] = BWD_KEYS x BWD_ROWS x BWD_HEAD_THREADS (0 / 1); argv[3] = repetitions (12)."""
import sys, time, statistics, torch
import flashtriton
from flashtriton.bench.cpu import _ours, _sdpa
from flashtriton.cpu import config
torch.manual_seed(0)
b,h,n,d = 1,8,2048,64
dtype = getattr(torch, sys.argv[1])
config.BWD_KEYS, config.BWD_ROWS, config.BWD_HEAD_THREADS = map(int, sys.argv[2].split("x"))
q, k, v = (torch.randn(b, n, h, d, dtype=dtype, requires_grad=True) for _ in range(3))
dout = torch.randn(b, n, h, d, dtype=dtype)
out = _ours(q, k, v); so = _sdpa(q, k, v)
def bw(o): torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)
bw(out); bw(so)
a, s = [], []
for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 12):
    t0 = time.perf_counter(); bw(out); a.append((time.perf_counter() - t0) * 1e3)
    t0 = time.perf_counter(); bw(so); s.append((time.perf_counter() - t0) * 1e3)
print(sys.argv[1], sys.argv[2], "ours bwd", round(statistics.median(a), 1), "min", round(min(a), 1), "sdpa bwd", round(statistics.median(s), 1), flush=True)
