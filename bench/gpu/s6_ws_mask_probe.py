"""Session 6 probe 2: can a warp-specialized forward loop (Hopper, Triton 3.6) mask
scores at all on the GPU? Session 6's first masked version (a per-row key limit computed
before the loop, compared in every tile) passed under the interpreter and was wrong on
the H200. Here the mask is computed inside the loop from tl.arange (MODE 2: key index
against the key count, for ragged N; MODE 3: causal, key <= query row), each checked
against SDPA (math, fp32) and timed."""
import math

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def probe_fwd(Q, K, V, O, N, NV, qk_scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    qd = tl.make_tensor_descriptor(Q + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BM, D])
    kd = tl.make_tensor_descriptor(K + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BN, D])
    vd = tl.make_tensor_descriptor(V + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BN, D])
    od = tl.make_tensor_descriptor(O + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BM, D])
    q = qd.load([pid * BM, 0])
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    hi = N
    if MODE == 3:
        hi = (pid + 1) * BM
    for start in tl.range(0, hi, BN, warp_specialize=True):
        k = kd.load([start, 0])
        s = tl.dot(q, k.T)
        if MODE == 2:
            s = tl.where((start + tl.arange(0, BN))[None, :] < NV, s, float("-inf"))
        elif MODE == 3:
            offs_m = pid * BM + tl.arange(0, BM)
            s = tl.where((start + tl.arange(0, BN))[None, :] <= offs_m[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        p = tl.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = vd.load([start, 0])
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        m_i = m_new
    od.store([pid * BM, 0], (acc / l_i[:, None]).to(tl.bfloat16))


def main():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    d, h = 128, 16
    for n in (2048, 16384):
        b = 16384 // n
        q, k, v = (torch.randn(b * h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        scale = 1 / math.sqrt(d) * 1.4426950408889634
        for mode, nv in ((0, n), (2, n - 50), (3, n)):
            causal = mode == 3
            kk, vv = k.clone(), v.clone()
            if mode == 2:
                kk[:, nv:], vv[:, nv:] = 0, 0
            ref = torch.nn.functional.scaled_dot_product_attention(
                q[None].float(), kk[None, :, :nv].float(), vv[None, :, :nv].float(), is_causal=causal)[0]
            fn = lambda: probe_fwd[(n // 128, b * h)](q, kk, vv, o, n, nv, scale, BM=128, BN=128, D=d,  # noqa: E731
                                                      MODE=mode, num_warps=4, num_stages=2)
            o.fill_(float("nan"))
            fn()
            err = (o.float() - ref).abs().max().item()
            t = do_bench(fn, warmup=25, rep=100, return_mode="median")
            flops = 4 * b * h * n * n * d / (2 if causal else 1)
            print(f"N={n} MODE={mode}: max err {err:.1e}, {flops / t / 1e9:.0f} TFLOP/s "
                  f"({'causal' if causal else 'ragged' if mode == 2 else 'plain'})", flush=True)
        del q, k, v, o
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
