"""tf.debugging: where ops run."""

from tandem import _native
from tandem._unsupported import module_getattr


def set_log_device_placement(enabled: bool) -> None:
    """Logs every op Tandem runs and its device to the process's stderr, as TensorFlow does
    ("Executing op matmul in device /job:localhost/replica:0/task:0/device:CPU:0")."""
    _native.set_log_device_placement(bool(enabled))


__getattr__ = module_getattr("tf.debugging")
