"""bench/ncu_stalls.py (session 40): reads an Nsight Compute source-page CSV export per kernel and ranks stall
samples. A synthetic two-kernel export; no GPU."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("ncu_stalls", ROOT / "bench" / "ncu_stalls.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


HEADER = '"Address","Source","Instructions Executed","stall_barrier","stall_wait","stall_barrier (Not Issued)"'


def _export(tmp_path):
    text = "\n".join([
        '"Kernel Name","k_fwd",', HEADER,
        '"0x10","      NOP","3","40","0","40"',
        '"0x20","@!P0  BRA 0x10","8","","7",""',
        '"0x30","MUFU.EX2 R1, R2","64","1","9","1"',
        '"Kernel Name","k_bwd",', HEADER,
        '"0x40","HGMMA.64x64x16.F32.BF16 R0, gdesc[UR4], RZ","4","0","5","0"',
    ])
    path = tmp_path / "sass.csv"
    path.write_text(text + "\n")
    return path


def test_ncu_stalls_reads_each_kernel_and_counts_samples(tmp_path, capsys):
    mod = _module()
    kernels = mod.read(str(_export(tmp_path)))
    assert list(kernels) == ["k_fwd", "k_bwd"]
    assert [line["Address"] for line in kernels["k_fwd"]] == ["0x10", "0x20", "0x30"]
    mod.report(kernels, top=2)
    out = capsys.readouterr().out
    # k_fwd: 57 samples (barrier 41, wait 16); the "(Not Issued)" column is not counted twice; empty cells are 0
    assert "== k_fwd: 3 SASS lines, 57 samples" in out
    assert "barrier 0.719, wait 0.281" in out
    assert "BRA" in out and "MUFU" in out
    assert "== k_bwd: 1 SASS lines, 5 samples" in out
