"""Session 61: fp32 decode tiles. Offline (sm_90a, ptxas -v) the fp32 decode kernel at D = 128 spills 3.1-4.4 KB a
thread on its default tile (64 keys, 4 warps, 3 stages; QK_LEVELS 0 / 3), 0-76 B on (16 keys, 8 warps). Times
flash_attn_with_kvcache with fp32 caches (Hq = 32, Hk = 8, D = 128; B = 1 at 8k / 32k, B = 8 at 8k; D = 256, B = 1,
8k, one and 4 query rows: offline 4.5 / 34 KB of spills on the default tile, 1.0 / 0.6 KB on (16, 8, 3)) and the
routed one-row flash_attn_func (D = 128, B = 1, 8k) on the default tile and candidates (launchers/decode.options),
do_bench with its L2 flush, median us, with each output's max |diff| to the default's.
Usage: PYTHONPATH=src python bench/gpu/s61_fp32_decode_tiles.py"""
import torch
import triton

import flashtriton
from flashtriton import kvcache
from flashtriton.launchers import decode

CANDIDATES = [None, (16, 8, 3), (16, 8, 2), (32, 8, 3), (16, 4, 3)]
# (B, N, call, D, query rows)
CASES = [(1, 8192, "kvcache", 128, 1), (1, 32768, "kvcache", 128, 1), (8, 8192, "kvcache", 128, 1),
         (1, 8192, "func", 128, 1), (1, 8192, "kvcache", 256, 1), (1, 8192, "kvcache", 256, 4)]


def main():
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    with kvcache.value_checks(False):
        for b, n, how, d, sq in CASES:
            q = torch.randn(b, sq, 32, d, device="cuda")
            k = torch.randn(b, n, 8, d, device="cuda")
            v = torch.randn_like(k)
            if how == "kvcache":
                def fn():
                    return flashtriton.flash_attn_with_kvcache(q, k, v, causal=True)
            else:
                def fn():
                    return flashtriton.flash_attn_func(q, k, v, causal=True)
            ref, cells = None, []
            for tile in CANDIDATES:
                opts = {} if tile is None else dict(block_n=tile[0], num_warps=tile[1], num_stages=tile[2])
                with decode.options(**opts):
                    out = fn()
                    us = triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median") * 1e3
                ref = out if ref is None else ref
                gbs = 2 * b * n * 8 * d * 4 / us / 1e3
                diff = (out - ref).abs().max().item()
                cells.append(f"{tile or 'default'} {us:7.1f} us ({gbs:4.0f} GB/s, d {diff:.1e})")
            print(f"{how} B={b} N={n} D={d} Sq={sq}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
