"""The bench tools themselves: bench.prefill --merge and --layout, bench.compile_report's signatures."""
import json

import pytest
import torch

from flashtriton.bench import common, prefill, providers


def _run(path, date, rows):
    env = {"date": date, "torch": "t", "triton": "3.6.0", "python": "3", "device": "GPU", "threads": 1, "sms": 1}
    common.write_json(path, env, rows)


def _row(n, tflops, provider="flashtriton"):
    return {"provider": provider, "dtype": "bfloat16", "head_dim": 64, "causal": False, "seqlen": n, "batch": 1,
            "nheads": 1, "fwd_err": 0.0, "bwd_err": 0.0, "fwd_ms": 1.0, "fwd_tflops": tflops, "bwd_ms": 1.0,
            "bwd_tflops": tflops, "fwd_bwd_ms": 1.0, "fwd_bwd_tflops": tflops}


def test_regression_merge_of_a_merged_file(tmp_path):
    """Merging an already merged file with a newer run nested its header ("rows from the
    runs of rows from the runs of ...", 2026-11-30) and stamped its rows with that header
    instead of their own run. The run list stays flat, rows keep their run, later wins."""
    pytest.importorskip("matplotlib")
    _run(tmp_path / "a.json", "day 1", [_row(512, 1.0), _row(1024, 2.0)])
    _run(tmp_path / "b.json", "day 2", [_row(1024, 3.0)])
    _run(tmp_path / "c.json", "day 3", [_row(512, 4.0)])
    prefill.merge([tmp_path / "a.json", tmp_path / "b.json"], tmp_path / "ab.json")
    rows = prefill.merge([tmp_path / "ab.json", tmp_path / "c.json"], tmp_path / "abc.json")
    env = json.loads((tmp_path / "abc.json").read_text())["environment"]
    assert env["runs"] == ["day 1", "day 2", "day 3"]
    assert env["date"].count("rows from the runs of") == 1
    assert {r["seqlen"]: (r["run"], r["fwd_tflops"]) for r in rows} == {512: ("day 3", 4.0), 1024: ("day 2", 3.0)}


def test_regression_compile_report_types_every_constexpr():
    """compile_report typed constexprs it was not given as pointers (all but USE_ORDER and
    HOST_DESC), so RESUME compiled as a runtime branch and the resource reports of bwd.py's
    dK/dV kernel were of a variant that never runs (2026-11-30). Every constexpr parameter
    of every kernel it compiles is now a constexpr of the signature."""
    pytest.importorskip("triton")
    from flashtriton.bench import compile_report
    from flashtriton.kernels import configs
    for name, fn in compile_report.KERNELS.items():
        sig, const = compile_report.signature(fn, configs.Tile(64, 64, 4, 2), 128)
        import inspect
        for param in inspect.signature(getattr(fn, "fn", fn)).parameters.values():
            if "constexpr" in str(param.annotation):
                assert sig[param.name] == "constexpr", (name, param.name)
        # ... and the pointers stay pointers, of their own element type
        assert sig["LSE"] == "*fp32" and sig.get("KEYS", "*i32") == "*i32" and sig["Q"] == "*bf16", name


def test_prefill_bench_layouts():
    """bench.prefill's --layout: bhnd hands every provider views of (B, H, N, D) memory
    (and dout alike), checked against the reference like the default layout; a bad
    name is an error."""
    seen = []

    def spy(q, k, v, causal):
        seen.append((q.stride(), k.stride(), v.stride()))
        return providers.ours(q, k, v, causal)
    rows = prefill.bench_shape({"flashtriton": spy}, 1, 32, 2, 16, True, torch.bfloat16, modes=("fwd",),
                               device="cpu", layout="bhnd")
    assert rows[0]["layout"] == "bhnd" and "error" not in rows[0], rows
    assert seen and all(s == (2 * 32 * 16, 16, 32 * 16, 1) for st in seen for s in st)
    with pytest.raises(ValueError, match="^layout: must be bnhd or bhnd"):
        prefill._qkv(1, 8, 2, 16, torch.float32, "cpu", "nhbd")


