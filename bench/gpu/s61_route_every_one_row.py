"""pytest plugin (session 61): every one-row forward, fp32 included, takes the decode kernel
(policy.ONE_ROW_DECODE_MIN_NK and _FP32 = 1), so that tests/test_fp32.py's one-query cases
hold the decode kernel's one-row fp32 path to their criterion before fp32 is admitted to the route. Each worker
appends how many calls took the route to $ROUTE_COUNT_FILE.
Usage: PYTHONPATH=src:bench/gpu python -m pytest -p s61_route_every_one_row tests/test_fp32.py"""
import os

_count = [0]


def pytest_configure(config):
    from flashtriton.launchers import forward, policy
    policy.ONE_ROW_DECODE_MIN_NK = policy.ONE_ROW_DECODE_MIN_NK_FP32 = 1
    real = forward._fwd_one_row

    def counted(*a, **kw):
        _count[0] += 1
        return real(*a, **kw)
    forward._fwd_one_row = counted


def pytest_unconfigure(config):
    path = os.environ.get("ROUTE_COUNT_FILE")
    if path:
        with open(path, "a") as f:
            f.write(f"pid {os.getpid()}: {_count[0]} one-row calls on the decode kernel\n")
