"""Session 53 (offline, sm_90a): every fwd.py variant the FOLD patch touches compiles with NEG_SCALE False / True (run
from a tree with bench/wip/fwd-py-fold.patch applied: PYTHONPATH=src python bench/wip/fwd_py_fold_sweep.py)."""
import re, time, traceback
from flashtriton.bench.compile_report import compile_variant, ptxas_log
from flashtriton.kernels import configs
T = configs.Tile
V = [("D64 causal short", 64, T(64, 64, 4, 3), {}, dict(HAS_RIGHT=True)),
     ("D64 causal long", 64, T(128, 64, 4, 4), {}, dict(HAS_RIGHT=True)),
     ("D128 causal short", 128, T(64, 64, 4, 3), {}, dict(HAS_RIGHT=True)),
     ("D128 causal", 128, T(128, 128, 8, 3), {}, dict(HAS_RIGHT=True)),
     ("D128 window tile", 128, T(64, 64, 4, 3), {}, dict(HAS_RIGHT=True, HAS_LEFT=True)),
     ("D256 causal short", 256, T(64, 32, 4, 2), {}, dict(HAS_RIGHT=True)),
     ("D128 varlen causal", 128, T(128, 128, 8, 3), {}, dict(HAS_RIGHT=True, IS_VARLEN=True, USE_ORDER=True)),
     ("D128 causal dropout", 128, T(128, 128, 8, 3), {}, dict(HAS_RIGHT=True, HAS_DROPOUT=True)),
     ("D64 plain ragged (MASKED last tile)", 64, T(128, 64, 4, 4), {}, dict()),
     ("D128 causal host desc", 128, T(64, 64, 4, 3), {}, dict(HAS_RIGHT=True, HOST_DESC=True)),
     ("D64 causal fp16", 64, T(64, 64, 4, 3), dict(dtype="fp16"), dict(HAS_RIGHT=True)),
     ("D64 fp32 causal", 64, configs.DEFAULTS_FP32["fwd"][64], dict(dtype="fp32"), dict(HAS_RIGHT=True, DOT_PRECISION="ieee"))]
for name, d, tile, kw, flags in V:
    for neg in (False, True):
        t0 = time.time()
        try:
            c = compile_variant("fwd", tile, d, **kw, **flags, NEG_SCALE=neg)
            log = ptxas_log(c)
            regs = re.search(r"Used (\d+) registers", log); sp = re.search(r"(\d+) bytes spill stores", log)
            print(f"{name} NEG_SCALE={neg}: ok regs {regs and regs.group(1)} spill {sp and sp.group(1)} ({time.time()-t0:.0f} s)", flush=True)
        except Exception as e:
            print(f"{name} NEG_SCALE={neg}: FAILED {type(e).__name__}: {str(e)[-200:]}", flush=True)
