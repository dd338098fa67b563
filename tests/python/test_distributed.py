"""feedline.Loader under torch.distributed with real gloo process groups on
127.0.0.1, ranks launched by hand (what torchrun does): rank and world size
come from the process group, every rank gets the same number of batches (a
collective per step proves no rank hangs), and across ranks every sample is
seen exactly once per epoch, padding counted (docs/reliability.md 28)."""
import json
import os
import socket
import subprocess
import sys
import textwrap

RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch.distributed as dist
    import feedline
    dist.init_process_group("gloo")
    loader = feedline.Loader(sys.argv[1], batch_size=4, shuffle=True, seed=11, num_threads=1,
                             transform=feedline.transforms.imagenet_eval(dtype=__import__("torch").uint8))
    assert (loader.rank, loader.world_size) == (dist.get_rank(), dist.get_world_size())
    ids, padding, steps = [], 0, 0
    for epoch in range(2):
        loader.set_epoch(epoch)
        for batch in loader.batches():
            ids.append(batch.sample_ids.tolist())
            padding += batch.num_padding
            dist.barrier()  # a collective per step: a rank with fewer batches would hang here
            steps += 1
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, {"steps": steps, "ids": ids, "padding": padding})
    if dist.get_rank() == 0:
        with open(sys.argv[2], "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ranks_cover_every_sample_once_with_equal_batch_counts(dataset, tmp_path):
    world = 5  # 96 samples: ceil(96 / 5) = 20 per rank, 4 padding duplicates
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / "result.json"
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, str(script), str(dataset), str(out)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        output, _ = p.communicate(timeout=240)
        assert p.returncode == 0, output
    results = json.loads(out.read_text())
    assert len({r["steps"] for r in results}) == 1
    assert results[0]["steps"] == 2 * 5  # ceil(20 / 4) batches per epoch, two epochs
    for epoch in range(2):
        seen = []
        for r in results:
            for batch in r["ids"][epoch * 5:(epoch + 1) * 5]:
                seen.extend(batch)
        assert len(seen) == 100
        assert sorted(set(seen)) == list(range(96))  # every sample; the 4 extra are padding
    assert sum(r["padding"] for r in results) == 2 * 4
