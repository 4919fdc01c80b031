// Layers, models and training for tandem.keras: layers made from their Keras arguments
// (io::keras_layer, as Keras model files are read), Sequential and functional models, compile, fit,
// evaluate and predict with the GIL released, and Python callbacks that take it back.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <memory>
#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>
#include <variant>

#include "python/bindings.h"
#include "tandem/io.h"
#include "tandem/mixed_precision.h"
#include "tandem/nn.h"
#include "tandem/observe.h"
#include "tandem/pipeline.h"
#include "tandem/train.h"

namespace tandem::python {
namespace {

nb::dict logs_dict(const train::Logs& logs) {
  nb::dict dict;
  for (const auto& [key, value] : logs)
    dict[key.c_str()] = value;
  return dict;
}

// A tandem.keras.callbacks.Callback written in Python, called with the GIL held. Batch hooks are
// called only when the Python class overrides them, so a callback that watches epochs costs the
// steps nothing; logs are read at a batch end only for such a hook.
class PythonCallback final : public train::Callback {
 public:
  PythonCallback(nb::object callback, bool batch_begin, bool batch_end)
      : callback_(held_under_gil(std::move(callback))),
        batch_begin_(batch_begin),
        batch_end_(batch_end) {}

  bool reads_weights_at_batch_end() const override { return batch_end_; }
  bool reads_logs_at_batch_end(std::int64_t) const override { return batch_end_; }
  void on_train_begin(const train::Logs& logs) override { call("on_train_begin", logs); }
  void on_train_end(const train::Logs& logs) override { call("on_train_end", logs); }
  void on_epoch_begin(int epoch, const train::Logs& logs) override {
    call("on_epoch_begin", logs, epoch);
  }
  void on_epoch_end(int epoch, const train::Logs& logs) override {
    call("on_epoch_end", logs, epoch);
  }
  void on_train_batch_begin(std::int64_t batch, const train::Logs& logs) override {
    if (batch_begin_) call("on_train_batch_begin", logs, batch);
  }
  void on_train_batch_end(std::int64_t batch, const train::Logs& logs) override {
    if (batch_end_) call("on_train_batch_end", logs, batch);
  }

 private:
  // An exception in the callback stops fit with it (nanobind gives it back to Python as it was).
  template <typename... Position>
  void call(const char* hook, const train::Logs& logs, Position... position) {
    nb::gil_scoped_acquire gil;
    callback_->attr(hook)(position..., logs_dict(logs));
  }

  std::shared_ptr<nb::object> callback_;
  bool batch_begin_;
  bool batch_end_;
};

// Ctrl-C during fit. Python's handler only marks the signal while the GIL is released; Python
// acts on it when it next runs. Taking the GIL at every step to ask would make each step wait for
// any busy Python thread (up to the 5 ms switch interval), so while fits run, SIGINT goes first to
// a handler that notes it (an atomic flag) and then calls Python's. At a step's end a fit that
// finds the flag takes the GIL and lets Python run its handlers; on KeyboardInterrupt (or whatever
// a handler raised) it keeps the error and asks fit to stop after this step; fit then returns with
// the model intact and the error is raised in the caller. Where SIGINT is not Python's (ignored,
// or the default that ends the process), nothing is installed and it behaves as before.
std::atomic<bool> sigint_seen{false};
std::mutex sigint_mutex;
int sigint_watchers = 0;
struct sigaction python_sigint {};

extern "C" void note_sigint(int signal) {
  sigint_seen.store(true);
  python_sigint.sa_handler(signal);
}

class InterruptWatch final : public train::Callback {
 public:
  InterruptWatch() {
    std::lock_guard lock(sigint_mutex);
    if (sigint_watchers++ > 0) return;
    struct sigaction current {};
    sigaction(SIGINT, nullptr, &current);
    const bool python_handles = (current.sa_flags & SA_SIGINFO) == 0 &&
                                current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN;
    if (!python_handles) return;
    python_sigint = current;
    struct sigaction noting = current;
    noting.sa_handler = note_sigint;
    sigaction(SIGINT, &noting, nullptr);
  }
  ~InterruptWatch() override {
    {
      std::lock_guard lock(sigint_mutex);
      if (--sigint_watchers == 0 && python_sigint.sa_handler != nullptr) {
        sigaction(SIGINT, &python_sigint, nullptr);
        python_sigint = {};
      }
    }
    if (error_) {
      nb::gil_scoped_acquire gil;
      error_.reset();
    }
  }
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;

