"""Session 7 probe: can a warp-specialized forward (Hopper, Triton 3.6) mask by query row
if the row indices arrive through a descriptor instead of tl.arange? Session 6 found a
causal mask built from tl.arange rows wrong in the second consumer warpgroup
(s6_ws_mask_probe.py MODE 3), while row data loaded through descriptors (lse, delta in
the backward kernels) is right. Here the rows come from an int32 iota table through a
1-D descriptor:
  MODE 3: causal, rows from tl.arange (session 6: wrong; the control)
  MODE 4: causal, rows from the iota descriptor
  MODE 5: sliding window (1024, 0), rows from the iota descriptor, loop over the band
Each checked against SDPA math in fp32, timed, and set against the library's current
causal / window forward (fwd.py) on the same inputs."""
import math

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

import flashtriton


@triton.jit
def probe_fwd(Q, K, V, O, IOTA, N, n_iota, qk_scale, LEFT, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
              MODE: tl.constexpr):
    pid = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    qd = tl.make_tensor_descriptor(Q + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BM, D])
    kd = tl.make_tensor_descriptor(K + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BN, D])
    vd = tl.make_tensor_descriptor(V + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BN, D])
    od = tl.make_tensor_descriptor(O + bh * N * D, shape=[N, D], strides=[D, 1], block_shape=[BM, D])
    iota = tl.make_tensor_descriptor(IOTA, shape=[n_iota], strides=[1], block_shape=[BM])
    q = qd.load([pid * BM, 0])
    if MODE == 3:
        rows = pid * BM + tl.arange(0, BM)
    else:
        rows = iota.load([pid * BM])                                    # (BM,) int32 query rows
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    hi = (pid + 1) * BM
    lo = 0
    if MODE == 5:
        lo = tl.maximum(pid * BM - LEFT, 0) // BN * BN
    offs_n = tl.arange(0, BN)
    for start in tl.range(lo, hi, BN, warp_specialize=True):
        k = kd.load([start, 0])
        s = tl.dot(q, k.T)
        cols = (start + offs_n)[None, :]
        if MODE == 5:
            vis = (cols <= rows[:, None]) & (cols >= rows[:, None] - LEFT)
        else:
            vis = cols <= rows[:, None]
        s = tl.where(vis, s, float("-inf"))
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
    d, h, left = 128, 16, 1024
    for n in (2048, 16384):
        b = 16384 // n
        q, k, v = (torch.randn(b * h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o = torch.empty_like(q)
        iota = torch.arange(n, device="cuda", dtype=torch.int32)
        scale = 1 / math.sqrt(d) * 1.4426950408889634
        # the library on the same data, (B, N, H, D) views
        qb, kb, vb = (t.view(b, h, n, d).transpose(1, 2) for t in (q, k, v))
        for mode in (3, 4, 5):
            mask = torch.ones(n, n, device="cuda", dtype=torch.bool).tril()
            if mode == 5:
                mask &= ~torch.ones(n, n, device="cuda", dtype=torch.bool).tril(-left - 1)
            ref = torch.empty(b * h, n, d, device="cuda")
            for i in range(0, b * h, 4):  # fp32 math in chunks
                ref[i:i + 4] = torch.nn.functional.scaled_dot_product_attention(
                    q[i:i + 4].float(), k[i:i + 4].float(), v[i:i + 4].float(), attn_mask=mask)
            fn = lambda: probe_fwd[(n // 128, b * h)](q, k, v, o, iota, n, n, scale, left, BM=128, BN=128,  # noqa: E731
                                                      D=d, MODE=mode, num_warps=4, num_stages=2)
            o.fill_(float("nan"))
            fn()
            err = (o.float() - ref).abs().max().item()
            t = do_bench(fn, warmup=25, rep=100, return_mode="median")
            ws = (-1, 0) if mode != 5 else (left, 0)
            lib = lambda: flashtriton.flash_attn_func(qb, kb, vb, window_size=ws)  # noqa: E731
            lib_err = (lib().transpose(1, 2).reshape(b * h, n, d).float() - ref).abs().max().item()
            t_lib = do_bench(lib, warmup=25, rep=100, return_mode="median")
            print(f"N={n} MODE={mode}: err {err:.1e} (library {lib_err:.1e}), probe {t * 1e3:.0f} us, "
                  f"library {t_lib * 1e3:.0f} us, probe/library speed {t_lib / t:.2f}x", flush=True)
            del ref
        del q, k, v, o
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
