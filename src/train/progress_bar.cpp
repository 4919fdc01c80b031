#include "train/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>

namespace tandem::train::detail {
namespace {

constexpr int kBarWidth = 20;
constexpr const char* kBarPiece = "━";  // U+2501, one column wide
constexpr const char* kBold = "\x1b[1m";
constexpr const char* kGreen = "\x1b[32m";
constexpr const char* kGrey = "\x1b[37m";
constexpr const char* kReset = "\x1b[0m";

std::string format(const char* pattern, auto... args) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

// "  7/469": the count right-aligned to the target's width.
std::string count_text(std::int64_t current, std::int64_t target) {
  const int digits = static_cast<int>(std::to_string(target).size());
  return format("%*lld/%lld", digits, static_cast<long long>(current),
                static_cast<long long>(target));
}

std::string eta_text(double seconds) {
  const long long whole = static_cast<long long>(seconds);
  if (seconds > 3600)
    return format("%lld:%02lld:%02lld", whole / 3600, (whole % 3600) / 60, whole % 60);
  if (seconds > 60) return format("%lld:%02lld", whole / 60, whole % 60);
  return format("%llds", whole);
}

std::string metrics_text(const std::map<std::string, double>& values) {
  std::string text;
  for (const auto& [name, value] : values)
    text += " - " + name + ": " + format_metric(value);
  return text;
}

}  // namespace

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_metric(double value) {
  return format(std::abs(value) > 1e-3 || value == 0.0 ? "%.4f" : "%.4e", value);
}

std::string format_time_per_step(double seconds) {
  if (seconds >= 1.0 || seconds == 0.0) return format("%.0fs/step", seconds);
  if (seconds >= 1e-3) return format("%.0fms/step", seconds * 1e3);
  return format("%.0fus/step", seconds * 1e6);
}

bool stdout_is_terminal() {
  return isatty(fileno(stdout)) != 0;
}

ProgressBar::ProgressBar(std::int64_t target, int verbose, std::ostream& out, bool interactive,
                         double interval_seconds, Clock clock)
    : target_(target),
      verbose_(verbose),
      out_(out),
      interactive_(interactive),
      interval_seconds_(interval_seconds),
      clock_(std::move(clock)),
      start_(clock_()) {}

double ProgressBar::seconds_per_step(std::int64_t current, double now) const {
  if (current > 1 && after_first_step_ >= 0.0) {
    return (now - after_first_step_) / static_cast<double>(current - 1);
  }
  return current > 0 ? (now - start_) / static_cast<double>(current) : 0.0;
}

std::string ProgressBar::progress_line(std::int64_t current,
                                       const std::map<std::string, double>& values, bool finalize,
                                       double now, std::size_t& visible_width) const {
  const std::string count = count_text(current, target_);
  const double fraction =
      target_ > 0 ? std::min(1.0, static_cast<double>(current) / static_cast<double>(target_))
                  : 1.0;
  const int done = static_cast<int>(kBarWidth * fraction);
  std::string done_bar;
  std::string left_bar;
  for (int i = 0; i < kBarWidth; ++i)
    (i < done ? done_bar : left_bar) += kBarPiece;
  const std::string time =
      finalize ? format("%.0fs", now - start_)
               : eta_text(seconds_per_step(current, now) * static_cast<double>(target_ - current));
  std::string tail(1, ' ');
  tail += format_time_per_step(seconds_per_step(current, now));
  tail += metrics_text(values);
  visible_width = count.size() + 1 + kBarWidth + 1 + time.size() + tail.size();
  if (!interactive_) return count + " " + done_bar + left_bar + " " + time + tail;
  std::string line = std::string(kBold) + count + kReset + " ";
  if (done > 0) line += kGreen + done_bar + kReset;
  if (done < kBarWidth) line += kGrey + left_bar + kReset;
  return line + " " + kBold + time + kReset + tail;
}

std::string ProgressBar::summary_line(std::int64_t current,
                                      const std::map<std::string, double>& values,
                                      double now) const {
  return count_text(current, target_) + format(" - %.0fs - ", now - start_) +
         format_time_per_step(seconds_per_step(current, now)) + metrics_text(values);
}

bool ProgressBar::draws() const {
  return verbose_ == 1 && interactive_ &&
         (last_draw_ < 0.0 || clock_() - last_draw_ >= interval_seconds_);
}

void ProgressBar::update(std::int64_t current, const std::map<std::string, double>& values,
                         bool finalize) {
  const double now = clock_();
  if (current == 1 && after_first_step_ < 0.0) after_first_step_ = now;
  if (verbose_ == 2) {
    if (finalize) out_ << summary_line(current, values, now) << '\n' << std::flush;
    return;
  }
  if (verbose_ != 1) return;
  if (!finalize && (!interactive_ || (last_draw_ >= 0.0 && now - last_draw_ < interval_seconds_))) {
    return;
  }
  std::size_t width = 0;
  std::string line = progress_line(current, values, finalize, now, width);
  if (interactive_) {
    // Blank out what is left of a longer previous line.
    if (previous_width_ > width) line += std::string(previous_width_ - width, ' ');
    out_ << '\r';
  }
  out_ << line;
  if (finalize) out_ << '\n';
  out_ << std::flush;
  previous_width_ = width;
  last_draw_ = now;
}

}  // namespace tandem::train::detail
