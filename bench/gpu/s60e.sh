#!/bin/bash
# Session 60, call 5: call 4's script (s60d.sh) again with the route's threshold and 16-bit rule
# (policy.ONE_ROW_DECODE_MIN_NK), its outputs named s60e_*.
PREFIX=s60e exec bash bench/gpu/s60d.sh
