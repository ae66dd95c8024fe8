"""Launch plans: an eager call's launches recorded once per call signature, then replayed.

Why: on the GPU machine's CPU an eager forward costs 140-260 us of host time and a causal
forward+backward at N = 4k 1.4-1.9 ms, against 50-180 us and 1.5 ms of kernels
(bench/NOTES.md, "Session 10"): Triton's launch path is 40-85 us a launch (17-22 us
through the compiled kernel directly), our own decisions (warp specialization, tiles,
descriptors, strides) most of the rest. A model calls attention with the same shapes in
every layer and step, so those decisions are the same every time.

How: the first call of a signature runs the launchers normally while a recorder notes,
in order, every allocation the call makes (flashtriton.memory) and every launch (the
kernel, its grid, its arguments, and the CompiledKernel Triton returns). Each argument
is classified: one of the call's inputs, one of its allocations, a host-made tensor
descriptor over one of those, or a constant. A replay allocates again, substitutes the
new tensors and launches the compiled kernels directly.

Status (2026-11-29, session 10): written and tested under the Triton interpreter
(tests/test_plans.py: replays bitwise equal to the launchers for dense, causal, window,
GQA + dropout, ALiBi + softcap, the warp-specialized paths and three decode steps). The
direct CompiledKernel launch (_Launch.fire) runs on the H200 since session 15 (a check of
Triton 3.6's launch hooks had kept it off before; bench/NOTES.md, "Session 15"); the GPU
suite runs test_plans.py with it.

Plans key on the call, not on module constants: code that changes a constant the
launchers read (tests, bench/tune.py's candidate tiles) must clear() (a sweep timed the
first candidate's plan for every tile until session 19).

What is never replayed (the call runs the launchers as usual):
  - a path that does host-side torch work besides allocations, which marks itself with
    unreplayable() (copies of misaligned inputs, padded lse buffers, ...);
  - a launch argument that is a tensor the recorder cannot place;
  - varlen calls, the interpreter, autotuning, and CUDA-graph capture.

The signature (plan_key) holds everything the launchers decide from: shapes, strides,
dtypes, devices and 16-byte alignment of the tensors, the scalar options, and the
FLASHTRITON_* variables they read. Anything else they read (module constants that tests
monkeypatch) is not in it: clear() forgets every plan (tests/conftest.py does, per test).
"""
from __future__ import annotations

import functools
import threading

import torch
import triton
from triton.runtime.driver import driver

from .. import envvars
from .. import memory as _memory
from .sharing import gpu_shared

_state = threading.local()
_PLANS: dict = {}
# The environment the launchers read on every call (the rest is read at import).
_ENV = ("FLASHTRITON_WARP_SPEC", "FLASHTRITON_HOST_DESCRIPTORS", "FLASHTRITON_ALLOW_TF32", "FLASHTRITON_AUTOTUNE",
        "FLASHTRITON_PLANS")
# The values of _ENV now, as str or None (flashtriton.envvars: a dict lookup a name).
_env_values = envvars.reader(_ENV)


stats = {"recorded": 0, "replayed": 0, "unreplayable": 0}
MAX_PLANS = 4096        # a plan holds the compiled kernels' handles and, at most, a cache's tensor
# Bumped whenever the plans are forgotten: a caller that keeps a plan of its own (kvcache's
# step memo) replays it only while the generation it took it in is current.
generation = 0
# Called by clear(): a caller that keeps plans of its own drops them there (kvcache's step
# memo), so that no forgotten plan (its compiled kernels, workspaces and counters) stays alive.
on_clear: list = []


def clear():
    """Forget every plan (after changing anything the launchers read besides the key)."""
    global generation
    _PLANS.clear()
    generation += 1
    for forget in on_clear:
        forget()


