"""tf.data: input pipelines over Tandem's (data::Pipeline), run on its threads.

Elements keep TensorFlow's structure: a tensor, a tuple (``(features, labels)`` for fit) or a
dict. A ``map`` function written in Python runs on the pipeline's threads under the GIL, one at a
time however many ``num_parallel_calls`` it is given; the stages of Tandem's own (batch, shuffle,
prefetch, cache, the readers) run without the GIL, in parallel with the Python that consumes them.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Iterator, Optional

import numpy as np

from tandem import _native
from tandem._tensor import Tensor, constant, convert_to_tensor
from tandem._unsupported import missing, module_getattr

AUTOTUNE: int = _native.AUTOTUNE
INFINITE_CARDINALITY: int = _native.INFINITE_CARDINALITY
UNKNOWN_CARDINALITY: int = _native.UNKNOWN_CARDINALITY

_SINGLE = "value"
_seeds = itertools.count(1)


def _components(structure: Any) -> Dict[str, Tensor]:
    """An element's structure as named components: a tuple's items are t0, t1, ...; a dict's
    values are d:<key>; a lone tensor is "value"."""
    if isinstance(structure, tuple):
        if any(isinstance(item, (tuple, dict)) for item in structure):
            missing("tf.data elements nested deeper than a tuple or dict of tensors")
        return {f"t{i}": _as_tensor(item) for i, item in enumerate(structure)}
    if isinstance(structure, dict):
        return {f"d:{key}": _as_tensor(value) for key, value in structure.items()}
    return {_SINGLE: _as_tensor(structure)}


def _as_tensor(value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value
    return constant(value) if not isinstance(value, np.ndarray) else convert_to_tensor(value)


def _structure(components: Dict[str, Tensor]) -> Any:
    if _SINGLE in components:
        return components[_SINGLE]
    if all(name.startswith("d:") for name in components):
        return {name[2:]: value for name, value in components.items()}
    return tuple(components[f"t{i}"] for i in range(len(components)))


class Options:
    """tf.data.Options. Tandem's pipelines autotune always; no option is settable yet."""

    def __setattr__(self, name: str, value: Any) -> None:
        missing(f"tf.data.Options.{name}")


class Dataset:
    """tf.data.Dataset over a Tandem pipeline."""

    def __init__(self, pipeline: Any) -> None:
        self._pipeline = pipeline
        self._passes = itertools.count()

    # ---- sources ----
    @staticmethod
    def from_tensor_slices(tensors: Any, name: Optional[str] = None) -> Dataset:
        """Row i of every array (all share dimension 0): numpy arrays, tensors, a tuple or dict of
        them."""
        if isinstance(tensors, list):
            tensors = np.asarray(tensors)
        return Dataset(_native.Pipeline.from_tensor_slices(_components(tensors)))

    @staticmethod
    def list_files(file_pattern: Any, shuffle: Optional[bool] = None, seed: Any = None) -> Any:
        if shuffle:
            missing("tf.data.Dataset.list_files(shuffle=True)")
        patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
        return _renamed(_native.Pipeline.list_files(patterns), "path")

    # ---- stages ----
    def map(
        self,
        map_func: Callable[..., Any],
        num_parallel_calls: Optional[int] = None,
        deterministic: Optional[bool] = None,
        name: Optional[str] = None,
    ) -> Dataset:
        def on_components(components: Dict[str, Tensor]) -> Dict[str, Tensor]:
            element = _structure(components)
            result = map_func(*element) if isinstance(element, tuple) else map_func(element)
            return _components(result)

        label = name or getattr(map_func, "__name__", "python")
        return Dataset(
            self._pipeline.map(
                on_components,
                1 if num_parallel_calls is None else int(num_parallel_calls),
                True if deterministic is None else bool(deterministic),
                label,
            )
        )

    def shuffle(
        self,
        buffer_size: int,
        seed: Optional[int] = None,
        reshuffle_each_iteration: Optional[bool] = None,
        name: Optional[str] = None,
    ) -> Dataset:
        chosen = next(_seeds) if seed is None else int(seed)
        reshuffle = True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration)
        return Dataset(self._pipeline.shuffle(int(buffer_size), chosen, reshuffle))

    def batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_calls: Any = None,
        deterministic: Any = None,
        name: Optional[str] = None,
    ) -> Dataset:
        return Dataset(self._pipeline.batch(int(batch_size), bool(drop_remainder)))

    def prefetch(self, buffer_size: int, name: Optional[str] = None) -> Dataset:
        return Dataset(self._pipeline.prefetch(int(buffer_size)))

    def cache(self, filename: str = "", name: Optional[str] = None) -> Dataset:
        return Dataset(self._pipeline.cache(str(filename)))

    def repeat(self, count: Optional[int] = None, name: Optional[str] = None) -> Dataset:
        return Dataset(self._pipeline.repeat(-1 if count is None else int(count)))

    def take(self, count: int, name: Optional[str] = None) -> Dataset:
        return Dataset(self._pipeline.take(int(count)))

    def skip(self, count: int, name: Optional[str] = None) -> Dataset:
        return Dataset(self._pipeline.skip(int(count)))

    def shard(self, num_shards: int, index: int, name: Optional[str] = None) -> Dataset:
        return Dataset(self._pipeline.shard(int(num_shards), int(index)))

    def with_options(self, options: Options, name: Optional[str] = None) -> Dataset:
        return self  # an Options object refuses every setting, so there is nothing to apply

    # ---- running ----
    def cardinality(self) -> Tensor:
        return constant(self._pipeline.cardinality(), dtype="int64")

    def __len__(self) -> int:
        count = self._pipeline.cardinality()
        if count < 0:
            raise TypeError("the dataset's length is infinite or unknown")
        return int(count)

    def __iter__(self) -> Iterator[Any]:
        iterator = self._pipeline.start(next(self._passes))
        while (components := iterator.next()) is not None:
            yield _structure(components)

    def as_numpy_iterator(self) -> Iterator[Any]:
        for element in self:
            if isinstance(element, tuple):
                yield tuple(t.numpy() for t in element)
            elif isinstance(element, dict):
                yield {k: t.numpy() for k, t in element.items()}
            else:
                yield element.numpy()

    def _for_fit(self, what: str) -> Any:
        """The pipeline as fit reads it: elements (features, labels), batched."""
        return self._pipeline.with_keys("t0", "t1")

    def __repr__(self) -> str:
        return f"<Dataset {self._pipeline.describe()}>"


def _renamed(pipeline: Any, component: str) -> Dataset:
    def rename(components: Dict[str, Tensor]) -> Dict[str, Tensor]:
        return {_SINGLE: components[component]}

    return Dataset(pipeline.map(rename, 1, True, "element"))


def TFRecordDataset(filenames: Any, compression_type: Any = None, **unsupported: Any) -> Dataset:
    """tf.data.TFRecordDataset: the serialized records (gzip found by content, CRCs checked)."""
    if unsupported:
        missing(f"tf.data.TFRecordDataset({', '.join(unsupported)}=...)")
    files = [filenames] if isinstance(filenames, str) else list(filenames)
    return _renamed(_native.Pipeline.tfrecord(files), "record")


__getattr__ = module_getattr("tf.data")
