"""Session 12: the backward at N = 512 / 1k, where the grid has it behind FA2's CUDA kernels
(D = 64 non-causal 187 / 239 TFLOP/s against 207 / 242; D = 64 causal 122 / 179 against
138 / 185; D = 256 causal 100 / 147 against 139 / 179; D = 128 causal 133 / 191 against
154 / 206). Earlier A/Bs there ran eagerly with the launch plans off and were host-bound
(bench/NOTES.md, "Session 11", correction): here every variant is timed as a CUDA-graph
replay (forward+backward replay minus forward replay), so only the GPU time counts.

Variants patch configs.DEFAULTS (dkdv / dkdv_masked / dq for this BLOCK_D), the layout
(launchers.backward.DKDV_QUERY_ROWS) and the whole-call warp-specialized backward
(launchers.policy.BWD_WHOLE_MIN_N; both were in launchers/prefill.py when call 4 ran).
First variant = today's default. Prediction (written before the run):
at these sizes a backward is 60-130 programs short of two waves (16k tokens), so smaller
query tiles for dQ (64 rows: twice the programs) and 64-key dK/dV tiles should win
5-15% where the default has 128-row dQ tiles; D = 64 non-causal whole warp-specialized
stays slower (the eager A/B had it 15% behind; as graphs maybe level).
"""
import os
import sys

os.environ["FLASHTRITON_PLANS"] = "0"     # variants change module constants

import torch
import triton

import flashtriton
from flashtriton.bench.common import attention_flops, capture_graph
from flashtriton.kernels import configs
from flashtriton.launchers import backward, policy, prefill

T = configs.Tile


def graph_bwd_ms(q, k, v, causal):
    """Backward time as (forward+backward replay) - (forward replay), and the gradients."""
    dout = torch.randn_like(q)

    def fwd_bwd():
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        return torch.autograd.grad(out, (q, k, v), dout)

    def fwd():
        with torch.no_grad():
            return (flashtriton.flash_attn_func(q, k, v, causal=causal),)

    g_both, grads = capture_graph(fwd_bwd)
    g_fwd, _ = capture_graph(fwd)
    both = triton.testing.do_bench(g_both.replay, warmup=30, rep=200)
    only = triton.testing.do_bench(g_fwd.replay, warmup=30, rep=200)
    return both - only, [g.clone() for g in grads]


def variant_label(v):
    return " ".join(f"{k}={(x.block_m, x.block_n, x.num_warps, x.num_stages) if isinstance(x, T) else x}" for k, x in v.items()) or "default"


def apply(v, bd):
    """Patch the module constants for variant v; returns an undo function."""
    saved = {name: dict(configs.DEFAULTS.get(name, {})) for name in ("dkdv", "dkdv_masked", "dq")}
    rows, whole = set(backward.DKDV_QUERY_ROWS), dict(policy.BWD_WHOLE_MIN_N)
    if "dkdv" in v:
        configs.DEFAULTS["dkdv"][bd] = v["dkdv"]
        if bd in configs.DEFAULTS["dkdv_masked"]:
            configs.DEFAULTS["dkdv_masked"][bd] = v["dkdv"]
    if "dq" in v:
        configs.DEFAULTS["dq"][bd] = v["dq"]
    if "rows" in v:
        backward.DKDV_QUERY_ROWS.discard(bd)
        if v["rows"] == "query":
            backward.DKDV_QUERY_ROWS.add(bd)
    if v.get("whole"):
        policy.BWD_WHOLE_MIN_N[bd] = 0

    def undo():
        for name, d in saved.items():
            configs.DEFAULTS[name].clear()
            configs.DEFAULTS[name].update(d)
        backward.DKDV_QUERY_ROWS.clear()
        backward.DKDV_QUERY_ROWS.update(rows)
        policy.BWD_WHOLE_MIN_N.clear()
        policy.BWD_WHOLE_MIN_N.update(whole)
    return undo


D64_FULL = [{}, dict(rows="query", dkdv=T(64, 64, 4, 3)), dict(rows="query", dkdv=T(128, 64, 8, 2)),
            dict(dq=T(64, 64, 4, 3)), dict(whole=True)]
D64_CAUSAL = [{}, dict(rows="key", dkdv=T(32, 128, 4, 2)), dict(rows="query", dkdv=T(64, 64, 4, 2)),
              dict(dq=T(64, 64, 4, 3)), dict(dq=T(64, 64, 4, 2))]
D128_CAUSAL = [{}, dict(dkdv=T(64, 64, 4, 3)), dict(dq=T(64, 64, 4, 2)), dict(dq=T(64, 64, 4, 3)),
               dict(dq=T(64, 128, 4, 2))]
D256_CAUSAL = [{}, dict(rows="key", dkdv=T(64, 64, 8, 2)), dict(rows="query", dkdv=T(64, 64, 4, 2)),
               dict(rows="query", dkdv=T(64, 64, 8, 2)), dict(dq=T(64, 32, 4, 2)), dict(dq=T(64, 64, 4, 2))]

CASES = [(64, False, D64_FULL), (64, True, D64_CAUSAL), (128, True, D128_CAUSAL), (256, True, D256_CAUSAL)]


def main():
    hidden = 2048
    for d, causal, variants in CASES:
        h = hidden // d
        bd = prefill.block_d(d)
        for n in (512, 1024):
            b = 16384 // n
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            flops = attention_flops(b, h, n, n, d, causal) * 2.5
            base = None
            for var in variants:
                undo = apply(var, bd)
                try:
                    ms, g = graph_bwd_ms(q, k, v, causal)
                    base = g if base is None else base
                    err = max((a.float() - r.float()).abs().max().item() for a, r in zip(g, base))
                    print(f"D={d} N={n} causal={causal} {variant_label(var):42s} bwd {ms * 1e3:7.1f} us "
                          f"{flops / ms / 1e9:6.1f} TFLOP/s max|diff| vs first {err:.1e}", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"D={d} N={n} causal={causal} {variant_label(var)}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:150]}", flush=True)
                finally:
                    undo()
            del q, k, v, base
    sys.exit(0)


if __name__ == "__main__":
    main()
