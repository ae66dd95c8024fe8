"""Session 23: the Gluon forward's CAUSAL variant and its D = 64 tile (kernels/fwd_gluon.py,
first GPU run of both) against what flash_attn_func runs for those calls today, bf16,
16k tokens, H = 16 at D = 128 and H = 32 at D = 64:

  causal   D = 128 causal at N = 2k / 8k / 16k: Gluon (DEFAULT_CONFIG, and PINGPONG)
           against flash_attn_func(causal=True), i.e. fwd_ws.py (policy.
           GLUON_FWD_CAUSAL_MIN_N is empty, so the library does not route there yet);
  d64      D = 64 non-causal at N = 4k / 16k: Gluon at 3 (DEFAULT_CONFIG), 4 and 6 stages
           against flash_attn_func (fwd_ws.py / fwd.py as policy routes D = 64 today:
           GLUON_FWD_MIN_N has no 64 entry).

Per case every Gluon configuration is checked against the library's output (max abs
difference over the whole tensor) and against float64 on one (batch, head) (the tests'
criterion: error <= 2x PyTorch's bf16 error, lse too), then the correct ones and the
library are timed in two rounds, the second in reverse order, as CUDA-graph replays
(graph_time_ms: kernel time without host launch overhead, L2 flushed; plain time_ms,
marked "*", where a capture fails). Causal FLOPs are half the dense count
(attention_flops(..., causal=True)). A failing configuration is printed and left out;
a case that fails is printed and the next one runs.

    export PYTHONPATH=src S=bench/gpu/s23_gluon_causal_ab.py
    timeout 90 python $S smoke          # one small checked call per configuration (~20-40 s)
    timeout 90 python $S d64            # part (b)
    timeout 120 python $S causal        # part (a)
    (python $S with no argument runs d64 then causal)

Run each under `timeout`: a barrier-phase mistake in the causal loops shows as a hang,
not an error. smoke also covers Nq < Nk, Nq > Nk (rows that see no key: O = 0, lse =
+inf), BLOCK_N = 64 (the upper warpgroup's fully hidden tile) and PINGPONG.

Offline (bench/gluon_fwd_compile.py, sm_90a, 2026-12-01): CAUSAL D = 128 12 warps,
setmaxnreg 240 / 240 / 24, 0 spills, 224 KB shared memory, 96 wgmma (two loops);
D = 64 (3 / 4 / 6 stages) 112 / 144 / 208 KB, 0 spills; the non-causal SASS unchanged.

Prediction: all correct (causal: within 2x bf16 error of float64; against fwd_ws.py
about one bf16 ulp of the output, not bitwise: the diagonal tile's masked softmax
differs in the order of its operations). Causal D = 128: fwd_ws.py measured 491-508
TFLOP/s at 8k-16k (it masks every tile: one loop only); Gluon 540-580 there (+8-15%),
at 2k within +-5% of fwd_ws.py (short rows: 1-16 tiles a CTA, the pipeline's fill and
the one-CTA-a-block tail weigh more). PINGPONG level to +3% in causal (the two halves'
softmax run at different times anyway on the diagonal). D = 64 non-causal: fwd_ws.py
402-419 (cuDNN 428-444); Gluon with 3 stages 400-430, 4 / 6 stages +0-5% over 3 (a
D = 64 tile is half the wgmma work, so the loads need more lead).
"""
import sys
import traceback

import torch

import flashtriton
from flashtriton import reference
from flashtriton.bench.common import attention_flops, graph_time_ms, time_ms
from flashtriton.launchers import forward_gluon, policy

