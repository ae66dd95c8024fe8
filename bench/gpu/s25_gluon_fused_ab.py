"""Session 25: the FUSED Gluon backward (kernels/bwd_gluon_fused.py: dK / dV and dQ in one
kernel, dQ reduce-added in fp32 by TMA; host launchers/backward_gluon.prepare_fused;
written and compiled offline in session 25, never run, not routed) on the H200: first
whether it is right and does not hang, then the whole backward against the library's and
cuDNN's.

    PYTHONPATH=src timeout 240 python bench/gpu/s25_gluon_fused_ab.py smoke   # first: a hang = barrier bug
    PYTHONPATH=src timeout 180 python bench/gpu/s25_gluon_fused_ab.py quick   # ~90 s: 4 shapes
    PYTHONPATH=src timeout 900 python bench/gpu/s25_gluon_fused_ab.py ab      # the A/B (~6-10 min)

smoke: 16 small calls (D 128 / 64, bf16 / fp16, GQA, Nq != Nk both ways, one ring tile a
head, 1-2 stages, ROTATE off, causal incl. rows that see no key), each printed as one line, never raising: the
kernel is compiled first (warmup, no launch), then "launching" is printed (flushed), so a
hang shows as that line being the last. Then: float64 check of dq, dk, dv on batch 0,
KV head 0 and its group of query heads (error <= 3x PyTorch's same-dtype error, the tests'
criterion); dk / dv bitwise against the dK/dV kernel (backward_gluon.dkdv_gluon, same sums
in the same order); dq against the library's (flash_attn_func + autograd, max difference
relative to max |dq|); NaN count; a second launch: dk / dv bitwise equal, dq within 1e-2
relative (non-deterministic order; 2x would mean dq_accum was not zeroed).

ab: bf16, 16k tokens (B = 16k / N), H = 16 at D = 128 and H = 32 at D = 64, N in {1k, 4k,
16k}, non-causal then causal (Nq = Nk: the library's bottom-right mask is cuDNN's
is_causal). The same inputs (the library's
forward: out, lse) for three whole backwards, two rounds in alternating order, each timed
by flashtriton.bench.common.time_ms (do_bench median, L2 flushed):
  - fused: backward_gluon.delta_of (the library's preprocess kernel) + launch() of one
    prepare_fused (zero dq_accum, the fused kernel, the fp32 -> bf16 copy_);
  - library: flash_attn_func's backward through torch.autograd.grad (retain_graph; launch
    plans on, as users run it): preprocess + dK/dV kernel + dQ kernel;
  - cudnn: torch SDPA under sdpa_kernel(SDPBackend.CUDNN_ATTENTION), its backward through
    torch.autograd.grad on (B, H, N, D) views of the same tensors.
TFLOP/s by the FA2 count, 2.5 x 4 x B x H x N^2 x D (5 matmuls of 2 B H N^2 D), halved
if causal. Besides (ab, not quick): the torch-profiler GPU time of each kernel of one fused
backward (kernel / memset / copy / preprocess), and fused-norot (ROTATE off) at 16k
non-causal. quick: D = 128 non-causal 16k and 4k, causal 16k, D = 64 non-causal 16k. Then each
shape's float64 check of one head and the dq difference from the library.

Offline (bench/gluon_bwd_compile.py --fused, sm_90a, 2026-12-01): 12 warps, setmaxnreg
240 / 240 / 24, 0 spills at D = 128 (2 stages) and 64 (4 stages), bf16 and fp16, also
through the JIT binder with the launcher's own arguments (--fused --jit); causal: 0 at
D = 64, 8 bytes at D = 128 (one STL / LDL a thread a CTA in the epilogue, the tile loop
spill-free); 193 / 145 KB of
shared memory; HGMMA 64 (D = 128) / 48 (D = 64) a kernel; one
cp.reduce.async.bulk.tensor.2d...add per consumer tile (issued by D / 32 warps, one box
of 64 x 16 fp32 each). ROTATE off: 8 (table) / 20 (JIT) spill bytes at D = 128.

Run time (estimate): smoke ~2-3 min (compiles: ~8 fused variants ~15-30 s each, the
dK/dV kernel, the library's kernels); quick ~70-100 s; ab ~6-10 min.

Prediction (written before any run). Per (query tile, key block) the CTA runs 5 wgmma of
64 x 64 x 128-equivalent per consumer (S^T, dP^T, dV, dK, dQ): 10.5 MFLOP at D = 128,
~2.6k cycles of the SM's ~4k dense bf16 FLOP/cycle, against ~200 cycles a consumer of
exp2 / FMA / conversion / staging work. New costs against the dK/dV kernel (~600 TFLOP/s
of its 4 matmuls at 16k in session 24): the cross-WG ds_ready wait a tile (the WGs run the
ring in step anyway), the dS^T store (stmatrix, 8 KB a WG) and the fp32 staging store (16
KB a WG at D = 128, 64-byte swizzle: some bank conflicts), and 17 GB of L2 reduce traffic
a backward at 16k (1.9 TB/s over ~9 ms; ROTATE spreads the ~128 resident key blocks of a
head over different query rows). Expected, non-causal D = 128: fused 16k 9.0-10.5 ms
(520-610 TFLOP/s) against the library's 12.3 ms (447) and cuDNN's ~10.2 ms (539):
level to +13% over cuDNN, +17-37% over the library; 4k about the same rate; 1k 430-520
(16 tiles a CTA: the K / V load and epilogue weigh more). D = 64: half the FLOPs a tile
for the same exp2 and barrier work: 380-470 at 4k / 16k, vs the library's ~350-400.
The zero + copy of dq_accum: ~0.1 ms at 16k (128 MB memset, 128 MB read + 64 MB write),
~1% of the total. fused-norot: 0-10% slower than fused (same-row reduce contention).
Causal D = 128 (FLOPs halved): fused 0.85-0.95x its non-causal rate (the diagonal tile
masked, the upper WG's first tile computed for nothing, per-head tile counts varying
across CTAs: the last key blocks see few tiles, a tail), 450-560 TFLOP/s at 16k, against
the library's and cuDNN's causal backward (measured alongside; not predicted here).
"""
import sys
import time
import traceback
from collections import defaultdict

