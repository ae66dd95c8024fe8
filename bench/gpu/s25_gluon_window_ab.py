"""Session 25: the Gluon forward's WINDOW variant (kernels/fwd_gluon.py, sliding window,
written offline in session 25 and never run yet) against what flash_attn_func runs for
window_size=(1024, 0) today (fwd_ws.py's window path: 399 TFLOP/s at 16k in issue 3,
against 508 causal then; Gluon causal is ~606 now) and against flash_attn_func(causal=
True) (the Gluon CAUSAL kernel at 16k, policy.GLUON_FWD_CAUSAL_MIN_N).

What changed (patch gluon-window.patch, branch wip-gluon-window, 2026-12-01):
  - kernels/fwd_gluon.py: WINDOW constexpr, runtime win_left / win_right (>= 0; Nq + Nk
    for an unbounded side). A block loads the key tiles [t_lo, t_hi) its rows reach; per
    consumer warpgroup [left-edge masked][unmasked][right-edge / diagonal masked] tiles
    in three loops over one ring (every loaded stage still gets both kv_empty arrivals;
    tiles hidden from one warpgroup are masked to p = 0, not skipped). PERSISTENT with it
    (non-causal deal: query block fastest). Kernels without WINDOW: SASS unchanged.
  - launchers/forward_gluon.py: prepare / attention_fwd_gluon(..., window=(left, right));
    window_args (ValueError naming `window` before any launch); (-1, -1) runs the plain
    kernel, (-1, 0) the CAUSAL one. Not routed (policy.gluon_fwd unchanged).
  - tests/test_fwd_gluon.py: windows (1024, 0), (100, 0), (256, 64), (0, 0), (127, 129),
    (-1, 100), (300, -1), GQA, Nq != Nk both ways (rows that see no key), D 128 / 64,
    persistent (num_programs 7 / 1 / default) bitwise against one block a CTA, BLOCK_N 64,
    PINGPONG, 2 stages; validation on CPU.

    export PYTHONPATH=src S=bench/gpu/s25_gluon_window_ab.py
    timeout 300 python $S smoke      # first: a hang = barrier bug (~30-120 s, compiles included)
    timeout 300 python $S ab         # the A/B (~1-2 min)
    (python $S with no argument runs smoke then ab)

smoke: a dozen small calls (B = 2, GQA), each checked against float64 on one (batch,
head) (the tests' criterion: error <= 2x PyTorch's bf16 error, lse too; rows that see no
key O = 0 and lse = +inf), persistent ones also bitwise against the one-block kernel;
each printed, none raising.

ab: window (1024, 0), D = 128, bf16, 16k tokens (B = 16k / N), H = 16, N in {4k, 16k}:
Gluon WINDOW one block a CTA and PERSISTENT, and PERSISTENT at BLOCK_N = 64 with 4
stages (kernel launches from prepare()) against
flash_attn_func(window_size=(1024, 0)) as routed today and flash_attn_func(causal=True),
all as CUDA-graph replays (bench.common.graph_time_ms: L2 flushed, no host launch
overhead; eager time_ms marked "*" where a capture fails), two rounds, the second in
reverse order. TFLOP/s: windows by the FLOPs inside the band (bench/features.py
_flops_band: 4 * D per visible (query, key) pair, times B * H), causal by
attention_flops(causal=True) (the figure the ~606 was measured with); the last column
is window / causal (issue 3's target: >= 0.85).

Offline (bench/gluon_fwd_compile.py, sm_90a, 2026-12-01): WINDOW 12 warps, setmaxnreg
240 / 240 / 24, 0 spills, 224 KB shared memory at D = 128 (112 KB at D = 64), one block
and PERSISTENT, bf16 and fp16; 128 wgmma in the PTX (three loops), DEPBAR.LE 1 in all 6
consumer loops.

Prediction: all correct; persistent bitwise equal to one block a CTA. At 16k a block
loads 9 tiles (1 left-edge masked, 7 unmasked, 1 diagonal a warpgroup) for 128 x 1025
visible pairs: 89% of the loaded tile area is useful, against ~99% for causal at 16k.
So at causal's per-tile rate (~606) the window would read ~540; with the two masked
tiles a warpgroup (~10-20% dearer than an unmasked one) and a block's fixed cost (Q
load, pipeline fill, epilogue) over 9 tiles instead of ~64: one block a CTA 460-500
(0.76-0.83x causal), persistent 490-530 (0.81-0.87x; the next block's first K / V tiles
load under this block's end, and the Q wait is one latency a block). Against the
library's window path (fwd_ws.py, ~400): +15-30%. 4k: a little lower than 16k (the first
8 blocks of each sequence are shorter, 1-8 tiles; the Gluon causal kernel is also slower
there). BLOCK_N = 64 (18 tiles of 64 a block; a warpgroup masks 3 of them: its two
partial edge tiles and one the other half needs, hidden from all its rows) within +-5%
of BLOCK_N = 128: less masked area, twice the tiles' fixed overhead. If persistent stays under 0.85x, next:
drop the wholly hidden edge tile from a warpgroup's work (still released), or a mask-free
left edge when win_left + 1 is a multiple of BLOCK_N.
"""
import sys
import time
import traceback

