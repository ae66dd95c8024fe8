"""Session 39 (offline), for session 40: ONE_LOOP (kernels/fwd_gluon.py: the CAUSAL one-block consumers' fully
visible and diagonal key tiles in one loop, the mask by a uniform branch) against the routed two-loop kernel
(loop2), cuDNN and FA2, on issue 4's causal forward cells: D = 128 (H = 16, 2 consumers) and D = 64 (H = 32,
3 consumers), 16k tokens (B = 16k / N), bf16 and fp16, kernel-only CUDA-graph replays, two rounds (the second
reversed). Before timing: loop1's outputs BITWISE loop2's, loop2 within the float64 criterion.

    PYTHONPATH=src timeout 300 python bench/gpu/s40_one_loop_ab.py      # S40_NS=2048,4096 S40_DTYPES=bf16 S40_DS=64

(At D = 64 the library routes causal calls below 4k to fwd.py, not the Gluon kernel: GLUON_FWD_CAUSAL_MIN_N.)

PREDICTION (before any run). Offline sm_90a: the unmasked step 490 -> 461 SASS a warp at D = 128 and 451 -> 420 at
D = 64 (the 32 PRMT that repacked the bf16 P carried between the two loops gone; at D = 64 one LDL a step in the
loop's common part, 208 spill bytes against 160), the masked step 713 -> ~657 / 717 -> ~698; 98 other variants'
SASS unchanged. The window's STEP_LEAN (the same PRMT fix plus one barrier, -8.6% SASS a block) measured +1.0% at
16k in session 34, so: D = 64 +0.5-3% (more issue-bound: the softmax of a 64 x 128 tile against halved matmuls),
D = 128 +0-1.5%, both at 2k-16k. Routing rule: taken for a head dim where loop1 >= 1% faster than loop2 in both
rounds at 2k and 4k in bf16 and fp16 and no worse than -0.5% in any round at 8k / 16k.
"""
import os

import torch

from flashtriton.bench import common, providers
from flashtriton.launchers import forward_gluon

TOKENS = 16384
NS = [int(x) for x in os.environ.get("S40_NS", "2048,4096,8192,16384").split(",")]
DS = [int(x) for x in os.environ.get("S40_DS", "128,64").split(",")]
DTYPES = [{"bf16": torch.bfloat16, "fp16": torch.float16}[x] for x in os.environ.get("S40_DTYPES", "bf16,fp16")
          .split(",")]


def case(d, n, dtype):
    h, b = 2048 // d, TOKENS // n
    torch.manual_seed(n + d)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(3))
    scale = d ** -0.5
    kw = dict(num_consumers=3) if d == 64 else {}
    label = f"D={d} causal N={n} B={b} H={h} {str(dtype)[6:]}"
    calls = {"loop2": forward_gluon.prepare(q, k, v, scale, causal=True, **kw),
             "loop1": forward_gluon.prepare(q, k, v, scale, causal=True, one_loop=True, **kw)}
    o2, o1 = ([t.clone() for t in calls[x]()] for x in ("loop2", "loop1"))
    ok, text = common.head0_fwd_check(q, k, v, *o2, softmax_scale=scale, window_left=-1, window_right=0)
    same = common.same_outputs(o2, o1)
    print(f"{label}: loop2 {text} {'ok' if ok else 'WRONG'}; loop1 {same} against loop2", flush=True)
    if same != "bitwise":
        calls.pop("loop1")
    gp = providers.gpu_providers(include_flex=False)
    for name, key in (("fa2", "sdpa-flash (FA2 CUDA)"), ("cudnn", "sdpa-cudnn")):
        calls[name] = lambda fn=gp[key]: fn(q, k, v, True)
    flops = common.attention_flops(b, h, n, n, d, True)
    tf = common.timing_rounds(calls, {x: flops for x in calls}, label)
    gain = ""
    if "loop1" in tf:
        gain = " / ".join(f"{100 * (a / b_ - 1):+.1f}%" for a, b_ in zip(tf["loop1"], tf["loop2"]))
    cd = max(tf["cudnn"]) if "cudnn" in tf else float("nan")
    print(f"| {d} | {n} | {str(dtype)[6:]} | {common.ratio_cells(tf, 'loop2')} | loop1 / loop2 a round: {gain} | "
          "best / cuDNN: " + ", ".join(f"{x} {max(t) / cd:.3f}x" for x, t in tf.items()) + " |", flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for dtype in DTYPES:
        for d in DS:
            for n in NS:
                try:
                    case(d, n, dtype)
                except Exception as exc:  # noqa: BLE001  (reported; the other cases run)
                    print(f"D={d} N={n} {dtype}: {common.short_error(exc)}", flush=True)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
