"""Session 33: WG_S schedule switches of the fused Gluon backward at head dim 256
(kernels/bwd_gluon_d256.py, routed as V1 in session 32: 0.87-0.93x cuDNN) against V1 and cuDNN,
plus two timing-only probes that say what binds. Written offline by a session-32 helper
(bench/wip/gluon-bwd-d256-opt.md); NEVER RUN yet.

    PYTHONPATH=src timeout 240 python bench/gpu/s33_gluon_bwd_d256_opt_ab.py    # < 150 s expected
    PYTHONPATH=src python bench/gpu/s33_gluon_bwd_d256_opt_ab.py smoke pers      # one smoke step (~15 s)
    S33_CASES=4096,c16384 ... to shorten (c: causal); S33_SKIP=defer,probe-nodq,cudnn to drop columns;
    S33_EXTRA=pipe,rs,pipe-only,pe-only,early to add attribution columns.

Columns (prepare / bwd_into keywords; all default off, so v1 is the routed kernel, its SASS
byte-identical before / after the patch):
  v1     the routed kernel. WG_S a tile: S^T + dP^T issued, S^T waited, lse converted (st.shared,
         bar.sync, ld.shared), then dP^T waited with 30 of the 32 MUFU.EX2 sunk below that wait by
         ptxas (the exponentials do not run under dP^T's 512 tensor cycles), delta converted, P^T /
         dS^T stored, then 4 serial dQ chunk rounds (wgmma, wait(0), store_wait, bar, 16 STS.64,
         fence, bar, TMA reduce), each re-reading dS^T (8 KB) as the SS wgmma's A.
  pe     dq_pipe + vec_early + p_early: chunk c + 1's wgmma issued before chunk c is waited (wait(1))
         and staged; lse / delta converted while S^T / dP^T run; the exponentials and P^T's store
         before dP^T's wait (all 32 EX2 there; pds_free's wait moves up with them).
  pers   pe + dq_rs: dS loaded once a tile into registers (4 ldmatrix.trans, 16 registers) as the A
         of all four dQ chunk wgmmas (RS): 24 KB a tile less shared-memory reads (496 -> 472 KB).
  defer  dq_defer + dq_pipe + vec_early (design note 2b within the one P^T / dS^T buffer): dQ(g - 1)
         after S^T / dP^T(g) and tile g's softmax, so S^T / dP^T(g) reach the tensor pipe ahead of
         dK / dV(g - 1) (tests the pipe's arbitration: helps if FIFO across warps, not if fair).
  probe-noreduce  pers with the 4 TMA reduces a tile dropped (staging kept): TIMING ONLY, dq wrong
         (dk / dv still bitwise v1's). pers -> probe-noreduce = the cost of the L2 reduce-adds and
         of waiting for their reads of the staging.
  probe-nodq      pers with no dQ at all (WG_S: S^T, dP^T, softmax, P^T / dS^T): TIMING ONLY, the
         upper bound of any dQ-side change. (Probes at plain 4k / 16k only.)
  cudnn  SDPA CUDNN_ATTENTION forward + backward captured together minus the forward.
  (S33_EXTRA: pipe = dq_pipe + vec_early, rs = dq_rs alone, pipe-only, pe-only (p_early), early (vec_early).)

Order (a hang must cost seconds): 1. smoke: one subprocess a variant, all started at once (their
compiles in parallel), each killed S33_SMOKE_TIMEOUT (60 s) after the start: B = 2, N = 128, H = 2,
plain and causal, whole dq / dk / dv against float64 (<= 3x PyTorch's bf16 error, finite; a
probe's dq skipped) and dk / dv bitwise v1's; a variant that fails or hangs loses its column (v1:
exit 2). 2. per case (faulthandler watchdog S33_CASE_TIMEOUT, 60 s, the first 120 s): batch 0 /
head 0 against float64, dk / dv bitwise v1's over the whole tensors, dq's max |diff| / max |v1|.
3. two timing rounds (the second reversed), CUDA-graph replays, L2 flushed: each Gluon column =
delta preprocess + zero + kernel + cast (bwd_into, what the route launches). TFLOP/s by
attention_flops(..., "bwd"). bf16, H = 8, 16k tokens.

Offline (bench/d256_bwd_gluon_compile.py, sm_90a, Triton 3.6.0; bench/wip/gluon-bwd-d256-opt.md has
the table): v1 / pe / pers / defer, plain and causal, bf16 and fp16: 0 spills, no local memory,
229,752 B of shared memory, setmaxnreg 168 / 160 / 160 / 24, no wgmma-serialisation advisory, 4
UTMAREDG a tile; WG_0 / WG_1's tile loops unchanged (61 / 63 instructions, 8 HGMMA).

PREDICTION (written before any run). Measured v1 (session 32, bf16, 16k tokens): 277 / 306 / 319 /
331-337 TFLOP/s at 1k / 2k / 4k / 16k, causal 267 / 293-299 / 336-342 at 2k / 4k / 16k; cuDNN 301 /
347 / 372 / 359-361, causal 301 / 345 / 376-378. A tile (64 x 64, 2560 tensor cycles) takes ~4.2 us
= ~7,400 cycles at 16k (at ~1.75 GHz): the tensor pipe is ~35% busy. WG_S's chain as counted from
the SASS is ~4,200 cycles a tile (S^T / dP^T ~1,100, softmax ~500 after dP^T's wait, P^T / dS^T
store ~250, 4 dQ rounds ~550 each with dK / dV(g) sharing the pipe); the other ~3,000 are stalls
the count does not see (shared-memory contention stretching the SS wgmmas, the reduce's read of
the staging under L2 back-pressure, late Q / dO). Cycles off WG_S's chain a tile:
  dq_pipe   3 chunk rounds overlap their wgmma (128 tensor cycles + ~100 latency, up to 3x that
            while dK / dV(g) share the pipe) with the previous chunk's staging (~250): -450 .. -750
  vec_early 2 st.shared / bar.sync / ld.shared round trips under S^T / dP^T: -100 .. -160
  p_early   32 EX2 (8 issue cycles each a warp) + ~100 FFMA / FMUL under dP^T's 512 tensor
            cycles: -250 .. -400 (a stall instead if pds_free(g - 1) is late: dK / dV(g - 1) were
            issued a whole dQ phase + S^T / dP^T earlier, so rarely)
  dq_rs     24 KB a tile less shared-memory reads (~190 port cycles) and the dQ wgmmas off the A
            port: -100 .. -250 where shared memory binds, ~0 where not
  defer     0 by count; -0 .. -1,000 if the pipe serves warps FIFO, +0 .. +300 if fairly
  => pe -800 .. -1,300, pers -900 .. -1,550 of ~7,400; as the unexplained stalls do not shrink
  with the chain, ~half of it shows: pe 1.03-1.09x v1, pers 1.04-1.12x v1 (central 1.07x).
  | case | v1 (s32) | pe predicted | pers predicted | defer predicted | cuDNN (s32) |
  | 2k | 306 | 315-335 | 318-342 | 290-330 | 347 |
  | 4k | 319 | 328-348 | 332-357 | 300-345 | 372 |
  | 16k | 331-337 | 341-365 | 345-375 | 315-360 | 359-361 |
  | causal 4k | 293-299 | 302-325 | 305-332 | 280-320 | 345 |
  | causal 16k | 336-342 | 346-370 | 350-380 | 320-365 | 376-378 |
  Central: pers ~1.07x v1 (16k ~356, ~0.99x cuDNN); pe ~1.05x; defer ~1.00x (+-5%).
  Probes (plain 4k / 16k, against pers): probe-noreduce 1.03-1.08x if L2 does not bind, > 1.15x if
  the reduce-adds (L2) bind; probe-nodq 1.35-1.6x (dQ is 1/5 of the FLOPs but ~2,000 of WG_S's
  chain). Wrong if pers <= 1.01x v1 at 4k and 16k: then WG_S's chain does not bind (read the probes:
  noreduce >> pers says L2; next levers then a 2-CTA cluster halving dq reduce bytes through DSMEM
  and Q / dO multicast).
  Gradients: dk / dv bitwise v1's in every column (the same dK / dV wgmmas on the same operands in
  the same order); dq v1's fp32 chunks summed in another order (max |diff| / max |v1| ~1e-3).
ROUTING RULE: route the best of pers / pe (launchers/backward.py's bwd_into call passing its
keywords; or flip the kernel's defaults and re-hash) if it beats v1 by >= 2% in BOTH rounds at 4k
and 16k non-causal, loses nowhere by > 1% (2k, causal) and every smoke / f64 / bitwise check
passes; causal likewise on its own cases (c4096, c16384; the same keywords may be routed for
causal only, or plain only). defer only if it beats the best of pers / pe by >= 2% in both rounds
at 4k and 16k. Otherwise keep v1 and record the numbers and the probes.
"""
import faulthandler
import os
import subprocess
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")       # (graphs replay the launches anyway)

