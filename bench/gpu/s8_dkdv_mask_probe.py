"""Next-session probe (written in session 7): a causal mask inside the warp-specialized
dK/dV loop. Session 7's attempt (a (BLOCK_N, BLOCK_M) table of r - c loaded once before
the loop through a 2-D descriptor) compiled but gave wrong dK on the H200; a key index
loaded through a 1-D descriptor and combined with a column index failed the
NVGPUWarpSpecialization pass. Candidates, each checked against fp32 autograd (dK and dV,
rows where dK goes wrong) and timed:
  MODE 0: no mask, all query tiles (the speed reference; wrong for causal by design)
  MODE 1: the r - c table (int32) loaded INSIDE the loop, each tile, by the producer
  MODE 2: the same table as int8 (8 KB a tile instead of 32)
  MODE 3: r - c from a small matmul in the loop: R (BLOCK_N, 16) = [r, 1, 0...] and
          C (16, BLOCK_M) = [1; -c; 0...], both loaded once (bf16 holds these integers
          exactly), so r - c lands in the accumulator layout the consumers split
  MODE 4: the session-7 variant (table loaded once before the loop): the control"""
import math

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

LOG2E = 1.4426950408889634


@triton.jit
def dkdv_causal(Q, K, V, DO, LSE, DELTA, DK, DV, RC, RC8, RM, CM, H, N, sm_scale, qk_scale,
                D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr):
    n_blocks = tl.cdiv(N, BN)
    h = tl.program_id(0) // n_blocks
    start_n = (tl.program_id(0) % n_blocks) * BN
    kd = tl.make_tensor_descriptor(K + h * D, shape=[N, D], strides=[H * D, 1], block_shape=[BN, D])
    vd = tl.make_tensor_descriptor(V + h * D, shape=[N, D], strides=[H * D, 1], block_shape=[BN, D])
    qd = tl.make_tensor_descriptor(Q + h * D, shape=[N, D], strides=[H * D, 1], block_shape=[BM, D])
    dod = tl.make_tensor_descriptor(DO + h * D, shape=[N, D], strides=[H * D, 1], block_shape=[BM, D])
    ld = tl.make_tensor_descriptor(LSE, shape=[H * N], strides=[1], block_shape=[BM])
    dd = tl.make_tensor_descriptor(DELTA, shape=[H * N], strides=[1], block_shape=[BM])
    rcd = tl.make_tensor_descriptor(RC, shape=[BN, BM], strides=[BM, 1], block_shape=[BN, BM])
    rc8d = tl.make_tensor_descriptor(RC8, shape=[BN, BM], strides=[BM, 1], block_shape=[BN, BM])
    rmd = tl.make_tensor_descriptor(RM, shape=[BN, 16], strides=[16, 1], block_shape=[BN, 16])
    cmd = tl.make_tensor_descriptor(CM, shape=[16, BM], strides=[BM, 1], block_shape=[16, BM])
    k = kd.load([start_n, 0])
    v = vd.load([start_n, 0])
    if MODE == 3:
        rm = rmd.load([0, 0])
        cm = cmd.load([0, 0])
    if MODE == 4:
        rc_pre = rcd.load([0, 0])
    dk = tl.zeros([BN, D], dtype=tl.float32)
    dv = tl.zeros([BN, D], dtype=tl.float32)
    lo = 0
    if MODE != 0:
        lo = start_n // BM * BM                  # the query tiles at or below the diagonal
    for start_m in tl.range(lo, N, BM, warp_specialize=True):
        q = qd.load([start_m, 0])
        do = dod.load([start_m, 0])
        lse2 = ld.load([h * N + start_m]) * 1.4426950408889634
        delta = dd.load([h * N + start_m])
        pT = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse2[None, :])     # (BN, BM)
        shift = start_m - start_n               # key k = start_n + r visible to q = start_m + c iff r - c <= shift
        if MODE == 1:
            pT = tl.where(rcd.load([0, 0]) <= shift, pT, 0.0)
        elif MODE == 2:
            pT = tl.where(rc8d.load([0, 0]).to(tl.int32) <= shift, pT, 0.0)
        elif MODE == 3:
            pT = tl.where(tl.dot(rm, cm) <= shift.to(tl.float32), pT, 0.0)
        elif MODE == 4:
            pT = tl.where(rc_pre <= shift, pT, 0.0)
        dv = tl.dot(pT.to(do.dtype), do, dv)
        dpT = tl.dot(v, tl.trans(do))
        dsT = pT * (dpT - delta[None, :])
        dk = tl.dot(dsT.to(q.dtype), q, dk)
    dkd = tl.make_tensor_descriptor(DK + h * D, shape=[N, D], strides=[H * D, 1], block_shape=[BN, D])
    dvd = tl.make_tensor_descriptor(DV + h * D, shape=[N, D], strides=[H * D, 1], block_shape=[BN, D])
    dkd.store([start_n, 0], (dk * sm_scale).to(DK.dtype.element_ty))
    dvd.store([start_n, 0], dv.to(DV.dtype.element_ty))


