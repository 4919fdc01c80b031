// The stages with threads of their own: map (sequential, or on a pool of num_parallel_calls
// threads, fixed or autotuned, in order or not) and prefetch (a background producer with a
// fixed or autotuned buffer).
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "data/nodes.h"
#include "data/prefetch.h"

namespace tandem::data {
namespace {

// ---- map ----

class MapNode final : public Node {
 public:
  MapNode(NodePtr input, MapFn fn, MapOptions options)
      : Node({std::move(input)}), fn_(std::move(fn)), options_(std::move(options)) {
    if (!fn_) throw InvalidArgument("Pipeline::map: the function is empty");
    if (options_.num_parallel_calls < 1 && options_.num_parallel_calls != kAutotune) {
      throw InvalidArgument(
          "Pipeline::map: num_parallel_calls must be >= 1 or data::kAutotune, got " +
          std::to_string(options_.num_parallel_calls));
    }
  }
  std::string name() const override {
    return options_.name.empty() ? "map" : "map(" + options_.name + ")";
  }
  bool asynchronous() const override { return options_.num_parallel_calls != 1; }
  std::int64_t cardinality() const override { return input().cardinality(); }
  std::int64_t examples() const override { return input().examples(); }
  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override;

  const MapFn& fn() const { return fn_; }
  const MapOptions& options() const { return options_; }

 private:
  MapFn fn_;
  MapOptions options_;
};

class SequentialMapStream final : public Stream {
 public:
  SequentialMapStream(const MapNode& node, std::unique_ptr<Stream> input, StageCounters& self)
      : node_(node), input_(std::move(input)), self_(self) {}

  std::optional<Element> next() override {
    while (std::optional<Element> element = input_->next()) {
      std::optional<Element> result = apply_guarded(node_.fn(), std::move(*element), node_.name(),
                                                    node_.options().on_error, self_);
      if (result) return result;
    }
    return std::nullopt;
  }

 private:
  const MapNode& node_;
  std::unique_ptr<Stream> input_;
  StageCounters& self_;
};

// Workers pull input elements one at a time (in input order, under a lock), transform them
// outside it and file each result under its sequence number; the consumer takes results in
// sequence (deterministic) or as they come. Results ready and in flight together stay within
// twice the current parallelism.
class ParallelMapStream final : public Stream {
 public:
  ParallelMapStream(const MapNode& node, std::unique_ptr<Stream> input, StageCounters& self,
                    std::shared_ptr<Knob> knob, int threads)
      : node_(node), input_(std::move(input)), self_(self), knob_(std::move(knob)) {
    if (knob_) {
      knob_->attach([this] {
        std::lock_guard lock(mutex_);
        changed_.notify_all();
      });
    } else {
      self_.parallelism.store(threads, std::memory_order_relaxed);
    }
    fixed_threads_ = threads;
    self_.buffer.store(2 * parallelism(), std::memory_order_relaxed);
    for (int worker = 0; worker < threads; ++worker)
      workers_.emplace_back([this, worker] { work(worker); });
  }

  ~ParallelMapStream() override {
    if (knob_) knob_->detach();
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (std::thread& worker : workers_)
      worker.join();
  }

  std::optional<Element> next() override {
    std::unique_lock lock(mutex_);
    while (true) {
      auto ready = node_.options().deterministic ? results_.find(next_out_) : results_.begin();
      if (ready != results_.end()) {
        Result result = std::move(ready->second);
        results_.erase(ready);
        ++next_out_;
        lock.unlock();
        changed_.notify_all();
        if (result.error) std::rethrow_exception(result.error);
        if (result.element) return result.element;
        lock.lock();  // a skipped element: on to the next
        continue;
      }
      if (input_done_ && in_flight_ == 0) return std::nullopt;
      changed_.wait(lock);
    }
  }

 private:
  struct Result {
    std::optional<Element> element;  // empty and no error: skipped
    std::exception_ptr error;
  };

  int parallelism() const { return knob_ ? knob_->value() : fixed_threads_; }

