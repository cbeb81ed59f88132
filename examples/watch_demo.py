"""A stand-in training job for `oomless watch`: prints `step N` lines the way trainers' logs do
and holds a little more host memory each step (a slow leak), so the watch has something to
draw. Usage: python examples/watch_demo.py [STEPS]."""

import sys
import time

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
held = []
for step in range(1, steps + 1):
    held.append(bytearray(8 << 20))  # 8 MiB more per step
    print(f"step {step}/{steps} loss={1.0 / step:.3f}", flush=True)
    time.sleep(0.3)