import torch  # noqa: E402

from flashtriton import reference  # noqa: E402
from flashtriton.bench.common import (attention_flops, graph_backward_ms, graph_or_eager_ms,  # noqa: E402
                                      head0_grad_check, head0_grad_refs, short_error)
from flashtriton.launchers import backward_gluon, backward_gluon_d256  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams  # noqa: E402

TOKENS, H, D, DTYPE = 16384, 8, 256, torch.bfloat16
CASES = os.environ.get("S33_CASES", "2048,4096,16384,c4096,c16384").split(",")
SKIP = set(filter(None, os.environ.get("S33_SKIP", "").split(",")))
EXTRA = set(filter(None, os.environ.get("S33_EXTRA", "").split(",")))
SMOKE_TIMEOUT = float(os.environ.get("S33_SMOKE_TIMEOUT", "60"))
CASE_TIMEOUT = float(os.environ.get("S33_CASE_TIMEOUT", "60"))

PE = dict(dq_pipe=True, vec_early=True, p_early=True)
ALL_VARIANTS = {"v1": dict(), "pe": PE, "pers": dict(PE, dq_rs=True),
                "defer": dict(dq_defer=True, dq_pipe=True, vec_early=True),
                # probes: TIMING ONLY (dq wrong; dk / dv still checked bitwise v1's), plain 4k / 16k only
                "probe-noreduce": dict(PE, dq_rs=True, probe=1), "probe-nodq": dict(PE, dq_rs=True, probe=2),
                # S33_EXTRA attribution columns
                "pipe": dict(dq_pipe=True, vec_early=True), "rs": dict(dq_rs=True), "pipe-only": dict(dq_pipe=True),
                "pe-only": dict(p_early=True), "early": dict(vec_early=True)}
