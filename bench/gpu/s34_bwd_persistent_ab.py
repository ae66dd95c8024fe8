"""Session 34: the fused Gluon backward's PERSISTENT variant at D = 128 (kernels/bwd_gluon_fused.py:
grid min(#SMs, #items), each CTA walking its (key block, batch x KV head) items, ring / ds barriers
phased by a running tile count, K / V reloaded over a kv_free barrier, the next item's first Q / dO
tiles loaded under the current item's dK / dV epilogue; causal heaviest first, snake-dealt; written
and compiled offline by a session-34 helper, never run; not routed: policy.GLUON_BWD_FUSED_PERSISTENT
empty) against the routed fused kernel ("routed": one key block a CTA, grid (Nk / 128, B * Hk)) and
cuDNN, for issue 4 (the D = 128 backward >= 1.0x cuDNN; today 0.94-0.99x).

    PYTHONPATH=src timeout 300 python bench/gpu/s34_bwd_persistent_ab.py          # smoke + checks + A/B, < 150 s
    PYTHONPATH=src python bench/gpu/s34_bwd_persistent_ab.py checks                # smoke + checks only
    (then: PYTHONPATH=src python -m pytest -q -o addopts="" -m gpu tests/test_bwd_gluon_persistent.py)

Steps:
  1. smoke, in a subprocess killed after S34_SMOKE_TIMEOUT (default 60 s; a barrier-phase bug
     hangs the GPU, the parent then exits 2 before timing anything): small shapes through
     backward_gluon.fused_gluon(persistent=True) with programs = 1, 3 and the SM count (many items
     a CTA: every phase wraps across items), plain and causal, Nq != Nk, GQA, whole tensors
     against float64 (<= 3x PyTorch's bf16 error) and dk / dv BITWISE the routed kernel's.
  2. checks (a faulthandler watchdog, S34_CASE_TIMEOUT, default 60 s a case): at S34_CHECK
     (default 2048,c4096) the library's whole backward (launchers.backward.bwd) routed and
     persistent (the launch seen by a spy on backward_gluon._run_fused: PERSISTENT in its
     constexprs or not), batch 0 / head 0 against float64, finite everywhere, dk / dv bitwise
     between the two, dq rel. diff printed. A variant that fails is not timed.
  3. A/B: the whole backward as CUDA-graph replays (bench.common.graph_or_eager_ms; cuDNN by
     graph_backward_ms), two rounds, the second in reverse order, D = 128, bf16, H = 16, 16k
     tokens (B = 16k / N), N = 2k, 4k, 16k plain and 4k, 16k causal (S34_CASES), the fused
     route forced (GLUON_BWD_FUSED_MIN_N = 0), deterministic=False.

Routing rule (the lead's, after this run): set policy.GLUON_BWD_FUSED_PERSISTENT[kind] = {128}
for a kind ("plain" / "causal") only where persistent beats routed by >= 2% in BOTH rounds at every
N measured for that kind (the table is per kind and head dim, not per N).

PREDICTION (written before any run; bench/wip/gluon-bwd-persistent.md). Per-tile time at 8k from
the session-33 profile: 9.51 ms x 132 SMs / 4096 CTAs / 128 tiles a CTA = 2.39 us a 64 x 128 tile
(2.32 us counting the 32 item-lengths the 31.03 waves take). The persistent kernel removes, per
item after a CTA's first, the CTA launch / setmaxnreg / barrier init (~0.5-1 us), the first Q / dO
load latency (prefetched) and most of the K / V reload and dK / dV epilogue (the K / V load runs
under the epilogue, whose stores are waited at the next item's start): ~2-2.5 us of the estimated
2.5-3.5 us fixed cost an item. It does NOT fix the wave quantisation: every case below has 2,048
items = 15.5 an SM, so both kernels run 16 item-lengths on the busiest SMs (~3% lost by both).
Expected (plain): 2k (32 tiles = 77 us an item) +2.5 to +3.5%; 4k (153 us) +1.2 to +1.8%; 16k
(612 us) +0.3 to +0.5%. Causal (the static snake LPT deal against the hardware's dynamic one,
+-1.5%): 4k +1 to +4%, 16k -1 to +2%. The >= 2% rule then likely met at 2k plain (maybe 4k causal)
only; issue 4 (>= 1.0x cuDNN) not closed from 4k by this alone. Wrong if persistent gains >= 3% at
4k / 16k plain (the one-item grid's per-CTA cost larger than estimated).
Offline (bench/gluon_bwd_compile.py --fused --persistent, sm_90a): setmaxnreg 240 / 240 / 24;
D = 128 plain spill 16 B (routed 0), tile loops 487 / 486 instr a warp (483 / 491), no local
access in them; causal 32 B (8), 559 / 559 (556 / 549), one STL / LDL pair a tile in one loop;
shared memory +32 / +48 B (kv_free, epi_bar). The 36 routed variants' SASS byte-identical.
"""
import faulthandler
import os
import subprocess
import sys
import time
import traceback

