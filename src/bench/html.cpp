// The HTML report: one self-contained page (inline CSS, SVG and one inline script that sorts the
// tables; nothing fetched) that opens offline in any browser. Every bar and box carries its value
// in data-* attributes and a <title> tooltip, so the charts can be checked against the JSON report.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/text.h"
#include "tandem/bench.h"

namespace tandem::bench {
namespace {

std::string num(double value, int digits = 6) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

// A value for people: whole numbers from 100 up, four significant digits below.
std::string shown(double value) {
  char text[64];
  std::snprintf(text, sizeof text, value >= 100 ? "%.0f" : "%.4g", value);
  return text;
}

std::string label_of(const Row& row) {
  std::string label =
      row.model + " " + row.precision + " b" + std::to_string(row.batch_size) + " " + row.device;
  if (row.kind == "peer") label = row.framework + " " + label;
  if (row.kind == "estimate") label += " (estimate)";
  return label;
}

struct Bar {
  std::string label;
  std::string kind;
  double value;
};

constexpr int kLabelWidth = 330;
constexpr int kPlotWidth = 520;
constexpr int kRowHeight = 22;

// A horizontal bar chart; `id` names it for the page and for tests.
std::string bar_chart(const std::string& id, const std::string& title, const std::string& unit,
                      const std::vector<Bar>& bars) {
  std::ostringstream svg;
  svg << "<h2>" << html_escape(title) << "</h2>\n";
  if (bars.empty()) return svg.str() + "<p>No data.</p>\n";
  double largest = 0.0;
  for (const Bar& bar : bars)
    largest = std::max(largest, bar.value);
  if (largest <= 0) largest = 1;
  const int height = static_cast<int>(bars.size()) * kRowHeight + 10;
  svg << "<svg id=\"" << id << "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
      << kLabelWidth + kPlotWidth + 180 << "\" height=\"" << height << "\" role=\"img\" "
      << "aria-label=\"" << html_escape(title) << "\">\n";
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const Bar& bar = bars[i];
    const int y = static_cast<int>(i) * kRowHeight + 5;
    const double width = std::max(1.0, bar.value / largest * kPlotWidth);
    svg << "<text x=\"" << kLabelWidth - 6 << "\" y=\"" << y + 15
        << "\" text-anchor=\"end\" class=\"label\">" << html_escape(bar.label) << "</text>\n"
        << "<rect class=\"bar " << bar.kind << "\" x=\"" << kLabelWidth << "\" y=\"" << y
        << "\" width=\"" << num(width, 5) << "\" height=\"" << kRowHeight - 6 << "\" data-label=\""
        << html_escape(bar.label) << "\" data-kind=\"" << bar.kind << "\" data-value=\""
        << num(bar.value) << "\"><title>" << html_escape(bar.label) << ": " << num(bar.value, 4)
        << " " << html_escape(unit) << "</title></rect>\n"
        << "<text x=\"" << kLabelWidth + width + 5 << "\" y=\"" << y + 15 << "\" class=\"value\">"
        << num(bar.value, 4) << " " << html_escape(unit) << "</text>\n";
  }
  return svg.str() + "</svg>\n";
}

// Per configuration: the p10-p90 box, the median line and every timed step as a dot, on one
// logarithmic millisecond axis (configurations' steps differ by orders of magnitude).
std::string step_chart(const std::vector<const Row*>& rows) {
  std::ostringstream svg;
  svg << "<h2>Step-time distribution (timed steps, log scale; box p10-p90, line median)</h2>\n";
  if (rows.empty()) return svg.str() + "<p>No data.</p>\n";
  double shortest = 0.0;
  double longest = 0.0;
  for (const Row* row : rows) {
    for (const double seconds : row->step_seconds) {
      if (!(seconds > 0)) continue;
      shortest = shortest > 0 ? std::min(shortest, seconds) : seconds;
      longest = std::max(longest, seconds);
    }
  }
  if (!(shortest > 0)) shortest = longest = 1e-3;
  // Whole decades around the data.
  const double low = std::pow(10.0, std::floor(std::log10(shortest)));
  const double high = std::pow(10.0, std::ceil(std::log10(longest) + 1e-9));
  const double decades = std::log10(high / low);
  const auto x_of = [&](double seconds) {
    const double clamped = std::clamp(seconds, low, high);
    return kLabelWidth + std::log10(clamped / low) / decades * kPlotWidth;
  };
  const int height = static_cast<int>(rows.size()) * kRowHeight * 2 + 30;
  svg << "<svg id=\"step-times\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
      << kLabelWidth + kPlotWidth + 180 << "\" height=\"" << height << "\">\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& row = *rows[i];
    const std::string label = label_of(row);
    const int y = static_cast<int>(i) * kRowHeight * 2 + 5;
    svg << "<g class=\"distribution\" data-label=\"" << html_escape(label) << "\" data-median=\""
        << num(row.step.median) << "\" data-p10=\"" << num(row.step.p10) << "\" data-p90=\""
        << num(row.step.p90) << "\" data-count=\"" << row.step.count << "\">\n"
        << "<title>" << html_escape(label) << ": median " << num(row.step.median * 1e3, 4)
        << " ms, p10 " << num(row.step.p10 * 1e3, 4) << " ms, p90 " << num(row.step.p90 * 1e3, 4)
        << " ms over " << row.step.count << " steps</title>\n"
        << "<text x=\"" << kLabelWidth - 6 << "\" y=\"" << y + 20
        << "\" text-anchor=\"end\" class=\"label\">" << html_escape(label) << "</text>\n"
        << "<rect class=\"box\" x=\"" << num(x_of(row.step.p10), 5) << "\" y=\"" << y + 6
        << "\" width=\"" << num(std::max(1.0, x_of(row.step.p90) - x_of(row.step.p10)), 5)
        << "\" height=\"20\"/>\n"
        << "<line class=\"median\" x1=\"" << num(x_of(row.step.median), 5) << "\" x2=\""
        << num(x_of(row.step.median), 5) << "\" y1=\"" << y + 3 << "\" y2=\"" << y + 29 << "\"/>\n";
    for (const double seconds : row.step_seconds) {
      svg << "<circle class=\"step\" cx=\"" << num(x_of(seconds), 5) << "\" cy=\"" << y + 16
          << "\" r=\"2\" data-seconds=\"" << num(seconds) << "\"/>\n";
    }
    svg << "<text x=\"" << kLabelWidth + kPlotWidth + 10 << "\" y=\"" << y + 20
        << "\" class=\"value\">median " << shown(row.step.median * 1e3) << " ms</text>\n</g>\n";
  }
  const int axis_y = height - 18;
  svg << "<line class=\"axis\" x1=\"" << kLabelWidth << "\" x2=\"" << kLabelWidth + kPlotWidth
      << "\" y1=\"" << axis_y << "\" y2=\"" << axis_y << "\"/>\n";
  for (double tick = low; tick <= high * 1.0001; tick *= 10) {
    svg << "<text x=\"" << num(x_of(tick), 5) << "\" y=\"" << axis_y + 14
        << "\" text-anchor=\"middle\" class=\"tick\">" << num(tick * 1e3, 3) << " ms</text>\n";
  }
  return svg.str() + "</svg>\n";
}