def test_regression_tune_candidates_not_replayed(monkeypatch):
    """bench.tune sets each candidate tile in configs.DEFAULTS, which launch plans do not
    key on: from session 10 to 19 every candidate after the first replayed the first
    one's recorded launches (a sweep at N = 1k timed 18 dK/dV tiles within 1%). Each
    candidate now runs with no plan recorded and sees its own tile."""
    from flashtriton.bench import tune
    from flashtriton.kernels import configs
    from flashtriton.launchers import plans
    seen = []

    def fake_run(kernel, d, causal, n, timed):
        seen.append((len(plans._PLANS), configs.default_tile(kernel, d, n, masked=bool(causal))))
        plans._PLANS["recorded by this candidate"] = None
        return None
    monkeypatch.setattr(tune, "_run_with_defaults", fake_run)
    monkeypatch.setitem(plans._PLANS, "recorded before the sweep", None)   # the first candidate must not see it
    before = configs.default_tile("dkdv", 128, 1024, masked=True)
    for tile in ((16, 64, 4, 2), (32, 64, 4, 2)):
        tune._run_once("dkdv", 128, True, tile, 1024, timed=False)
    assert seen == [(0, configs.Tile(16, 64, 4, 2)), (0, configs.Tile(32, 64, 4, 2))]
    assert configs.default_tile("dkdv", 128, 1024, masked=True) == before and not plans._PLANS


def test_head0_grad_check():
    """bench.common.head0_grad_check (the A/B scripts' gate before timing): the reference's
    own bf16-rounded float64 gradients pass; one element off by 1.0 in batch 0 / head 0, or
    a NaN anywhere in the tensor, fails."""
    from flashtriton import reference
    from flashtriton.bench.common import head0_grad_check, head0_grad_refs
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(2, 64, 3, 32, dtype=torch.bfloat16) for _ in range(4))
    kw = dict(softmax_scale=32 ** -0.5, window_right=0)
    refs = head0_grad_refs(q, k, v, do, **kw)
    good = [g.to(torch.bfloat16) for g in reference.attention_grad(*(t.double() for t in (do, q, k, v)), **kw)]
    assert head0_grad_check(good, refs)[0]
    off = [g.clone() for g in good]
    off[1][0, 5, 0, 3] += 1.0
    ok, text = head0_grad_check(off, refs)
    assert not ok and "dk" in text and "WRONG" in text
    nan = [g.clone() for g in good]
    nan[2][1, 0, 2, 0] = float("nan")                 # outside batch 0 / head 0: still caught
    assert not head0_grad_check(nan, refs)[0]


def test_head0_fwd_check_and_same_outputs():
    """bench.common.head0_fwd_check (the forward A/B scripts' gate before timing): the
    reference's own bf16-rounded float64 output and lse pass; one element of o off by 1.0 in
    batch 0 / head 0, an lse off by 1.0, or a NaN anywhere fails; lse None checks o alone.
    same_outputs: "bitwise" for equal pairs, the differences otherwise."""
    from flashtriton import reference
    from flashtriton.bench.common import head0_fwd_check, same_outputs
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 64, 3, 32, dtype=torch.bfloat16) for _ in range(3))
    kw = dict(softmax_scale=32 ** -0.5, window_left=16, window_right=0)
    o64, lse64 = reference.attention(*(t.double() for t in (q, k, v)), **kw)
    o, lse = o64.to(torch.bfloat16), lse64.float()
    assert head0_fwd_check(q, k, v, o, lse, **kw)[0] and head0_fwd_check(q, k, v, o, None, **kw)[0]
    bad_o = o.clone()
    bad_o[0, 7, 0, 1] += 1.0
    assert not head0_fwd_check(q, k, v, bad_o, lse, **kw)[0]
    bad_lse = lse.clone()
    bad_lse[0, 0, 9] += 1.0
    assert not head0_fwd_check(q, k, v, o, bad_lse, **kw)[0] and head0_fwd_check(q, k, v, o, None, **kw)[0]
    nan = o.clone()
    nan[1, 0, 2, 0] = float("nan")                   # outside batch 0 / head 0: still caught
    assert not head0_fwd_check(q, k, v, nan, lse, **kw)[0]
    assert same_outputs((o, lse), (o.clone(), lse.clone())) == "bitwise"
    assert same_outputs((o, lse), (bad_o, lse)).startswith("DIFFER")


