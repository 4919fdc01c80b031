// What watching a run costs, measured inside one training run so that the machine's drift and
// other processes hit both sides alike: the main job (the tutorial CNN on Fashion-MNIST, Adam,
// batch 32) trains while its steps alternate, in blocks, between plain and observed. In an
// observed block the TensorBoard callback logs the loss, accuracy, learning rate, throughput
// and input-wait share every step (SummaryWriter to a scratch folder) and the resource monitor
// samples at 1 Hz on its thread (started when the block starts, stopped when it ends; blocks
// last seconds, so it samples within each). Blocks go ABBA after a warm-up block (plain,
// observed, observed, plain, ...); each plain/observed pair gives a throughput ratio, and the
// overhead is 1 - their median.
//
//   observe_overhead [--epochs N] [--block-steps N] [--threads N] [--logdir DIR]
//                    [--data-dir DIR]
//
// The defaults, 12 epochs in blocks of 1000 steps (about 2 s each on 2 cores), give 10 pairs.
//
// Prints the pairs, the median ratio with its spread and one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "tandem/tandem.h"

namespace {

using namespace tandem;

struct Options {
  int epochs = 12;
  std::int64_t block_steps = 1000;
  int threads = 0;
  std::string logdir;
  std::string data_dir = data::kFashionMnistDefaultDir;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "observe_overhead: " << problem
            << "\nusage: observe_overhead [--epochs N] [--block-steps N] [--threads N] "
               "[--logdir DIR] [--data-dir DIR]\n";
  std::exit(2);
}

std::int64_t positive(const std::string& option, const std::string& text) {
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value > 0) return value;
  } catch (const std::exception&) {
  }
  usage(option + " needs a positive integer, got '" + text + "'");
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    if (i + 1 >= argc) usage(option + " needs a value");
    const std::string value = argv[++i];
    if (option == "--epochs") {
      options.epochs = static_cast<int>(positive(option, value));
    } else if (option == "--block-steps") {
      options.block_steps = positive(option, value);
    } else if (option == "--threads") {
      options.threads = static_cast<int>(positive(option, value));
    } else if (option == "--logdir") {
      options.logdir = value;
    } else if (option == "--data-dir") {
      options.data_dir = value;
    } else {
      usage("unknown option " + option);
    }
  }
  return options;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times the steps (as History does: from the end of the previous step to the end of this one)
// and switches observing on and off at block boundaries.
class BlockSwitch final : public train::Callback {
 public:
  struct Block {
    bool observed = false;
    std::int64_t steps = 0;
    double seconds = 0.0;
  };

  BlockSwitch(std::int64_t block_steps, std::shared_ptr<observe::TensorBoard> board,
              observe::ResourceMonitorOptions monitor)
      : block_steps_(block_steps), board_(std::move(board)), monitor_options_(std::move(monitor)) {}

  void on_train_begin(const train::Logs& logs) override {
    board_->set_model(model());
    board_->set_params(params());
    board_->on_train_begin(logs);
  }
  void on_epoch_begin(int epoch, const train::Logs& logs) override {
    board_->on_epoch_begin(epoch, logs);
    previous_end_ = now_seconds();
  }
  void on_train_batch_begin(std::int64_t batch, const train::Logs& logs) override {
    if (observing()) board_->on_train_batch_begin(batch, logs);
  }
  void on_train_batch_end(std::int64_t batch, const train::Logs& logs) override {
    if (observing()) board_->on_train_batch_end(batch, logs);
    const double end = now_seconds();
    Block& block = blocks_.back();
    block.seconds += end - previous_end_;
    ++block.steps;
    if (block.steps == block_steps_) next_block();
    previous_end_ = now_seconds();
  }
  void on_epoch_end(int epoch, const train::Logs& logs) override {
    board_->on_epoch_end(epoch, logs);
  }
  void on_train_end(const train::Logs& logs) override {
    if (monitor_) monitor_->stop();
    board_->on_train_end(logs);
  }

  // Called once before fit: the first block is warm-up, plain.
  void begin() { blocks_.push_back(Block{}); }
  const std::vector<Block>& blocks() const { return blocks_; }

 private:
  bool observing() const { return blocks_.back().observed; }