// The leading number of a table cell ("12.5 (11.0-13.1)", "69.6%", "1,049"), for sorting; none
// for text and for "-".
std::optional<double> leading_number(std::string_view cell) {
  std::string digits;
  for (const char c : cell) {
    if (c == ',') continue;  // thousands
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
        c == 'e') {
      digits += c;
    } else {
      break;
    }
  }
  char* end = nullptr;
  const double value = std::strtod(digits.c_str(), &end);
  if (digits.empty() || end == digits.c_str()) return std::nullopt;
  return value;
}

std::vector<std::string> table_cells(std::string_view line) {
  std::vector<std::string> cells;
  line.remove_prefix(1);  // the leading '|'
  while (!line.empty()) {
    const std::size_t bar = line.find('|');
    std::string_view cell = line.substr(0, bar);
    while (!cell.empty() && cell.front() == ' ')
      cell.remove_prefix(1);
    while (!cell.empty() && cell.back() == ' ')
      cell.remove_suffix(1);
    if (bar == std::string_view::npos && cell.empty()) break;
    cells.emplace_back(cell);
    if (bar == std::string_view::npos) break;
    line.remove_prefix(bar + 1);
  }
  if (!cells.empty() && cells.back().empty()) cells.pop_back();  // after the closing '|'
  return cells;
}