class _Recorder:
    def __init__(self, inputs):
        self.inputs = inputs
        self.allocs = []        # (tensor, kind, spec)
        self.launches = []      # (kernel, grid, args, kwargs, compiled)
        self.persistent = []    # tensors that outlive the call (caches): replays pass them as they are
        self.replayable = True
        self.shared = None      # the key's gpu_shared flag: the policy decides from it (policy._warp_spec_switch)


def recording():
    return getattr(_state, "recorder", None)


def unreplayable():
    """Called by a launcher path that does host-side torch work a replay would skip."""
    rec = recording()
    if rec is not None:
        rec.replayable = False


def persistent(t: torch.Tensor) -> torch.Tensor:
    """Marks t, a tensor that outlives the call (a launcher's cache), as a constant of the
    plan being recorded: replays pass this very tensor. Returns t."""
    rec = recording()
    if rec is not None:
        rec.persistent.append(t)
    return t


def stream_id(device: torch.device):
    """The current stream of device (part of a key where a persistent tensor is per stream):
    torch.cuda.current_stream(device).cuda_stream, without building the Stream object (the
    raw handle, as triton's driver reads it)."""
    if device.type != "cuda":
        return None
    index = device.index
    return torch._C._cuda_getCurrentRawStream(index if index is not None else torch.cuda.current_device())


def tensor_stream_id(t: torch.Tensor):
    """stream_id(t.device), from the tensor (is_cuda and get_device(): device.type builds
    a str each call, ~0.15 us on the CI CPU; a CUDA tensor's device has its index)."""
    if not t.is_cuda:
        return None
    return torch._C._cuda_getCurrentRawStream(t.get_device())


def note_alloc(t: torch.Tensor, kind: str, spec):
    """flashtriton.memory reports each allocation here (kind "empty" or "arange")."""
    rec = recording()
    if rec is not None:
        rec.allocs.append((t, kind, spec))


_memory.alloc_hook = note_alloc


def launch(kernel, grid, *args, **kwargs):
    """kernel[grid](*args, **kwargs), recorded when a recorder is active."""
    compiled = kernel[grid](*args, **kwargs)
    rec = recording()
    if rec is not None:
        rec.launches.append((kernel, grid, args, kwargs, compiled))
    return compiled


def sign(tensors) -> tuple:
    """The tensors' part of a plan's key: (shape, strides, dtype, device, 16-byte aligned)
    each, None for None. (One expression, no helper call per tensor: a decode step signs
    12 tensors, and per-tensor calls were ~1/6 of its host Python on the CI CPU.)
    flash_attn_with_kvcache signs its tensors once (kvcache._signature: the same fields,
    one flat tuple), for its structure memo and for plan_key (signed=); its plan keys hold
    the memo entry for the signature (a kvcache._Structure), not the signature itself."""
    return tuple(None if t is None else (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16 == 0)
                 for t in tensors)


def plan_key(op: str, tensors, scalars, signed=None, policy=True):
    """The signature of a call, or None where plans do not apply (see module doc). Under
    the interpreter only with FLASHTRITON_PLANS=1 (the tests of the plans themselves).
    signed: sign(tensors), when the caller has it already (or a stand-in for it that is
    equal exactly when the signatures are). policy=False: the launchers never consult the
    warp-specialization policy (decode's), so the key holds no gpu_shared flag (False)."""
    env = _env_values()
    flag = env[-1]
    if flag == "0" or env[3] == "1":                     # off, or autotuning
        return None
    first = tensors[0] if tensors[0] is not None else next(t for t in tensors if t is not None)
    if triton.knobs.runtime.interpret:
        if flag != "1":
            return None
    elif not first.is_cuda or torch.cuda.is_current_stream_capturing():
        return None
    # (gpu_shared: under FLASHTRITON_WARP_SPEC=auto the policy leaves the warp-specialized
    # kernels while other processes share the GPU, so a plan recorded alone must not replay
    # then, nor the reverse; the recording decides from this same value, rec.shared)
    shared = policy and first.is_cuda and env[0] in (None, "auto") and gpu_shared(first.device)
    return (op, sign(tensors) if signed is None else signed, scalars, env, shared)