def test_timing_rounds_order_and_failures(capsys):
    """bench.common.timing_rounds: round 2 runs the variants in reverse order, TFLOP/s = FLOPs /
    ms / 1e9, a variant that raises is reported and left out, the others keep both rounds."""
    order = []

    def timer(fn):
        order.append(fn.__name__)
        return fn()

    def a():
        return 2.0, ""

    def b():
        return 4.0, "*"

    def bad():
        raise RuntimeError("capture failed")
    tf = common.timing_rounds({"a": a, "b": b, "bad": bad}, {"a": 8e12, "b": 8e12, "bad": 1.0}, "N=1", timer)
    assert order == ["a", "b", "bad", "bad", "b", "a"]
    assert tf == {"a": [4000.0, 4000.0], "b": [2000.0, 2000.0]}
    text = capsys.readouterr().out
    assert "N=1 round 2 b: 4.000 ms* 2000 TFLOP/s" in text and "N=1 round 1 bad: " in text


def _grid_stubs(monkeypatch, tmp_path, events):
    """prefill.main without a GPU: a fixed environment, our provider alone, sleeps recorded in events, no plot,
    results under tmp_path (the tests replace bench_shape themselves)."""
    env = {"date": "d", "device": "GPU", "torch": "t", "triton": "3.6.0", "sms": 1}
    monkeypatch.setattr(common, "environment", lambda device: dict(env))
    monkeypatch.setattr(providers, "gpu_providers", lambda include_flex=True: {"flashtriton": providers.ours})
    monkeypatch.setattr(prefill.time, "sleep", lambda s: events.append(("sleep", s)))
    monkeypatch.setattr(prefill, "plot", lambda rows, path: None)
    monkeypatch.setattr(common, "results_dir", lambda device, root=None: tmp_path)


def test_regression_prefill_grid_settles_before_each_shape(monkeypatch, tmp_path):
    """The grid idles --settle seconds (default prefill.SETTLE_S) before every shape, records it in the
    environment, and --settle 0 turns it off (session 38: the first shape timed right after another read
    its forward+backward 3-12% slow; bench/NOTES.md)."""
    events = []
    _grid_stubs(monkeypatch, tmp_path, events)

    def shape(provs, b, n, h, d, causal, dtype, **kw):
        events.append(("shape", n, causal))
        return [_row(n, 1.0)]
    monkeypatch.setattr(prefill, "bench_shape", shape)
    args = ["--head-dims", "64", "--seqlens", "512", "1024", "--causal", "no", "--no-warmup"]
    prefill.main(args)
    assert events == [("sleep", prefill.SETTLE_S), ("shape", 512, False), ("sleep", prefill.SETTLE_S),
                      ("shape", 1024, False)]
    env = json.loads((tmp_path / "prefill.json").read_text())["environment"]
    assert env["settle_s"] == prefill.SETTLE_S > 0
    events.clear()
    prefill.main(args + ["--settle", "0"])
    assert [e for e in events if e[0] == "sleep"] == [("sleep", 0.0), ("sleep", 0.0)]


