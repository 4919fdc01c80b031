// Bench reports for machines (JSON, CSV) and people (Markdown), reading them back, and the
// change between two runs.
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/files.h"
#include "tandem/bench.h"
#include "tandem/error.h"
#include "tandem/runtime.h"

namespace tandem::bench {
namespace {

using nlohmann::json;

json summary_json(const Summary& s) {
  return {{"count", s.count}, {"median", s.median}, {"p10", s.p10}, {"p90", s.p90},
          {"mean", s.mean},   {"min", s.min},       {"max", s.max}};
}

Summary summary_from(const json& j) {
  Summary s;
  s.count = j.value("count", std::size_t{0});
  s.median = j.value("median", 0.0);
  s.p10 = j.value("p10", 0.0);
  s.p90 = j.value("p90", 0.0);
  s.mean = j.value("mean", 0.0);
  s.min = j.value("min", 0.0);
  s.max = j.value("max", 0.0);
  return s;
}

json row_json(const Row& row) {
  json ops = json::array();
  for (const OpWork& op : row.ops) {
    ops.push_back({{"op", op.op},
                   {"phase", op.phase},
                   {"calls", op.calls},
                   {"flops", op.flops},
                   {"bytes", op.bytes},
                   {"seconds", op.seconds}});
  }
  return {{"kind", row.kind},
          {"framework", row.framework},
          {"framework_version", row.framework_version},
          {"model", row.model},
          {"device", row.device},
          {"device_name", row.device_name},
          {"precision", row.precision},
          {"batch_size", row.batch_size},
          {"threads", row.threads},
          {"samples_per_second", row.samples_per_second},
          {"window_samples_per_second", row.window_samples_per_second},
          {"step_seconds", row.step_seconds},
          {"step", summary_json(row.step)},
          {"epoch_seconds", row.epoch_seconds},
          {"epoch_examples", row.epoch_examples},
          {"epoch_seconds_projected", row.epoch_seconds_projected},
          {"peak_memory_bytes", row.peak_memory_bytes},
          {"device_utilization_percent", row.device_utilization_percent},
          {"machine_cpu_percent", row.machine_cpu_percent},
          {"other_cpu_cores", row.other_cpu_cores},
          {"input_wait_share", row.input_wait_share},
          {"compile_seconds", row.compile_seconds},
          {"first_step_seconds", row.first_step_seconds},
          {"training_step", row.training_step},
          {"flops_per_step", row.flops_per_step},
          {"bytes_per_step", row.bytes_per_step},
          {"peak_flops", row.peak_flops},
          {"memory_bandwidth", row.memory_bandwidth},
          {"peak_source", row.peak_source},
          {"mfu", row.mfu},
          {"price_per_hour", row.price_per_hour},
          {"price_source", row.price_source},
          {"cost",
           {{"per_1000_steps", row.cost.per_1000_steps},
            {"per_million_samples", row.cost.per_million_samples},
            {"per_epoch", row.cost.per_epoch}}},
          {"roofline_step_seconds", row.roofline_step_seconds},
          {"calibration_ratio", row.calibration_ratio},
          {"calibrated_on", row.calibrated_on},
          {"tandem_ratio", row.tandem_ratio},
          {"ops", ops}};
}

Row row_from(const json& j) {
  Row row;
  row.kind = j.at("kind").get<std::string>();
  row.framework = j.value("framework", "");
  row.framework_version = j.value("framework_version", "");
  row.model = j.at("model").get<std::string>();
  row.device = j.at("device").get<std::string>();
  row.device_name = j.value("device_name", "");
  row.precision = j.at("precision").get<std::string>();
  row.batch_size = j.at("batch_size").get<std::int64_t>();
  row.threads = j.value("threads", 0);
  row.samples_per_second = j.at("samples_per_second").get<double>();
  row.window_samples_per_second = j.value("window_samples_per_second", std::vector<double>{});
  row.step_seconds = j.value("step_seconds", std::vector<double>{});
  if (j.contains("step")) row.step = summary_from(j.at("step"));
  row.epoch_seconds = j.value("epoch_seconds", std::vector<double>{});
  row.epoch_examples = j.value("epoch_examples", std::int64_t{0});
  row.epoch_seconds_projected = j.value("epoch_seconds_projected", 0.0);
  row.peak_memory_bytes = j.value("peak_memory_bytes", std::int64_t{0});
  row.device_utilization_percent = j.value("device_utilization_percent", -1.0);
  row.machine_cpu_percent = j.value("machine_cpu_percent", -1.0);
  row.other_cpu_cores = j.value("other_cpu_cores", -1.0);
  row.input_wait_share = j.value("input_wait_share", 0.0);
  row.compile_seconds = j.value("compile_seconds", -1.0);
  row.first_step_seconds = j.value("first_step_seconds", -1.0);
  row.training_step = j.value("training_step", std::string());
  row.flops_per_step = j.value("flops_per_step", 0.0);
  row.bytes_per_step = j.value("bytes_per_step", 0.0);
  row.peak_flops = j.value("peak_flops", 0.0);
  row.memory_bandwidth = j.value("memory_bandwidth", 0.0);
  row.peak_source = j.value("peak_source", "");
  row.mfu = j.value("mfu", -1.0);
  row.price_per_hour = j.value("price_per_hour", -1.0);
  row.price_source = j.value("price_source", "");
  if (j.contains("cost")) {
    const json& cost = j.at("cost");
    row.cost.per_1000_steps = cost.value("per_1000_steps", 0.0);
    row.cost.per_million_samples = cost.value("per_million_samples", 0.0);
    row.cost.per_epoch = cost.value("per_epoch", 0.0);
  }
  row.roofline_step_seconds = j.value("roofline_step_seconds", 0.0);
  row.calibration_ratio = j.value("calibration_ratio", 0.0);
  row.calibrated_on = j.value("calibrated_on", "");
  row.tandem_ratio = j.value("tandem_ratio", 0.0);
  for (const json& op : j.value("ops", json::array())) {
    row.ops.push_back({op.at("op").get<std::string>(), op.value("phase", ""),
                       op.value("calls", std::int64_t{0}), op.value("flops", 0.0),
                       op.value("bytes", 0.0), op.value("seconds", 0.0)});
  }
  return row;
}

// A number for a table cell: `digits` significant digits, or "-" for a missing value.
std::string cell(double value, int digits = 3) {
  if (!std::isfinite(value) || value < 0) return "-";
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

std::string money(double value, bool known) {
  if (!known) return "-";
  char text[64];
  std::snprintf(text, sizeof text, value >= 100 ? "%.0f" : "%.3g", value);
  return text;
}

// Samples per second: whole numbers from 100 up, three significant digits below.
std::string rate(double value) {
  if (!std::isfinite(value) || value < 0) return "-";
  char text[64];
  std::snprintf(text, sizeof text, value >= 100 ? "%.0f" : "%.3g", value);
  return text;
}

std::string milliseconds(double seconds) {
  return rate(seconds * 1e3);
}

std::string percent(double fraction) {
  if (!std::isfinite(fraction) || fraction < 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100.0);
  return text;
}

std::string memory(std::int64_t bytes) {
  return bytes > 0 ? format_memory_size(static_cast<std::size_t>(bytes)) : "-";
}

std::string configuration(const Row& row) {
  return row.model + " " + row.precision + " b" + std::to_string(row.batch_size) + " " + row.device;
}

// Rows identify a configuration by these fields in compare.
std::string identity(const Row& row) {
  return row.kind + "|" + row.framework + "|" + row.model + "|" + row.device + "|" + row.precision +
         "|" + std::to_string(row.batch_size) + "|" + std::to_string(row.threads);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text)
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string number_text(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

}  // namespace

void rank(Report& report) {
  report.cheapest = -1;
  report.fastest = -1;
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const Row& row = report.rows[i];
    if (row.kind != "measured") continue;
    const int index = static_cast<int>(i);
    if (report.fastest < 0 ||
        row.samples_per_second > report.rows[report.fastest].samples_per_second) {
      report.fastest = index;
    }
    if (row.price_per_hour >= 0 &&
        (report.cheapest < 0 ||
         row.cost.per_million_samples < report.rows[report.cheapest].cost.per_million_samples)) {
      report.cheapest = index;
    }
  }
}

std::string to_json(const Report& report) {
  json rows = json::array();
  for (const Row& row : report.rows)
    rows.push_back(row_json(row));
  json skipped = json::array();
  for (const Skipped& skip : report.skipped)
    skipped.push_back({{"kind", skip.kind}, {"what", skip.what}, {"reason", skip.reason}});
  const json document{{"format", "tandem-bench-report"},
                      {"version", 1},
                      {"created", report.created},
                      {"host", report.host},
                      {"cpu", report.cpu},
                      {"tandem_version", report.tandem_version},
                      {"command", report.command},
                      {"prices_origin", report.prices_origin},
                      {"currency", report.currency},
                      {"cheapest", report.cheapest},
                      {"fastest", report.fastest},
                      {"rows", rows},
                      {"skipped", skipped}};
  return document.dump(2) + "\n";
}

Report report_from_json(const std::string& text, const std::string& origin) {
  try {
    const json document = json::parse(text);
    if (document.value("format", "") != "tandem-bench-report") {
      throw IoError(origin +
                    " is not a tandem bench report (no \"format\": "
                    "\"tandem-bench-report\"); pass a file `tandem bench --json` wrote");
    }
    Report report;
    report.created = document.value("created", "");
    report.host = document.value("host", "");
    report.cpu = document.value("cpu", "");
    report.tandem_version = document.value("tandem_version", "");
    report.command = document.value("command", "");
    report.prices_origin = document.value("prices_origin", "");
    report.currency = document.value("currency", "USD");
    for (const json& row : document.at("rows"))
      report.rows.push_back(row_from(row));
    for (const json& skip : document.value("skipped", json::array())) {
      report.skipped.push_back(
          {skip.value("kind", ""), skip.value("what", ""), skip.value("reason", "")});
    }
    rank(report);
    return report;
  } catch (const json::exception& error) {
    throw IoError(origin + " is not a readable tandem bench report (" + error.what() +
                  "); pass a file `tandem bench --json` wrote");
  }
}

// A report holds a few hundred rows; anything much larger is not one.
constexpr std::uint64_t kMaxReportBytes = std::uint64_t{64} << 20;

Report read_report(const std::string& path) {
  const std::vector<std::uint8_t> bytes =
      read_whole_file(path, {.max_bytes = kMaxReportBytes, .context = {}});
  return report_from_json(std::string(bytes.begin(), bytes.end()), path);
}

std::string to_csv(const Report& report) {
  std::string text =
      "kind,framework,framework_version,model,device,device_name,precision,batch_size,threads,"
      "samples_per_second,step_median_s,step_p10_s,step_p90_s,steps_timed,epoch_examples,"
      "epoch_seconds,peak_memory_bytes,device_utilization_percent,machine_cpu_percent,"
      "input_wait_share,"
      "flops_per_step,mfu,price_per_hour,cost_per_1000_steps,cost_per_million_samples,"
      "cost_per_epoch,roofline_step_s,calibration_ratio,tandem_ratio\n";
  for (const Row& row : report.rows) {
    const bool priced = row.price_per_hour >= 0;
    const std::vector<std::string> fields{
        row.kind,
        row.framework,
        row.framework_version,
        row.model,
        row.device,
        row.device_name,
        row.precision,
        std::to_string(row.batch_size),
        std::to_string(row.threads),
        number_text(row.samples_per_second),
        number_text(row.step.median),
        number_text(row.step.p10),
        number_text(row.step.p90),
        std::to_string(row.step.count),
        std::to_string(row.epoch_examples),
        number_text(row.epoch_seconds_projected),
        std::to_string(row.peak_memory_bytes),
        row.device_utilization_percent >= 0 ? number_text(row.device_utilization_percent) : "",
        row.machine_cpu_percent >= 0 ? number_text(row.machine_cpu_percent) : "",
        number_text(row.input_wait_share),
        number_text(row.flops_per_step),
        row.mfu >= 0 ? number_text(row.mfu) : "",
        priced ? number_text(row.price_per_hour) : "",
        priced ? number_text(row.cost.per_1000_steps) : "",
        priced ? number_text(row.cost.per_million_samples) : "",
        priced ? number_text(row.cost.per_epoch) : "",
        row.kind == "estimate" ? number_text(row.roofline_step_seconds) : "",
        row.kind == "estimate" ? number_text(row.calibration_ratio) : "",
        row.kind == "peer" ? number_text(row.tandem_ratio) : ""};
    for (std::size_t i = 0; i < fields.size(); ++i)
      text += (i ? "," : "") + csv_field(fields[i]);
    text += "\n";
  }
  return text;
}

std::string markdown(const Report& report) {
  std::ostringstream out;
  const std::string& cur = report.currency;
  bool any = false;
  for (const Row& row : report.rows) {
    if (row.kind != "measured") continue;
    if (!any) {
      out << "Measured (Tandem " << report.tandem_version << ", " << report.created << ")\n\n"
          << "| model | device | precision | batch | samples/s | step ms median (p10-p90) | "
             "epoch | MFU | peak memory | device util | machine CPU | input wait | "
          << cur << "/1k steps | " << cur << "/1M samples | " << cur << "/epoch |\n"
          << "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
      any = true;
    }
    const bool priced = row.price_per_hour >= 0;
    std::string epoch = rate(row.epoch_seconds_projected) + " s";
    if (!row.epoch_seconds.empty()) {
      epoch = "";
      for (const double seconds : row.epoch_seconds)
        epoch += (epoch.empty() ? "" : " / ") + rate(seconds);
      epoch += " s";
    }
    out << "| " << row.model << " | " << row.device
        << (row.device_name.empty() ? "" : " (" + row.device_name + ")") << " | " << row.precision
        << " | " << row.batch_size << " | " << rate(row.samples_per_second) << " | "
        << milliseconds(row.step.median) << " (" << milliseconds(row.step.p10) << "-"
        << milliseconds(row.step.p90) << ") | " << epoch << " | " << percent(row.mfu) << " | "
        << memory(row.peak_memory_bytes) << " | "
        << (row.device_utilization_percent >= 0 ? cell(row.device_utilization_percent, 3) + "%"
                                                : "-")
        << " | " << (row.machine_cpu_percent >= 0 ? cell(row.machine_cpu_percent, 3) + "%" : "-")
        << " | " << percent(row.input_wait_share) << " | " << money(row.cost.per_1000_steps, priced)
        << " | " << money(row.cost.per_million_samples, priced) << " | "
        << money(row.cost.per_epoch, priced) << " |\n";
  }
  for (const Row& row : report.rows) {
    if (row.kind == "measured" && row.other_cpu_cores >= kBusyMachineCores) {
      out << "\nBusy machine: other processes used " << cell(row.other_cpu_cores, 2)
          << " cores while " << configuration(row)
          << " was measured; its figures are not comparable with a quiet machine's.\n";
    }
  }
  if (report.fastest >= 0) {
    const Row& row = report.rows[report.fastest];
    out << "\nFastest: " << configuration(row) << ", " << rate(row.samples_per_second)
        << " samples/s\n";
  }
  if (report.cheapest >= 0) {
    const Row& row = report.rows[report.cheapest];
    out << "Cheapest: " << configuration(row) << ", " << money(row.cost.per_million_samples, true)
        << " " << cur << " per million samples at " << money(row.price_per_hour, true) << " " << cur
        << "/h (" << row.price_source << ")\n";
  }
  any = false;
  for (const Row& row : report.rows) {
    if (row.kind != "peer") continue;
    if (!any) {
      out << "\nPeers (same model, batch, precision and threads)\n\n"
          << "| model | precision | batch | framework | samples/s | step ms median (p10-p90) | "
             "Tandem / peer | Tandem on |\n|---|---|---:|---|---:|---:|---:|---|\n";
      any = true;
    }
    out << "| " << row.model << " | " << row.precision << " | " << row.batch_size << " | "
        << row.framework << " " << row.framework_version << " | " << rate(row.samples_per_second)
        << " | " << milliseconds(row.step.median) << " (" << milliseconds(row.step.p10) << "-"
        << milliseconds(row.step.p90) << ") | " << cell(row.tandem_ratio, 3) << "x | " << row.device
        << " |\n";
  }
  any = false;
  for (const Row& row : report.rows) {
    if (row.kind != "estimate") continue;
    if (!any) {
      out << "\nEstimates for hardware not present (roofline per op from FLOPs and bytes, "
             "scaled by the measured/roofline ratio, at least 1; not measurements)\n\n"
          << "| model | estimate for | precision | batch | samples/s (estimate) | step ms "
             "(estimate) | roofline ms | ratio | calibrated on | "
          << cur << "/1M samples (estimate) | " << cur << "/epoch (estimate) |\n"
          << "|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|\n";
      any = true;
    }
    const bool priced = row.price_per_hour >= 0;
    out << "| " << row.model << " | " << row.device << " | " << row.precision << " | "
        << row.batch_size << " | " << rate(row.samples_per_second) << " | "
        << milliseconds(row.step.median) << " | " << milliseconds(row.roofline_step_seconds)
        << " | " << cell(row.calibration_ratio, 3) << " | " << row.calibrated_on << " | "
        << money(row.cost.per_million_samples, priced) << " | " << money(row.cost.per_epoch, priced)
        << " |\n";
  }
  if (!report.skipped.empty()) {
    out << "\nSkipped\n\n";
    for (const Skipped& skip : report.skipped)
      out << "- " << skip.what << " (" << skip.kind << "): " << skip.reason << "\n";
  }
  out << "\nPrices: " << report.prices_origin << "\n";
  // Each missing price once, so that a "-" in a cost column never goes unexplained.
  std::set<std::string> unpriced;
  for (const Row& row : report.rows) {
    if (row.kind == "measured" && row.price_per_hour < 0 &&
        unpriced.insert(row.price_source).second) {
      out << "- " << row.device << ": " << row.price_source << "\n";
    }
  }
  return out.str();
}

std::string compare(const Report& before, const Report& after) {
  std::map<std::string, const Row*> earlier;
  for (const Row& row : before.rows)
    earlier.emplace(identity(row), &row);
  std::ostringstream out;
  out << "Comparing " << (before.created.empty() ? "A" : before.created) << " (A) with "
      << (after.created.empty() ? "B" : after.created) << " (B)\n\n"
      << "| kind | configuration | samples/s A | samples/s B | change | step ms A | step ms B | "
         "cost/1M A | cost/1M B |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  std::set<std::string> matched;
  for (const Row& row : after.rows) {
    const std::string key = identity(row);
    const std::string name =
        (row.kind == "peer" ? row.framework + " " : std::string()) + configuration(row);
    const auto found = earlier.find(key);
    if (found == earlier.end()) {
      out << "| " << row.kind << " | " << name << " | - | " << rate(row.samples_per_second)
          << " | new | - | " << milliseconds(row.step.median) << " | - | "
          << money(row.cost.per_million_samples, row.price_per_hour >= 0) << " |\n";
      continue;
    }
    matched.insert(key);
    const Row& old = *found->second;
    const double change = old.samples_per_second > 0
                              ? (row.samples_per_second / old.samples_per_second - 1.0)
                              : std::nan("");
    char change_text[32];
    std::snprintf(change_text, sizeof change_text, "%+.1f%%", change * 100.0);
    out << "| " << row.kind << " | " << name << " | " << rate(old.samples_per_second) << " | "
        << rate(row.samples_per_second) << " | " << (std::isfinite(change) ? change_text : "-")
        << " | " << milliseconds(old.step.median) << " | " << milliseconds(row.step.median) << " | "
        << money(old.cost.per_million_samples, old.price_per_hour >= 0) << " | "
        << money(row.cost.per_million_samples, row.price_per_hour >= 0) << " |\n";
  }
  for (const Row& row : before.rows) {
    if (matched.contains(identity(row))) continue;
    out << "| " << row.kind << " | "
        << (row.kind == "peer" ? row.framework + " " : std::string()) + configuration(row) << " | "
        << rate(row.samples_per_second) << " | - | gone | " << milliseconds(row.step.median)
        << " | - | " << money(row.cost.per_million_samples, row.price_per_hour >= 0) << " | - |\n";
  }
  return out.str();
}

}  // namespace tandem::bench
