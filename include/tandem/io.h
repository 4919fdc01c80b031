#pragma once
// Getting models and training runs in and out of Tandem:
//
// - safetensors files (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
//   length, a JSON header {"name": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]},
//   "__metadata__": {...}} and the raw little-endian data; what the `safetensors` Python package,
//   PyTorch and Hugging Face read and write.
// - Checkpoints of a training run: a folder per checkpoint holding the weights and the optimizer
//   slots as safetensors and a JSON state (position, RNG states, metrics, loss scale, the run's
//   configuration, a CRC-32C per file). Written atomically and in the background; restoring one
//   and calling fit with its position continues the run exactly.
// - Saved models (model.save / load_model): the architecture as JSON and the weights.
// - ONNX export for serving, and import of PyTorch-written weights.
//
//   nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, 10);
//   model.compile({...});
//   auto checkpoints = std::make_shared<io::ModelCheckpoint>("runs/cnn",
//   io::ModelCheckpointOptions{
//       .every_steps = 500});
//   model.fit(data, {.epochs = 10, .callbacks = {checkpoints}});
//   ...after a crash, in a new process, the same model compiled the same way:
//   const io::CheckpointInfo resume = io::restore_checkpoint("runs/cnn", model);
//   model.fit(data, {.epochs = 10, .callbacks = {checkpoints},
//                    .initial_epoch = resume.position.epoch, .initial_step =
//                    resume.position.batch});
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tandem/nn.h"
#include "tandem/quantization.h"
#include "tandem/tensor.h"
#include "tandem/train.h"

namespace tandem::io {

// ---------------------------------------------------------------------------------------------
// safetensors
// ---------------------------------------------------------------------------------------------
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

struct Safetensors {
  NamedTensors tensors;  // in the order of their data in the file
  Metadata metadata;     // the header's __metadata__ (string to string)

  // The tensor called `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
};

// The metadata key under which Tandem records the CRC-32C of the data section (8 hex digits);
// loading checks it when present. Files from other writers simply lack it.
inline constexpr const char* kDataChecksumKey = "tandem.data_crc32c";

// The file's bytes. Tensors keep the given order; names must be unique and non-empty; the header
// is padded with spaces so the data starts 8-byte aligned.
std::vector<std::uint8_t> encode_safetensors(const NamedTensors& tensors,
                                             const Metadata& metadata = {});
// Parses and validates bytes that `what` names (a file) in errors: the header length against the
// size, well-formed JSON, known dtypes, shapes whose size matches the offsets, offsets that tile
// the data section without gaps or overlaps, and the data checksum when recorded. Throws IoError
// naming `what` and the problem.
Safetensors decode_safetensors(std::span<const std::uint8_t> bytes, const std::string& what);
// encode_safetensors written atomically (temporary file, fsync, rename, fsync of the folder).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});
Safetensors load_safetensors(const std::string& path);

// ---------------------------------------------------------------------------------------------
// Checkpoints
// ---------------------------------------------------------------------------------------------
// The settings of the run that wrote a checkpoint (e.g. the CLI's options); stored with it so a
// resumed run can check it continues the same run.
using RunConfig = std::map<std::string, std::string>;

// Where a training run stands: `epoch` is the epoch in progress (from 0) and `batch` the number of
// its batches already trained (a checkpoint taken at the end of epoch e says epoch e + 1, batch
// 0); `step` counts the batches trained in all.
struct TrainingPosition {
  int epoch = 0;
  std::int64_t batch = 0;
  std::int64_t step = 0;
  bool operator==(const TrainingPosition&) const = default;
};

// Per-epoch logs by key, as History::history() holds them: {"val_accuracy": [epoch 1, 2, ...]}.
using EpochHistory = std::map<std::string, std::vector<double>>;

struct CheckpointInfo {
  std::string path;  // the checkpoint's folder
  TrainingPosition position;
  std::int64_t steps_per_epoch = 0;  // the dataset's batches per epoch in the run that wrote it
  int epochs = 0;                    // the epochs that run was asked for
  train::Logs logs;                  // the logs when it was taken
  RunConfig config;
  // The logs of every epoch completed before it, so that a resumed run reports the whole run's
  // history, not only the epochs it trains itself.
  EpochHistory history;
};

struct CheckpointOptions {
  // The newest checkpoints kept; older ones are deleted once a newer one is complete (0 keeps
  // every checkpoint).
  int keep_last = 3;
  // A log key ("val_loss", "loss", "accuracy"): the best checkpoint by it is kept as well, even
  // when it is older than the last keep_last. Empty: none.
  std::string monitor;
  // "min", "max", or "auto": maximise keys containing "acc", minimise the rest (as Keras).
  std::string mode = "auto";
  // Write on a background thread: save() only copies the state, so training does not wait for
  // the disk.
  bool async = true;
  RunConfig config;
};

// Writes and prunes the checkpoints of one folder: <directory>/ckpt-<step>/ with
// model.safetensors, optimizer.safetensors and state.json. A checkpoint is written into a hidden
// temporary folder, every file fsynced, then renamed into place and the folder fsynced, so a crash
// (even SIGKILL) at any moment leaves complete checkpoints only. The folder is locked while the
// manager lives; leftovers of an interrupted write are removed when it opens.
class CheckpointManager {
 public:
  explicit CheckpointManager(std::string directory, CheckpointOptions options = {});
  // Finishes pending writes; a failure there is printed to stderr (call wait() to get it).
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Copies the model's state now (weights, optimizer slots, RNG states, the epoch's metrics) and
  // writes it, in the background when async. Throws the failure of an earlier background write
  // (a full disk, say); the checkpoints written before it stay intact.
  void save(nn::Model& model, const TrainingPosition& position, const train::Logs& logs,
            std::int64_t steps_per_epoch, int epochs, const EpochHistory& history = {});
  // Blocks until every write has finished; throws the first failure not reported yet.
  void wait();

