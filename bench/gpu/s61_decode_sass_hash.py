"""Session 61 (offline, sm_90a): hashes of kernels/decode.py's split kernel SASS over the variants a change to its
one-row fp32 path must leave alone (bf16 / fp16 at QK_LEVELS 0; fp32 multi-row at QK_LEVELS 0) and the ones it
changes (fp32 one-row, QK_LEVELS = launchers/common.qk_levels). D = 64 / 128 / 256, with / without a window and
softcap. Run from a tree's root before and after a change and compare:
PYTHONPATH=src python bench/gpu/s61_decode_sass_hash.py > before.txt"""
import torch
import triton

from flashtriton.bench.compile_report import compile_decode, sass_digest
from flashtriton.launchers.common import qk_levels
from flashtriton.launchers.decode import DEFAULT_TILES

for dtype in ("bf16", "fp16", "fp32"):
    for d in (64, 128, 256):
        bd = max(16, triton.next_power_of_2(d))
        bn, warps, stages = DEFAULT_TILES[bd]
        levels = [0] + ([qk_levels(torch.float32, bd, 1)] if dtype == "fp32" else [])
        for lv in levels:
            for masks, softcap in ((False, False), (True, False), (False, True)):
                const = dict(HEAD_DIM=d, BLOCK_D=bd, BLOCK_M=16, BLOCK_N=bn, PAGE_SIZE=0, HAS_BATCH_IDX=False,
                             HAS_LEFTPAD=False, HAS_NEW=False, BLOCK_NEW=16, HAS_ROTARY=False,
                             ROTARY_INTERLEAVED=False, ROTARY_PER_ROW=False, HAS_LEFT=masks, HAS_RIGHT=masks,
                             HAS_ALIBI=False, HAS_SOFTCAP=softcap, SPLIT=True, FUSED_COMBINE=True, KV_TMA=False,
                             DOT_PRECISION="ieee" if dtype == "fp32" else "tf32", PAGE_GATHER=0, QK_LEVELS=lv)
                h, n = sass_digest(compile_decode(const, dtype, warps, stages))
                print(f"{dtype} D={d} QK_LEVELS={lv} masks={masks} softcap={softcap}: {h} ({n} lines)", flush=True)