import torch

import flashtriton
from flashtriton import reference
from flashtriton.bench.common import attention_flops, graph_time_ms, time_ms
from flashtriton.bench.features import _flops_band
from flashtriton.launchers import forward_gluon, policy

TOKENS, HEADS, DTYPE = 16384, 16, torch.bfloat16
WINDOW = (1024, 0)


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def inputs(d, nq, nk=None, b=None, h=HEADS, hk=None, seed=0):
    torch.manual_seed(seed)
    nk = nk or nq
    b = b or max(1, TOKENS // nq)
    q = torch.randn(b, nq, h, d, device="cuda", dtype=DTYPE)
    k, v = (torch.randn(b, nk, hk or h, d, device="cuda", dtype=DTYPE) for _ in range(2))
    return q, k, v


def check_one_head(q, k, v, o, lse, scale, window):
    """(ok, text): batch 0, head 0 against float64 (error <= 2x the same-dtype torch error,
    lse too); rows that see no key must have O = 0 and lse = +inf."""
    args = [t[:1, :, :1] for t in (q, k, v)]
    kw = dict(softmax_scale=scale, window_left=window[0], window_right=window[1])
    out64, lse64 = reference.attention(*(t.double() for t in args), **kw)
    out16, lse16 = reference.attention(*args, **kw)
    o1, lse1 = o[:1, :, :1].double(), lse[:1, :1].double()
    seen = torch.isfinite(lse64)
    inf_ok = torch.equal(torch.isposinf(lse1), ~seen) and not torch.isnan(lse1).any().item()
    zero_ok = bool((o1.transpose(1, 2)[:, :, ~seen[0, 0]] == 0).all().item()) if (~seen).any() else True
    err = (o1 - out64).abs().max().item()
    base = (out16.double() - out64).abs().max().item()
    err_lse = (lse1[seen] - lse64[seen]).abs().max().item() if seen.any() else 0.0
    base_lse = (lse16.double()[seen] - lse64[seen]).abs().max().item() if seen.any() else 0.0
    ok = (err <= 2 * base + 1e-4 and err_lse <= 2 * base_lse + 1e-4 and inf_ok and zero_ok
          and torch.isfinite(o).all().item())
    return ok, (f"f64 err {err:.1e} (torch {base:.1e}), lse {err_lse:.1e} ({base_lse:.1e}), "
                f"rows without keys {int((~seen).sum())}{'' if inf_ok and zero_ok else ' WRONG'}")


def same(a, b) -> str:
    """'bitwise' or the max abs difference of out and whether lse matched."""
    (o1, l1), (o2, l2) = a, b
    if torch.equal(o1, o2) and torch.equal(l1, l2):
        return "bitwise"
    return f"DIFFER: out {(o1.float() - o2.float()).abs().max().item():.1e}, lse equal {torch.equal(l1, l2)}"


def smoke():
    cases = [  # (D, window, B, Nq, Nk, H, Hk, config)
        (128, (1024, 0), 2, 2048, 2048, 8, 2, {}),
        (128, (1024, 0), 2, 2048, 2048, 8, 2, dict(persistent=True, num_programs=7)),
        (128, (100, 0), 2, 1024, 1024, 8, 2, {}),
        (128, (100, 0), 2, 1024, 1024, 8, 2, dict(persistent=True, num_programs=1)),
        (128, (256, 64), 2, 1024, 1024, 8, 2, dict(persistent=True)),
        (128, (100, 0), 2, 512, 2048, 8, 2, dict(persistent=True, num_programs=7)),     # Nq < Nk
        (128, (100, 0), 2, 2048, 512, 8, 2, dict(persistent=True, num_programs=7)),     # rows without keys
        (128, (256, 64), 2, 1024, 128, 4, 4, {}),                                        # whole blocks without
        (128, (100, 0), 2, 1536, 1024, 8, 2, dict(block_n=64, num_stages=4)),
        (128, (256, 64), 2, 1024, 1024, 8, 2, dict(pingpong=True)),
        (64, (1024, 0), 2, 2048, 2048, 8, 2, dict(persistent=True, num_programs=7)),
        (64, (-1, 100), 2, 1024, 1024, 8, 2, {}),
        (128, (1024, 0), 1, 16384, 16384, 16, 16, dict(persistent=True)),
    ]
    for d, window, b, nq, nk, h, hk, cfg in cases:
        tag = f"smoke D={d} window={window} B={b} {nq}x{nk} H={h}/{hk} {cfg or 'one block'}"
        try:
            q, k, v = inputs(d, nq, nk, b=b, h=h, hk=hk)
            scale = d ** -0.5
            # (review, session 24) the first call of a variant compiles (~5-20 s): a last line
            # "launching" with its clock tells a hang from a slow compile
            print(f"{tag}: launching (compiles first if new) {time.strftime('%H:%M:%S')}", flush=True)
            o, lse = forward_gluon.attention_fwd_gluon(q, k, v, scale, window=window, **cfg)
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, o, lse, scale, window)
            extra = ""
            if cfg.get("persistent"):
                base = forward_gluon.attention_fwd_gluon(q, k, v, scale, window=window)
                torch.cuda.synchronize()
                extra = f", vs one block {same(base, (o, lse))}"
            print(f"{tag}: {'ok' if ok else 'WRONG'}, {text}{extra}", flush=True)
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            print(f"{tag}: {short(exc)}", flush=True)


