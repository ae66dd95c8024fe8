"""Session 24: the hand-scheduled Gluon dK/dV pass of the backward (kernels/bwd_gluon.py,
host side launchers/backward_gluon.py; written and compiled offline in session 24, never
run yet, not routed) on the H200: first whether it is right and does not hang, then its
time against the library's own dK/dV kernel.

    PYTHONPATH=src timeout 120 python bench/gpu/s24_gluon_bwd_ab.py smoke   # first: a hang = barrier bug
    PYTHONPATH=src timeout 900 python bench/gpu/s24_gluon_bwd_ab.py ab      # the A/B

smoke: a dozen small calls (D 128 / 64, GQA, Nq != Nk, causal with rows that see no key,
both ways of reading lse / delta, OVERLAP), each printed as one line, never raising: the
kernel is compiled first (warmup, no launch), then "launching" is printed (flushed), so a
hang shows as that line being the last; then the float64
check on batch 0, KV head 0 (and its group of query heads): error <= 3x PyTorch's
same-dtype error (the tests' criterion); the max difference from the library's own dk / dv
(flashtriton.flash_attn_func forward + autograd backward, the same inputs; relative to the
library's max |dk|, |dv|); NaN count; two launches bitwise equal.

ab: bf16, 16k tokens (B = 16k / N), H = 16 at D = 128 and H = 32 at D = 64, N in {1k, 4k,
16k}, non-causal and causal. Inputs: the library's forward (launchers.forward.fwd: out,
lse), delta by the library's preprocess kernel (backward_gluon.delta_of), one prepare
(descriptors made once). Timed two rounds in alternating order:
  - gluon (the defaults: VEC_PTR, lse / delta by pointer loads; 2 stages at D = 128, 4 at
    64), gluon-tma (lse / delta through the ring by 1-D TMA), gluon-3st (D = 128
    non-causal: 3 stages), gluon-overlap (D = 64 non-causal: OVERLAP): kernel only,
    flashtriton.bench.common.time_ms (do_bench median, L2 flushed), and in brackets the
    torch-profiler GPU time of the same launch (dkdv_us: 10 calls after 3 warm-ups, no
    flush, as bwd_ab.kernel_profile; the library's number below is measured that way);
  - library dK/dV: the library's backward (flash_attn_func + torch.autograd.grad, launch
    plans on, as users run it) under the same profiler, summing the GPU time of every
    kernel whose name holds "dkdv" (bwd_ws.py's attn_bwd_dkdv_ws_kernel where the policy
    takes the warp-specialized path; plus bwd.py's RESUME launch on causal calls' split
    path); their names are printed. Isolating the dK/dV kernel by the profiler is exact
    per kernel; no other way to launch it alone exists outside _bwd.
  - as context, the whole library backward (time_ms of the autograd call: delta
    preprocess + dK/dV + dQ, host work included) and its profiler total.
TFLOP/s of the dK/dV pass: 4 matmuls, 4 * 2 * B * H * Nq * Nk * D (halved if causal).
Then a NaN stress: 200 launches of each gluon variant at D = 128, N = 16k (the library's
1-D TMA lse / delta loads gave NaN in 0.1-3% of calls there, bench/NOTES.md "The dK/dV
NaN"), counting calls with any NaN in dk / dv.

Offline (bench/gluon_bwd_compile.py, sm_90a, 2026-12-01): 12 warps, setmaxnreg 240 / 240 /
24, 0 spills in every variant timed here (D 128 / 64, bf16 / fp16, causal or not, both
vector loads, 3 stages, OVERLAP at D = 64), also through the JIT binder with the
launcher's own arguments (--jit); 129 KB shared memory at D = 128 (2 stages), 97 KB at
D = 64 (4 stages); HGMMA 48 (D = 128) / 32 (D = 64) a kernel, 'WARPGROUP.DEPBAR.LE gsb0,
0x1' in both consumers. OVERLAP at D = 128 is serialized by ptxas (not timed).

Run time (estimate): smoke ~1-2 min (mostly compiles: ~10 kernel variants, 10-30 s each on
the first call, plus the library's own kernels); ab ~4-8 min (5 variants x 12 shapes, each
timed twice by do_bench and the profiler, the library backward twice, NaN stress 400
launches at 16k).

Prediction. Per tile (64 queries) a CTA runs 4 wgmma of 64 x 64 x D / 64 x D x 64 per
warpgroup: 8.4 MFLOP at D = 128, ~2,050 cycles of the SM's ~4,100 dense bf16 FLOP/cycle,
against ~150 cycles a warpgroup of exp2 / FMA / conversion work and 32 KB of Q + dO from L2
(16 B/cycle/SM, ~3.9 TB/s over 132 SMs at peak MMA rate: L2 keeps up at the rates below).
No P / dS shared-memory round trip (both are register A operands in this pass), the two
warpgroups interleave their wgmmas, but each warpgroup waits for its dK / dV wgmmas before
the next tile's S^T (no cross-tile overlap within a warpgroup) and the ring has 2 stages at
D = 128. Expected dK/dV pass, non-causal D = 128: 430-520 TFLOP/s at 4k / 16k (60-70% of
the H200's ~790 achievable dense bf16), 380-450 at 1k (8 key blocks x 256 heads x batches:
2048 CTAs, 15.5 waves, plus the K / V load and epilogue per CTA against 16 tiles of
work); the library's attn_bwd_dkdv_ws_kernel measured ~550 TFLOP/s of its own matmul work
at 8k (bench/NOTES.md, profile at N = 8192) in an older session, so level to -15% against
it is the likely outcome of this first version, a win needing the cross-tile overlap
(S^T_{t+1} issued before dK_t is waited for). D = 64: half the FLOPs a tile for the same
exp2 work and barrier / wait latency: 300-400 TFLOP/s. Causal: per key block ~half the
tiles, the diagonal tile masked, the first skipped by one warpgroup: 0.85-0.95x the
non-causal rate. gluon vs gluon-tma: within 3% (the pointer loads are issued before the
stage's wait; their layout conversion costs one warpgroup barrier each). gluon-3st: within
3% of 2 stages (the load is not the bound). gluon-overlap at D = 64: +5-15% (its tiles
are short, so the per-tile wait for dK / dV is a larger share). NaN: none in either.
"""
import sys
import time
import traceback
from collections import defaultdict