  const std::string& directory() const;
  // The complete checkpoints, oldest first.
  std::vector<CheckpointInfo> checkpoints() const;
  std::optional<CheckpointInfo> latest() const;
  // The best by the monitored key, among those whose logs have it.
  std::optional<CheckpointInfo> best() const;
  // Seconds save() spent on the caller's thread (copying the state) and the writer spent on
  // the disk, in all: what asynchronous writing saves.
  double seconds_blocking() const;
  double seconds_writing() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The complete checkpoints under `directory`, oldest first (reads each state.json and checks its
// checksum; a folder whose state cannot be read is reported by verify_checkpoint, not here).
std::vector<CheckpointInfo> list_checkpoints(const std::string& directory);
// The newest complete checkpoint in `directory`, if any.
std::optional<CheckpointInfo> latest_checkpoint(const std::string& directory);
// `path` is a checkpoint folder (ckpt-<step>) or a folder of them (its newest). Reads the state
// only; throws IoError when there is none or the state is damaged.
CheckpointInfo read_checkpoint_info(const std::string& path);
// Reads every file of the checkpoint and checks it against its checksum and structure; throws
// IoError naming the file and the problem.
CheckpointInfo verify_checkpoint(const std::string& path);

// Restores a checkpoint (a checkpoint folder, or the newest in a folder of them) into a compiled
// model built like the one that wrote it: weights, optimizer slots and update count, the
// default and per-layer RNG states, the epoch's running loss and metrics, the loss scale. Every
// file and every tensor is checked before anything changes: a damaged file is an IoError naming
// it; a tensor the model lacks or has in another shape, or another optimizer, is an
// InvalidArgument naming each mismatch. Pass the returned position to fit as initial_epoch and
// initial_step.
CheckpointInfo restore_checkpoint(const std::string& path, nn::Model& model);

struct ModelCheckpointOptions {
  // Also checkpoint every this many training steps (0: only at the ends of epochs).
  std::int64_t every_steps = 0;
  // Checkpoint at the end of every epoch (after validation, so val_ logs can be monitored).
  bool every_epoch = true;
  CheckpointOptions checkpoint;
  // The epochs before this fit's (a resumed run's, from CheckpointInfo::history); each completed
  // epoch's logs are added, and every checkpoint records them.
  EpochHistory history;
};

// The Keras callback: checkpoints during fit into `directory` through a CheckpointManager, and at
// the end of training (waiting for the writes then, so fit returns with everything on disk and
// throws if a write failed).
class ModelCheckpoint final : public train::Callback {
 public:
  explicit ModelCheckpoint(std::string directory, ModelCheckpointOptions options = {});
  ~ModelCheckpoint() override;

  void on_train_begin(const train::Logs& logs) override;
  void on_epoch_begin(int epoch, const train::Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const train::Logs& logs) override;
  void on_epoch_end(int epoch, const train::Logs& logs) override;
  void on_train_end(const train::Logs& logs) override;
  // At the batch ends it checkpoints (every_steps); a run stopped in the middle of an epoch
  // ends it with on_epoch_end, whose logs are read.
  bool reads_logs_at_batch_end(std::int64_t batch) const override;

  // The manager during fit (nullptr before and after: the folder is unlocked when fit ends).
  CheckpointManager* manager() const { return manager_.get(); }
  // The checkpoints the last fit wrote, in order.
  const std::vector<TrainingPosition>& saved() const { return saved_; }
  // The last fit's CheckpointManager::seconds_blocking and seconds_writing.
  double seconds_blocking() const { return seconds_blocking_; }
  double seconds_writing() const { return seconds_writing_; }

 private:
  void save(const TrainingPosition& position, const train::Logs& logs);

  std::string directory_;
  ModelCheckpointOptions options_;
  std::unique_ptr<CheckpointManager> manager_;
  int epoch_ = 0;
  std::optional<std::int64_t> batches_done_;  // in the current epoch, once a batch has ended
  std::optional<TrainingPosition> last_position_;
  train::Logs last_logs_;
  EpochHistory history_;
  std::vector<TrainingPosition> saved_;
  double seconds_blocking_ = 0.0;
  double seconds_writing_ = 0.0;
};

// ---------------------------------------------------------------------------------------------
// Saved models
// ---------------------------------------------------------------------------------------------
// Reads what Model::save wrote: the architecture from model.json (Sequential or functional, every
// layer made by nn::make_layer) and the weights from model.safetensors, both checked against their
// checksums. The model is built and not compiled. Throws IoError naming the file and the problem.
nn::Model load_model(const std::string& directory);

// A Keras model description as TensorFlow 2.15 writes it: the JSON of model.to_json(), the
// config.json inside a .keras file, or the .keras file itself (its config.json is read; its
// weights load with load_keras_weights). Sequential and Functional models (one input, one output;
// shared layers and residual branches allowed) of the layers Tandem has, with Keras' names,
// arguments, defaults and initialisers, so the model has Keras' weights by count and name
// ("conv2d/kernel"). An unsupported layer class or argument value is an InvalidArgument naming the
// file, the layer and the argument. `input_shape` is used when the description has none (a
// Sequential never built in Keras).
struct KerasModel {
  nn::Model model;                     // built, not compiled
  bool outputs_probabilities = false;  // it ends in a softmax: the loss takes probabilities
  std::string class_name;              // "Sequential" or "Functional"
};
KerasModel load_keras_model(const std::string& path,
                            const std::optional<Shape>& input_shape = std::nullopt);
// The same from the text of model.to_json() (Keras' tf.keras.models.model_from_json).
KerasModel keras_model_from_json(const std::string& text);
// The model as Keras' model.to_json() describes it: a Functional model of Keras' layers, Tandem's
// names and arguments, that TensorFlow's model_from_json reads (export_keras's config.json).
std::string keras_json(const nn::Model& model);
// One layer from its Keras class name and config (a layer's "config" in model.to_json(), as JSON
// text), made as load_keras_model makes each layer: Keras' argument names and defaults, its dtype
// policy and trainable flag; an argument Tandem lacks is accepted only at Keras' default, else an
// InvalidArgument that starts with `where` and names the argument.
nn::Layer keras_layer(const std::string& class_name, const std::string& name,
                      const std::string& config_json, const std::string& where);

// A model to train, from what a run names (tandem train --model, RunConfig::model): a zoo image
// model (nn::zoo::image_model_names(), built for the data's images and classes), a Keras model
// description (model.to_json() or a config.json: fresh weights; a .keras file: with its
// weights) or a folder Model::save wrote (with its weights: training goes on from them).
struct ModelSource {
  nn::Model model;                     // built, not compiled
  bool outputs_probabilities = false;  // it ends in a softmax: the loss takes probabilities
  std::string description;             // "Keras Sequential 'cnn' from cnn.json (with its weights)"
};
// Throws ConfigError, naming the setting (key "model"), when the model does not take images of
// `image_shape` (H, W, C) or give one output per class.
ModelSource load_model_source(const std::string& source, const Shape& image_shape,
                              std::int64_t num_classes,
                              const SettingName& name = setting_identifier);
// Throws ConfigError unless `text` is a zoo image model or a path that exists.
void check_model_source(const std::string& name, const std::string& text);

// Writes a built f32 model as a .keras file that TensorFlow 2.15's tf.keras.models.load_model
// opens: a zip of metadata.json, config.json (a Functional model of Keras' layers with Tandem's
// names and arguments) and model.weights.h5 (HDF5, each layer's weights in Keras' order), written
// atomically. Throws InvalidArgument naming a layer Keras has no counterpart for, or a quantised
// or non-f32 model.
void export_keras(const nn::Model& model, const std::string& path);
// Loads the weights Keras wrote into the matching `model` (built), layer by layer by name: a
// .keras file's model.weights.h5, or an .h5 of model.save or model.save_weights. Throws IoError
// naming the file and the layer when a layer is missing or its weights differ in count or
// shape (and changes nothing then), or when the file is not one of these.
void load_keras_weights(nn::Model& model, const std::string& path);

// What a saved model says about itself, without loading the weights.
struct SavedModelInfo {
  std::string name;
  std::string class_name;  // "Sequential" or "Functional"
  Shape input_shape;       // without the batch dimension
  DType input_dtype = DType::f32;
  std::vector<std::string> class_names;  // as given to Model::save; may be empty
  std::string tandem_version;            // of the Tandem that wrote it
};
SavedModelInfo read_saved_model_info(const std::string& directory);

// The model's weights by name ("dense/kernel"); names must be unique.
NamedTensors named_weights(const nn::Model& model);

// ---------------------------------------------------------------------------------------------
// ONNX export
// ---------------------------------------------------------------------------------------------
struct OnnxExportOptions {
  int opset = 13;                // 13 or later (up to 17, what the ONNX library here knows)
  std::string producer_version;  // recorded as producer_version (default: Tandem's version)
  // Weight-only 16-bit export: the layers' weights stored as f16 or bf16, each Cast back to the
  // model's dtype in the graph (half the file; the computation stays f32 on rounded weights).
  // Unset: the model's own dtype.
  std::optional<DType> weight_dtype;
};
// Writes a built model as an ONNX model (opset 13+) that takes the model's NHWC input, named
// "input" with a symbolic batch dimension, and gives "output": convolutions run in NCHW with
// transposes at the edges, Dense as Gemm/MatMul, batch norm in inference form. The model is
// checked with the ONNX checker before it is written. A quantised model (tandem/quantization.h)
// is written in QDQ form: each quantised layer's input through QuantizeLinear and
// DequantizeLinear with its calibrated scale (uint8 or int8, zero point 0), its kernel stored in
// int8 with one scale per output channel and DequantizeLinear'd (axis 0 for Conv, 1 for Gemm), as
// onnxruntime's int8 kernels take it. Throws InvalidArgument naming a layer that ONNX export does
// not cover.
void export_onnx(const nn::Model& model, const std::string& path,
                 const OnnxExportOptions& options = {});

// ---------------------------------------------------------------------------------------------
// TensorFlow SavedModel export
// ---------------------------------------------------------------------------------------------
// Writes a built f32 (or f64) model as a TensorFlow SavedModel folder for TensorFlow Serving and
// tf.saved_model.load: saved_model.pb with one MetaGraph tagged "serve" and a "serving_default"
// signature ("input", the model's NHWC input with any batch size, to "output"), built from
// TensorFlow's ops (Conv2D, BiasAdd, Relu, MaxPool, AvgPool, MatMul, FusedBatchNormV3, Mean,
// Reshape, Softmax, ...), and an empty variables/ folder: the weights are constants in the graph
// (a serving graph needs no checkpoint), which bounds the model at protobuf's 2 GB. The folder is
// written atomically; an existing SavedModel there is replaced, any other non-empty folder is an
// error. Throws InvalidArgument naming a layer that SavedModel export does not cover.
void export_saved_model(const nn::Model& model, const std::string& directory);

// ---------------------------------------------------------------------------------------------
// Importing PyTorch weights
// ---------------------------------------------------------------------------------------------
struct TorchImportOptions {
  // PyTorch module names to Tandem layer names, e.g. {{"features.0", "conv2d"}, {"fc", "dense"}}.
  // Empty: per kind (Conv2d/Conv2D, Linear/Dense, BatchNorm/BatchNormalization) the state
  // dict's modules, in natural order of their names ("conv2" < "conv10", "features.2" <
  // "features.10"), pair with the model's layers of that kind in the order the model uses them;
  // that fits a PyTorch module whose names number its layers of a kind in order.
  std::map<std::string, std::string> modules;
};
// Loads weights that PyTorch wrote with safetensors (safetensors.torch.save_file(
// module.state_dict(), path)) into a built model of the same architecture, converting layouts:
// Linear (out, in) to Dense (in, out), Conv2d (out, in, kh, kw) to Conv2D (kh, kw, in, out),
// BatchNorm2d weight/bias/running_mean/running_var to gamma/beta/moving_mean/moving_variance
// (num_batches_tracked is ignored). A Dense that reads a Flatten of an image takes features in
// Tandem's (H, W, C) order where PyTorch's Flatten of NCHW gives (C, H, W): its kernel rows are
// permuted to match. Floating dtypes are converted to the model's. Every mismatch (a tensor the
// model lacks or misses, a shape that does not fit, a module of another kind) is reported, one
// per tensor, in one InvalidArgument naming the file; nothing changes unless every tensor fits.
void import_torch_weights(nn::Model& model, const std::string& path,
                          const TorchImportOptions& options = {});

}  // namespace tandem::io

namespace tandem {
// Reads a model written by Model::save (see io::load_model).
inline nn::Model load_model(const std::string& directory) {
  return io::load_model(directory);
}
}  // namespace tandem
