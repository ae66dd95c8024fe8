"""The process pool of the stress scripts (s8_ws_stress.py, s9_masked_stress.py,
s9_dropout_fwd.py, s9_dropout_bwd.py): WORKERS processes (spawned, each with its own CUDA
context, so they contend for the GPU) each run worker(wid, seconds, queue) for SECONDS_EACH
seconds and put (wid, {case: [counters]}) on the queue; run() returns the counters summed
over the workers. (Factored out of those scripts after their runs in sessions 8 and 9;
their own checks are unchanged.)"""
import multiprocessing as mp
import os


def run(worker) -> dict:
    workers = int(os.environ.get("WORKERS", 10))
    seconds = float(os.environ.get("SECONDS_EACH", 40))
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(i, seconds, queue)) for i in range(workers)]
    for pr in procs:
        pr.start()
    total = {}
    for _ in procs:
        _, stats = queue.get()
        for key, counts in stats.items():
            t = total.setdefault(key, [0] * len(counts))
            for i, c in enumerate(counts):
                t[i] += c
    for pr in procs:
        pr.join()
    return total
