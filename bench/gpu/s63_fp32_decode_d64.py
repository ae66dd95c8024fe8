"""Session 63: fp32 decode tiles at D = 64 / 32. Offline (sm_90a, ptxas -v) the default tile spills at D = 64:
(128 keys, 4 warps, 3 stages) 4,264 B a thread at QK_LEVELS 2 (one row), 1,044 B at 0; (64, 8, 3) and (32, 8, 3)
none; D = 32 (128, 4, 4) 372 / 16 B, 8 warps none. Times flash_attn_with_kvcache with fp32 caches (Hq = 32, Hk = 8;
B = 1 at 8k / 32k, B = 8 at 8k) on the default tile and candidates (launchers/decode.options), do_bench with its L2
flush, median us, with each output's max |diff| to the default's.
Usage: PYTHONPATH=src python bench/gpu/s63_fp32_decode_d64.py"""
import torch
import triton

import flashtriton
from flashtriton import kvcache
from flashtriton.launchers import decode

CANDIDATES = {64: [None, (64, 8, 3), (32, 8, 3), (16, 8, 3), (64, 4, 3)], 32: [None, (64, 8, 4), (32, 8, 4), (64, 4, 4)]}
CASES = [(1, 8192, 64), (1, 32768, 64), (8, 8192, 64), (1, 8192, 32), (8, 8192, 32)]


def main():
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    with kvcache.value_checks(False):
        for b, n, d in CASES:
            q = torch.randn(b, 1, 32, d, device="cuda")
            k = torch.randn(b, n, 8, d, device="cuda")
            v = torch.randn_like(k)
            ref, cells = None, []
            for tile in CANDIDATES[d]:
                opts = {} if tile is None else dict(block_n=tile[0], num_warps=tile[1], num_stages=tile[2])
                with decode.options(**opts):
                    out = flashtriton.flash_attn_with_kvcache(q, k, v, causal=True)
                    us = triton.testing.do_bench(lambda: flashtriton.flash_attn_with_kvcache(q, k, v, causal=True),
                                                 warmup=10, rep=100, return_mode="median") * 1e3
                ref = out if ref is None else ref
                gbs = 2 * b * n * 8 * d * 4 / us / 1e3
                cells.append(f"{tile or 'default'} {us:7.1f} us ({gbs:4.0f} GB/s, d {(out - ref).abs().max().item():.1e})")
            print(f"B={b} N={n} D={d}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
