"""Session 68: offline SASS (sm_90a, no GPU needed) of the ALiBi variants the anchor touches, as (digest,
instruction count) from compile_report.sass_digest: the prefill kernels (fwd / dK-dV / dQ, 64 x 64 tile, D = 128),
the decode split kernel (bench.decode's default tile; fused combine at D = 128, the separate combine at D = 64) and
the paged prefill (D = 128, 64 x 64 tile, pages of 256, pointer loads), each with HAS_ALIBI = False / True (plain)
/ 2 (anchored). Output: bench/results/nvidia-h100/s68/anchor_sass.txt.
Usage (repo root): PYTHONPATH=src python bench/gpu/s68_anchor_sass.py"""
from flashtriton.bench import compile_report as cr
from flashtriton.bench import decode as bench_decode
from flashtriton.kernels import configs


def compile_paged(alibi):
    const = dict(HEAD_DIM=128, BLOCK_D=128, BLOCK_M=64, BLOCK_N=64, PAGE_SIZE=256, PAGE_GATHER=0, HAS_LEFT=False,
                 HAS_RIGHT=False, HAS_ALIBI=alibi, HAS_SOFTCAP=False, DOT_PRECISION="tf32", KV_TMA=False, QK_LEVELS=0)
    return cr.compile_paged(const, "bf16", 4, 2)


def main():
    tile = configs.Tile(64, 64, 4, 2)
    for alibi in (False, True, 2):
        for kernel in ("fwd", "dkdv", "dq"):
            print(kernel, alibi, cr.sass_digest(cr.compile_variant(kernel, tile, 128, HAS_ALIBI=alibi)), flush=True)
        print("decode D=128", alibi, cr.sass_digest(bench_decode.compile_split_kernel(128, HAS_ALIBI=alibi)))
        print("decode D=64 separate combine", alibi,
              cr.sass_digest(bench_decode.compile_split_kernel(64, HAS_ALIBI=alibi, FUSED_COMBINE=False)))
        print("paged D=128", alibi, cr.sass_digest(compile_paged(alibi)), flush=True)


if __name__ == "__main__":
    main()
