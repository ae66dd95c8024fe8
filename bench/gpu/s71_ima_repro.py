"""Session 71: does call 4's illegal memory access (tf32x3, D = 192, dK dV 16 x 64 x 8 / dQ 64 x 16 x 8) reproduce,
and which kernel and precision does it need? Each variant in a fresh process (an illegal access poisons the CUDA
context): forward + backward, B 2, H 16, N 2048, D 192, fp32, the given FLASHTRITON_ALLOW_TF32 and tiles at block_d
256. Prints ok (and the max |dq| error against the tree's tiles' run) or the error.
Usage: PYTHONPATH=src python bench/gpu/s71_ima_repro.py"""
import subprocess
import sys

CHILD = r"""
import os, sys, torch
from flashtriton import flash_attn_func
from flashtriton.kernels import configs
T = configs.Tile
knob, dkdv, dq = sys.argv[1], sys.argv[2], sys.argv[3]
torch.manual_seed(0)
q, k, v = (torch.randn(2, 2048, 16, 192, device="cuda", requires_grad=True) for _ in range(3))
dout = torch.randn_like(q)
os.environ["FLASHTRITON_ALLOW_TF32"] = knob
def run():
    out = flash_attn_func(q, k, v)
    return torch.autograd.grad(out, (q, k, v), dout)
ref = run()
table = configs.DEFAULTS_FP32_TC if knob != "0" else configs.DEFAULTS_FP32
if dkdv != "-":
    table["dkdv"][256] = T(*map(int, dkdv.split("x")), 2)
if dq != "-":
    table["dq"][256] = T(*map(int, dq.split("x")), 2)
from flashtriton.launchers import plans
plans.clear()
for _ in range(5):
    got = run()
torch.cuda.synchronize()
print("ok, max |diff| dq/dk/dv", [f"{(a - b).abs().max().item():.1e}" for a, b in zip(got, ref)])
"""

VARIANTS = [("x3", "16x64x8", "64x16x8"), ("x3", "16x64x8", "-"), ("x3", "-", "64x16x8"), ("0", "16x64x8", "64x16x8"),
            ("1", "16x64x8", "64x16x8")]
for knob, dkdv, dq in VARIANTS:
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, knob, dkdv, dq], capture_output=True, text=True, timeout=60)
        tail = (r.stdout.strip().splitlines() or [""])[-1] if r.returncode == 0 else \
            [ln for ln in r.stderr.splitlines() if "Error" in ln][-1:]
    except subprocess.TimeoutExpired:
        tail = "timeout"
    print(f"knob {knob} dkdv {dkdv} dq {dq}: {tail}", flush=True)
