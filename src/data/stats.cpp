// Pipeline statistics: the registry of stage counters, the per-pass snapshot, its table, and
// the advice for an input-bound trainer.
#include "data/stats.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace tandem::data {
namespace {

constexpr std::size_t kSkipReasonsKept = 3;

bool starts_with_any(const std::string& name, std::initializer_list<const char*> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const char* prefix) { return name.starts_with(prefix); });
}

bool is_reader(const std::string& name) {
  return starts_with_any(
      name, {"cifar10", "tfrecord", "image_folder", "list_files", "generator", "cache(read"});
}

// Sources whose elements are in memory before the pass starts (IDX files are read whole when the
// pipeline is built): their work is copying examples into batches, not reading.
bool is_in_memory(const std::string& name) {
  return starts_with_any(name, {"idx", "tensor_slices"});
}

std::string format(const char* pattern, auto... args) {
  char buffer[160];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

std::string percent(double fraction) {
  return format("%.0f%%", 100.0 * fraction);
}

}  // namespace

void StageCounters::record_skip(const std::string& reason) {
  skipped.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(reasons_mutex);
  if (skip_reasons.size() < kSkipReasonsKept) skip_reasons.push_back(reason);
}

StageCounters& StatsRegistry::counters(StageCounters* parent, int slot, const std::string& name,
                                       bool asynchronous) {
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(static_cast<const StageCounters*>(parent), slot);
  if (const auto found = by_key_.find(key); found != by_key_.end()) return *found->second;
  auto counters = std::make_unique<StageCounters>(name, asynchronous);
  StageCounters* created = counters.get();
  entries_[created].counters = std::move(counters);
  by_key_[key] = created;
  if (parent == nullptr) {
    root_ = created;
  } else {
    entries_.at(parent).inputs.emplace_back(slot, created);
  }
  return *created;
}

void StatsRegistry::append(const StageCounters* stage, std::vector<StageStats>& out) const {
  const Entry& entry = entries_.at(stage);
  std::vector<std::pair<int, StageCounters*>> inputs = entry.inputs;
  std::sort(inputs.begin(), inputs.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::int64_t inputs_wait_ns = 0;
  for (const auto& [slot, input] : inputs) {
    append(input, out);
    inputs_wait_ns += input->wait_ns.load(std::memory_order_relaxed);
  }
  StageStats stats;
  stats.name = stage->name;
  stats.elements = stage->elements.load(std::memory_order_relaxed);
  stats.bytes = stage->bytes.load(std::memory_order_relaxed);
  stats.skipped = stage->skipped.load(std::memory_order_relaxed);
  const std::int64_t wait_ns = stage->wait_ns.load(std::memory_order_relaxed);
  const std::int64_t busy_ns = stage->asynchronous
                                   ? stage->busy_ns.load(std::memory_order_relaxed)
                                   : std::max<std::int64_t>(0, wait_ns - inputs_wait_ns);
  stats.busy_seconds = static_cast<double>(busy_ns) * 1e-9;
  stats.wait_seconds = static_cast<double>(wait_ns) * 1e-9;
  stats.parallelism = stage->parallelism.load(std::memory_order_relaxed);
  stats.buffer = stage->buffer.load(std::memory_order_relaxed);
  stats.autotuned = stage->autotuned.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(stage->reasons_mutex);
    stats.skip_reasons = stage->skip_reasons;
  }
  out.push_back(std::move(stats));
}

PipelineStats StatsRegistry::snapshot(double seconds, int cpu_budget) const {
  std::lock_guard lock(mutex_);
  PipelineStats stats;
  stats.seconds = seconds;
  stats.cpu_budget = cpu_budget;
  if (root_ != nullptr) append(root_, stats.stages);
  return stats;
}

std::int64_t PipelineStats::skipped() const {
  return std::accumulate(
      stages.begin(), stages.end(), std::int64_t{0},
      [](std::int64_t sum, const StageStats& stage) { return sum + stage.skipped; });
}

