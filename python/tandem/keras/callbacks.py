"""tf.keras.callbacks: Python subclasses of Callback, and Tandem's own callbacks by Keras' names.

A Python callback's hooks run with the GIL held between steps; its batch hooks are called only
when the subclass defines them, so a callback that watches epochs costs the steps nothing.
"""

from __future__ import annotations

import shutil
from typing import Any, Callable, Dict, List, Optional, Tuple

from tandem import _native
from tandem._unsupported import missing, module_getattr


class Callback:
    """Base of callbacks written in Python; override the hooks you need."""

    def __init__(self) -> None:
        self.model: Any = None
        self.params: Dict[str, Any] = {}

    def set_model(self, model: Any) -> None:
        self.model = model

    def set_params(self, params: Dict[str, Any]) -> None:
        self.params = dict(params)

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        pass

    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None:
        pass

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        pass

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        pass

    def on_train_batch_begin(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        pass

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None:
        pass


class History(Callback):
    """What fit returns: ``history`` maps each log ("loss", "val_accuracy") to its epochs."""

    def __init__(self) -> None:
        super().__init__()
        self.history: Dict[str, List[float]] = {}
        self.epoch: List[int] = []

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None:
        self.history, self.epoch = {}, []

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))

    @classmethod
    def _of_fit(cls, fitted: Any, model: Any) -> History:
        """What fit returns, from the history the library kept while it trained."""
        history = cls()
        history.set_model(model)
        history.history = {key: list(values) for key, values in fitted.history.items()}
        history.epoch = list(fitted.epoch)
        return history


class LearningRateScheduler(Callback):
    """Sets the optimizer's rate at each epoch's start to ``schedule(epoch, rate)``."""

    def __init__(self, schedule: Callable[..., float], verbose: int = 0) -> None:
        super().__init__()
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        optimizer = self.model.optimizer
        try:
            rate = self.schedule(epoch, optimizer.learning_rate)
        except TypeError:
            rate = self.schedule(epoch)  # Keras accepts schedule(epoch) too
        optimizer.learning_rate = float(rate)
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {rate}.")


class LambdaCallback(Callback):
    """A callback from functions: on_epoch_end=lambda epoch, logs: ..., and so on."""

    def __init__(self, **hooks: Callable[..., None]) -> None:
        super().__init__()
        for name, function in hooks.items():
            if not hasattr(Callback, name) or not name.startswith("on_"):
                raise TypeError(f"LambdaCallback: unknown hook {name!r}")
            setattr(self, name, function)


class NativeCallback:
    """A callback Tandem runs in C++ during fit, without the GIL."""

    _native: Any


class EarlyStopping(NativeCallback):
    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int = 0,
        verbose: int = 0,
        mode: str = "auto",
        baseline: Any = None,
        restore_best_weights: bool = False,
        start_from_epoch: int = 0,
    ) -> None:
        if baseline is not None or start_from_epoch != 0:
            missing("tf.keras.callbacks.EarlyStopping(baseline=/start_from_epoch=)")
        self._native = _native.EarlyStopping(
            monitor, float(min_delta), int(patience), mode, bool(restore_best_weights)
        )
        self.verbose = int(verbose)

    def _after_fit(self) -> None:
        """Keras' verbose line once training stopped early."""
        if self.verbose > 0 and self._native.stopped_epoch >= 0:
            print(f"Epoch {self._native.stopped_epoch + 1}: early stopping")

    @property
    def stopped_epoch(self) -> int:
        """The epoch after which training stopped, from 0; 0 when it ran to the end (Keras)."""
        return max(self._native.stopped_epoch, 0)


class TerminateOnNaN(NativeCallback):
    def __init__(self) -> None:
        self._native = _native.TerminateOnNaN()


class TensorBoard(NativeCallback):
    """Event files TensorBoard reads: <log_dir>/train and <log_dir>/validation, as Keras writes."""

    def __init__(
        self,
        log_dir: str = "logs",
        histogram_freq: int = 0,
        write_graph: bool = True,
        write_images: bool = False,
        write_steps_per_second: bool = False,
        update_freq: Any = "epoch",
        profile_batch: Any = 0,
        embeddings_freq: int = 0,
        embeddings_metadata: Any = None,
    ) -> None:
        if write_images or embeddings_freq or embeddings_metadata or profile_batch not in (0, None):
            missing("tf.keras.callbacks.TensorBoard(write_images=/profile_batch=/embeddings_*)")
        steps = (
            0
            if update_freq in ("epoch", None)
            else (1 if update_freq == "batch" else int(update_freq))
        )
        self._native = _native.TensorBoard(str(log_dir), int(histogram_freq), steps)


class ModelCheckpoint(Callback):
    """Saves the model at the end of every epoch (or only when ``monitor`` improves) to
    ``filepath``, which may name the epoch and logs: "ckpt-{epoch:02d}-{val_loss:.2f}.keras".
    A path ending in .keras is a Keras file TensorFlow opens; any other is a saved-model folder."""

    def __init__(
        self,
        filepath: Any,
        monitor: str = "val_loss",
        verbose: int = 0,
        save_best_only: bool = False,
        save_weights_only: bool = False,
        mode: str = "auto",
        save_freq: Any = "epoch",
        initial_value_threshold: Optional[float] = None,
    ) -> None:
        super().__init__()
        if save_weights_only:
            missing("tf.keras.callbacks.ModelCheckpoint(save_weights_only=True)")
        if save_freq != "epoch":
            missing("tf.keras.callbacks.ModelCheckpoint(save_freq=<steps>)")
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"ModelCheckpoint: mode {mode!r} is none of auto, min, max")
        self.filepath, self.monitor, self.verbose = str(filepath), monitor, verbose
        self.save_best_only = save_best_only
        self._maximize = mode == "max" or (mode == "auto" and "acc" in monitor)
        self.best: Optional[float] = initial_value_threshold

    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None:
        logs = dict(logs or {})
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            value = logs.get(self.monitor)
            if value is None:
                raise KeyError(
                    f"ModelCheckpoint: monitor {self.monitor!r} is not among the logs "
                    f"({', '.join(sorted(logs))}); give one of them"
                )
            improved = self.best is None or (
                value > self.best if self._maximize else value < self.best
            )
            if not improved:
                return
            self.best = value
        self.model.save(path)
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: saving model to {path}")


class BackupAndRestore(NativeCallback):
    """Backs the run up in ``backup_dir`` at every epoch's end (weights, optimizer state, where
    training is) and, when fit starts with a backup there, restores it and goes on from the epoch
    after it. The backup is deleted when fit ends normally (``delete_checkpoint``)."""

    def __init__(
        self,
        backup_dir: str,
        save_freq: Any = "epoch",
        delete_checkpoint: bool = True,
        save_before_preemption: bool = False,
    ) -> None:
        if save_freq != "epoch" or save_before_preemption:
            missing(
                "tf.keras.callbacks.BackupAndRestore(save_freq=<steps>/save_before_preemption=True)"
            )
        self.backup_dir = str(backup_dir)
        self.delete_checkpoint = delete_checkpoint
        self._native = _native.BackupWriter(self.backup_dir)

    def _restore(self, model: Any) -> Optional[Tuple[int, int]]:
        position = _native.restore_backup(model._native, self.backup_dir)
        return None if position is None else (int(position[0]), int(position[1]))

    def _finished(self) -> None:
        if self.delete_checkpoint:
            shutil.rmtree(self.backup_dir, ignore_errors=True)


__getattr__ = module_getattr("tf.keras.callbacks")