os.environ.setdefault("FLASHTRITON_PLANS", "0")

import torch  # noqa: E402

from flashtriton import reference  # noqa: E402
from flashtriton.bench.common import (attention_flops, graph_backward_ms, graph_or_eager_ms,  # noqa: E402
                                      head0_grad_check, head0_grad_refs, short_error)
from flashtriton.launchers import backward as lib_backward  # noqa: E402
from flashtriton.launchers import backward_gluon, plans, policy  # noqa: E402
from flashtriton.launchers import forward as lib_forward  # noqa: E402
from flashtriton.launchers.common import AttnParams, sm_count  # noqa: E402

TOKENS, H, D, DTYPE = 16384, 16, 128, torch.bfloat16
CASES = os.environ.get("S34_CASES", "2048,4096,16384,c4096,c16384").split(",")
CHECK = os.environ.get("S34_CHECK", "2048,c4096").split(",")
SMOKE_TIMEOUT = float(os.environ.get("S34_SMOKE_TIMEOUT", "60"))
CASE_TIMEOUT = float(os.environ.get("S34_CASE_TIMEOUT", "60"))
NAMES = ("routed", "persistent")

SEEN = []
_real_run = backward_gluon._run_fused


def _spy(*a, **kw):
    SEEN.append(bool(a[6].get("PERSISTENT", False)))
    return _real_run(*a, **kw)


def case(c):
    return (int(c[1:]) if c.startswith("c") else int(c)), c.startswith("c")


def setting(name, causal):
    kind = "causal" if causal else "plain"
    policy.GLUON_BWD_FUSED_MIN_N[kind][D] = 0
    policy.GLUON_BWD_FUSED_PERSISTENT = {"plain": frozenset(), "causal": frozenset()}
    if name == "persistent":
        policy.GLUON_BWD_FUSED_PERSISTENT[kind] = frozenset({D})
    plans.clear()


def params(causal):
    return AttnParams(D ** -0.5, window_right=0 if causal else -1, deterministic=False)


def inputs(n, causal, seed=0):
    torch.manual_seed(seed)
    b = TOKENS // n
    q, k, v = (torch.randn(b, n, H, D, device="cuda", dtype=DTYPE) for _ in range(3))
    dout = torch.randn_like(q)
    out, lse = lib_forward.fwd(q, k, v, params(causal))
    return q, k, v, dout, out, lse


