"""Session 72, call 3: plain tf32 (FLASHTRITON_ALLOW_TF32=1) gets its own tile table (configs.DEFAULTS_FP32_TC):
call 2 found tf32x3's new block_d 256 backward tiles OutOfResources as tf32 (262144 bytes of shared memory asked).
Times the tf32 candidates that compile within shared memory (offline sm_90a compiles, session 72: dK dV 16 x 64 x 4
s2 197 KB, dQ 64 x 32 x 8 s1 229 KB, 32 x 128 x 8 s1 197 KB, dQ 128 x 64 x 8 s1 229 KB, forward 128 x 64 x 8 s1 197
KB at block_d 256), and repeats call 2's tf32x3 block_d 128 reading on the new DEFAULTS_FP32_X3. (Session 74: the
dQ 128 x 64 x 8 s1 figure is block_d 128's, 229384 B; at block_d 256 it asks 458760 B as tf32, offline and on the
H100, so it does not fit there.)
Prediction (bench/NOTES.md "Session 72"): tf32's 1-stage tiles within 5% of the 2-stage ones (the loads are no
longer hidden, but the MMA is a third of x3's); tf32x3 block_d 128 1.1-1.2x again (call 2: 1.08x / 1.19x).
Usage: PYTHONPATH=src:tests:bench/gpu python bench/gpu/s72_tc_tables.py [seconds budget]
       [call4 | bd64 | bwd256 | bwd256check | dkdv256]"""
import sys
import time

import torch
import triton

import s71_tf32x3 as base
from flashtriton.kernels import configs

T = configs.Tile
base.BUDGET = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
SAVED = {name: {k: dict(v) for k, v in table.items()} for name, table in configs.FP32_TC_TABLES.items()}


def reset():
    for name, table in configs.FP32_TC_TABLES.items():
        for k, v in SAVED[name].items():
            table[k].clear()
            table[k].update(v)


def patch(dots, bd, **tiles):
    def fn():
        reset()
        for kernel, t in tiles.items():
            configs.FP32_TC_TABLES[dots][kernel][bd] = t
    return fn


def label(tiles):
    return " ".join(f"{k} {t.block_m}x{t.block_n}x{t.num_warps}s{t.num_stages}" for k, t in tiles.items()) or "table"


def case(knob, dots, d, fwd_sets, bwd_sets, n=2048):
    bd = triton.next_power_of_2(d)
    q, k, v, dout = base.inputs(d, n)
    fl = 4 * 2 * 16 * n * n * d
    fwd, fwd_bwd = base.passes(q, k, v, dout)
    base.timed(f"{dots} fwd D={d}", {label(s): (knob, patch(dots, bd, **s)) for s in fwd_sets}, fwd, fl)
    if bwd_sets:
        base.timed(f"{dots} fwd+bwd D={d}", {label(s): (knob, patch(dots, bd, **s)) for s in bwd_sets}, fwd_bwd,
                   3.5 * fl)
    reset()


def call4():
    """Call 4: tf32's block_d 256 forward moved to 128 x 64 x 8 s1 after call 3 (D = 192); the same at D = 256, and
    tf32x3's forward at D = 192 on it (compiled shared memory 131200 B as tf32x3). Since session 73 both tables hold
    128 x 64 x 8 s1, so "table" is that tile and the old 128 x 32 x 8 s1 is the other column for both."""
    case("1", "tf32", 256, [{}, {"fwd": T(128, 32, 8, 1)}], [])
    case("1", "tf32", 192, [{}, {"fwd": T(128, 32, 8, 1)}], [])
    case("x3", "tf32x3", 192, [{}, {"fwd": T(128, 32, 8, 1)}], [])


