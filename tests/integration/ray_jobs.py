"""What the Ray suite's workers run (tests/integration/test_ray.py): Ray
imports them by module name on the cluster's nodes (PYTHONPATH holds this
folder), so they live outside the test module."""
import json
import os
import tempfile

from feedline.integrations.ray import FeedlineMapper, restore_loader, save_loader


class DiesOnce(FeedlineMapper):
    """A mapper whose process exits, once per marker file, on the batch
    holding row `row`: a real actor death mid-epoch."""

    def __init__(self, marker, row, **kwargs):
        super().__init__(**kwargs)
        self.marker, self.row = marker, row

    def __call__(self, batch):
        if self.row in batch.column("idx").to_pylist() and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return super().__call__(batch)


def train_loop(config):
    """Ray Train worker: a per-worker feedline loader (rank and world from
    the process group TorchTrainer set up), resumed from Ray Train's
    checkpoint, recording the rows of every step."""
    import ray.train
    import torch
    from torch import nn

    import feedline
    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    loader = feedline.Loader(config["data"], batch_size=8, shuffle=True, seed=1, drop_last=True, num_threads=1,
                             transform=feedline.transforms.imagenet_eval(32, resize=40),
                             fields={"image": "image", "label": "label", "idx": "idx"})
    assert (loader.rank, loader.world_size) == (rank, ctx.get_world_size())
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 4))
    model = ray.train.torch.prepare_model(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    restore_loader(loader)
    epoch, batch = loader.position
    step = epoch * len(loader) + batch
    while step < config["steps"]:
        for b in loader:
            loss = nn.functional.cross_entropy(model(b["image"]), b["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            with open(f"{config['record']}.rank{rank}", "a") as f:
                f.write(json.dumps({"step": step, "ids": b["idx"].tolist(), "loss": float(loss)}) + "\n")
            step += 1
            if step == config.get("save_at"):
                with tempfile.TemporaryDirectory() as d:
                    if rank == 0:
                        save_loader(loader, d)
                    ray.train.report({"step": step}, checkpoint=ray.train.Checkpoint.from_directory(d)
                                     if rank == 0 else None)
            if step >= config["steps"]:
                break


def split_loop(config):
    """Ray Train worker of the split mode: Ray Data streams feedline's
    batches (made on CPU actors) to this worker's shard."""
    import ray.train
    rank = ray.train.get_context().get_world_rank()
    ids = []
    for b in ray.train.get_dataset_shard("train").iter_torch_batches(batch_size=8):
        assert tuple(b["image"].shape[1:]) == (3, 32, 32)
        ids += b["idx"].tolist()
    with open(f"{config['record']}.rank{rank}", "w") as f:
        json.dump(ids, f)