DEFAULT = ("v1", "pe", "pers", "defer", "probe-noreduce", "probe-nodq")
VARIANTS = {k: v for k, v in ALL_VARIANTS.items() if k == "v1" or (k not in SKIP and (k in DEFAULT or k in EXTRA))}
PROBES = {k for k in VARIANTS if k.startswith("probe")}
PROBE_CASES = {(4096, False), (16384, False)}


def gluon_bwd(q, k, v, dout, out, lse, causal, variant="v1"):
    """The Gluon backward as the route runs it: delta (the library's preprocess kernel), then zero /
    kernel / cast into fresh dq / dk / dv (bwd_into with VARIANTS' keywords)."""
    delta = backward_gluon.delta_of(out, dout)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    backward_gluon_d256.bwd_into(q, k, v, dout, lse, delta, D ** -0.5, causal, dq, dk, dv, **VARIANTS[variant])
    return dq, dk, dv


def smoke(variant) -> int:
    """Step 1 (a subprocess, one a variant): whole tensors against float64, dk / dv bitwise v1's."""
    print(f"smoke {variant} {torch.cuda.get_device_name()} {time.strftime('%H:%M:%S')}", flush=True)
    bad = 0
    for causal in (False, True):
        tag = f"smoke {variant} causal={causal}"
        try:
            torch.manual_seed(1)
            b, n, h = 2, 128, 2
            q, k, v = (torch.randn(b, n, h, D, device="cuda", dtype=DTYPE) for _ in range(3))
            dout = torch.randn_like(q)
            kw = dict(softmax_scale=D ** -0.5, window_right=0 if causal else -1)
            out64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **kw)
            truth = reference.attention_grad(dout.double(), *(t.double() for t in (q, k, v)), **kw)
            lowp = reference.attention_grad(dout, q, k, v, **kw)
            t0 = time.time()
            out, lse = out64.to(DTYPE), lse64.float().contiguous()
            g = gluon_bwd(q, k, v, dout, out, lse, causal, variant)
            torch.cuda.synchronize()
            ok, res = True, []
            for i, name in enumerate(("dq", "dk", "dv")):
                if variant in PROBES and name == "dq":
                    continue                                   # (a probe's dq is wrong by design)
                err = (g[i].double() - truth[i]).abs().max().item()
                base = (lowp[i].double() - truth[i]).abs().max().item()
                good = bool(torch.isfinite(g[i]).all().item()) and err <= 3 * base + 1e-4
                ok = ok and good
                res.append(f"{name} {err:.1e} (torch {base:.1e}){'' if good else ' WRONG'}")
            if variant != "v1":
                g1 = gluon_bwd(q, k, v, dout, out, lse, causal, "v1")
                same = torch.equal(g[1], g1[1]) and torch.equal(g[2], g1[2])
                ok = ok and same
                res.append("dk / dv bitwise v1's" if same else "dk / dv DIFFER from v1")
            print(f"{tag}: {'SMOKE-OK' if ok else 'SMOKE-FAIL'} ({time.time() - t0:.1f} s incl. compile) "
                  f"{', '.join(res)}", flush=True)
            bad += not ok
        except Exception as exc:  # noqa: BLE001  (reported)
            print(f"{tag}: SMOKE-FAIL {short_error(exc)}", flush=True)
            traceback.print_exc(limit=4)
            bad += 1
    return bad


