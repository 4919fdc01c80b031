// RunConfig's fields as settings: each under its key, read from text and written back as canonical
// text, with what a checkpoint and the workers of a multi-worker run do with it. Run files,
// reports, checkpoints and the CLI read and write settings through this table alone (the CLI adds
// only a help line per key, and a test checks that its options and these keys agree).
#include <algorithm>
#include <filesystem>
#include <functional>
#include <limits>
#include <tuple>

#include "core/parse.h"
#include "core/text.h"
#include "run/settings_table.h"
#include "tandem/run.h"

namespace tandem::run {
namespace {

using Read = std::function<void(RunConfig&, const std::string& name, const std::string& text)>;
using Write = std::function<std::string(const RunConfig&)>;

template <typename T>
using Accessor = T& (*)(RunConfig&);

template <typename T>
T& get(Accessor<T> field, const RunConfig& config) {
  return field(const_cast<RunConfig&>(config));
}

// Readers and writers for the common kinds of field.
template <typename T, typename Parse>
std::pair<Read, Write> parsed(Accessor<T> field, Parse parse) {
  return {[field, parse](RunConfig& config, const std::string& name, const std::string& text) {
            field(config) = static_cast<T>(parse(name, text));
          },
          [field](const RunConfig& config) {
            if constexpr (std::is_floating_point_v<T>) {
              return shortest(get(field, config));
            } else {
              return std::to_string(get(field, config));
            }
          }};
}

std::pair<Read, Write> text(
    Accessor<std::string> field,
    std::function<void(const std::string&, const std::string&)> check = nullptr) {
  return {[field, check](RunConfig& config, const std::string& name, const std::string& text) {
            if (check) check(name, text);
            field(config) = text;
          },
          [field](const RunConfig& config) { return get(field, config); }};
}

std::pair<Read, Write> choice(Accessor<std::string> field, std::vector<std::string> choices,
                              std::string what) {
  return text(field, [choices, what](const std::string& name, const std::string& text) {
    parse_choice(name, text, choices, what);
  });
}

std::pair<Read, Write> flag(Accessor<bool> field) {
  return {[field](RunConfig& config, const std::string& name, const std::string& text) {
            if (text != "true" && text != "false" && !text.empty()) {
              throw ConfigError(name + " is a flag (true or false), got '" + text + "'");
            }
            field(config) = text != "false";
          },
          [field](const RunConfig& config) { return get(field, config) ? "true" : "false"; }};
}

std::pair<Read, Write> list(Accessor<std::vector<std::string>> field) {
  return {[field](RunConfig& config, const std::string& name, const std::string& text) {
            field(config) = parse_list(name, text);
          },
          [field](const RunConfig& config) { return join(get(field, config), ","); }};
}

// A count that an int holds.
std::int64_t parse_count(const std::string& name, const std::string& text) {
  const std::int64_t count = parse_positive_integer(name, text);
  if (count > std::numeric_limits<int>::max()) {
    throw ConfigError(name + " " + text + " is too many; pass at most " +
                      std::to_string(std::numeric_limits<int>::max()));
  }
  return count;
}

// "20:29" or "20" (one step): global steps from 0, inclusive.
std::pair<std::int64_t, std::int64_t> parse_step_range(const std::string& name,
                                                       const std::string& text) {
  const std::size_t colon = text.find(':');
  const std::string first_text = text.substr(0, colon);
  const std::string last_text = colon == std::string::npos ? first_text : text.substr(colon + 1);
  const auto first = static_cast<std::int64_t>(parse_unsigned_integer(name, first_text));
  const auto last = static_cast<std::int64_t>(parse_unsigned_integer(name, last_text));
  if (last < first) {
    throw ConfigError(name + " " + text + ": the last step comes before the first; give " +
                      "FIRST:LAST with FIRST <= LAST, e.g. 20:29");
  }
  return {first, last};
}

// "0", "0.0", ...: the value that turns a periodic thing off.
bool is_zero(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && value == 0.0;
}

Entry entry(Setting setting, std::pair<Read, Write> access) {
  return {std::move(setting), std::move(access.first), std::move(access.second)};
}

constexpr OnResume keep = OnResume::keep;
constexpr OnResume carry = OnResume::carry;
constexpr OnResume none = OnResume::none;

std::vector<Entry> make_entries() {
  using distribute::LearningRateScaling;
  std::vector<Entry> entries;
  const auto add = [&](Setting setting, std::pair<Read, Write> access) {
    entries.push_back(entry(std::move(setting), std::move(access)));
  };
  // ---- The model and how it trains ----
  add({"model", "model", "NAME|FILE", true, keep},
      text(
          [](RunConfig & c) -> auto& { return c.model; }, io::check_model_source));
  add({"epochs", "epochs", "N", true, keep},
      parsed<std::int64_t>(
          [](RunConfig & c) -> auto& { return c.epochs; }, parse_count));
  add({"batch-size", "batch_size", "N", true, keep},
      parsed<std::int64_t>(
          [](RunConfig & c) -> auto& { return c.batch_size; }, parse_positive_integer));
  add({"lr", "optimizer.learning_rate", "RATE", true, keep},
      parsed<double>(
          [](RunConfig & c) -> auto& { return c.optimizer.learning_rate; }, parse_positive_number));
  add({"lr-schedule", "optimizer.schedule", "NAME", true, keep},
      choice(
          [](RunConfig & c) -> auto& { return c.optimizer.schedule; }, {"constant", "cosine"},
          "schedule"));
  add({"threads", "threads", "N"},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         const std::int64_t threads = parse_positive_integer(name, text);
         if (threads > 4096) {
           throw ConfigError(name + " must be at most 4096, got '" + text + "'");
         }
         c.threads = static_cast<int>(threads);
       },
       [](const RunConfig& c) { return c.threads == 0 ? "" : std::to_string(c.threads); }});
  add({"seed", "seed", "N", true, keep},
      parsed<std::uint64_t>(
          [](RunConfig & c) -> auto& { return c.seed; }, parse_unsigned_integer));
  add({"data-dir", "data.images.fashion_mnist_dir", "DIR", false, carry, "data"},
      // Checked as it is set, so that a run file names the line of a folder that is not there.
      text(
          [](RunConfig & c) -> auto& { return c.data.images.fashion_mnist_dir; },
          [](const std::string& name, const std::string& text) {
            parse_directory(name, text);
            if (!std::filesystem::is_directory(text)) {
              throw ConfigError(name + " " + text +
                                ": no such folder; it should hold Fashion-MNIST's IDX files: "
                                "install the Debian package dataset-fashion-mnist "
                                "(scripts/install-deps.sh does) and leave it out, or pass the "
                                "folder that has them (or other data as a data spec)");
            }
          }));
  add({"validation-split", "data.validation_split", "F", true, keep},
      parsed<double>(
          [](RunConfig & c) -> auto& { return c.data.validation_split; }, parse_fraction));
  add({"data-fraction", "data.fraction", "F", true, carry},
      parsed<double>(
          [](RunConfig & c) -> auto& { return c.data.fraction; },
          [](const std::string& name, const std::string& text) {
            // (0, 1]: all of the data is the default.
            const double fraction = text == "1" ? 1.0 : parse_fraction(name, text);
            if (fraction == 0.0) {
              throw ConfigError(name + " 0 leaves nothing to train on; pass a fraction above 0");
            }
            return fraction;
          }));
  add({"jit", "jit", "on|off", true},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.jit = parse_choice(name, text, {"on", "off"}, "jit") == "on";
       },
       [](const RunConfig& c) { return !c.jit   ? ""
                                       : *c.jit ? "on"
                                                : "off"; }});
  add({"quiet", "verbosity", ""},
      {[](RunConfig& c, const std::string&, const std::string& text) {
         if (text != "false") c.verbosity = 0;
       },
       [](const RunConfig& c) { return c.verbosity == 0 ? "true" : "false"; }});
  add({"verbose", "verbosity", ""},
      {[](RunConfig& c, const std::string&, const std::string& text) {
         if (text != "false") c.verbosity = 2;
       },
       [](const RunConfig& c) { return c.verbosity == 2 ? "true" : "false"; }});
  // ---- Observing ----
  add({"logdir", "logging.logdir", "DIR"},
      text(
          [](RunConfig & c) -> auto& { return c.logging.logdir; },
          [](const std::string& name, const std::string& text) { parse_directory(name, text); }));
  add({"log-every", "logging.log_every", "N"},
      parsed<std::int64_t>(
          [](RunConfig & c) -> auto& { return c.logging.log_every; }, parse_unsigned_integer));
  add({"histogram-freq", "logging.histogram_freq", "N"},
      parsed<std::int64_t>(
          [](RunConfig & c) -> auto& { return c.logging.histogram_freq; },
          [](const std::string& name, const std::string& text) {
            const std::uint64_t epochs = parse_unsigned_integer(name, text);
            if (epochs > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
              throw ConfigError(name + " " + text + " is too many epochs; pass at most " +
                                std::to_string(std::numeric_limits<int>::max()));
            }
            return epochs;
          }));
  add({"monitor-interval", "logging.monitor_interval", "S"},
      parsed<double>(
          [](RunConfig & c) -> auto& { return c.logging.monitor_interval; },
          [](const std::string& name, const std::string& text) {
            return is_zero(text) ? 0.0 : parse_positive_number(name, text);
          }));
  add({"profile", "logging.profile", ""},
      flag([](RunConfig & c) -> auto& { return c.logging.profile; }));
  add({"profile-steps", "logging.profile_first, logging.profile_last", "A:B"},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         std::tie(c.logging.profile_first, c.logging.profile_last) = parse_step_range(name, text);
       },
       [](const RunConfig& c) {
         return std::to_string(c.logging.profile_first) + ":" +
                std::to_string(c.logging.profile_last);
       }});
  add({"trace", "logging.trace_path", "FILE"},
      text(
          [](RunConfig & c) -> auto& { return c.logging.trace_path; },
          [](const std::string& name, const std::string& text) { parse_output_path(name, text); }));
  add({"log-device-placement", "logging.log_device_placement", ""},
      flag([](RunConfig & c) -> auto& { return c.logging.log_device_placement; }));
  // ---- Checkpoints and the saved model ----
  const auto directory = [](const std::string& name, const std::string& text) {
    parse_directory(name, text);
  };
  add({"checkpoint-dir", "checkpoints.directory", "DIR"},
      text(
          [](RunConfig & c) -> auto& { return c.checkpoints.directory; }, directory));
  add({"checkpoint-every", "checkpoints.every_steps", "N", false, carry},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.checkpoints.every_steps = parse_positive_integer(name, text);
       },
       [](const RunConfig& c) {
         return c.checkpoints.every_steps > 0 ? std::to_string(c.checkpoints.every_steps) : "";
       }});
  add({"keep-checkpoints", "checkpoints.keep", "N", false, carry},
      parsed<int>(
          [](RunConfig & c) -> auto& { return c.checkpoints.keep; },
          [](const std::string& name, const std::string& text) {
            const std::uint64_t keep = parse_unsigned_integer(name, text);
            if (keep > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
              throw ConfigError(name + " " + text + " is too many");
            }
            return keep;
          }));
  add({"keep-best", "checkpoints.keep_best", "LOG", false, carry},
      text(
          [](RunConfig & c) -> auto& { return c.checkpoints.keep_best; },
          [](const std::string& name, const std::string& text) {
            const std::vector<std::string> logs{"loss", "accuracy", "val_loss", "val_accuracy"};
            if (std::find(logs.begin(), logs.end(), text) == logs.end()) {
              throw ConfigError(name + " " + text +
                                ": choose loss, accuracy, val_loss or val_accuracy");
            }
          }));
  add({"resume", "checkpoints.resume", "DIR"},
      text(
          [](RunConfig & c) -> auto& { return c.checkpoints.resume; },
          [](const std::string& name, const std::string& text) {
            if (text.empty()) throw ConfigError(name + " needs a checkpoint directory, got ''");
          }));
  add({"deterministic", "deterministic", "", true, keep},
      flag([](RunConfig & c) -> auto& { return c.deterministic; }));
  add({"save-model", "checkpoints.save_model", "DIR"},
      text(
          [](RunConfig & c) -> auto& { return c.checkpoints.save_model; }, directory));
  // ---- Where it trains ----
  add({"strategy", "strategy.strategy.name", "NAME", true},
      text(
          [](RunConfig & c) -> auto& { return c.strategy.strategy.name; },
          distribute::check_strategy_name));
  add({"replicas", "strategy.strategy.replicas", "N", true},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         const std::int64_t replicas = parse_positive_integer(name, text);
         if (replicas > 4096) {
           throw ConfigError(name + " must be at most 4096, got '" + text + "'");
         }
         c.strategy.strategy.replicas = static_cast<int>(replicas);
       },
       [](const RunConfig& c) {
         return c.strategy.strategy.replicas == 0 ? ""
                                                  : std::to_string(c.strategy.strategy.replicas);
       }});
  add({"pjrt-plugin", "strategy.strategy.pjrt_plugin", "PATH"},
      text([](RunConfig & c) -> auto& { return c.strategy.strategy.pjrt_plugin; }));
  add({"lr-scaling", "strategy.lr_scaling", "RULE", true},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.strategy.lr_scaling = parse_choice(name, text, {"none", "linear"}, "rule") == "linear"
                                     ? LearningRateScaling::linear
                                     : LearningRateScaling::none;
       },
       [](const RunConfig& c) {
         return c.strategy.lr_scaling == LearningRateScaling::linear ? "linear" : "none";
       }});
  add({"join-timeout", "strategy.strategy.multi_worker.join_timeout_seconds", "SECONDS"},
      parsed<double>(
          [](RunConfig & c) -> auto& {
            return c.strategy.strategy.multi_worker.join_timeout_seconds;
          },
          parse_positive_number));
  add({"collective-timeout", "strategy.strategy.multi_worker.collective_timeout_seconds",
       "SECONDS"},
      parsed<double>(
          [](RunConfig & c) -> auto& {
            return c.strategy.strategy.multi_worker.collective_timeout_seconds;
          },
          parse_positive_number));
  add({"bucket-kib", "strategy.strategy.multi_worker.bucket_bytes", "N", true},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         const std::int64_t kib = parse_positive_integer(name, text);
         if (kib > (std::int64_t{1} << 22)) {
           throw ConfigError(name + " must be at most 4194304 (4 GiB), got '" + text + "'");
         }
         c.strategy.strategy.multi_worker.bucket_bytes = static_cast<std::size_t>(kib) * 1024;
       },
       [](const RunConfig& c) {
         const std::size_t bytes = c.strategy.strategy.multi_worker.bucket_bytes;
         return bytes == 0 ? "" : std::to_string(bytes / 1024);
       }});
  // ---- Numbers and memory ----
  add({"precision", "precision.precision", "P", true, keep},
      choice(
          [](RunConfig & c) -> auto& { return c.precision.precision; }, {"fp32", "bf16", "fp16"},
          "precision"));
  add({"memory-limit", "precision.memory_limit", "SIZE"},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.precision.memory_limit = parse_memory_size(name, text);
       },
       [](const RunConfig& c) {
         return c.precision.memory_limit == 0 ? "" : std::to_string(c.precision.memory_limit);
       }});
  add({"find-max-batch", "precision.find_max_batch", "", true},
      flag([](RunConfig & c) -> auto& { return c.precision.find_max_batch; }));
  add({"keep-denormals", "precision.keep_denormals", "", true},
      flag([](RunConfig & c) -> auto& { return c.precision.keep_denormals; }));
  // ---- The data ----
  add({"data", "data.images.training", "SPEC", false, carry, "data"},
      text(
          [](RunConfig & c) -> auto& { return c.data.images.training; }, data::check_data_spec));
  add({"validation-data", "data.images.validation", "SPEC", false, carry},
      text(
          [](RunConfig & c) -> auto& { return c.data.images.validation; }, data::check_data_spec));
  add({"test-data", "data.images.test", "SPEC", false, carry},
      text(
          [](RunConfig & c) -> auto& { return c.data.images.test; }, data::check_data_spec));
  add({"image-feature", "data.images.image_feature", "NAME", true, carry},
      text([](RunConfig & c) -> auto& { return c.data.images.image_feature; }));
  add({"label-feature", "data.images.label_feature", "NAME", true, carry},
      text([](RunConfig & c) -> auto& { return c.data.images.label_feature; }));
  add({"image-size", "data.images.image_height, data.images.image_width", "HxW", true, carry},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         const std::string::size_type x = text.find('x');
         const std::string height = text.substr(0, x);
         const std::string width = x == std::string::npos ? height : text.substr(x + 1);
         if (height.empty() || width.empty()) {
           throw ConfigError(name + " takes HxW (e.g. 64x64) or one size N, got '" + text + "'");
         }
         c.data.images.image_height = parse_positive_integer(name, height);
         c.data.images.image_width = parse_positive_integer(name, width);
         if (c.data.images.image_height > 4096 || c.data.images.image_width > 4096) {
           throw ConfigError(name + " " + text + " is larger than 4096x4096; pass a smaller size");
         }
       },
       [](const RunConfig& c) {
         return c.data.images.image_height == 0 ? ""
                                                : std::to_string(c.data.images.image_height) + "x" +
                                                      std::to_string(c.data.images.image_width);
       }});
  add({"channels", "data.images.channels", "1|3", true, carry},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.data.images.channels = std::stoi(parse_choice(name, text, {"1", "3"}, "channel count"));
       },
       [](const RunConfig& c) {
         return c.data.images.channels == 0 ? "" : std::to_string(c.data.images.channels);
       }});
  add({"augment", "data.augment", "LIST", true, carry},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.data.augment.clear();
         for (const std::string& augmentation : split_list(text)) {
           c.data.augment.push_back(
               parse_choice(name, augmentation, data::augmentation_names(), "augmentation"));
         }
       },
       [](const RunConfig& c) { return join(c.data.augment, ","); }});
  add({"num-classes", "data.images.num_classes", "N", true, carry},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.data.images.num_classes = parse_positive_integer(name, text);
         // As the data's own labels are bounded (data::open_image_data): a model's outputs.
         if (c.data.images.num_classes > 1'000'000) {
           throw ConfigError(name + " must be at most 1000000, got '" + text + "'");
         }
       },
       [](const RunConfig& c) {
         return c.data.images.num_classes == 0 ? "" : std::to_string(c.data.images.num_classes);
       }});
  // ---- Pruning ----
  add({"prune", "pruning.sparsity", "S", true, carry},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.pruning.sparsity = parse_fraction(name, text);
         if (c.pruning.sparsity == 0.0) {
           throw ConfigError(name + " takes a sparsity above 0 and below 1, got '" + text + "'");
         }
       },
       [](const RunConfig& c) {
         return c.pruning.sparsity == 0.0 ? "" : shortest(c.pruning.sparsity);
       }});
  add({"prune-schedule", "pruning.schedule", "NAME", true, carry},
      choice(
          [](RunConfig & c) -> auto& { return c.pruning.schedule; }, {"polynomial", "constant"},
          "pruning schedule"));
  add({"prune-pattern", "pruning.pattern", "P", true, carry},
      choice(
          [](RunConfig & c) -> auto& { return c.pruning.pattern; }, {"unstructured", "2:4"},
          "pruning pattern"));
  add({"prune-layers", "pruning.layers", "NAMES", true, carry},
      list([](RunConfig & c) -> auto& { return c.pruning.layers; }));
  // ---- Quantisation ----
  add({"quantize", "quantization.precision", "int8", true, carry},
      choice(
          [](RunConfig & c) -> auto& { return c.quantization.precision; }, {"int8"},
          "quantisation"));
  add({"calibrator", "quantization.calibrator", "NAME", true, carry},
      choice(
          [](RunConfig & c) -> auto& { return c.quantization.calibrator; },
          {"minmax", "percentile", "entropy"}, "calibrator"));
  add({"calibration-examples", "quantization.calibration_examples", "N", true, carry},
      parsed<std::int64_t>(
          [](RunConfig & c) -> auto& { return c.quantization.calibration_examples; },
          parse_positive_integer));
  add({"qat-epochs", "quantization.qat_epochs", "N", true, carry},
      {[](RunConfig& c, const std::string& name, const std::string& text) {
         c.quantization.qat_epochs = parse_positive_integer(name, text);
       },
       [](const RunConfig& c) {
         return c.quantization.qat_epochs == 0 ? "" : std::to_string(c.quantization.qat_epochs);
       }});
  add({"quantize-layers", "quantization.layers", "NAMES", true, carry},
      list([](RunConfig & c) -> auto& { return c.quantization.layers; }));
  return entries;
}

}  // namespace

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = make_entries();
  return all;
}

