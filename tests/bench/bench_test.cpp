// The bench layer's arithmetic and formats: statistics, prices and their TOML, cost, rooflines
// and estimates, the report writers and compare.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "data/idx_files.h"
#include "support/errors.h"
#include "tandem/bench.h"
#include "tandem/error.h"

namespace tandem::bench {
namespace {

using tandem::testing::error_of;
using tandem::testing::ScratchDir;

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in:\n" << text;
}

TEST(BenchStatistics, QuantilesInterpolateBetweenRanks) {
  const std::vector<double> values{10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(quantile(values, 0.5), 5.5);
  EXPECT_DOUBLE_EQ(quantile(values, 0.1), 1.9);
  EXPECT_DOUBLE_EQ(quantile(values, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(quantile(values, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(values, 1.0), 10.0);
  EXPECT_DOUBLE_EQ(quantile({4.0}, 0.3), 4.0);
  const Summary summary = summarize({3, 1, 2, 100});
  EXPECT_EQ(summary.count, 4u);
  EXPECT_DOUBLE_EQ(summary.median, 2.5);
  EXPECT_DOUBLE_EQ(summary.mean, 26.5);
  EXPECT_DOUBLE_EQ(summary.min, 1.0);
  EXPECT_DOUBLE_EQ(summary.max, 100.0);
  EXPECT_NEAR(summary.p90, 70.9, 1e-12);
  expect_contains(error_of([] { summarize({}); }), "empty");
  expect_contains(error_of([] { quantile({1.0}, 1.5); }), "[0, 1]");
}

TEST(BenchCost, StepTimesBecomeMoney) {
  // 3.60 per hour is 0.001 per second; a 0.5 s step costs 0.0005.
  const Cost cost = cost_of(3.6, 0.5, 100, 1050);
  EXPECT_NEAR(cost.per_1000_steps, 0.5, 1e-12);
  EXPECT_NEAR(cost.per_million_samples, 5.0, 1e-12);  // 10,000 steps of 100
  EXPECT_NEAR(cost.per_epoch, 11 * 0.0005, 1e-12);    // 1,050 examples: 11 steps
  EXPECT_THROW(cost_of(1.0, 1.0, 0, 10), InvalidArgument);
}

TEST(BenchPrices, DefaultsHaveSourcesAndDatesAndMatchDeviceNames) {
  const PriceTable table = default_prices();
  EXPECT_EQ(table.currency, "USD");
  ASSERT_GE(table.prices.size(), 11u);
  for (const Price& price : table.prices) {
    EXPECT_FALSE(price.source.empty()) << price.key;
    EXPECT_EQ(price.date.size(), 7u) << price.key;  // YYYY-MM
    EXPECT_GT(price.per_hour, 0.0) << price.key;
  }
  const auto h100 = table.quote("NVIDIA H100 80GB HBM3", 1);
  ASSERT_TRUE(h100);
  EXPECT_DOUBLE_EQ(h100->per_hour, 11.06);
  expect_contains(h100->source, "h100: ");
  const auto cpu = table.quote("cpu", 4);
  ASSERT_TRUE(cpu);
  EXPECT_NEAR(cpu->per_hour, 4 * 0.031611, 1e-12);  // per core-hour x cores
  EXPECT_DOUBLE_EQ(table.quote("TPU v5e", 1)->per_hour, 1.20);
  EXPECT_FALSE(table.quote("Some Other Accelerator", 1));
  PriceTable flat = table;
  flat.flat_per_hour = 7.5;
  EXPECT_DOUBLE_EQ(flat.quote("anything", 8)->per_hour, 7.5);
  EXPECT_EQ(flat.quote("anything", 8)->source, "--price-per-hour");
}

TEST(BenchPrices, ParsesTheSubsetPriceTablesUse) {
  const PriceTable table = parse_prices(
      "# mine\ncurrency = \"EUR\"\n\n[device.\"big gpu\"]  # a comment\nmatch = 'B200'\n"
      "per_hour = 1_000.5 # thousand\nsource = \"quote \\\"42\\\"\"\ndate = \"2026-01\"\n",
      "mine.toml");
  EXPECT_EQ(table.currency, "EUR");
  ASSERT_EQ(table.prices.size(), 1u);
  EXPECT_EQ(table.prices[0].key, "big gpu");
  EXPECT_EQ(table.prices[0].match, "B200");
  EXPECT_DOUBLE_EQ(table.prices[0].per_hour, 1000.5);
  EXPECT_EQ(table.prices[0].source, "quote \"42\"");
  EXPECT_EQ(table.quote("NVIDIA B200", 1)->per_hour, 1000.5);
}

TEST(BenchPrices, BadTomlNamesTheFileLineAndFix) {
  const auto parse = [](const std::string& text) {
    return error_of([&] { parse_prices(text, "prices.toml"); });
  };
  std::string message = parse("[device.a]\nmatch = \"A\"\nsource = \"s\"\ndate = \"d\"\n");
  expect_contains(message, "prices.toml:1: [device.a] has no price");
  expect_contains(message, "per_hour");
  message = parse("[device.a]\nper_hour = 2.x\n");
  expect_contains(message, "prices.toml:2: cannot read the value '2.x'");
  message = parse("[device.a]\nper_hour = 1\ncolour = \"red\"\n");
  expect_contains(message, "prices.toml:3: unknown key 'colour'");
  expect_contains(message, "the keys are match");
  message = parse("[device.a]\nsource = \"open\n");
  expect_contains(message, "prices.toml:2: unterminated string");
  message = parse("[gpu.a]\n");
  expect_contains(message, "prices.toml:1: unknown table [gpu.a]");
  message = parse("[device.a]\nper_hour = 1\nsource = \"s\"\ndate = \"d\"\n[device.a]\n");
  expect_contains(message, "prices.toml:5: [device.a] appears twice");
  message = parse("[device.a]\nper_hour = -3\n");
  expect_contains(message, "prices.toml:2: per_hour must be a non-negative number");
  message = parse("just words\n");
  expect_contains(message, "prices.toml:1: expected 'key = value'");
  message = parse("[device.a]\nper_hour = 1\n");
  expect_contains(message, "prices.toml:1: [device.a] needs source and date");
  message = parse("# nothing\n");
  expect_contains(message, "no [device.<name>] table");
  try {
    load_prices("/nonexistent/prices.toml");
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& error) {
    expect_contains(error.what(), "/nonexistent/prices.toml");
    expect_contains(error.what(), "--print-prices");
  }
}

TEST(BenchPrices, KeepsTheFileOrderAndTakesTomlNumbers) {
  // The first table that matches prices a device, so "A100 80GB" must stay before "A100".
  const PriceTable table = parse_prices(
      "[device.z80]\nmatch = \"A100 80GB\"\nper_hour = 4\nsource = \"s\"\ndate = \"d\"\n"
      "[device.a40]\nmatch = \"A100\"\nper_hour = 3.5\nsource = \"s\"\ndate = \"d\"\n",
      "order.toml");
  ASSERT_EQ(table.prices.size(), 2u);
  EXPECT_EQ(table.prices[0].key, "z80");
  EXPECT_EQ(table.prices[1].key, "a40");
  EXPECT_DOUBLE_EQ(table.quote("NVIDIA A100 80GB", 1)->per_hour, 4.0);  // an integer
  EXPECT_DOUBLE_EQ(table.quote("NVIDIA A100-SXM4-40GB", 1)->per_hour, 3.5);
}

TEST(BenchPrices, TomlSyntaxErrorsNameTheLineThePartAndToml) {
  // Each price table, and what its error says: the line, the part of it at fault (with
  // toml++'s reason and column for syntax errors) and the fix.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"[device.a]\nper_hour = 2.x\n",
       {"prices.toml:2: cannot read the value '2.x' (expected decimal digit", "column 14)",
        "a number such as 2.93"}},
      {"[device.a\nper_hour = 1\n",
       {"prices.toml:1: bad table header '[device.a'", "write [device.<name>]"}},
      {"[device.a]\nper_hour = 1\nper_hour = 2\n",
       {"prices.toml:3: 'per_hour' is set twice", "keep one"}},
      {"[device.a]\nbad key = 1\n", {"prices.toml:2: bad key 'bad key'"}},
      {"[device.a]\nsource = \"a\\qb\"\n",
       {"prices.toml:2: cannot read the string \"a\\qb\"", "escape"}},
      {"[device.a]\nper_hour = 1\n\n\nsource = 's' junk\n",
       {"prices.toml:5: unexpected 'junk' after the value", "put comments after a #"}},
      {"[device.a]\nper_hour = 1\nper_core_hour = 1\n",
       {"prices.toml:3: [device.a] has both per_hour and per_core_hour"}},
      {"[device.a]\nper_hour = 1\nsource = \"s\"\ndate = 2024-06-01\n",
       {"prices.toml:4: date must be a string", "double quotes"}},
      {"currency = \"EUR\"\ncolour = \"red\"\n", {"prices.toml:2: unknown top-level key 'colour'"}},
      {"[device]\nper_hour = 1\n", {"prices.toml:2: 'per_hour' under [device] is not a table"}},
  };
  for (const auto& [text, parts] : cases) {
    const std::string message = error_of([&] { parse_prices(text, "prices.toml"); });
    for (const std::string& part : parts)
      expect_contains(message, part);
  }
}

TEST(BenchPrices, LoadsOnlyASmallRegularFile) {
  ScratchDir dir;
  const std::string good = dir.file("prices.toml");
  std::ofstream(good) << default_prices_toml();
  EXPECT_EQ(load_prices(good).prices.size(), default_prices().prices.size());
  EXPECT_EQ(load_prices(good).origin, good);
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = dir.file("big.toml");
  std::ofstream(big) << std::string((1 << 20) + 1, '#');
  for (const auto& [path, kind] :
       {std::pair<std::string, std::string>{"/dev/zero", "a character device"},
        {dir.path().string(), "a directory"},
        {fifo, "a FIFO"},
        {big, "is 1048577 bytes, more than the 1048576 bytes"}}) {
    try {
      load_prices(path);
      ADD_FAILURE() << "no IoError for " << path;
    } catch (const IoError& error) {
      expect_contains(error.what(), "the price table " + path + ":");
      expect_contains(error.what(), kind);
      expect_contains(error.what(), "--print-prices");
    }
  }
}

TEST(BenchHardware, TableHasSourcesAndMatchesNames) {
  for (const char* key : {"T4", "V100", "A100", "H100", "H200", "TPU v3", "TPU v4", "TPU v5e",
                          "TPU v5p", "TPU v6e"}) {
    const HardwareSpec* spec = find_hardware(key);
    ASSERT_NE(spec, nullptr) << key;
    EXPECT_EQ(spec->key, key);
    EXPECT_NE(spec->source.find("https://"), std::string::npos) << key;
    EXPECT_GT(spec->memory_bandwidth, 1e11) << key;
    EXPECT_GT(spec->peak_bf16_flops + spec->peak_fp32_flops, 1e12) << key;
  }
  EXPECT_EQ(find_hardware("NVIDIA A100-SXM4-80GB")->key, "A100");
  EXPECT_EQ(find_hardware("nvidia h200")->key, "H200");
  EXPECT_EQ(find_hardware("Radeon"), nullptr);
  EXPECT_EQ(peak_flops(*find_hardware("T4"), Precision::bf16), 0.0);  // no bf16 on Turing
  EXPECT_DOUBLE_EQ(peak_flops(*find_hardware("TPU v5e"), Precision::bf16), 197e12);
}

TEST(BenchRoofline, EachOpIsBoundByFlopsOrBytes) {
  const std::vector<OpWork> ops{{"matmul", "forward", 1, 1e12, 1e9, 0.0},
                                {"add", "forward", 1, 1e9, 1e11, 0.0}};
  // matmul: 1 s of compute (0.01 s of memory); add: 1 s of memory (0.001 s of compute).
  EXPECT_DOUBLE_EQ(roofline_seconds(ops, 1e12, 1e11), 2.0);
  EXPECT_THROW(roofline_seconds(ops, 0.0, 1e11), InvalidArgument);
  // 1,000 tiny ops on a GPU cost at least their launches, however fast the arithmetic.
  const std::vector<OpWork> tiny{{"add", "forward", 1000, 1e3, 1e3, 0.0}};
  const HardwareSpec& a100 = *find_hardware("A100");
  EXPECT_DOUBLE_EQ(roofline_seconds(tiny, 1e12, 1e11, a100.min_op_seconds),
                   1000 * a100.min_op_seconds);
  EXPECT_GT(a100.min_op_seconds, 0.0);
  EXPECT_EQ(find_hardware("TPU v5e")->min_op_seconds, 0.0);  // XLA fuses the step's ops
}

Row measured_row(const std::string& device, double samples_per_second, double price) {
  Row row;
  row.kind = "measured";
  row.framework = "tandem";
  row.model = "cnn";
  row.device = device;
  row.device_name = device == "cpu" ? "Test CPU" : device;
  row.precision = "fp32";
  row.batch_size = 32;
  row.threads = 2;
  row.step_seconds = {32 / samples_per_second, 32 / samples_per_second * 1.1,
                      32 / samples_per_second * 0.9};
  row.step = summarize(row.step_seconds);
  row.samples_per_second = samples_per_second;
  row.window_samples_per_second = {samples_per_second};
  row.epoch_examples = 60000;
  row.price_per_hour = price;
  row.price_source = "test price, with a comma";
  row.cost = cost_of(price, row.step.median, row.batch_size, row.epoch_examples);
  row.ops = {{"conv2d", "forward", 2, 1e9, 1e8, 0.01}, {"relu", "forward", 2, 1e6, 8e6, 0.001}};
  row.flops_per_step = 1.001e9;
  row.bytes_per_step = 1.08e8;
  row.peak_flops = 1e11;
  row.memory_bandwidth = 2e10;
  row.mfu = 0.3;
  return row;
}

Report two_row_report() {
  Report report;
  report.created = "2026-11-30T12:00:00Z";
  report.tandem_version = "0.1.0";
  report.prices_origin = "built-in defaults";
  report.rows = {measured_row("cpu", 1000, 0.06), measured_row("cuda:0", 20000, 11.06)};
  report.skipped = {{"measured", "cnn bf16 batch 32 on cuda:1", "no cuda:1 here (1 GPUs)"}};
  rank(report);
  return report;
}

TEST(BenchEstimates, ScaleTheRooflineByTheMeasuredRatioAndStayLabelled) {
  Report report;
  report.rows = {measured_row("cpu", 1000, 0.06)};
  add_estimates(report, {"A100", "TPU v5e"}, default_prices());
  ASSERT_EQ(report.rows.size(), 2u);
  EXPECT_EQ(report.rows[0].kind, "measured");
  const Row& a100 = report.rows[1];
  EXPECT_EQ(a100.kind, "estimate");
  EXPECT_EQ(a100.device, "A100");
  const Row& cpu = report.rows[0];
  const double cpu_roofline = roofline_seconds(cpu.ops, cpu.peak_flops, cpu.memory_bandwidth);
  const double ratio = cpu.step.median / cpu_roofline;
  ASSERT_GT(ratio, 1.0);
  EXPECT_NEAR(a100.calibration_ratio, ratio, 1e-12);
  EXPECT_NEAR(a100.roofline_step_seconds,
              roofline_seconds(cpu.ops, 156e12, 2039e9, find_hardware("A100")->min_op_seconds),
              1e-15);
  EXPECT_NEAR(a100.step.median, a100.roofline_step_seconds * ratio, 1e-15);
  EXPECT_NEAR(a100.samples_per_second, 32 / a100.step.median, 1e-6);
  EXPECT_DOUBLE_EQ(a100.price_per_hour, 2.933908);
  expect_contains(a100.calibrated_on, "cpu (Test CPU)");
  // TPUs publish no fp32 rate: skipped with the reason, not estimated.
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_EQ(report.skipped[0].kind, "estimate");
  expect_contains(report.skipped[0].reason, "TPUs publish no fp32 rate");
  // Estimates never count as the fastest or cheapest measured configuration.
  rank(report);
  EXPECT_EQ(report.fastest, 0);
  const std::string table = markdown(report);
  const auto measured_at = table.find("Measured");
  const auto estimates_at = table.find("Estimates for hardware not present");
  ASSERT_NE(estimates_at, std::string::npos);
  EXPECT_LT(measured_at, estimates_at);
  EXPECT_EQ(table.find("| A100 |"), table.find("| A100 |", estimates_at));
  expect_contains(error_of([&] { add_estimates(report, {"B300"}, default_prices()); }),
                  "no published figures for 'B300'");
}

TEST(BenchEstimates, ARatioBelowOneIsTakenAsOne) {
  Report report;
  report.rows = {measured_row("cpu", 1e6, 0.06)};  // faster than its roofline
  add_estimates(report, {"H100"}, default_prices());
  ASSERT_EQ(report.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(report.rows[1].calibration_ratio, 1.0);
  EXPECT_DOUBLE_EQ(report.rows[1].step.median, report.rows[1].roofline_step_seconds);
}

TEST(BenchEstimates, APresentDeviceIsMeasuredNotEstimated) {
  Report report;
  report.rows = {measured_row("cuda:0", 20000, 11.06)};
  report.rows[0].device_name = "NVIDIA H100 80GB HBM3";
  add_estimates(report, {"all"}, default_prices());
  for (const Row& row : report.rows) {
    if (row.kind == "estimate") EXPECT_NE(row.device, "H100");
  }
  EXPECT_GT(report.rows.size(), 3u);
}

TEST(BenchReports, JsonRoundTripsAndNamesFastestAndCheapest) {
  const Report report = two_row_report();
  EXPECT_EQ(report.fastest, 1);   // 20,000 samples/s
  EXPECT_EQ(report.cheapest, 0);  // 0.06/h at 1,000/s beats 11.06/h at 20,000/s
  const Report back = report_from_json(to_json(report), "report.json");
  ASSERT_EQ(back.rows.size(), 2u);
  EXPECT_EQ(back.rows[1].device, "cuda:0");
  EXPECT_DOUBLE_EQ(back.rows[1].samples_per_second, 20000);
  EXPECT_EQ(back.rows[0].step_seconds, report.rows[0].step_seconds);
  EXPECT_DOUBLE_EQ(back.rows[0].cost.per_million_samples, report.rows[0].cost.per_million_samples);
  EXPECT_EQ(back.rows[0].ops.size(), 2u);
  EXPECT_EQ(back.skipped.size(), 1u);
  EXPECT_EQ(back.fastest, 1);
  try {
    report_from_json("{\"rows\": []}", "other.json");
    ADD_FAILURE() << "no IoError";
  } catch (const IoError& error) {
    expect_contains(error.what(), "other.json is not a tandem bench report");
  }
  EXPECT_THROW(report_from_json("{not json", "broken.json"), IoError);
}

TEST(BenchReports, CsvHasAHeaderAndOneQuotedLinePerRow) {
  const std::string csv = to_csv(two_row_report());
  std::vector<std::string> lines;
  std::istringstream stream(csv);
  for (std::string line; std::getline(stream, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  expect_contains(lines[0], "kind,framework,framework_version,model,device");
  expect_contains(lines[0], "cost_per_million_samples");
  expect_contains(lines[2], "measured,tandem,,cnn,cuda:0,cuda:0,fp32,32,2,20000,");
  const auto columns = [](const std::string& line) {
    return std::count(line.begin(), line.end(), ',');
  };
  EXPECT_EQ(columns(lines[1]), columns(lines[0]));
}

TEST(BenchReports, MarkdownShowsMeasurementsCostsAndSkips) {
  const std::string table = markdown(two_row_report());
  expect_contains(table, "| cnn | cuda:0 (cuda:0) | fp32 | 32 | 20000 |");
  expect_contains(table, "Fastest: cnn fp32 b32 cuda:0, 20000 samples/s");
  expect_contains(table,
                  "Cheapest: cnn fp32 b32 cpu, 0.0167 USD per million samples at 0.06 "
                  "USD/h (test price, with a comma)");
  expect_contains(table, "- cnn bf16 batch 32 on cuda:1 (measured): no cuda:1 here (1 GPUs)");
  expect_contains(table, "USD/1M samples");
}

TEST(BenchReports, ARowMeasuredOnABusyMachineIsMarked) {
  Report report = two_row_report();
  report.rows[0].other_cpu_cores = 1.2;  // the cpu row: two busy processes' worth, less ours
  report.rows[1].other_cpu_cores = 0.1;
  const std::string table = markdown(report);
  expect_contains(table,
                  "Busy machine: other processes used 1.2 cores while cnn fp32 b32 cpu was "
                  "measured; its figures are not comparable with a quiet machine's.");
  EXPECT_EQ(table.find("while cnn fp32 b32 cuda:0"), std::string::npos) << table;
  const Report back = report_from_json(to_json(report), "report.json");
  EXPECT_DOUBLE_EQ(back.rows[0].other_cpu_cores, 1.2);
  // Reports written before the field read as not measured.
  EXPECT_DOUBLE_EQ(two_row_report().rows[0].other_cpu_cores, -1.0);
}

TEST(BenchReports, CompareShowsTheChangePerConfiguration) {
  const Report before = two_row_report();
  Report after = two_row_report();
  after.rows[0].samples_per_second = 1100;   // cpu: +10%
  after.rows.erase(after.rows.begin() + 1);  // cuda:0 gone
  Row added = measured_row("cpu", 500, 0.06);
  added.batch_size = 64;
  after.rows.push_back(added);
  const std::string change = compare(before, after);
  expect_contains(change, "| measured | cnn fp32 b32 cpu | 1000 | 1100 | +10.0% |");
  expect_contains(change, "| measured | cnn fp32 b64 cpu | - | 500 | new |");
  expect_contains(change, "| measured | cnn fp32 b32 cuda:0 | 20000 | - | gone |");
}

}  // namespace
}  // namespace tandem::bench
