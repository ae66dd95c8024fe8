"""Session 10: the dropout dK/dV kernel with its keep mask used once (P_kept; dS = P_kept dP -
P (1 - p) delta) against the previous form (the mask selecting P before the dV dot and dP
after the dP dot, which LLVM kept live across that wgmma by packing its booleans into bit
fields: sm_90a loop 708 SASS instructions against 592, but 324 bytes of spill against 148).
The previous form is rebuilt from the source at run time (no second copy in the tree). (That
source was call 2's tree; the float mask of call 7 rewrote these lines, so the rebuild's
assert fails on the final tree: the script records what ran in call 2.) Prediction: -5 to
-10% of the dropout dK/dV time (1.18 ms at B=2 H=16 N=4k D=128).
Also: the timeline of one causal fwd+bwd (p = 0, D = 128, N = 4k), whose do_bench time
(2.02 ms) exceeds the sum of its kernels (1.51 ms) in call 1."""
import importlib
import os
import pathlib
import sys

CUR = '''            rk = keys_desc_m.load([seqlen_k + h * rng_rows + b * seqlen_q + start_m]).to(tl.uint32, bitcast=True)
            pT_kept = tl.where(dropout_keep_keys(rk[None, :], ck[:, None], mk, threshold), pT, 0.0)
            dv = tl.dot(pT_kept.to(do.dtype), do, dv)
            dpT = tl.dot(v, tl.trans(do))                               # (BLOCK_N, BLOCK_M)
            dsT = pT_kept * dpT - pT * (delta * keep_frac)[None, :]
'''
PREV = '''            rk = keys_desc_m.load([seqlen_k + h * rng_rows + b * seqlen_q + start_m]).to(tl.uint32, bitcast=True)
            keepT = dropout_keep_keys(rk[None, :], ck[:, None], mk, threshold)
            dv = tl.dot(tl.where(keepT, pT, 0.0).to(do.dtype), do, dv)
            dpT = tl.dot(v, tl.trans(do))                               # (BLOCK_N, BLOCK_M)
            dpT = tl.where(keepT, dpT, 0.0)
            dsT = pT * (dpT - (delta * keep_frac)[None, :])
'''


def prev_module():
    import flashtriton.kernels.bwd_ws as cur
    src = pathlib.Path(cur.__file__).read_text()
    assert CUR in src
    path = pathlib.Path(cur.__file__).with_name("_bwd_ws_prev.py")
    path.write_text(src.replace(CUR, PREV))
    return importlib.import_module("flashtriton.kernels._bwd_ws_prev")


def ab():
    import torch
    import triton
    import flashtriton
    from flashtriton.launchers import prefill
    variants = {"one-use": prefill.attn_bwd_dkdv_ws_kernel, "prev": prev_module().attn_bwd_dkdv_ws_kernel}
    b, n, h, d = 2, 4096, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    grads = {}
    for rep in range(2):
        for name, kern in variants.items():
            prefill.attn_bwd_dkdv_ws_kernel = kern
            torch.manual_seed(5)
            out = flashtriton.flash_attn_func(q, k, v, dropout_p=0.1)
            g = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
            grads[name] = g
            ms_b = triton.testing.do_bench(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
            ms_fb = triton.testing.do_bench(
                lambda: torch.autograd.grad(flashtriton.flash_attn_func(q, k, v, dropout_p=0.1), (q, k, v), dout))
            print(f"rep {rep} dK/dV {name}: bwd {ms_b:.3f} ms, fwd+bwd {ms_fb:.3f} ms", flush=True)
    diff = [(a.float() - c.float()).abs().max().item() for a, c in zip(grads["one-use"], grads["prev"])]
    print("max |grad difference| one-use vs prev (dq, dk, dv):", diff, flush=True)
    prefill.attn_bwd_dkdv_ws_kernel = variants["one-use"]


def timeline():
    import torch
    import flashtriton
    from torch.profiler import ProfilerActivity, profile
    b, n, h, d = 2, 4096, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    f = lambda: torch.autograd.grad(flashtriton.flash_attn_func(q, k, v, causal=True), (q, k, v), dout)  # noqa: E731
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            f()
        torch.cuda.synchronize()
    evs = []
    for e in prof.events():
        name = e.name
        if e.device_type.name == "CUDA":
            evs.append((e.time_range.start, e.time_range.end, "GPU", name[:50]))
        elif any(s in name for s in ("cudaLaunch", "cuLaunch", "Synchronize", "cudaMemcpy", "cudaMalloc", "cudaFree",
                                     "cudaEvent", "cuMemAlloc", "cudaStreamWait")):
            evs.append((e.time_range.start, e.time_range.end, "CPU", name[:50]))
    evs.sort()
    t0 = evs[0][0]
    for s, e, where, name in evs[-60:]:
        print(f"{(s - t0):10.1f} {(e - s):8.1f} {where} {name}")


if __name__ == "__main__":
    ab()
    timeline()
    sys.exit(0)
