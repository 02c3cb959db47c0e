"""Run under torchrun by tests/training/test_distributed.py: train a few steps with DDP and check after
every step that all ranks hold the same parameters. Prints one JSON line from rank 0."""

import json
import sys
from pathlib import Path

import torch

from nmt.config import load_config
from nmt.training import distributed
from nmt.training.loop import agree_to_stop, train_batches
from nmt.training.run_setup import setup
from nmt.training.run_data import epoch_batches
from nmt.training.stopping import StopSignals

config, corpus, out, steps = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
cfg = load_config(config)
world = distributed.init(cfg.train.device)
out_dir = out / f"rank{world.rank}"  # nothing is written by ranks > 0; each gets a directory anyway
out_dir.mkdir(parents=True, exist_ok=True)
run = setup(cfg, out_dir, corpus)
shard = epoch_batches(run.data, run.cfg, 1)
max_diff, seen, signals = [], [], StopSignals()
for indices in shard[:steps]:
    seen.extend(indices.tolist())
    train_batches(run, [indices], total_steps=cfg.train.epochs * len(shard))
    agree_to_stop(run, signals)  # where the ranks agree on stopping and on the clock
    flat = torch.cat([p.detach().flatten() for p in run.model.parameters()])
    replicas = distributed.gather(flat)
    max_diff.append(max((r - replicas[0]).abs().max().item() for r in replicas))
all_seen = distributed.gather(seen)
if world.is_main:
    print(json.dumps({"world": world.size, "steps": run.progress.step, "max_diff": max_diff,
                      "shard_sizes": [len(s) for s in all_seen],
                      "overlap": len(set(all_seen[0]) & set(all_seen[1]))}))
del run  # its DDP module holds the process group (see distributed.shutdown)
distributed.shutdown()