def test_regression_prefill_grid_warms_up_on_its_first_shape(monkeypatch, tmp_path):
    """The grid runs its first shape once before the grid, discarding the rows, and records it in the
    environment; --no-warmup turns it off (session 39: the first shape of a grid process read our
    forward+backward 18% below the same cell timed later; bench/NOTES.md)."""
    events = []
    _grid_stubs(monkeypatch, tmp_path, events)
    calls = []

    def shape(provs, b, n, h, d, causal, dtype, **kw):
        calls.append(n)
        events.append(("shape", n, causal))
        return [_row(n, float(len(calls)))]       # the warm-up's row differs from the recorded one
    monkeypatch.setattr(prefill, "bench_shape", shape)
    args = ["--head-dims", "64", "--seqlens", "512", "1024", "--causal", "no", "--settle", "0"]
    rows = prefill.main(args)
    assert events == [("shape", 512, False), ("sleep", 0.0), ("shape", 512, False), ("sleep", 0.0),
                      ("shape", 1024, False)]
    assert len(rows) == 2 and [r["seqlen"] for r in rows] == [512, 1024]
    assert rows[0] == _row(512, 2.0)                # the warm-up's rows (1.0) are not in the results
    saved = json.loads((tmp_path / "prefill.json").read_text())
    assert saved["environment"]["warmup"] is True and len(saved["rows"]) == 2
    events.clear()
    calls.clear()
    prefill.main(args + ["--no-warmup"])
    assert events == [("sleep", 0.0), ("shape", 512, False), ("sleep", 0.0), ("shape", 1024, False)]
    assert json.loads((tmp_path / "prefill.json").read_text())["environment"]["warmup"] is False


def test_prefill_bench_rotated_rounds(monkeypatch):
    """--rounds: every provider is checked once, then timed `rounds` times, the order rotated
    each round (each provider first once in len(providers) rounds); the cell is the median of
    its rounds, the readings kept. Session 48: one reading a cell let cuDNN's first reading
    after idle swing a cell 9-10% (bench/NOTES.md)."""
    assert common.rotated(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert common.rotated(["a", "b", "c"], 4) == ["b", "c", "a"]
    order, readings = [], {"a": [3.0, 1.0, 2.0], "b": [5.0, 6.0, 4.0], "c": [1.0, 1.0, 1.0]}

    def fake_time(fn, q, k, v, dout, causal, modes, device):
        order.append(fn.name)
        return {"fwd": readings[fn.name][sum(o == fn.name for o in order) - 1]}
    monkeypatch.setattr(prefill, "_time_modes", fake_time)

    def prov(name, fail=False):
        def fn(q, k, v, causal):
            if fail:
                raise RuntimeError("unsupported shape")
            return providers.ours(q, k, v, causal)
        fn.name = name
        return fn
    provs = {"a": prov("a"), "b": prov("b"), "x": prov("x", fail=True), "c": prov("c")}
    rows = prefill.bench_shape(provs, 1, 32, 2, 16, False, torch.bfloat16, modes=("fwd",), device="cpu", rounds=3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    by = {r["provider"]: r for r in rows}
    assert list(by) == ["a", "b", "x", "c"] and "error" in by["x"] and "fwd_ms" not in by["x"]
    assert by["a"]["fwd_ms"] == 2.0 and by["a"]["fwd_ms_rounds"] == [3.0, 1.0, 2.0] and by["a"]["rounds"] == 3
    assert by["b"]["fwd_ms"] == 5.0 and by["c"]["fwd_ms"] == 1.0
    assert "Cells are medians of rotated timing rounds" in prefill.markdown(rows, dict(
        device="cpu", sms=0, torch="t", triton="t", date="d"))
    order.clear()
    one = prefill.bench_shape(provs, 1, 32, 2, 16, False, torch.bfloat16, modes=("fwd",), device="cpu")
    assert order == ["a", "b", "c"] and one[0]["fwd_ms"] == 3.0
    assert "fwd_ms_rounds" not in one[0] and "rounds" not in one[0]


def test_prefill_grid_times_in_rounds_by_default(monkeypatch, tmp_path):
    """The grid passes --rounds (default prefill.ROUNDS = 3) to every timed shape and records it in the
    environment; the warm-up shape runs one round; a count below 1 is an error naming the flag."""
    events = []
    _grid_stubs(monkeypatch, tmp_path, events)
    seen = []

    def shape(provs, b, n, h, d, causal, dtype, **kw):
        seen.append(kw.get("rounds", 1))
        return [_row(n, 1.0)]
    monkeypatch.setattr(prefill, "bench_shape", shape)
    args = ["--head-dims", "64", "--seqlens", "512", "1024", "--causal", "no", "--settle", "0"]
    prefill.main(args)
    assert prefill.ROUNDS == 3 and seen == [1, 3, 3]
    assert json.loads((tmp_path / "prefill.json").read_text())["environment"]["rounds"] == 3
    seen.clear()
    prefill.main(args + ["--rounds", "5", "--no-warmup"])
    assert seen == [5, 5]
    with pytest.raises(ValueError, match="^--rounds: must be >= 1"):
        prefill.main(args + ["--rounds", "0"])


def test_median_of_rounds_rotates_and_records_errors():
    """bench.common.median_of_rounds: one call of every unit a round, the order rotated each round,
    medians per mode, each round's readings kept; a unit that raises is recorded and not called again."""
    order = []
    vals = {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 6.0, 4.0])}

    def unit(name):
        def run():
            order.append(name)
            if name == "bad":
                raise RuntimeError("no such kernel\nmore text")
            x = next(vals[name])
            return {"fwd": x, "bwd": 2 * x}
        return run
    medians, readings, errors = common.median_of_rounds({n: unit(n) for n in ("a", "bad", "b")}, 3)
    assert order == ["a", "bad", "b", "b", "a", "b", "a"]
    assert medians == {"a": {"fwd": 2.0, "bwd": 4.0}, "b": {"fwd": 5.0, "bwd": 10.0}}
    assert readings["a"]["fwd"] == [3.0, 1.0, 2.0] and readings["bad"] == {}
    assert errors == {"bad": "RuntimeError: no such kernel"}
    assert common.rotated(["a", "b", "c"], 1) == ["b", "c", "a"] and common.rotated([], 2) == []


