#include "tandem/spans.h"

#include <atomic>
#include <utility>

namespace tandem {
namespace {

std::atomic<SpanObserver*> span_observer{nullptr};

}  // namespace

void set_span_observer(SpanObserver* observer) {
  span_observer.store(observer, std::memory_order_release);
}

SpanScope::SpanScope(SpanKind kind, std::string_view label)
    : observer_(span_observer.load(std::memory_order_acquire)), kind_(kind) {
  if (observer_ == nullptr) return;
  label_ = label;
  begin_value_ = observer_->span_begin(kind);
}

SpanScope::~SpanScope() {
  if (observer_ != nullptr) observer_->span_end(kind_, std::move(label_), begin_value_);
}

}  // namespace tandem
