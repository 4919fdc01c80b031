#pragma once
// What the profiler records, shared by the Profiler, TraceScope and ProfilerCallback: op events
// from the OpObserver hook and spans, on every thread, with steady-clock nanoseconds.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/op_table.h"
#include "tandem/observe.h"

namespace tandem::observe::detail {

std::int64_t now_ns();

// The phase an op is attributed to: the innermost forward/backward/optimizer span around it.
enum class Phase : std::uint8_t { other, forward, backward, optimizer };
const char* phase_name(Phase phase);

struct OpEvent {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t thread = 0;
  OpKind kind{};
  const char* name = nullptr;  // as the table shows it: a compiled step's fused nodes by theirs
  Phase phase = Phase::other;
  Device device;
  OpCost cost;
  std::vector<TensorMeta> inputs;
  // Devices whose kernels finish after run() returns (CUDA) time them in their own queue: the
  // timer until the profiler stops, then the seconds it measured.
  std::shared_ptr<KernelTimer> timer;
  double device_seconds = -1.0;  // < 0: timed by the host clock

  // The op's time: on the device where it has a timer of its own, else on the host.
  double seconds() const {
    return device_seconds >= 0.0 ? device_seconds : static_cast<double>(end_ns - start_ns) * 1e-9;
  }
};

struct SpanEvent {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t thread = 0;
  SpanKind kind = SpanKind::user;
  std::string label;
};

// A small number for the calling thread (0, 1, ... in order of first use) and its name.
std::uint32_t thread_index();
std::string thread_name(std::uint32_t index);

// The running profiler's store; ops and spans of every thread go to it under one lock.
class Recorder {
 public:
  explicit Recorder(ProfilerOptions options);

  void add_op(OpEvent event);
  void add_span(SpanEvent event);
  // The op's placement line and fallback warning, when the options ask for them.
  void check_placement(const OpEvent& event);

  struct Snapshot {
    std::vector<OpEvent> ops;
    std::vector<SpanEvent> spans;
    std::int64_t origin_ns = 0;
    std::int64_t fallbacks = 0;
  };
  Snapshot snapshot() const;
  void clear();
  // Waits for the device timers of the ops recorded and keeps their seconds.
  void resolve_device_times();

 private:
  ProfilerOptions options_;
  mutable std::mutex mutex_;
  std::vector<OpEvent> ops_;
  std::vector<SpanEvent> spans_;
  std::int64_t origin_ns_;
  std::int64_t fallbacks_ = 0;
  std::vector<bool> warned_;  // per OpKind: fallback already reported
};

// The recorder of the running profiler, or null.
std::shared_ptr<Recorder> active_recorder();
// Records a span when a profiler is running (ProfilerCallback's step spans).
void record_span(SpanKind kind, std::string label, std::int64_t start_ns, std::int64_t end_ns);

}  // namespace tandem::observe::detail
