"""The device path (device="cuda"). On machines without CUDA only the
argument handling runs; bench/gpu/ runs the whole file on a GPU machine."""
import threading

import pytest
import torch

import feedline

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_cuda_without_a_gpu_is_a_clear_error(dataset):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError, match="torch.cuda.is_available"):
        feedline.Loader(dataset, batch_size=8, device="cuda")


def test_cpu_device_is_the_host_path(dataset):
    with feedline.Loader(dataset, batch_size=8, device="cpu", num_threads=2) as loader:
        assert loader.device is None
        images, labels = next(iter(loader))
        assert images.device.type == "cpu"


def test_batch_reports_its_whole_buffer_for_pinning(dataset):
    # A fixed ring of 3 (an auto ring may grow, which would make the bound vary).
    with feedline.Loader(dataset, batch_size=8, num_threads=2, prefetch_batches=2,
                         transform=feedline.transforms.imagenet_eval(32, 32)) as loader:
        seen = set()
        for batch in loader._host_batches(with_buffer=True):
            b, (address, size) = batch
            images = b.fields["image"]
            assert address <= images.data_ptr() < address + size
            assert size >= images.numel() * images.element_size()
            seen.add(address)
            del b, images, batch
        # The ring recycles a few buffers, so pinning each once is cheap.
        assert 1 <= len(seen) <= 3


@cuda
def test_device_batches_equal_host_batches_byte_for_byte(dataset):
    """docs/reliability.md item 31 in short: buffers are reused only after their copy
    completed, so every device batch equals the host batch of the same seed."""
    kwargs = dict(batch_size=8, shuffle=True, seed=3, num_threads=2, prefetch_batches=1,
                  transform=feedline.transforms.imagenet_train(64))
    host = feedline.Loader(dataset, **kwargs)
    dev = feedline.Loader(dataset, device="cuda", **kwargs)
    for _ in range(5):
        for (hi, hl), (di, dl) in zip(host, dev):
            assert di.is_cuda and dl.is_cuda
            # Slow the consumer down on the device so copies overlap steps.
            torch.cuda._sleep(1_000_000)
            assert torch.equal(di.cpu(), hi) and torch.equal(dl.cpu(), hl)
    s = dev.stats()["device"]
    assert s["buffers_pinned"] >= 1 and s["buffers_unpinned"] == 0
    dev.close()
    host.close()


@cuda
def test_device_break_and_close_leave_no_threads(dataset):
    before = threading.active_count()
    loader = feedline.Loader(dataset, batch_size=8, device="cuda", num_threads=2)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    loader.close()
    assert threading.active_count() == before
