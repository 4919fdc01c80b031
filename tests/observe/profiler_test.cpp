// The op profiler: ops timed and attributed to phases, FLOPs from the op table, the table, the
// Chrome trace parsed as JSON, device placement and fallback warnings, and one training step of
// the tutorial CNN whose op times fit inside the measured step time.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/idx_files.h"
#include "support/pooled_convolution.h"
#include "tandem/nn.h"
#include "tandem/observe.h"
#include "tandem/ops.h"
#include "tandem/random.h"
#include "tandem/runtime.h"

namespace tandem::testing {
namespace {

using observe::Profiler;
using observe::SpanKind;
using observe::TraceScope;

const observe::OpProfile* find_row(const observe::ProfileReport& report, const std::string& op,
                                   const std::string& phase) {
  for (const observe::OpProfile& row : report.ops) {
    if (row.op == op && row.phase == phase) return &row;
  }
  return nullptr;
}

TEST(Profiler, TimesOpsInTheirPhaseWithTheirFlops) {
  const Tensor a = Tensor::ones({64, 32});
  const Tensor b = Tensor::ones({32, 16});
  Profiler profiler;
  profiler.start();
  {
    TraceScope forward(SpanKind::forward);
    matmul(a, b);
    matmul(a, b);
  }
  relu(a);
  profiler.stop();
  relu(a);  // not recorded
  const observe::ProfileReport report = profiler.report();
  const observe::OpProfile* product = find_row(report, "matmul", "forward");
  ASSERT_NE(product, nullptr) << report.table();
  EXPECT_EQ(product->calls, 2);
  EXPECT_EQ(product->flops, 2 * 2.0 * 64 * 32 * 16);  // a multiply-add is 2 FLOPs
  EXPECT_EQ(product->device, "cpu");
  EXPECT_GT(product->seconds, 0.0);
  const observe::OpProfile* activation = find_row(report, "relu", "other");
  ASSERT_NE(activation, nullptr) << report.table();
  EXPECT_EQ(activation->calls, 1);
  EXPECT_EQ(report.steps, 0);
  EXPECT_NE(report.table().find("matmul"), std::string::npos);
}

TEST(Profiler, OnlyOneRunsAtATime) {
  Profiler first;
  Profiler second;
  first.start();
  EXPECT_THROW(second.start(), Error);
  first.stop();
  second.start();
  second.stop();
}

TEST(Profiler, LogsPlacementAndWarnsOnceAboutFallbacks) {
  std::ostringstream log;
  Profiler profiler(
      {.log_device_placement = true, .expected_device = Device::cuda(0), .log = &log});
  profiler.start();
  const Tensor x = Tensor::ones({4});
  relu(x);
  relu(x);
  profiler.stop();
  const std::string text = log.str();
  EXPECT_NE(text.find("placement: relu (other) on cpu"), std::string::npos) << text;
  const std::string warning = "warning: op relu ran on cpu, not on cuda:0";
  const std::size_t first = text.find(warning);
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find(warning, first + 1), std::string::npos) << text;  // once per op
  EXPECT_EQ(profiler.report().fallbacks, 2);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);  // throws on malformed JSON
}

// Trains the tutorial CNN (Conv2D 32, MaxPool, Conv2D 64, MaxPool, Flatten, Dense 64, Dense 10)
// with Adam on random images and profiles `first`..`last`.
observe::ProfileReport profile_cnn(std::int64_t first, std::int64_t last,
                                   const std::string& trace_path, bool jit = false) {
  manual_seed(3);
  const Tensor images = random_uniform({32 * 8, 28, 28, 1}, 0.0, 1.0);
  std::vector<std::int32_t> labels(32 * 8);
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>(i % 10);
  data::TensorDataset dataset(images, Tensor::from_vector(labels, {32 * 8}));
  dataset.batch(32);
  nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, 10);
  model.compile({.optimizer = train::Adam(1e-3),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"},
                 .jit_compile = jit});
  auto profiler = std::make_shared<Profiler>();
  auto callback = std::make_shared<observe::ProfilerCallback>(profiler, first, last, trace_path);
  model.fit(dataset, {.verbose = 0, .callbacks = {callback}});
  EXPECT_TRUE(callback->finished());
  return profiler->report();
}

