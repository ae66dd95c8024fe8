"""Session 61 (offline, sm_90a): ptxas -v registers / spill stores / shared memory of the fp32 decode kernel at D = 128 over
BLOCK_N 16 / 32 / 64, 4 / 8 warps, 2 / 3 stages, QK_LEVELS 3 (one row) and 0. Usage: PYTHONPATH=src python
bench/gpu/s61_fp32_decode_tile_spills.py"""
import re

import torch

from flashtriton.bench.compile_report import compile_decode, ptxas_log
from flashtriton.launchers.common import qk_levels

for d in (128,):
    bd = 128
    for lv in (qk_levels(torch.float32, bd, 1), 0):
        for bn in (16, 32, 64):
            for warps in (4, 8):
                for stages in (2, 3):
                    const = dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_M=16, BLOCK_N=bn, PAGE_SIZE=0, HAS_BATCH_IDX=False,
                                 HAS_LEFTPAD=False, HAS_NEW=False, BLOCK_NEW=16, HAS_ROTARY=False, ROTARY_INTERLEAVED=False,
                                 ROTARY_PER_ROW=False, HAS_LEFT=False, HAS_RIGHT=False, HAS_ALIBI=False, HAS_SOFTCAP=False,
                                 SPLIT=True, FUSED_COMBINE=True, KV_TMA=False, DOT_PRECISION="ieee", PAGE_GATHER=0, QK_LEVELS=lv)
                    try:
                        c = compile_decode(const, "fp32", warps, stages)
                    except Exception as e:
                        print(lv, bn, warps, stages, type(e).__name__); continue
                    log = ptxas_log(c)
                    regs = re.search(r"Used (\d+) registers", log); spill = re.search(r"(\d+) bytes spill stores", log)
                    print(f"D={d} QK_LEVELS={lv} BN={bn} warps={warps} stages={stages}: regs {regs.group(1)}, spill {spill.group(1)} B, smem {c.metadata.shared}", flush=True)
