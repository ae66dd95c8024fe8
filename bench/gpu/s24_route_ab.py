"""Session 24, call 3: where the Gluon forward should take over, and in which form.

After call 2 (s24/call2: the PERSISTENT kernel +2-20% non-causal at D = 128, causal -3..-16%
with heaviest-first-across-all-heads order) the kernel's causal order became banded
(kernels/fwd_gluon.py _tile_of: bands of heads whose K / V fill CAUSAL_BAND_L2_SHARE of
the L2, heaviest first inside a band). Per case (bf16, 16k tokens, H = 16 at D = 128 and
32 at D = 64, N in {512, 1k, 2k, 4k, 16k}, non-causal and causal), in two rounds (second reversed):
  ws        flash_attn_func with the Gluon tables emptied (fwd_ws.py / fwd.py: the route
            below the thresholds today), CUDA-graph replay (no host time)
  ws-eager  the same, eager (time_ms: host work included where it is not hidden)
  g1        Gluon one CTA a block (prepare), graph replay
  gp        Gluon PERSISTENT (prepare; causal: band from CAUSAL_BAND_L2_SHARE = 0.5)
  gp-b25 / gp-b100   causal only: band from 0.25 / 1.0 of the L2
  gp-eager  flash_attn_func routed to Gluon PERSISTENT at this N, eager
TFLOP/s by the FA2 count (causal halved). Each Gluon output is compared with ws's (max
abs difference) and checked against float64 on one (batch, head) before timing.

Prediction: non-causal D = 128 persistent ahead of ws from 512 (call 2: 437-445 kernel-only
at 512 against the grid's 458 graph replay for fwd_ws... methodology differs, so +-5%);
D = 64 non-causal level to +8% from 1k. Causal banded: level with g1 or better
(+0-10% at 512-2k where the tail weighs, level at 16k); if still behind g1 the loss is
not L2 but the static deal, and causal stays one block a CTA. Eager: Gluon's host path
(~50-100 us, not replayable) costs at the short causal rows (kernel ~30-60 us) but not
at non-causal 512 (~150 us of kernel).

    PYTHONPATH=src timeout 300 python bench/gpu/s24_route_ab.py [d128] [d64]
"""
import sys
import traceback

import torch

import flashtriton
from flashtriton import reference
from flashtriton.bench.common import attention_flops, graph_time_ms, time_ms
from flashtriton.launchers import forward_gluon, plans, policy

TOKENS, DTYPE = 16384, torch.bfloat16
HEADS = {128: 16, 64: 32}
SAVED = (dict(policy.GLUON_FWD_MIN_N), dict(policy.GLUON_FWD_CAUSAL_MIN_N), dict(policy.GLUON_FWD_PERSISTENT))


def short(exc) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"


def route(d, n, causal, gluon: bool):
    """Policy tables so that flash_attn_func at (d, n, causal) takes Gluon PERSISTENT (gluon)
    or never Gluon; plans cleared (they key on the call, not on these tables)."""
    policy.GLUON_FWD_MIN_N.clear()
    policy.GLUON_FWD_CAUSAL_MIN_N.clear()
    if gluon:
        (policy.GLUON_FWD_CAUSAL_MIN_N if causal else policy.GLUON_FWD_MIN_N)[d] = n
        policy.GLUON_FWD_PERSISTENT["causal" if causal else "plain"] = True
    plans.clear()


def restore():
    for table, saved in zip((policy.GLUON_FWD_MIN_N, policy.GLUON_FWD_CAUSAL_MIN_N, policy.GLUON_FWD_PERSISTENT),
                            SAVED):
        table.clear()
        table.update(saved)
    plans.clear()


