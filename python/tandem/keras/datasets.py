"""tf.keras.datasets: Fashion-MNIST from Debian's dataset-fashion-mnist package.

Keras downloads the files; Tandem reads the copy that ``scripts/install-deps.sh`` installs in
/usr/share/datasets/fashion-mnist, and returns what Keras returns: uint8 arrays.
"""

from __future__ import annotations

from typing import Tuple

import numpy as np

from tandem import _native
from tandem._unsupported import module_getattr

Split = Tuple[np.ndarray, np.ndarray]


class fashion_mnist:  # noqa: N801 - Keras' module name
    @staticmethod
    def load_data() -> Tuple[Split, Split]:
        """((x_train, y_train), (x_test, y_test)): images (N, 28, 28) and labels (N,), uint8."""

        def split(name: str) -> Split:
            images, labels = _native.fashion_mnist_files(name)
            return _native.read_idx(images).numpy(), _native.read_idx(labels).numpy()

        return split("train"), split("t10k")


__getattr__ = module_getattr("tf.keras.datasets")