import torch

import flashtriton
from flashtriton import reference
from flashtriton.bench.common import time_ms
from flashtriton.kernels.bwd_gluon import DEFAULT_CONFIG, attn_bwd_dkdv_gluon_kernel
from flashtriton.launchers import backward_gluon
from flashtriton.launchers import forward as lib_forward
from flashtriton.launchers.common import AttnParams

TOKENS, DTYPE = 16384, torch.bfloat16
HEADS = {128: 16, 64: 32}


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def make_inputs(d, b, nq, nk, h, hk, causal, seed=0):
    """q, k, v, dout, out, lse (the library's forward), delta (its preprocess), scale."""
    torch.manual_seed(seed)
    q = torch.randn(b, nq, h, d, device="cuda", dtype=DTYPE)
    k, v = (torch.randn(b, nk, hk, d, device="cuda", dtype=DTYPE) for _ in range(2))
    dout = torch.randn_like(q)
    scale = d ** -0.5
    out, lse = lib_forward.fwd(q, k, v, AttnParams(scale, window_right=0 if causal else -1))
    delta = backward_gluon.delta_of(out, dout)
    return q, k, v, dout, out, lse, delta, scale


def library_grad(q, k, v, dout, causal):
    """grad() = the library's dq, dk, dv by autograd (forward once, graph kept)."""
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    out = flashtriton.flash_attn_func(qg, kg, vg, causal=causal)
    return lambda: torch.autograd.grad(out, (qg, kg, vg), dout, retain_graph=True)


def check_one_head(q, k, v, dout, dk, dv, scale, causal):
    """(ok, text): batch 0, KV head 0 (its query heads 0 .. group-1) against float64."""
    group = q.shape[2] // k.shape[2]
    args = [q[:1, :, :group], k[:1, :, :1], v[:1, :, :1]]
    kw = dict(softmax_scale=scale, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout[:1, :, :group].double(), *(t.double() for t in args), **kw)
    lowp = reference.attention_grad(dout[:1, :, :group], *args, **kw)
    res, ok = [], True
    for name, ours, i in (("dk", dk, 1), ("dv", dv, 2)):
        o = ours[:1, :, :1].double()
        err = (o - truth[i]).abs().max().item()
        base = (lowp[i].double() - truth[i]).abs().max().item()
        ok = ok and err <= 3 * base + 1e-4
        res.append(f"{name} {err:.1e} (torch {base:.1e})")
    return ok, "f64 err " + ", ".join(res)


def rel_diff(a, b) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30)).item()


