"""Session 38, second probe (bench/gpu/s38c.sh runs it with nvidia-smi sampling SM clock / power into
$OUT/s38c_smi.csv; every line here carries epoch seconds).

(C) The grid's forward+backward cell that reads 5-9% slow in the first shape after another shape
    (bench/gpu/s38_timing_probe.py part B reproduced it: D = 64 4k after 8k +4.8% / +9.3%, 4k again
    -0.4% / +0.4%, while every call's host time stayed 250-900 us with no GPU wait). s38b's nvidia-smi
    log and counters: the GPU spent 15.2 s of the 52 s run under SW power capping (700 W), SM clock
    1530-1980 MHz. PREDICTION: power history, not our code. After 8k the GPU enters 4k near the cap and
    its third timing (forward+backward) runs capped; "4k again" started from idle (~150 W). So: (C1) 8k
    then 4k back to back (slow expected), (C2) 8k, 3 s idle, 4k (adds up expected), (C3) 4k after 1.5 s
    of a heavy loop at 4k itself (slow expected, no shape change at all).
(D) D = 256 causal forward at N = 512 (issue 4: 1.45x FA2 in the grid, 1.5x asked; cuDNN 13% ahead of
    ours in s33/callC's graph A/B): the one-block Gluon kernel (routed) against its PERSISTENT variant
    (132 CTAs, default band; the next block's K / V issued under this block's tail), with SPLIT_EMPTY
    off too, FA2 and cuDNN; bf16, B = 32, H = 8, kernel-only graph replays, two rounds. PREDICTION:
    persistent -5 .. +5% (session 24, D = 128 512: -3%); one CTA an SM at D = 256, so the persistent
    loop's overlap of the next block's first loads is the only gain.

    PYTHONPATH=src python bench/gpu/s38_probe2.py         # S38_PART=C or D
"""
import os
import time

import torch
from triton.testing import do_bench

from flashtriton.bench import common, prefill, providers
from flashtriton.launchers import forward_gluon


def stamp():
    return f"{time.time():.3f}"


def part_c():
    h, d = 32, 64
    alone = {"flashtriton": providers.ours}

    def shape(tag, n):
        rows = prefill.bench_shape(alone, 16384 // n, n, h, d, False, torch.bfloat16)
        r = rows[0]
        print(f"C {tag} {stamp()}: fwd {r['fwd_ms']:.3f} bwd {r['bwd_ms']:.3f} fb {r['fwd_bwd_ms']:.3f} ms gap "
              f"{100 * (r['fwd_bwd_ms'] - r['fwd_ms'] - r['bwd_ms']) / r['fwd_bwd_ms']:+.1f}%", flush=True)

    for rep in range(2):
        shape(f"C1.{rep} 8k", 8192)
        shape(f"C1.{rep} 4k right after 8k", 4096)
        time.sleep(3)
        shape(f"C2.{rep} 8k after 3 s idle", 8192)
        time.sleep(3)
        shape(f"C2.{rep} 4k after 8k and 3 s idle", 4096)
        time.sleep(3)
        q, k, v = (torch.randn(4, 4096, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn_like(q)
        t_end = time.time() + 1.5
        while time.time() < t_end:              # 1.5 s of forward+backward at 4k: the GPU near its cap
            for _ in range(20):
                torch.autograd.grad(providers.ours(q, k, v, False), (q, k, v), dout)
            torch.cuda.synchronize()
        del q, k, v, dout
        shape(f"C3.{rep} 4k after 1.5 s of 4k load", 4096)
        time.sleep(3)


def part_d():
    b, n, h, d = 32, 512, 8, 256
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = d ** -0.5
    variants = {
        "one": forward_gluon.prepare(q, k, v, scale, causal=True),
        "one-nosplit": forward_gluon.prepare(q, k, v, scale, causal=True, split_empty=False),
        "pers": forward_gluon.prepare(q, k, v, scale, causal=True, persistent=True),
        "pers-band1": forward_gluon.prepare(q, k, v, scale, causal=True, persistent=True, band=1),
    }
    outs = {}
    for name, fn in list(variants.items()):
        try:
            outs[name] = [t.clone() for t in fn()]
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001  (reported; the others run)
            print(f"D {name}: {common.short_error(exc)}", flush=True)
            variants.pop(name)
    ok, text = (common.head0_fwd_check(q, k, v, *outs["one"], softmax_scale=scale, window_left=-1, window_right=0)
                if "one" in outs else (False, ""))
    print(f"D one: {text} {'ok' if ok else 'WRONG'}", flush=True)
    for name in list(variants):
        if name != "one":
            same = common.same_outputs(outs["one"], outs[name])
            print(f"D {name}: {same} against one", flush=True)
            if same != "bitwise":
                variants.pop(name)
    for pname, key in (("fa2", "sdpa-flash (FA2 CUDA)"), ("cudnn", "sdpa-cudnn"), ("lib", "flashtriton")):
        fn = providers.gpu_providers(include_flex=False)[key]
        variants[pname] = lambda fn=fn: fn(q, k, v, True)
    flops = common.attention_flops(b, h, n, n, d, True)
    print(f"D start {stamp()}", flush=True)
    tf = common.timing_rounds(variants, {x: flops for x in variants}, "D D=256 causal 512 B=32 H=8 bf16")
    print(f"D end {stamp()}", flush=True)
    print("| D=256 causal 512 | " + common.ratio_cells(tf, "one") + " |", flush=True)
    if "fa2" in tf:
        print("D against fa2 (best / best): " + ", ".join(f"{x} {max(t) / max(tf['fa2']):.3f}x"
                                                        for x, t in tf.items()), flush=True)


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    part = os.environ.get("S38_PART", "DC")
    if "D" in part:
        part_d()
    if "C" in part:
        part_c()


if __name__ == "__main__":
    main()
