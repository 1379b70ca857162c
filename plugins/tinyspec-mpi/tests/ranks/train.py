"""The demo's MLP trained with --optimizer (Adam or SGD) for --steps steps on one fixed batch of --points spiral points. Run alone it is the plain
single-process loop on the whole batch; under `mpiexec -n N` each rank takes its 1/N of the batch and `DataParallel`
averages the gradients. Rank 0 prints the loss of every step as JSON: the same numbers either way, to rounding.

Alone with --parts K, the whole batch's loss is the mean of its K equal parts' mean losses, each part through the model
on its own (the same number as the plain mean, summed in the order K ranks sum in): gradient accumulation in one process."""
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
parser.add_argument("--parts", type=int, default=1, help="run alone: the batch's loss as the mean of this many parts' mean losses")
args = parser.parse_args()

dist.init()
rank, n = dist.rank(), dist.world_size()
x, y = spirals(args.points, np.random.default_rng(0))
k = n if n > 1 else args.parts  # the parts of the batch, one per rank or all in this process
mine = range(rank, rank + 1) if n > 1 else range(k)
parts = [slice(i * args.points // k, (i + 1) * args.points // k) for i in mine]
batches = [(Tensor(x[p]), Tensor(np.eye(2, dtype=np.float32)[y[p]])) for p in parts]
Tensor.manual_seed(0)
model = MLP(args.hidden)
opt = Adam(get_parameters(model), lr=0.02) if args.optimizer == "adam" else SGD(get_parameters(model), lr=0.5)
dp = dist.DataParallel(opt) if n > 1 else None
losses = []
for _ in range(args.steps):
  opt.zero_grad()
  means = [-(model(xs).log_softmax(-1) * onehot).sum(-1).mean() for xs, onehot in batches]
  loss = means[0] if len(means) == 1 else sum(means[1:], means[0]) / len(means)
  loss.backward()
  if dp is None:
    Tensor.realize(loss, *opt.schedule_step())
    losses.append(loss.item())
  else:
    losses.append(dp.average_gradients(loss))
    opt.step()
if rank == 0: print(json.dumps({"ranks": n, "losses": losses}), flush=True)
