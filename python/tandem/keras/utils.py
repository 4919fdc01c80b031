"""tf.keras.utils: seeding."""

import random as _python_random

import numpy as np

from tandem import random as _random
from tandem._unsupported import module_getattr


def set_random_seed(seed: int) -> None:
    """Seeds Python's, numpy's and Tandem's generators, as Keras' set_random_seed does."""
    _python_random.seed(seed)
    np.random.seed(seed)
    _random.set_seed(seed)


__getattr__ = module_getattr("tf.keras.utils")
