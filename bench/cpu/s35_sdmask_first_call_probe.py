"""Session 35 (unresolved): S_dmask of return_attn_probs=True differs between a process's first CPU call
and a later one (4 of 40 fresh processes, 5.4e-5 on probabilities <= 1, heads 0-1; out and lse bitwise
equal), and that first S_dmask is the one check_attention flags against float64 (tests/helpers.py:
"S_dmask: error 5.4e-05", seed 10 of rand_qkv(1, 70, 90, 4, 2, 40, float32), causal, scale 0.3: 2 of 40
runs). probs._probs_dense recomputes S_dmask with torch ops (einsum, exp) from q, k and the kernel's lse.
Calling _probs_dense twice after the first forward gave equal results in 30 / 30 processes, so the
trigger sits between the first forward and the backward. Run from the repo root, ~40 times:

    for r in $(seq 40); do PYTHONPATH=src python bench/cpu/s35_sdmask_first_call_probe.py; done | sort | uniq -c
"""
import sys, torch
sys.path.insert(0, "tests")
from helpers import rand_qkv
import flashtriton
from flashtriton import memory
torch.manual_seed(10)
q, k, v = rand_qkv(1, 70, 90, 4, 2, 40, torch.float32, "cpu")
q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
with memory.poison_outputs():
    torch.manual_seed(0)
    with flashtriton.use_backend("cpu"):
        out, lse, p = flashtriton.flash_attn_func(q, k, v, causal=True, softmax_scale=0.3, return_attn_probs=True)
        p0, lse0, out0 = p.clone(), lse.clone(), out.detach().clone()
        dout = torch.randn_like(out)
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    with flashtriton.use_backend("cpu"):
        out2, lse2, p2 = flashtriton.flash_attn_func(q, k, v, causal=True, softmax_scale=0.3, return_attn_probs=True)
print("p changed by bwd", (p - p0).abs().max().item(), "| first vs second call: lse", (lse0 - lse2).abs().max().item(),
      "p", (p0 - p2).abs().max().item(), "out", (out0 - out2.detach()).abs().max().item())
