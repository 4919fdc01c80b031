"""tf.tpu: the TPU system of this TPU VM, which Tandem brings up with TPUStrategy."""

from __future__ import annotations

from typing import Any

from tandem._unsupported import missing, module_getattr


class experimental:  # noqa: N801 - TensorFlow's module name
    @staticmethod
    def initialize_tpu_system(cluster_resolver: Any = None) -> None:
        """Checks the resolver: Tandem opens the local TPU when TPUStrategy is made."""
        from tandem.distribute import cluster_resolver as resolvers

        if not isinstance(cluster_resolver, resolvers.TPUClusterResolver):
            missing("tf.tpu.experimental.initialize_tpu_system without a TPUClusterResolver")


__getattr__ = module_getattr("tf.tpu")
