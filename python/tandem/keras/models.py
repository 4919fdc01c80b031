"""tf.keras.Model and Sequential over Tandem's models: compile, fit, evaluate, predict, save.

fit, evaluate and predict run in C++ with the GIL released; Python callbacks take it back at
their hooks, and Ctrl-C stops fit after the current step with KeyboardInterrupt, the model intact.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from tandem import _native
from tandem import data as data_module
from tandem._tensor import Tensor, cast, convert_to_tensor
from tandem._unsupported import missing, module_getattr
from tandem.keras import callbacks as callbacks_module
from tandem.keras import layers as layers_module
from tandem.keras import losses as losses_module
from tandem.keras import optimizers as optimizers_module
from tandem.keras.layers import Layer, WeightsOf

# fit's shuffle order of arrays: the same every run (Keras draws it from the global seed).
_FIT_SEED = 0


def _tensor(value: Any, what: str) -> Tensor:
    if value is None:
        raise ValueError(f"{what} is missing")
    if isinstance(value, Tensor):
        return value
    return convert_to_tensor(np.asarray(value))


def _inputs(value: Any, what: str) -> Tensor:
    """A model's inputs as Keras takes them: float64 arrays (numpy's default, ``x / 255.0``)
    become float32, the dtype of the model's inputs."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        value = value.astype(np.float32)
    tensor = _tensor(value, what)
    return cast(tensor, "float32") if tensor.dtype == "float64" else tensor


def _reject(method: str, **arguments: Any) -> None:
    for key, (value, default) in arguments.items():
        if value != default:
            missing(f"tf.keras.Model.{method}({key}={value!r})")


