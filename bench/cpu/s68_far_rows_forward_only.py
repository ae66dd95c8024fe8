"""Session 68: the forward-only kernels on query rows that sit before every key (flashtriton/alibi_anchor.py), fp32,
not causal, ALiBi (B, H) slopes: worst out / lse error over the criterion's bound (2x PyTorch's fp32 error + 1e-6;
1 = the bound) over four draws a case, on one backend.
- kvcache: flash_attn_with_kvcache, 240 rows over caches of 17 / 40 keys (slopes up to 8), splits 1 / 3, the fused
  and the separate combine (Triton options; the CPU ignores them), and 2 new tokens appended;
- kvcache-short: 8 rows over 1 / 3 keys, slopes up to 80 (the CPU's compiled kernel takes these: <= 256 rows);
- paged: flash_attn_varlen_func with block_table, 240 / 60 queries over 17 / 40 keys, pages of 16.
Usage (repo root): PYTHONPATH=src python bench/cpu/s68_far_rows_forward_only.py [cpu|cuda] [triton|cpu]
(the tests' helpers draw on their DEVICE: cuda where there is one; CPU tensors with triton need TRITON_INTERPRET=1)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
import flashtriton  # noqa: E402
from flashtriton import flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: E402
from flashtriton.launchers import decode as decode_launcher  # noqa: E402

DEV = sys.argv[1] if len(sys.argv) > 1 else "cpu"
BACKEND = sys.argv[2] if len(sys.argv) > 2 else ("triton" if DEV == "cuda" else "cpu")
if DEV == "cpu" and BACKEND == "triton" and os.environ.get("TRITON_INTERPRET") != "1":
    sys.exit("the triton backend on CPU tensors needs TRITON_INTERPRET=1")
import test_kvcache as T  # noqa: E402
from helpers import rand_varlen, reference_pair  # noqa: E402
from test_varlen_paged import paged_cache  # noqa: E402

SLOPES = torch.tensor([[1.0, 0.5, 0.25, 0.125], [0.75, 1.0, 0.3, 2.0]], device=DEV)


def err(a, b):
    return (a.double() - b.double()).abs().max().item()


def bound_ratio(got, truth, lowp):
    return err(got, truth) / (2 * err(lowp, truth) + 1e-6)


def kvcache_case(sq, lens, capacity, slopes, splits, combine, snew):
    worst = [0.0, 0.0]
    for seed in range(4):
        torch.manual_seed(100 * seed + splits + snew)
        inp = T.make_inputs(2, sq, 4, 2, 32, torch.float32, capacity, [n - snew for n in lens], snew=snew)
        ours = T._clone_caches(inp)
        call = {k: v for k, v in ours.items() if k != "q"}
        with flashtriton.use_backend(BACKEND), decode_launcher.options(combine=combine):
            out, lse = flash_attn_with_kvcache(ours["q"], alibi_slopes=slopes, num_splits=splits,
                                               return_softmax_lse=True, **call)
        params = T.params_for(inp)
        truth = T._ref(inp, params, True, slopes, torch.float64)
        lowp = T._ref(inp, params, True, slopes, torch.float32)
        worst = [max(worst[0], bound_ratio(out, truth[0], lowp[0])), max(worst[1], bound_ratio(lse, truth[1], lowp[1]))]
    return worst


def paged_case():
    worst = [0.0, 0.0]
    for seed in range(4):
        torch.manual_seed(seed)
        (q, k, v), varlen = rand_varlen([240, 60], [17, 40], 4, 2, 32, torch.float32, DEV)
        kc, vc, table = paged_cache(k, v, [17, 40], 16)
        slopes = 4.0 * SLOPES
        with flashtriton.use_backend(BACKEND):
            out, lse, _ = flash_attn_varlen_func(q, kc, vc, *varlen, block_table=table, alibi_slopes=slopes,
                                                 return_attn_probs=True)
        truth, lowp = reference_pair(q, k, v, varlen=varlen[:2], softmax_scale=32 ** -0.5, alibi_slopes=slopes)
        worst = [max(worst[0], bound_ratio(out, truth["out"], lowp["out"])),
                 max(worst[1], bound_ratio(lse, truth["lse"], lowp["lse"]))]
    return worst


def main():
    print(f"{DEV} / {BACKEND}: worst error over the bound (out, lse), 4 draws a case")
    for splits, combine, snew in [(1, "fused", 0), (3, "fused", 0), (3, "kernel", 0), (2, "kernel", 2)]:
        o, l = kvcache_case(240, [17, 40], 48, 4.0 * SLOPES, splits, combine, snew)
        print(f"  kvcache 240 rows / 17, 40 keys, splits {splits}, {combine} combine, {snew} new: "
              f"out {o:.3f} lse {l:.3f}")
    for splits in (1, 3):
        o, l = kvcache_case(8, [1, 3], 16, 40.0 * SLOPES, splits, "fused", 0)
        print(f"  kvcache-short 8 rows / 1, 3 keys, splits {splits}: out {o:.3f} lse {l:.3f}")
    o, l = paged_case()
    print(f"  paged 240 / 60 rows over 17 / 40 keys, page 16: out {o:.3f} lse {l:.3f}")


if __name__ == "__main__":
    main()
