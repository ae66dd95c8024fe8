"""Session 17 (prepared offline in session 17): the persistent bwd_ws.py kernels
(launchers.backward.WS_PERSISTENT, empty by default: never run on a GPU yet), their
descriptors made once over (B * N, H-span) views (kernels/bwd_ws.py).

ab (default): library calls, the backward alone (torch.autograd.grad of a fixed forward
with a fixed dout, triton.testing.do_bench median, L2 flushed), 16k tokens (B = 16384 // N,
H = 2048 // D: 16 at D = 128, 32 at D = 64, as the prefill suite), N = 512 ... 16k,
non-causal (bwd_ws.py whole) and causal (the split path: bwd_ws.py PARTIAL, then bwd.py),
FLASHTRITON_WARP_SPEC=1 so that every case reaches bwd_ws.py (by default short N and
causal N < 4k / 8k run bwd.py). Variants: one tile a program, persistent (TILE_STAGES=2:
the tile-start loads double-buffered) and persistent-1buf (TILE_STAGES=1), each twice in
alternating order; backward TFLOP/s (2.5 x 4 * B * H * N^2 * D, halved when causal),
the programs launched (dK/dV, dQ) and whether dq / dk / dv are bitwise equal to one tile.

stress SECONDS: run in 3 processes at once (`for i in 1 2 3; do python ... stress 20 & done;
wait`): fixed inputs per case, a quiet one-tile result stored first, then persistent calls
(TILE_STAGES 2 and 1 alternating) for SECONDS a case, each compared bitwise with it;
prints calls, mismatches and calls with NaN per case. Any mismatch is a bug (the
persistent forward's per-tile descriptors: 29-87 of 42-276 calls a case, session 16).

Prediction (before the run): bitwise equal everywhere (0 mismatches under stress); the
forward gained +13% at N = 512 to +1-2% at 16k from persistence (D = 128 unmasked), the
backward's tiles are longer (dK/dV loops over all queries of a GQA group), so expect
+3-10% at 512 / 1k, level (+-2%) from 4k; causal split: the bulk launches are shorter,
+0-5%. TILE_STAGES=1 within 2% of 2 (the next tile's loads overlap the epilogue anyway).

    PYTHONPATH=src python bench/gpu/s17_bwd_persistent_ab.py [ab] [--head-dims 128 64]
        [--seqlens 512 1024 2048 4096 16384] [--causal both|no|yes] [--no-1buf]
    PYTHONPATH=src python bench/gpu/s17_bwd_persistent_ab.py stress 20
"""
from __future__ import annotations

import argparse
import os
import time

os.environ["FLASHTRITON_WARP_SPEC"] = "1"        # every case on bwd_ws.py (see above)

import torch  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.bench.common import attention_flops, time_ms  # noqa: E402
from flashtriton.launchers import backward, plans  # noqa: E402

BASE = dict(WS_PERSISTENT=set(backward.WS_PERSISTENT), WS_PERSISTENT_TILE_STAGES=backward.WS_PERSISTENT_TILE_STAGES)
DECISIONS: list = []                              # (kernel, (programs, persistent)) of each bwd_ws.py launch
_real_ws_programs = backward._ws_programs


def _recording_ws_programs(*a):
    DECISIONS.append((a[1], _real_ws_programs(*a)))
    return DECISIONS[-1][1]


backward._ws_programs = _recording_ws_programs


KERNELS_CHOSEN = ["dkdv", "dq"]                   # which kernels the persistent variants cover (--kernels)


def setting(d: int, causal: bool, persistent: bool, tile_stages: int = 2, dropout: bool = False, kernels=None):
    """Apply a variant: WS_PERSISTENT holds the kernels' kind of this case, or nothing."""
    kinds = {(kernel, d, causal, dropout) for kernel in (kernels or KERNELS_CHOSEN)} if persistent else set()

    def apply():
        backward.WS_PERSISTENT = kinds
        backward.WS_PERSISTENT_TILE_STAGES = tile_stages
        plans.clear()                             # launch plans key on the environment only
    return apply


def restore():
    for name, value in BASE.items():
        setattr(backward, name, value)
    plans.clear()


def inputs(d: int, n: int, causal: bool, p: float = 0.0, seed: int = 0):
    """(grad function, b, h): the backward of one fixed forward with a fixed dout."""
    h, b = 2048 // d, 16384 // n
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
               for _ in range(3))
    torch.manual_seed(seed)                       # the dropout rng state the forward saves
    out = flashtriton.flash_attn_func(q, k, v, causal=causal, dropout_p=p)
    dout = torch.randn(out.shape, device="cuda", dtype=out.dtype, generator=gen)

    def grad():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    return grad, b, h


