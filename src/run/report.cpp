// A run's report as JSON: what `tandem train --report` writes and a sweep reads back.
#include <nlohmann/json.hpp>

#include "tandem/run.h"
#include "tandem/runtime.h"

namespace tandem::run {
namespace {

using Json = nlohmann::ordered_json;

Json or_null(const std::optional<double>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json pruning_json(const std::optional<PruningResult>& pruning) {
  if (!pruning) return nullptr;
  Json json{{"target_sparsity", pruning->target_sparsity},
            {"pattern", pruning->pattern},
            {"sparsity", pruning->sparsity}};
  for (const auto& [layer, sparsity] : pruning->layers)
    json["layers"][layer] = sparsity;
  return json;
}

Json quantization_json(const std::optional<QuantizationResult>& quantization) {
  if (!quantization) return nullptr;
  Json layers = Json::object();
  for (const quantization::InputQuantization& input : quantization->inputs) {
    layers[input.layer] = {{"input", input.is_unsigned ? "uint8" : "int8"},
                           {"threshold", input.threshold},
                           {"scale", input.scale}};
  }
  const quantization::QuantizationRecipe& recipe = quantization->recipe;
  return {{"precision", recipe.precision},
          {"calibrator", recipe.calibrator},
          {"calibration_examples", recipe.calibration_examples},
          {"qat_epochs", recipe.qat_epochs},
          {"fp32_test_accuracy", or_null(quantization->fp32_test_accuracy)},
          {"layers", layers}};
}

}  // namespace

std::string report_json(const Report& report,
                        const std::vector<std::pair<std::string, std::string>>& annotations) {
  const RunConfig& config = report.config;
  Json settings = Json::object();
  for (const auto& [key, text] : changed_settings(config)) {
    if (key == "resume") continue;
    if (find_setting(key)->value_name.empty()) {
      if (text == "true") settings[key] = true;
    } else {
      settings[key] = text;
    }
  }
  Json json{{"model", config.model},
            {"model_description", report.model_description},
            {"weights", report.weights},
            {"device", report.device},
            {"epochs", config.epochs},
            {"batch_size", config.batch_size},
            {"precision", config.precision.precision},
            {"strategy", report.strategy},
            {"replicas", report.replicas},
            {"global_batch_size", report.global_batch_size},
            {"learning_rate", config.optimizer.learning_rate},
            {"lr_schedule", config.optimizer.schedule},
            {"threads", report.threads},
            {"seed", config.seed},
            {"validation_split", config.data.validation_split},
            {"deterministic", config.deterministic},
            {"jit", report.jit},
            {"data", report.data},
            {"num_classes", report.num_classes},
            {"test_accuracy", or_null(report.test_accuracy)},
            {"test_loss", or_null(report.test_loss)},
            {"history", report.history},
            {"pruning", pruning_json(report.pruning)},
            {"quantization", quantization_json(report.quantization)},
            {"samples_per_sec", report.samples_per_sec},
            {"warmup_steps", report.warmup_steps},
            {"input_wait_share", report.input_wait_share},
            {"epoch_seconds", report.epoch_seconds},
            {"wall_seconds", report.wall_seconds},
            {"train_seconds", report.train_seconds},
            {"tandem_version", version()},
            {"config", settings}};
  for (const auto& [key, value] : annotations)
    json[key] = value;
  if (const std::optional<CommunicationShares>& shares = report.communication) {
    json["allreduce_wait_share"] = shares->wait_share;
    json["allreduce_pack_share"] = shares->pack_share;
    json["allreduce_bytes_per_step"] = shares->bytes_per_step;
    json["allreduce_gradient_buckets"] = shares->gradient_buckets;
    json["allreduce_overlapped_buckets"] = shares->overlapped_buckets;
  }
  // NaN and infinities as null, bytes that are not UTF-8 replaced by U+FFFD.
  return json.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace tandem::run