def _snake_case(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _sample_shape(x: Any) -> tuple:
    """The shape of a batch of x (arrays, a tensor, or a dataset's first batch of features)."""
    if isinstance(x, data_module.Dataset):
        for element in x:
            return tuple((element[0] if isinstance(element, tuple) else element).shape)
        raise ValueError("the dataset is empty: a subclassed model needs a batch to be built")
    return tuple(np.shape(x) if not isinstance(x, Tensor) else x.shape)


def _validation_pipeline(validation_data: Any, batch_size: Optional[int]) -> Any:
    """Keras' validation_data (a dataset, or (x, y) arrays batched like training) as fit takes
    it."""
    if validation_data is None:
        return None
    if isinstance(validation_data, data_module.Dataset):
        return validation_data._for_fit("validation_data")
    if isinstance(validation_data, tuple) and len(validation_data) == 2:
        x = _inputs(validation_data[0], "validation_data's x")
        y = _tensor(validation_data[1], "validation_data's y")
        dataset = data_module.Dataset.from_tensor_slices((x, y)).batch(int(batch_size or 32))
        return dataset._for_fit("validation_data")
    missing("validation_data other than a dataset or an (x, y) pair")


def _verbose(verbose: Union[str, int]) -> int:
    return 1 if verbose == "auto" else int(verbose)


class Model(WeightsOf):
    """tf.keras.Model: a functional model, Model(inputs, outputs)."""

    def __init__(
        self,
        inputs: Any = None,
        outputs: Any = None,
        name: Optional[str] = None,
        **unsupported: Any,
    ) -> None:
        if unsupported:
            missing(f"tf.keras.Model({', '.join(unsupported)}=...)")
        if inputs is None and outputs is None and type(self).call is not Model.call:
            # A subclass with its own call: built from it on the first batch it sees.
            self._setup(None)
            self._subclass_name = name or _snake_case(type(self).__name__)
            self._pending_compile: Optional[Dict[str, Any]] = None
            return
        if inputs is None or outputs is None:
            raise TypeError(
                "Model: give inputs and outputs (the functional API), or subclass Model and "
                "define call"
            )
        if isinstance(inputs, (list, tuple)) or isinstance(outputs, (list, tuple)):
            if (
                len(inputs if isinstance(inputs, (list, tuple)) else [inputs]) != 1
                or len(outputs if isinstance(outputs, (list, tuple)) else [outputs]) != 1
            ):
                missing("a tf.keras.Model of several inputs or outputs")
            inputs = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
            outputs = outputs[0] if isinstance(outputs, (list, tuple)) else outputs
        self._setup(_native.functional(inputs, outputs, name or ""))

    def _setup(self, native: Any) -> None:
        self._native_model = native
        self._optimizer: Optional[optimizers_module.Optimizer] = None
        self._metric_names: List[str] = []
        self.history: Optional[callbacks_module.History] = None

    @property
    def _native(self) -> Any:
        if self._native_model is None:
            raise ValueError(
                f"This model ({type(self).__name__}) has not yet been built: call it on a batch "
                "or fit it first (a subclassed model is built from its call on its first input)"
            )
        return self._native_model

    def call(self, inputs: Any, training: Optional[bool] = None) -> Any:
        """A subclass defines the forward pass here, with Keras layers (traced once, on a
        symbolic input shaped like the first batch)."""
        raise NotImplementedError("Model.call: define it in a subclass")

    def _build_from(self, x: Any) -> None:
        """Builds a subclassed model by running its call on a symbolic input shaped as x."""
        if self._native_model is not None:
            return
        symbolic = layers_module.Input(shape=list(_sample_shape(x))[1:])
        try:
            output = self.call(symbolic)
        except TypeError as error:
            missing(
                f"a subclassed model whose call applies TensorFlow ops to its symbolic input "
                f"({error}); Tandem traces call through Keras layers: use layers "
                "(Activation, Add, Flatten, ...) for the arithmetic"
            )
        self._setup(_native.functional(symbolic, output, self._subclass_name))
        if self._pending_compile is not None:
            self.compile(**self._pending_compile)

    @classmethod
    def _wrap(cls, native: Any) -> Model:
        model = cls.__new__(Sequential if isinstance(native, _native.Sequential) else Model)
        model._setup(native)
        return model

    # ---- structure ----
    @property
    def name(self) -> str:
        return self._native.name

    @property
    def layers(self) -> List[Layer]:
        return [Layer._wrap(layer) for layer in self._native.layers]

    def get_layer(self, name: Optional[str] = None, index: Optional[int] = None) -> Layer:
        if index is not None:
            return self.layers[index]
        return Layer._wrap(self._native.get_layer(name))

    @property
    def input_shape(self) -> tuple:
        return tuple(None if d < 0 else d for d in self._native.input_shape)

    @property
    def output_shape(self) -> tuple:
        return tuple(None if d < 0 else d for d in self._native.output_shape)

    def count_params(self) -> int:
        return int(self._native.count_params())

    def set_weights(self, weights: Sequence[Any]) -> None:
        mine = self.weights
        if len(weights) != len(mine):
            raise ValueError(
                f"set_weights: the model has {len(mine)} weights, {len(weights)} were given"
            )
        for variable, value in zip(mine, weights):
            variable.assign(convert_to_tensor(np.asarray(value), dtype=variable.dtype))

    def summary(self, print_fn: Any = None, **layout: Any) -> None:
        """Keras' table of layers, output shapes and parameters, to print_fn (print)."""
        chosen = [key for key, value in layout.items() if value not in (None, False)]
        if chosen:
            missing(f"tf.keras.Model.summary({', '.join(chosen)}=...)")
        (print_fn or print)(self._native.summary_string().rstrip("\n"))

    def build(self, input_shape: Sequence[Optional[int]]) -> None:
        shape = (
            list(input_shape)[1:]
            if len(input_shape) and input_shape[0] is None
            else list(input_shape)
        )
        self._native.build([int(d) for d in shape], "float32")

    def __call__(self, inputs: Any, training: Optional[bool] = None) -> Any:
        if isinstance(inputs, _native.SymbolicTensor):
            missing("calling a model on a symbolic input (a model inside a model)")
        self._build_from(inputs)
        return self._native.call(convert_to_tensor(inputs), bool(training))

    @property
    def stop_training(self) -> bool:
        return self._native.stop_training

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        self._native.stop_training = bool(value)

    # ---- training ----
    def compile(
        self,
        optimizer: Any = "rmsprop",
        loss: Any = None,
        metrics: Any = None,
        loss_weights: Any = None,
        weighted_metrics: Any = None,
        run_eagerly: Optional[bool] = None,
        steps_per_execution: int = 1,
        jit_compile: Any = None,
        **unsupported: Any,
    ) -> None:
        _reject(
            "compile",
            loss_weights=(loss_weights, None),
            weighted_metrics=(weighted_metrics, None),
            steps_per_execution=(steps_per_execution, 1),
        )
        if unsupported:
            missing(f"tf.keras.Model.compile({', '.join(unsupported)}=...)")
        if loss is None:
            raise ValueError("compile: give a loss, e.g. loss='sparse_categorical_crossentropy'")
        self._optimizer = optimizers_module.get(optimizer)
        if self._native_model is None:  # a subclassed model compiles once its call has built it
            self._pending_compile = {
                "optimizer": self._optimizer,
                "loss": loss,
                "metrics": metrics,
                "run_eagerly": run_eagerly,
                "jit_compile": jit_compile,
            }
            return
        metric_names = [metrics] if isinstance(metrics, str) else list(metrics or [])
        for metric in metric_names:
            if not isinstance(metric, str):
                missing(f"a metric object ({type(metric).__name__}) in compile; give its name")
        jit = None if jit_compile in (None, "auto") else bool(jit_compile)
        if run_eagerly:
            jit = False
        self._native.compile(
            self._optimizer._native, losses_module.get(loss)._native, metric_names, jit
        )
        self._metric_names = metric_names

    @property
    def optimizer(self) -> Optional[optimizers_module.Optimizer]:
        return self._optimizer

    @property
    def compiled(self) -> bool:
        return self._native.compiled

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: Optional[int] = None,
        epochs: int = 1,
        verbose: Union[str, int] = "auto",
        callbacks: Optional[Sequence[Any]] = None,
        validation_split: float = 0.0,
        validation_data: Any = None,
        shuffle: bool = True,
        class_weight: Any = None,
        sample_weight: Any = None,
        initial_epoch: int = 0,
        steps_per_epoch: Any = None,
        validation_steps: Any = None,
        validation_batch_size: Any = None,
        validation_freq: int = 1,
        **unsupported: Any,
    ) -> callbacks_module.History:
        _reject(
            "fit",
            class_weight=(class_weight, None),
            sample_weight=(sample_weight, None),
            steps_per_epoch=(steps_per_epoch, None),
            validation_steps=(validation_steps, None),
            validation_freq=(validation_freq, 1),
        )
        if unsupported:
            missing(f"tf.keras.Model.fit({', '.join(unsupported)}=...)")
        self._build_from(x)
        given = list(callbacks or [])
        params = {"epochs": int(epochs), "verbose": _verbose(verbose)}
        for callback in given:
            if isinstance(callback, callbacks_module.Callback):
                callback.set_model(self)
                callback.set_params(params)
        natives = [
            c._native if isinstance(c, callbacks_module.NativeCallback) else c for c in given
        ]
        validation = _validation_pipeline(validation_data, validation_batch_size or batch_size)
        start_epoch, start_step = int(initial_epoch), 0
        backups = [c for c in given if isinstance(c, callbacks_module.BackupAndRestore)]
        for backup in backups:
            position = backup._restore(self)
            if position is not None:
                start_epoch, start_step = position
        if isinstance(x, data_module.Dataset):
            if y is not None or batch_size is not None or validation_split:
                raise ValueError(
                    "fit: a dataset holds its labels and batches; give no y, batch_size or "
                    "validation_split with it (validation_data=another dataset instead)"
                )
            fitted = self._native.fit_dataset(
                x._for_fit("fit"),
                int(epochs),
                _verbose(verbose),
                natives,
                validation,
                start_epoch,
                start_step,
            )
        else:
            fitted = self._native.fit(
                _inputs(x, "fit's x"),
                _tensor(y, "fit's y"),
                None if batch_size is None else int(batch_size),
                int(epochs),
                _verbose(verbose),
                natives,
                float(validation_split),
                validation,
                bool(shuffle),
                _FIT_SEED,
                start_epoch,
                start_step,
            )
        for backup in backups:
            backup._finished()
        for callback in given:
            if isinstance(callback, callbacks_module.EarlyStopping):
                callback._after_fit()
        self.history = callbacks_module.History._of_fit(fitted, self)
        return self.history

    def evaluate(
        self,
        x: Any = None,
        y: Any = None,
        batch_size: Optional[int] = None,
        verbose: Union[str, int] = "auto",
        return_dict: bool = False,
        **unsupported: Any,
    ) -> Union[float, List[float], Dict[str, float]]:
        if unsupported:
            missing(f"tf.keras.Model.evaluate({', '.join(unsupported)}=...)")
        self._build_from(x)
        if isinstance(x, data_module.Dataset):
            logs: Dict[str, float] = self._native.evaluate_dataset(x._for_fit("evaluate"))
        else:
            logs = self._native.evaluate(
                _inputs(x, "evaluate's x"), _tensor(y, "evaluate's y"), int(batch_size or 32)
            )
        if return_dict:
            return dict(logs)
        order = ["loss"] + [m for m in self._metric_names if m in logs]
        order += sorted(k for k in logs if k not in order)
        values = [float(logs[k]) for k in order]
        return values[0] if len(values) == 1 else values

    def predict(
        self,
        x: Any,
        batch_size: Optional[int] = None,
        verbose: Union[str, int] = "auto",
        **unsupported: Any,
    ) -> np.ndarray:
        if unsupported:
            missing(f"tf.keras.Model.predict({', '.join(unsupported)}=...)")
        self._build_from(x)
        return self._native.predict(_inputs(x, "predict's x"), int(batch_size or 32)).numpy()

    def train_on_batch(self, x: Any, y: Any) -> Dict[str, float]:
        return dict(self._native.train_on_batch(_inputs(x, "x"), _tensor(y, "y")))

    # ---- saving ----
    def save(
        self,
        filepath: Union[str, os.PathLike],
        overwrite: bool = True,
        save_format: Optional[str] = None,
        **unsupported: Any,
    ) -> None:
        """A .keras file (TensorFlow's tf.keras.models.load_model opens it), or a folder."""
        if unsupported:
            missing(f"tf.keras.Model.save({', '.join(unsupported)}=...)")
        path = os.fspath(filepath)
        if not overwrite and os.path.exists(path):
            raise FileExistsError(f"save: {path} exists and overwrite=False")
        if path.endswith(".h5") or save_format == "h5":
            missing("saving a model as .h5 (legacy HDF5); save as .keras")
        if path.endswith(".keras"):
            self._native.export_keras(path)
        else:
            self._native.save(path)

    def to_json(self, **kwargs: Any) -> str:
        """The model as Keras describes it (a Functional model of Keras' layers), which
        TensorFlow's tf.keras.models.model_from_json reads."""
        text: str = self._native.to_json()
        return json.dumps(json.loads(text), **kwargs) if kwargs else text