const Entry& entry_of(const std::string& key) {
  for (const Entry& entry : entries()) {
    if (entry.setting.key == key) return entry;
  }
  throw ConfigError("unknown setting '" + key + "'" + did_you_mean(key, setting_keys()) +
                    "; the settings are run::settings()");
}

std::vector<std::string> setting_keys() {
  std::vector<std::string> keys;
  for (const Entry& entry : entries())
    keys.push_back(entry.setting.key);
  return keys;
}

const std::vector<Setting>& settings() {
  static const std::vector<Setting> all = [] {
    std::vector<Setting> list;
    for (const Entry& entry : entries())
      list.push_back(entry.setting);
    return list;
  }();
  return all;
}

const Setting* find_setting(const std::string& key) {
  for (const Setting& setting : settings()) {
    if (setting.key == key) return &setting;
  }
  return nullptr;
}

std::string field_name(const std::string& key) {
  const Setting* setting = find_setting(key);
  return setting != nullptr ? setting->field : setting_identifier(key);
}

void set_setting(RunConfig& config, const std::string& key, const std::string& text,
                 const SettingName& name) {
  entry_of(key).read(config, name(key), text);
}

std::string setting_text(const RunConfig& config, const std::string& key) {
  return entry_of(key).write(config);
}

std::vector<std::pair<std::string, std::string>> changed_settings(const RunConfig& config) {
  static const RunConfig defaults;
  std::vector<std::pair<std::string, std::string>> changed;
  for (const Entry& entry : entries()) {
    std::string text = entry.write(config);
    if (text != entry.write(defaults)) changed.emplace_back(entry.setting.key, std::move(text));
  }
  return changed;
}

bool is_changed(const RunConfig& config, const std::string& key) {
  static const RunConfig defaults;
  const Entry& found = entry_of(key);
  return found.write(config) != found.write(defaults);
}

}  // namespace tandem::run