import torch

import flashtriton
from flashtriton import reference
from flashtriton.bench.common import time_ms
from flashtriton.kernels.bwd_gluon_fused import FUSED_CONFIG, attn_bwd_fused_gluon_kernel
from flashtriton.launchers import backward_gluon
from flashtriton.launchers import forward as lib_forward
from flashtriton.launchers.common import AttnParams

TOKENS = 16384
HEADS = {128: 16, 64: 32}


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def make_inputs(d, b, nq, nk, h, hk, dtype=torch.bfloat16, causal=False, seed=0):
    """q, k, v, dout, out, lse (the library's forward), delta (its preprocess), scale."""
    torch.manual_seed(seed)
    q = torch.randn(b, nq, h, d, device="cuda", dtype=dtype)
    k, v = (torch.randn(b, nk, hk, d, device="cuda", dtype=dtype) for _ in range(2))
    dout = torch.randn_like(q)
    scale = d ** -0.5
    out, lse = lib_forward.fwd(q, k, v, AttnParams(scale, window_right=0 if causal else -1))
    delta = backward_gluon.delta_of(out, dout)
    return q, k, v, dout, out, lse, delta, scale


def library_grad(q, k, v, dout, causal=False):
    """grad() = the library's dq, dk, dv by autograd (forward once, graph kept)."""
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    out = flashtriton.flash_attn_func(qg, kg, vg, causal=causal)
    return lambda: torch.autograd.grad(out, (qg, kg, vg), dout, retain_graph=True)