// A compiled step's nodes are profiled in their phases, as the eager ops are, the fused ones
// under their names.
TEST(Profiler, SeesACompiledStepsNodesInTheirPhases) {
  ScratchDir dir;
  const observe::ProfileReport report = profile_cnn(4, 4, dir.file("trace.json"), true);
  ASSERT_EQ(report.steps, 1);
  const std::string table = report.table();
  // The convolutions with their relu, the first with its pooling too where the CPU pools it as
  // it is formed.
  const bool pooled_as_formed = testing::cpu_pools_as_it_convolves({32, 28, 28, 1}, {3, 3, 1, 32});
  const observe::OpProfile* fused = find_row(report, "conv2d+relu", "forward");
  ASSERT_NE(fused, nullptr) << table;
  EXPECT_EQ(fused->calls, pooled_as_formed ? 1 : 2);
  if (pooled_as_formed) {
    const observe::OpProfile* first = find_row(report, "conv2d+relu+max_pool2d", "forward");
    ASSERT_NE(first, nullptr) << table;
    EXPECT_EQ(first->calls, 1);
  }
  EXPECT_NE(find_row(report, "conv2d_backward_filter", "backward"), nullptr) << table;
  // The first layer's filter gradient with the pooling's and relu's backward passes before it.
  const observe::OpProfile* pooled =
      find_row(report, "max_pool2d_backward+relu_backward+conv2d_backward_filter", "backward");
  ASSERT_NE(pooled, nullptr) << table;
  EXPECT_EQ(pooled->calls, 1);
  // The 8 weights' Adam updates as one multi-tensor update, its cost that of all of them.
  const observe::OpProfile* adam = find_row(report, "adam_update (multi-tensor)", "optimizer");
  ASSERT_NE(adam, nullptr) << table;
  EXPECT_EQ(adam->calls, 1);
  std::int64_t weights = 0;
  for (const Tensor& weight : nn::zoo::build("cnn", {28, 28, 1}, 10).trainable_weights())
    weights += weight.numel();
  EXPECT_DOUBLE_EQ(adam->flops, 12.0 * static_cast<double>(weights)) << table;
  EXPECT_GT(report.optimizer_seconds, 0.0) << table;
}

TEST(Profiler, OpTimesOfACnnTrainingStepAddUpToTheStepTime) {
  ScratchDir dir;
  const observe::ProfileReport report = profile_cnn(4, 4, dir.file("trace.json"));
  ASSERT_EQ(report.steps, 1);
  const std::string table = report.table();
  // What the ops and the input wait explain of the step is part of its wall time. How large a
  // part depends on the machine's load (dispatch and tape bookkeeping stretch when other
  // processes take the cores), so the share is a benchmark figure (bench/profiler_coverage.sh),
  // not a bound here.
  EXPECT_GT(report.step_accounted_seconds, 0.0) << table;
  EXPECT_LE(report.step_accounted_seconds, report.step_seconds) << table;
  EXPECT_LE(report.step_op_seconds, report.step_seconds) << table;
  EXPECT_GT(report.optimizer_seconds, 0.0) << table;

  // Every phase is there, with the op table's FLOPs: the convolutions of one step of 32 images.
  const observe::OpProfile* conv_forward = find_row(report, "conv2d", "forward");
  ASSERT_NE(conv_forward, nullptr) << table;
  EXPECT_EQ(conv_forward->calls, 2);
  // conv1: 26*26*32 outputs * 9 taps * 1 channel; conv2: 11*11*64 * 9 * 32; 2 FLOPs each, and
  // one more per output for the fused bias.
  const double conv_flops = 2.0 * 32 * (26 * 26 * 32 * 9 * 1 + 11 * 11 * 64 * 9 * 32) +
                            32.0 * (26 * 26 * 32 + 11 * 11 * 64);
  EXPECT_EQ(conv_forward->flops, conv_flops);
  EXPECT_NE(find_row(report, "conv2d_backward_filter", "backward"), nullptr) << table;
  EXPECT_NE(find_row(report, "adam_update", "optimizer"), nullptr) << table;
  EXPECT_NE(table.find("GFLOP/s"), std::string::npos);
  EXPECT_NE(table.find("1 step,"), std::string::npos) << table;
}

