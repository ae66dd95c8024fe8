"""Session 74: read a s72_tc_tables.py sweep's forward + backward line (bwd256 / dkdv256: tf32x3, D = 192) and,
when a 1-stage pair beats the table by >= 3%, write it into DEFAULTS_FP32_X3's block_d 256 entries of this tree's
configs.py (on the device's copy, so the fp32 GPU tests of the same call run on it; the pair lands in git only after
they pass).
Usage: python bench/gpu/s74_pick.py SWEEP_LOG        exit 0: patched, 1: the table stands"""
import re
import sys

CONFIGS = "src/flashtriton/kernels/configs.py"
line = next(x for x in open(sys.argv[1]) if x.startswith("tf32x3 fwd+bwd D=192:"))
times = {m[1].strip(): float(m[2]) for m in re.finditer(r"(?:^[^:]*:|,)\s*([a-z0-9 x]+?) (nan|[0-9.]+) ms", line)}
table = times.pop("table")
best = min(times, key=lambda k: times[k] if times[k] == times[k] else float("inf"))
print(f"table {table:.3f} ms; best {best} {times[best]:.3f} ms ({times[best] / table:.3f}x)")
if not times[best] <= 0.97 * table:
    print("the table stands")
    sys.exit(1)
src = open(CONFIGS).read()
for kernel, m, n, w, s in re.findall(r"(dkdv|dq) (\d+)x(\d+)x(\d+)s(\d+)", best):
    pat = re.compile(rf'(    "{kernel}": {{\*\*DEFAULTS_FP32_TC\["{kernel}"\].*?256: )Tile\([^)]*\)')
    assert pat.search(src), kernel
    src = pat.sub(rf"\g<1>Tile({m}, {n}, {w}, {s})", src, count=1)
open(CONFIGS, "w").write(src)
print("patched:", [x for x in src.splitlines() if "DEFAULTS_FP32_TC[\"d" in x])