def cudnn_grad(q, k, v, dout, causal=False):
    """grad() = cuDNN's dq, dk, dv (torch SDPA, CUDNN_ATTENTION) on (B, H, N, D) views
    (causal: is_causal, top-left, the same mask as the library's when Nq = Nk)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(qg.transpose(1, 2), kg.transpose(1, 2), vg.transpose(1, 2),
                                             is_causal=causal)
    dout_t = dout.transpose(1, 2)

    def grad():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.autograd.grad(out, (qg, kg, vg), dout_t, retain_graph=True)
    return grad


def check_one_head(q, k, v, dout, grads, scale, causal=False):
    """(ok, text): batch 0, KV head 0 (its query heads 0 .. group-1) against float64."""
    group = q.shape[2] // k.shape[2]
    args = [q[:1, :, :group], k[:1, :, :1], v[:1, :, :1]]
    kw = dict(softmax_scale=scale, window_right=0 if causal else -1)
    truth = reference.attention_grad(dout[:1, :, :group].double(), *(t.double() for t in args), **kw)
    lowp = reference.attention_grad(dout[:1, :, :group], *args, **kw)
    res, ok = [], True
    for i, (name, ours) in enumerate(zip(("dq", "dk", "dv"), grads)):
        o = (ours[:1, :, :group] if i == 0 else ours[:1, :, :1]).double()
        err = (o - truth[i]).abs().max().item()
        base = (lowp[i].double() - truth[i]).abs().max().item()
        ok = ok and err <= 3 * base + 1e-4
        res.append(f"{name} {err:.1e} (torch {base:.1e})")
    return ok, "f64 err " + ", ".join(res)


def rel_diff(a, b) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30)).item()


def smoke():
    cases = [  # (D, dtype, causal, B, Nq, Nk, H, Hk[, num_stages, rotate])
        (128, torch.bfloat16, False, 1, 128, 128, 2, 2), (128, torch.bfloat16, False, 2, 1024, 1024, 8, 2),
        (128, torch.float16, False, 2, 1024, 1024, 4, 4), (128, torch.bfloat16, False, 2, 256, 1024, 4, 2),
        (128, torch.bfloat16, False, 2, 1024, 256, 4, 2), (128, torch.bfloat16, False, 2, 64, 512, 6, 1),
        (64, torch.bfloat16, False, 2, 1024, 1024, 8, 2), (64, torch.float16, False, 2, 192, 384, 4, 4),
        (128, torch.bfloat16, False, 1, 320, 256, 6, 2, 1, True), (64, torch.bfloat16, False, 1, 320, 256, 6, 2, 2, True),
        (128, torch.bfloat16, False, 2, 1024, 1024, 8, 2, None, False),
        (128, torch.bfloat16, True, 2, 1024, 1024, 8, 2), (128, torch.bfloat16, True, 2, 2048, 1024, 4, 2),
        (128, torch.bfloat16, True, 2, 256, 1024, 4, 4), (64, torch.bfloat16, True, 2, 1024, 1024, 8, 2),
        (128, torch.bfloat16, False, 4, 4096, 4096, 16, 16),
    ]
    for d, dtype, causal, b, nq, nk, h, hk, *rest in cases:
        stages = rest[0] if rest else None
        rotate = rest[1] if len(rest) > 1 else True
        tag = (f"smoke D={d} {str(dtype).split('.')[-1]} {'causal' if causal else 'plain'} B={b} {nq}x{nk} "
               f"H={h}/{hk} stages={stages or 'default'}{'' if rotate else ' norot'}")
        try:
            t0 = time.time()
            q, k, v, dout, out, lse, delta, scale = make_inputs(d, b, nq, nk, h, hk, dtype, causal)
            # compile first (warmup: no launch), so that a timeout during a compile is not
            # taken for a hang: "launching" is the last line before the kernel runs
            bm, bn, st = FUSED_CONFIG[d]
            *_, grid, args, kwargs = backward_gluon._fused_launch_args(q, k, v, dout, lse, delta, scale, bm, bn,
                                                                        stages or st, rotate, causal)
            attn_bwd_fused_gluon_kernel.warmup(*args, grid=grid, **kwargs)
            print(f"{tag}: compiled ({time.time() - t0:.0f} s), launching", flush=True)
            launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal, num_stages=stages,
                                                  rotate=rotate)
            dq, dk, dv = (t.clone() for t in launch())
            torch.cuda.synchronize()
            dq2, dk2, dv2 = launch()
            torch.cuda.synchronize()
            nan = int(dq.isnan().sum() + dk.isnan().sum() + dv.isnan().sum())
            same = torch.equal(dk, dk2) and torch.equal(dv, dv2) and rel_diff(dq2, dq) <= 1e-2
            ok, text = check_one_head(q, k, v, dout, (dq, dk, dv), scale, causal)
            dk_ref, dv_ref = backward_gluon.dkdv_gluon(q, k, v, dout, lse, delta, scale, causal)
            bitwise = torch.equal(dk, dk_ref) and torch.equal(dv, dv_ref)
            dq_lib = library_grad(q, k, v, dout, causal)()[0]
            print(f"{tag}: {'ok' if ok and nan == 0 and same else 'WRONG'}, {text}, dk/dv "
                  f"{'bitwise = dkdv kernel' if bitwise else 'DIFFER from dkdv kernel (%.1e)' % rel_diff(dk, dk_ref)}"
                  f", dq vs library {rel_diff(dq, dq_lib):.1e} (max rel), NaN {nan}, second launch "
                  f"{'same' if same else 'DIFFERS (dq rel %.1e)' % rel_diff(dq2, dq)}", flush=True)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"{tag}: {short(exc)}", flush=True)


def kernel_us(fn):
    """{kernel name: GPU us per call} of fn by the torch profiler (10 calls after 3 warm-ups)."""
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
    return {k: v for k, v in per.items() if v > 0}


def case(d, n, causal=False, extra=True):
    h = HEADS[d]
    b = max(1, TOKENS // n)
    q, k, v, dout, out, lse, delta, scale = make_inputs(d, b, n, n, h, h, causal=causal)
    flops = 2.5 * 4 * b * h * n * n * d / (2 if causal else 1)
    launch = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, causal)

    def fused():
        backward_gluon.delta_of(out, dout)            # the preprocess is part of the backward
        return launch()
    calls = {"fused": fused, "library": library_grad(q, k, v, dout, causal)}
    try:
        calls["cudnn"] = cudnn_grad(q, k, v, dout, causal)
        calls["cudnn"]()
    except Exception as exc:  # noqa: BLE001
        calls.pop("cudnn", None)
        print(f"    cudnn unavailable: {short(exc)}", flush=True)
    if extra and n == 16384 and not causal:
        launch_nr = backward_gluon.prepare_fused(q, k, v, dout, lse, delta, scale, rotate=False)
        calls["fused-norot"] = lambda: (backward_gluon.delta_of(out, dout), launch_nr())
    outs = {"fused": tuple(t.clone() for t in launch())}
    lib = calls["library"]()
    torch.cuda.synchronize()
    names = list(calls)
    ms = {nm: [] for nm in names}
    for rnd in range(2):
        for nm in (names if rnd == 0 else names[::-1]):
            ms[nm].append(time_ms(calls[nm], "cuda"))
    fmt = lambda xs: " / ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    tf = lambda xs: " / ".join(f"{flops / x / 1e9:.0f}" for x in xs)  # noqa: E731
    print(f"D={d} {'causal' if causal else 'non-causal'} N={n} B={b} H={h}, whole backward ms (TFLOP/s, FA2 count), two rounds: "
          + "  ".join(f"{nm} {fmt(ms[nm])} ({tf(ms[nm])})" for nm in names), flush=True)
    best = {nm: min(v) for nm, v in ms.items()}
    if "cudnn" in best:
        print(f"    fused vs library {best['library'] / best['fused']:.3f}x, vs cudnn {best['cudnn'] / best['fused']:.3f}x"
              " (best of rounds; > 1: fused faster)", flush=True)
    if extra:
        per = kernel_us(fused)
        print("    fused backward's kernels (profiler, us a call): "
              + ", ".join(f"{k[:50]} {v:.0f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])), flush=True)
    ok, text = check_one_head(q, k, v, dout, outs["fused"], scale, causal)
    nan = sum(int(t.isnan().sum()) for t in outs["fused"])
    print(f"    fused {'ok' if ok and nan == 0 else 'WRONG'} ({text}; vs library dq {rel_diff(outs['fused'][0], lib[0]):.1e}"
          f" dk {rel_diff(outs['fused'][1], lib[1]):.1e} dv {rel_diff(outs['fused'][2], lib[2]):.1e}; NaN {nan})",
          flush=True)


def ab():
    for causal in (False, True):
        for d in (128, 64):
            for n in (1024, 4096, 16384):
                try:
                    case(d, n, causal)
                except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                    print(f"D={d} {'causal' if causal else 'non-causal'} N={n}: {short(exc)}", flush=True)
                    traceback.print_exc()
                torch.cuda.empty_cache()


def quick():
    """~90 s: four shapes, no profiler, no norot."""
    for d, n, causal in ((128, 16384, False), (128, 4096, False), (128, 16384, True), (64, 16384, False)):
        try:
            case(d, n, causal, extra=False)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"D={d} N={n}: {short(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()


def shapes(specs):
    """The listed shapes, each 'D:N:causal' (causal 0 / 1), no profiler, no norot: the
    routing thresholds (session 25)."""
    for spec in specs:
        d, n, causal = (int(x) for x in spec.split(":"))
        try:
            case(d, n, bool(causal), extra=False)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"D={d} N={n} causal={causal}: {short(exc)}", flush=True)
            traceback.print_exc()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "smoke"
    if mode == "shapes":
        shapes(sys.argv[2:])
    elif mode == "smoke":
        smoke()
    elif mode == "quick":
        quick()
    elif mode == "ab":
        ab()
    else:
        print(f"unknown mode {mode!r}: smoke, quick or ab")