def programs_of(grad) -> str:
    """The dK/dV and dQ launches of one call: 'P' + programs when persistent, else the grid."""
    DECISIONS.clear()
    grad()
    return " ".join(f"{kernel}:{'P' if pers else ''}{n}" for kernel, (n, pers) in DECISIONS)


def ab_case(d: int, n: int, causal: bool, one_buf: bool = True):
    grad, b, h = inputs(d, n, causal)
    flops = attention_flops(b, h, n, n, d, causal, "bwd")
    variants = {"one-tile": setting(d, causal, False), "persistent": setting(d, causal, True, 2)}
    if one_buf:
        variants["persistent-1buf"] = setting(d, causal, True, 1)
    res = {name: [] for name in variants}
    grads, launched = {}, {}
    for rep in range(2):
        for name in (list(variants) if rep == 0 else list(variants)[::-1]):
            variants[name]()
            if rep == 0:
                launched[name] = programs_of(grad)
                grads[name] = [g.clone() for g in grad()]
            res[name].append(flops / time_ms(grad, "cuda") / 1e9)
    equal = {name: all(torch.equal(x, y) for x, y in zip(grads[name], grads["one-tile"]))
             for name in variants if name != "one-tile"}
    label = f"D={d} N={n} B={b} H={h} {'causal' if causal else 'plain'}"
    print(f"{label:34s} " + "  ".join(f"{nm} {' / '.join(f'{x:5.0f}' for x in r)}" for nm, r in res.items())
          + f"   bitwise = one-tile: {equal}   launches: {launched}", flush=True)
    del grads


def ab(args):
    print(f"GPU {torch.cuda.get_device_name()}, backward TFLOP/s (rep 1 / rep 2), flashtriton "
          f"{getattr(flashtriton, '__version__', '?')}", flush=True)
    causal_cases = {"both": (False, True), "no": (False,), "yes": (True,)}[args.causal]
    try:
        for d in args.head_dims:
            for causal in causal_cases:
                for n in args.seqlens:
                    ab_case(d, n, causal, one_buf=not args.no_1buf)
    finally:
        restore()


# (D, N, causal, dropout_p): unmasked, the split path, dropout (TILE_STAGES 1 at D = 128)
STRESS_CASES = [(128, 2048, False, 0.0), (128, 16384, False, 0.0), (128, 4096, True, 0.0), (64, 2048, False, 0.0),
                (64, 8192, True, 0.0), (128, 2048, False, 0.1)]


if os.environ.get("S17_STRESS"):                 # "d,n,causal,p;..." (session 17 call 4)
    STRESS_CASES = [(int(d), int(n), c == "1", float(p)) for d, n, c, p in
                    (case.split(",") for case in os.environ["S17_STRESS"].split(";"))]


def stress(seconds: float):
    try:
        for i, (d, n, causal, p) in enumerate(STRESS_CASES):
            grad, _, _ = inputs(d, n, causal, p, seed=100 + i)
            setting(d, causal, False, dropout=p > 0)()
            want = [g.clone() for g in grad()]            # the quiet one-tile result
            if any(bool(x.isnan().any()) for x in want):
                print(f"D={d} N={n} causal={causal} p={p}: the one-tile baseline has NaN", flush=True)
            calls, bad, nans, not_persistent = {1: 0, 2: 0}, {1: 0, 2: 0}, {1: 0, 2: 0}, 0
            t_end = time.time() + seconds
            while time.time() < t_end:
                for stages in (2, 1):
                    setting(d, causal, True, stages, dropout=p > 0)()
                    DECISIONS.clear()
                    got = grad()
                    not_persistent += not all(pers for _, (_, pers) in DECISIONS)
                    calls[stages] += 1
                    bad[stages] += not all(torch.equal(x, y) for x, y in zip(got, want))
                    nans[stages] += any(bool(x.isnan().any()) for x in got)
            print(f"D={d} N={n} {'causal' if causal else 'plain'} p={p}: persistent calls (TILE_STAGES 2 / 1) "
                  f"{calls[2]} / {calls[1]}, differ {bad[2]} / {bad[1]}, with NaN {nans[2]} / {nans[1]}"
                  + (f", NOT PERSISTENT {not_persistent}" if not_persistent else ""), flush=True)
    finally:
        restore()