def tables(bn, bm, device):
    r = torch.arange(bn, device=device, dtype=torch.int32)[:, None]
    c = torch.arange(bm, device=device, dtype=torch.int32)[None, :]
    rc = (r - c).contiguous()
    rm = torch.zeros(bn, 16, device=device, dtype=torch.bfloat16)
    rm[:, 0], rm[:, 1] = torch.arange(bn, device=device), 1
    cm = torch.zeros(16, bm, device=device, dtype=torch.bfloat16)
    cm[0], cm[1] = 1, -torch.arange(bm, device=device)
    return rc, rc.to(torch.int8).contiguous(), rm, cm


def main():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.manual_seed(0)
    D, BM, BN = 128, 64, 128
    rc, rc8, rm, cm = tables(BN, BM, "cuda")
    for h, n in ((2, 512), (16, 4096)):
        q, k, v, do = (torch.randn(n, h, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        sm = 1 / math.sqrt(D)
        qf, kf, vf = (t.float().transpose(0, 1).requires_grad_() for t in (q, k, v))
        s = (qf @ kf.transpose(1, 2) * sm).masked_fill(torch.ones(n, n, device="cuda", dtype=torch.bool).triu(1),
                                                       float("-inf"))
        lse = s.logsumexp(-1)
        o = s.softmax(-1) @ vf
        o.backward(do.float().transpose(0, 1))
        delta = (o.detach() * do.float().transpose(0, 1)).sum(-1).contiguous()
        lse = lse.detach().contiguous()
        rdk, rdv = kf.grad.transpose(0, 1), vf.grad.transpose(0, 1)
        for mode in range(5):
            dk, dv = torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))
            args = (q, k, v, do, lse, delta, dk, dv, rc, rc8, rm, cm, h, n, sm, sm * LOG2E)
            grid = (h * triton.cdiv(n, BN),)
            try:
                dkdv_causal[grid](*args, D=D, BM=BM, BN=BN, MODE=mode, num_warps=4, num_stages=2)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                print(f"N={n} MODE {mode}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            ek, ev = (dk.float() - rdk).abs(), (dv.float() - rdv).abs()
            bad = (ek.amax(dim=(1, 2)) > 0.05).nonzero().flatten()
            ms = do_bench(lambda: dkdv_causal[grid](*args, D=D, BM=BM, BN=BN, MODE=mode, num_warps=4, num_stages=2))
            print(f"N={n} MODE {mode}: dk err {ek.max().item():.2e}, dv err {ev.max().item():.2e}, bad dk rows "
                  f"{bad.numel()} (row % 128: {sorted(set((bad % 128).tolist()))[:4]}), {ms * 1e3:.0f} us, "
                  f"{4 * h * n * n * D / 2 / ms / 1e9:.0f} TFLOP/s (causal, 4 matmuls)", flush=True)


if __name__ == "__main__":
    main()
