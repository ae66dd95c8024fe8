"""Session 28 (issue 4): the D = 256 backward at N = 512-4k on rows-first grids
(launchers/backward.BWD_ROWS_FIRST, kernels/bwd.py ROWS_FIRST; written offline in session 28,
never run yet) against the (B * H, blocks) grids it ran on before, and against SDPA
FLASH_ATTENTION's (FA2 CUDA) backward on the same inputs.

    PYTHONPATH=src timeout 170 python bench/gpu/s28_d256_bwd_ab.py    # ~60-100 s, compiles included
    (then: PYTHONPATH=src python -m pytest -q -m gpu tests/test_bwd_rows_first.py)

What runs: launchers.backward.bwd (the library's backward entry; at D = 256 always bwd.py:
the dQ kernel with the delta folded in, then dK/dV), kernel-only (a CUDA-graph replay with
do_bench's L2 flush: bench.common.graph_time_ms; FLASHTRITON_PLANS=0 so that no plan keeps
a grid across the table flips), on out / lse of the library's forward; bf16, 16k tokens
(B = 16384 / N), H = 8, D = 256, deterministic=False (the grid's flash_attn_func default).
Variants:
  - 2d:        BWD_ROWS_FIRST = {} (today's grids: (B * H, blocks));
  - rows:      BWD_ROWS_FIRST = {256: 4096} (the patch's default);
  - rows-long: rows first, and at N <= 1k the dK/dV tile of N >= 2k, (128, 64, 8, 1), instead
               of configs.DEFAULTS["dkdv_short"][256] = (64, 32, 4, 2) (session 19 measured
               them level on the 2-D grid; the long tile reads half the L2 bytes a FLOP);
  - FA2:       aten._scaled_dot_product_flash_attention_backward on the same q, k, v, dO
               (as (B, H, N, D) views of the (B, N, H, D) tensors, like the grid), with the
               out / lse of its own forward: its dot(dO, O), main kernel and dq convert.
Two rounds, the second in reverse order. First, every variant's gradients on batch 0, head 0
against float64 (error <= 3x PyTorch's bf16 error), and rows against 2d bitwise (dq, dk, dv).
Then a torch-profiler breakdown (GPU us a kernel) of 2d and rows at N = 512 and 1k.

Offline (bench/d256_bwd_compile.py, sm_90a, 2026-12-01): the route at D = 256 is bwd.py's
dQ (128, 32, 8, 3; 254 registers, no spill, 224 KB: 1 program an SM) then dK/dV
((64, 32, 4, 2) up to 1k: 255 registers, 1068 B spill (causal 1596), 101 KB, 64 HGMMA +
256 HMMA (its 32-key dV / dK dots are mma.sync), 2 programs an SM; (128, 64, 8, 1) from 2k:
1352 B spill (causal 2436), 208 KB, 1 an SM). ROWS_FIRST changes only the program-id
arithmetic: same registers and shared memory, spills within +-7% (1052 / 1448 / 2548 B).

Why (the 2-D grid's DRAM traffic): a dK/dV program streams its head's whole Q and dO
(N x 256 x 2 x 2 B: 512 KB at N = 512), a dQ program its head's K and V. On the (B * H,
blocks) grid the programs in flight (264 dK/dV, 132 dQ) are ~1-2 a head, and a head's next
program comes after every other head's operand went through the 50 MB L2 (B * H x 512 KB =
134 MB at 512): a miss. DRAM reads of the streamed operand ~= waves x 134 MB: dK/dV 15.5
waves -> 2.08 GB at every N of the grid, dQ 0.54 GB (512), 1.04 GB (1k-4k). Against the
s23 profile's kernel times: dK/dV 2.08 GB (+0.27 GB K, V, dK, dV) in 738 / 1210 / 2020 us
at 512 / 1k / 2k = 3.2 / 1.9 / 1.2 TB/s (the card copies at 4.27): the 512 dK/dV is
DRAM-bound, 1k half-way, 2k not; dQ 0.8 GB in 289 us at 512 (2.8 TB/s), 1.3 GB in 447 us
at 1k (2.9 TB/s), 752 us at 2k (1.7 TB/s). FA2's main kernel (its dq by
atomics) costs what our dK/dV alone costs (732 vs 738 us at 512): the gap is our
dQ kernel's recomputation on top of a DRAM-starved dK/dV. Rows first, a head's blocks run
side by side: its operand is read once (~0.13 GB a kernel), the rest hits L2.

PREDICTION (written before any run). Kernel-only backward, FA2-count TFLOP/s (and us):
  dK/dV without its DRAM stall runs at its compute-bound rate, taken as 1k's (227 TFLOP/s
  of its 4 matmuls, itself ~half-stalled) to 2k's (272): 512 738 -> ~610 us (570-655),
  1k 1210 -> ~1100 (1060-1145), 2k 2020 -> ~1960 (-3%); dQ towards its long-N ~600-650
  TFLOP/s of 3 matmuls: 512 289 -> ~220 us (200-245), 1k 447 -> ~370 (350-400), 2k 752 ->
  ~690. Causal: about half the traffic, so half the gain: dK/dV 572 -> ~490, 796 -> ~720;
  dQ 232 -> ~190, 312 -> ~270.
  | case | 2d (s23 profile) | rows (predicted) | FA2 (grid) |
  | plain 512 | 167 (1028 us) | ~207 (830 us; 190-225) | 196-198 |
  | plain 1k | 207 (1659 us) | ~234 (1470 us; 222-244) | 225 |
  | plain 2k | 248 (2773 us) | ~259 (2650 us; 250-265) | 243 |
  | plain 4k | ~274 | level to +4% | 255 |
  | causal 512 | 107 (805 us) | ~126 (680 us; 119-134) | 141 |
  | causal 1k | 155 (1109 us) | ~174 (990 us; 165-182) | 180 |
  | causal 2k | 211 (1631 us) | ~220 (1560 us) | 209 |
  | causal 4k | ~256 | level to +3% | 230-257 |
  So: ahead of FA2 non-causal from 512 (1.05x / 1.04x / 1.07x), causal still behind at 512
  (0.9x) and level at 1k. rows-long: at 512 / 1k within +-5% of rows (fewer L2 bytes a FLOP,
  but one program an SM and no load pipelining): a coin toss, which is why it is timed.
  Gradients: rows bitwise 2d; all within the f64 criterion. If rows loses anywhere (the
  forward's rows-first had one unexplained 0.74x case, D = 128 N = 1k), cap BWD_ROWS_FIRST
  at the last length it wins, or set it to {}.
"""
import os
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (before flashtriton: no plan keeps a grid)

