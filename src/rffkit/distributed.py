"""Several processes, one model: the torch.distributed helpers of rffkit's streamed fits.

A streamed fit (``RFFRidge().fit(rffkit.io.open_table(...))``) run in every process of a
``torchrun`` job reads only its rank's share of the rows
(``source.iter_chunks(rank=rank, world_size=world_size)``), draws the same random features
as the other ranks, and sums its statistics with theirs through :func:`all_reduce_sum`, so
every rank ends with the same model. The estimators call these helpers themselves: a user's
script only starts the job and, if it writes files, writes them on rank 0::

    # torchrun --standalone --nproc_per_node=2 fit.py
    import rffkit
    from rffkit.distributed import is_main_process, process_group

    with process_group():                      # gloo on CPU, NCCL when a GPU is present
        source = rffkit.io.open_table("data/*.parquet", target="y")
        model = rffkit.RFFRidge(random_state=0).fit(source)
        if is_main_process():
            rffkit.save(model, "model.rffkit")

Several machines run the same script with ``torchrun --nnodes=N --node_rank=K
--rdzv_endpoint=HOST:PORT``; nothing else changes. Without an initialised process group
every helper here is the single-process identity (rank 0 of 1), so the same code runs in a
plain ``python`` process.

Communication: what a fit sends does not grow with the number of rows; each all-reduce of
RFFRidge carries its ``D (D + 1) / 2 + D (T + 1) + 2 T + 1`` float64 sums (16 MB for
``D = 2000``, one target). :func:`count_traffic` records the bytes of every all-reduce.
"""

from __future__ import annotations

import datetime
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

__all__ = [
    "world",
    "is_main_process",
    "all_reduce_sum",
    "broadcast_object",
    "all_gather_object",
    "process_group",
    "local",
    "count_traffic",
    "TrafficLog",
]

_LOGS = []
_STATE = threading.local()


def _initialised():
    return dist.is_available() and dist.is_initialized() and not getattr(_STATE, "local", 0)


@contextmanager
def local():
    """Within the block this process acts alone, whatever process group it belongs to.

    :func:`world` returns ``(0, 1)`` and the collectives are identities, so a streamed fit
    inside the block reads every row of its source and sends nothing. Estimators use it
    for data held in memory, which each rank has in full or for itself.

    Yields
    ------
    None

    Examples
    --------
    >>> from rffkit.distributed import local, world
    >>> with local():
    ...     world()
    (0, 1)
    """
    _STATE.local = getattr(_STATE, "local", 0) + 1
    try:
        yield
    finally:
        _STATE.local -= 1


def world():
    """This process's ``(rank, world_size)`` in the default process group.

    Returns
    -------
    rank : int
        0 when no process group is initialised.
    world_size : int
        1 when no process group is initialised.

    Examples
    --------
    >>> from rffkit.distributed import world
    >>> world()  # a plain Python process
    (0, 1)
    """
    if not _initialised():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def is_main_process():
    """Whether this process is rank 0 (always true without a process group).

    Only the main process should write files (models, results) in a distributed job.

    Returns
    -------
    bool

    Examples
    --------
    >>> from rffkit.distributed import is_main_process
    >>> is_main_process()
    True
    """
    return world()[0] == 0


@dataclass
class TrafficLog:
    """Bytes of every all-reduce run inside :func:`count_traffic`, in call order.

    Attributes
    ----------
    all_reduce_bytes : list of int
        One entry per call of :func:`all_reduce_sum` that communicated.
    """

    all_reduce_bytes: list = field(default_factory=list)

    @property
    def total_bytes(self):
        """Bytes of all the all-reduces together."""
        return sum(self.all_reduce_bytes)


@contextmanager
def count_traffic():
    """Record the size of every all-reduce this process sends within the block.

    Yields
    ------
    log : TrafficLog
        Filled as the block runs (nothing is recorded in a single process).

    Examples
    --------
    >>> import torch
    >>> from rffkit.distributed import all_reduce_sum, count_traffic
    >>> with count_traffic() as log:
    ...     _ = all_reduce_sum(torch.ones(3))
    >>> log.all_reduce_bytes  # no process group: nothing was sent
    []
    """
    log = TrafficLog()
    _LOGS.append(log)
    try:
        yield log
    finally:
        _LOGS.remove(log)


