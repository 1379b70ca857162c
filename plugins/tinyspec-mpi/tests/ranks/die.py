"""A rank that dies mid-run: every rank runs all_reduce in a loop; at step 5 the last rank ends its process (--how: exit at
once with status 3, be killed by SIGKILL, or return early, exiting cleanly). The others must fail within their timeout,
saying why, instead of hanging."""
from __future__ import annotations

import argparse
import os
import signal
import sys

from tinyspec import Tensor
from tinyspec import distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--how", choices=["exit", "kill", "return"], default="exit")
args = parser.parse_args()

dist.init()
rank, n = dist.rank(), dist.world_size()
for step in range(100):
  if step == 5 and rank == n - 1:
    print(f"rank {rank}: dying at step {step}", flush=True)
    if args.how == "kill": os.kill(os.getpid(), signal.SIGKILL)
    if args.how == "return": sys.exit(0)  # a clean exit: MPI_Finalize runs, the job's status stays 0
    os._exit(3)
  total = dist.all_reduce(Tensor.ones(1000) * rank).numpy()
  assert total[0] == sum(range(n)), total[:3]
print(f"rank {rank}: finished all 100 steps (the dead rank was not noticed)", flush=True)
