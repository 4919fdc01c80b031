"""tf.config: the devices Tandem finds on this machine, as TensorFlow lists them."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional

from tandem import _devices, _native
from tandem._unsupported import missing, module_getattr


class PhysicalDevice(NamedTuple):
    """tf.config.PhysicalDevice: ``name`` as "/physical_device:GPU:0", ``device_type`` as "GPU"."""

    name: str
    device_type: str


class LogicalDevice(NamedTuple):
    name: str
    device_type: str


_details: Dict[str, Dict[str, Any]] = {}


def list_physical_devices(device_type: Optional[str] = None) -> List[PhysicalDevice]:
    """The CPU, the GPUs Tandem can train on, and the TPU chips, as TensorFlow lists them."""
    devices: List[PhysicalDevice] = []
    counts: Dict[str, int] = {}
    for kind, details in _devices.physical_devices():
        index = counts.get(kind, 0)
        counts[kind] = index + 1
        device = PhysicalDevice(f"/physical_device:{kind}:{index}", kind)
        _details[device.name] = dict(details)
        devices.append(device)
    if device_type is None:
        return devices
    return [d for d in devices if d.device_type == device_type.upper()]


def list_logical_devices(device_type: Optional[str] = None) -> List[LogicalDevice]:
    return [
        LogicalDevice(d.name.replace("/physical_device:", "/device:"), d.device_type)
        for d in list_physical_devices(device_type)
    ]


def get_device_details(device: PhysicalDevice) -> Dict[str, Any]:
    """tf.config.experimental.get_device_details: the name, memory and compute capability."""
    if device.name not in _details:
        list_physical_devices()
    return dict(_details.get(device.name, {}))


def experimental_connect_to_cluster(cluster_spec_or_resolver: Any, *args: Any, **kw: Any) -> None:
    """Accepts the TPU VM's own TPUClusterResolver: its TPU is local, so there is nothing to
    connect to; remote clusters are not there."""
    from tandem.distribute import cluster_resolver

    if not isinstance(cluster_spec_or_resolver, cluster_resolver.TPUClusterResolver):
        missing("tf.config.experimental_connect_to_cluster for a remote cluster")


class threading:  # noqa: N801 - TensorFlow's module name
    """tf.config.threading: the CPU threads Tandem's kernels use. 0, the default, is automatic:
    the cores this process may use, fewer while other processes want them."""

    @staticmethod
    def set_intra_op_parallelism_threads(num_threads: int) -> None:
        _native.set_num_threads(int(num_threads))

    @staticmethod
    def get_intra_op_parallelism_threads() -> int:
        return int(_native.thread_setting())


class experimental:  # noqa: N801 - TensorFlow's module name
    get_device_details = staticmethod(get_device_details)


__getattr__ = module_getattr("tf.config")