std::string PipelineStats::table() const {
  std::size_t width = 5;
  for (const StageStats& stage : stages)
    width = std::max(width, stage.name.size());
  const int name_width = static_cast<int>(width);
  std::string text =
      format("%-*s %10s %10s %9s %8s %8s %7s %6s %7s\n", name_width, "stage", "elements", "elem/s",
             "MB", "busy s", "wait s", "threads", "buffer", "skipped");
  for (const StageStats& stage : stages) {
    const double rate = seconds > 0.0 ? static_cast<double>(stage.elements) / seconds : 0.0;
    const std::string threads = std::to_string(stage.parallelism) + (stage.autotuned ? "*" : "");
    text += format("%-*s %10lld %10.0f %9.1f %8.2f %8.2f %7s %6d %7lld\n", name_width,
                   stage.name.c_str(), static_cast<long long>(stage.elements), rate,
                   static_cast<double>(stage.bytes) / 1e6, stage.busy_seconds, stage.wait_seconds,
                   threads.c_str(), stage.buffer, static_cast<long long>(stage.skipped));
  }
  return text;
}

std::string PipelineStats::skipped_summary() const {
  const std::int64_t total = skipped();
  if (total == 0) return "";
  std::string text =
      std::to_string(total) + (total == 1 ? " bad element" : " bad elements") + " skipped";
  for (const StageStats& stage : stages) {
    if (stage.skipped == 0) continue;
    text += "; " + std::to_string(stage.skipped) + " in " + stage.name;
    if (!stage.skip_reasons.empty()) text += ", e.g. " + stage.skip_reasons.front();
  }
  return text;
}

std::string PipelineStats::advice() const {
  if (stages.empty()) return "";
  // The stage whose threads carry the most work limits the pipeline's throughput.
  const auto load = [](const StageStats& stage) {
    return stage.busy_seconds / std::max(1, stage.parallelism);
  };
  const auto bottleneck =
      std::max_element(stages.begin(), stages.end(),
                       [&](const StageStats& a, const StageStats& b) { return load(a) < load(b); });
  const double total_busy =
      std::accumulate(stages.begin(), stages.end(), 0.0,
                      [](double sum, const StageStats& stage) { return sum + stage.busy_seconds; });
  const std::string share =
      total_busy > 0.0 ? percent(bottleneck->busy_seconds / total_busy) : std::string("most");
  const auto last_prefetch =
      std::find_if(stages.rbegin(), stages.rend(),
                   [](const StageStats& stage) { return stage.name.starts_with("prefetch"); });
  if (last_prefetch == stages.rend()) {
    return "add .prefetch(data::kAutotune) as the last stage, so that the next batches are made "
           "while the model trains (" +
           bottleneck->name + " does " + share + " of the pipeline's work)";
  }
  const std::string& name = bottleneck->name;
  if (bottleneck > last_prefetch.base() - 1) {
    return name + " runs on the training thread, after the last prefetch, and does " + share +
           " of the pipeline's work: move it before .prefetch(data::kAutotune) so that it runs "
           "ahead of the model";
  }
  if (name.starts_with("map") || name.starts_with("interleave")) {
    if (bottleneck->parallelism < cpu_budget) {
      return "give " + name + " more threads: it does " + share + " of the pipeline's work on " +
             std::to_string(bottleneck->parallelism) + " of " + std::to_string(cpu_budget) +
             " threads; raise its num_parallel_calls or pass data::kAutotune";
    }
    return name + " does " + share + " of the pipeline's work and already uses all " +
           std::to_string(cpu_budget) +
           " threads of the CPU budget: cache() its output if the data fits in memory or on "
           "disk, or make it lighter (random_resized_crop decodes only the crop, at a reduced "
           "DCT scale; a map after batch() transforms whole batches at once)";
  }
  if (is_in_memory(name)) {
    return "none in the pipeline: " + name + " holds its examples in memory and does " + share +
           " of its work copying them into batches (neither threads nor cache() speed that "
           "up); the batches are made on whatever core the training threads leave free, which "
           "a model this small keeps busy: more cores than training threads would end the wait";
  }
  if (is_reader(name)) {
    return "reading is the bottleneck (" + name + " does " + share +
           " of the pipeline's work): read several files at once with interleave(..., "
           "{.num_parallel_calls = data::kAutotune}), or cache() the data so that later epochs "
           "skip the reading";
  }
  if (name.starts_with("shuffle") || name.starts_with("batch") ||
      name.starts_with("padded_batch")) {
    return "assembling batches is the bottleneck (" + name + " does " + share +
           " of the pipeline's work): move per-element work after batch() so that it runs on "
           "whole batches, or cache() the batches";
  }
  return "the slowest stage is " + name + " (" + share +
         " of the pipeline's work): give it more threads, or cache() its output";
}

}  // namespace tandem::data
