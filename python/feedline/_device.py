"""Device prefetch: host batches to a CUDA device, one batch ahead.

The engine's ring recycles a handful of batch buffers, so each is pinned
once, in place (cudaHostRegister through torch's cudart bindings), the first
time a batch in it is seen: no staging copy and no allocator hook that would
need the GIL on a worker thread. Each batch's copy is issued on a side stream
while the training step of the previous batch runs; the consumer's stream
waits on the copy's event before the batch is handed out. The host batch
(and so its buffer) is kept until that event has completed: only then can
the engine refill the buffer (docs/python.md, "Device path").
"""
from __future__ import annotations

import collections
import ctypes
from typing import TYPE_CHECKING, Any, Deque, Dict, Tuple, Union

import torch

if TYPE_CHECKING:
    from .loader import Batch

_CUDA_HOST_REGISTER_PORTABLE = 1  # pinned for every CUDA context, not just the current one


def _clear_cuda_error() -> None:
    """A failed cudaHostRegister leaves cudart's last error set, and torch's
    next launch check would report it against an unrelated kernel: read it
    off through the libcudart this process already loaded."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libcudart" in line}
        for path in paths:
            ctypes.CDLL(path).cudaGetLastError()
    except (OSError, AttributeError):
        pass  # statically linked cudart: torch clears it on its own checks


class DeviceFeeder:
    """Copies feedline Batches to `device` on a side stream.

    Not thread-safe: used by one Loader iterator at a time.
    """

    def __init__(self, device: Union[str, int, torch.device]) -> None:
        self.device = torch.device(device)
        if self.device.type != "cuda":
            raise ValueError(f"device must be a CUDA device or None, got {device!r}")
        if not torch.cuda.is_available():
            raise RuntimeError(f"device={device!r} but torch.cuda.is_available() is False "
                               "(no GPU or a CPU-only torch build); use device=None")
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.stream = torch.cuda.Stream(self.device)
        self._cudart = torch.cuda.cudart()
        self._registered: Dict[int, int] = {}  # buffer address -> bytes, pinned by us
        self._pending: Deque[Tuple[Batch, Any]] = collections.deque()  # (host Batch, copy-done event), oldest first
        self.pinned = 0      # buffers pinned in place
        self.unpinned = 0    # buffers registration failed for (copies then go synchronously)
        self.copies = 0
        self.copy_bytes = 0

    def _pin(self, address: int, size: int) -> None:
        if address in self._registered or size == 0:
            return
        register = getattr(self._cudart, "cudaHostRegister", None)
        ok = False
        if register is not None:
            with torch.cuda.device(self.device):
                err = register(address, size, _CUDA_HOST_REGISTER_PORTABLE)
            ok = int(err) == 0
            if not ok:
                _clear_cuda_error()
        # Remember failures too so that each buffer is tried once.
        self._registered[address] = size if ok else 0
        if ok:
            self.pinned += 1
        else:
            self.unpinned += 1

    def submit(self, host_batch: Batch, buffer: Tuple[int, int]) -> Tuple[Batch, Any]:
        """Issues the copy of `host_batch` (a loader.Batch whose fields are
        CPU tensors in the buffer (address, size)) and returns the device
        Batch; its tensors may be used only after ready()."""
        self._pin(*buffer)
        fields = {}
        with torch.cuda.stream(self.stream):
            for name, t in host_batch.fields.items():
                if not isinstance(t, torch.Tensor):  # bytes fields (lists) stay on the host
                    fields[name] = t
                    continue
                fields[name] = t.to(self.device, non_blocking=True)
                self.copy_bytes += t.numel() * t.element_size()
            event = torch.cuda.Event()
            event.record(self.stream)
        self.copies += 1
        self._pending.append((host_batch, event))
        return host_batch.with_fields(fields), event

    def ready(self, device_batch: Batch, event: Any) -> Batch:
        """Makes the current stream wait for the batch's copy; marks its
        tensors as used there so the caching allocator does not hand their
        memory to the side stream early."""
        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        for t in device_batch.fields.values():
            if isinstance(t, torch.Tensor):
                t.record_stream(current)
        return device_batch

    def retire(self, keep: int) -> None:
        """Releases host batches whose copies are done; waits for the oldest
        ones until at most `keep` are pending. A buffer goes back to the ring
        only after its copy has completed."""
        while self._pending and (len(self._pending) > keep or self._pending[0][1].query()):
            _, event = self._pending.popleft()
            event.synchronize()

    def close(self) -> None:
        """Waits for every copy, releases the host batches and unpins the
        buffers (which must still be alive: the loader closes after this)."""
        self.stream.synchronize()
        self._pending.clear()
        unregister = getattr(self._cudart, "cudaHostUnregister", None)
        with torch.cuda.device(self.device):
            for address, size in self._registered.items():
                if size and unregister is not None:
                    unregister(address)
        self._registered.clear()

    def stats(self) -> Dict[str, Any]:
        return {"device": str(self.device), "buffers_pinned": self.pinned,
                "buffers_unpinned": self.unpinned, "copies": self.copies,
                "copy_bytes": self.copy_bytes, "copies_in_flight": len(self._pending)}
