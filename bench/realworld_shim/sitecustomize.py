"""Fake data and the execution trace for bench/realworld.py's programs (on their PYTHONPATH only).

The programs are public examples run from their own code; this changes nothing in them:

* ``DFCOMPASS_BENCH_ET=FILE``: PyTorch's ExecutionTraceObserver runs from the moment torch is
  imported until exit, into FILE (the independent graph the edges are checked against). Only the
  process that starts it writes it (fork children of it do not); with ``DFCOMPASS_BENCH_ET_RANK=N``
  only the process whose launcher gave it ``RANK=N`` (torchrun's launcher imports torch too).
* ``DFCOMPASS_BENCH_FAKE_SIZE=N``: torchvision's MNIST gives N random digits instead of
  downloading, and FakeData (ImageNet's ``--dummy``) holds at most N images.
* GCN's Cora download (a ``requests.get`` of ``cora.tgz``) gets a random graph in Cora's format.
* ``DFCOMPASS_BENCH_TORCHVISION_STUB=1``: declares two torchvision op schemas (a MOCK, see
  :func:`_declare_torchvision_ops`).

dfcompass's own sitecustomize (tracer/_autostart) runs first when recording and chains to this one.
"""

from __future__ import annotations

import atexit
import io
import os
import tarfile
from typing import Any

from tracer.import_hooks import call_after_import

FAKE_SIZE = int(os.environ.get("DFCOMPASS_BENCH_FAKE_SIZE", "256"))


def _start_execution_trace(torch: Any) -> None:
    rank = os.environ.get("DFCOMPASS_BENCH_ET_RANK")
    if rank is not None and os.environ.get("RANK") != rank:
        return  # a launcher (torchrun) or another rank: the observer runs in that rank only
    path = os.environ.pop("DFCOMPASS_BENCH_ET", "")  # popped: child processes do not write it
    if not path:
        return
    from torch.profiler import ExecutionTraceObserver

    observer = ExecutionTraceObserver()
    observer.register_callback(path)
    observer.start()
    owner = os.getpid()

    def stop() -> None:
        if os.getpid() == owner:
            observer.stop()
            observer.unregister_callback()

    atexit.register(stop)
    # A fork child (a DataLoader worker) inherits the observer and would write its ops into the
    # same file, interleaved with the parent's: off in the child (it writes nothing on exit).
    os.register_at_fork(after_in_child=observer.stop)


def _declare_torchvision_ops(torch: Any) -> None:
    """MOCK, for ``DFCOMPASS_BENCH_TORCHVISION_STUB=1`` only: the one torchvision wheel this machine
    has is built for CUDA, so its compiled ops do not load beside CPU torch, and its import stops
    where it registers fake kernels for ``nms``. Declaring those two schemas lets the pure-Python
    parts (datasets, models, transforms) import; a program that calls a compiled op still fails."""
    if os.environ.get("DFCOMPASS_BENCH_TORCHVISION_STUB") != "1":
        return
    global _TORCHVISION_OPS
    _TORCHVISION_OPS = torch.library.Library("torchvision", "DEF")  # kept alive: the schemas live with it
    for name in ("nms", "qnms"):
        _TORCHVISION_OPS.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


_TORCHVISION_OPS: Any = None


def _fake_torchvision(datasets: Any) -> None:
    import torch

    base = datasets.MNIST

    class FakeMNIST(base):  # type: ignore[misc, valid-type]
        """MNIST's interface (data, targets, transforms) on random digits: no download."""

        def __init__(self, root: Any, train: bool = True, transform: Any = None, target_transform: Any = None,
                     download: bool = False) -> None:
            datasets.VisionDataset.__init__(self, str(root), transform=transform, target_transform=target_transform)
            self.train = train
            generator = torch.Generator().manual_seed(0 if train else 1)
            count = FAKE_SIZE if train else max(FAKE_SIZE // 2, 1)
            self.data = torch.randint(0, 256, (count, 28, 28), dtype=torch.uint8, generator=generator)
            self.targets = torch.randint(0, 10, (count,), generator=generator)

    datasets.MNIST = FakeMNIST
    fake_init = datasets.FakeData.__init__

    def capped(self: Any, size: int = 1000, *args: Any, **kwargs: Any) -> None:
        fake_init(self, min(size, FAKE_SIZE), *args, **kwargs)

    datasets.FakeData.__init__ = capped


def _cora_archive(papers: int = 1800, features: int = 1433, cites: int = 5400, seed: int = 0) -> bytes:
    """A random graph in Cora's files: cora.content (id, 0/1 features, label), cora.cites (id id)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = rng.choice(10**6, papers, replace=False)
    words = (rng.random((papers, features)) < 0.0127).astype(int)
    words[np.arange(papers), rng.integers(0, features, papers)] = 1  # every paper has a word
    labels = rng.choice(["Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods",
                         "Reinforcement_Learning", "Rule_Learning", "Theory"], papers)
    content = "".join(f"{i}\t" + "\t".join(map(str, row)) + f"\t{label}\n" for i, row, label in zip(ids, words, labels))
    pairs = rng.integers(0, papers, (cites, 2))
    cited = "".join(f"{ids[a]}\t{ids[b]}\n" for a, b in pairs if a != b)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, text in (("cora/cora.content", content), ("cora/cora.cites", cited)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _fake_cora(requests: Any) -> None:
    real_get = requests.get

    class _Response:
        def __init__(self) -> None:
            self.raw = io.BytesIO(_cora_archive())

        def __enter__(self) -> "_Response":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    def get(url: str, *args: Any, **kwargs: Any) -> Any:
        return _Response() if str(url).endswith("cora.tgz") else real_get(url, *args, **kwargs)

    requests.get = get


call_after_import("torch", _start_execution_trace)
call_after_import("torch", _declare_torchvision_ops)
call_after_import("torchvision.datasets", _fake_torchvision)
call_after_import("requests", _fake_cora)