def run(key, inputs, body):
    """body() (the launchers) under a recorder the first time a key is seen; a replay of
    its launches afterwards. Returns body's result (a tuple of tensors)."""
    if key is None:
        return body()
    plan = _PLANS.get(key)
    if plan is not None:
        stats["replayed"] += 1
        return plan.replay(inputs)
    rec = _Recorder(inputs)
    rec.shared = key[-1]
    _state.recorder = rec
    try:
        result = body()
    finally:
        _state.recorder = None
    plan = _Plan.build(rec, result)
    if plan is None:
        stats["unreplayable"] += 1
    else:
        stats["recorded"] += 1
        if len(_PLANS) >= MAX_PLANS:
            clear()             # many signatures (e.g. every sequence length of a server): start over
        _PLANS[key] = plan
    return result


class _Plan:
    """The recorded launches of one signature, with every tensor argument as a slot."""

    @staticmethod
    def build(rec: _Recorder, result):
        if not rec.replayable:
            return None
        slots = {}
        for i, t in enumerate(rec.inputs):
            if t is not None:
                if id(t) in slots:
                    # one tensor passed as two inputs (flash_attn_func(q, k, k)): the key does
                    # not say which inputs alias, so a plan would bind both positions to the
                    # first and replay a later call's k in place of its v (found by review,
                    # session 23; tests/test_plans.py::test_regression_aliased_inputs_not_replayed)
                    return None
                slots[id(t)] = ("in", i)
        for j, (t, _, _) in enumerate(rec.allocs):
            slots.setdefault(id(t), ("alloc", j))
        for t in rec.persistent:
            slots.setdefault(id(t), ("const", t))
        from triton.tools.tensor_descriptor import TensorDescriptor
        gluon_desc = _gluon_descriptor_class()

        def classify(x):
            if isinstance(x, torch.Tensor):
                return slots.get(id(x), None) or ("bad",)
            if isinstance(x, TensorDescriptor):
                base = slots.get(id(x.base))
                if base is None:
                    return ("bad",)
                return ("desc", base, list(x.shape), list(x.strides), list(x.block_shape))
            if gluon_desc is not None and type(x) is gluon_desc and x.padding == "zero":
                # (session 25) Gluon's descriptor (the Gluon kernels' routes): rebuilt with
                # its shared layout, which the plan's key fixes (dtype, tile)
                base = slots.get(id(x.base))
                if base is None:
                    return ("bad",)
                return ("desc", base, list(x.shape), list(x.strides), list(x.block_shape), x.layout)
            if isinstance(getattr(x, "base", None), torch.Tensor):
                # a descriptor type the replay cannot rebind: as a constant it would replay
                # the first call's pointers (session 23;
                # tests/test_plans.py::test_regression_foreign_descriptor_unreplayable)
                return ("bad",)
            return ("const", x)

        launches = []
        for kernel, grid, args, kwargs, compiled in rec.launches:
            a = [classify(x) for x in args]
            kw = {k: classify(x) for k, x in kwargs.items()}
            if any(c[0] == "bad" for c in a) or any(c[0] == "bad" for c in kw.values()):
                return None
            launches.append(_Launch(kernel, grid, a, kw, compiled))
        outs = [slots.get(id(t)) for t in result]
        if any(o is None for o in outs):
            return None
        return _Plan([(kind, spec) for _, kind, spec in rec.allocs], launches, outs)

    def __init__(self, allocs, launches, outs):
        self.allocs = allocs
        self.launches = launches
        self.outs = outs
        self.compiled = bool(launches) and launches[0].compiled is not None
        self.makers = None      # [_maker(kind, spec)] for each allocation, at the first unpoisoned replay

    def replay(self, inputs):
        if _memory._poison or _memory.alloc_hook is not note_alloc or getattr(_state, "recorder", None) is not None:
            make = _memory.make
            allocs = [make(kind, spec) for kind, spec in self.allocs]
        else:
            # what memory.make does then (no poison; note_alloc, the hook, idle without a
            # recorder), without its three Python calls an allocation (~1 us a replayed
            # forward's three, CI CPU, bench/prefill_host_probe.py)
            makers = self.makers
            if makers is None:
                makers = self.makers = [_maker(kind, spec) for kind, spec in self.allocs]
            allocs = [m() for m in makers]
        if self.compiled:
            # once a call, not once a launch (bench/gpu/s13_host.py: a forward's host time
            # on the H200 machine ~140 us, the plan's replay ~45 of it)
            _ensure_allocator()
            active = driver.active
            stream = active.get_current_stream(active.get_current_device())
            idle = _no_launch_hooks()      # once a replay, not once a launch
            for ln in self.launches:
                if idle and ln.direct is not None:
                    ln.direct.fire(ln.compiled, ln.grid3, inputs, allocs, stream)
                else:
                    ln.fire(inputs, allocs, stream)
        else:
            for ln in self.launches:
                ln.fire(inputs, allocs, None)
        # (an allocation or a constant, such as decode's lse workspace, without a call)
        return tuple([allocs[o[1]] if o[0] == "alloc" else o[1] if o[0] == "const" else _resolve(o, inputs, allocs)
                      for o in self.outs])