def timed(fn):
    """(ms, mark): a graph replay's ms, or eager time_ms ("*") where the capture fails."""
    try:
        return graph_time_ms(fn), ""
    except Exception:  # noqa: BLE001  (capture failed: eager instead)
        torch.cuda.synchronize()
        return time_ms(fn, "cuda"), "*"


def library_route(q, k, v, **kw):
    """flash_attn_func(**kw) once; whether the Gluon route ran it (forward_gluon.fwd_into)."""
    ran = []
    real = forward_gluon.fwd_into

    def spy(*a, **kws):
        ran.append(True)
        return real(*a, **kws)
    forward_gluon.fwd_into = spy
    try:
        out = flashtriton.flash_attn_func(q, k, v, **kw)
    finally:
        forward_gluon.fwd_into = real
    torch.cuda.synchronize()
    return out, bool(ran)


def case(n, d=128):
    q, k, v = inputs(d, n)
    b, _, h, _ = q.shape
    scale = d ** -0.5
    band = b * _flops_band(n, n, WINDOW[0], WINDOW[1], d, h, "fwd")
    causal_flops = attention_flops(b, h, n, n, d, True)
    flops = {"gluon-window": band, "gluon-window-pers": band, "gluon-window-pers-bn64": band, "library-window": band,
             "library-causal": causal_flops}
    lib_w, lib_w_gluon = library_route(q, k, v, window_size=WINDOW)
    _, lib_c_gluon = library_route(q, k, v, causal=True)
    calls = {"gluon-window": forward_gluon.prepare(q, k, v, scale, window=WINDOW),
             "gluon-window-pers": forward_gluon.prepare(q, k, v, scale, window=WINDOW, persistent=True),
             "gluon-window-pers-bn64": forward_gluon.prepare(q, k, v, scale, window=WINDOW, persistent=True, block_n=64,
                                                             num_stages=4),
             "library-window": lambda: flashtriton.flash_attn_func(q, k, v, window_size=WINDOW),
             "library-causal": lambda: flashtriton.flash_attn_func(q, k, v, causal=True)}
    notes = {"library-window": f"flash_attn_func(window_size={WINDOW}) as routed "
                               f"({'Gluon' if lib_w_gluon else 'not Gluon'})",
             "library-causal": f"flash_attn_func(causal=True) ({'Gluon' if lib_c_gluon else 'not Gluon'})"}
    outs = {}
    for name in ("gluon-window", "gluon-window-pers", "gluon-window-pers-bn64"):
        try:
            outs[name] = tuple(t.clone() for t in calls[name]())
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, *outs[name], scale, WINDOW)
            diff = (outs[name][0].float() - lib_w.float()).abs().max().item()
            notes[name] = f"{'ok' if ok else 'WRONG'} ({text}), vs library window {diff:.1e}"
            if not ok:
                del calls[name]
        except Exception as exc:  # noqa: BLE001  (reported, not fatal)
            notes[name] = short(exc)
            calls.pop(name, None)
    if "gluon-window" in outs and "gluon-window-pers" in outs:
        notes["gluon-window-pers"] += f", vs one block {same(outs['gluon-window'], outs['gluon-window-pers'])}"
    del outs
    res = {name: [] for name in calls}
    for rnd in range(2):
        for name in (list(calls) if rnd == 0 else list(calls)[::-1]):
            try:
                ms, mark = timed(calls[name])
                res[name].append((flops[name] / ms / 1e9, mark))
            except Exception as exc:  # noqa: BLE001
                notes[name] = notes.get(name, "") + f"; timing: {short(exc)}"
    causal = [t for t, _ in res.get("library-causal", [])]

    def fmt(name):
        vals = res[name]
        text = " / ".join(f"{t:.0f}{m}" for t, m in vals)
        if name != "library-causal" and len(causal) == len(vals) and vals:
            text += " (" + " / ".join(f"{t / c:.2f}x" for (t, _), c in zip(vals, causal)) + " causal)"
        return f"{name} {text}"
    print(f"D={d} window={WINDOW} N={n} B={b} H={h}: " + "  ".join(fmt(nm) for nm in res if res[nm]), flush=True)
    for name, note in notes.items():
        print(f"    {name}: {note}", flush=True)


def ab():
    for n in (4096, 16384):
        try:
            with torch.no_grad():
                case(n)
        except Exception as exc:  # noqa: BLE001  (one case failing: print, go on)
            print(f"N={n}: FAILED {short(exc)}", flush=True)
            traceback.print_exc(limit=3)
        torch.cuda.empty_cache()


def main(parts):
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs; routes today: GLUON_FWD_MIN_N {policy.GLUON_FWD_MIN_N}, "
          f"GLUON_FWD_CAUSAL_MIN_N {policy.GLUON_FWD_CAUSAL_MIN_N}, GLUON_FWD_PERSISTENT "
          f"{policy.GLUON_FWD_PERSISTENT}", flush=True)
    if not parts or "smoke" in parts:
        smoke()
    if not parts or "ab" in parts:
        ab()


if __name__ == "__main__":
    main(sys.argv[1:])