class Sequential(Model):
    """tf.keras.Sequential: a stack of layers, built from the first layer's input_shape or the
    first batch it sees."""

    def __init__(self, layers: Optional[Sequence[Any]] = None, name: Optional[str] = None) -> None:
        self._setup(_native.Sequential([], name or ""))
        for layer in layers or []:
            self.add(layer)

    def add(self, layer: Any) -> None:
        if isinstance(layer, _native.SymbolicTensor):
            self.build([None] + list(layer.shape))
            return
        if not isinstance(layer, Layer):
            missing(f"adding a {type(layer).__name__} to a Sequential model")
        first = not self._native.layers
        self._native.add(layer._native)
        if first and layer._input_shape is not None:
            self._native.build(list(layer._input_shape), "float32")

    def pop(self) -> None:
        missing("tf.keras.Sequential.pop")


def load_model(
    filepath: Union[str, os.PathLike],
    custom_objects: Any = None,
    compile: bool = True,
    **unsupported: Any,
) -> Model:
    """A model from a .keras file (TensorFlow's or Tandem's), a Keras JSON file or a folder that
    Model.save wrote. The model is not compiled: compile it to train it."""
    if custom_objects:
        missing("tf.keras.models.load_model(custom_objects=...)")
    if unsupported:
        missing(f"tf.keras.models.load_model({', '.join(unsupported)}=...)")
    return Model._wrap(_native.load_model(os.fspath(filepath)))


def model_from_json(json_string: str, custom_objects: Any = None) -> Model:
    """A model, with fresh weights, from what model.to_json() wrote (here or in TensorFlow)."""
    if custom_objects:
        missing("tf.keras.models.model_from_json(custom_objects=...)")
    return Model._wrap(_native.model_from_json(json_string))


__getattr__ = module_getattr("tf.keras.models")