def _maker(kind: str, spec):
    """memory.make(kind, spec) unpoisoned and unhooked, as a call of no arguments:
    memory._empty's torch.empty or memory.arange_i32's torch.arange. The shape goes in
    as separate ints: torch.empty(1, 1, 32, 128, ...) parses in ~0.8 us, against ~1.5 us
    for the same shape as a torch.Size (~1.1 as a tuple; CI CPU, torch 2.13, 2026-12-01);
    a 0-dim shape has to stay a tuple."""
    if kind == "empty":
        shape, dtype, device = spec
        if len(shape) == 0:
            return functools.partial(torch.empty, (), dtype=dtype, device=device)
        return functools.partial(torch.empty, *shape, dtype=dtype, device=device)
    n, device = spec
    return functools.partial(torch.arange, n, dtype=torch.int32, device=device)


def _ensure_allocator():
    """launchers.common._ensure_allocator, bound at the first replay (common imports this
    module: no import at module level), without an import statement a call (~0.5 us)."""
    global _ensure_allocator
    from .common import _ensure_allocator as ensure
    _ensure_allocator = ensure
    ensure()


def _resolve(c, inputs, allocs):
    """The value of slot c in this call."""
    tag = c[0]
    if tag == "in":
        return inputs[c[1]]
    if tag == "alloc":
        return allocs[c[1]]
    if tag == "desc":
        if len(c) > 5:          # Gluon's, with its layout
            return _gluon_descriptor_class()(_resolve(c[1], inputs, allocs), c[2], c[3], c[4], c[5])
        from triton.tools.tensor_descriptor import TensorDescriptor
        return TensorDescriptor(_resolve(c[1], inputs, allocs), c[2], c[3], c[4])
    return c[1]


@functools.lru_cache(maxsize=None)
def _gluon_descriptor_class():
    """triton.experimental.gluon's Hopper TensorDescriptor class, None where this Triton
    has none. (A direct replay expands either class alike: make_tensordesc_arg reads base,
    shape, strides and padding; the layout's swizzle comes from the compiled kernel.)"""
    try:
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    except ImportError:
        return None
    return TensorDescriptor