def test_features_window_times_in_rotated_rounds(monkeypatch):
    """bench.features' window case: every configuration is checked, then timed ROUNDS times with the
    order rotated (session 48), each figure the median of its rounds; the ratio to causal uses those."""
    from flashtriton.bench import features
    monkeypatch.setattr(features, "DEVICE", "cpu")
    monkeypatch.setattr(features, "HEAD_DIM", 32)
    monkeypatch.setattr(features, "NHEADS", 2)
    monkeypatch.setattr(features, "ROUNDS", 3)
    seen = []

    def fake_time3(fn, inputs, dout):
        if fn not in seen:
            seen.append(fn)
        i = seen.index(fn)
        n = sum(1 for s in calls if s == i)
        calls.append(i)
        ms = [[2.0, 1.0, 3.0], [4.0, 4.0, 8.0], [9.0, 7.0, 8.0]][i][n]
        return {"fwd": ms, "bwd": ms, "fwd_bwd": ms}
    calls = []
    monkeypatch.setattr(features, "_time3", fake_time3)
    rows = []
    features.bench_window(rows, seqlen=128, left=16, with_flex=False)
    assert calls == [0, 1, 2, 1, 2, 0, 2, 0, 1]
    by = {r["provider"]: r for r in rows}
    w, c = by["flashtriton window (16, 0)"], by["flashtriton causal (full)"]
    assert w["fwd_ms"] == 2.0 and c["fwd_ms"] == 4.0 and by["sdpa + boolean mask (mem-efficient)"]["fwd_ms"] == 8.0
    assert w["fwd_vs_causal"] == pytest.approx(w["fwd_tflops"] / c["fwd_tflops"])
    assert all(r["err"] < 2e-2 for r in (w, c))


