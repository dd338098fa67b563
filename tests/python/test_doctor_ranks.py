"""The doctor across ranks (issue 19, item 4): two real gloo ranks on
127.0.0.1, launched by hand as tests/python/test_distributed.py does; rank 1
sleeps in its step before the all-reduce, so rank 0 waits for it inside the
collective. Rank 0's report (the job's one report) names rank 1 and holds a
row per rank; rank 1 writes nothing. The sleep is 40 ms against a step of
well under a millisecond: the test checks which rank is named, not a time."""
import json
import os
import socket
import subprocess
import sys
import textwrap

RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import torch
    import torch.distributed as dist
    import feedline.doctor
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = int(sys.argv[3])
    data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(30)]
    doctor = feedline.doctor.Doctor()
    original = dist.all_reduce  # torch 2 decorates it (functools.wraps): compare identity
    for x, y in doctor.watch(data):
        g = x.sum(0)
        if rank == slow:
            time.sleep(0.04)  # the straggler's slower step
        dist.all_reduce(g)  # the others wait here for it
    out = sys.argv[2] if rank == 0 else sys.argv[2] + f".rank{rank}"
    report = doctor.report(file=sys.stdout, json=out)
    assert report.data["ranks"]["slowest"] == slow  # every rank gets the table
    assert dist.all_reduce is original  # restored
    dist.destroy_process_group()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(tmp_path, slow, world=2):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / f"report-{slow}.json"
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, str(script), "-", str(out), str(slow)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    for p in procs:
        output, _ = p.communicate(timeout=240)
        assert p.returncode == 0, output
        outputs.append(output)
    return out, outputs


def test_slow_rank_is_named_in_rank_zeros_report(tmp_path):
    import feedline.doctor

    from doctor_plants import undocumented
    out, outputs = run_ranks(tmp_path, slow=1)
    data = json.loads(out.read_text())
    feedline.doctor.validate(data)
    assert not [p for p in undocumented(data) if p.startswith("ranks")]  # docs/doctor.md's schema lists them
    assert not (tmp_path / (out.name + ".rank1")).exists()  # one report for the job: rank 0's
    assert "ranks     2 (gloo)" in outputs[0] and "ranks" not in outputs[1]  # only rank 0 prints
    rk = data["ranks"]
    assert rk["world_size"] == 2 and rk["backend"] == "gloo" and rk["collectives_timed"] is True
    assert [r["rank"] for r in rk["list"]] == [0, 1] and rk["slowest"] == 1
    rows = {r["rank"]: r for r in rk["list"]}
    # Rank 0 waited for rank 1 inside the all-reduce: its step shows the wait, its own time does not.
    assert rows[0]["collective_mean_s"] > rows[1]["collective_mean_s"]
    assert rows[1]["own_mean_s"] > rows[0]["own_mean_s"]
    top = data["findings"][0]
    assert top["id"] == "straggler" and top["evidence"]["slowest"] == 1
    assert top["title"].startswith("Rank 1 is the straggler") and top["evidence"]["part"] == "step"
    assert "<- slowest" in outputs[0]


def test_the_other_rank_slowed_is_named_instead(tmp_path):
    out, _ = run_ranks(tmp_path, slow=0)
    data = json.loads(out.read_text())
    assert data["ranks"]["slowest"] == 0
    assert data["findings"][0]["id"] == "straggler" and data["findings"][0]["evidence"]["slowest"] == 0
