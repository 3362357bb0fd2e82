"""Execution of the generate -> perceive -> embed stages (see :mod:`auditor.executors.base`).

Two executors run in this process:

* ``sequential`` (the default): one stage after the other, one model in memory at a
  time, as auditor always ran; the CPU bookkeeping of each batch (PNG encoding, hashing,
  cache and record writes) runs on a writer thread while the model computes the next one;
* ``overlapped``: the readers (VQA, embeddings) run in their own threads alongside
  generation, on each prompt set's images as soon as they are stored, so the accelerator
  is not left waiting between stages. All the stages' models are in memory at once.

and one runs elsewhere:

* ``ray`` (``auditor[ray]``): each stage on a pool of Ray workers across GPUs and
  machines (:mod:`auditor.executors.ray`); the driver still does every cache and record
  write.

All give identical records: the readers see the same images and compute the same
chunks. Importing this package imports no torch and no ray.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from auditor.core.errors import AuditorError

if TYPE_CHECKING:  # pragma: no cover
    from auditor.executors.base import Executor

#: What ``--ray-address`` takes: ``auto`` (the running cluster), ``HOST:PORT`` or ``ray://HOST:PORT``.
RAY_ADDRESS = re.compile(r"auto|(ray://)?[A-Za-z0-9._\-\[\]:]+:\d{1,5}")

#: Seconds ``--ray-address`` may take to accept a connection: Ray itself retries an address nothing listens
#: on for minutes, printing a line a second.
RAY_CONNECT_TIMEOUT = 5.0

#: ``--executor`` names, the default first.
EXECUTOR_NAMES = ("sequential", "overlapped", "ray")
DEFAULT_EXECUTOR = EXECUTOR_NAMES[0]


def check_executor(name: str) -> str:
    """``name`` if an executor has it (and, for ``ray``, Ray is installed), else a one-line error."""
    if name not in EXECUTOR_NAMES:
        raise AuditorError(f"unknown executor {name!r} for --executor: use {', '.join(EXECUTOR_NAMES)}")
    if name == "ray" and importlib.util.find_spec("ray") is None:
        raise AuditorError("--executor ray needs Ray: pip install 'auditor[ray]'")
    return name


def check_placement(executor: str, device: str | None, executors: Callable[[str], str] = check_executor) -> None:
    """A new run's ``--executor`` (``executors`` checks it for the study: trace takes fewer) and ``--device``, both
    before the run folder exists, so a machine that cannot run it makes none. The device is checked only where the
    models load in this process: a Ray worker may have the GPU its driver lacks, and checks it where it loads."""
    executors(executor)
    if device and executor != "ray":
        from auditor.core.devices import check_device

        check_device(device)


def use_ray_address(executor: str | None, address: str | None) -> str | None:
    """Point ``--executor ray`` at ``--ray-address`` for this process, through Ray's own ``RAY_ADDRESS``.

    The address says where the work runs, never what it computes, and differs between
    machines that resume the same run: it is not recorded (the executor's name is).
    ``executor`` None is a resumed run's own executor, not known yet: the address is kept, and reached only once
    the run's record says it is on Ray (:meth:`~auditor.studies.run.Resumption.apply`), so a run on another
    executor is refused for what it is, not for an unreachable address. Returns the address as kept.
    """
    if address is None:
        return None
    if executor not in (None, "ray"):
        raise AuditorError("--ray-address is for --executor ray")
    address = address.strip()
    if not RAY_ADDRESS.fullmatch(address):
        raise AuditorError(f"--ray-address takes auto, HOST:PORT or ray://HOST:PORT, not {address!r}")
    if executor is not None and address != "auto":
        check_reachable(address)
    os.environ["RAY_ADDRESS"] = address
    return address


def check_reachable(address: str, given_as: str = "--ray-address", timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """A one-line error unless something accepts a TCP connection at ``HOST:PORT`` (or ``ray://HOST:PORT``)
    within ``timeout`` seconds once the host's name is looked up; ``given_as`` names where the address came from."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
        raise AuditorError(
            f"{given_as} {address}: cannot reach a Ray cluster there ({reason}); start one with `ray start --head` "
            f"or leave out {given_as} for a local Ray"
        ) from None


def make_executor(name: str) -> Executor:
    """The executor called ``name``."""
    if check_executor(name) == "ray":
        from auditor.executors.ray import RayExecutor

        return RayExecutor()
    from auditor.executors.local import OverlappedExecutor, SequentialExecutor

    executors = {executor.name: executor for executor in (SequentialExecutor, OverlappedExecutor)}
    return executors[name]()
