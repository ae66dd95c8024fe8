"""Session 10: the host time of an eager call split by function, on the GPU machine: each
function below is wrapped (wherever flashtriton's modules reference it) with a timer that
adds its inclusive wall time per call. Call 4 measured flash_attn_func's forward at 228 /
257 us of host time at N = 512 (non-causal / causal), of which Triton's JIT launch is 49 /
72 us (17 / 22 us through the compiled kernel directly): the rest is ours or torch's."""
import collections
import sys
import time


def main():
    import torch
    from triton.runtime.jit import JITFunction
    import flashtriton
    from flashtriton import api, backends, memory, ops, validate
    from flashtriton.launchers import prefill
    acc = collections.defaultdict(float)
    cnt = collections.defaultdict(int)

    def timed(name, f):
        def w(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                acc[name] += time.perf_counter() - t
                cnt[name] += 1
        return w

    targets = {
        "api._attention": (api, "_attention"), "validate.attention_inputs": (validate, "attention_inputs"),
        "backends.select": (backends, "select"), "ops.attention": (ops, "attention"),
        "prefill.fwd": (prefill, "fwd"), "prefill.bwd": (prefill, "bwd"),
        "prefill.warp_spec_mode": (prefill, "warp_spec_mode"), "prefill._fwd_warp_spec": (prefill, "_fwd_warp_spec"),
        "prefill._bwd_warp_spec": (prefill, "_bwd_warp_spec"),
        "prefill._descriptor_ready": (prefill, "_descriptor_ready"),
        "prefill._host_descriptor": (prefill, "_host_descriptor"),
        "prefill._ensure_allocator": (prefill, "_ensure_allocator"),
        "prefill._alloc_descriptor_scratch": (prefill, "_alloc_descriptor_scratch"), "memory.empty": (memory, "empty"),
        "prefill._tile": (prefill, "_tile"), "prefill._effective_window": (prefill, "_effective_window"),
        "prefill.host_descriptors": (prefill, "host_descriptors"),
    }
    for name, (mod, attr) in targets.items():
        orig = getattr(mod, attr)
        w = timed(name, orig)
        for m in list(sys.modules.values()):
            if m is not None and getattr(m, "__name__", "").startswith("flashtriton"):
                for k2, v2 in list(vars(m).items()):
                    if v2 is orig:
                        setattr(m, k2, w)
    JITFunction.run = timed("triton JITFunction.run", JITFunction.run)
    for name, attr in (("torch.cuda.get_device_capability", "get_device_capability"),
                       ("torch.cuda.is_current_stream_capturing", "is_current_stream_capturing")):
        setattr(torch.cuda, attr, timed(name, getattr(torch.cuda, attr)))
    torch.empty = timed("torch.empty", torch.empty)

    def report(label, f, n):
        for _ in range(10):
            f()
        torch.cuda.synchronize()
        acc.clear()
        cnt.clear()
        t = time.perf_counter()
        for _ in range(n):
            f()
        total = (time.perf_counter() - t) / n
        torch.cuda.synchronize()
        print(f"{label}: {total * 1e6:.0f} us of host time a call")
        for name, s in sorted(acc.items(), key=lambda x: -x[1]):
            print(f"    {name:40s} {s / n * 1e6:8.1f} us  ({cnt[name] / n:.1f} calls)")

    qs, ks, vs = (torch.randn(1, 512, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        report(f"forward N=512 causal={causal}", lambda: flashtriton.flash_attn_func(qs, ks, vs, causal=causal), 300)
    q, k, v = (torch.randn(2, 4096, 16, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    report("fwd+bwd N=4k causal", lambda: torch.autograd.grad(flashtriton.flash_attn_func(q, k, v, causal=True),
                                                              (q, k, v), dout), 30)
    sys.exit(0)


if __name__ == "__main__":
    main()
