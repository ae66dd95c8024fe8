"""Session 15: the direct launch of replays (plans._DirectLaunch) actually taken. Until now
the replay's hook test read `launch_enter_hook is None`, which Triton 3.6's HookChain never
is, so every replay went through Triton's Python launcher (found in s15_host_floor.py's
cProfile: driver.py `inner` and `__call__` on every step). A/B in one process: "off"
patches plans._no_launch_hooks to False (the old behaviour), "on" is the fix; alternating,
3 rounds, host us per call with the GPU held busy (bench.common.host_us, best of 3 loops).

Prediction (written before the run): the profile put ~24% of a decode step's profiled time
in Triton's launcher Python (driver __call__ + inner + make_tensordesc_arg +
TensorDescriptor objects), the C launch itself ~7%: decode B = 1 8k host ~86 -> ~68-72 us;
prefill forward 1k (one launch, in-kernel descriptors) -3-6 us; forward+backward 1k
(3-4 launches) -10-20 us. The eager decode figure (read flush) falls to the kernel's
~19 us only if the host drops below flush + kernel (~79 us): expect it at least half the
time.
"""
import torch

import flashtriton
from flashtriton.bench import decode as bd
from flashtriton.bench.common import host_us, time_ms
from flashtriton.launchers import plans

_fixed = plans._no_launch_hooks


def mode(on):
    plans._no_launch_hooks = _fixed if on else (lambda: False)


def main():
    d8 = bd.make_inputs(1, 8192, "cuda")
    d8b = bd.make_inputs(8, 8192, "cuda")
    q, k, v = (torch.randn(1, 1024, 16, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)

    def fwd():
        with torch.no_grad():
            return flashtriton.flash_attn_func(q, k, v, causal=True)

    def fwd_bwd():
        out = flashtriton.flash_attn_func(q, k, v, causal=True)
        out.backward(dout)

    cases = {
        "decode B=1 8k host": lambda: host_us(lambda: bd.ours(d8), calls=200, reps=3),
        "decode B=8 8k host": lambda: host_us(lambda: bd.ours(d8b), calls=200, reps=3),
        "prefill fwd 1k causal host": lambda: host_us(fwd, calls=200, reps=3),
        "prefill fwd+bwd 1k causal host": lambda: host_us(fwd_bwd, calls=100, reps=3),
        "decode B=1 8k eager (read flush)": lambda: time_ms(lambda: bd.ours(d8), "cuda", flush="read") * 1e3,
        "decode B=8 8k eager (read flush)": lambda: time_ms(lambda: bd.ours(d8b), "cuda", flush="read") * 1e3,
    }
    res = {name: {"off": [], "on": []} for name in cases}
    outs = {}
    for rnd in range(3):
        for on in ((False, True) if rnd % 2 == 0 else (True, False)):
            mode(on)
            for name, fn in cases.items():
                res[name]["on" if on else "off"].append(fn())
            outs[on] = (bd.ours(d8).clone(), fwd().clone())
    mode(True)
    for name, r in res.items():
        print(f"{name:34s} Triton launcher {' / '.join(f'{x:6.1f}' for x in r['off'])}   "
              f"direct {' / '.join(f'{x:6.1f}' for x in r['on'])}", flush=True)
    print("bitwise equal:", all(torch.equal(a, b) for a, b in zip(outs[False], outs[True])))


if __name__ == "__main__":
    main()