TOKENS, DTYPE = 16384, torch.bfloat16
HEADS = {128: 16, 64: 32}
CAUSAL_CONFIGS = {"gluon": {}, "gluon-pp": dict(pingpong=True)}
D64_CONFIGS = {"gluon-s3": dict(num_stages=3), "gluon-s4": dict(num_stages=4), "gluon-s6": dict(num_stages=6)}


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def inputs(d, nq, nk=None, b=None, hk=None, seed=0):
    torch.manual_seed(seed)
    nk = nk or nq
    h = HEADS[d]
    b = b or max(1, TOKENS // nq)
    q = torch.randn(b, nq, h, d, device="cuda", dtype=DTYPE)
    k, v = (torch.randn(b, nk, hk or h, d, device="cuda", dtype=DTYPE) for _ in range(2))
    return q, k, v


def check_one_head(q, k, v, o, lse, scale, causal):
    """(ok, text): batch 0, head 0 against float64, with the tests' criterion; rows that
    see no key must have O = 0 and lse = +inf."""
    args = [t[:1, :, :1] for t in (q, k, v)]
    kw = dict(softmax_scale=scale, window_right=0 if causal else -1)
    out64, lse64 = reference.attention(*(t.double() for t in args), **kw)
    out16, lse16 = reference.attention(*args, **kw)
    o1, lse1 = o[:1, :, :1].double(), lse[:1, :1].double()
    seen = torch.isfinite(lse64)
    inf_ok = torch.equal(torch.isposinf(lse1), ~seen) and not torch.isnan(lse1).any().item()
    err = (o1 - out64).abs().max().item()
    base = (out16.double() - out64).abs().max().item()
    err_lse = (lse1[seen] - lse64[seen]).abs().max().item() if seen.any() else 0.0
    base_lse = (lse16.double()[seen] - lse64[seen]).abs().max().item() if seen.any() else 0.0
    ok = (err <= 2 * base + 1e-4 and err_lse <= 2 * base_lse + 1e-4 and inf_ok
          and torch.isfinite(o).all().item())
    return ok, (f"f64 err {err:.1e} (bf16 torch {base:.1e}), lse {err_lse:.1e} ({base_lse:.1e})"
                f"{'' if inf_ok else ', lse +inf rows WRONG'}")


def library(q, k, v, causal):
    """flash_attn_func as routed today, and whether that route was the Gluon kernel."""
    ran = []
    real = forward_gluon.fwd_into

    def spy(*a, **kw):
        ran.append(True)
        return real(*a, **kw)
    forward_gluon.fwd_into = spy
    try:
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
    finally:
        forward_gluon.fwd_into = real
    torch.cuda.synchronize()
    return out, bool(ran)


def timed(fn):
    """(TFLOP/s divisor in ms, mark): a graph replay's ms, or eager time_ms ("*")."""
    try:
        return graph_time_ms(fn), ""
    except Exception:  # noqa: BLE001  (capture failed: eager instead)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def case(d, n, causal, configs):
    q, k, v = inputs(d, n)
    b, _, h, _ = q.shape
    scale = d ** -0.5
    flops = attention_flops(b, h, n, n, d, causal)
    with torch.no_grad():
        ref, lib_gluon = library(q, k, v, causal)
        calls = {"library": lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)}
        notes = {"library": f"flash_attn_func as routed ({'Gluon' if lib_gluon else 'not Gluon'})"}
        for name, kw in configs.items():
            try:
                launch = forward_gluon.prepare(q, k, v, scale, causal=causal, **kw)
                o, lse = launch()
                torch.cuda.synchronize()
                ok, text = check_one_head(q, k, v, o, lse, scale, causal)
                diff = (o.float() - ref.float()).abs().max().item()
                notes[name] = f"{'ok' if ok else 'WRONG'}, vs library {diff:.1e}, {text}"
                if ok:
                    calls[name] = launch
                del o, lse
            except Exception as exc:  # noqa: BLE001  (reported, not fatal)
                notes[name] = short(exc)
        res = {name: [] for name in calls}
        for rnd in range(2):
            for name in (list(calls) if rnd == 0 else list(calls)[::-1]):
                try:
                    ms, mark = timed(calls[name])
                    res[name].append(f"{flops / ms / 1e9:.0f}{mark}")
                except Exception as exc:  # noqa: BLE001
                    res[name].append("err")
                    notes[name] += f"; timing: {short(exc)}"
    print(f"D={d} {'causal' if causal else 'non-causal'} N={n} B={b} H={h}: "
          + "  ".join(f"{nm} " + " / ".join(r) for nm, r in res.items()), flush=True)
    for name, note in notes.items():
        print(f"    {name}: {note}", flush=True)


def run_cases(cases):
    for d, n, causal, configs in cases:
        try:
            case(d, n, causal, configs)
        except Exception as exc:  # noqa: BLE001  (one case failing: print, go on)
            print(f"D={d} causal={causal} N={n}: FAILED {short(exc)}", flush=True)
            traceback.print_exc(limit=3)
        torch.cuda.empty_cache()


def smoke():
    """Small checked calls (B = 2, GQA 16 / 4 heads at D = 128 or 32 / 8 at D = 64)."""
    cases = [  # (D, causal, Nq, Nk, config)
        (64, False, 1024, 1024, {}), (64, False, 1024, 1024, dict(num_stages=4)),
        (64, False, 1024, 1024, dict(num_stages=6)),
        (128, True, 1024, 1024, {}), (128, True, 128, 128, {}), (128, True, 1024, 2048, {}),
        (128, True, 2048, 1024, {}), (128, True, 1024, 128, {}), (128, True, 1024, 1024, dict(pingpong=True)),
        (128, True, 1536, 1024, dict(block_n=64, num_stages=4)),
        (128, True, 1024, 1536, dict(block_n=64, num_stages=4)),
        (128, True, 1024, 1024, dict(block_n=64, num_stages=4, pingpong=True)),
        (64, True, 1024, 1024, {}), (64, True, 1024, 2048, {}), (64, True, 2048, 1024, dict(num_stages=4)),
    ]
    for d, causal, nq, nk, cfg in cases:
        q, k, v = inputs(d, nq, nk, b=2, hk=HEADS[d] // 4)
        scale = d ** -0.5
        tag = f"smoke D={d} {'causal' if causal else 'plain'} {nq}x{nk} {cfg or 'default'}"
        try:
            o, lse = forward_gluon.attention_fwd_gluon(q, k, v, scale, causal=causal, **cfg)
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, o, lse, scale, causal)
            ref, lib_gluon = library(q, k, v, causal)
            diff = (o.float() - ref.float()).abs().max().item()
            print(f"{tag}: {'ok' if ok else 'WRONG'}, {text}, vs flash_attn_func {diff:.1e}"
                  f"{' (Gluon)' if lib_gluon else ''}", flush=True)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"{tag}: {short(exc)}", flush=True)


def main(parts):
    print(f"routes today: GLUON_FWD_MIN_N {policy.GLUON_FWD_MIN_N}, GLUON_FWD_CAUSAL_MIN_N "
          f"{policy.GLUON_FWD_CAUSAL_MIN_N}, {torch.cuda.get_device_name()}", flush=True)
    if "smoke" in parts:
        smoke()
    if "d64" in parts:
        run_cases([(64, n, False, D64_CONFIGS) for n in (4096, 16384)])
    if "causal" in parts:
        run_cases([(128, n, True, CAUSAL_CONFIGS) for n in (2048, 8192, 16384)])


if __name__ == "__main__":
    main(sys.argv[1:] or ["d64", "causal"])