def test_features_paged_checks_and_compares_to_packed(monkeypatch):
    """bench.features' paged case (session 49): the packed call and each page size are checked
    against float64 and timed forward-only in rotated rounds; fwd_vs_packed is the TFLOP/s ratio."""
    from flashtriton.bench import common as bench_common
    from flashtriton.bench import features
    monkeypatch.setattr(features, "DEVICE", "cpu")
    monkeypatch.setattr(features, "HEAD_DIM", 32)
    monkeypatch.setattr(features, "NHEADS", 2)
    monkeypatch.setattr(features, "ROUNDS", 1)
    fake = iter([2.0, 4.0, 5.0])
    monkeypatch.setattr(bench_common, "time_ms", lambda fn, device: (fn(), next(fake))[1])
    rows = []
    features.bench_paged(rows, True, total=300, lo=32, hi=128, pages=(64, 8))
    assert [r["provider"] for r in rows] == ["packed k, v (varlen)", "paged, page 64", "paged, page 8"]
    assert [r["fwd_ms"] for r in rows] == [2.0, 4.0, 5.0]
    assert rows[1]["fwd_vs_packed"] == pytest.approx(0.5) and rows[2]["fwd_vs_packed"] == pytest.approx(0.4)
    assert all(r["err"] < 2e-2 for r in rows)


@pytest.mark.parametrize("start_gbs, ours_ms", [(100.0, 1.0), (1.0, 1.0), (1.0, 0.01)])
def test_cpu_bench_decode_share_of_higher_bandwidth(monkeypatch, start_gbs, ours_ms):
    """Session 54: the CPU bench's decode share is of the higher of the start-of-run read bandwidth and the one
    timed alongside the row (the VM's bandwidth switches modes within a run). Timings stubbed: SDPA 10 ms, the
    alongside read of a 4 MiB buffer 1 ms (4.19 GB/s); the start figure 100 GB/s (it wins) or 1 GB/s (the
    alongside one wins); ours 1 ms (not met) or 0.01 ms (met)."""
    from flashtriton.bench import cpu as cpu_bench
    from flashtriton import backends
    if not backends.cpu_available():
        pytest.skip("no CPU backend")
    monkeypatch.setattr(cpu_bench, "_READ_BUF", [torch.rand(2 ** 20)])
    monkeypatch.setattr(cpu_bench, "time_interleaved", lambda fns, **kw: {"ours": ours_ms, "sdpa": 10.0, "read": 1.0})
    row = cpu_bench.bench_decode(torch.float32, 256, start_gbs, hq=4, hk=2, d=64)[0]
    gbs = 2 * 256 * 2 * 64 * 4 / (ours_ms / 1e3) / 1e9
    read = 2 ** 20 * 4 / 1e-3 / 1e9
    pct = 100 * gbs / max(start_gbs, read)
    assert row["read_gbs"] == round(read, 1) and row["gbs"] == round(gbs, 1) and row["bw_pct"] == round(pct, 1)
    assert row["met"] == (pct >= 50) and row["met"] == (ours_ms == 0.01)


def test_regression_decode_compile_helpers_type_every_constexpr(monkeypatch):
    """bench.decode's offline compiles (compile_split_kernel, the combine kernel's) typed the
    constexprs they were not given by the name's case: QK_LEVELS (session 58) became a pointer,
    and every split-kernel case failed to compile until session 68. Every constexpr parameter is
    now a constexpr of the signature, defaults included (triton.compile captured, not run)."""
    pytest.importorskip("triton")
    import inspect

    import triton
    from flashtriton.bench import decode as bench_decode
    seen = []
    monkeypatch.setattr(triton, "compile", lambda src, **kw: seen.append(src))
    bench_decode.compile_split_kernel(64)
    for label, build in bench_decode._other_cases(64):
        if label == "combine kernel":
            build()
    assert len(seen) == 2
    for src in seen:
        fn = src.fn
        for i, param in enumerate(inspect.signature(fn.fn).parameters.values()):
            if "constexpr" in str(param.annotation):
                assert src.signature[param.name] == "constexpr", (fn.fn.__name__, param.name)
