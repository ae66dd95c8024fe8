"""Session 16, call 4: call 3 found every kernel bitwise repeatable under 3 processes with
FIXED inputs (thousands of calls each), while s16_persistent_stress.py, which draws FRESH
inputs per group and compares (out, lse), saw differences. Hypothesis: some element of
out or lse is never written (torch.empty then holds an earlier call's values, equal when
the inputs are fixed). One process, fresh inputs every round; for one tile a program (ws1)
and persistent (wsP), with poisoned outputs (NaN) and without: NaN counts of out / lse, the
rows where ws1 and wsP differ, and each one's largest error against cuDNN."""
import torch

import flashtriton
from flashtriton import memory
from flashtriton.launchers import forward, plans

KINDS = set(forward.WS_PERSISTENT)
CASES = [(128, 512, {}), (128, 2048, {}), (256, 1024, {}), (128, 2048, dict(dropout_p=0.1)),
         (256, 2048, dict(causal=True)), (256, 16384, dict(causal=True)), (256, 4096, dict(window_size=(1024, 0)))]


def cudnn(q, k, v, kw):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=kw.get("causal", False)).transpose(1, 2)


def main():
    for d, n, kw in CASES:
        h, b = (16 if d == 128 else 8), 16384 // n
        for poison in (True, False):
            stats = []
            for _ in range(4):
                q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                outs = {}
                for var in ("ws1", "wsP", "ws1b"):
                    forward.WS_PERSISTENT = KINDS if var == "wsP" else set()
                    plans.clear()
                    torch.manual_seed(3)
                    with torch.no_grad():
                        if poison:
                            with memory.poison_outputs():
                                outs[var] = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]
                        else:
                            outs[var] = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]
                ref = cudnn(q, k, v, kw) if "dropout_p" not in kw and "window_size" not in kw else None
                row = []
                for var, (o, lse) in outs.items():
                    e = f"{(o.float() - ref.float()).abs().max().item():.2g}" if ref is not None else "-"
                    row.append(f"{var}: nan {o.isnan().sum().item()}/{lse.isnan().sum().item()} err {e}")
                for a, c in (("ws1", "wsP"), ("ws1", "ws1b")):
                    (o1, l1), (o2, l2) = outs[a], outs[c]
                    od = (o1 != o2) & ~(o1.isnan() & o2.isnan())
                    ld = (l1 != l2) & ~(l1.isnan() & l2.isnan())
                    where = od.any(-1).nonzero()[:3].tolist()
                    lwhere = ld.nonzero()[:3].tolist()
                    row.append(f"{a}!={c}: out {od.sum().item()} at (b,n,h) {where} lse {ld.sum().item()} at (b,h,n) "
                               f"{lwhere} lse shape {tuple(l1.shape)}")
                stats.append(" | ".join(row))
            print(f"D={d} N={n} {kw} poison={poison}", *stats, sep="\n   ", flush=True)


if __name__ == "__main__":
    main()
