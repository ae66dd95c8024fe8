"""Session 14: where the eager decode step's extra time comes from (issue 5).

decode.md (01:54 UTC): B = 1 eager 63.6 / 159.8 us at L = 8k / 128k against graph replays
of 19.1 / 129.9, while at B = 8, L = 8k eager and graph agree (73.6 / 71.7). The bench queues
a 256 MB read flush (~60 us of GPU time) before each call, without synchronising, so a
host path shorter than flush + kernel should be hidden. Hypotheses: (a) the host path is
longer than that (the machine's host swings 2x); (b) the eager fused combine costs GPU
time that the graph's two-kernel combine does not (auto_combine picks "kernel" only while
capturing). Measured per case, each twice in alternating order:
  host   : our Python + launch per call, the GPU held busy (torch.cuda._sleep)
  eager  : the bench's method (read flush before each call, events around it)
  b2b    : 200 calls back to back, no flush, events around the loop / 200
  graph  : CUDA-graph replay, read flush
for ours with combine "fused" (the eager default) and "kernel", and SDPA cuDNN.
Prediction: (a) at B = 1, 8k (host ~60-80 us > 60 + 19); at 128k the 30 us gap is (b).
"""

import torch

from flashtriton.bench import decode as bd
from flashtriton.bench.common import capture_graph, host_us, time_ms
from flashtriton.launchers import decode as dl


def b2b_us(fn, calls=200):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / calls * 1e3


def graph_us(fn):
    g, _ = capture_graph(fn)
    return time_ms(g.replay, "cuda", flush="read") * 1e3


def main():
    for batch, seqlen in ((1, 8192), (1, 131072), (8, 8192)):
        inp = bd.make_inputs(batch, seqlen, "cuda")
        views = (inp["k_cache"].transpose(1, 2).contiguous(), inp["v_cache"].transpose(1, 2).contiguous())
        cudnn = bd._sdpa("CUDNN_ATTENTION")
        providers = {
            "ours fused": lambda: bd.ours(inp),
            "ours kernel": lambda: bd.ours(inp),
            "cudnn": lambda: cudnn(inp, views),
        }
        res = {name: [] for name in providers}
        for rep in range(2):
            order = list(providers) if rep == 0 else list(providers)[::-1]
            for name in order:
                combine = {"ours fused": "fused", "ours kernel": "kernel"}.get(name, "auto")
                with dl.options(combine=combine):
                    fn = providers[name]
                    row = (host_us(fn), time_ms(fn, "cuda", flush="read") * 1e3, b2b_us(fn), graph_us(fn))
                res[name].append(row)
        for name, rows in res.items():
            cols = list(zip(*rows))
            print(f"B={batch} L={seqlen // 1024}k {name:12s} " + "  ".join(
                f"{lab} {' / '.join(f'{x:6.1f}' for x in col)}"
                for lab, col in zip(("host", "eager", "b2b", "graph"), cols)), flush=True)


if __name__ == "__main__":
    main()
