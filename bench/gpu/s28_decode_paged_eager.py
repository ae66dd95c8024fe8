"""Session 28: is the eager page-16 gap of the decode table real? The table (s28 call 1 and
call 4) gives page 16 at B = 1, L = 8k 25.8 / 26.9 us eagerly against 20.1 / 21.2 for the
contiguous cache (1.28x), while as graphs 1.05x, and a CPU simulation of the host path
(bench/decode_host_sim.py) gives page 16 only +0.3 us of host time. The table times page 16
as the first row after the B = 128 grid. Here: the bench's own timing (bench.decode._time,
eager with the read flush, then graphs) of contiguous / page 16 / page 256, interleaved
over 4 rounds, the order rotated every round.

PREDICTION: eager page 16 within 1.05-1.10x contiguous in every round (the table's 1.28x
is the first-row-after-a-large-case effect), graphs 1.03-1.05x.

    PYTHONPATH=src python bench/gpu/s28_decode_paged_eager.py      (~30 s)
"""
import statistics

import torch

from flashtriton.bench.decode import _time, make_inputs, ours

torch.manual_seed(0)
inps = {"contig": make_inputs(1, 8192, "cuda"), "page16": make_inputs(1, 8192, "cuda", page_size=16),
        "page256": make_inputs(1, 8192, "cuda", page_size=256)}
fns = {k: (lambda inp=inp: ours(inp)) for k, inp in inps.items()}
for f in fns.values():
    f()
res = {k: ([], []) for k in fns}
names = list(fns)
for r in range(4):
    order = names[r % 3:] + names[:r % 3]
    for k in order:
        eager, graph, _ = _time(fns[k], "cuda", True)
        res[k][0].append(eager * 1e3)
        res[k][1].append(graph * 1e3)
    print(f"round {r} order {order}: " + ", ".join(f"{k} {res[k][0][-1]:.1f} ({res[k][1][-1]:.1f})" for k in names),
          flush=True)
ce, cg = statistics.median(res["contig"][0]), statistics.median(res["contig"][1])
for k in names:
    e, g = statistics.median(res[k][0]), statistics.median(res[k][1])
    print(f"{k:8s} eager {e:6.2f} us ({e / ce:.3f}x contig)  graph {g:6.2f} us ({g / cg:.3f}x)")