import torch  # noqa: E402

from flashtriton.bench.common import (attention_flops, graph_time_ms, head0_grad_check,  # noqa: E402
                                      head0_grad_refs, kernel_times_us, short_error)
from flashtriton.kernels import configs  # noqa: E402
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

D, H, TOKENS, DTYPE = 256, 8, 16384, torch.bfloat16
SCALE = D ** -0.5
SEQLENS = [512, 1024, 2048, 4096]
LONG_TILE = configs.Tile(128, 64, 8, 1)
SHORT_TILE = configs.DEFAULTS["dkdv_short"][256]
VARIANTS = ["2d", "rows", "rows-long", "FA2"]


def set_variant(name: str, n: int) -> bool:
    """Sets the tables for an "ours" variant; False where it does not apply (rows-long
    beyond 1k is rows)."""
    if name == "rows-long" and n > configs.SHORT_SEQLEN:
        return False
    lib_backward.BWD_ROWS_FIRST.clear()
    if name != "2d":
        lib_backward.BWD_ROWS_FIRST[256] = 4096
    configs.DEFAULTS["dkdv_short"][256] = LONG_TILE if name == "rows-long" else SHORT_TILE
    return True


def make_inputs(n, causal, seed=0):
    torch.manual_seed(seed)
    b = TOKENS // n
    q, k, v, dout = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(4))
    params = AttnParams(SCALE, window_right=0 if causal else -1, deterministic=False)
    out, lse = lib_forward.fwd(q, k, v, params)
    return dict(q=q, k=k, v=v, dout=dout, out=out, lse=lse, params=params, causal=causal, b=b, n=n)


def ours(inp):
    return lambda: lib_backward.bwd(inp["dout"], inp["q"], inp["k"], inp["v"], inp["out"], inp["lse"], inp["params"])


def fa2(inp):
    """FA2's backward alone, on (B, H, N, D) views; its own forward's out / lse."""
    qt, kt, vt, dot = (inp[x].transpose(1, 2) for x in ("q", "k", "v", "dout"))
    causal = inp["causal"]
    res = torch.ops.aten._scaled_dot_product_flash_attention(qt, kt, vt, 0.0, causal, False, scale=SCALE)
    out, lse, cq, ck, mq, mk, seed, offset = res[:8]
    op = torch.ops.aten._scaled_dot_product_flash_attention_backward

    def run():
        dq, dk, dv = op(dot, qt, kt, vt, out, lse, cq, ck, mq, mk, 0.0, causal, seed, offset, scale=SCALE)
        return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)
    return run