def smoke() -> int:
    """Step 1 (the subprocess): fused_gluon(persistent=True) at small shapes, whole tensors."""
    print(f"smoke {torch.cuda.get_device_name()} {time.strftime('%H:%M:%S')}", flush=True)
    bad = 0
    shapes = [(2, 256, 256, 4, 4), (1, 128, 640, 4, 2), (2, 384, 128, 6, 1), (1, 1024, 1024, 2, 2)]
    for causal in (False, True):
        for b, nq, nk, h, hk in shapes:
            for programs in (1, 3, None):
                tag = f"smoke causal={causal} B={b} Nq={nq} Nk={nk} H={h} Hk={hk} programs={programs}"
                try:
                    torch.manual_seed(1)
                    q, k, v = (torch.randn(b, n, hh, D, device="cuda", dtype=DTYPE)
                               for n, hh in ((nq, h), (nk, hk), (nk, hk)))
                    dout = torch.randn_like(q)
                    kw = dict(softmax_scale=D ** -0.5, window_right=0 if causal else -1)
                    out64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **kw)
                    truth = reference.attention_grad(dout.double(), *(t.double() for t in (q, k, v)), **kw)
                    lowp = reference.attention_grad(dout, q, k, v, **kw)
                    lse = lse64.float().contiguous()
                    delta = backward_gluon.delta_of(out64.to(DTYPE), dout)
                    t0 = time.time()
                    g = backward_gluon.fused_gluon(q, k, v, dout, lse, delta, D ** -0.5, causal, persistent=True,
                                                   programs=programs)
                    torch.cuda.synchronize()
                    r = backward_gluon.fused_gluon(q, k, v, dout, lse, delta, D ** -0.5, causal)
                    ok, res = True, []
                    for i, name in enumerate(("dq", "dk", "dv")):
                        err = (g[i].double() - truth[i]).abs().max().item()
                        base = (lowp[i].double() - truth[i]).abs().max().item()
                        good = bool(torch.isfinite(g[i]).all().item()) and err <= 3 * base + 1e-4
                        ok = ok and good
                        res.append(f"{name} {err:.1e} (torch {base:.1e}){'' if good else ' WRONG'}")
                    bit = torch.equal(g[1], r[1]) and torch.equal(g[2], r[2])
                    ok = ok and bit
                    print(f"{tag}: {'SMOKE-OK' if ok else 'SMOKE-FAIL'} ({time.time() - t0:.1f} s) {', '.join(res)}; "
                          f"dk/dv {'bitwise' if bit else 'DIFFER'} vs routed", flush=True)
                    bad += not ok
                except Exception as exc:  # noqa: BLE001
                    print(f"{tag}: SMOKE-FAIL {short_error(exc)}", flush=True)
                    traceback.print_exc(limit=4)
                    bad += 1
    return bad


def run_smoke() -> dict:
    """{causal: passed} from the smoke subprocess; a timeout (a hang) exits 2."""
    t0 = time.time()
    try:
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "smoke"], capture_output=True, text=True,
                             timeout=SMOKE_TIMEOUT, env=dict(os.environ))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        print(f"SMOKE TIMED OUT after {SMOKE_TIMEOUT:.0f} s (a barrier deadlock?); output so far:\n{out}", flush=True)
        sys.exit(2)
    print(res.stdout + res.stderr[-3000:], flush=True)
    print(f"smoke done in {time.time() - t0:.0f} s", flush=True)
    ok = {}
    for c in (False, True):
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith(f"smoke causal={c} ")]
        ok[c] = bool(lines) and all("SMOKE-OK" in ln for ln in lines)
    return ok


def check(n, causal) -> dict:
    """{name: passed} of routed / persistent through the library's backward at this case."""
    tag = f"check N={n}{' causal' if causal else ''}"
    inp = inputs(n, causal)
    q, k, v, dout, out, lse = inp
    refs = head0_grad_refs(q, k, v, dout, softmax_scale=D ** -0.5, window_right=0 if causal else -1)
    good, grads = {}, {}
    for name in NAMES:
        good[name] = False
        try:
            setting(name, causal)
            SEEN.clear()
            g = [t.clone() for t in lib_backward.bwd(dout, q, k, v, out, lse, params(causal))]
            torch.cuda.synchronize()
            want = [name == "persistent"]
            ok, text = head0_grad_check(g, refs)
            good[name] = ok and SEEN == want
            grads[name] = g
            print(f"{tag} {name}: {'ok' if ok else 'FAILED'} {'route ok' if SEEN == want else f'ROUTE WRONG {SEEN}'}; "
                  f"{text}", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"{tag} {name}: ERROR {short_error(exc)}", flush=True)
            traceback.print_exc(limit=4)
    if len(grads) == 2:
        a, o = grads["persistent"], grads["routed"]
        bit = torch.equal(a[1], o[1]) and torch.equal(a[2], o[2])
        dq = ((a[0].float() - o[0].float()).abs().max() / o[0].float().abs().max()).item()
        print(f"{tag} persistent vs routed: dk/dv {'bitwise' if bit else 'DIFFER'}, dq rel diff {dq:.1e}", flush=True)
        good["persistent"] = good["persistent"] and bit
    del inp, grads
    torch.cuda.empty_cache()
    return good


