// A hyper-parameter sweep of a program's own training function (tandem/sweep.h): the learning
// rate and the width of an MLP on 6,000 Fashion-MNIST images, pre-screened by successive halving
// (every configuration on a quarter of the training images, the better half on half of them, the
// best on all), then the table of trials and an HTML report of their learning curves.
//
//   build/examples/sweep_learning_rate [FOLDER]   (default: a folder in the temporary directory)
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "tandem/data.h"
#include "tandem/tandem.h"

using namespace tandem;

namespace {

constexpr std::int64_t kTraining = 5000;
constexpr std::int64_t kValidation = 1000;

data::Pipeline scaled(const data::Pipeline& examples, std::int64_t batch_size) {
  return examples.batch(batch_size).map(data::cast(DType::f32, 1.0 / 255.0));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string folder =
        argc > 1 ? argv[1]
                 : (std::filesystem::temp_directory_path() / "tandem-sweep-example").string();
    // A fresh sweep each run (the folder would otherwise resume the last one).
    std::filesystem::remove_all(folder);
    const data::IdxFiles files = data::fashion_mnist_files(data::kFashionMnistDefaultDir, "train");
    const data::Pipeline images =
        data::Pipeline::idx(files.images, files.labels, {.num_classes = 10})
            .take(kTraining + kValidation);
    const data::Pipeline validation = scaled(images.skip(kTraining), 256);

    const std::vector<sweep::Axis> space{
        {.name = "lr", .values = {3e-4, 1e-3, 3e-3, 1e-2}},
        {.name = "units", .values = {std::int64_t{32}, std::int64_t{128}}}};
    sweep::SweepOptions options;
    options.folder = folder;
    options.metric = "val_accuracy";
    options.halving = sweep::Halving{.rungs = {0.25, 0.5, 1.0}, .reduction = 2};

    const sweep::Summary summary = sweep::run_sweep(space, options, [&](const sweep::Trial& trial) {
      manual_seed(static_cast<std::uint64_t>(trial.index));
      const auto units = std::get<std::int64_t>(trial.params.at("units"));
      nn::Sequential mlp({nn::Flatten(), nn::Dense(units, "relu"), nn::Dense(10)});
      mlp.build({28, 28, 1});
      nn::Model model(std::move(mlp));
      model.compile({.optimizer = train::Adam(std::get<double>(trial.params.at("lr"))),
                     .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                     .metrics = {"accuracy"}});
      // The rung's budget: a fraction of the training images.
      const auto count = static_cast<std::int64_t>(trial.budget * kTraining);
      const data::Pipeline training = scaled(images.take(count).shuffle(count, 1), 64);
      const train::History history =
          model.fit(training, {.epochs = 3, .verbose = 0, .validation_data = &validation});
      sweep::Outcome outcome{.history = history.history(), .seconds = history.timed_seconds()};
      for (const auto& [name, values] : history.history())
        outcome.metrics[name] = values.back();
      std::printf("%s: val_accuracy %.4f\n", trial.id.c_str(), outcome.metrics.at("val_accuracy"));
      return outcome;
    });
    std::cout << "\n" << summary.table();
    const std::string report = folder + "/report.html";
    std::FILE* file = std::fopen(report.c_str(), "w");
    if (file == nullptr) throw IoError("cannot write " + report);
    const std::string html = sweep::html_report(summary);
    std::fwrite(html.data(), 1, html.size(), file);
    std::fclose(file);
    std::cout << "report: " << report << "\n";
    return summary.best ? 0 : 1;
  } catch (const Error& error) {
    std::fprintf(stderr, "sweep_learning_rate: %s\n", error.what());
    return 1;
  }
}
