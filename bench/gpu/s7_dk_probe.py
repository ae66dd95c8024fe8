"""Session 7 probe: the warp-specialized dK/dV kernel (kernels/bwd_ws.py) gave a wrong dK
on the H200 (errors 0.5-2.8, dQ right) while passing under the interpreter. Variants of
its loop, each checked against fp32 autograd math, dK and dV separately, with the rows
where dK goes wrong:
  MODE 0: as on the branch: q and dO through 3-D (Nq, H, D) descriptors + reshape
  MODE 1: q and dO through 2-D (Nq, H*D) descriptors, the head as a column offset
  MODE 2: as 0, q loaded a second time for the dK dot
  MODE 3: as 0 without warp_specialize (is the math right at all?)"""
import math

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

LOG2E = 1.4426950408889634


@triton.jit
def dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, H, HK, NQ, NK, sm_scale, qk_scale,
         D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr):
    n_blocks = tl.cdiv(NK, BN)
    hk = tl.program_id(0) // n_blocks
    start_n = (tl.program_id(0) % n_blocks) * BN
    group = H // HK
    kd = tl.make_tensor_descriptor(K + hk * D, shape=[NK, D], strides=[HK * D, 1], block_shape=[BN, D])
    vd = tl.make_tensor_descriptor(V + hk * D, shape=[NK, D], strides=[HK * D, 1], block_shape=[BN, D])
    q3 = tl.make_tensor_descriptor(Q, shape=[NQ, H, D], strides=[H * D, D, 1], block_shape=[BM, 1, D])
    do3 = tl.make_tensor_descriptor(DO, shape=[NQ, H, D], strides=[H * D, D, 1], block_shape=[BM, 1, D])
    q2 = tl.make_tensor_descriptor(Q, shape=[NQ, H * D], strides=[H * D, 1], block_shape=[BM, D])
    do2 = tl.make_tensor_descriptor(DO, shape=[NQ, H * D], strides=[H * D, 1], block_shape=[BM, D])
    ld = tl.make_tensor_descriptor(LSE, shape=[H * NQ], strides=[1], block_shape=[BM])
    dd = tl.make_tensor_descriptor(DELTA, shape=[H * NQ], strides=[1], block_shape=[BM])
    k = kd.load([start_n, 0])
    v = vd.load([start_n, 0])
    dk = tl.zeros([BN, D], dtype=tl.float32)
    dv = tl.zeros([BN, D], dtype=tl.float32)
    m_tiles = NQ // BM
    for t in tl.range(0, group * m_tiles, warp_specialize=(MODE != 3)):
        h = hk * group + t // m_tiles
        start_m = (t % m_tiles) * BM
        if MODE == 1:
            q = q2.load([start_m, h * D])
            do = do2.load([start_m, h * D])
        else:
            q = q3.load([start_m, h, 0]).reshape(BM, D)
            do = do3.load([start_m, h, 0]).reshape(BM, D)
        lse2 = ld.load([h * NQ + start_m]) * 1.4426950408889634
        delta = dd.load([h * NQ + start_m])
        pT = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse2[None, :])
        dv = tl.dot(pT.to(do.dtype), do, dv)
        dpT = tl.dot(v, tl.trans(do))
        dsT = pT * (dpT - delta[None, :])
        if MODE == 2:
            qb = q3.load([start_m, h, 0]).reshape(BM, D)
            dk = tl.dot(dsT.to(qb.dtype), qb, dk)
        else:
            dk = tl.dot(dsT.to(q.dtype), q, dk)
    dkd = tl.make_tensor_descriptor(DK + hk * D, shape=[NK, D], strides=[HK * D, 1], block_shape=[BN, D])
    dvd = tl.make_tensor_descriptor(DV + hk * D, shape=[NK, D], strides=[HK * D, 1], block_shape=[BN, D])
    dkd.store([start_n, 0], (dk * sm_scale).to(DK.dtype.element_ty))
    dvd.store([start_n, 0], dv.to(DV.dtype.element_ty))


def main():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(0)
    D = 128
    for (h, hk, nq, nk) in ((4, 2, 256, 256), (2, 2, 384, 128), (16, 16, 4096, 4096)):
        q = torch.randn(nq, h, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(nk, hk, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(nk, hk, D, device="cuda", dtype=torch.bfloat16)
        do = torch.randn(nq, h, D, device="cuda", dtype=torch.bfloat16)
        sm = 1 / math.sqrt(D)
        qf, kf, vf = (t.float().transpose(0, 1).requires_grad_() for t in (q, k, v))
        kr, vr = kf.repeat_interleave(h // hk, 0), vf.repeat_interleave(h // hk, 0)
        s = qf @ kr.transpose(1, 2) * sm
        lse = s.logsumexp(-1)                                        # (H, NQ)
        o = s.softmax(-1) @ vr
        o.backward(do.float().transpose(0, 1))
        delta = (o.detach() * do.float().transpose(0, 1)).sum(-1)   # (H, NQ)
        rdk, rdv = kf.grad.transpose(0, 1), vf.grad.transpose(0, 1)
        lse, delta = lse.detach().contiguous(), delta.contiguous()
        for mode in (0, 1, 2, 3):
            dk = torch.full_like(k, float("nan"))
            dv = torch.full_like(v, float("nan"))
            grid = (hk * triton.cdiv(nk, 128),)
            args = (q, k, v, do, lse, delta, dk, dv, h, hk, nq, nk, sm, sm * LOG2E)
            try:
                dkdv[grid](*args, D=D, BM=64, BN=128, MODE=mode, num_warps=4, num_stages=2)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                print(f"h={h} hk={hk} nq={nq} nk={nk} MODE {mode}: {type(e).__name__}: {str(e)[:300]}")
                continue
            ek = (dk.float() - rdk).abs()
            ev = (dv.float() - rdv).abs()
            bad = (ek.amax(dim=(1, 2)) > 0.05).nonzero().flatten()
            rows = sorted(set((bad % 128).tolist()))
            line = (f"h={h} hk={hk} nq={nq} nk={nk} MODE {mode}: dk err {ek.max().item():.3e}, "
                    f"dv err {ev.max().item():.3e}, bad dk rows {bad.numel()} (row % 128 in "
                    f"{rows[:3]}..{rows[-3:] if rows else ''})")
            if nq >= 4096:
                ms = do_bench(lambda: dkdv[grid](*args, D=D, BM=64, BN=128, MODE=mode, num_warps=4, num_stages=2))
                line += f", {ms * 1e3:.0f} us, {8 * h * nq * nk * D / ms / 1e9:.0f} TFLOP/s (dkdv 4 matmuls)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
