"""A job for the watch tests: prints `step N` and holds MIB_PER_STEP more MiB of host memory
at each step (written, so the pages are resident). SIGUSR1 (`--on-risk checkpoint`) prints
`checkpoint requested at step N` and the job goes on, as the drop-in callback's save does.

Usage: grow_job.py MIB_PER_STEP STEPS SECONDS_PER_STEP [EXIT_CODE]
"""

import signal
import sys
import time

mib_per_step, steps, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
held = []
step = 0
signal.signal(signal.SIGUSR1, lambda signum, frame: print(f"checkpoint requested at step {step}", flush=True))
for step in range(1, steps + 1):
    print(f"step {step}", flush=True)
    if mib_per_step:
        held.append(b"\x01" * (mib_per_step * 1024**2))
    time.sleep(seconds)
sys.exit(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