def check_one_head(q, k, v, o, lse, scale, causal):
    args = [t[:1, :, :1] for t in (q, k, v)]
    kw = dict(softmax_scale=scale, window_right=0 if causal else -1)
    out64, lse64 = reference.attention(*(t.double() for t in args), **kw)
    out16, _ = reference.attention(*args, **kw)
    err = (o[:1, :, :1].double() - out64).abs().max().item()
    base = (out16.double() - out64).abs().max().item()
    return err <= 2 * base + 1e-4 and torch.isfinite(o).all().item(), f"f64 err {err:.1e} (torch {base:.1e})"


def band_for(q, k, share):
    b, _, h, d = q.shape
    nk, hk = k.shape[1], k.shape[2]
    l2 = torch.cuda.get_device_properties(q.device).L2_cache_size
    return int(max(1, min(b * h, (l2 * share) // (2 * nk * d * q.element_size() / (h // hk)))))


def case(d, n, causal):
    torch.manual_seed(n + d)
    h = HEADS[d]
    b = max(1, TOKENS // n)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=DTYPE) for _ in range(3))
    scale = d ** -0.5
    flops = attention_flops(b, h, n, n, d, causal)
    notes = []
    with torch.no_grad():
        route(d, n, causal, gluon=False)
        ref = flashtriton.flash_attn_func(q, k, v, causal=causal).clone()
        graph = {"ws": lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)}
        gl_calls = {"g1": dict(), "gp": dict(persistent=True)}
        if causal:
            gl_calls["gp-b25"] = dict(persistent=True, band=band_for(q, k, 0.25))
            gl_calls["gp-b100"] = dict(persistent=True, band=band_for(q, k, 1.0))
            notes.append("bands " + ", ".join(f"{s}: {band_for(q, k, s)}" for s in (0.25, 0.5, 1.0)) + f" of {b * h}")
        for name, kw in gl_calls.items():
            launch = forward_gluon.prepare(q, k, v, scale, causal=causal, **kw)
            o, lse = launch()
            torch.cuda.synchronize()
            ok, text = check_one_head(q, k, v, o, lse, scale, causal)
            notes.append(f"{name} {'ok' if ok else 'WRONG'} {text}, vs ws {(o.float() - ref.float()).abs().max().item():.1e}")
            if ok:
                graph[name] = launch
        res = {name: [] for name in list(graph) + ["ws-eager", "gp-eager"]}
        for rnd in range(2):
            names = list(res) if rnd == 0 else list(res)[::-1]
            for name in names:
                try:
                    if name == "ws-eager":
                        route(d, n, causal, gluon=False)
                        ms = time_ms(graph["ws"], "cuda")
                    elif name == "gp-eager":
                        route(d, n, causal, gluon=True)
                        ms = time_ms(lambda: flashtriton.flash_attn_func(q, k, v, causal=causal), "cuda")
                    else:
                        route(d, n, causal, gluon=False)
                        ms = graph_time_ms(graph[name])
                    res[name].append(f"{flops / ms / 1e9:.0f}")
                except Exception as exc:  # noqa: BLE001
                    res[name].append("err")
                    notes.append(f"{name}: {short(exc)}")
        route(d, n, causal, gluon=True)
        o2 = flashtriton.flash_attn_func(q, k, v, causal=causal)
        notes.append(f"routed gluon vs ws {(o2.float() - ref.float()).abs().max().item():.1e}")
    print(f"D={d} {'causal' if causal else 'non-causal'} N={n} B={b} H={h}: "
          + "  ".join(f"{nm} " + "/".join(r) for nm, r in res.items()), flush=True)
    print("    " + "; ".join(notes), flush=True)


def main(parts):
    ds = [d for d, p in ((128, "d128"), (64, "d64")) if not parts or p in parts]
    for d in ds:
        for causal in (False, True):
            for n in (512, 1024, 2048, 4096, 16384):
                try:
                    case(d, n, causal)
                except Exception as exc:  # noqa: BLE001
                    print(f"D={d} causal={causal} N={n}: FAILED {short(exc)}", flush=True)
                    traceback.print_exc(limit=3)
                finally:
                    restore()
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
