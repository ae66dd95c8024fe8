"""Session 13, call 3: three tile questions, CUDA-graph replays, 16k tokens (B = 16384 / N),
hidden 2048 (H = 2048 / D), bf16. Every variant twice, the second pass in reverse order
(session 12 calls 8-9: the GPU slows over a run).

"fwd128": D = 128 non-causal forward at N = 512 / 1k runs fwd_ws.py (128, 128, 4, 2): 299 /
404 TFLOP/s against cuDNN's 512 / 570 (0.59 / 0.72x, target 0.85x). fwd.py with smaller
tiles (more programs in flight: at 512 a (batch, head) has 4 query blocks of 128)? fwd.py's
default (128, 128, 8, 3) measured 244 / 280 (session 6). Prediction: a 64-row 4-warp tile
~level with fwd_ws at 512, below it at 1k: the gain at D = 128 causal came from the
diagonal, which non-causal calls lack.

"fwd256": D = 256 forward at N = 512 / 1k: causal runs fwd_ws.py MASKED (128, 64, 4, 1), 142 /
308 against cuDNN 266 / 449; non-causal 281 / 480 against 515 / 599. fwd.py with 64-row
tiles through fwd_short_masked / fwd_short. Prediction: causal +15-30% at 512 (as D = 128
causal's 64-row tile, +30%), level at 1k; non-causal level.

"window": window (1024, 0) at N = 16k, D = 128 backward, 1.303 ms against Flex's 1.246
(features.md): dkdv (64, 64, 4, 2) query rows is ~0.85 ms of it, dq_window (64, 32, 4, 2)
~0.46. Prediction: (64, 64, 4, 3) dK/dV -3-5%; dq (64, 64, 4, 2) level.
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"     # variants change module tables

import torch
import triton

import flashtriton
from flashtriton.bench.common import attention_flops, capture_graph, graph_time_ms
from flashtriton.kernels import configs
from flashtriton.launchers import forward

T = configs.Tile
WS = "fwd_ws (default)"


def fwd_case(d, n, causal, table, variants):
    b, h = 16384 // n, 2048 // d
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = attention_flops(b, h, n, n, d, causal)
    ref = flashtriton.flash_attn_func(q, k, v, causal=causal)
    res = {str(t): [] for t in variants}
    for rep in range(2):
        for t in (variants if rep == 0 else variants[::-1]):
            saved_mode, tab = forward.warp_spec_mode, configs.DEFAULTS[table]
            had, saved = d in tab, tab.get(d)
            if t != WS:
                forward.warp_spec_mode = lambda *a, **k: None
                tab[d] = t
            try:
                out = flashtriton.flash_attn_func(q, k, v, causal=causal)
                err = (out.float() - ref.float()).abs().max().item()
                ms = graph_time_ms(lambda: flashtriton.flash_attn_func(q, k, v, causal=causal))
                res[str(t)].append((flops / ms / 1e9, err))
            except Exception as exc:  # noqa: BLE001
                print(f"D={d} N={n} causal={causal} {t}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            finally:
                forward.warp_spec_mode = saved_mode
                if had:
                    tab[d] = saved
                else:
                    tab.pop(d, None)
    for t, r in res.items():
        if r:
            print(f"D={d} N={n} causal={causal} {t:62s} " + " / ".join(f"{x:6.1f}" for x, _ in r)
                  + f" TFLOP/s  max|diff| vs ws {max(e for _, e in r):.1e}", flush=True)


def window_bwd(variants):
    n, h, d, left = 16384, 16, 128, 1024
    q, k, v = (torch.randn(1, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    kw = dict(window_size=(left, 0))

    def both():
        out = flashtriton.flash_attn_func(q, k, v, **kw)
        return torch.autograd.grad(out, (q, k, v), dout)

    def fwd():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, **kw)

    ref = both()
    res = {lab: [] for lab, _, _ in variants}
    for rep in range(2):
        for lab, table, t in (variants if rep == 0 else variants[::-1]):
            tab = configs.DEFAULTS[table] if table else None
            saved = tab.get(128) if tab is not None else None
            if tab is not None:
                tab[128] = t
            try:
                g = both()
                err = max((a.float() - r.float()).abs().max().item() for a, r in zip(g, ref))
                (g_both, _), (g_fwd, _) = capture_graph(both), capture_graph(fwd)
                ms = (triton.testing.do_bench(g_both.replay, warmup=30, rep=200)
                      - triton.testing.do_bench(g_fwd.replay, warmup=30, rep=200))
                res[lab].append((ms, err))
            except Exception as exc:  # noqa: BLE001
                print(f"window {lab}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            finally:
                if tab is not None:
                    tab[128] = saved
    for lab, r in res.items():
        if r:
            print(f"window(1024,0) 16k bwd {lab:34s} " + " / ".join(f"{ms:.3f}" for ms, _ in r)
                  + f" ms  max|diff| vs default {max(e for _, e in r):.1e}", flush=True)


def main():
    for a in sys.argv[1:]:
        if a == "fwd128":
            for n in (512, 1024):
                fwd_case(128, n, False, "fwd_short",
                         [WS, T(64, 64, 4, 3), T(128, 64, 4, 3), T(128, 64, 8, 3), T(64, 128, 4, 3)])
        elif a == "fwd256":
            for n in (512, 1024):
                fwd_case(256, n, True, "fwd_short_masked",
                         [WS, T(64, 64, 4, 2), T(64, 64, 8, 2), T(64, 32, 4, 2), T(128, 64, 8, 2)])
                fwd_case(256, n, False, "fwd_short", [WS, T(64, 64, 4, 2), T(64, 64, 8, 2), T(128, 64, 8, 2)])
        elif a == "fwd256-long":
            # the fallback table's reach: calls fwd_ws.py cannot take (ALiBi, softcap, ragged
            # counts) read fwd_short_masked up to SHORT_MASKED_SEQLEN (4k); prediction: the
            # 64 x 32 tile level with (128, 64, 8, 2) at 2k, behind at 4k
            for n in (2048, 4096):
                fwd_case(256, n, True, "fwd_short_masked", [WS, T(64, 32, 4, 2), T(128, 64, 8, 2)])
        elif a == "window":
            window_bwd([("default", None, None),
                        ("dkdv (64, 64, 4, 3)", "dkdv", T(64, 64, 4, 3)),
                        ("dkdv (128, 64, 8, 2)", "dkdv", T(128, 64, 8, 2)),
                        ("dq_window (64, 64, 4, 2)", "dq_window", T(64, 64, 4, 2)),
                        ("dq_window (64, 64, 4, 3)", "dq_window", T(64, 64, 4, 3)),
                        ("dq_window (128, 64, 8, 2)", "dq_window", T(128, 64, 8, 2))])
    sys.exit(0)


if __name__ == "__main__":
    main()
