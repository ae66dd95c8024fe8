"""Benchmarks ("validate, then time"): every timed provider is first checked against
the float64 reference on the same inputs. Results go to bench/results/<device>/ as
JSON, a Markdown table and PNG plots. Timings never live in the tests."""