def cudnn_ms(q, k, v, dout, causal) -> float:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in (q, k, v))

    def fwd():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=D ** -0.5)

    return graph_backward_ms(fwd, (qt, kt, vt), dout.transpose(1, 2))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "smoke":
        sys.exit(1 if smoke() else 0)
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    t0 = time.time()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {sm_count(torch.device('cuda'))} SMs",
          flush=True)
    backward_gluon._run_fused = _spy
    ok_smoke = run_smoke()
    cases = [case(c) for c in CASES]
    bad = {(name, c) for c in (False, True) for name in ("persistent",) if not ok_smoke[c]}
    for i, c in enumerate(CHECK):
        n, causal = case(c)
        faulthandler.dump_traceback_later(CASE_TIMEOUT * (2 if i == 0 else 1), exit=True)
        try:
            good = check(n, causal)
        except Exception as exc:  # noqa: BLE001
            print(f"check N={n} causal={causal}: ERROR {short_error(exc)}", flush=True)
            good = {}
        faulthandler.cancel_dump_traceback_later()
        bad |= {(name, causal) for name in NAMES if not good.get(name)}
    print(f"checks done at {time.time() - t0:.0f} s; not timed: {sorted(bad) or 'none'}", flush=True)
    if what == "checks":
        return
    names = [*NAMES, "cudnn"]
    rows = {}
    for rnd in range(2):
        for n, causal in (cases if rnd == 0 else cases[::-1]):
            faulthandler.dump_traceback_later(CASE_TIMEOUT, exit=True)
            inp = inputs(n, causal)
            q, k, v, dout, out, lse = inp
            flops = attention_flops(TOKENS // n, H, n, n, D, causal, "bwd")
            for name in (names if rnd == 0 else names[::-1]):
                if (name, causal) in bad:
                    continue
                try:
                    if name == "cudnn":
                        ms, mark = cudnn_ms(q, k, v, dout, causal), ""
                    else:
                        setting(name, causal)
                        SEEN.clear()
                        ms, mark = graph_or_eager_ms(lambda: lib_backward.bwd(dout, q, k, v, out, lse, params(causal)))
                        if SEEN and SEEN[0] != (name == "persistent"):
                            print(f"  ROUTE WRONG for {name}: {SEEN[:2]}", flush=True)
                    rows.setdefault((n, causal, name), []).append(flops / ms / 1e9)
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: {ms * 1e3:.0f}{mark} us "
                          f"{flops / ms / 1e9:.0f} TFLOP/s ({time.time() - t0:.0f} s)", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"ab round {rnd + 1} N={n} causal={causal} {name}: ERROR {short_error(exc)}", flush=True)
            del inp
            torch.cuda.empty_cache()
            faulthandler.cancel_dump_traceback_later()
    print(f"\nD = {D}, H = {H}, bf16, {TOKENS} tokens; TFLOP/s (round 1 / round 2)")
    print("| N | causal | B | routed | persistent | cuDNN | persistent / routed (r1 / r2) | routed, persistent vs cuDNN "
          "(best) | rule (>= 2% both rounds) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, causal in cases:
        tf = {name: rows.get((n, causal, name), []) for name in names}
        cells = [" / ".join(f"{x:.0f}" for x in tf[name]) or "-" for name in names]
        pr = [p / r for p, r in zip(tf["persistent"], tf["routed"])]
        ratio = " / ".join(f"{x:.3f}x" for x in pr) or "-"
        vs = " / ".join(f"{max(tf[x]) / max(tf['cudnn']):.2f}x" for x in NAMES if tf[x] and tf["cudnn"]) or "-"
        rule = "met" if len(pr) == 2 and min(pr) >= 1.02 else "not met"
        print(f"| {n} | {'yes' if causal else 'no'} | {TOKENS // n} | {' | '.join(cells)} | {ratio} | {vs} | {rule} |",
              flush=True)
    print(f"total {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
