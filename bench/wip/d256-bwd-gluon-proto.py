"""Offline prototype (sm_90a compile only, never run) of a fused Gluon backward at D = 256,
candidate (c) of bench/wip/d256-bwd-gluon.md: one CTA per 64 keys x D = 256,
  WG_S (the default partition, 4 warps): S^T = K Q^T, dP^T = V dO^T (64 keys x BLOCK_M, K = 256),
        P^T, dS^T (16-bit) to shared memory, dQ = dS K in 64-column chunks reduce-added by TMA
  WG_0 / WG_1 (workers, 4 warps each): dV[:, D-half w] += P^T dO[:, half w],
        dK[:, D-half w] += dS^T Q[:, half w] (both operands in shared memory), 64 + 64 fp32 acc
  loader (1 warp): K, V once; Q / dO ring of NUM_STAGES.
Barriers: kv_bar; ready[s] (count 1, TMA), empty[s] (count 3: WG_S after S^T / dP^T, WG_0 / WG_1
after dK / dV); pds_ready[b] (count 1: WG_S after P^T, dS^T stored), pds_free[b] (count 2: WG_0 / 1
after their dK / dV wgmmas retired; WG_S's own dQ reads of buffer b precede its next store in
program order); kv_free (count 1: WG_S after its last dQ: K no longer read) before dK / dV leave
through K / V's buffers.
Original code for flashtriton (bench/wip/d256-bwd-gluon-proto.py). A compile probe of registers,
spills, shared memory and wgmma shapes, NOT a kernel: no causal / GQA rotation / masking, never run,
its barrier protocol argued in bench/wip/d256-bwd-gluon.md but untested. Variants: DQ_ATOMIC (dQ by
red.global.add from registers, no staging; scalar REDG in Triton 3.6), DQ_PIPE (next dQ chunk issued
before the current one's staging: compiled to the same instruction count), DQ_CHUNK 64 / 128."""
from __future__ import annotations

import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language import NVMMASharedLayout
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)
import triton.language as tl

from flashtriton.kernels.bwd_gluon_fused import async_reduce_add, dq_stage_layout

LOG2E: gl.constexpr = gl.constexpr(1.4426950408889634)
ONE: gl.constexpr = gl.constexpr(1)
W0: gl.constexpr = gl.constexpr(0)
W1: gl.constexpr = gl.constexpr(1)


