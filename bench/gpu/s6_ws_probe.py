"""Session 6 probe: does Triton 3.6's Hopper warp specialization (tl.range(...,
warp_specialize=True), num_warps=4 -> one producer and two consumer warpgroups, seen in
the offline sm_90a compile) speed up a FlashAttention-2 forward loop on the H200?

A minimal non-causal forward (one loop, device-made descriptors, (B*H, N, D) layout),
written for this probe, timed with and without the flag at the paper grid's D = 128
shapes, beside our forward and SDPA's cuDNN backend on the same-sized problem. Every
variant's output is checked against SDPA (max abs error) before it is timed."""
import math
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def mini_fwd(Q, K, V, O, N, qk_scale, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, WS: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    qd = tl.make_tensor_descriptor(Q + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BM, D])
    kd = tl.make_tensor_descriptor(K + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BN, D])
    vd = tl.make_tensor_descriptor(V + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BN, D])
    od = tl.make_tensor_descriptor(O + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BM, D])
    q = qd.load([pid * BM, 0])                                   # (BM, D)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for start in tl.range(0, N, BN, warp_specialize=WS):
        k = kd.load([start, 0])                                  # (BN, D)
        s = tl.dot(q, k.T)                                       # (BM, BN)
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
    sys.path.insert(0, "src")
    import flashtriton
    from torch.nn.attention import SDPBackend, sdpa_kernel
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    d, h = 128, 16
    for n in (2048, 4096, 16384):
        b = 16384 // n
        flops = 4 * b * h * n * n * d
        q, k, v = (torch.randn(b * h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            ref = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]
            t = do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None]),
                         warmup=25, rep=200, return_mode="median")
        print(f"N={n} cudnn: {flops / t / 1e9:.0f} TFLOP/s", flush=True)
        qb, kb, vb = (x.view(b, h, n, d).transpose(1, 2) for x in (q, k, v))   # (B, N, H, D) views
        qb, kb, vb = (x.contiguous() for x in (qb, kb, vb))
        t = do_bench(lambda: flashtriton.flash_attn_func(qb, kb, vb), warmup=25, rep=200, return_mode="median")
        print(f"N={n} flashtriton: {flops / t / 1e9:.0f} TFLOP/s", flush=True)
        o = torch.empty_like(q)
        scale = 1 / math.sqrt(d) * 1.4426950408889634
        for bm, bn, w, s in [(128, 128, 4, 2), (128, 128, 4, 3), (128, 64, 4, 3), (128, 64, 4, 4), (128, 128, 8, 2)]:
            for ws in (False, True):
                label = f"N={n} mini BM={bm} BN={bn} w={w} s={s} ws={ws}"
                try:
                    grid = (n // bm, b * h)
                    fn = lambda: mini_fwd[grid](q, k, v, o, n, scale, BM=bm, BN=bn, D=d, WS=ws,  # noqa: E731
                                                num_warps=w, num_stages=s)
                    o.fill_(float("nan"))
                    fn()
                    err = (o.float() - ref.float()).abs().max().item()
                    t = do_bench(fn, warmup=25, rep=200, return_mode="median")
                    print(f"{label}: {flops / t / 1e9:.0f} TFLOP/s, max err {err:.1e}", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"{label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        del q, k, v, o, qb, kb, vb, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
