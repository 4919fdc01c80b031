#include "data/autotune.h"

#include <algorithm>
#include <chrono>

#include "tandem/runtime.h"

namespace tandem::data {
namespace {

constexpr auto kTickInterval = std::chrono::milliseconds(50);
// The consumer waited this fraction of the interval: the stage is holding it up.
constexpr double kStarvedFraction = 0.05;
// Thread utilisation above which another thread would help, and below which one can go.
constexpr double kBusyUtilisation = 0.7;
constexpr double kIdleUtilisation = 0.3;
// A producer busier than this cannot keep up on average; a deeper buffer would not help.
constexpr double kSaturatedProducer = 0.9;

}  // namespace

int resolve_cpu_budget(int requested) {
  if (requested > 0) return requested;
  return usable_cpu_cores();
}

Knob::Knob(Kind kind, StageCounters& stage, StageCounters* input, int initial, int maximum)
    : kind_(kind), stage_(stage), input_(input), maximum_(maximum), value_(initial) {}

void Knob::attach(std::function<void()> on_change) {
  std::lock_guard lock(mutex_);
  on_change_ = std::move(on_change);
}

void Knob::detach() {
  std::lock_guard lock(mutex_);
  on_change_ = nullptr;
}

bool Knob::attached() const {
  std::lock_guard lock(mutex_);
  return on_change_ != nullptr;
}

void Knob::set(int value) {
  std::lock_guard lock(mutex_);
  value_.store(value, std::memory_order_relaxed);
  (kind_ == Kind::parallelism ? stage_.parallelism : stage_.buffer)
      .store(value, std::memory_order_relaxed);
  if (on_change_) on_change_();
}

Autotuner::Autotuner(int cpu_budget, std::int64_t ram_budget)
    : cpu_budget_(cpu_budget), ram_budget_(ram_budget) {}

Autotuner::~Autotuner() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Knob> Autotuner::add(Knob::Kind kind, StageCounters& stage, StageCounters* input,
                                     int initial, int maximum) {
  auto knob = std::make_shared<Knob>(kind, stage, input, initial, maximum);
  stage.autotuned.store(true, std::memory_order_relaxed);
  (kind == Knob::Kind::parallelism ? stage.parallelism : stage.buffer)
      .store(initial, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  knobs_.push_back(Tracked{knob, stage.busy_ns.load(), stage.wait_ns.load(),
                           input != nullptr ? input->wait_ns.load() : 0});
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  return knob;
}

void Autotuner::run() {
  std::unique_lock lock(mutex_);
  auto last = std::chrono::steady_clock::now();
  while (!wake_.wait_for(lock, kTickInterval, [this] { return stopping_; })) {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last).count();
    last = now;
    lock.unlock();
    tick(seconds);
    lock.lock();
  }
}

void Autotuner::tick(double seconds) {
  if (seconds <= 0.0) return;
  std::lock_guard lock(mutex_);
  std::erase_if(knobs_, [](const Tracked& tracked) { return !tracked.knob->attached(); });
  int threads_in_use = 0;
  int buffers = 0;
  for (const Tracked& tracked : knobs_) {
    if (tracked.knob->kind() == Knob::Kind::parallelism)
      threads_in_use += tracked.knob->value();
    else
      ++buffers;
  }
  for (Tracked& tracked : knobs_) {
    Knob& knob = *tracked.knob;
    StageCounters& stage = knob.stage();
    const std::int64_t busy_ns = stage.busy_ns.load(std::memory_order_relaxed);
    const std::int64_t wait_ns = stage.wait_ns.load(std::memory_order_relaxed);
    const std::int64_t input_wait_ns =
        knob.input() != nullptr ? knob.input()->wait_ns.load(std::memory_order_relaxed) : 0;
    const double busy = static_cast<double>(busy_ns - tracked.busy_ns) * 1e-9;
    const double starved = static_cast<double>(wait_ns - tracked.wait_ns) * 1e-9 / seconds;
    const double producing = static_cast<double>(input_wait_ns - tracked.input_wait_ns) * 1e-9;
    tracked.busy_ns = busy_ns;
    tracked.wait_ns = wait_ns;
    tracked.input_wait_ns = input_wait_ns;
    const int value = knob.value();
    if (knob.kind() == Knob::Kind::parallelism) {
      const double utilisation = busy / (seconds * value);
      if (starved > kStarvedFraction && utilisation > kBusyUtilisation &&
          threads_in_use < cpu_budget_ && value < knob.maximum()) {
        knob.set(value + 1);
        ++threads_in_use;
      } else if (starved < kStarvedFraction / 5 && utilisation < kIdleUtilisation && value > 1) {
        knob.set(value - 1);
        --threads_in_use;
      }
    } else {
      // The producer's time in its input (per second) tells whether it keeps up on average.
      const double producer_load = producing / seconds;
      const std::int64_t elements = stage.elements.load(std::memory_order_relaxed);
      const double element_bytes =
          elements > 0 ? static_cast<double>(stage.bytes.load(std::memory_order_relaxed)) /
                             static_cast<double>(elements)
                       : 0.0;
      const double ram_share = static_cast<double>(ram_budget_) / std::max(1, buffers);
      const bool fits = element_bytes * (value + 1) <= ram_share;
      if (starved > kStarvedFraction && producer_load < kSaturatedProducer && fits &&
          value < knob.maximum()) {
        knob.set(value + 1);
      }
    }
  }
}

}  // namespace tandem::data
