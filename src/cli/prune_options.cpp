#include "cli/prune_options.h"

#include <algorithm>

namespace tandem::cli {

const OptionTable<PruneOptions>& prune_options() {
  using O = PruneOptions;
  static const OptionTable<O> table = [] {
    OptionTable<O> options({
        {"--prune", "S",
         "prune the Dense and Conv2D kernels by magnitude to sparsity S (0 < S < 1, e.g. 0.8) "
         "while "
         "training, as TF-MOT's prune_low_magnitude; the zeros stay in the saved model (default: "
         "no pruning)",
         [](O& options, const std::string& option, const std::string& text) {
           options.sparsity = parse_fraction(option, text);
           if (options.sparsity == 0.0 || options.sparsity >= 1.0) {
             throw UsageError(option + " takes a sparsity above 0 and below 1, got '" + text + "'");
           }
         }},
        {"--prune-schedule", "NAME",
         "polynomial (from 0 to S over the first three quarters of the run, TF-MOT's "
         "PolynomialDecay with power 3) or constant (S from the first step) (default polynomial)",
         into(&O::schedule, one_of({"polynomial", "constant"}, "pruning schedule"))},
        {"--prune-pattern", "P",
         "unstructured, or 2:4 (two of every four weights along the input channels, the pattern of "
         "NVIDIA's sparse tensor cores; sparsity 0.5) (default unstructured)",
         into(&O::pattern, one_of({"unstructured", "2:4"}, "pruning pattern"))},
        {"--prune-layers", "NAMES",
         "the layers to prune, comma-separated (default: every Dense and Conv2D)",
         [](O& options, const std::string& option, const std::string& text) {
           options.layers = parse_list(option, text);
         }},
    });
    options.check([](O& options, const ParsedArgs& args) {
      const bool shaped = args.has("--prune-schedule") || args.has("--prune-layers") ||
                          (args.has("--prune-pattern") && options.pattern != "2:4");
      if (shaped && options.sparsity == 0.0 && options.pattern != "2:4") {
        throw UsageError(
            "--prune-schedule, --prune-pattern and --prune-layers shape the pruning that --prune S "
            "asks for; add --prune (e.g. --prune 0.8), or --prune-pattern 2:4");
      }
      if (options.pattern == "2:4") {
        if (options.sparsity != 0.0 && options.sparsity != 0.5) {
          throw UsageError(
              "--prune-pattern 2:4 prunes exactly half the weights; drop --prune or "
              "pass --prune 0.5");
        }
        options.sparsity = 0.5;
      }
    });
    return options;
  }();
  return table;
}

std::shared_ptr<pruning::Pruning> make_pruning(const PruneOptions& options, nn::Model& model,
                                               std::int64_t total_steps) {
  if (options.sparsity == 0.0) return nullptr;
  const std::int64_t frequency = std::clamp<std::int64_t>(total_steps / 20, 1, 100);
  pruning::PruneOptions prune{.layers = options.layers};
  if (options.pattern == "2:4") prune.pattern = pruning::Pattern::two_of_four;
  if (options.schedule == "constant" || options.pattern == "2:4") {
    prune.schedule =
        pruning::ConstantSparsity{.target_sparsity = options.sparsity, .frequency = frequency};
  } else {
    const std::int64_t end = std::max<std::int64_t>(1, total_steps * 3 / 4);
    prune.schedule = pruning::PolynomialDecay{.initial_sparsity = 0.0,
                                              .final_sparsity = options.sparsity,
                                              .begin_step = 0,
                                              .end_step = end - end % frequency,
                                              .frequency = frequency};
  }
  return pruning::prune_low_magnitude(model, std::move(prune));
}

}  // namespace tandem::cli
