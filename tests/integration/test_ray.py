"""feedline on Ray (docs/ray.md) on a real local cluster of two nodes
started by the tests on this machine (ray.cluster_utils.Cluster: a head
standing in for the trainer node with a GPU resource, a CPU-only node for
preprocessing) and stopped after them: the Ray Data operator gives exactly
feedline's output for every row once; an actor killed mid-epoch loses and
duplicates no row; Ray Train workers shard once and resume exactly from Ray
Train's checkpoint; Ray Data streams feedline batches to the workers."""
import json
import os
import pathlib

import pytest

ray = pytest.importorskip("ray", reason="ray is in the torch 2 venv (make test-torch2)")
pytest.importorskip("pyarrow", reason="FEEDLINE_PYARROW_DIR (make test sets it) has no pyarrow")
pytest.importorskip("ray.data", reason="ray[data] is in the torch 2 venv (make test-torch2)")
from trainers import check_resumed, parquet_set  # noqa: E402

import feedline  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from ray.cluster_utils import Cluster
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 1,
                                                      "resources": {"trainer_node": 1}})
    # Logical CPUs: Ray schedules by them, and actor pools of the earlier
    # tests may still hold theirs while a later test starts its own.
    c.add_node(num_cpus=4, resources={"cpu_node": 16})
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    c.wait_for_nodes()
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def data(tmp_path_factory, gen_dataset):
    return parquet_set(tmp_path_factory.mktemp("ray"), gen_dataset)


def _reference(data):
    ld = feedline.Loader(data, batch_size=64, shuffle=False, num_threads=1,
                         transform=feedline.transforms.imagenet_eval(32, resize=40),
                         fields={"image": "image", "label": "label", "idx": "idx"})
    b = next(iter(ld))
    ld.close()
    return {int(i): (img.numpy(), int(y)) for i, img, y in zip(b["idx"], b["image"], b["label"])}


def _mapped(ds, mapper, concurrency=2, **kwargs):
    return ds.map_batches(mapper, batch_format="pyarrow", batch_size=8, concurrency=concurrency, num_cpus=0.5,
                          resources={"cpu_node": 1}, **kwargs)


def test_the_operator_gives_feedlines_output_for_every_row_once(cluster, data):
    from feedline.integrations.ray import FeedlineMapper
    ds = _mapped(ray.data.read_parquet(str(data)), FeedlineMapper,
                 fn_constructor_kwargs={"transform": feedline.transforms.imagenet_eval(32, resize=40),
                                        "label": "label", "keep": ["idx"]})
    rows = ds.take_all()
    ref = _reference(data)
    assert sorted(int(r["idx"]) for r in rows) == list(range(64))
    for r in rows:
        img, y = ref[int(r["idx"])]
        assert r["image"].shape == (3, 32, 32) and r["image"].dtype == img.dtype
        assert (r["image"] == img).all() and int(r["label"]) == y


def test_an_actor_killed_mid_epoch_loses_and_duplicates_no_row(cluster, data, tmp_path):
    from ray_jobs import DiesOnce
    marker = tmp_path / "died"
    ds = _mapped(ray.data.read_parquet(str(data)), DiesOnce, max_restarts=-1, max_task_retries=-1,
                 fn_constructor_kwargs={"marker": str(marker), "row": 37, "label": "label", "keep": ["idx"],
                                        "transform": feedline.transforms.imagenet_eval(32, resize=40)})
    rows = ds.take_all()
    assert marker.exists(), "no actor died: the fault was not injected"
    ref = _reference(data)
    assert sorted(int(r["idx"]) for r in rows) == list(range(64))
    assert all((r["image"] == ref[int(r["idx"])][0]).all() for r in rows)


def _fit(data, tmp_path, run, record, steps, save_at=None):
    """A TorchTrainer run; the same `run` name and storage path again is
    Ray Train's resume: it restores the run's latest checkpoint."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray_jobs import train_loop
    trainer = TorchTrainer(train_loop, train_loop_config={"data": str(data), "steps": steps, "save_at": save_at,
                                                          "record": str(tmp_path / f"{record}.jsonl")},
                           scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5}),
                           run_config=RunConfig(name=run, storage_path=str(tmp_path / "ray-results")))
    return trainer.fit()


def test_ray_train_workers_shard_once_and_resume_exactly_from_ray_trains_checkpoint(cluster, data, tmp_path):
    _fit(data, tmp_path, "whole", "whole", 30)
    part = _fit(data, tmp_path, "part", "part", 10, save_at=10)
    assert part.checkpoint is not None, "Ray Train kept no checkpoint"
    _fit(data, tmp_path, "part", "rest", 30)  # the interrupted run, started again
    check_resumed(tmp_path / "whole.jsonl", tmp_path / "part.jsonl", tmp_path / "rest.jsonl", 30, 10)


def test_ray_data_streams_feedline_batches_to_the_training_workers(cluster, data, tmp_path):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer
    from ray_jobs import split_loop

    from feedline.integrations.ray import FeedlineMapper
    ds = _mapped(ray.data.read_parquet(str(data)), FeedlineMapper, concurrency=1,
                 fn_constructor_kwargs={"transform": feedline.transforms.imagenet_eval(32, resize=40),
                                        "label": "label", "keep": ["idx"]})
    TorchTrainer(split_loop, train_loop_config={"record": str(tmp_path / "split")}, datasets={"train": ds},
                 scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.25}),
                 run_config=RunConfig(name="split", storage_path=str(tmp_path / "ray-results"))).fit()
    seen = [json.loads((tmp_path / f"split.rank{k}").read_text()) for k in (0, 1)]
    assert seen[0] and seen[1] and not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == list(range(64))