def run_smokes() -> dict:
    """{variant: {causal: passed}}: every variant's smoke subprocess started AT ONCE (their Gluon
    compiles run in parallel on the host's cores; the launches are tiny), each killed after
    SMOKE_TIMEOUT. A timeout (a hang) or failure of v1: exit 2; of another variant: its column goes."""
    t0 = time.time()
    procs = {v: subprocess.Popen([sys.executable, os.path.abspath(__file__), "smoke", v], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=dict(os.environ)) for v in VARIANTS}
    ok = {}
    for v, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=max(SMOKE_TIMEOUT - (time.time() - t0), 1))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            print(f"SMOKE {v} TIMED OUT after {SMOKE_TIMEOUT:.0f} s (a barrier deadlock?); output so far:\n{out}",
                  flush=True)
            ok[v] = {False: False, True: False}
        else:
            print(out + err[-3000:], flush=True)
            ok[v] = {c: f"smoke {v} causal={c}: SMOKE-OK" in out for c in (False, True)}
    print(f"smokes done in {time.time() - t0:.0f} s: {ok}", flush=True)
    if not all(ok["v1"].values()):
        print("v1 smoke failed or hung: stop", flush=True)
        sys.exit(2)
    return ok


def params(causal) -> AttnParams:
    return AttnParams(D ** -0.5, window_right=0 if causal else -1, deterministic=False)


def inputs(n, causal, seed=0):
    torch.manual_seed(seed)
    b = TOKENS // n
    q, k, v = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))
    dout = torch.randn_like(q)
    out, lse = lib_forward.fwd(q, k, v, params(causal))
    return q, k, v, dout, out, lse


def cudnn_ms(q, k, v, dout, causal) -> float:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))

    def fwd():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=D ** -0.5)

    return graph_backward_ms(fwd, (qt, kt, vt), dout.transpose(1, 2))


