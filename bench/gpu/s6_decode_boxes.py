"""(Record of a measurement: the page boxes variant it times was reverted after this run,
slower or no faster; bench/NOTES.md, "Session 6". The options it sets no longer exist.)

Session 6, GPU call 1: page-16 decode by TMA page boxes (kernels/decode.py,
_attend_page_boxes) against the row gather (kv_load="gather", the session-5 default)
and the contiguous cache, at the issue's shapes. Each row is checked against the fp32
reference before it is timed (bench.decode); graph replays after a read-only flush
[zeroing flush in brackets]."""
import torch

from flashtriton.bench import decode as D
from flashtriton.launchers import decode as launcher


def run(label, inp, ref, opts, splits=0):
    try:
        with launcher.options(**opts):
            fn = lambda: D.ours(inp, num_splits=splits)  # noqa: E731
            D._checked(fn, ref, label)
            eager, graph, zero = D._time(fn, "cuda", True)
        b, l = inp["q"].shape[0], inp["cache_seqlens"][0].item()
        print(f"{label}: graph {graph * 1e3:.1f} us [{zero * 1e3:.1f}] ({D.kv_bytes(b, l) / graph / 1e9:.2f} TB/s), "
              f"eager {eager * 1e3:.1f}", flush=True)
        return graph
    except Exception as exc:  # noqa: BLE001
        print(f"{label}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)


def main():
    for batch, seqlen in [(1, 8192), (1, 32768), (1, 131072), (32, 32768), (8, 131072)]:
        tag = f"B={batch} L={seqlen}"
        inp = D.make_inputs(batch, seqlen, "cuda")
        run(f"{tag} contiguous default", inp, D.reference_out(inp), {})
        del inp
        inp = D.make_inputs(batch, seqlen, "cuda", page_size=16)
        ref = D.reference_out(inp)
        run(f"{tag} page16 boxes default", inp, ref, {})
        run(f"{tag} page16 gather (s5 default)", inp, ref, dict(kv_load="gather"))
        if batch == 1:
            for tile in ((64, 4, 4), (64, 4, 6), (64, 8, 5), (128, 4, 5), (32, 4, 5)):
                for s in ((16, 32) if seqlen > 8192 else (16,)):
                    run(f"{tag} page16 boxes tile={tile} splits={s}", inp, ref,
                        dict(block_n=tile[0], num_warps=tile[1], num_stages=tile[2]), s)
            run(f"{tag} page16 boxes combine=fused", inp, ref, dict(combine="fused"))
        else:
            for tile in ((128, 4, 4), (64, 4, 5), (32, 4, 5)):
                run(f"{tag} page16 boxes tile={tile}", inp, ref,
                    dict(block_n=tile[0], num_warps=tile[1], num_stages=tile[2]))
        del inp, ref
        torch.cuda.empty_cache()
    # page 256 and append + rotary on pages (unchanged paths: a control)
    inp = D.make_inputs(1, 8192, "cuda", page_size=256)
    run("B=1 L=8192 page256 default", inp, D.reference_out(inp), {})


if __name__ == "__main__":
    main()
