"""Session 27 removed PV_OVERLAP (pv_overlap) after this measurement (1-3.4% slower): this no longer runs as is.
Session 27: the Gluon forward's PV_OVERLAP (kernels/fwd_gluon.py _consume_tile; prepare(...,
pv_overlap=True)), off against on. Not routed: the library's kernels are PV_OVERLAP=False.

The claim checked (offline, sm_90a SASS, Triton 3.6.0, bench/gluon_fwd_compile.py): "ptxas
waits for the P V wgmma (WARPGROUP.DEPBAR.LE gsb0, 0x0) before any of the softmax's MUFU.EX2,
so within one consumer the softmax does not overlap the P V multiply". True at HEAD in every
tile loop of both consumers, D = 128 bf16 one block (2 loops), PERSISTENT (2), CAUSAL (4:
unmasked and diagonal loop a consumer). Each tile step's SASS: WARPGROUP.ARRIVE, 8 HGMMA
(S_j, gsb0), WARPGROUP.ARRIVE, 8 HGMMA with the register A operand (P_{j-1} V_{j-1}, R152-R183,
gsb0), DEPBAR.LE gsb0, 0x1 (S_j ready), the first half of the row max (32-56 FMNMX), the first
SHFL.BFLY, DEPBAR.LE gsb0, 0x0 (P V done), BAR.SYNC 0x2 + the kv_empty arrive, then all 66
MUFU.EX2 (64 of P, 2 of alpha), the row sums, 32 F2FP packing P_j into R152-R183 and the 64
FMUL of O's rescale. The PTX had the order meant (wgmma.wait_group 1, the 66 ex2, wait_group
0): ptxas moved the wait, which has no register operands, into the first latency gap of the
softmax (the SHFL). Not the P operand's registers: with the tile loop unrolled by two (P_j in
a second value while P_{j-1} is in flight) the wait still came before the EX2; moving O's
rescale to the next step gave byte-identical SASS; dropping the kv_empty arrive (and its
BAR.SYNC) changed nothing either. What holds the wait down is a basic block boundary: PV_OVERLAP
puts a never-taken branch (qk_scale is NaN; the launcher rejects a non-finite scale) before
the wait, its body an arrive on the unused turn barrier so that ptxas cannot if-convert it
(a BAR.SYNC body was predicated and the wait moved up again).

SASS with PV_OVERLAP (one consumer's tile step, D = 128 bf16), instructions between
DEPBAR.LE 0x1 and 0x0 (under the P V wgmma) / after 0x0 to the loop end (exposed):
    plain one block   57 / 322 (66 MUFU exposed)  ->  281 (66 MUFU) / 109 (64 O FMUL, 32 F2FP)
    PERSISTENT        33 / 346                    ->  281 / 109
    CAUSAL unmasked   50 / 329                    ->  279 / 111
and all 66 MUFU.EX2 under the wgmma in every loop of every variant compiled (plain, PERSISTENT,
CAUSAL, CAUSAL PERSISTENT, SCHEDULED, WINDOW, DROPOUT, causal DROPOUT, fp16 NEG_SCALE, BLOCK_N
64 (34 EX2), D = 64). Spills: 0 (plain, PERSISTENT, CAUSAL, WINDOW, DROPOUT plain, D = 64,
BLOCK_N 64), 32 B CAUSAL PERSISTENT / SCHEDULED (outside the tile loops; 0 at HEAD), 1604 B causal
DROPOUT (8 at HEAD: not for that variant); setmaxnreg 240 / 240 / 24 unchanged. PV_OVERLAP
off: whole-kernel SASS identical to HEAD (addresses stripped; 13 variants incl. PINGPONG,
WINDOW, DROPOUT, SCHEDULED, D = 64).

PREDICTION (from the SASS, before any run). Per consumer warp (one per SM sub-partition)
and tile: 66 MUFU.EX2 at 8 cycles a warp instruction (16 / clk / SM) = ~530 cycles of MUFU,
~320-350 issue slots: ~530-600 cycles exposed after the P V wgmma today, ~110-150 (the O
rescale, the P pack) with PV_OVERLAP, i.e. ~420-450 cycles a tile moved under the consumer's
own P V (64 x 128 x 128: ~512 tensor cycles at 4096 FLOP / clk / SM when it has the tensor
cores alone). A consumer's serial chain per tile drops from ~1.6-1.7k to ~1.2k cycles; the
tensor work of a tile pair (both consumers) is ~2048 cycles, measured ~3100-3300 (610-660
TFLOP/s). Today the other consumer's wgmmas fill most of each consumer's softmax gap, so
the gain is the part they did not fill: plain PERSISTENT 4k / 16k +2-8% (centre +4%, ~640-690
TFLOP/s), CAUSAL one block +2-6% (its diagonal tiles' longer softmax moves too). Risk: 0 or
-1-2% if the two consumers' wgmma queueing was already hiding it and the earlier S issue
makes them contend. Outputs: bitwise equal off / on (the same instructions, another order);
float64 on batch 0 / head 0 within the tests' criterion.

    export PYTHONPATH=src
    timeout 540 python bench/gpu/s27_gluon_pv_overlap_ab.py       # ~1-3 min (4 compiles)
    python -m pytest tests/test_fwd_gluon.py -q -o addopts="" -m gpu -k pv_overlap   # then

ab: D = 128, bf16, 16k tokens (B = 16k / N), H = 16, N in {4k, 16k}; plain PERSISTENT (the
route's plain kernel) and CAUSAL one block a CTA (the route's causal kernel), PV_OVERLAP off
and on, CUDA-graph replays (bench.common.graph_time_ms; eager "*" where a capture fails),
two rounds, the second in reverse order; TFLOP/s by attention_flops.
"""
from __future__ import annotations