def smoke():
    cases = [  # (D, causal, B, Nq, Nk, H, Hk, vec_ptr[, overlap])
        (128, False, 1, 128, 128, 2, 2, True), (128, False, 2, 1024, 1024, 4, 4, True),
        (128, False, 2, 1024, 1024, 8, 2, True), (128, False, 2, 256, 1024, 4, 2, True),
        (128, False, 2, 1024, 256, 4, 2, True), (64, False, 2, 1024, 1024, 8, 2, True),
        (128, False, 2, 1024, 1024, 8, 2, False), (64, False, 2, 1024, 1024, 8, 2, False),
        (128, True, 2, 1024, 1024, 8, 2, True), (128, True, 2, 1024, 2048, 4, 2, True),
        (128, True, 2, 2048, 1024, 4, 2, True), (64, True, 2, 1024, 1024, 8, 2, True),
        (128, True, 2, 1024, 1024, 8, 2, False), (128, False, 4, 4096, 4096, 16, 16, True),
        (64, False, 2, 1024, 1024, 8, 2, True, True), (64, False, 2, 256, 1024, 4, 4, False, True),
    ]
    if LITE:
        # session 24's device budget: one case a compiled variant and the awkward shapes
        cases = [cases[i] for i in (2, 3, 4, 5, 8, 10, 11)]
    for d, causal, b, nq, nk, h, hk, vec_ptr, *rest in cases:
        overlap = bool(rest and rest[0])
        tag = (f"smoke D={d} {'causal' if causal else 'plain'} B={b} {nq}x{nk} H={h}/{hk} "
               f"{'ptr' if vec_ptr else 'tma'} vectors{' overlap' if overlap else ''}")
        try:
            t0 = time.time()
            q, k, v, dout, out, lse, delta, scale = make_inputs(d, b, nq, nk, h, hk, causal)
            # compile first (warmup: no launch), so that a timeout during a compile is not
            # taken for a hang: "launching" is the last line before the kernel runs
            bm, bn, st = DEFAULT_CONFIG[d]
            *_, grid, args, kwargs = backward_gluon._launch_args(q, k, v, dout, lse, delta, scale, causal, bm, bn, st,
                                                                 vec_ptr, overlap)
            attn_bwd_dkdv_gluon_kernel.warmup(*args, grid=grid, **kwargs)
            print(f"{tag}: compiled ({time.time() - t0:.0f} s), launching", flush=True)
            launch = backward_gluon.prepare_dkdv(q, k, v, dout, lse, delta, scale, causal, vec_ptr=vec_ptr,
                                                 overlap=overlap)
            dk, dv = (t.clone() for t in launch())
            torch.cuda.synchronize()
            dk2, dv2 = launch()
            torch.cuda.synchronize()
            nan = int(dk.isnan().sum() + dv.isnan().sum())
            same = torch.equal(dk, dk2) and torch.equal(dv, dv2)
            ok, text = check_one_head(q, k, v, dout, dk, dv, scale, causal)
            _, dk_lib, dv_lib = library_grad(q, k, v, dout, causal)()
            print(f"{tag}: {'ok' if ok and nan == 0 and same else 'WRONG'}, {text}, vs library dk "
                  f"{rel_diff(dk, dk_lib):.1e} dv {rel_diff(dv, dv_lib):.1e} (max rel), NaN {nan}, "
                  f"{'bitwise repeatable' if same else 'NOT REPEATABLE'}", flush=True)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"{tag}: {short(exc)}", flush=True)


def dkdv_us(fn):
    """(us, names, total us) of one call of fn by the torch profiler (10 calls after 3
    warm-ups, as bwd_ab.kernel_profile): the GPU time of the kernels whose name holds "dkdv",
    their names, and the GPU time of all its kernels."""
    per = defaultdict(float)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    for ev in prof.key_averages():
        t = getattr(ev, "self_device_time_total", None)
        per[ev.key] += (t if t is not None else getattr(ev, "self_cuda_time_total", 0)) / 10
    names = [k for k in per if "dkdv" in k and per[k] > 0]
    return sum(per[k] for k in names), names, sum(per.values())