def bd64():
    """Queued for session 73: tf32x3 at block_d 64 with 1-stage tiles, 128 wide on both sides (offline compiles,
    session 72: forward 128 x 128 x 8 s1 65536 B, s2 131096; dK dV / dQ 128 x 128 x 8 s1 65536 each)."""
    case("x3", "tf32x3", 64, [{}, {"fwd": T(128, 128, 8, 2)}, {"fwd": T(128, 128, 8, 1)}],
         [{}, {"dkdv": T(128, 128, 8, 1), "dq": T(128, 128, 8, 1)}, {"dkdv": T(64, 128, 8, 1), "dq": T(128, 64, 8, 1)}])


def bwd256():
    """Queued in session 73: tf32x3's block_d 256 backward (~42 of 46.5 ms forward + backward at D = 192, H100) on
    wider 1-stage tiles (offline sm_90a compiles as tf32x3, session 73: dK dV 64 x 64 x 4 / 8 s1 131072 B, 32 x 128 x
    8 s1 262144 (no fit); dQ 64 x 64 x 4 / 8 s1 131072, 128 x 32 / 128 x 64 x 8 s1 131080; the table's 32 x 64 x 4 /
    64 x 32 x 4 s1)."""
    case("x3", "tf32x3", 192, [{}],
         [{}, {"dkdv": T(64, 64, 4, 1)}, {"dkdv": T(64, 64, 4, 1), "dq": T(64, 64, 4, 1)}, {"dq": T(128, 64, 8, 1)},
          {"dq": T(128, 32, 8, 1)}, {"dkdv": T(64, 64, 8, 1), "dq": T(64, 64, 8, 1)}])


def bwd256check():
    """Session 74: after bwd256's winner enters DEFAULTS_FP32_X3, "table" is the new pair and the other column
    session 73's 32 x 64 x 4 s1 dK dV / 64 x 32 x 4 s1 dQ, at D = 192 and 256."""
    old = {"dkdv": T(32, 64, 4, 1), "dq": T(64, 32, 4, 1)}
    case("x3", "tf32x3", 192, [{}], [{}, old])
    case("x3", "tf32x3", 256, [{}], [{}, old])


def dkdv256():
    """Session 74, after dQ 128 x 64 x 8 s1 entered DEFAULTS_FP32_X3: dK dV is now most of tf32x3's block_d 256
    backward; 1-stage tiles beside the table's 32 x 64 x 4 (64 x 64 x 4 s1 was level before the dQ change)."""
    case("x3", "tf32x3", 192, [{}], [{}, {"dkdv": T(32, 64, 8, 1)}, {"dkdv": T(64, 32, 4, 1)},
                                      {"dkdv": T(64, 32, 8, 1)}, {"dkdv": T(64, 64, 4, 1)}])


if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    if len(sys.argv) > 2:       # a named part
        {"call4": call4, "bd64": bd64, "bwd256": bwd256, "bwd256check": bwd256check,
         "dkdv256": dkdv256}[sys.argv[2]]()
        sys.exit()
    case("1", "tf32", 192, [{}, {"fwd": T(128, 64, 8, 1)}, {"fwd": T(64, 64, 4, 1)}, {"fwd": T(64, 32, 4, 2)}],
         [{}, {"dq": T(64, 32, 4, 1)}, {"dq": T(64, 32, 8, 1)}, {"dkdv": T(16, 64, 4, 1), "dq": T(64, 32, 4, 1)}])
    case("1", "tf32", 128, [{}, {"fwd": T(128, 128, 8, 1)}],
         [{}, {"dkdv": T(32, 128, 8, 1), "dq": T(128, 64, 8, 1)}, {"dq": T(128, 64, 8, 1)},
          {"dkdv": T(64, 64, 4, 1), "dq": T(128, 64, 4, 1)}])
    old128 = dict(fwd=T(128, 64, 8, 2), dkdv=T(32, 128, 8, 2), dq=T(128, 32, 8, 2))
    case("x3", "tf32x3", 128, [{}, {"fwd": old128["fwd"]}], [{}, {"dkdv": old128["dkdv"], "dq": old128["dq"]}])
    print(f"total {time.time() - base.T0:.0f} s", flush=True)
