"""Session 28: the decode table's paged and append sections alone, after bench_paged began
timing its contiguous reference interleaved with the paged layouts (2 rounds, best of
each). Writes decode-sections.md under the given folder.

    PYTHONPATH=src python bench/gpu/s28_decode_sections.py OUT_DIR      (~60 s)
"""
import sys
from pathlib import Path

import torch

from flashtriton.bench import decode

rows = []
for b, n in decode.PAGED_SHAPES:
    rows += decode.bench_paged(b, n, "cuda", True)
for b, n in decode.APPEND_SHAPES:
    rows += decode.bench_append(b, n, "cuda", True)
env = decode.common.environment("cuda")
md = decode.markdown(rows, env)
Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
(Path(sys.argv[1]) / "decode-sections.md").write_text(md + "\n")
print(md)