// The Markdown report as HTML: its tables as tables whose columns sort when their header is
// clicked (numerically where the cells start with a number), the lines between them as
// paragraphs. The same figures as the terminal shows, from the one text.
std::string tables_html(const std::string& markdown_text) {
  std::ostringstream out;
  std::istringstream lines(markdown_text);
  std::string line;
  std::vector<std::vector<std::string>> table;
  int tables = 0;
  const auto flush_table = [&] {
    if (table.size() < 2) {
      for (const auto& cells : table) {
        std::string text;
        for (const std::string& cell : cells)
          text += (text.empty() ? "" : " | ") + cell;
        out << "<p>" << html_escape(text) << "</p>\n";
      }
      table.clear();
      return;
    }
    // table[1] is the alignment row: "---:" aligns right.
    std::vector<bool> right;
    for (const std::string& spec : table[1])
      right.push_back(!spec.empty() && spec.back() == ':');
    out << "<table class=\"sortable\" id=\"table-" << tables++ << "\">\n<thead><tr>";
    for (std::size_t column = 0; column < table[0].size(); ++column) {
      out << "<th data-column=\"" << column << "\" title=\"sort by this column\">"
          << html_escape(table[0][column]) << "</th>";
    }
    out << "</tr></thead>\n<tbody>\n";
    for (std::size_t r = 2; r < table.size(); ++r) {
      out << "<tr>";
      for (std::size_t column = 0; column < table[r].size(); ++column) {
        const std::string& cell = table[r][column];
        out << "<td";
        if (column < right.size() && right[column]) out << " class=\"number\"";
        if (const auto value = leading_number(cell))
          out << " data-sort=\"" << num(*value, 10) << "\"";
        out << ">" << html_escape(cell) << "</td>";
      }
      out << "</tr>\n";
    }
    out << "</tbody>\n</table>\n";
    table.clear();
  };
  while (std::getline(lines, line)) {
    if (line.starts_with("|")) {
      table.push_back(table_cells(line));
      continue;
    }
    flush_table();
    if (!line.empty()) out << "<p>" << html_escape(line) << "</p>\n";
  }
  flush_table();
  return "<h2>Tables</h2>\n" + out.str();
}

// Sorts a table by the clicked column (again: the other way), numbers by value before text, and
// records the order in the address (#sort=table-0:3:desc), which also sorts the page on opening.
constexpr const char* kSortScript = R"(<script>
function sortTable(table, column, descending) {
  const body = table.tBodies[0];
  const key = (row) => row.cells[column];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    if (!x || !y) return 0;
    const p = x.dataset.sort, q = y.dataset.sort;
    let order;
    if (p !== undefined && q !== undefined) order = Number(p) - Number(q);
    else if (p !== undefined) return -1;
    else if (q !== undefined) return 1;
    else order = x.textContent.localeCompare(y.textContent);
    return descending ? -order : order;
  });
  rows.forEach((row) => body.appendChild(row));
  for (const th of table.tHead.rows[0].cells) th.removeAttribute("aria-sort");
  table.tHead.rows[0].cells[column].setAttribute("aria-sort", descending ? "descending" : "ascending");
}
document.querySelectorAll("table.sortable th").forEach((th) => {
  th.addEventListener("click", () => {
    const table = th.closest("table");
    const descending = th.getAttribute("aria-sort") === "ascending";
    sortTable(table, Number(th.dataset.column), descending);
    history.replaceState(null, "", "#sort=" + table.id + ":" + th.dataset.column + ":" +
                         (descending ? "desc" : "asc"));
  });
});
const wanted = /^#sort=([\w-]+):(\d+):(asc|desc)$/.exec(location.hash);
if (wanted && document.getElementById(wanted[1])) {
  sortTable(document.getElementById(wanted[1]), Number(wanted[2]), wanted[3] === "desc");
}
</script>
)";

}  // namespace