  // ABBA after the warm-up block: plain, observed, observed, plain, plain, observed, ...
  void next_block() {
    const std::size_t index = blocks_.size();  // of the new block, warm-up is 0
    const bool observed = index % 4 == 2 || index % 4 == 3;
    if (monitor_ && !observed) {
      monitor_->stop();
      monitor_.reset();
    }
    if (observed && !monitor_) {
      monitor_ = std::make_unique<observe::ResourceMonitor>(monitor_options_);
      monitor_->start();
    }
    blocks_.push_back(Block{observed});
  }

  std::int64_t block_steps_;
  std::shared_ptr<observe::TensorBoard> board_;
  observe::ResourceMonitorOptions monitor_options_;
  std::unique_ptr<observe::ResourceMonitor> monitor_;
  std::vector<Block> blocks_;
  double previous_end_ = 0.0;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    set_num_threads(options.threads);
    manual_seed(42);
    const std::string logdir =
        !options.logdir.empty()
            ? options.logdir
            : (std::filesystem::temp_directory_path() / "tandem-observe-overhead").string();
    std::filesystem::remove_all(logdir);

    const data::ImageClassificationData fashion = data::load_fashion_mnist(options.data_dir);
    data::TensorDataset training(fashion.train_images, fashion.train_labels);
    training.shuffle(42).batch(32);
    nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, fashion.num_classes);
    model.compile({.optimizer = train::Adam(1e-3),
                   .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                   .metrics = {"accuracy"}});

    observe::TensorBoardOptions board_options;
    board_options.log_dir = logdir;
    board_options.update_freq = 1;
    board_options.histogram_freq = 0;  // epoch-end work: outside the timed steps anyway
    auto board = std::make_shared<observe::TensorBoard>(board_options);
    observe::ResourceMonitorOptions monitor_options;
    monitor_options.interval_seconds = 1.0;
    monitor_options.csv_path = logdir + "/monitor.csv";
    monitor_options.writer = board->run_writer();
    auto blocks = std::make_shared<BlockSwitch>(options.block_steps, board, monitor_options);
    blocks->begin();
    model.fit(training, {.epochs = options.epochs, .verbose = 0, .callbacks = {blocks}});

    // Pairs of adjacent full blocks, one plain and one observed, after the warm-up block.
    std::vector<double> ratios;
    const std::vector<BlockSwitch::Block>& all = blocks->blocks();
    for (std::size_t i = 1; i + 1 < all.size(); i += 2) {
      const BlockSwitch::Block& a = all[i];
      const BlockSwitch::Block& b = all[i + 1];
      if (a.steps != options.block_steps || b.steps != options.block_steps) break;
      const BlockSwitch::Block& plain = a.observed ? b : a;
      const BlockSwitch::Block& observed = a.observed ? a : b;
      // Same steps in each: the throughput ratio is the inverse ratio of the times.
      ratios.push_back(plain.seconds / observed.seconds);
      std::printf("pair %zu: plain %.1f ms/step, observed %.1f ms/step, ratio %.4f\n",
                  ratios.size(), 1e3 * plain.seconds / plain.steps,
                  1e3 * observed.seconds / observed.steps, ratios.back());
    }
    if (ratios.empty()) {
      std::cerr << "observe_overhead: no complete pair of blocks; train longer (--epochs) or use "
                   "shorter blocks (--block-steps)\n";
      return 1;
    }
    std::vector<double> sorted = ratios;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t middle = sorted.size() / 2;
    const double median =
        sorted.size() % 2 == 1 ? sorted[middle] : 0.5 * (sorted[middle - 1] + sorted[middle]);
    std::printf(
        "observed / plain throughput: median %.4f over %zu pairs of %lld steps (min %.4f, max "
        "%.4f); overhead %.2f%% (target < 2%%: %s)\n",
        median, ratios.size(), static_cast<long long>(options.block_steps), sorted.front(),
        sorted.back(), 100.0 * (1.0 - median), 1.0 - median < 0.02 ? "met" : "NOT met");
    std::printf(
        "{\"pairs\": %zu, \"block_steps\": %lld, \"threads\": %d, \"median_ratio\": %.5f, "
        "\"min_ratio\": %.5f, \"max_ratio\": %.5f, \"overhead\": %.5f}\n",
        ratios.size(), static_cast<long long>(options.block_steps), num_threads(), median,
        sorted.front(), sorted.back(), 1.0 - median);
    return 0;
  } catch (const Error& error) {
    std::cerr << "observe_overhead: " << error.what() << "\n";
    return 1;
  }
}