  bool reads_weights_at_batch_end() const override { return false; }
  bool reads_logs_at_batch_end(std::int64_t) const override { return false; }
  void on_train_batch_end(std::int64_t, const train::Logs&) override { check(); }
  void on_epoch_end(int, const train::Logs&) override { check(); }

  // Raises the kept error in the calling thread (which holds the GIL).
  void raise_if_interrupted() {
    if (error_) {
      std::unique_ptr<nb::python_error> error = std::move(error_);
      throw *error;
    }
  }

 private:
  void check() {
    if (error_ || !sigint_seen.exchange(false)) return;
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      error_ = std::make_unique<nb::python_error>();
      model()->set_stop_training(true);
    }
  }

  std::unique_ptr<nb::python_error> error_;
};

std::vector<std::shared_ptr<train::Callback>> native_callbacks(const nb::list& callbacks) {
  std::vector<std::shared_ptr<train::Callback>> natives;
  for (nb::handle callback : callbacks) {
    if (nb::isinstance<train::Callback>(callback)) {
      natives.push_back(nb::cast<std::shared_ptr<train::Callback>>(callback));
    } else {
      const nb::object base = nb::module_::import_("tandem.keras.callbacks").attr("Callback");
      auto overrides = [&](const char* hook) {
        return !callback.type().attr(hook).is(base.attr(hook));
      };
      natives.push_back(std::make_shared<PythonCallback>(nb::borrow(callback),
                                                         overrides("on_train_batch_begin"),
                                                         overrides("on_train_batch_end")));
    }
  }
  return natives;
}

// Text for Python's sys.stdout, written there (under the GIL) whenever the stream is flushed:
// Keras prints its progress bar to sys.stdout, so a notebook shows it in the cell's output and a
// redirection (contextlib.redirect_stdout, pytest's capture) catches it.
class PythonStdout final : public std::streambuf {
 protected:
  int overflow(int c) override {
    if (c != traits_type::eof()) pending_.push_back(static_cast<char>(c));
    return c;
  }
  std::streamsize xsputn(const char* text, std::streamsize count) override {
    pending_.append(text, static_cast<std::size_t>(count));
    return count;
  }
  int sync() override {
    if (pending_.empty()) return 0;
    nb::gil_scoped_acquire gil;
    try {
      const nb::object out = nb::module_::import_("sys").attr("stdout");
      out.attr("write")(pending_);
      out.attr("flush")();
    } catch (const nb::python_error&) {
      pending_.clear();
      return -1;  // a closed or broken sys.stdout: the bar is lost, training goes on
    }
    pending_.clear();
    return 0;
  }

 private:
  std::string pending_;
};

// Whether the bar redraws in place, as Keras decides: on a terminal, and in a Jupyter kernel
// (whose output area honours carriage returns).
bool dynamic_display() {
  const nb::module_ sys = nb::module_::import_("sys");
  bool terminal = false;
  try {
    terminal = nb::cast<bool>(sys.attr("stdout").attr("isatty")());
  } catch (const nb::python_error&) {
  }
  return terminal || nb::cast<bool>(sys.attr("modules").attr("__contains__")("ipykernel"));
}

// fit's options from Keras' arguments, with the progress bar drawn to sys.stdout, the Python
// callbacks and the Ctrl-C watch; the data (tensors or a dataset) is the caller's.
struct FitCall {
  PythonStdout stdout_buffer;
  std::ostream stdout_stream{&stdout_buffer};
  train::FitOptions options;
  std::shared_ptr<InterruptWatch> interrupts = std::make_shared<InterruptWatch>();