def call(name, inp):
    return fa2(inp) if name == "FA2" else ours(inp)


def references(inp) -> tuple:
    """(float64, bf16) gradients of batch 0, head 0 by the reference (PyTorch autograd)."""
    kw = dict(softmax_scale=SCALE, window_left=-1, window_right=0 if inp["causal"] else -1)
    return head0_grad_refs(*(inp[x] for x in ("q", "k", "v", "dout")), **kw)


def checks():
    for n in SEQLENS:
        for causal in (False, True):
            try:
                inp = make_inputs(n, causal)
            except Exception as exc:  # noqa: BLE001
                print(f"check N={n} causal={causal}: inputs ERROR {short_error(exc)}", flush=True)
                continue
            grads, refs = {}, references(inp)
            for name in VARIANTS:
                tag = f"check N={n} {'causal' if causal else 'plain '} {name}"
                try:
                    if name != "FA2" and not set_variant(name, n):
                        continue
                    g = call(name, inp)()
                    torch.cuda.synchronize()
                    ok, text = head0_grad_check(g, refs)
                    grads[name] = g
                    print(f"{tag}: {'ok' if ok else 'FAILED'}; {text}", flush=True)
                except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                    print(f"{tag}: ERROR {short_error(exc)}", flush=True)
                    traceback.print_exc(limit=3)
            if "2d" in grads and "rows" in grads:
                same = [torch.equal(a, c) for a, c in zip(grads["rows"], grads["2d"])]
                print(f"check N={n} {'causal' if causal else 'plain '}: rows vs 2d bitwise dq/dk/dv {same}"
                      f"{'' if all(same) else '  <-- NOT BITWISE'}", flush=True)
            del grads, refs, inp
            torch.cuda.empty_cache()


def ab():
    rows = {}
    for rnd in range(2):
        order = VARIANTS if rnd == 0 else VARIANTS[::-1]
        for n in SEQLENS:
            for causal in (False, True):
                inp = make_inputs(n, causal)
                flops = attention_flops(inp["b"], H, n, n, D, causal, "bwd")
                for name in order:
                    if name != "FA2" and not set_variant(name, n):
                        continue
                    tag = f"ab round {rnd + 1} N={n} {'causal' if causal else 'plain '} {name}"
                    try:
                        ms = graph_time_ms(call(name, inp))
                        rows.setdefault((n, causal, name), []).append(ms)
                        print(f"{tag}: {ms * 1000:.0f} us {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
                    except Exception as exc:  # noqa: BLE001
                        print(f"{tag}: ERROR {short_error(exc)}", flush=True)
                del inp
                torch.cuda.empty_cache()
    print("\n| N | causal | variant | us (r1 / r2) | TFLOP/s (best) | vs 2d | vs FA2 |")
    print("|---|---|---|---|---|---|---|")
    for n in SEQLENS:
        for causal in (False, True):
            flops = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd")
            best = {name: min(rows[(n, causal, name)]) for name in VARIANTS if (n, causal, name) in rows}
            for name in VARIANTS:
                if name not in best:
                    continue
                v2 = f"{best['2d'] / best[name]:.2f}x" if "2d" in best else "-"
                vf = f"{best['FA2'] / best[name]:.2f}x" if "FA2" in best else "-"
                r = rows[(n, causal, name)]
                print(f"| {n} | {causal} | {name} | {' / '.join(f'{ms * 1000:.0f}' for ms in r)} | "
                      f"{flops / best[name] / 1e9:.0f} | {v2} | {vf} |", flush=True)


def profile():
    """GPU us per kernel of one backward, 2d against rows, at 512 and 1k non-causal."""
    for n in (512, 1024):
        inp = make_inputs(n, False)
        for name in ("2d", "rows"):
            try:
                set_variant(name, n)
                ev = kernel_times_us(call(name, inp), top=4)
                print(f"profile N={n} {name}: " + "; ".join(f"{k[:40]} {t:.0f} us" for k, t in ev), flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"profile N={n} {name}: ERROR {short_error(exc)}", flush=True)
        del inp
        torch.cuda.empty_cache()


def main(argv):
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 1
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} BWD_ROWS_FIRST default "
          f"{dict(lib_backward.BWD_ROWS_FIRST)}; dkdv_short {SHORT_TILE}", flush=True)
    if "--no-checks" not in argv:
        checks()
        print(f"[checks done at {time.time() - t0:.0f} s]", flush=True)
    ab()
    print(f"[A/B done at {time.time() - t0:.0f} s]", flush=True)
    if "--no-profile" not in argv:
        profile()
    set_variant("rows", 0)
    print(f"[done in {time.time() - t0:.0f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
