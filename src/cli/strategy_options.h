#pragma once
// `tandem train`'s options for where and how it trains: --strategy (auto, cpu, gpu, mirrored,
// multi-worker, xla-cpu, xla-gpu, tpu), --replicas and --pjrt-plugin for XLA, the learning-rate
// rule for the global batch and the multi-worker timeouts, and the strategy they make, announced
// with the reason for every fallback.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli/args.h"
#include "tandem/distribute.h"
#include "tandem/train.h"

namespace tandem::cli {

struct StrategyOptions {
  std::string name =
      "auto";        // auto, cpu, gpu, gpu:N, mirrored, multi-worker, xla-cpu, xla-gpu, tpu
  int replicas = 0;  // XLA: devices trained on together; 0: one (xla-cpu, xla-gpu), every TPU core
  std::string pjrt_plugin;  // XLA: the plugin file; empty: the one found for the platform
  // XLA: run eagerly on the platform's device, each op compiled alone (tandem train --jit off),
  // instead of the whole step compiled.
  bool op_by_op = false;
  distribute::LearningRateScaling lr_scaling = distribute::LearningRateScaling::none;
  distribute::MultiWorkerOptions multi_worker;
};

// The options: their help lines and parsing.
const OptionTable<StrategyOptions>& strategy_options();

// The strategy the options ask for. A strategy that cannot run here throws DeviceUnavailable
// naming the option and why (auto falls back instead, down to the CPU).
std::shared_ptr<distribute::Strategy> make_strategy(const StrategyOptions& options);

// "device: cpu (AMD EPYC 7B13, 2 threads, oneDNN ...)", the strategy with the global batch and
// one line per fallback auto-selection took.
void describe_strategy(const distribute::Strategy& strategy, const StrategyOptions& options,
                       std::int64_t per_replica_batch_size, std::ostream& out);

// Why `threads` CPU threads (--threads, 0: every core) will be slow, when they are more than the
// hardware threads this process may run on: the extra ones wait on each other at every kernel.
std::optional<std::string> thread_count_warning(int threads);

// "cpu", "cuda:0": the device of the strategy's first replica.
std::string strategy_device(const distribute::Strategy& strategy);

// What combining gradients cost, as shares of the training steps' time: a line for the results
// ("all-reduce: ...") and keys for the report, when the strategy measured any.
void print_communication(const distribute::Strategy& strategy, const train::History& history,
                         std::ostream& out);
void add_communication(const distribute::Strategy& strategy, const train::History& history,
                       nlohmann::ordered_json& report);

}  // namespace tandem::cli