  FitCall(int epochs, int verbose, const nb::list& callbacks, int initial_epoch,
          std::int64_t initial_step) {
    options.epochs = epochs;
    options.verbose = 0;  // the library's own bar writes to std::cout, which Python never sees
    options.callbacks = native_callbacks(callbacks);
    if (verbose > 0) {
      options.callbacks.push_back(
          std::make_shared<train::ProgressBar>(verbose, &stdout_stream, dynamic_display()));
    }
    options.callbacks.push_back(interrupts);
    options.initial_epoch = initial_epoch;
    options.initial_step = initial_step;
  }

  template <typename Fit>
  train::History run(Fit&& fit) {
    train::History history;
    {
      nb::gil_scoped_release released;
      history = fit(options);
    }
    stdout_stream.flush();
    interrupts->raise_if_interrupted();
    return history;
  }
};

train::History fit_tensors(nn::Model& model, const Tensor& x, const Tensor& y,
                           std::optional<std::int64_t> batch_size, int epochs, int verbose,
                           const nb::list& callbacks, double validation_split,
                           const std::optional<data::Pipeline>& validation, bool shuffle,
                           std::uint64_t seed, int initial_epoch, std::int64_t initial_step) {
  FitCall call(epochs, verbose, callbacks, initial_epoch, initial_step);
  call.options.batch_size = batch_size;
  call.options.validation_split = validation_split;
  call.options.validation_data = validation ? &*validation : nullptr;
  call.options.shuffle = shuffle;
  call.options.seed = seed;
  return call.run([&](const train::FitOptions& options) { return model.fit(x, y, options); });
}

train::History fit_dataset(nn::Model& model, const data::Pipeline& dataset, int epochs, int verbose,
                           const nb::list& callbacks,
                           const std::optional<data::Pipeline>& validation, int initial_epoch,
                           std::int64_t initial_step) {
  FitCall call(epochs, verbose, callbacks, initial_epoch, initial_step);
  call.options.validation_data = validation ? &*validation : nullptr;
  return call.run([&](const train::FitOptions& options) { return model.fit(dataset, options); });
}

}  // namespace

