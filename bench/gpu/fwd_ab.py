"""The forward A/B loop the session-15 / 22 scripts share (s15_persistent_variants_ab.py,
s22_short_fwd_ab.py, s22_host_desc_ab.py): variants timed two rounds, the second in
reverse order, each round keeping one call's output. Scripts import it as
`from fwd_ab import ...` (Python puts the script's folder on sys.path). (The scripts were
moved onto it after their runs, same logic; git history holds the versions that ran.)
"""
import cProfile
import io
import pstats

import torch


def alternate_outputs(variants, call, measure):
    """variants: name -> apply(); call() -> output; measure() -> a value. Returns (name ->
    [round 1 value, round 2 value], name -> the last output, as float32)."""
    res = {name: [] for name in variants}
    outs = {}
    for rep in range(2):
        for name in (list(variants) if rep == 0 else list(variants)[::-1]):
            variants[name]()
            with torch.no_grad():
                outs[name] = call().detach().float()
            res[name].append(measure())
    return res, outs


def host_profile(f, calls=200, top=25, lines=60):
    """cProfile of `calls` calls of f with the GPU held busy (torch.cuda._sleep), so that
    no call waits on it: the text of the top entries by own time."""
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    torch.cuda._sleep(400_000_000)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        f()
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(top)
    return "\n".join(s.getvalue().splitlines()[:lines])
