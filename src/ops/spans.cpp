#include "tandem/spans.h"

#include <atomic>
#include <utility>

namespace tandem {
namespace {

std::atomic<SpanObserver*> span_observer{nullptr};
thread_local SpanKind innermost_phase = SpanKind::step;

bool is_phase(SpanKind kind) {
  return kind == SpanKind::forward || kind == SpanKind::backward || kind == SpanKind::optimizer;
}

}  // namespace

void set_span_observer(SpanObserver* observer) {
  span_observer.store(observer, std::memory_order_release);
}

SpanKind current_phase() {
  return innermost_phase;
}

SpanScope::SpanScope(SpanKind kind, std::string_view label)
    : observer_(span_observer.load(std::memory_order_acquire)),
      kind_(kind),
      outer_phase_(innermost_phase) {
  if (is_phase(kind)) innermost_phase = kind;
  if (observer_ == nullptr) return;
  label_ = label;
  begin_value_ = observer_->span_begin(kind);
}

SpanScope::~SpanScope() {
  innermost_phase = outer_phase_;
  if (observer_ != nullptr) observer_->span_end(kind_, std::move(label_), begin_value_);
}

}  // namespace tandem
