"""tf.distribute: strategies over Tandem's (TPU, several GPUs, one GPU, the CPU).

Models compiled inside ``strategy.scope()`` train under the strategy: ``fit`` splits each global
batch (per-replica batch x ``num_replicas_in_sync``) across the replicas and sums their
gradients, as TensorFlow's strategies do.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional

from tandem import _devices, _native
from tandem._unsupported import missing, module_getattr

_entered = threading.local()


class Strategy:
    """A distribution strategy; the default one (no strategy) has one replica."""

    def __init__(self, native: Any = None) -> None:
        self._native = native

    @property
    def num_replicas_in_sync(self) -> int:
        return 1 if self._native is None else int(self._native.num_replicas_in_sync)

    @property
    def description(self) -> str:
        """Tandem's account: "OneDevice(cpu)", "Mirrored(cuda:0, cuda:1)", ..."""
        return "Default(cpu)" if self._native is None else self._native.description

    @contextmanager
    def scope(self) -> Iterator[Strategy]:
        stack: List[Strategy] = _entered.__dict__.setdefault("stack", [])
        native_scope = None if self._native is None else self._native.scope()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()
            del native_scope

    def _one_replica(self, method: str) -> None:
        if self.num_replicas_in_sync != 1:
            missing(
                f"tf.distribute.Strategy.{method} with {self.num_replicas_in_sync} replicas "
                "(custom loops under a multi-replica strategy); model.fit splits the batches"
            )

    def experimental_distribute_dataset(self, dataset: Any, options: Any = None) -> Any:
        """With one replica, the dataset itself (each batch is that replica's)."""
        self._one_replica("experimental_distribute_dataset")
        return dataset

    def run(self, fn: Any, args: Any = (), kwargs: Any = None, options: Any = None) -> Any:
        """With one replica, ``fn(*args, **kwargs)`` on it: its results are the per-replica
        values."""
        self._one_replica("run")
        return fn(*args, **(kwargs or {}))

    def reduce(self, reduce_op: Any, value: Any, axis: Any = None) -> Any:
        """With one replica, the value itself, reduced along ``axis`` when one is given."""
        self._one_replica("reduce")
        op = str(getattr(reduce_op, "name", reduce_op)).upper()
        if op not in ("SUM", "MEAN"):
            raise ValueError(f"reduce: unknown reduce_op {reduce_op!r}; give SUM or MEAN")
        if axis is None:
            return value
        from tandem import math

        return (math.reduce_sum if op == "SUM" else math.reduce_mean)(value, axis=axis)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}, {self.num_replicas_in_sync} replicas>"


def _strategy_device(device: str) -> str:
    """A device TensorFlow names ("/gpu:0", "/device:CPU:0") as a strategy name ("gpu:0")."""
    kind, index = _devices.parse_device(device)
    if kind == "tpu":
        raise ValueError(f"unknown device {device!r} for OneDeviceStrategy; use TPUStrategy")
    return "cpu" if kind == "cpu" else f"gpu:{index}"


class MirroredStrategy(Strategy):
    """Every local GPU, one replica each; one replica on the CPU where there is none (as
    TensorFlow's)."""

    def __init__(self, devices: Optional[List[str]] = None, cross_device_ops: Any = None) -> None:
        if devices is not None or cross_device_ops is not None:
            missing("tf.distribute.MirroredStrategy(devices=/cross_device_ops=)")
        gpus = _devices.gpu_count()
        name = "mirrored" if gpus > 1 else ("gpu:0" if gpus == 1 else "cpu")
        super().__init__(_native.make_strategy(name))


class OneDeviceStrategy(Strategy):
    def __init__(self, device: str) -> None:
        super().__init__(_native.make_strategy(_strategy_device(device)))


class MultiWorkerMirroredStrategy(Strategy):
    """One replica per process, processes started by mpirun or ``tandem launch``."""

    def __init__(self, cluster_resolver: Any = None, communication_options: Any = None) -> None:
        if cluster_resolver is not None or communication_options is not None:
            missing("tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=/...)")
        super().__init__(_native.make_strategy("multi-worker"))


class TPUStrategy(Strategy):
    def __init__(self, tpu_cluster_resolver: Any = None, **unsupported: Any) -> None:
        if unsupported:
            missing(f"tf.distribute.TPUStrategy({', '.join(unsupported)}=...)")
        super().__init__(_native.make_strategy("tpu"))


class ReduceOp:
    """tf.distribute.ReduceOp."""

    SUM = "SUM"
    MEAN = "MEAN"


_default = Strategy()


def get_strategy() -> Strategy:
    """The strategy of the innermost ``scope()`` on this thread, or the default one."""
    stack = _entered.__dict__.get("stack", [])
    return stack[-1] if stack else _default


def has_strategy() -> bool:
    return bool(_entered.__dict__.get("stack"))


class cluster_resolver:  # noqa: N801 - TensorFlow's module name
    class TPUClusterResolver:
        """The TPU of this TPU VM; ValueError where there is none, as TensorFlow raises."""

        def __init__(self, tpu: Any = None, zone: Any = None, project: Any = None) -> None:
            if tpu not in (None, "", "local"):
                missing("TPUClusterResolver for a remote TPU (tpu=<name>); run on the TPU VM")
            reason = _native.tpu_unavailable_reason()
            if reason:
                raise ValueError(f"no TPU to connect to: {reason}")


__getattr__ = module_getattr("tf.distribute")
