"""Session 61: where the routed one-row varlen call's host time goes (session 60, H100: B = 1 varlen 8k 102 us
against 30.6 us for the dense call on the same route). bf16, Hq = 32, Hk = 8, D = 128, B = 1, Nk = 8k: per-call
wall time of 300 calls queued without a sync (the host's time, the kernels being shorter), then cProfile's top
functions by own time over 300 more. Usage: PYTHONPATH=src python bench/gpu/s61_route_host_profile.py"""
import os
import sys

import torch

import flashtriton
from flashtriton import kvcache

sys.path.insert(0, os.path.dirname(__file__))
from host_probe import host_us, profile_top  # noqa: E402  (the session-48 host-time helpers)


def main():
    torch.manual_seed(0)
    b, n = 1, 8192
    q = torch.randn(b, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, n, 8, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    qv, kv, vv = q.reshape(b, 32, 128), k.reshape(b * n, 8, 128), v.reshape(b * n, 8, 128)
    cu_q = torch.arange(b + 1, device="cuda", dtype=torch.int32)
    cu_k = cu_q * n
    calls = {
        "dense": lambda: flashtriton.flash_attn_func(q, k, v, causal=True),
        "varlen": lambda: flashtriton.flash_attn_varlen_func(qv, kv, vv, cu_q, cu_k, 1, n, causal=True),
        "kvcache": lambda: flashtriton.flash_attn_with_kvcache(q, k, v, causal=True),
    }
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for checks in (True, False):
        with kvcache.value_checks(checks):
            print(f"kvcache.value_checks({checks}): " + "; ".join(
                f"{name} {host_us(fn, 300, warmup=20):.1f} us host" for name, fn in calls.items()), flush=True)
    for name in ("dense", "varlen"):
        print(f"--- {name}: cProfile, 300 calls, by own time")
        profile_top(calls[name], 300, 18)


if __name__ == "__main__":
    main()
