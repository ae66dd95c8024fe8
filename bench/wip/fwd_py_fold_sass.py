"""Session 53 (offline, sm_90a): FOLD for kernels/fwd.py's masked tiles - the SASS of the routed short causal
tiles before / after. Run from a tree's root: PYTHONPATH=src python bench/wip/fwd_py_fold_sass.py
Prints, per variant, registers, spills, total SASS and the float ops the softmax uses (FMUL / FADD / FFMA /
MUFU.EX2 / FSEL / FMNMX). The masked loop is the kernel's first and third loop; the totals move by what the
masked step's body changes (x2: both masked loops)."""
import collections
import os
import re
import subprocess
import tempfile

from flashtriton.bench.compile_report import _NVBIN, compile_variant, ptxas_log
from flashtriton.kernels import configs

VARIANTS = [("D=64 causal short (64, 64, 4, 3)", 64, configs.Tile(64, 64, 4, 3), dict(HAS_RIGHT=True, NEG_SCALE=False)),
            ("D=128 causal short (64, 64, 4, 3)", 128, configs.Tile(64, 64, 4, 3), dict(HAS_RIGHT=True, NEG_SCALE=False)),
            ("D=64 window (128, 64, 4, 4)", 64, configs.Tile(128, 64, 4, 4), dict(HAS_RIGHT=True, HAS_LEFT=True, NEG_SCALE=False))]
OPS = ("FMUL", "FADD", "FFMA", "MUFU.EX2", "FSEL", "FMNMX", "HGMMA")

for name, d, tile, flags in VARIANTS:
    c = compile_variant("fwd", tile, d, **flags)
    log = ptxas_log(c)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        open(cubin, "wb").write(c.asm["cubin"])
        sass = subprocess.run([os.path.join(_NVBIN, "cuobjdump"), "--dump-sass", cubin], capture_output=True,
                              text=True).stdout
    ins = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)
    cnt = collections.Counter(i.split(".")[0] if not i.startswith("MUFU") else i for i in ins)
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores", log)
    print(f"{name}: regs {regs and regs.group(1)}, spill {spill and spill.group(1)}, SASS {len(ins)}, "
          + ", ".join(f"{o} {cnt.get(o, 0)}" for o in OPS), flush=True)
