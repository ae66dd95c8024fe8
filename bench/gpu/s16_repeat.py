"""Session 16: the persistent fwd_ws.py's repeatability in ONE process (no other load),
old kernel (descriptors made per tile: fwd_ws.py as of 0ecf20a, read from git) against the
new one (descriptors made once over (B * N, H-span)). Each persistent call is compared
bitwise with one tile a program; for a differing call, the rows that differ and the
largest difference are printed (a whole wrong tile reads ~1; a rounding difference
~1e-2). Decides whether a single-process GPU test can catch the race. Ran at 2fee247
(the launcher's kernel arguments have changed since: check that commit out to rerun)."""
import importlib.util
import sys
import subprocess
import tempfile

import torch

import flashtriton
from flashtriton.launchers import forward, plans


def _old_kernel():
    """attn_fwd_ws_kernel of fwd_ws.py at 0ecf20a, imported from a temporary file (Triton
    reads a kernel's source from its file)."""
    src = subprocess.run(["git", "show", "0ecf20a:src/flashtriton/kernels/fwd_ws.py"], check=True,
                         capture_output=True, text=True).stdout
    src = src.replace("from .common import", "from flashtriton.kernels.common import")
    path = tempfile.NamedTemporaryFile("w", suffix="_fwd_ws_0ecf20a.py", delete=False)
    path.write(src)
    path.close()
    spec = importlib.util.spec_from_file_location("fwd_ws_0ecf20a", path.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attn_fwd_ws_kernel


NEW = forward.attn_fwd_ws_kernel
CASES = [(128, 2048, {}), (256, 16384, dict(causal=True)), (128, 2048, dict(dropout_p=0.1))]


def run(calls):
    kinds = set(forward.WS_PERSISTENT)
    for name, kern in (("old", _old_kernel()), ("new", NEW)):
        forward.attn_fwd_ws_kernel = kern
        for d, n, kw in CASES:
            h, b = (16 if d == 128 else 8), 16384 // n
            bad = 0
            detail = []
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            forward.WS_PERSISTENT = set()
            plans.clear()
            torch.manual_seed(3)
            with torch.no_grad():
                want = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]
            forward.WS_PERSISTENT = kinds
            plans.clear()
            for i in range(calls):
                torch.manual_seed(3)
                with torch.no_grad():
                    got = flashtriton.flash_attn_func(q, k, v, return_attn_probs=True, **kw)[:2]
                if not all(torch.equal(x, y) for x, y in zip(got, want)):
                    bad += 1
                    if len(detail) < 3:
                        diff = (got[0].float() - want[0].float()).abs()
                        rows = (diff.amax(-1) > 0).nonzero()
                        detail.append(f"max {diff.max().item():.3g}, {rows.shape[0]} (b, n, h) rows differ, "
                                      f"first {rows[:2].tolist()}, lse max diff "
                                      f"{(got[1] - want[1]).abs().max().item():.3g}")
            print(f"{name} D={d} N={n} {kw}: {bad} of {calls} differ", *detail, sep="\n   ", flush=True)
    forward.attn_fwd_ws_kernel = NEW


if __name__ == "__main__":
    run(int(sys.argv[1]) if sys.argv[1:] else 40)
