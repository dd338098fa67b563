"""Attaches the probes to a torch DataLoader and turns what they shipped
back into evidence: per-sample, per-transform, per-batch and per-worker
times, start-up per epoch, memory, and the loader's settings."""
import os
import statistics

from . import _torch_compat, probes


def is_torch_loader(obj):
    try:
        from torch.utils.data import DataLoader
    except ImportError:
        return False
    return isinstance(obj, DataLoader)


def _name(obj):
    """A short readable name: a function's name, a transform's repr when it
    is short and not the default <... object at 0x...>, else its class."""
    fn = getattr(obj, "__name__", None)
    if fn:
        return fn
    r = repr(obj)
    return r if len(r) <= 60 and "\n" not in r and not r.startswith("<") else type(obj).__name__


def _files(dataset, limit=256):
    """Count and mean size of the files behind an ImageFolder-like dataset
    (samples = [(path, target)]), from a sample of at most `limit` stats."""
    seen = 0
    while dataset is not None and seen < 4:
        samples = getattr(dataset, "samples", None)
        if isinstance(samples, list) and samples and isinstance(samples[0], (tuple, list)) \
                and isinstance(samples[0][0], str):
            step = max(1, len(samples) // limit)
            sizes = []
            for s in samples[::step][:limit]:
                try:
                    sizes.append(os.path.getsize(s[0]))
                except OSError:
                    pass
            if sizes:
                return {"count": len(samples), "mean_bytes": sum(sizes) / len(sizes)}
            return {}
        dataset = getattr(dataset, "dataset", None)
        seen += 1
    return {}


class TorchProbe:
    """Installs the probes on one DataLoader and collects the batches' timings.

    attach() installs them through _torch_compat.Attachment (the user's
    dataset, timed in place and type-preserving; the entries of its Compose,
    collate_fn and worker_init_fn); detach() puts every one back. When one
    of torch's internals the probes need is not as expected (or persistent
    workers already run without the probes), nothing is installed, for the
    rest of this probe's life: the loop is timed from the outside only and
    status() says what could not be attached and why. release() (each
    epoch's end) detaches unless persistent workers started with the probes
    are alive; detach() stops those (they run the probes' copies).
    """

    def __init__(self, loader):
        self.loader = loader
        self.batches = []        # (info, t_request, t_received, epoch)
        self.capacity_batches = []
        self._att = None         # the live _torch_compat.Attachment
        self.outside = []        # why the probes could not attach: [{"part", "reason"}], sticky
        self.notes = []          # optional probes that could not attach
        self.parts = []          # what did attach
        self.compose = None
        self.batch_bytes = 0     # of one delivered batch (note_batch)
        self.output_hw = None    # its images' height and width

    # -- installing -----------------------------------------------------------
    def attach(self):
        if self.outside or (self._att is not None and self._att.active):
            return
        att = _torch_compat.Attachment(self.loader)
        ok = att.attach()
        self._note(att)
        if not ok:
            self.outside = list(att.outside)
            return
        self._att = att
        if att.compose is not None:
            self.compose = att.compose

    def detach(self):
        if self._att is None:
            return
        self._att.detach()
        self._note(self._att)

    def release(self):
        """At an epoch's end: detach, unless the loader keeps persistent
        workers alive (started with the probes; detaching would shut them
        down and make the next epoch pay their start-up again)."""
        if self._att is None or not self._att.active or self._att.keeps_workers():
            return
        self.detach()

    def _note(self, att):
        for n in att.notes:
            if n not in self.notes:
                self.notes.append(n)
        for p in att.attached:
            if p not in self.parts:
                self.parts.append(p)

    def status(self):
        """The report's "probes" section: what was attached, and what could
        not be and why ("mode" "outside": the loop was timed from outside)."""
        import torch
        return {"torch_version": torch.__version__, "mode": "outside" if self.outside else "probes",
                "attached": [] if self.outside else list(self.parts),
                "not_attached": [dict(n) for n in self.outside + self.notes]}

    def _user_dataset(self):
        att = self._att
        return att.dataset if att is not None and att.active else _torch_compat.user_dataset(self.loader)

    # -- receiving --------------------------------------------------------------
    def unwrap(self, batch, t_request, t_received, epoch, capacity=False):
        if isinstance(batch, probes.ProbedBatch):
            # The samples the batch holds (what the loop counts), beside the
            # dataset calls timed for it: they differ when one call makes many.
            batch.info["delivered"] = count_samples(batch.data, len(batch.info["samples"]))
            (self.capacity_batches if capacity else self.batches).append((batch.info, t_request, t_received, epoch))
            return batch.data
        return batch

    def warmup_batches(self):
        """Batches that can be ready when an epoch starts: each worker's
        first batches arrive together, up to prefetch_factor per worker."""
        l = self.loader
        return max(1, l.num_workers * (l.prefetch_factor or 2)) if l.num_workers else 1

    # -- settings and evidence ----------------------------------------------------
    def settings(self):
        l = self.loader
        att = self._att if self._att is not None and self._att.active else None
        ds = self._user_dataset()
        collate = att.collate_fn if att is not None else l.collate_fn
        compose = self.compose or _torch_compat.find_compose(ds)
        if att is not None and att.transforms is not None:
            tfs = att.transforms
        else:
            tfs = list(compose.transforms) if compose is not None and isinstance(compose.transforms, list) else None
        return {
            "num_workers": l.num_workers, "batch_size": l.batch_size, "pin_memory": bool(l.pin_memory),
            "persistent_workers": bool(l.persistent_workers),
            "prefetch_factor": l.prefetch_factor if l.num_workers > 0 else None,
            "drop_last": bool(l.drop_last), "timeout": l.timeout,
            "multiprocessing_context": _torch_compat.start_method(l),
            "dataset": _torch_compat.user_type(ds).__name__, "dataset_len": _safe_len(ds),
            "sampler": type(l.sampler).__name__,
            "collate_fn": _name(collate), "transforms": [_name(t) for t in tfs] if tfs is not None else None,
        }

    def evidence(self, waits, wall_loop):
        """The "torch" section of the report (docs/doctor.md), given the
        loop's waits for data and its wall time."""
        batches = self.batches or self.capacity_batches
        if not batches:
            return None
        ds = self._user_dataset()
        n_samples = n_delivered = 0
        sw = sc = sq = 0.0
        tf = {}  # transform index -> [wall, cpu, runq, count, pixels_sum, pixels_n]
        coll = [0.0, 0.0, 0.0]
        ref, spans, over, pins, receive_lat = [], [], [], [], []
        workers = {}
        inits = []
        decoded = []
        for info, t_req, t_recv, _ in batches:
            samples = info["samples"]
            n_samples += len(samples)
            n_delivered += info.get("delivered", len(samples))
            for (_, idx, _, wall, cpu, runq, px) in info["transforms"]:
                a = tf.setdefault(idx, [0.0, 0.0, 0.0, 0, 0, 0])
                a[0] += wall; a[1] += cpu; a[2] += runq; a[3] += 1
                if px:
                    a[4] += px; a[5] += 1
            for (_, wall, cpu, runq, _) in samples:
                sw += wall; sc += cpu; sq += runq
            c = info["collate"]
            coll[0] += c[1]; coll[1] += c[2]; coll[2] += c[3]
            if "collate_reference" in info:
                ref.append(info["collate_reference"])
            start = samples[0][0] if samples else c[0]
            span = info["end"] - start
            spans.append(span)
            over.append(span - sum(s[1] for s in samples) - c[1])
            pin = info.get("pin")
            if pin:
                pins.append(pin[1])
            if t_req < info["end"]:  # the consumer was already waiting: pure transfer
                receive_lat.append(max(0.0, t_recv - info["end"] - (pin[1] if pin else 0.0)))
            w = workers.setdefault(info["pid"], {"pid": info["pid"], "worker": info["worker"], "batches": 0,
                                                 "busy_s": 0.0, "memory": []})
            w["batches"] += 1
            w["busy_s"] += span
            if "init" in info:
                inits.append(info["init"][1])
                if len(info["init"]) > 2:
                    w["memory"].insert(0, info["init"][2])
            if "memory" in info:
                w["memory"].append(info["memory"])
        hidden_cpu, gaps = self._between_batches(batches)
        nb = len(batches)
        # Per-sample means are per sample delivered, the loop's unit (the same
        # as per sample timed unless one dataset call makes many samples).
        ns = max(1, n_delivered)
        transforms_out = []
        names = self.settings().get("transforms") or []
        tf_total = [0.0, 0.0, 0.0]
        for idx in sorted(tf):
            a = tf[idx]
            transforms_out.append({
                "index": idx, "name": names[idx] if idx < len(names) else f"transform {idx}",
                "wall_s": a[0] / ns, "cpu_s": a[1] / ns, "runq_s": a[2] / ns,
                "input_pixels": (a[4] / a[5]) if a[5] else None})
            tf_total[0] += a[0]; tf_total[1] += a[1]; tf_total[2] += a[2]
            if a[5] and not decoded:
                decoded.append(a[4] / a[5])
        sample = {"wall_s": sw / ns, "cpu_s": sc / ns, "runq_s": sq / ns}
        sample["blocked_s"] = max(0.0, sample["wall_s"] - sample["cpu_s"] - sample["runq_s"])
        load = {"wall_s": (sw - tf_total[0]) / ns, "cpu_s": max(0.0, sc - tf_total[1]) / ns,
                "runq_s": max(0.0, sq - tf_total[2]) / ns}
        load["blocked_s"] = max(0.0, load["wall_s"] - load["cpu_s"] - load["runq_s"])
        waits = sorted(waits)
        p10_wait = waits[len(waits) // 10] if waits else None
        receive = None
        if self.loader.num_workers > 0:
            cands = [v for v in (p10_wait, statistics.median(receive_lat) if receive_lat else None) if v is not None]
            receive = min(cands) if cands else None
        busy = sum(spans)
        n = self.loader.num_workers
        worker_list = []
        for w in workers.values():
            mem = w.pop("memory")
            if mem:
                w["rss_max"] = max(m[0] for m in mem)
                w["pss_max"] = max(m[1] for m in mem)
                w["private_growth"] = max(0, mem[-1][2] - mem[0][2])
            worker_list.append(w)
        image = self._image_info(decoded)
        return {
            "samples_timed": n_samples, "batches_timed": nb,
            "samples_per_batch": n_delivered / nb,
            "sample": sample, "load": load, "transforms": transforms_out,
            "batch": {"collate_s": coll[0] / nb, "collate_cpu_s": coll[1] / nb, "collate_runq_s": coll[2] / nb,
                      "collate_reference_s": statistics.median(ref) if ref else None,
                      "worker_s": busy / nb, "worker_overhead_s": max(0.0, statistics.median(over)),
                      "worker_gap_s": gaps, "worker_hidden_cpu_s": hidden_cpu,
                      "pin_s": statistics.mean(pins) if pins else None, "receive_s": receive,
                      "bytes": self.batch_bytes},
            "workers": {"count": n, "processes": len([w for w in worker_list if w["worker"] >= 0]),
                        "busy_s": busy, "utilisation": (busy / (n * wall_loop)) if n and wall_loop > 0 else None,
                        "list": worker_list},
            "startup": {"worker_init_s": statistics.mean(inits) if inits else None},
            "memory": self._memory(worker_list),
            "image": image, "files": _files(ds),
        }

    @staticmethod
    def _memory(worker_list):
        """Memory now: the training process's RSS; the workers' PSS (shared
        pages counted once), per worker slot its largest over epochs; and the
        largest growth of one worker's private memory while it loaded
        (copy-on-read: forked pages written by reference counting)."""
        slots = {}
        for w in worker_list:
            if "pss_max" in w and w["worker"] >= 0:
                slots[w["worker"]] = max(slots.get(w["worker"], 0), w["pss_max"])
        rss, pss, _ = probes.memory_sample()
        return {"main_rss": rss, "main_pss": pss, "workers_pss": sum(slots.values()),
                "max_private_growth": max((w.get("private_growth", 0) for w in worker_list), default=0)}

    def _between_batches(self, batches):
        """Per worker process, between two consecutive batches: the CPU the
        process spent beyond the batch's own samples and collate (the queue's
        feeder thread pickling, sharing tensors: per-batch IPC), median; and
        the wall gap from one batch's end to the next one's first sample,
        less the time spent waiting for a core, 25th percentile (a busy
        worker's gaps are its per-batch overhead; an idle one's are longer)."""
        if self.loader.num_workers == 0:
            return None, None
        by_pid = {}
        for info, _, _, _ in batches:
            by_pid.setdefault(info["pid"], []).append(info)
        hidden, gaps = [], []
        for infos in by_pid.values():
            infos.sort(key=lambda i: i["end"])
            for a, b in zip(infos, infos[1:]):
                if "process_cpu" not in a or "process_cpu" not in b:
                    continue
                own = sum(s[2] for s in b["samples"]) + b["collate"][2]
                hidden.append(max(0.0, b["process_cpu"] - a["process_cpu"] - own))
                start = b["samples"][0][0] if b["samples"] else b["collate"][0]
                waited_for_core = max(0.0, b.get("runq_start", 0.0) - a.get("runq_end", 0.0))
                gaps.append(max(0.0, start - a["end"] - waited_for_core))
        if not hidden:
            return None, None
        gaps.sort()
        return statistics.median(hidden), gaps[len(gaps) // 4]

    def note_batch(self, batch):
        """Remembers the byte size and the image shape of a delivered batch."""
        if self.batch_bytes:
            return
        total, hw = 0, None
        for t in _tensors(batch):
            total += t.element_size() * t.nelement()
            if hw is None and t.dim() == 4:
                hw = [int(t.shape[-2]), int(t.shape[-1])] if t.shape[1] in (1, 3, 4) else [int(t.shape[1]), int(t.shape[2])]
        self.batch_bytes, self.output_hw = total, hw

    def _image_info(self, decoded):
        out = {"output_hw": self.output_hw, "decoded_pixels": decoded[0] if decoded else None,
               "decoded_aspect": None}
        ds = self._user_dataset()
        aspect = _first_image_aspect(ds)
        if aspect:
            out["decoded_aspect"] = aspect
        return out


def _first_image_aspect(dataset):
    """long/short side of a few of the dataset's images (PIL headers only)."""
    seen = 0
    while dataset is not None and seen < 4:
        samples = getattr(dataset, "samples", None)
        if isinstance(samples, list) and samples and isinstance(samples[0], (tuple, list)) \
                and isinstance(samples[0][0], str):
            try:
                from PIL import Image
            except ImportError:
                return None
            ratios = []
            for s in samples[:: max(1, len(samples) // 16)][:16]:
                try:
                    with Image.open(s[0]) as im:
                        w, h = im.size
                    ratios.append(max(w, h) / max(1, min(w, h)))
                except Exception:
                    pass
            return sum(ratios) / len(ratios) if ratios else None
        dataset = getattr(dataset, "dataset", None)
        seen += 1
    return None


def count_samples(batch, default=None):
    """Samples in a batch: its first tensor's leading dimension; without a
    tensor `default` when given, else its length (a dict's first value's)."""
    for t in _tensors(batch):
        return int(t.shape[0]) if t.dim() > 0 else 1
    if default is not None:
        return default
    if isinstance(batch, dict) and batch:
        batch = next(iter(batch.values()))
        if isinstance(batch, (str, bytes)):
            return 1
    try:
        return len(batch)
    except TypeError:
        return 1


def _safe_len(ds):
    try:
        return len(ds)
    except Exception:
        return None


def _tensors(batch, depth=0):
    try:
        import torch
    except ImportError:
        return
    if isinstance(batch, torch.Tensor):
        yield batch
    elif depth < 3 and isinstance(batch, (list, tuple)):
        for b in batch:
            yield from _tensors(b, depth + 1)
    elif depth < 3 and isinstance(batch, dict):
        for b in batch.values():
            yield from _tensors(b, depth + 1)