@gluon.jit
def _load(q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, kv_bar, ready, empty, seqlen_q,
          seqlen_k, nheads_k, group, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
          NUM_STAGES: gl.constexpr):
    b = gl.program_id(1) // nheads_k
    hk = gl.program_id(1) % nheads_k
    n0 = gl.program_id(0) * BLOCK_N
    n_m = seqlen_q // BLOCK_M
    mbarrier.expect(kv_bar, 2 * k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [b * seqlen_k + n0, hk * HEAD_DIM], kv_bar, k_smem)
    tma.async_copy_global_to_shared(v_desc, [b * seqlen_k + n0, hk * HEAD_DIM], kv_bar, v_smem)
    STAGE_BYTES: gl.constexpr = 2 * q_desc.block_type.nbytes
    for g in range(group * n_m):
        hh = g // n_m
        j = g - hh * n_m
        h = hk * group + hh
        stage = g % NUM_STAGES
        mbarrier.wait(empty.index(stage), ((g // NUM_STAGES) & 1) ^ 1)
        bar = ready.index(stage)
        mbarrier.expect(bar, STAGE_BYTES)
        tma.async_copy_global_to_shared(q_desc, [b * seqlen_q + j * BLOCK_M, h * HEAD_DIM], bar, q_smem.index(stage))
        tma.async_copy_global_to_shared(do_desc, [b * seqlen_q + j * BLOCK_M, h * HEAD_DIM], bar,
                                        do_smem.index(stage))


@gluon.jit
def _softmax_wg(q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, dq_stage, kv_bar, ready, empty, pds_ready,
                pds_free, kv_free, dq_desc, LSE, DELTA, seqlen_q, nheads, nheads_k, group, softmax_scale, qk_scale,
                HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                NUM_PDS: gl.constexpr, DQ_CHUNK: gl.constexpr, DQ, DQ_ATOMIC: gl.constexpr,
                DQ_PIPE: gl.constexpr):
    dtype: gl.constexpr = k_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    q_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, DQ_CHUNK, 16])
    col: gl.constexpr = gl.SliceLayout(0, s_layout)
    vec_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    b = gl.program_id(1) // nheads_k
    hk = gl.program_id(1) % nheads_k
    n_m = seqlen_q // BLOCK_M
    s_zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout)
    dq_zero = gl.zeros([BLOCK_M, DQ_CHUNK], gl.float32, q_layout)
    vec_base = (b * nheads + hk * group) * seqlen_q
    mbarrier.wait(kv_bar, 0)
    n_tiles = group * n_m
    for g in range(n_tiles):
        hh = g // n_m
        j = g - hh * n_m
        h = hk * group + hh
        stage = g % NUM_STAGES
        buf = g % NUM_PDS
        offs_m = vec_base + hh * seqlen_q + j * BLOCK_M + gl.arange(0, BLOCK_M, layout=vec_layout)
        lse_c = gl.load(LSE + offs_m)
        delta_c = gl.load(DELTA + offs_m)
        mbarrier.wait(ready.index(stage), (g // NUM_STAGES) & 1)
        q = q_smem.index(stage)
        do = do_smem.index(stage)
        s_tok = warpgroup_mma(k_smem, q.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        dp_tok = warpgroup_mma(v_smem, do.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(1, deps=[s_tok])
        lse_v = gl.convert_layout(lse_c, col)
        p = gl.exp2(s * qk_scale - gl.expand_dims(lse_v * LOG2E, 0))
        dp = warpgroup_mma_wait(0, deps=[dp_tok])
        mbarrier.arrive(empty.index(stage))                 # WG_S done with Q / dO of this stage
        delta = gl.convert_layout(delta_c, col)
        ds = (p * (dp - gl.expand_dims(delta, 0))).to(dtype)
        # buffer free: WG_0 / WG_1 retired their dK / dV of tile g - NUM_PDS
        mbarrier.wait(pds_free.index(buf), ((g // NUM_PDS) & 1) ^ 1)
        pb = p_smem.index(buf)
        db = ds_smem.index(buf)
        pb.store(p.to(dtype))
        db.store(ds)
        fence_async_shared()
        mbarrier.arrive(pds_ready.index(buf))
        # dQ = dS K in D / DQ_CHUNK chunks: A the permuted dS^T (queries x keys), B K's column chunk
        row = b * seqlen_q + j * BLOCK_M
        if DQ_ATOMIC:
            # dQ by register atomics (red.global.add) straight from the accumulator: no staging
            offs_r = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, q_layout))
            offs_c = gl.arange(0, DQ_CHUNK, layout=gl.SliceLayout(0, q_layout))
            for c in gl.static_range(HEAD_DIM // DQ_CHUNK):
                tok = warpgroup_mma(db.permute((1, 0)), k_smem.slice(c * DQ_CHUNK, DQ_CHUNK, dim=1), dq_zero,
                                    use_acc=False, is_async=True)
                dq = warpgroup_mma_wait(0, deps=[tok])
                ptrs = DQ + gl.expand_dims((row + offs_r) * (nheads * HEAD_DIM), 1) \
                    + gl.expand_dims(h * HEAD_DIM + c * DQ_CHUNK + offs_c, 0)
                if DQ_ATOMIC == 2:
                    # red.global.add.v2.f32 (sm_90): the accumulator's two adjacent columns a thread
                    gl.inline_asm_elementwise(
                        "{ red.global.add.v2.f32 [$2], {$4, $5}; mov.b32 $0, 0; mov.b32 $1, 0; }",
                        "=r,=r,l,l,r,r", [ptrs.to(gl.int64, bitcast=True), (dq * softmax_scale).to(gl.int32, bitcast=True)],
                        dtype=gl.int32, is_pure=False, pack=2)
                else:
                    gl.atomic_add(ptrs, dq * softmax_scale, sem="relaxed")
        elif DQ_PIPE:
            # chunk c + 1's wgmma issued before chunk c's staging (two accumulators live)
            tok = warpgroup_mma(db.permute((1, 0)), k_smem.slice(0, DQ_CHUNK, dim=1), dq_zero,
                                use_acc=False, is_async=True)
            for c in gl.static_range(HEAD_DIM // DQ_CHUNK):
                if c + 1 < HEAD_DIM // DQ_CHUNK:
                    tok2 = warpgroup_mma(db.permute((1, 0)), k_smem.slice((c + 1) * DQ_CHUNK, DQ_CHUNK, dim=1),
                                         dq_zero, use_acc=False, is_async=True)
                    dq = warpgroup_mma_wait(1, deps=[tok])
                    tok = tok2
                else:
                    dq = warpgroup_mma_wait(0, deps=[tok])
                tma.store_wait(0)
                gl.thread_barrier()
                dq_stage.store(dq * softmax_scale)
                fence_async_shared()
                async_reduce_add(dq_desc, [row, h * HEAD_DIM + c * DQ_CHUNK], dq_stage)
        else:
            for c in gl.static_range(HEAD_DIM // DQ_CHUNK):
                tok = warpgroup_mma(db.permute((1, 0)), k_smem.slice(c * DQ_CHUNK, DQ_CHUNK, dim=1), dq_zero,
                                    use_acc=False, is_async=True)
                dq = warpgroup_mma_wait(0, deps=[tok])
                tma.store_wait(0)
                gl.thread_barrier()
                dq_stage.store(dq * softmax_scale)
                fence_async_shared()
                async_reduce_add(dq_desc, [row, h * HEAD_DIM + c * DQ_CHUNK], dq_stage)
    mbarrier.arrive(kv_free)                                 # K no longer read by WG_S
    tma.store_wait(0)


@gluon.jit
def _dkdv_wg(q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, ready, empty, pds_ready, pds_free, kv_free, dk_desc,
             dv_desc, seqlen_q, seqlen_k, nheads_k, group, softmax_scale, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
             BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, NUM_PDS: gl.constexpr):
    dtype: gl.constexpr = k_smem.dtype
    HALF_D: gl.constexpr = HEAD_DIM // 2
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HALF_D, 16])
    b = gl.program_id(1) // nheads_k
    hk = gl.program_id(1) % nheads_k
    n0 = gl.program_id(0) * BLOCK_N
    n_m = seqlen_q // BLOCK_M
    dk = gl.zeros([BLOCK_N, HALF_D], gl.float32, o_layout)
    dv = gl.zeros([BLOCK_N, HALF_D], gl.float32, o_layout)
    for g in range(group * n_m):
        stage = g % NUM_STAGES
        buf = g % NUM_PDS
        mbarrier.wait(ready.index(stage), (g // NUM_STAGES) & 1)
        mbarrier.wait(pds_ready.index(buf), (g // NUM_PDS) & 1)
        q = q_smem.index(stage).slice(WG * HALF_D, HALF_D, dim=1)
        do = do_smem.index(stage).slice(WG * HALF_D, HALF_D, dim=1)
        dv_tok = warpgroup_mma(p_smem.index(buf), do, dv, is_async=True)
        dk_tok = warpgroup_mma(ds_smem.index(buf), q, dk, is_async=True)
        dv = warpgroup_mma_wait(1, deps=[dv_tok])
        dk = warpgroup_mma_wait(0, deps=[dk_tok])
        mbarrier.arrive(empty.index(stage))
        mbarrier.arrive(pds_free.index(buf))
    # dK / dV leave through K / V's column halves once WG_S's last dQ read K (kv_free)
    mbarrier.wait(kv_free, 0)
    k_half = k_smem.slice(WG * HALF_D, HALF_D, dim=1)
    v_half = v_smem.slice(WG * HALF_D, HALF_D, dim=1)
    k_half.store((dk * softmax_scale).to(dtype))
    v_half.store(dv.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(dk_desc, [b * seqlen_k + n0, hk * HEAD_DIM + WG * HALF_D], k_half)
    tma.async_copy_shared_to_global(dv_desc, [b * seqlen_k + n0, hk * HEAD_DIM + WG * HALF_D], v_half)
    tma.store_wait(0)


@gluon.jit
def attn_bwd_d256_proto_kernel(q_desc, do_desc, k_desc, v_desc, dk_desc, dv_desc, dq_desc, DQ, LSE, DELTA, seqlen_q,
                               seqlen_k, nheads, nheads_k, group, softmax_scale, qk_scale,
                               HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                               NUM_STAGES: gl.constexpr, NUM_PDS: gl.constexpr, DQ_CHUNK: gl.constexpr,
                               DKDV_REGS: gl.constexpr, DQ_ATOMIC: gl.constexpr, DQ_PIPE: gl.constexpr):
    dtype: gl.constexpr = q_desc.dtype
    pds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_M], dtype)
    q_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], q_desc.layout)
    do_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], do_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], v_desc.layout)
    p_smem = gl.allocate_shared_memory(dtype, [NUM_PDS, BLOCK_N, BLOCK_M], pds_layout)
    ds_smem = gl.allocate_shared_memory(dtype, [NUM_PDS, BLOCK_N, BLOCK_M], pds_layout)
    if DQ_ATOMIC:
        dq_stage = gl.allocate_shared_memory(gl.float32, [8, 16], dq_desc.layout)   # (unused)
    else:
        dq_stage = gl.allocate_shared_memory(gl.float32, [BLOCK_M, DQ_CHUNK], dq_desc.layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    kv_free = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    pds_ready = gl.allocate_shared_memory(gl.int64, [NUM_PDS, 1], mbarrier.MBarrierLayout())
    pds_free = gl.allocate_shared_memory(gl.int64, [NUM_PDS, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    mbarrier.init(kv_free, count=1)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=3)
    for i in gl.static_range(NUM_PDS):
        mbarrier.init(pds_ready.index(i), count=1)
        mbarrier.init(pds_free.index(i), count=2)
    fence_async_shared()
    gl.warp_specialize([
        (_softmax_wg, (q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, dq_stage, kv_bar, ready, empty, pds_ready,
                       pds_free, kv_free, dq_desc, LSE, DELTA, seqlen_q, nheads, nheads_k, group, softmax_scale,
                       qk_scale, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, NUM_PDS, DQ_CHUNK, DQ, DQ_ATOMIC,
                       DQ_PIPE)),
        (_dkdv_wg, (q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, ready, empty, pds_ready, pds_free, kv_free,
                    dk_desc, dv_desc, seqlen_q, seqlen_k, nheads_k, group, softmax_scale, W0, HEAD_DIM, BLOCK_M,
                    BLOCK_N, NUM_STAGES, NUM_PDS)),
        (_dkdv_wg, (q_smem, do_smem, k_smem, v_smem, p_smem, ds_smem, ready, empty, pds_ready, pds_free, kv_free,
                    dk_desc, dv_desc, seqlen_q, seqlen_k, nheads_k, group, softmax_scale, W1, HEAD_DIM, BLOCK_M,
                    BLOCK_N, NUM_STAGES, NUM_PDS)),
        (_load, (q_desc, do_desc, k_desc, v_desc, q_smem, do_smem, k_smem, v_smem, kv_bar, ready, empty, seqlen_q,
                 seqlen_k, nheads_k, group, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES)),
    ], [4, 4, 1], [DKDV_REGS, DKDV_REGS, 24])


_DT = {"bf16": tl.bfloat16, "fp16": tl.float16}


def _desc(dtype, rows, cols):
    layout = NVMMASharedLayout.get_default_for([rows, cols], _DT[dtype])
    return f"tensordesc<{dtype}[{rows}, {cols}],{layout!r}>"


def compile_proto(dtype="bf16", block_m=64, num_stages=2, num_pds=1, dq_chunk=64, dkdv_regs=160, head_dim=256,
                  dq_atomic=False, dq_pipe=False):
    fn = attn_bwd_d256_proto_kernel
    bn = 64
    dql = dq_stage_layout(64, True)
    sig = dict(q_desc=_desc(dtype, block_m, head_dim), do_desc=_desc(dtype, block_m, head_dim),
               k_desc=_desc(dtype, bn, head_dim), v_desc=_desc(dtype, bn, head_dim),
               dk_desc=_desc(dtype, bn, head_dim // 2), dv_desc=_desc(dtype, bn, head_dim // 2),
               dq_desc=f"tensordesc<fp32[{block_m}, {dq_chunk}],{dql!r}>", DQ="*fp32", LSE="*fp32", DELTA="*fp32",
               seqlen_q="i32", seqlen_k="i32", nheads="i32", nheads_k="i32", group="i32", softmax_scale="fp32",
               qk_scale="fp32", HEAD_DIM="constexpr", BLOCK_M="constexpr", BLOCK_N="constexpr",
               NUM_STAGES="constexpr", NUM_PDS="constexpr", DQ_CHUNK="constexpr", DKDV_REGS="constexpr",
               DQ_ATOMIC="constexpr", DQ_PIPE="constexpr")
    const = dict(HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=bn, NUM_STAGES=num_stages, NUM_PDS=num_pds,
                 DQ_CHUNK=dq_chunk, DKDV_REGS=dkdv_regs, DQ_ATOMIC=dq_atomic, DQ_PIPE=dq_pipe)
    src = GluonASTSource(fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))


if __name__ == "__main__":
    # PYTHONPATH=src python bench/wip/d256-bwd-gluon-proto.py [DUMP_DIR]   (offline, no GPU)
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))   # bench/
    sys.path.insert(0, "/work/main/bench")
    from gluon_fwd_compile import report, sass
    import re
    configs = [dict(), dict(dq_pipe=True), dict(dq_atomic=True, num_pds=2), dict(dq_atomic=True, num_pds=2, dq_chunk=128),
               dict(dq_atomic=2, num_pds=2), dict(dq_atomic=2, num_pds=2, dq_chunk=128),
               dict(dkdv_regs=152), dict(dkdv_regs=144), dict(dtype="fp16"), dict(num_pds=2), dict(dq_chunk=128)]
    for cfg in configs:
        try:
            c = compile_proto(**cfg)
            r = report(c)
            t = sass(c)
            red = len(re.findall(r"\bRED", t))
            redops = sorted(set(re.findall(r"\b(RED\S*)", t)))
            print(cfg, {k: r[k] for k in ("regs", "spill_bytes", "smem", "hgmma", "setmaxnreg", "tile_loops")},
                  "RED", red, redops, "UTMAREDG", t.count("UTMAREDG"), "smem_ok", r["smem"] <= 232448, flush=True)
            if len(sys.argv) > 1:     # a dump folder: its SASS
                name = "_".join(f"{k}{v}" for k, v in cfg.items()) or "base"
                open(os.path.join(sys.argv[1], f"d256_{name}.sass"), "w").write(t)
        except Exception as e:  # noqa: BLE001
            print(cfg, "FAILED", type(e).__name__, str(e)[:1500], flush=True)
