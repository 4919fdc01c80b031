// The benchmark's workloads: zoo models with their input shapes, synthetic batches of those
// shapes, and the work (FLOPs and bytes) their ops do, from the op table's cost functions.
#include <algorithm>

#include "tandem/bench.h"
#include "tandem/error.h"
#include "tandem/observe.h"
#include "tandem/ops.h"
#include "tandem/random.h"

namespace tandem::bench {
namespace {

constexpr std::int64_t kBertVocabulary = 30522;  // BERT's WordPiece vocabulary

std::int64_t or_default(std::int64_t value, std::int64_t fallback) {
  return value > 0 ? value : fallback;
}

bool is_multiply_accumulate(const std::string& op) {
  return op == "matmul" || op == "conv2d" || op == "conv2d_backward_input" ||
         op == "conv2d_backward_filter";
}

}  // namespace

std::vector<std::string> workload_names() {
  return {"mlp", "cnn", "resnet50", "transformer"};
}

Workload workload(const std::string& model, const WorkloadOptions& options) {
  Workload result;
  result.model = model;
  if (model == "mlp" || model == "cnn") {
    result.example_shape = {28, 28, 1};
    result.classes = or_default(options.classes, 10);
    result.epoch_examples = 60000;
    result.epoch_data_set = "Fashion-MNIST train";
  } else if (model == "resnet50") {
    const std::int64_t side = or_default(options.image_size, 224);
    result.example_shape = {side, side, 3};
    result.classes = or_default(options.classes, 1000);
    result.epoch_examples = 1281167;
    result.epoch_data_set = "ImageNet-1k train";
  } else if (model == "transformer") {
    result.example_shape = {or_default(options.sequence_length, 128)};
    result.classes = or_default(options.classes, 2);
    result.token_ids = true;
    result.vocabulary = kBertVocabulary;
    result.epoch_examples = 67349;
    result.epoch_data_set = "GLUE SST-2 train";
  } else {
    std::string choices;
    for (const std::string& name : workload_names())
      choices += (choices.empty() ? "" : ", ") + name;
    throw InvalidArgument("unknown model '" + model + "'; choose one of: " + choices);
  }
  return result;
}

nn::Model build_model(const Workload& workload) {
  const std::string zoo_name = workload.model == "transformer" ? "bert_base" : workload.model;
  return nn::zoo::build(zoo_name, workload.example_shape, workload.classes);
}

std::pair<Tensor, Tensor> synthetic_batch(const Workload& workload, std::int64_t batch,
                                          std::uint64_t seed) {
  Generator generator(seed);
  Shape shape = workload.example_shape;
  shape.insert(shape.begin(), batch);
  // Token ids are drawn as floats below the vocabulary size and truncated.
  Tensor features =
      workload.token_ids
          ? cast(random_uniform(shape, 0, static_cast<double>(workload.vocabulary) - 0.5,
                                DType::f32, generator),
                 DType::i32)
          : random_uniform(shape, 0, 1, DType::f32, generator);  // (batch, ...)
  Tensor labels = cast(random_uniform({batch}, 0, static_cast<double>(workload.classes) - 0.5,
                                      DType::f32, generator),
                       DType::i32);  // (batch,)
  return {std::move(features), std::move(labels)};
}

Work work_of(std::vector<OpWork> ops) {
  Work work;
  for (const OpWork& op : ops) {
    work.flops += op.flops;
    work.bytes += op.bytes;
    if (is_multiply_accumulate(op.op)) work.macs += op.flops / 2.0;
  }
  work.ops = std::move(ops);
  return work;
}

Work forward_work(nn::Model& model, const Tensor& inputs) {
  observe::Profiler profiler;
  profiler.start();
  {
    const observe::TraceScope forward(observe::SpanKind::forward);
    model(inputs, /*training=*/false);
  }
  profiler.stop();
  std::vector<OpWork> ops;
  for (const observe::OpProfile& op : profiler.report().ops)
    ops.push_back({op.op, op.phase, op.calls, op.flops, op.bytes, op.seconds});
  return work_of(std::move(ops));
}

}  // namespace tandem::bench