void bind_models(nb::module_& module) {
  nb::class_<nn::SymbolicTensor>(module, "SymbolicTensor")
      .def_prop_ro("shape", &nn::SymbolicTensor::shape)
      .def_prop_ro("dtype_name",
                   [](const nn::SymbolicTensor& x) { return tf_dtype_name(x.dtype()); });
  module.def(
      "Input",
      [](const std::vector<std::int64_t>& shape, const std::string& dtype,
         const std::string& name) { return nn::Input(shape, dtype_from_tf_name(dtype), name); },
      nb::arg("shape"), nb::arg("dtype"), nb::arg("name"));

  nb::class_<nn::Layer>(module, "Layer")
      .def_prop_ro("name", &nn::Layer::name)
      .def_prop_ro("class_name", [](const nn::Layer& layer) { return layer.impl().class_name(); })
      .def_prop_ro("built", &nn::Layer::built)
      .def_prop_rw("trainable", &nn::Layer::trainable, &nn::Layer::set_trainable)
      .def_prop_ro("weights", &nn::Layer::weights)
      .def_prop_ro("trainable_weights", &nn::Layer::trainable_weights)
      .def_prop_ro("non_trainable_weights", &nn::Layer::non_trainable_weights)
      .def("set_weights", &nn::Layer::set_weights)
      .def("with_dtype_policy", &nn::Layer::with_dtype_policy)
      .def("call_tensor", [](const nn::Layer& layer, const Tensor& x,
                             bool training) { return layer(x, training); })
      .def("call_symbolic",
           [](const nn::Layer& layer, const std::vector<nn::SymbolicTensor>& inputs) {
             return inputs.size() == 1 ? layer(inputs[0]) : layer(inputs);
           });
  module.def("keras_layer", &io::keras_layer, nb::arg("class_name"), nb::arg("name"),
             nb::arg("config_json"), nb::arg("where"));
  module.def("clear_session", &nn::clear_session);
  // keras.mixed_precision's global policy, by name ("" while none is set).
  module.def("set_global_policy",
             [](const std::string& name) { mixed_precision::set_global_policy(name); });
  module.def("global_policy", [] {
    const std::optional<mixed_precision::Policy> policy = mixed_precision::global_policy();
    return policy ? policy->name() : std::string();
  });
  module.def("policy_dtypes", [](const std::string& name) {
    const mixed_precision::Policy policy(name);
    return nb::make_tuple(tf_dtype_name(policy.compute_dtype()),
                          tf_dtype_name(policy.variable_dtype()));
  });

  nb::class_<train::History>(module, "FitHistory")
      .def_prop_ro("history", &train::History::history)
      .def_prop_ro("epoch", &train::History::epochs)
      .def_prop_ro("samples_per_sec", &train::History::samples_per_sec);

  nb::class_<train::Callback>(module, "NativeCallback");
  nb::class_<train::EarlyStopping, train::Callback>(module, "EarlyStopping")
      .def(nb::init<std::string, double, int, std::string, bool>(), nb::arg("monitor"),
           nb::arg("min_delta"), nb::arg("patience"), nb::arg("mode"),
           nb::arg("restore_best_weights"))
      .def_prop_ro("stopped_epoch", &train::EarlyStopping::stopped_epoch)
      .def_prop_ro("best", &train::EarlyStopping::best);
  nb::class_<train::TerminateOnNaN, train::Callback>(module, "TerminateOnNaN").def(nb::init<>());
  nb::class_<observe::TensorBoard, train::Callback>(module, "TensorBoard")
      .def("__init__", [](observe::TensorBoard* self, const std::string& log_dir,
                          int histogram_freq, std::int64_t update_freq) {
        observe::TensorBoardOptions options;
        options.log_dir = log_dir;
        options.histogram_freq = histogram_freq;
        options.update_freq = update_freq;
        new (self) observe::TensorBoard(std::move(options));
      });
  nb::class_<train::Optimizer>(module, "Optimizer")
      .def_prop_ro("name", &train::Optimizer::name)
      .def_prop_ro("iterations", &train::Optimizer::iterations)
      .def_prop_rw(
          "learning_rate", &train::Optimizer::learning_rate,
          [](train::Optimizer& optimizer, double rate) { optimizer.set_learning_rate(rate); })
      .def("apply_gradients", &train::Optimizer::apply_gradients, nb::arg("gradients"),
           nb::arg("variables"));
  // A learning rate as Keras takes one: a number or a schedule object.
  using Rate = std::variant<double, std::shared_ptr<train::LearningRateSchedule>>;
  const auto learning_rate = [](const Rate& rate) {
    if (const auto* value = std::get_if<double>(&rate)) return train::LearningRate(*value);
    return train::LearningRate(std::shared_ptr<const train::LearningRateSchedule>(
        std::get<std::shared_ptr<train::LearningRateSchedule>>(rate)));
  };
  nb::class_<train::LearningRateSchedule>(module, "LearningRateSchedule")
      .def("__call__", &train::LearningRateSchedule::operator(), nb::arg("step"));
  module.def("cosine_decay", [](double initial, std::int64_t decay_steps, double alpha,
                                std::int64_t warmup_steps, double warmup_target) {
    std::shared_ptr<train::LearningRateSchedule> schedule;
    if (warmup_steps == 0) {
      schedule = std::make_shared<train::CosineDecay>(initial, decay_steps, alpha);
    } else {
      // Keras: from the initial rate up to warmup_target over warmup_steps, then the cosine
      // from warmup_target.
      schedule = std::make_shared<train::LinearWarmup>(
          train::CosineDecay(warmup_target, decay_steps, alpha), warmup_steps, initial);
    }
    return schedule;
  });
  module.def("step_decay", [](double initial, std::int64_t step_size, double decay_rate) {
    return std::shared_ptr<train::LearningRateSchedule>(
        std::make_shared<train::StepDecay>(initial, step_size, decay_rate));
  });
  module.def(
      "Adam",
      [learning_rate](const Rate& rate, double beta_1, double beta_2, double epsilon) {
        return std::shared_ptr<train::Optimizer>(
            std::make_shared<train::Adam>(learning_rate(rate), beta_1, beta_2, epsilon));
      },
      nb::arg("learning_rate"), nb::arg("beta_1"), nb::arg("beta_2"), nb::arg("epsilon"));
  module.def(
      "SGD",
      [learning_rate](const Rate& rate, double momentum, bool nesterov) {
        return std::shared_ptr<train::Optimizer>(
            std::make_shared<train::SGD>(learning_rate(rate), momentum, nesterov));
      },
      nb::arg("learning_rate"), nb::arg("momentum"), nb::arg("nesterov"));

  nb::class_<train::Loss>(module, "Loss").def_prop_ro("name", &train::Loss::name);
  module.def("loss_from_name", [](const std::string& name, bool from_logits) {
    if (name == "sparse_categorical_crossentropy") {
      return std::shared_ptr<train::Loss>(
          std::make_shared<train::SparseCategoricalCrossentropy>(from_logits));
    }
    if (name == "categorical_crossentropy") {
      return std::shared_ptr<train::Loss>(
          std::make_shared<train::CategoricalCrossentropy>(from_logits));
    }
    if (from_logits) {
      throw InvalidArgument("loss '" + name +
                            "' takes no from_logits; only the "
                            "cross-entropies do");
    }
    return train::Loss::from_name(name);
  });
  module.def("loss_value", [](const train::Loss& loss, const Tensor& y_true, const Tensor& y_pred) {
    return loss(y_true, y_pred);
  });

  nb::class_<nn::Model>(module, "Model")
      .def_prop_ro("name", &nn::Model::name)
      .def_prop_ro("built", &nn::Model::built)
      .def_prop_ro("compiled", &nn::Model::compiled)
      .def_prop_ro("input_shape", &nn::Model::input_shape)
      .def_prop_ro("output_shape", &nn::Model::output_shape)
      .def_prop_ro("layers", &nn::Model::layers)
      .def_prop_ro("weights", &nn::Model::weights)
      .def_prop_ro("trainable_weights", &nn::Model::trainable_weights)
      .def_prop_ro("non_trainable_weights", &nn::Model::non_trainable_weights)
      .def_prop_rw("stop_training", &nn::Model::stop_training, &nn::Model::set_stop_training)
      .def("get_layer", &nn::Model::get_layer)
      .def("count_params", &nn::Model::count_params)
      .def("summary_string", &nn::Model::summary_string)
      .def("build",
           [](nn::Model& model, const std::vector<std::int64_t>& input_shape,
              const std::string& dtype) { model.build(input_shape, dtype_from_tf_name(dtype)); })
      .def("call",
           [](nn::Model& model, const Tensor& x, bool training) {
             nb::gil_scoped_release released;
             return model.call(x, training);
           })
      .def(
          "compile",
          [](nn::Model& model, std::shared_ptr<train::Optimizer> optimizer,
             std::shared_ptr<train::Loss> loss, const std::vector<std::string>& metrics,
             std::optional<bool> jit_compile) {
            train::CompileOptions options;
            options.optimizer = std::move(optimizer);
            options.loss = std::move(loss);
            for (const std::string& metric : metrics)
              options.metrics.emplace_back(metric);
            options.jit_compile = jit_compile;
            model.compile(options);
          },
          nb::arg("optimizer"), nb::arg("loss"), nb::arg("metrics"), nb::arg("jit_compile"))
      .def_prop_ro(
          "optimizer", [](const nn::Model& model) { return &model.optimizer(); },
          nb::rv_policy::reference_internal)
      .def("fit", &fit_tensors, nb::arg("x"), nb::arg("y"), nb::arg("batch_size"),
           nb::arg("epochs"), nb::arg("verbose"), nb::arg("callbacks"), nb::arg("validation_split"),
           nb::arg("validation").none(), nb::arg("shuffle"), nb::arg("seed"),
           nb::arg("initial_epoch"), nb::arg("initial_step"))
      .def("fit_dataset", &fit_dataset, nb::arg("dataset"), nb::arg("epochs"), nb::arg("verbose"),
           nb::arg("callbacks"), nb::arg("validation").none(), nb::arg("initial_epoch"),
           nb::arg("initial_step"))
      .def("evaluate",
           [](nn::Model& model, const Tensor& x, const Tensor& y, std::int64_t batch_size) {
             nb::gil_scoped_release released;
             return model.evaluate(x, y, batch_size);
           })
      .def("evaluate_dataset",
           [](nn::Model& model, const data::Pipeline& dataset) {
             nb::gil_scoped_release released;
             return model.evaluate(dataset);
           })
      .def("predict",
           [](nn::Model& model, const Tensor& x, std::int64_t batch_size) {
             nb::gil_scoped_release released;
             return model.predict(x, batch_size);
           })
      .def("train_on_batch",
           [](nn::Model& model, const Tensor& x, const Tensor& y) {
             nb::gil_scoped_release released;
             return model.train_on_batch(x, y);
           })
      .def("save",
           [](const nn::Model& model, const std::string& directory) { model.save(directory); })
      .def("export_keras",
           [](const nn::Model& model, const std::string& path) { io::export_keras(model, path); })
      .def("to_json", [](const nn::Model& model) { return io::keras_json(model); });
  nb::class_<nn::Sequential, nn::Model>(module, "Sequential")
      .def(nb::init<std::vector<nn::Layer>, const std::string&>(), nb::arg("layers"),
           nb::arg("name"))
      .def("add", &nn::Sequential::add);
  module.def(
      "functional",
      [](const nn::SymbolicTensor& inputs, const nn::SymbolicTensor& outputs,
         const std::string& name) { return nn::Model(inputs, outputs, name); },
      nb::arg("inputs"), nb::arg("outputs"), nb::arg("name"));
  // A folder Model::save wrote, a .keras file (with its weights) or a Keras JSON description
  // (model.to_json(), config.json: fresh weights).
  // Keras' BackupAndRestore over Tandem's checkpoints (weights, optimizer state, the epoch's
  // position): the newest backup in `directory` restored into `model`, giving where fit goes on
  // from (None when there is none), and the callback that writes one at every epoch's end.
  module.def("restore_backup", [](nn::Model& model, const std::string& directory) -> nb::object {
    if (!io::latest_checkpoint(directory)) return nb::none();
    const io::CheckpointInfo info = io::restore_checkpoint(directory, model);
    return nb::make_tuple(info.position.epoch, info.position.batch);
  });
  nb::class_<io::ModelCheckpoint, train::Callback>(module, "BackupWriter")
      .def("__init__", [](io::ModelCheckpoint* self, const std::string& directory) {
        io::ModelCheckpointOptions options;
        options.checkpoint.keep_last = 1;
        // On disk before the next epoch starts, as Keras writes its backups: a failure right
        // after an epoch's end loses nothing of it.
        options.checkpoint.async = false;
        new (self) io::ModelCheckpoint(directory, std::move(options));
      });
  module.def("model_from_json",
             [](const std::string& text) { return io::keras_model_from_json(text).model; });
  module.def("load_model", [](const std::string& path) {
    if (std::filesystem::is_directory(path)) return io::load_model(path);
    nn::Model model = io::load_keras_model(path).model;
    if (path.ends_with(".keras")) io::load_keras_weights(model, path);
    return model;
  });
}

}  // namespace tandem::python
