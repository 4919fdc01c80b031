// sweep::html_report: one self-contained page (inline CSS and SVG, no scripts, nothing fetched):
// the learning curves of every trial on one chart, each line carrying its values in data-*
// attributes and a <title> tooltip, and the table of trials.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/text.h"
#include "tandem/sweep.h"

namespace tandem::sweep {
namespace {

constexpr int kPlotWidth = 640;
constexpr int kPlotHeight = 320;
constexpr int kLeft = 60;
constexpr int kTop = 20;

std::string num(double value, int digits = 6) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, value);
  return text;
}

// Distinct hues around the colour wheel, by the golden angle.
std::string colour(std::size_t index) {
  return "hsl(" + num(std::fmod(static_cast<double>(index) * 137.508, 360.0), 4) + ",65%,42%)";
}

std::string curves_svg(const Summary& summary) {
  const std::string& metric = summary.options.metric;
  double low = INFINITY;
  double high = -INFINITY;
  std::size_t epochs = 0;
  for (const Result& result : summary.results) {
    const auto series = result.outcome.history.find(metric);
    if (series == result.outcome.history.end()) continue;
    epochs = std::max(epochs, series->second.size());
    for (const double value : series->second) {
      if (!std::isfinite(value)) continue;
      low = std::min(low, value);
      high = std::max(high, value);
    }
  }
  std::ostringstream svg;
  svg << "<h2>Learning curves: " << html_escape(metric) << " per epoch</h2>\n";
  if (epochs == 0) {
    return svg.str() + "<p>No trial recorded " + html_escape(metric) + " per epoch.</p>\n";
  }
  if (!(high > low)) {
    low -= 0.5;
    high += 0.5;
  }
  const auto x_of = [&](std::size_t epoch) {
    return kLeft + (epochs == 1 ? kPlotWidth / 2.0
                                : static_cast<double>(epoch) / static_cast<double>(epochs - 1) *
                                      kPlotWidth);
  };
  const auto y_of = [&](double value) {
    return kTop + (high - value) / (high - low) * kPlotHeight;
  };
  svg << "<svg id=\"curves\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
      << kLeft + kPlotWidth + 220 << "\" height=\"" << kTop + kPlotHeight + 50 << "\">\n"
      << "<line class=\"axis\" x1=\"" << kLeft << "\" x2=\"" << kLeft + kPlotWidth << "\" y1=\""
      << kTop + kPlotHeight << "\" y2=\"" << kTop + kPlotHeight << "\"/>\n"
      << "<line class=\"axis\" x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop
      << "\" y2=\"" << kTop + kPlotHeight << "\"/>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    const double value = low + (high - low) * tick / 4.0;
    svg << "<text class=\"tick\" x=\"" << kLeft - 6 << "\" y=\"" << num(y_of(value) + 4, 5)
        << "\" text-anchor=\"end\">" << num(value, 4) << "</text>\n";
  }
  for (std::size_t epoch = 0; epoch < epochs; ++epoch) {
    svg << "<text class=\"tick\" x=\"" << num(x_of(epoch), 5) << "\" y=\""
        << kTop + kPlotHeight + 16 << "\" text-anchor=\"middle\">" << epoch + 1 << "</text>\n";
  }
  svg << "<text class=\"tick\" x=\"" << kLeft + kPlotWidth / 2 << "\" y=\""
      << kTop + kPlotHeight + 36 << "\" text-anchor=\"middle\">epoch</text>\n";
  std::size_t drawn = 0;
  for (std::size_t i = 0; i < summary.results.size(); ++i) {
    const Result& result = summary.results[i];
    const auto series = result.outcome.history.find(metric);
    if (series == result.outcome.history.end() || series->second.empty()) continue;
    std::string points;
    std::string values;
    for (std::size_t epoch = 0; epoch < series->second.size(); ++epoch) {
      const double value = series->second[epoch];
      values += (values.empty() ? "" : ",") + num(value);
      if (!std::isfinite(value)) continue;
      points += num(x_of(epoch), 5) + "," + num(y_of(value), 5) + " ";
    }
    const bool best = summary.best == i;
    svg << "<g class=\"trial" << (best ? " best" : "") << "\" data-trial=\""
        << html_escape(result.trial.id) << "\" data-values=\"" << values << "\">\n<title>"
        << html_escape(result.trial.id);
    for (const auto& [name, value] : result.trial.params)
      svg << " " << html_escape(name) << "=" << html_escape(value_text(value));
    svg << ": " << html_escape(metric) << " " << html_escape(values) << "</title>\n"
        << "<polyline fill=\"none\" stroke=\"" << colour(i) << "\" stroke-width=\""
        << (best ? 3 : 1.5) << "\" points=\"" << points << "\"/>\n"
        << "<text class=\"legend\" x=\"" << kLeft + kPlotWidth + 12 << "\" y=\""
        << kTop + 14 * static_cast<int>(drawn) + 10 << "\" fill=\"" << colour(i) << "\">"
        << html_escape(result.trial.id) << (best ? " (best)" : "") << "</text>\n</g>\n";
    ++drawn;
  }
  return svg.str() + "</svg>\n";
}

}  // namespace

std::string html_report(const Summary& summary) {
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<title>tandem sweep " << html_escape(summary.options.folder) << "</title>\n<style>\n"
       << "body{font-family:sans-serif;margin:2em;color:#222}h1{font-size:1.4em}"
          "h2{font-size:1.1em;margin-top:1.6em}.chart text{font-size:12px}.axis{stroke:#888}"
          "pre.table{font-size:11px;background:#f6f6f6;padding:1em;overflow-x:auto}"
          ".note{color:#555}\n</style>\n</head>\n<body>\n"
       << "<h1>tandem sweep</h1>\n<p class=\"note\">" << html_escape(summary.options.folder) << ": "
       << summary.configurations << " configurations, " << summary.results.size()
       << " trial runs, ranked by " << html_escape(summary.options.metric) << " ("
       << (summary.options.maximize ? "higher" : "lower") << " is better)</p>\n";
  if (summary.best) {
    const Result& best = summary.results[*summary.best];
    html << "<p id=\"best\">Best: <b>" << html_escape(best.trial.id) << "</b>";
    for (const auto& [name, value] : best.trial.params)
      html << ", " << html_escape(name) << " = " << html_escape(value_text(value));
    html << "; " << html_escape(summary.options.metric) << " "
         << num(best.outcome.metrics.at(summary.options.metric), 4) << "</p>\n";
  }
  html << curves_svg(summary) << "<h2>Trials</h2>\n<pre class=\"table\">"
       << html_escape(summary.table()) << "</pre>\n</body>\n</html>\n";
  return html.str();
}

}  // namespace tandem::sweep