class _Launch:
    """One recorded launch: its arguments as a template of constants, and the positions
    that take this call's tensors."""

    def __init__(self, kernel, grid, args, kwargs, compiled):
        self.kernel, self.grid, self.compiled = kernel, grid, compiled
        self.grid3 = tuple(grid) + (1,) * (3 - len(grid))
        if compiled is None:
            # the interpreter: fire() calls kernel[grid](*args, **kwargs) again
            self.args = [c[1] if c[0] == "const" else None for c in args]
            self.kwargs = {k: c[1] if c[0] == "const" else None for k, c in kwargs.items()}
            self.subs = [(i, c) for i, c in enumerate(args) if c[0] != "const"]
            self.kwsubs = [(k, c) for k, c in kwargs.items() if c[0] != "const"]
            return
        # the kernel's parameters in order, as JITFunction.run binds them: positional
        # arguments, then keyword ones, then defaults; launch options (num_warps, ...) apart
        slots = []
        for i, name in enumerate(kernel.arg_names):
            if i < len(args):
                slots.append(args[i])
            elif name in kwargs:
                slots.append(kwargs[name])
            else:
                slots.append(("const", kernel.params[i].default))
        self.values = [c[1] if c[0] == "const" else None for c in slots]
        self.subs = [(i, c) for i, c in enumerate(slots) if c[0] != "const"]
        self.direct = _DirectLaunch.build(compiled, slots)

    def fire(self, inputs, allocs, stream):
        """One launch: through the compiled kernel on the GPU (on stream, the current
        stream of the current device, the triton allocator set), kernel[grid] otherwise."""
        if self.compiled is None:
            args = list(self.args)
            for i, c in self.subs:
                args[i] = _resolve(c, inputs, allocs)
            kwargs = dict(self.kwargs)
            for k, c in self.kwsubs:
                kwargs[k] = _resolve(c, inputs, allocs)
            self.kernel[self.grid](*args, **kwargs)
            return
        direct = self.direct
        if direct is not None and _no_launch_hooks():
            direct.fire(self.compiled, self.grid3, inputs, allocs, stream)
            return
        values = list(self.values)
        for i, c in self.subs:
            values[i] = _resolve(c, inputs, allocs)
        c = self.compiled
        g = self.grid3
        c.run(g[0], g[1], g[2], stream, c.function, c.packed_metadata, c.launch_metadata(self.grid, stream, *values),
              triton.knobs.runtime.launch_enter_hook, triton.knobs.runtime.launch_exit_hook, *values)


def _no_launch_hooks() -> bool:
    """True when no launch hook is registered (a profiler's, e.g. proton's), so a replay may
    skip them. Triton 3.6's knobs hold each hook as a HookChain, never None: an empty chain
    is idle. (Until 2026-11-30 this test read `hook is None`, always False under Triton 3.6,
    so no replay ever took the direct launch; test_direct_launch_needs_no_hooks.)"""
    rt = triton.knobs.runtime
    enter, leave = rt.launch_enter_hook, rt.launch_exit_hook
    return ((enter is None or not getattr(enter, "calls", True))
            and (leave is None or not getattr(leave, "calls", True)))


