// interleave: maps each input element (say, a file name) to a pipeline (its records) and takes
// block_length elements from each of cycle_length open pipelines in turn, opening the next
// input's pipeline in the place of one that ends, as tf.data's interleave does. In parallel mode
// every open pipeline is read ahead by a thread of its own.
#include <condition_variable>
#include <mutex>

#include "data/nodes.h"
#include "data/prefetch.h"

namespace tandem::data {
namespace {

// Elements a parallel slot reads ahead of the consumer.
constexpr std::size_t kSlotReadAhead = 4;

class InterleaveNode final : public Node {
 public:
  InterleaveNode(NodePtr input, std::function<Pipeline(const Element&)> open,
                 InterleaveOptions options)
      : Node({std::move(input)}), open_(std::move(open)), options_(options) {
    if (!open_) throw InvalidArgument("Pipeline::interleave: the function is empty");
    if (options_.cycle_length < 1 && options_.cycle_length != kAutotune) {
      throw InvalidArgument(
          "Pipeline::interleave: cycle_length must be >= 1 or data::kAutotune, "
          "got " +
          std::to_string(options_.cycle_length));
    }
    if (options_.block_length < 1) {
      throw InvalidArgument("Pipeline::interleave: block_length must be >= 1, got " +
                            std::to_string(options_.block_length));
    }
    if (options_.num_parallel_calls < 1 && options_.num_parallel_calls != kAutotune) {
      throw InvalidArgument(
          "Pipeline::interleave: num_parallel_calls must be >= 1 or "
          "data::kAutotune, got " +
          std::to_string(options_.num_parallel_calls));
    }
  }
  std::string name() const override { return parallel() ? "interleave(parallel)" : "interleave"; }
  bool asynchronous() const override { return parallel(); }
  std::int64_t cardinality() const override {
    return input().cardinality() == 0 ? 0 : kUnknownCardinality;
  }
  std::int64_t batch_size() const override { return 0; }
  std::unique_ptr<Stream> open(const PassContext& context, StageCounters& self) const override;

  bool parallel() const { return options_.num_parallel_calls != 1; }
  const InterleaveOptions& options() const { return options_; }
  // The pipeline for one input element; errors name the element.
  Pipeline open_element(const Element& element) const {
    try {
      return open_(element);
    } catch (const IoError& error) {
      throw IoError(element_error(name(), element.origin(), error.what()));
    } catch (const std::exception& error) {
      throw Error(element_error(name(), element.origin(), error.what()));
    }
  }

 private:
  std::function<Pipeline(const Element&)> open_;
  InterleaveOptions options_;
};

// One open input of the cycle.
struct Slot {
  std::optional<Pipeline> pipeline;  // keeps the inner graph alive while it runs
  std::unique_ptr<Stream> stream;
  // Parallel mode: reads `stream` ahead on its own thread.
  std::unique_ptr<BackgroundQueue<Element>> reader;
  int taken_in_block = 0;

  bool open() const { return stream != nullptr; }
  void close() {
    reader.reset();  // joins the reading thread before the stream it reads goes
    stream.reset();
    pipeline.reset();
    taken_in_block = 0;
  }
};

class InterleaveStream final : public Stream {
 public:
  InterleaveStream(const InterleaveNode& node, const PassContext& context, StageCounters& self,
                   int cycle_length)
      : node_(node),
        context_(context),
        self_(self),
        input_(open_input(node, context, self, 0)),
        slots_(static_cast<std::size_t>(cycle_length)) {
    self_.parallelism.store(node.parallel() ? cycle_length : 1, std::memory_order_relaxed);
  }

  ~InterleaveStream() override {
    for (Slot& slot : slots_)
      slot.close();
  }

  std::optional<Element> next() override {
    if (node_.parallel() && !node_.options().deterministic) return next_any();
    if (node_.parallel() && !started_) {
      // Start reading every input of the first cycle at once. The sequential order opens them
      // in the same order, on its first visit to each slot.
      fill_all();
      started_ = true;
    }
    while (true) {
      if (input_done_ && open_slots() == 0) return std::nullopt;
      Slot& slot = slots_[cycle_index_];
      if (!slot.open() && !input_done_) fill(slot);
      if (slot.open()) {
        if (std::optional<Element> element = take(slot)) {
          if (++slot.taken_in_block == node_.options().block_length) {
            slot.taken_in_block = 0;
            advance();
          }
          return element;
        }
        slot.close();
      }
      advance();
    }
  }

 private:
  std::size_t open_slots() const {
    std::size_t count = 0;
    for (const Slot& slot : slots_)
      count += slot.open() ? 1 : 0;
    return count;
  }

  void advance() { cycle_index_ = (cycle_index_ + 1) % slots_.size(); }

  // Opens the next input element's pipeline in `slot`, or marks the input done.
  void fill(Slot& slot) {
    std::optional<Element> element = input_->next();
    if (!element) {
      input_done_ = true;
      input_.reset();
      return;
    }
    const std::int64_t start = now_ns();
    slot.pipeline = node_.open_element(*element);
    PassContext inner = context_;
    inner.pass = mix_keys(context_.pass, element->random_key());
    slot.stream = open_stream(*slot.pipeline->node(), inner, &self_, 1);
    if (node_.parallel()) {
      Stream* stream = slot.stream.get();
      slot.reader = std::make_unique<BackgroundQueue<Element>>([stream] { return stream->next(); },
                                                               [] { return kSlotReadAhead; },
                                                               [this] {
                                                                 std::lock_guard lock(ready_mutex_);
                                                                 ready_.notify_all();
                                                               });
    }
    if (node_.parallel()) self_.add_busy(now_ns() - start);
  }

  std::optional<Element> take(Slot& slot) {
    return slot.reader ? slot.reader->pop() : slot.stream->next();
  }

  // Opens every free slot (parallel reading starts at once for all of them).
  void fill_all() {
    for (Slot& slot : slots_) {
      if (input_done_) break;
      if (!slot.open()) fill(slot);
    }
  }

  // Non-deterministic: whichever open slot has an element (or has ended) first.
  std::optional<Element> next_any() {
    while (true) {
      fill_all();
      if (input_done_ && open_slots() == 0) return std::nullopt;
      Slot* ready = nullptr;
      {
        std::unique_lock lock(ready_mutex_);
        ready_.wait(lock, [&] {
          for (std::size_t i = 0; i < slots_.size(); ++i) {
            Slot& slot = slots_[(cycle_index_ + i) % slots_.size()];
            if (slot.open() && slot.reader->ready()) {
              ready = &slot;
              return true;
            }
          }
          return false;
        });
      }
      advance();
      if (std::optional<Element> element = ready->reader->pop()) return element;
      ready->close();
    }
  }

  const InterleaveNode& node_;
  PassContext context_;
  StageCounters& self_;
  std::unique_ptr<Stream> input_;
  bool input_done_ = false;
  std::vector<Slot> slots_;
  std::size_t cycle_index_ = 0;
  bool started_ = false;
  std::mutex ready_mutex_;
  std::condition_variable ready_;
};

std::unique_ptr<Stream> InterleaveNode::open(const PassContext& context,
                                             StageCounters& self) const {
  const int cycle_length =
      options_.cycle_length == kAutotune ? context.state->cpu_budget : options_.cycle_length;
  return std::make_unique<InterleaveStream>(*this, context, self, cycle_length);
}

}  // namespace

NodePtr make_interleave_node(NodePtr input, std::function<Pipeline(const Element&)> open,
                             InterleaveOptions options) {
  return std::make_shared<InterleaveNode>(std::move(input), std::move(open), options);
}

}  // namespace tandem::data