  void work(int worker) {
    while (true) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] {
          const int threads = parallelism();
          return stopping_ || input_done_ ||
                 (worker < threads && in_flight_ + static_cast<int>(results_.size()) < 2 * threads);
        });
        if (stopping_ || input_done_) return;
        ++in_flight_;
      }
      std::optional<Element> element;
      std::exception_ptr input_error;
      std::int64_t sequence = 0;
      {
        std::lock_guard input_lock(input_mutex_);
        if (!input_exhausted_) {
          try {
            element = input_->next();
          } catch (...) {
            input_error = std::current_exception();
          }
          input_exhausted_ = !element;
          sequence = next_sequence_++;
        }
      }
      if (!element && !input_error) {
        std::lock_guard lock(mutex_);
        --in_flight_;
        input_done_ = true;
        changed_.notify_all();
        return;
      }
      Result result;
      if (input_error) {
        result.error = input_error;
      } else {
        const std::int64_t start = now_ns();
        try {
          result.element = apply_guarded(node_.fn(), std::move(*element), node_.name(),
                                         node_.options().on_error, self_);
        } catch (...) {
          result.error = std::current_exception();
        }
        self_.add_busy(now_ns() - start);
      }
      {
        std::lock_guard lock(mutex_);
        --in_flight_;
        results_.emplace(sequence, std::move(result));
        // An input that failed cannot go on; what was read before it still comes out.
        if (input_error) input_done_ = true;
      }
      changed_.notify_all();
    }
  }

  const MapNode& node_;
  std::unique_ptr<Stream> input_;
  StageCounters& self_;
  std::shared_ptr<Knob> knob_;
  int fixed_threads_ = 1;

  std::mutex input_mutex_;
  std::int64_t next_sequence_ = 0;  // under input_mutex_
  bool input_exhausted_ = false;    // under input_mutex_

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::int64_t, Result> results_;
  std::int64_t next_out_ = 0;
  int in_flight_ = 0;
  bool input_done_ = false;
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // last: they start once everything they touch exists
};

std::unique_ptr<Stream> MapNode::open(const PassContext& context, StageCounters& self) const {
  StageCounters* input_counters = nullptr;
  std::unique_ptr<Stream> input = open_input(*this, context, self, 0, &input_counters);
  if (options_.num_parallel_calls == 1) {
    return std::make_unique<SequentialMapStream>(*this, std::move(input), self);
  }
  if (options_.num_parallel_calls == kAutotune) {
    const int budget = context.state->cpu_budget;
    auto knob = context.state->autotuner.add(Knob::Kind::parallelism, self, input_counters,
                                             /*initial=*/1, /*maximum=*/budget);
    return std::make_unique<ParallelMapStream>(*this, std::move(input), self, std::move(knob),
                                               budget);
  }
  return std::make_unique<ParallelMapStream>(*this, std::move(input), self, nullptr,
                                             options_.num_parallel_calls);
}

// ---- prefetch ----

class PrefetchNode final : public Node {
 public:
  // The autotuner's first depth, and its ceiling (the RAM budget may stop it earlier).
  static constexpr int kInitialAutotuneDepth = 2;
  static constexpr int kMaximumAutotuneDepth = 64;

  PrefetchNode(NodePtr input, int buffer_size)
      : Node({std::move(input)}), buffer_size_(buffer_size) {
    if (buffer_size < 1 && buffer_size != kAutotune) {
      throw InvalidArgument(
          "Pipeline::prefetch: buffer_size must be >= 1 or data::kAutotune, got " +
          std::to_string(buffer_size));
    }
  }
  std::string name() const override {
    return buffer_size_ == kAutotune ? "prefetch(autotune)"
                                     : "prefetch(" + std::to_string(buffer_size_) + ")";
  }
  bool asynchronous() const override { return true; }
  std::int64_t cardinality() const override { return input().cardinality(); }
  std::int64_t examples() const override { return input().examples(); }

  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override {
    class PrefetchStream final : public Stream {
     public:
      PrefetchStream(std::unique_ptr<Stream> input, std::shared_ptr<Knob> knob, int depth)
          : input_(std::move(input)),
            knob_(std::move(knob)),
            depth_(depth),
            queue_([this] { return input_->next(); },
                   [this] { return static_cast<std::size_t>(knob_ ? knob_->value() : depth_); }) {
        if (knob_) knob_->attach([this] { queue_.wake(); });
      }
      ~PrefetchStream() override {
        if (knob_) knob_->detach();
      }
      std::optional<Element> next() override { return queue_.pop(); }

     private:
      std::unique_ptr<Stream> input_;
      std::shared_ptr<Knob> knob_;
      int depth_;
      BackgroundQueue<Element> queue_;  // last: destroyed (its thread joined) first
    };
    StageCounters* input_counters = nullptr;
    std::unique_ptr<Stream> input = open_input(*this, context, self, 0, &input_counters);
    std::shared_ptr<Knob> knob;
    if (buffer_size_ == kAutotune) {
      knob = context.state->autotuner.add(Knob::Kind::buffer, self, input_counters,
                                          kInitialAutotuneDepth, kMaximumAutotuneDepth);
    } else {
      self.buffer.store(buffer_size_, std::memory_order_relaxed);
    }
    return std::make_unique<PrefetchStream>(std::move(input), std::move(knob), buffer_size_);
  }

 private:
  int buffer_size_;
};

}  // namespace

NodePtr make_map_node(NodePtr input, MapFn fn, MapOptions options) {
  return std::make_shared<MapNode>(std::move(input), std::move(fn), std::move(options));
}
NodePtr make_prefetch_node(NodePtr input, int buffer_size) {
  return std::make_shared<PrefetchNode>(std::move(input), buffer_size);
}

}  // namespace tandem::data
