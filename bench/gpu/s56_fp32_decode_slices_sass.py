"""Session 56 (offline, sm_90a): kernels/decode.py's split kernel with the fp32 one-row score slices (QK_LEVELS, as
launchers/common.qk_levels picks at Sq = 1) - registers, spill bytes, compile time against QK_LEVELS 0, fp32 caches,
G = 4 rows (BLOCK_M 16), launchers/decode.DEFAULT_TILES (the split regime's tile); D = 64 / 128 / 192 / 256. Run from a tree's
root: PYTHONPATH=src python bench/gpu/s56_fp32_decode_slices_sass.py"""
import re
import time

import torch
import triton

from flashtriton.bench.compile_report import compile_decode, ptxas_log
from flashtriton.launchers.common import qk_levels
from flashtriton.launchers.decode import DEFAULT_TILES

for d in (64, 128, 192, 256):
    bd = max(16, triton.next_power_of_2(d))
    bn, warps, stages = DEFAULT_TILES[bd]
    for lv in (0, qk_levels(torch.float32, bd, 1)):
        const = dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_M=16, BLOCK_N=bn, PAGE_SIZE=0, HAS_BATCH_IDX=False,
                     HAS_LEFTPAD=False, HAS_NEW=False, BLOCK_NEW=16, HAS_ROTARY=False, ROTARY_INTERLEAVED=False,
                     ROTARY_PER_ROW=False, HAS_LEFT=False, HAS_RIGHT=False, HAS_ALIBI=False, HAS_SOFTCAP=False,
                     SPLIT=True, FUSED_COMBINE=True, KV_TMA=False, DOT_PRECISION="ieee", PAGE_GATHER=0, QK_LEVELS=lv)
        t = time.time()
        c = compile_decode(const, "fp32", warps, stages)
        log = ptxas_log(c)
        regs = re.search(r"Used (\d+) registers", log)
        spill = re.search(r"(\d+) bytes spill stores", log)
        print(f"decode D={d:3d} ({bn}, {warps}, {stages}) QK_LEVELS={lv}: regs {regs and regs.group(1)}, spill stores {spill and spill.group(1)} B, "
              f"{time.time() - t:.1f} s", flush=True)
