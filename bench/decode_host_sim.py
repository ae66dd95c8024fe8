"""(Copied from a helper's /tmp script, 2026-12-01; run: FLASHTRITON_BACKEND=triton PYTHONPATH=src python bench/decode_host_sim.py)
CPU simulation of a replayed decode step's host path per layout: the real kernels compiled
for sm_90 (fake driver), a fake CudaLauncher whose C launch is a no-op, plans on.

Value checks off (`with kvcache.value_checks(False)`, as before) and on (the default), the
modes interleaved in every round. With checks on the value rows come from the kernel path
(kvcache._KERNEL_VALUE_ROWS = True, as on CUDA): the fake launch of the rows kernel writes
what the real kernel would for these inputs (their lengths, no left padding, no bad page)
with one memmove (~0.1-0.2 us, counted in the "on" times), and `.cpu()` of a CPU tensor
is free here, where on the GPU it is the step's host sync."""
import ctypes, os, sys, time
os.environ["FLASHTRITON_PLANS"] = "1"
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
import triton.backends.nvidia.driver as nvd

class Utils:
    def fill_tma_descriptor(self, *a): return object()
class FakeDriver:
    utils = Utils()
    def get_current_target(self): return GPUTarget("cuda", 90, 32)
    def get_current_device(self): return 0
    def get_current_stream(self, device=None): return 0
    def get_active_torch_device(self): return torch.device("cpu")
driver.set_active(FakeDriver())

import flashtriton
from flashtriton import kvcache
from flashtriton.launchers import decode, plans
calls = {"raw": 0, "tma_encode": 0}
_orig_fill = Utils.fill_tma_descriptor
def fill(self, *a):
    calls["tma_encode"] += 1
    return object()
Utils.fill_tma_descriptor = fill

class CudaLauncher:
    def __init__(self, ck):
        class Noop:          # a C function has no __code__
            def __call__(self, *a):
                calls["raw"] += 1
        class WriteRows:     # the value rows kernel: OUT (5, B) int64 at the 5th argument
            def __call__(self, *a):
                calls["raw"] += 1
                ctypes.memmove(a[13 + 4], ROWS, len(ROWS))
        noop = WriteRows() if ck.src.fn.__name__ == "kvcache_value_rows_kernel" else Noop()
        self.launch = nvd.wrap_handle_tensordesc(noop, ck.src.signature, ck.metadata.tensordesc_meta)
        self.profile_scratch_size = 0; self.global_scratch_size = 0
        self.launch_cooperative_grid = False; self.launch_pdl = False; self.num_ctas = 1
class FakeCompiled:
    def __init__(self, ck):
        self.src, self.metadata, self.packed_metadata = ck.src, ck.metadata, None
        self.function = 0
        self.launch_metadata = lambda *a: None
        self.run = CudaLauncher(ck)
_ck = {}
def fake_launch(kernel, grid, *args, **kwargs):
    ck = kernel.warmup(*args, grid=grid, **kwargs)
    if kernel.fn.__name__ == "kvcache_value_rows_kernel":
        ctypes.memmove(args[4].data_ptr(), ROWS, len(ROWS))
    fc = _ck.setdefault(id(ck), FakeCompiled(ck))
    rec = plans.recording()
    if rec is not None:
        rec.launches.append((kernel, grid, args, kwargs, fc))
    return fc
decode.plans.launch = fake_launch
decode.interpreting = lambda: False
triton.knobs.runtime.interpret = True      # plan_key: plans on CPU tensors (FLASHTRITON_PLANS=1)

B, L, HQ, HK, D = 1, 8192, 32, 8, 128
# the value rows of every step here: (5, B) int64, ends = L, starts 0, batch idx 0, no bad page
ROWS = torch.tensor([[L] * B, [0] * B, [0] * B, [-1] * B, [0] * B], dtype=torch.int64).numpy().tobytes()
kvcache._KERNEL_VALUE_ROWS = True       # the CUDA path of the value checks
def make(layout):
    q = torch.randn(B, 1, HQ, D, dtype=torch.bfloat16)
    lens = torch.full((B,), L, dtype=torch.int32)
    if layout == 0:
        kc = torch.zeros(B, L, HK, D, dtype=torch.bfloat16)
        return dict(q=q, k_cache=kc, v_cache=torch.zeros_like(kc), cache_seqlens=lens)
    per = L // layout; nb = B * per + 7
    kc = torch.zeros(nb, layout, HK, D, dtype=torch.bfloat16)
    table = torch.randperm(nb)[:B * per].view(B, per).to(torch.int32)
    return dict(q=q, k_cache=kc, v_cache=torch.zeros_like(kc), cache_seqlens=lens, block_table=table)

inps = {n: make(l) for n, l in (("contig", 0), ("paged16", 16), ("paged256", 256))}
def step(inp):
    with kvcache.value_checks(False):
        return flashtriton.flash_attn_with_kvcache(**inp)
def step_checked(inp):
    return flashtriton.flash_attn_with_kvcache(**inp)
for n, inp in inps.items():
    step(inp); step(inp); step_checked(inp); step_checked(inp)
    print(n, flashtriton.backends.select(inp['q'].device), plans.stats, flush=True)
    pl = [p for k, p in plans._PLANS.items()][-1]
    ln = pl.launches
    print(n, "launches", len(ln), [l.kernel.fn.__name__ for l in ln], "direct", [l.direct is not None for l in ln],
          "allocs", pl.allocs, "descs", [len(l.direct.descs) if l.direct else None for l in ln],
          "ptr subs in/alloc", [(len(l.direct.in_pos), len(l.direct.alloc_pos)) for l in ln if l.direct], flush=True)
N = 3000
modes = {"off": step, "on": step_checked}
res = {(n, m): [] for n in inps for m in modes}
last = {}
for rnd in range(7):
    for n, inp in inps.items():
        for m, fn in modes.items():
            before = dict(plans.stats); c0 = dict(calls)
            t = time.perf_counter()
            for _ in range(N):
                fn(inp)
            res[n, m].append((time.perf_counter() - t) / N * 1e6)
            last[n, m] = ({k: plans.stats[k] - before[k] for k in before}, {k: calls[k] - c0[k] for k in calls})
for (n, m), v in res.items():
    v.sort()
    d, dc = last[n, m]
    print(f"{n:9s} checks {m:3s} host us/call (CPU sim, no CUDA) min {v[0]:.2f} median {v[len(v)//2]:.2f}"
          f"  last round plans {d} calls {dc}")