def _communication_device(tensor):
    """NCCL reduces CUDA tensors only; gloo takes the tensor where it is."""
    if dist.get_backend() == "nccl" and tensor.device.type != "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return tensor.device


def all_reduce_sum(tensor):
    """Sum ``tensor`` over every rank, in place; the identity in a single process.

    Parameters
    ----------
    tensor : torch.Tensor
        The same shape and dtype on every rank. A CPU tensor under the NCCL backend is
        moved to this rank's GPU for the reduction and copied back.

    Returns
    -------
    tensor : torch.Tensor
        The same tensor, now holding the sum over ranks.

    Examples
    --------
    >>> import torch
    >>> from rffkit.distributed import all_reduce_sum
    >>> all_reduce_sum(torch.tensor([1.0, 2.0])).tolist()  # one process: unchanged
    [1.0, 2.0]
    """
    if not _initialised():
        return tensor
    device = _communication_device(tensor)
    work = tensor if tensor.device == device and tensor.is_contiguous() else tensor.to(device).contiguous()
    dist.all_reduce(work, op=dist.ReduceOp.SUM)
    for log in _LOGS:
        log.all_reduce_bytes.append(work.numel() * work.element_size())
    if work is not tensor:
        tensor.copy_(work)
    return tensor


def _object_device():
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None


def broadcast_object(obj, src=0):
    """Rank ``src``'s ``obj`` on every rank (pickled); ``obj`` itself in a single process.

    Parameters
    ----------
    obj : object
        Any picklable object; only rank ``src``'s is used.
    src : int, default=0
        The rank that sends.

    Returns
    -------
    obj : object
        Rank ``src``'s object (a copy on the other ranks).

    Examples
    --------
    >>> from rffkit.distributed import broadcast_object
    >>> broadcast_object({"seed": 7})
    {'seed': 7}
    """
    if not _initialised():
        return obj
    box = [obj if dist.get_rank() == src else None]
    dist.broadcast_object_list(box, src=src, device=_object_device())
    return box[0]


def all_gather_object(obj):
    """Every rank's ``obj``, in rank order (pickled); ``[obj]`` in a single process.

    Parameters
    ----------
    obj : object
        Any picklable object.

    Returns
    -------
    objects : list
        ``world_size`` objects, rank 0's first; the same list on every rank.

    Examples
    --------
    >>> from rffkit.distributed import all_gather_object
    >>> all_gather_object(3)
    [3]
    """
    if not _initialised():
        return [obj]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


@contextmanager
def process_group(backend=None, *, timeout_seconds=1800):
    """Join the job started by ``torchrun`` for the duration of the block.

    Initialises the default process group from torchrun's environment variables
    (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ``LOCAL_RANK``) and
    destroys it on exit. Does nothing when a group is already initialised (it is left as it
    is) or when the variables are absent (a plain ``python`` run: one process).

    Parameters
    ----------
    backend : str or None, default=None
        'gloo', 'nccl', or a mapping such as 'cpu:gloo,cuda:nccl'; None: 'nccl' when CUDA
        is available, else 'gloo'. With NCCL each process uses the GPU numbered by its
        ``LOCAL_RANK``.
    timeout_seconds : float, default=1800
        How long a collective call waits for the other ranks before failing.

    Yields
    ------
    rank, world_size : tuple of int

    Examples
    --------
    >>> from rffkit.distributed import process_group
    >>> with process_group() as (rank, world_size):  # not under torchrun: one process
    ...     print(rank, world_size)
    0 1
    """
    if not dist.is_available() or dist.is_initialized() or "WORLD_SIZE" not in os.environ:
        yield world()
        return
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if "nccl" in backend:  # 'nccl', or a per-device mapping such as 'cpu:gloo,cuda:nccl'
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_seconds))
    try:
        yield world()
    finally:
        dist.destroy_process_group()