TEST(Profiler, TheTraceIsChromeTraceEventJson) {
  ScratchDir dir;
  const std::string path = dir.file("trace.json");
  profile_cnn(2, 3, path);
  const nlohmann::json trace = read_json(path);
  ASSERT_TRUE(trace.is_object());
  ASSERT_TRUE(trace.contains("traceEvents"));
  const nlohmann::json& events = trace["traceEvents"];
  ASSERT_TRUE(events.is_array());
  std::map<std::string, int> kinds;
  int steps = 0;
  bool named_process = false;
  for (const nlohmann::json& event : events) {
    // What Perfetto's and Chrome's JSON importers need of every event.
    ASSERT_TRUE(event.contains("ph") && event["ph"].is_string()) << event;
    ASSERT_TRUE(event.contains("pid") && event["pid"].is_number_integer()) << event;
    ASSERT_TRUE(event.contains("tid") && event["tid"].is_number_integer()) << event;
    ASSERT_TRUE(event.contains("name") && event["name"].is_string()) << event;
    const std::string phase = event["ph"];
    if (phase == "M") {
      ASSERT_TRUE(event["args"]["name"].is_string()) << event;
      named_process |= event["name"] == "process_name";
      continue;
    }
    ASSERT_EQ(phase, "X") << event;  // complete events: a start and a duration
    ASSERT_TRUE(event["ts"].is_number()) << event;
    ASSERT_TRUE(event["dur"].is_number()) << event;
    EXPECT_GE(event["ts"].get<double>(), 0.0);
    EXPECT_GE(event["dur"].get<double>(), 0.0);
    const std::string category = event["cat"];
    ++kinds[category];
    if (category == "step") ++steps;
    if (category.starts_with("op,")) {
      EXPECT_TRUE(event["args"]["flops"].is_number()) << event;
      EXPECT_TRUE(event["args"]["device"].is_string()) << event;
      EXPECT_TRUE(event["args"]["inputs"].is_string()) << event;
    }
  }
  EXPECT_TRUE(named_process);
  EXPECT_EQ(steps, 2);
  for (const char* category : {"op,forward", "op,backward", "op,optimizer", "forward", "backward",
                               "optimizer", "input wait"}) {
    EXPECT_GT(kinds[category], 0) << category;
  }
}

TEST(ProfilerCallback, AWindowPastTheEndOfTrainingProfilesNothing) {
  const observe::ProfileReport report = [] {
    manual_seed(1);
    data::TensorDataset dataset(random_uniform({8, 4}, 0.0, 1.0), Tensor::zeros({8}, DType::i32));
    dataset.batch(4);
    nn::Model model = nn::zoo::build("mlp", {4}, 2);
    model.compile(
        {.optimizer = "adam", .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
    auto profiler = std::make_shared<Profiler>();
    auto callback = std::make_shared<observe::ProfilerCallback>(profiler, 100, 101);
    model.fit(dataset, {.epochs = 1, .verbose = 0, .callbacks = {callback}});
    EXPECT_FALSE(callback->finished());
    EXPECT_FALSE(profiler->running());
    return profiler->report();
  }();
  EXPECT_EQ(report.steps, 0);
  EXPECT_TRUE(report.ops.empty());
  EXPECT_THROW(observe::ProfilerCallback(std::make_shared<Profiler>(), 5, 4), InvalidArgument);
}

}  // namespace
}  // namespace tandem::testing
