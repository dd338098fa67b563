"""feedline.TokenLoader's device path (device="cuda"): the same DeviceFeeder
as the image loader's (Loader._on_device), with cu_seqlens joined on the
host before the copy. On machines without CUDA only the argument handling
runs; on a GPU machine the whole file does."""
import threading

import numpy as np
import pytest
import torch

import feedline

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
EOS = 0


@pytest.fixture
def flat(tmp_path):
    """A nanoGPT-style flat uint16 file of documents ended by EOS, of varied lengths."""
    rng = np.random.default_rng(5)
    docs = [np.append(rng.integers(1, 1000, int(n)), EOS) for n in rng.integers(3, 40, 120)]
    path = tmp_path / "train.bin"
    np.concatenate(docs).astype(np.uint16).tofile(path)
    return str(path)


def _epoch(loader):
    return [{k: v.cpu().clone() for k, v in b.items()} for b in loader]


def test_cuda_without_a_gpu_is_a_clear_error(flat):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError, match="torch.cuda.is_available"):
        feedline.TokenLoader(flat, seq_len=16, batch_size=4, eos_token=EOS, device="cuda")


def test_a_device_that_is_not_cuda_is_refused(flat):
    with pytest.raises(ValueError, match="CUDA device"):
        feedline.TokenLoader(flat, seq_len=16, batch_size=4, eos_token=EOS, device="meta")


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_cpu_device_is_the_host_path(flat, packing):
    kwargs = dict(seq_len=16, batch_size=4, eos_token=EOS, packing=packing, pad_token=EOS, shuffle=True, seed=2,
                  num_threads=2)
    with feedline.TokenLoader(flat, device="cpu", **kwargs) as on_cpu, \
            feedline.TokenLoader(flat, **kwargs) as host:
        assert on_cpu.device is None and host.device is None
        a, b = _epoch(on_cpu), _epoch(host)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert set(x) == {"input_ids", "labels", "position_ids", "document_ids", "cu_seqlens"}
        assert all(torch.equal(x[k], y[k]) for k in x)
        assert torch.equal(x["cu_seqlens"], feedline.tokens.cu_seqlens(x["document_ids"]))


@cuda
@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_device_batches_equal_host_batches(flat, packing):
    """Every tensor of the dict on the device, cu_seqlens included, equal to
    the host loader's of the same seed while copies overlap slow steps."""
    kwargs = dict(seq_len=16, batch_size=4, eos_token=EOS, packing=packing, pad_token=EOS, shuffle=True, seed=3,
                  num_threads=2, prefetch_batches=1)
    host = feedline.TokenLoader(flat, **kwargs)
    dev = feedline.TokenLoader(flat, device="cuda", **kwargs)
    for _ in range(3):
        n = 0
        for h, d in zip(host, dev):
            assert set(d) == set(h)
            assert all(t.is_cuda for t in d.values())
            torch.cuda._sleep(1_000_000)
            assert all(torch.equal(d[k].cpu(), h[k]) for k in h)
            n += 1
        assert n == len(host)
    s = dev.stats()["device"]
    assert s["buffers_pinned"] >= 1 and s["buffers_unpinned"] == 0 and s["copies"] == 3 * len(host)
    assert dev.stats()["tokens"]["packing"] == packing
    dev.close()
    host.close()


@cuda
def test_device_break_and_close_leave_no_threads(flat):
    before = threading.active_count()
    loader = feedline.TokenLoader(flat, seq_len=16, batch_size=4, eos_token=EOS, device="cuda", num_threads=2)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    loader.close()
    assert threading.active_count() == before
