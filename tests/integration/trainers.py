"""What the trainer-framework suites share (docs/integrations.md): the
generated Parquet set, launching a script on 2 gloo ranks as external
processes, and reading back the rows each step trained on."""
import json
import os
import pathlib
import subprocess
import sys

from loopback import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]


def parquet_set(base, gen_dataset, rows=64, classes=4):
    """`rows` generated images in `classes` classes as one Parquet file with
    an idx column (row groups of 8)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    folder = gen_dataset(base / "images", rows, classes)
    names = sorted(p.name for p in folder.iterdir())
    data = [(f.read_bytes(), i) for i, c in enumerate(names) for f in sorted((folder / c).iterdir())]
    table = pa.table({"image": [b for b, _ in data], "label": [y for _, y in data],
                      "idx": list(range(len(data)))})
    pq.write_table(table, base / "train.parquet", row_group_size=8)
    return base / "train.parquet"


def ranks(script, *args, world=2, rank_env=True):
    """`script` once per rank, as a launcher starts them: LOCAL_RANK,
    NODE_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and RANK unless
    rank_env is False: Lightning takes its environment from the others)."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, LOCAL_RANK=str(rank), NODE_RANK="0", WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONPATH=os.environ.get("PYTHONPATH", ""))
        if rank_env:
            env["RANK"] = str(rank)
            env["LOCAL_WORLD_SIZE"] = str(world)
        procs.append(subprocess.Popen([sys.executable, str(script), *map(str, args)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, o in zip(procs, outs):
        assert p.returncode == 0, o[-4000:]
    return outs


def steps(record, rank):
    """{step: {"step", "ids", "loss"}} that rank `rank` wrote to `record`."""
    lines = pathlib.Path(f"{record}.rank{rank}").read_text().splitlines()
    out = {}
    for r in map(json.loads, lines):
        assert r["step"] not in out, f"step {r['step']} trained twice on rank {rank}"
        out[r["step"]] = r
    return out


def check_resumed(whole, part, rest, total, cut, world=2, rows=64, per_epoch=4):
    """The resumed run (`part` then `rest`, cut at step `cut`) trained on
    exactly the rows of the uninterrupted one at every step on every rank;
    the ranks' rows are disjoint at each step and every epoch covers every
    row once (sharded once); the loss fell."""
    runs = [[steps(r, k) for k in range(world)] for r in (whole, part, rest)]
    for k in range(world):
        w, p, r = runs[0][k], runs[1][k], runs[2][k]
        assert sorted(w) == list(range(total)), (k, sorted(w)[:5])
        assert sorted(p) == list(range(cut)) and sorted(r) == list(range(cut, total)), (k, sorted(r)[:3])
        for s in range(total):
            assert (p if s < cut else r)[s]["ids"] == w[s]["ids"], (k, s)
    w = runs[0]
    for s in range(total):
        seen = [i for k in range(world) for i in w[k][s]["ids"]]
        assert len(seen) == len(set(seen)), s
    for e in range(total // per_epoch):
        seen = [i for s in range(per_epoch * e, per_epoch * e + per_epoch) for k in range(world)
                for i in w[k][s]["ids"]]
        assert sorted(seen) == list(range(rows)), e
    losses = [w[0][s]["loss"] for s in range(total)]
    head, tail = losses[: total // 5], losses[-(total // 5):]
    assert sum(tail) / len(tail) < sum(head) / len(head), losses
