"""The demo's MLP trained with --optimizer (Adam or SGD) for --steps steps on one fixed batch of --points spiral points. Run alone it is the plain
single-process loop on the whole batch; under `mpiexec -n N` each rank takes its 1/N of the batch and `DataParallel`
averages the gradients. Rank 0 prints the loss of every step as JSON: the same numbers either way, to rounding."""
from __future__ import annotations

import argparse
import json

import numpy as np
from tinyspec import Tensor
from tinyspec import distributed as dist
from tinyspec.demo import MLP, spirals
from tinyspec.nn.optim import SGD, Adam
from tinyspec.nn.state import get_parameters

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--points", type=int, default=512)
parser.add_argument("--hidden", type=int, default=64)
parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
args = parser.parse_args()

dist.init()
rank, n = dist.rank(), dist.world_size()
x, y = spirals(args.points, np.random.default_rng(0))
part = slice(rank * args.points // n, (rank + 1) * args.points // n)
xs, onehot = Tensor(x[part]), Tensor(np.eye(2, dtype=np.float32)[y[part]])
Tensor.manual_seed(0)
model = MLP(args.hidden)
opt = Adam(get_parameters(model), lr=0.02) if args.optimizer == "adam" else SGD(get_parameters(model), lr=0.5)
dp = dist.DataParallel(opt) if n > 1 else None
losses = []
for _ in range(args.steps):
  opt.zero_grad()
  loss = -(model(xs).log_softmax(-1) * onehot).sum(-1).mean()
  loss.backward()
  if dp is None:
    Tensor.realize(loss, *opt.schedule_step())
    losses.append(loss.item())
  else:
    losses.append(dp.average_gradients(loss))
    opt.step()
if rank == 0: print(json.dumps({"ranks": n, "losses": losses}), flush=True)