def diag():
    """Session 17 call 2: at D = 128 the persistent dQ gave NaN rows on the GPU (call 1). Per
    kernel alone: which gradients differ, and where the NaN rows of dq sit (batch, head,
    query block of 128, row in the block)."""
    try:
        for d, n, causal in [(128, 2048, False), (128, 16384, False), (128, 4096, True), (64, 2048, False)]:
            grad, b, h = inputs(d, n, causal, seed=5)
            setting(d, causal, False)()
            want = [g.clone() for g in grad()]
            for kernels in (("dkdv",), ("dq",)):
                for stages in (2, 1):
                    setting(d, causal, True, stages, kernels=kernels)()
                    DECISIONS.clear()
                    got = grad()
                    differ = {nm: int((x != y).sum()) for nm, x, y in zip("qkv", got, want)}
                    line = f"D={d} N={n} {'causal' if causal else 'plain'} {kernels[0]} stages={stages}: " \
                           f"launches {DECISIONS} elements differing dq/dk/dv {differ}"
                    bad = (got[0] != want[0]).any(-1)               # (B, N, H) rows of dq off
                    if bad.any():
                        idx = bad.nonzero()
                        blocks = sorted({(int(i[0]), int(i[2]), int(i[1]) // 128) for i in idx})
                        rows = sorted({int(i[1]) % 128 for i in idx})
                        line += (f"\n    dq rows off {len(idx)} of {bad.numel()}, NaN {int(got[0].isnan().any(-1).sum())};"
                                 f" (b, h, qblock) {len(blocks)}: {blocks[:12]}; rows within a block {len(rows)}:"
                                 f" {rows[:8]}..{rows[-4:]}")
                    print(line, flush=True)
    finally:
        restore()


def diag2():
    """Session 17 call 3: call 1's 3-process stress saw every TILE_STAGES=1 call at D = 128
    N = 16k (both kernels persistent) differ, where call 2 found each kernel alone right at
    TILE_STAGES=1 in one process. One process here: both kernels at TILE_STAGES=1, fresh
    (no TILE_STAGES=2 call before), 4 calls; then after a TILE_STAGES=2 call; per case."""
    try:
        for d, n, causal in [(128, 16384, False), (128, 2048, False), (128, 4096, True)]:
            grad, b, h = inputs(d, n, causal, seed=11)
            setting(d, causal, False)()
            want = [g.clone() for g in grad()]
            for label, seq in (("1 x4", (1, 1, 1, 1)), ("2 then 1 x2", (2, 1, 1))):
                out = []
                for stages in seq:
                    setting(d, causal, True, stages, kernels=("dkdv", "dq"))()
                    got = grad()
                    out.append("".join("X" if not torch.equal(x, y) else "." for x, y in zip(got, want)))
                print(f"D={d} N={n} {'causal' if causal else 'plain'} both persistent, stages {label}: "
                      f"dq/dk/dv differ per call {out}", flush=True)
    finally:
        restore()


def dropout_ab():
    """Issue 3's dropout ratio (forward+backward at p = 0.1 over p = 0; B = 2, H = 16,
    N = 4k, D = 128 non-causal, as bench.features) with the backward one tile a program and
    persistent (dropout and plain kinds both), each twice in alternating order."""
    from flashtriton.bench.common import time_ms as t_ms
    b, n, h, d = 2, 4096, 16, 128
    gen = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
               for _ in range(3))
    dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)

    def step(p):
        def run():
            out = flashtriton.flash_attn_func(q, k, v, dropout_p=p)
            return torch.autograd.grad(out, (q, k, v), dout)
        return run
    res = {}
    try:
        for rep in range(2):
            for persistent in ((False, True) if rep == 0 else (True, False)):
                kinds = {(kern, d, False, drop) for kern in ("dkdv", "dq") for drop in (False, True)} if persistent else set()
                backward.WS_PERSISTENT = kinds
                plans.clear()
                for p in (0.0, 0.1):
                    res.setdefault((persistent, p), []).append(t_ms(step(p), "cuda"))
        for persistent in (False, True):
            t0, t1 = (sorted(res[(persistent, p)])[0] for p in (0.0, 0.1))
            print(f"dropout fwd+bwd B={b} N={n} H={h} D={d}: backward {'persistent' if persistent else 'one tile'}: "
                  f"p=0 {t0:.3f} ms, p=0.1 {t1:.3f} ms, ratio {t1 / t0:.3f}", flush=True)
    finally:
        restore()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", default="ab", choices=["ab", "stress", "diag", "diag2", "dropout"])
    ap.add_argument("seconds", nargs="?", type=float, default=20.0, help="stress: seconds a case")
    ap.add_argument("--head-dims", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--seqlens", type=int, nargs="+", default=[512, 1024, 2048, 4096, 16384])
    ap.add_argument("--causal", choices=["both", "no", "yes"], default="both")
    ap.add_argument("--no-1buf", action="store_true", help="skip the TILE_STAGES=1 variant")
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS_CHOSEN), help="persistent variants cover these")
    args = ap.parse_args(argv)
    KERNELS_CHOSEN[:] = args.kernels
    if args.mode == "dropout":
        dropout_ab()
    elif args.mode == "diag2":
        diag2()
    elif args.mode == "diag":
        diag()
    elif args.mode == "stress":
        stress(args.seconds)
    else:
        ab(args)


if __name__ == "__main__":
    main()
