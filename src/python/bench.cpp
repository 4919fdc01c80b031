// tandem.bench: `tandem bench`'s fair speed and cost comparisons from Python. A run returns its
// report as JSON (the format `tandem bench --json` writes), which python/tandem/bench.py turns into
// rows for pandas; Markdown and HTML come from the same report.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <sstream>

#include "python/bindings.h"
#include "tandem/bench.h"
#include "tandem/distribute.h"

namespace tandem::python {

void bind_bench(nb::module_& module) {
  nb::module_ bench = module.def_submodule("bench", "tandem bench from Python.");
  bench.def(
      "run",
      [](const std::vector<std::string>& models, const std::vector<std::string>& devices,
         const std::vector<std::string>& precisions, const std::vector<std::int64_t>& batch_sizes,
         const std::vector<std::string>& estimates, const std::vector<std::string>& peers,
         int threads, int steps, int windows, const std::string& peer_python) {
        bench::BenchOptions options;
        options.models = models;
        options.devices = devices;
        options.precisions = precisions;
        options.batch_sizes = batch_sizes;
        options.estimates = estimates;
        options.peers = peers;
        options.threads = threads;
        options.steps = steps;
        options.windows = windows;
        options.peer_python = peer_python;
        options.command = "tandem.bench.run (Python)";
        options.cpu_name = distribute::probe_cpu().model;
        std::ostringstream log;
        bench::Report report;
        {
          nb::gil_scoped_release released;
          report = bench::run(options, log);
        }
        return nb::make_tuple(bench::to_json(report), log.str());
      },
      nb::arg("models"), nb::arg("devices"), nb::arg("precisions"), nb::arg("batch_sizes"),
      nb::arg("estimates"), nb::arg("peers"), nb::arg("threads"), nb::arg("steps"),
      nb::arg("windows"), nb::arg("peer_python"));
  bench.def("markdown", [](const std::string& report_json) {
    return bench::markdown(bench::report_from_json(report_json, "the report"));
  });
  bench.def("html", [](const std::string& report_json) {
    return bench::to_html(bench::report_from_json(report_json, "the report"));
  });
  bench.def("workloads", &bench::workload_names);
}

}  // namespace tandem::python
