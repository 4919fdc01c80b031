// The HTML report: self-contained (nothing to fetch), its charts and tables carrying the measured
// values, rendered by headless Chromium (Debian's `chromium`) with the network shut off, its
// tables sorted there by the column the address names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/files.h"
#include "data/idx_files.h"
#include "tandem/bench.h"

namespace tandem::bench {
namespace {

using tandem::testing::ScratchDir;

const Report& measured_report() {
  static const Report report = [] {
    BenchOptions options;
    options.models = {"mlp"};
    options.precisions = {"fp32", "bf16"};
    options.batch_sizes = {8};
    options.warmup_steps = 1;
    options.steps = 3;
    options.windows = 2;
    options.threads = 1;
    options.estimates = {"H100"};
    options.cpu_name = "test <cpu> & co";
    std::ostringstream log;
    return run(options, log);
  }();
  return report;
}

// The values of `attribute` on the elements of the SVG with id `chart` in `page`.
std::vector<double> chart_values(const std::string& page, const std::string& chart,
                                 const std::string& attribute) {
  const auto start = page.find("id=\"" + chart + "\"");
  if (start == std::string::npos) return {};
  const auto end = page.find("</svg>", start);
  const std::string svg = page.substr(start, end - start);
  std::vector<double> values;
  const std::regex pattern(attribute + "=\"([-0-9.e+]+)\"");
  for (auto match = std::sregex_iterator(svg.begin(), svg.end(), pattern);
       match != std::sregex_iterator(); ++match) {
    values.push_back(std::stod((*match)[1]));
  }
  return values;
}

// The data-sort values of `column` in the body rows of table `id`, in page order.
std::vector<double> column_values(const std::string& page, const std::string& id,
                                  std::size_t column) {
  const auto start = page.find("id=\"" + id + "\"");
  if (start == std::string::npos) return {};
  const auto body = page.find("<tbody>", start);
  const auto end = page.find("</tbody>", body);
  std::vector<double> values;
  for (auto row = page.find("<tr", body); row < end; row = page.find("<tr", row + 1)) {
    auto cell = page.find("<td", row);
    for (std::size_t skipped = 0; skipped < column; ++skipped)
      cell = page.find("<td", cell + 1);
    const auto sort = page.find("data-sort=\"", cell);
    if (sort == std::string::npos || sort > page.find("</td>", cell)) return {};
    values.push_back(std::stod(page.substr(sort + 11)));
  }
  return values;
}

// The measured table's samples/s column: the fifth (model, device, precision, batch, samples/s).
constexpr std::size_t kSamplesColumn = 4;

void expect_charts_carry_the_values(const std::string& page, const Report& report) {
  std::vector<double> measured_rates;
  std::vector<double> measured_costs;
  std::vector<double> medians;
  std::vector<double> estimated_rates;
  for (const Row& row : report.rows) {
    if (row.kind == "estimate") {
      estimated_rates.push_back(row.samples_per_second);
      continue;
    }
    measured_rates.push_back(row.samples_per_second);
    measured_costs.push_back(row.cost.per_million_samples);
    medians.push_back(row.step.median);
  }
  const auto expect_close = [](const std::vector<double>& shown, const std::vector<double>& want,
                               const std::string& what) {
    ASSERT_EQ(shown.size(), want.size()) << what;
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(shown[i] / want[i], 1.0, 1e-5) << what << " " << i;
  };
  expect_close(chart_values(page, "throughput", "data-value"), measured_rates, "throughput");
  expect_close(chart_values(page, "cost", "data-value"), measured_costs, "cost");
  expect_close(chart_values(page, "step-times", "data-median"), medians, "step medians");
  expect_close(chart_values(page, "estimated-throughput", "data-value"), estimated_rates,
               "estimates");
  std::size_t steps = 0;
  for (const Row& row : report.rows)
    steps += row.kind == "estimate" ? 0 : row.step_seconds.size();
  EXPECT_EQ(chart_values(page, "step-times", "data-seconds").size(), steps);
}

TEST(BenchHtml, IsSelfContainedAndCarriesTheMeasuredValues) {
  const Report& report = measured_report();
  ASSERT_EQ(report.rows.size(), 4u);  // fp32 and bf16, measured and estimated on an H100
  const std::string page = to_html(report);
  // One inline script (the tables' sorting), nothing loaded.
  EXPECT_EQ(page.find("<script"), page.rfind("<script"));
  EXPECT_NE(page.find("<script>"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("href="), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_NE(page.find("test &lt;cpu&gt; &amp; co"), std::string::npos);  // escaped
  expect_charts_carry_the_values(page, report);
}

TEST(BenchHtml, TablesAreHtmlTablesWithTheMeasuredFigures) {
  const Report& report = measured_report();
  const std::string page = to_html(report);
  EXPECT_EQ(page.find("<pre"), std::string::npos) << "no Markdown text in a <pre>";
  EXPECT_EQ(page.find("|---"), std::string::npos);
  EXPECT_NE(page.find("<table class=\"sortable\" id=\"table-0\">"), std::string::npos);
  EXPECT_NE(page.find("<th data-column=\"4\" title=\"sort by this column\">samples/s</th>"),
            std::string::npos);
  std::vector<double> measured;
  for (const Row& row : report.rows)
    if (row.kind == "measured") measured.push_back(row.samples_per_second);
  const std::vector<double> shown = column_values(page, "table-0", kSamplesColumn);
  ASSERT_EQ(shown.size(), measured.size()) << page;
  for (std::size_t i = 0; i < measured.size(); ++i)
    EXPECT_NEAR(shown[i] / measured[i], 1.0, 0.01) << i;  // as the Markdown rounds them
}

TEST(BenchHtml, RendersInHeadlessChromiumOffline) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs Debian's "
                    "chromium); the HTML report was not rendered";
  }
  const Report& report = measured_report();
  ScratchDir dir;
  const std::string page = dir.file("report.html");
  write_file_atomically(page, to_html(report));
  // Every request goes to a proxy on a closed port: the page must render without the network.
  const std::string dom = dir.file("dom.html");
  const auto render = [&](const std::string& fragment) {
    const std::string command =
        "timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run "
        "--user-data-dir=" +
        dir.file("profile") +
        " --proxy-server=127.0.0.1:9 --proxy-bypass-list='<-loopback>' --dump-dom 'file://" + page +
        fragment + "' >" + dom + " 2>" + dir.file("chromium.log");
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    std::ifstream in(dom);
    std::stringstream rendered;
    rendered << in.rdbuf();
    return rendered.str();
  };
  const std::string text = render("");
  ASSERT_NE(text.find("<h1>tandem bench</h1>"), std::string::npos) << text.substr(0, 2000);
  EXPECT_NE(text.find("Fastest: "), std::string::npos);
  expect_charts_carry_the_values(text, report);

  // The script sorts the measured table by samples/s, each way, as the address asks.
  for (const bool descending : {false, true}) {
    const std::string sorted =
        render("#sort=table-0:" + std::to_string(kSamplesColumn) + (descending ? ":desc" : ":asc"));
    std::vector<double> rates = column_values(sorted, "table-0", kSamplesColumn);
    ASSERT_EQ(rates.size(), 2u) << sorted.substr(0, 4000);
    std::vector<double> ordered = rates;
    std::sort(ordered.begin(), ordered.end());
    if (descending) std::reverse(ordered.begin(), ordered.end());
    EXPECT_EQ(rates, ordered) << (descending ? "descending" : "ascending");
    EXPECT_NE(sorted.find(descending ? "aria-sort=\"descending\"" : "aria-sort=\"ascending\""),
              std::string::npos);
  }
}

}  // namespace
}  // namespace tandem::bench