def check(n, causal, ok_smoke) -> dict:
    """{variant: passed}: batch 0 / head 0 against float64 (finite everywhere), dk / dv bitwise v1's
    over the whole tensors (variants other than v1), dq's max |diff| / max |v1| printed."""
    tag = f"check N={n}{' causal' if causal else ''}"
    q, k, v, dout, out, lse = inputs(n, causal)
    refs = head0_grad_refs(q, k, v, dout, softmax_scale=D ** -0.5, window_right=0 if causal else -1)
    good, g1 = {}, None
    for variant in VARIANTS:
        good[variant] = False
        if not ok_smoke[variant][causal] or (variant in PROBES and (n, causal) not in PROBE_CASES):
            continue
        try:
            t0 = time.time()
            g = gluon_bwd(q, k, v, dout, out, lse, causal, variant)
            torch.cuda.synchronize()
            good[variant], text = head0_grad_check(g, refs)
            if variant in PROBES:
                good[variant], text = True, "(probe: dq not checked)"
            if variant == "v1":
                g1 = g
            elif g1 is not None:
                same = torch.equal(g[1], g1[1]) and torch.equal(g[2], g1[2])
                rel = ((g[0].float() - g1[0].float()).abs().max() / g1[0].float().abs().max()).item()
                text += f"; dk / dv {'bitwise v1' if same else 'DIFFER from v1'}, dq vs v1 {rel:.1e}"
                good[variant] = good[variant] and same
            print(f"{tag} {variant}: {'ok' if good[variant] else 'FAILED'} ({time.time() - t0:.1f} s) {text}",
                  flush=True)
            if variant != "v1":
                del g
        except Exception as exc:  # noqa: BLE001
            print(f"{tag} {variant}: ERROR {short_error(exc)}", flush=True)
            traceback.print_exc(limit=4)
            good[variant] = False
    del q, k, v, dout, out, lse, refs, g1
    torch.cuda.empty_cache()
    return good


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "smoke":
        sys.exit(1 if smoke(sys.argv[2] if len(sys.argv) > 2 else "v1") else 0)
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; variants {list(VARIANTS)}", flush=True)
    ok_smoke = run_smokes()
    cases = [(int(c[1:]) if c.startswith("c") else int(c), c.startswith("c")) for c in CASES]
    good = {}
    for i, (n, causal) in enumerate(cases):
        faulthandler.dump_traceback_later(CASE_TIMEOUT * (2 if i == 0 else 1), exit=True)
        try:
            good[(n, causal)] = check(n, causal, ok_smoke)
        except Exception as exc:  # noqa: BLE001
            print(f"check N={n} causal={causal}: ERROR {short_error(exc)}", flush=True)
            good[(n, causal)] = {}
        faulthandler.cancel_dump_traceback_later()
    print(f"checks done at {time.time() - t0:.0f} s", flush=True)
    names = [*VARIANTS] + ([] if "cudnn" in SKIP else ["cudnn"])
    rows = {}
    for rnd in range(2):
        for n, causal in (cases if rnd == 0 else cases[::-1]):
            faulthandler.dump_traceback_later(CASE_TIMEOUT, exit=True)
            inp = inputs(n, causal)
            q, k, v, dout, out, lse = inp
            flops = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd")
            for name in (names if rnd == 0 else names[::-1]):
                if name in VARIANTS and not good[(n, causal)].get(name):
                    continue
                try:
                    if name == "cudnn":
                        ms, mark = cudnn_ms(q, k, v, dout, causal), ""
                    else:
                        ms, mark = graph_or_eager_ms(lambda: gluon_bwd(q, k, v, dout, out, lse, causal, name))
                    rows.setdefault((n, causal, name), []).append(flops / ms / 1e9)
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: {ms * 1e3:.0f}{mark} us "
                          f"{flops / ms / 1e9:.0f} TFLOP/s ({time.time() - t0:.0f} s)", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: ERROR {short_error(exc)}", flush=True)
            del inp
            torch.cuda.empty_cache()
            faulthandler.cancel_dump_traceback_later()
    print(f"\nD = {D}, H = {H}, bf16, {TOKENS} tokens; TFLOP/s (round 1 / round 2)")
    others = [x for x in VARIANTS if x != "v1"]
    print("| N | causal | B | " + " | ".join(names) + " | " + " | ".join(f"{x} / v1 (min)" for x in others)
          + " | best / cuDNN |")
    print("|---|---|---|" + "---|" * (len(names) + len(others) + 1))

    def ratio(a, b):
        return f"{min(x / y for x, y in zip(a, b)):.3f}x" if a and len(a) == len(b) else "-"

    for n, causal in cases:
        tf = {name: rows.get((n, causal, name), []) for name in names}
        cells = [" / ".join(f"{x:.0f}" for x in tf[name]) or "-" for name in names]
        best = max((x for name in VARIANTS if name not in PROBES for x in tf[name]), default=0)
        vs_cudnn = f"{best / max(tf['cudnn']):.3f}x" if best and tf.get("cudnn") else "-"
        print(f"| {n} | {'yes' if causal else 'no'} | {TOKENS // n} | {' | '.join(cells)} | "
              + " | ".join(ratio(tf[x], tf["v1"]) for x in others) + f" | {vs_cudnn} |", flush=True)
    print(f"total {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