std::string to_html(const Report& report) {
  std::vector<Bar> throughput;
  std::vector<Bar> estimated_throughput;
  std::vector<Bar> cost;
  std::vector<Bar> estimated_cost;
  std::vector<const Row*> distributions;
  for (const Row& row : report.rows) {
    const Bar rate{label_of(row), row.kind, row.samples_per_second};
    const bool priced = row.price_per_hour >= 0;
    if (row.kind == "estimate") {
      estimated_throughput.push_back(rate);
      if (priced) estimated_cost.push_back({rate.label, row.kind, row.cost.per_million_samples});
      continue;
    }
    throughput.push_back(rate);
    if (priced) cost.push_back({rate.label, row.kind, row.cost.per_million_samples});
    if (!row.step_seconds.empty()) distributions.push_back(&row);
  }
  const std::string per_million = report.currency + " per million samples";
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<title>tandem bench " << html_escape(report.created) << "</title>\n<style>\n"
       << "body{font-family:sans-serif;margin:2em;color:#222}"
          "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}"
          ".chart text{font-size:12px}.bar.measured{fill:#3b6fb6}.bar.peer{fill:#e39b2d}"
          ".bar.estimate{fill:#bbb;stroke:#666;stroke-dasharray:3 2}"
          ".box{fill:#cfe0f5;stroke:#3b6fb6}.median{stroke:#1b3f73;stroke-width:2}"
          ".step{fill:#1b3f73;fill-opacity:.35}.axis{stroke:#888}"
          "table.sortable{border-collapse:collapse;font-size:12px;margin:0.5em 0 1em}"
          "table.sortable th,table.sortable td{border:1px solid #ddd;padding:3px 6px}"
          "table.sortable th{background:#f0f0f0;cursor:pointer;user-select:none}"
          "table.sortable th[aria-sort=ascending]::after{content:' \\25B2'}"
          "table.sortable th[aria-sort=descending]::after{content:' \\25BC'}"
          "td.number{text-align:right}"
          ".note{color:#555}\n</style>\n</head>\n<body>\n"
       << "<h1>tandem bench</h1>\n<p class=\"note\">" << html_escape(report.created) << " on "
       << html_escape(report.host) << " (" << html_escape(report.cpu) << "), Tandem "
       << html_escape(report.tandem_version) << "<br>" << html_escape(report.command) << "</p>\n";
  if (report.fastest >= 0) {
    const Row& row = report.rows[report.fastest];
    html << "<p id=\"fastest\">Fastest: <b>" << html_escape(label_of(row)) << "</b>, "
         << shown(row.samples_per_second) << " samples/s</p>\n";
  }
  if (report.cheapest >= 0) {
    const Row& row = report.rows[report.cheapest];
    html << "<p id=\"cheapest\">Cheapest: <b>" << html_escape(label_of(row)) << "</b>, "
         << num(row.cost.per_million_samples, 3) << " " << html_escape(per_million) << "</p>\n";
  }
  html << bar_chart("throughput", "Throughput, measured (samples/s; Tandem and peers)", "samples/s",
                    throughput)
       << bar_chart("cost", "Cost, measured (" + per_million + ")", report.currency, cost)
       << step_chart(distributions);
  if (!estimated_throughput.empty()) {
    html << "<p class=\"note\">Estimates below are roofline figures for hardware not present, "
            "scaled by the measured/roofline ratio; they are not measurements.</p>\n"
         << bar_chart("estimated-throughput", "Throughput, estimate (samples/s)", "samples/s",
                      estimated_throughput)
         << bar_chart("estimated-cost", "Cost, estimate (" + per_million + ")", report.currency,
                      estimated_cost);
  }
  html << tables_html(markdown(report)) << kSortScript << "</body>\n</html>\n";
  return html.str();
}

}  // namespace tandem::bench
