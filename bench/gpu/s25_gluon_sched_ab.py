"""Session 25 (prepared 2026-12-01, session 24): the persistent causal Gluon forward with the
host's longest-first deal (SCHEDULED, launchers/schedule.py) against one CTA a block and
the kernel's banded round robin.

Session 24 (s24/call3, graph replays, D = 128 causal, bf16, 16k tokens, H = 16): one-block
481-507 / 570-613 at 4k / 16k, banded round robin 494-501 / 533-534. The deal is the
suspect at 16k: offline, the round robin's most loaded CTA carries 1232 tile-units against
a mean of 1024 (+20%), the LPT deal 1069.5 (+4.4%); at 8k 561 / 531.5 against 527.5, 4k
307 / 293 against 279, 2k 169 / 161 against 155 (BLOCK_OVERHEAD_TILES = 1.5).

Prediction: SCHEDULED bitwise equal to one-block; at 16k +10-15% over the round robin
(~590-610), level to +5% against one-block (which the hardware deals dynamically, also
longest first); at 4k / 8k +3-6% over one-block (the persistent non-causal gain, +5-8%
at 4k, minus the deal's +4-5% residual imbalance... roughly level to +5%); at 2k level.
D = 64 (H = 32) the same shape of result. If SCHEDULED wins, set policy.
GLUON_FWD_PERSISTENT["causal"] and route persistent causal with scheduled=True.

    PYTHONPATH=src timeout 60 python bench/gpu/s25_gluon_sched_ab.py smoke
    PYTHONPATH=src timeout 200 python bench/gpu/s25_gluon_sched_ab.py ab     # ~1.5-2 min
"""
import sys
import traceback

import torch

from flashtriton import reference
from flashtriton.bench.common import attention_flops, graph_time_ms
from flashtriton.launchers import forward_gluon, schedule

TOKENS, DTYPE = 16384, torch.bfloat16
HEADS = {128: 16, 64: 32}


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def check_one_head(q, k, v, o, lse, scale):
    args = [t[:1, :, :1] for t in (q, k, v)]
    out64, lse64 = reference.attention(*(t.double() for t in args), softmax_scale=scale, window_right=0)
    out16, _ = reference.attention(*args, softmax_scale=scale, window_right=0)
    err = (o[:1, :, :1].double() - out64).abs().max().item()
    base = (out16.double() - out64).abs().max().item()
    seen = torch.isfinite(lse64)
    inf_ok = torch.equal(torch.isposinf(lse[:1, :1].double()), ~seen)
    return err <= 2 * base + 1e-4 and inf_ok and torch.isfinite(o).all().item(), f"f64 err {err:.1e} (torch {base:.1e})"


def smoke():
    for d, b, nq, nk, h, hk, nprog in [(128, 2, 1024, 1024, 8, 2, None), (128, 2, 1024, 1024, 8, 2, 7),
                                       (128, 1, 2048, 1024, 4, 4, 5), (128, 1, 1024, 2048, 4, 2, 3),
                                       (64, 2, 1024, 1024, 8, 2, 7), (128, 4, 4096, 4096, 16, 16, None)]:
        tag = f"smoke D={d} B={b} {nq}x{nk} H={h}/{hk} num_programs={nprog}"
        try:
            torch.manual_seed(nq + nk + d)
            q = torch.randn(b, nq, h, d, device="cuda", dtype=DTYPE)
            k, v = (torch.randn(b, nk, hk, d, device="cuda", dtype=DTYPE) for _ in range(2))
            base = forward_gluon.attention_fwd_gluon(q, k, v, d ** -0.5, causal=True)
            o, lse = forward_gluon.attention_fwd_gluon(q, k, v, d ** -0.5, causal=True, persistent=True,
                                                       num_programs=nprog, scheduled=True)
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, o, lse, d ** -0.5)
            same = torch.equal(base[0], o) and torch.equal(base[1], lse)
            print(f"{tag}: {'ok' if ok else 'WRONG'}, {text}, vs one-block {'bitwise' if same else 'DIFFER'}", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"{tag}: {short(exc)}", flush=True)


def case(d, n):
    torch.manual_seed(n + d)
    h = HEADS[d]
    b = max(1, TOKENS // n)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=DTYPE) for _ in range(3))
    scale = d ** -0.5
    flops = attention_flops(b, h, n, n, d, True)
    calls = {"one-block": forward_gluon.prepare(q, k, v, scale, causal=True),
             "round-robin": forward_gluon.prepare(q, k, v, scale, causal=True, persistent=True),
             "scheduled": forward_gluon.prepare(q, k, v, scale, causal=True, persistent=True, scheduled=True)}
    outs = {name: tuple(t.clone() for t in fn()) for name, fn in calls.items()}
    torch.cuda.synchronize()
    ok, text = check_one_head(q, k, v, *outs["scheduled"], scale)
    same = all(torch.equal(a, c) for a, c in zip(outs["one-block"], outs["scheduled"]))
    res = {name: [] for name in calls}
    for rnd in range(2):
        for name in (list(calls) if rnd == 0 else list(calls)[::-1]):
            res[name].append(f"{flops / graph_time_ms(calls[name]) / 1e9:.0f}")
    n_m = n // 128
    costs = [schedule.causal_tiles(m, n, n, 128, 128) + schedule.BLOCK_OVERHEAD_TILES for m in range(n_m)]
    print(f"D={d} causal N={n} B={b} H={h}: " + "  ".join(f"{nm} " + " / ".join(r) for nm, r in res.items())
          + f"   (scheduled {'ok' if ok else 'WRONG'} {text}, vs one-block {'bitwise' if same else 'DIFFER'}; "
          f"mean load {sum(costs) * b * h / 132:.0f})", flush=True)


def ab(quick=False):
    for d in (128, 64):
        for n in ((4096, 16384) if quick and d == 128 else (16384,) if quick else (2048, 4096, 8192, 16384)):
            try:
                with torch.no_grad():
                    case(d, n)
            except Exception as exc:  # noqa: BLE001
                print(f"D={d} N={n}: FAILED {short(exc)}", flush=True)
                traceback.print_exc(limit=3)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    parts = sys.argv[1:]
    if "smoke" in parts:
        smoke()
    if not parts or "ab" in parts:
        ab()
    elif "quick" in parts:
        ab(quick=True)
