"""Session 51, call 5: s51_varlen_fwd_ab.py's protocol on two more questions (pre-registered with the same rules):
(b') D = 64 without dropout at shorter ranges, 128..512 and 64..256 (256..1024 won in call 4: where does the D = 64
entry start?); (a') dropout at D = 64 (H = 32), 256..1024 and 128..4096 (route D = 64 dropout if both win in every
round). Prediction: 128..512 ~1.0x (the D = 128 kernel lost there, 0.75x, session 49), 64..256 below; dropout D = 64
1.05-1.2x."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from s51_varlen_fwd_ab import case  # noqa: E402


def main():
    res = []
    for lo, hi in ((64, 256), (128, 512)):
        for causal in (False, True):
            res.append(case(64, 32, lo, hi, causal, False))
    for lo, hi in ((256, 1024), (128, 4096)):
        for causal in (False, True):
            res.append(case(64, 32, lo, hi, causal, True))
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "varlen_fwd_ab2.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
