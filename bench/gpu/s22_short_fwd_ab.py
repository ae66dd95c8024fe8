"""Session 22: the short forwards that trail FA2 / cuDNN in the grid (prefill.md, sessions 19-21).

Two questions, one run (H200, bf16, 16k tokens, hidden 2048: H = 2048 / D):
1. Host time. Several short rows read far below their own graph replay eagerly (D = 128
   causal 512: eager 0.208 ms, graph 0.141; D = 64 causal 1k 0.327 / 0.227; D = 64
   non-causal 512 0.281 / 0.218), while the D = 128 non-causal 512 row does not (0.148 /
   0.149). do_bench's 256 MB flush hides ~85 us of host time, so those calls cost the host
   ~150-190 us. Measured here: host us a call (GPU held busy), with and without inputs
   that need grad, launch-plan counters, eager (do_bench) and graph ms; and a cProfile of
   the worst call. Prediction: the fwd.py path pays a host descriptor build or a plan
   miss the fwd_ws.py path does not (~50-100 us).
2. Kernels. fwd_ws.py persistent where fwd.py runs today: D = 128 causal at 512 (not timed
   before: policy.WS_MASKED_PERSISTENT_ONLY starts at 1k, where it gained 384 against
   340), and D = 64 plain and causal (never persistent; one tile a program in session 9:
   267 against 237 at 1k, 332 against 401 at 2k). Offline sm_90a (this session): D = 64
   (128, 128, 4, 2) 168 registers, no spill, 115 KB shared (one program an SM), (128, 64,
   4, 2) 83 KB (two fit: 264 programs tried too).
   Prediction: D = 128 causal 512 graph 244 -> 280-320; D = 64 plain 512 / 1k 314 / 372 ->
   350-400 / 390-420, level or behind from 2k; D = 64 causal 512 / 1k 235 / 303 -> 270-320.
"""
import sys

import torch
from triton.testing import do_bench

import flashtriton
from flashtriton.bench.common import graph_time_ms, host_us
from flashtriton.kernels import configs
from flashtriton.launchers import forward, plans, policy
from fwd_ab import alternate_outputs, host_profile  # bench/gpu, the script's folder

T = configs.Tile
BASE = dict(tiles=dict(policy.WARP_SPEC_TILES), masked=set(policy.WARP_SPEC_MASKED_FWD["causal"]),
            only=dict(policy.WS_MASKED_PERSISTENT_ONLY), pers=set(forward.WS_PERSISTENT),
            programs=forward.WS_PERSISTENT_PROGRAMS)


def reset():
    plans.clear()
    policy.WARP_SPEC_TILES.clear()
    policy.WARP_SPEC_TILES.update(BASE["tiles"])
    policy.WARP_SPEC_MASKED_FWD["causal"] = set(BASE["masked"])
    policy.WS_MASKED_PERSISTENT_ONLY.clear()
    policy.WS_MASKED_PERSISTENT_ONLY.update(BASE["only"])
    forward.WS_PERSISTENT = set(BASE["pers"])
    forward.WS_PERSISTENT_PROGRAMS = BASE["programs"]


def ws(d, tile=None, programs=None, masked_from=512):
    def apply():
        reset()
        if tile is not None:
            policy.WARP_SPEC_TILES[d] = tile
        policy.WARP_SPEC_MASKED_FWD["causal"].add(d)
        policy.WS_MASKED_PERSISTENT_ONLY[d] = masked_from
        forward.WS_PERSISTENT |= {(d, False, False), (d, True, False)}
        forward.WS_PERSISTENT_PROGRAMS = programs
    return apply


def qkv(d, n, grad=False):
    b, h = 16384 // n, 2048 // d
    return [torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=grad) for _ in range(3)]


def flops(d, n, causal):
    return 4 * (16384 // n) * (2048 // d) * n * n * d / (2 if causal else 1)


def host_survey():
    print("== host: us a call (GPU busy), plan counters, eager and graph ms", flush=True)
    for d, causal, n in [(128, False, 512), (128, True, 512), (128, True, 1024), (64, False, 512),
                         (64, True, 512), (64, True, 1024), (64, False, 2048), (256, True, 512)]:
        q, k, v = qkv(d, n, grad=True)
        qn, kn, vn = (t.detach() for t in (q, k, v))
        f = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)        # noqa: E731
        fn = lambda: flashtriton.flash_attn_func(qn, kn, vn, causal=causal)    # noqa: E731
        f()
        before = dict(plans.stats)
        hg = host_us(f, calls=100, reps=3)
        hn = host_us(fn, calls=100, reps=3)
        delta = {key: plans.stats[key] - before[key] for key in before}
        eager = do_bench(f, warmup=25, rep=100, return_mode="median")
        with torch.no_grad():
            graph = graph_time_ms(fn)
        print(f"D={d} {'causal' if causal else 'plain '} N={n:5d}  host grad {hg:6.1f} us, no grad {hn:6.1f} us  "
              f"plans {delta}  eager {eager * 1e3:6.1f} us  graph {graph * 1e3:6.1f} us", flush=True)
    d, causal, n = 64, True, 1024
    q, k, v = qkv(d, n, grad=True)
    text = host_profile(lambda: flashtriton.flash_attn_func(q, k, v, causal=causal))
    print("== cProfile, D=64 causal 1k forward with grad, 200 calls, by tottime", flush=True)
    print(text, flush=True)


def case(d, n, causal, variants):
    q, k, v = qkv(d, n)
    fl = flops(d, n, causal)
    call = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)          # noqa: E731

    def measure():
        with torch.no_grad():
            g = graph_time_ms(call)
            e = do_bench(call, warmup=25, rep=100, return_mode="median")
        return fl / g / 1e9, fl / e / 1e9
    res, outs = alternate_outputs(variants, call, measure)
    names = list(variants)
    diff = {nm: float((outs[nm] - outs[names[0]]).abs().max()) for nm in names[1:]}
    nan = {nm: bool(outs[nm].isnan().any()) for nm in names}
    label = f"D={d} N={n} {'causal' if causal else 'plain'}"
    print(f"{label:22s} " + "  ".join(f"{nm} " + " / ".join(f"{g:4.0f}g {e:4.0f}e" for g, e in r)
                                      for nm, r in res.items()) + f"  maxdiff {diff} nan {nan}", flush=True)


def kernels():
    print("== kernels: TFLOP/s graph (g) and eager (e), two rounds", flush=True)
    with torch.no_grad():
        for n in (512, 1024):
            case(128, n, True, {"fwd.py/now": reset, "ws pers": ws(128)})
        for causal in (False, True):
            for n in (512, 1024, 2048, 4096, 16384):
                case(64, n, causal, {"fwd.py": reset, "ws 128x128": ws(64, T(128, 128, 4, 2)),
                                     "ws 128x64": ws(64, T(128, 64, 4, 2)),
                                     "ws 128x64 x2": ws(64, T(128, 64, 4, 2), programs=264)})
    reset()


if __name__ == "__main__":
    which = sys.argv[1:] or ["host", "kernels"]
    if "host" in which:
        host_survey()
    if "kernels" in which:
        kernels()
