"""Session 5: the read-bandwidth ceiling of the B = 1, L = 128k decode layout.

A plain streaming kernel reads the same K and V caches (1, 128k, Hk = 8, D = 128, bf16,
537 MB) in the decode kernel's pattern - program (head, chunk) reads its chunk of one
KV head's 256-byte rows - and sums them (the sum is stored so nothing is optimised
away). If this kernel also stops near 3.85 TB/s at 128 programs, the issue's 4.0 TB/s
needs another access pattern, not a better decode loop."""
import torch
import triton
import triton.language as tl

from flashtriton.bench import decode as D


@triton.jit
def stream_kernel(K, V, OUT, keys_per_prog, stride_n, HK: tl.constexpr, HEADS_PER_PROG: tl.constexpr,
                  BLOCK_N: tl.constexpr, D_: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    head0 = (pid % (HK // HEADS_PER_PROG)) * HEADS_PER_PROG
    chunk = pid // (HK // HEADS_PER_PROG)
    offs_n = tl.arange(0, BLOCK_N)
    offs_c = tl.arange(0, D_ * HEADS_PER_PROG)
    acc = tl.zeros([BLOCK_N, D_ * HEADS_PER_PROG], tl.float32)
    start = chunk * keys_per_prog
    for n0 in tl.range(start, start + keys_per_prog, BLOCK_N, num_stages=STAGES):
        rows = (n0 + offs_n).to(tl.int64) * stride_n
        ptr = rows[:, None] + head0 * D_ + offs_c[None, :]
        acc += tl.load(K + ptr).to(tl.float32) + tl.load(V + ptr).to(tl.float32)
    tl.store(OUT + pid * (D_ * HEADS_PER_PROG) + offs_c, tl.sum(acc, 0))


def main():
    L, HK, DH = 131072, 8, 128
    k = torch.randn(1, L, HK, DH, dtype=torch.bfloat16, device="cuda")
    v = torch.randn_like(k)
    nbytes = 2 * k.numel() * 2
    for heads_per_prog in (1, 2, 8):
        for splits in (16, 17, 32, 33, 64, 128):
            tiles = {1: ((64, 3, 4), (64, 4, 4), (128, 3, 8), (32, 4, 4)), 2: ((32, 4, 4), (64, 3, 8)),
                     8: ((16, 4, 8), (8, 6, 8))}[heads_per_prog]
            for block_n, stages, warps in tiles:
                progs = (HK // heads_per_prog) * splits
                kpp = -(-L // splits)
                kpp = -(-kpp // block_n) * block_n
                if kpp * splits > L:
                    kpp = L // splits // block_n * block_n  # drop the ragged rest: a ceiling, not a kernel
                out = torch.empty(progs, DH * heads_per_prog, device="cuda")
                fn = lambda: stream_kernel[(progs,)](k, v, out, kpp, k.stride(1), HK, heads_per_prog,  # noqa: E731
                                                     block_n, DH, stages, num_warps=warps)
                try:
                    ms = triton.testing.do_bench_cudagraph(fn)
                except Exception as exc:
                    print(f"heads/prog={heads_per_prog} splits={splits} tile={block_n},{warps},{stages}: "
                          f"{type(exc).__name__}", flush=True)
                    continue
                read = nbytes * (kpp * splits) / L
                print(f"heads/prog={heads_per_prog} programs={progs} tile={block_n},{warps},{stages}: "
                      f"{ms * 1e3:.1f} us, {read / ms / 1e9:.2f} TB/s", flush=True)
    inp = D.make_inputs(1, L, "cuda")
    fn = lambda: D.ours(inp)  # noqa: E731
    ms = triton.testing.do_bench_cudagraph(fn)
    print(f"flashtriton decode B=1 L=128k: {ms * 1e3:.1f} us, {D.kv_bytes(1, L) / ms / 1e9:.2f} TB/s")


if __name__ == "__main__":
    main()
