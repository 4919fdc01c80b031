#pragma once
// Per-stage counters of a pass, and the registry that keeps them for the pass's statistics.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tandem/pipeline.h"

namespace tandem::data {

struct StageCounters {
  StageCounters(std::string stage_name, bool is_asynchronous)
      : name(std::move(stage_name)), asynchronous(is_asynchronous) {}

  void count_elements(std::int64_t count, std::int64_t nbytes) {
    elements.fetch_add(count, std::memory_order_relaxed);
    bytes.fetch_add(nbytes, std::memory_order_relaxed);
  }
  void count_element(std::int64_t nbytes) { count_elements(1, nbytes); }
  void add_busy(std::int64_t nanoseconds) {
    busy_ns.fetch_add(nanoseconds, std::memory_order_relaxed);
  }
  // Counts a skipped element and keeps the first few reasons for the report.
  void record_skip(const std::string& reason);

  const std::string name;
  // Busy time is counted by the stage's own threads; otherwise it is derived: the time its
  // consumer waited on it less the time it waited on its inputs.
  const bool asynchronous;
  std::atomic<std::int64_t> elements{0};
  std::atomic<std::int64_t> bytes{0};
  std::atomic<std::int64_t> skipped{0};
  std::atomic<std::int64_t> busy_ns{0};
  std::atomic<std::int64_t> wait_ns{0};
  std::atomic<int> parallelism{1};
  std::atomic<int> buffer{0};
  std::atomic<bool> autotuned{false};

  mutable std::mutex reasons_mutex;
  std::vector<std::string> skip_reasons;
};

class StatsRegistry {
 public:
  // The counters of input `slot` of the stage `parent` (nullptr: the stage the user reads),
  // created on first use; later calls with the same key return the same counters.
  StageCounters& counters(StageCounters* parent, int slot, const std::string& name,
                          bool asynchronous);
  // Stages ordered inputs first (depth-first, in slot order), the user's stage last.
  PipelineStats snapshot(double seconds, int cpu_budget) const;

 private:
  struct Entry {
    std::unique_ptr<StageCounters> counters;
    std::vector<std::pair<int, StageCounters*>> inputs;
  };
  void append(const StageCounters* stage, std::vector<StageStats>& out) const;

  mutable std::mutex mutex_;
  std::map<std::pair<const StageCounters*, int>, StageCounters*> by_key_;
  std::map<const StageCounters*, Entry> entries_;
  StageCounters* root_ = nullptr;
};

}  // namespace tandem::data