class _DirectLaunch:
    """A replayed launch straight into the C launcher Triton compiled for the kernel,
    skipping Triton's Python around it (CudaLauncher.__call__, and wrap_handle_tensordesc's
    `inner`, which rebuilds the ~80-long argument list and encodes every host tensor
    descriptor's CUtensorMap again, each launch).

    Why: on the H200 machine's host a replayed decode step (B = 1, L = 8k) spent 111-121 us
    of host time, cuDNN's 47-84 (bench/gpu/s14_decode_prof.py, 2026-11-30); cProfile put
    ~20% of ours in that Python and in the TensorDescriptor objects the replay built.

    What it does instead, per launch: the argument list is a template made at record
    time; this call's tensors go in as integer addresses (the C launcher then skips its
    data_ptr() call and its cuPointerGetAttribute check, which the validated inputs do not
    need), and so do the plan's persistent tensors (decode's workspaces: their addresses
    from the recording, the tensors kept alive by the launch), and a descriptor's expansion (its CUtensorMap, shape and strides, fixed by the
    plan's key except for the base address) is cached per base address.

    Written against Triton 3.6.0's nvidia launcher (2026-11-30): build() returns None,
    and the launch goes through CompiledKernel.run as before, under any other Triton
    version and whenever the launcher does not look as expected (another backend,
    profile scratch memory, a descriptor without TMA metadata)."""

    MAX_MAPS = 64       # cached descriptor expansions per descriptor argument

    @staticmethod
    def build(compiled, slots):
        if not triton.__version__.startswith("3.6."):
            return None         # the launcher layout below is Triton 3.6's
        try:
            run = compiled.run
            sig = list(compiled.src.signature.values())
        except Exception:  # noqa: BLE001  (not an nvidia CudaLauncher over an ASTSource)
            return None
        if type(run).__name__ != "CudaLauncher" or len(sig) != len(slots):
            return None
        if run.profile_scratch_size:
            return None
        raw, meta = run.launch, None
        code = getattr(raw, "__code__", None)
        if code is not None:            # wrap_handle_tensordesc's inner(*args)
            cells = dict(zip(code.co_freevars, (cell.cell_contents for cell in raw.__closure__ or ())))
            raw, meta = cells.get("launcher"), cells.get("tensordesc_meta")
            if raw is None or meta is None or any(m is None for m in meta):
                return None
        template, subs, n_desc, keep = [], [], 0, []
        for ty, c in zip(sig, slots):
            if isinstance(ty, str) and ty.startswith("tensordesc"):
                if c[0] != "desc" or meta is None or n_desc >= len(meta):
                    return None
                subs.append((len(template), "desc", c, meta[n_desc], {}))
                template.extend([None] * (1 + 2 * len(c[2])))      # map, shape, strides
                n_desc += 1
            elif isinstance(ty, str) and ty.startswith("*") and c[0] in ("in", "alloc"):
                subs.append((len(template), "ptr", c, None, None))
                template.append(None)
            elif c[0] == "const":
                if isinstance(ty, str) and ty.startswith("*") and isinstance(c[1], torch.Tensor):
                    # a persistent tensor (a workspace of the plan's, launchers.decode):
                    # its address, as for the inputs; the plan keeps the tensor alive
                    keep.append(c[1])
                    template.append(c[1].data_ptr())
                else:
                    template.append(c[1])
            else:
                return None
        if meta is not None and n_desc != len(meta):
            return None
        scratch = (run.global_scratch_size * run.num_ctas, run.global_scratch_align) if run.global_scratch_size else None
        return _DirectLaunch(raw, run.launch_cooperative_grid, run.launch_pdl, template, subs, scratch, keep)

    def __init__(self, raw, cooperative, pdl, template, subs, scratch, keep=()):
        self.raw, self.cooperative, self.pdl = raw, cooperative, pdl
        self.template, self.subs = template, subs
        self.keep = list(keep)      # the tensors whose addresses the template holds
        # the pointer substitutions, flat (a replayed decode step has ~17, most of them one
        # input, cache_seqlens, standing in for absent pointers): the distinct inputs'
        # indices, (position, which of them) pairs, and (position, allocation) pairs;
        # the descriptors apart
        self.in_idx = []
        self.in_pos = []
        self.alloc_pos = []
        for pos, kind, c, _, _ in subs:
            if kind != "ptr":
                continue
            if c[0] == "in":
                if c[1] not in self.in_idx:
                    self.in_idx.append(c[1])
                self.in_pos.append((pos, self.in_idx.index(c[1])))
            else:
                self.alloc_pos.append((pos, c[1]))
        self.descs = [s for s in subs if s[1] == "desc"]
        # (bytes per program, alignment) of the global scratch that in-kernel tensor
        # descriptors live in, allocated per launch through triton's allocator as
        # CudaLauncher does (the flashtriton allocator: launchers.common._ensure_allocator)
        self.scratch = scratch
        self._launch = self._generate()

    def fire(self, compiled, g, inputs, allocs, stream):
        scratch = None
        if self.scratch is not None:
            from triton.runtime import _allocation
            size, align = self.scratch
            scratch = _allocation._allocator.get()(g[0] * g[1] * g[2] * size, align, stream)
        self._launch(compiled, g, inputs, allocs, stream, scratch)

    def _expand(self, n: int, base: torch.Tensor) -> list:
        """The n-th descriptor argument over base, expanded as the C launcher takes it
        ([CUtensorMap, *shape, *strides]), cached per base address."""
        from triton.backends.nvidia.driver import make_tensordesc_arg
        from triton.tools.tensor_descriptor import TensorDescriptor
        pos, _, c, meta, maps = self.descs[n]
        expanded = make_tensordesc_arg(TensorDescriptor(base, c[2], c[3], c[4]), meta)
        if len(expanded) != 1 + 2 * len(c[2]):
            raise RuntimeError(f"plans: a descriptor expanded to {len(expanded)} launch arguments, "
                               f"expected {1 + 2 * len(c[2])} (Triton's launcher changed?)")
        if len(maps) >= self.MAX_MAPS:
            maps.clear()
        maps[base.data_ptr()] = expanded
        return expanded

    def _generate(self):
        """The launch as one generated function (the template written out as a call):
        fire(compiled, g, inputs, allocs, stream, scratch) reads each distinct input's and
        allocation's address once, looks each descriptor's expansion up by its base
        address, and calls the C launcher with every argument in place. Why generated:
        filling a copy of the ~90-long template position by position (a decode step has
        ~13 pointer positions, most of them cache_seqlens standing in for absent
        pointers) cost ~1.3 us of Python a launch beyond the C call, the call written
        out ~0.5 (CI CPU, bench/decode_host_sim.py, 2026-12-01). The constants are the
        generated function's globals; test_direct_launch_arguments checks the arguments.
        (The C launcher is read as self.raw at each launch: a probe may swap it, as
        bench/gpu/s27_decode_host_ab.py does to capture the argument list.)"""
        ns = {"launch": self, "expand": self._expand, "cooperative": self.cooperative, "pdl": self.pdl}
        body = [f"    i{k} = inputs[{i}].data_ptr()" for k, i in enumerate(self.in_idx)]
        body += [f"    a{j} = allocs[{j}].data_ptr()" for j in sorted({j for _, j in self.alloc_pos})]
        exprs = {pos: f"i{k}" for pos, k in self.in_pos}
        exprs.update({pos: f"a{j}" for pos, j in self.alloc_pos})
        spans = {}
        for n, (pos, _, c, _, maps) in enumerate(self.descs):
            tag, where = c[1][0], c[1][1]
            if tag == "const":
                ns[f"base{n}"] = where
                base = f"base{n}"
            else:
                base = f"inputs[{where}]" if tag == "in" else f"allocs[{where}]"
            ns[f"maps{n}"] = maps
            body += [f"    t = {base}", f"    d{n} = maps{n}.get(t.data_ptr())",
                     f"    if d{n} is None:", f"        d{n} = expand({n}, t)"]
            spans[pos] = (1 + 2 * len(c[2]), f"*d{n}")
        args = []
        pos = 0
        while pos < len(self.template):
            if pos in spans:
                width, expr = spans[pos]
                args.append(expr)
                pos += width
                continue
            if pos not in exprs:
                ns[f"c{pos}"] = self.template[pos]
            args.append(exprs.get(pos, f"c{pos}"))
            pos += 1
        head = ("g[0], g[1], g[2], stream, compiled.function, cooperative, pdl, scratch, None, "
                "compiled.packed_metadata, None, None, None")
        src = ("def fire(compiled, g, inputs, allocs, stream, scratch):\n" + "\n".join(body + [""])
               + f"    launch.raw({head}, {', '.join(args)})\n")
        exec(compile(src, "<plans._DirectLaunch>", "exec"), ns)
        return ns["fire"]