import sys
import time
import traceback

import torch

from flashtriton import reference
from flashtriton.bench.common import attention_flops, graph_time_ms, time_ms
from flashtriton.launchers import forward_gluon

TOKENS, HEADS, DTYPE, D = 16384, 16, torch.bfloat16, 128


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def inputs(n, seed=0):
    torch.manual_seed(seed)
    b = max(1, TOKENS // n)
    return tuple(torch.randn(b, n, HEADS, D, device="cuda", dtype=DTYPE) for _ in range(3))


def check_one_head(q, k, v, o, lse, scale, causal) -> tuple[bool, str]:
    """Batch 0, head 0 against float64: error <= 2x the same-dtype torch error, lse too."""
    args = [t[:1, :, :1] for t in (q, k, v)]
    kw = dict(softmax_scale=scale, window_left=-1, window_right=0 if causal else -1)
    out64, lse64 = reference.attention(*(t.double() for t in args), **kw)
    out16, lse16 = reference.attention(*args, **kw)
    o1, lse1 = o[:1, :, :1].double(), lse[:1, :1].double()
    err = (o1 - out64).abs().max().item()
    base = (out16.double() - out64).abs().max().item()
    err_lse = (lse1 - lse64).abs().max().item()
    base_lse = (lse16.double() - lse64).abs().max().item()
    ok = err <= 2 * base + 1e-4 and err_lse <= 2 * base_lse + 1e-4 and torch.isfinite(o).all().item()
    del out64, lse64, out16, lse16
    torch.cuda.empty_cache()
    return ok, f"f64 err {err:.1e} (torch {base:.1e}), lse {err_lse:.1e} ({base_lse:.1e})"


def same(a, b) -> str:
    (o1, l1), (o2, l2) = a, b
    if torch.equal(o1, o2) and torch.equal(l1, l2):
        return "bitwise"
    return f"DIFFER: out {(o1.float() - o2.float()).abs().max().item():.1e}, lse equal {torch.equal(l1, l2)}"


def timed(fn):
    try:
        return graph_time_ms(fn), ""
    except Exception:  # noqa: BLE001  (capture failed: eager instead)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def case(n, causal):
    q, k, v = inputs(n)
    b = q.shape[0]
    scale = D ** -0.5
    flops = attention_flops(b, HEADS, n, n, D, causal)
    kind = "causal one block" if causal else "plain PERSISTENT"
    kw = dict(causal=True) if causal else dict(persistent=True)
    calls = {ovl: forward_gluon.prepare(q, k, v, scale, pv_overlap=ovl, **kw) for ovl in (False, True)}
    outs = {}
    for ovl, fn in calls.items():
        print(f"N={n} {kind} pv_overlap={ovl}: compiling / first run {time.strftime('%H:%M:%S')}", flush=True)
        outs[ovl] = tuple(t.clone() for t in fn())
    torch.cuda.synchronize()
    print(f"N={n} {kind}: off vs on {same(outs[False], outs[True])}", flush=True)
    for ovl in (False, True):
        ok, text = check_one_head(q, k, v, *outs[ovl], scale, causal)
        print(f"N={n} {kind} pv_overlap={ovl}: {'ok' if ok else 'FAIL'} {text}", flush=True)
    del outs
    times = {False: [], True: []}
    for rnd, order in enumerate(((False, True), (True, False))):
        for ovl in order:
            ms, star = timed(calls[ovl])
            times[ovl].append(ms)
            print(f"N={n} {kind} round {rnd + 1} pv_overlap={ovl}: {ms:.3f} ms{star} "
                  f"{flops / ms / 1e9:.0f} TFLOP/s", flush=True)
    off, on = min(times[False]), min(times[True])
    print(f"| {n} | {kind} | {flops / off / 1e9:.0f} | {flops / on / 1e9:.0f} | {off / on:.3f}x |", flush=True)


def ab():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    for n in (4096, 16384):
        for causal in (False, True):
            try:
                case(n, causal)
            except Exception as exc:  # noqa: BLE001  (reported, the next case runs)
                print(f"N={n} causal={causal}: {short(exc)}", flush=True)
                traceback.print_exc()
            torch.cuda.empty_cache()
    print("table rows above: | N | kernel | TFLOP/s off | TFLOP/s on | speedup (best of 2) |", flush=True)


def main(parts):
    for part in parts or ["ab"]:
        {"ab": ab}[part]()


if __name__ == "__main__":
    main(sys.argv[1:])