def case(d, n, causal):
    h = HEADS[d]
    b = max(1, TOKENS // n)
    q, k, v, dout, out, lse, delta, scale = make_inputs(d, b, n, n, h, h, causal)
    flops = 4 * 2 * b * h * n * n * d / (2 if causal else 1)
    calls = {"gluon": backward_gluon.prepare_dkdv(q, k, v, dout, lse, delta, scale, causal, vec_ptr=True)}
    if not QUICK:
        calls["gluon-tma"] = backward_gluon.prepare_dkdv(q, k, v, dout, lse, delta, scale, causal, vec_ptr=False)
    if QUICK:
        pass
    elif d == 64 and not causal:
        calls["gluon-overlap"] = backward_gluon.prepare_dkdv(q, k, v, dout, lse, delta, scale, overlap=True)
    if d == 128 and not causal:
        calls["gluon-3st"] = backward_gluon.prepare_dkdv(q, k, v, dout, lse, delta, scale, num_stages=3)
    grad = library_grad(q, k, v, dout, causal)
    outs = {name: tuple(t.clone() for t in fn()) for name, fn in calls.items()}
    _, dk_lib, dv_lib = grad()
    torch.cuda.synchronize()
    notes = []
    for name, (dk, dv) in outs.items():
        ok, text = check_one_head(q, k, v, dout, dk, dv, scale, causal)
        nan = int(dk.isnan().sum() + dv.isnan().sum())
        notes.append(f"{name} {'ok' if ok and nan == 0 else 'WRONG'} ({text}; vs library dk "
                     f"{rel_diff(dk, dk_lib):.1e} dv {rel_diff(dv, dv_lib):.1e}; NaN {nan})")
    names = list(calls) + ["library dK/dV"]
    res = {nm: [] for nm in names}
    prof = {nm: [] for nm in calls}
    lib_names, lib_total, lib_ms = [], [], []
    for rnd in range(2):
        for name in (names if rnd == 0 else names[::-1]):
            if name in calls:
                ms = time_ms(calls[name], "cuda")
                us = dkdv_us(calls[name])[0] if not QUICK else ms * 1e3
                res[name].append(flops / ms / 1e9)
                prof[name].append(flops / us / 1e6)
            else:
                us, lib_names, total = dkdv_us(grad)
                res[name].append(flops / us / 1e6)
                lib_total.append(total)
                lib_ms.append(time_ms(grad, "cuda"))
    fmt = lambda xs: " / ".join(f"{x:.0f}" for x in xs)  # noqa: E731
    print(f"D={d} {'causal' if causal else 'non-causal'} N={n} B={b} H={h}, dK/dV TFLOP/s (two rounds): "
          + "  ".join(f"{nm} {fmt(res[nm])}" + (f" [profiler {fmt(prof[nm])}]" if nm in prof else "")
                      for nm in names), flush=True)
    print(f"    library dK/dV kernels: {', '.join(nm[:60] for nm in lib_names) or 'NONE FOUND'}; whole library "
          f"backward {fmt(lib_ms)} ms (time_ms), GPU time {fmt(lib_total)} us (profiler)", flush=True)
    for note in notes:
        print(f"    {note}", flush=True)


def nan_stress(calls=200):
    d, n = 128, 16384
    q, k, v, dout, out, lse, delta, scale = make_inputs(d, 1, n, n, HEADS[d], HEADS[d], False)
    for vec_ptr in (True, False):
        launch = backward_gluon.prepare_dkdv(q, k, v, dout, lse, delta, scale, vec_ptr=vec_ptr)
        ref = tuple(t.clone() for t in launch())
        bad = differ = 0
        for _ in range(calls):
            dk, dv = launch()
            bad += int(bool(dk.isnan().any() or dv.isnan().any()))
            differ += int(not (torch.equal(dk, ref[0]) and torch.equal(dv, ref[1])))
        print(f"NaN stress D={d} N={n} {'ptr' if vec_ptr else 'tma'} vectors: {bad} / {calls} calls with NaN, "
              f"{differ} not bitwise equal to the first", flush=True)


def run_cases(cases):
    """case() on each (D, N, causal); a failing case is printed and the next one runs."""
    for d, n, causal in cases:
        try:
            case(d, n, causal)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"D={d} {'causal' if causal else 'non-causal'} N={n}: {short(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()


def ab():
    run_cases([(d, n, causal) for causal in (False, True) for d in (128, 64) for n in (1024, 4096, 16384)])
    try:
        nan_stress()
    except Exception as exc:  # noqa: BLE001
        print(f"NaN stress: {short(exc)}", flush=True)


QUICK = False
LITE = False


def quick():
    """Session 24's device budget (~1.5 min): the default variant only, time_ms alone for it
    (the profiler column repeats it), four shapes, no NaN stress."""
    global QUICK
    QUICK = True
    run_cases([(128, 4096, False), (128, 16384, False), (128, 16384, True), (64, 16384, False)])


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "smoke"
    if mode == "smoke":
        smoke()
    elif mode == "smoke-lite":
        LITE = True
        smoke()
    elif mode == "quick":
        quick()
    elif mode == "ab":
        ab()
    else:
        print(f"unknown mode {mode!r}: smoke, quick or ab")
