#pragma once
// AUTOTUNE: a background controller that adjusts the parallelism of map stages and the depth of
// prefetch buffers from what the stages measure, within the pipeline's CPU and RAM budgets.
//
// Every tick it looks at each knob's stage over the last interval:
// - parallelism: when the stage's consumer waited on it and its threads were busy, one thread
//   more (while the threads of all autotuned stages stay within the CPU budget); when its
//   threads idled and nobody waited, one fewer.
// - buffer: when the consumer found the buffer empty although the producer could keep up on
//   average (it idled part of the time), a deeper buffer absorbs the bursts (within the RAM
//   budget, shared by all autotuned buffers).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/stats.h"

namespace tandem::data {

// 0 means every hardware thread.
int resolve_cpu_budget(int requested);

// One tunable setting of a running stage.
class Knob {
 public:
  enum class Kind { parallelism, buffer };
  Knob(Kind kind, StageCounters& stage, StageCounters* input, int initial, int maximum);

  Kind kind() const { return kind_; }
  int value() const { return value_.load(std::memory_order_relaxed); }
  int maximum() const { return maximum_; }
  StageCounters& stage() const { return stage_; }
  StageCounters* input() const { return input_; }

  // The stage's wake-up call, run after the value changes; cleared when the stage closes.
  void attach(std::function<void()> on_change);
  void detach();
  bool attached() const;
  void set(int value);

 private:
  const Kind kind_;
  StageCounters& stage_;
  StageCounters* input_;
  const int maximum_;
  std::atomic<int> value_;
  mutable std::mutex mutex_;
  std::function<void()> on_change_;
};

class Autotuner {
 public:
  Autotuner(int cpu_budget, std::int64_t ram_budget);
  ~Autotuner();
  Autotuner(const Autotuner&) = delete;
  Autotuner& operator=(const Autotuner&) = delete;

  // Registers a knob (its stage attaches its wake-up call) and starts the controller thread
  // with the first one.
  std::shared_ptr<Knob> add(Knob::Kind kind, StageCounters& stage, StageCounters* input,
                            int initial, int maximum);
  // One controller step over an interval of `seconds`; public for tests.
  void tick(double seconds);
  int cpu_budget() const { return cpu_budget_; }

 private:
  struct Tracked {
    std::shared_ptr<Knob> knob;
    std::int64_t busy_ns = 0;
    std::int64_t wait_ns = 0;
    std::int64_t input_wait_ns = 0;
  };
  void run();

  const int cpu_budget_;
  const std::int64_t ram_budget_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Tracked> knobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tandem::data
