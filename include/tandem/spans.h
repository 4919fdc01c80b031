#pragma once
// Spans: stretches of a thread's time with a meaning (a training step, its forward and backward
// passes, the optimizer update, the wait for input). Model::fit and custom loops mark them with
// SpanScope; whoever watches installs a SpanObserver, as an OpObserver watches ops. The ops layer
// holds the hook so the train layer marks fit's phases without knowing the observe layer, whose
// Profiler is the observer (it attributes each op to the innermost forward, backward or
// optimizer span around it and draws the spans in its trace). Without an observer a SpanScope
// costs one atomic load.
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

enum class SpanKind { step, forward, backward, optimizer, input_wait, user };

class SpanObserver {
 public:
  virtual ~SpanObserver() = default;
  // On the span's thread as it opens; the value returned comes back to span_end (the
  // profiler's clock reading). Spans of a thread open and close in nested order.
  virtual std::int64_t span_begin(SpanKind kind) = 0;
  // On the span's thread as it closes. `label` is the SpanScope's, possibly empty.
  virtual void span_end(SpanKind kind, std::string label, std::int64_t begin_value) = 0;
};

// Installs `observer` (null removes it); at most one at a time. A span that began with an
// observer ends with the same one even after it is removed, so an observer must outlive the spans
// it saw begin: make it an object with static storage duration.
void set_span_observer(SpanObserver* observer);

// The innermost forward, backward or optimizer span open on the calling thread, or
// SpanKind::step when none is: a traced step records it for each node, so that a compiled
// step's nodes run inside the same phases as the eager ops they stand for.
SpanKind current_phase();

// Marks a span of the calling thread from construction to destruction:
//   { SpanScope forward(SpanKind::forward); logits = model(x, true); ... }
class SpanScope {
 public:
  explicit SpanScope(SpanKind kind, std::string_view label = {});
  ~SpanScope();
  SpanScope(const SpanScope&) = delete;
  SpanScope& operator=(const SpanScope&) = delete;

 private:
  SpanObserver* observer_ = nullptr;  // the observer at construction, if any
  std::int64_t begin_value_ = 0;
  SpanKind kind_;
  SpanKind outer_phase_;
  std::string label_;
};

}  // namespace tandem
