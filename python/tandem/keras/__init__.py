"""tf.keras: Keras 2.15's API over Tandem's layers, models and training."""

from tandem._unsupported import module_getattr
from tandem.keras import (
    activations,
    backend,
    callbacks,
    datasets,
    layers,
    losses,
    mixed_precision,
    models,
    optimizers,
    utils,
)
from tandem.keras.layers import Input
from tandem.keras.models import Model, Sequential

__all__ = [
    "Input",
    "Model",
    "Sequential",
    "activations",
    "backend",
    "callbacks",
    "datasets",
    "layers",
    "losses",
    "mixed_precision",
    "models",
    "optimizers",
    "utils",
]
__getattr__ = module_getattr("tf.keras")
