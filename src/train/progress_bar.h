#pragma once
// Keras' progress bar (keras.utils.Progbar) for one epoch of `target` steps:
//
//   469/469 ━━━━━━━━━━━━━━━━━━━━ 4s 9ms/step - accuracy: 0.8213 - loss: 0.5123
//
// verbose 1 on a terminal redraws the line in place with \r, at most once per interval, with the
// time left while running and the time taken once finished; verbose 1 elsewhere (a log file, a
// pipe) prints only the finished line; verbose 2 prints the finished line as
// "469/469 - 4s - 9ms/step - ...". The time per step leaves out the first step, which includes
// one-off set-up.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>

namespace tandem::train::detail {

// Wall-clock seconds from an arbitrary origin.
using Clock = std::function<double()>;
double steady_seconds();

class ProgressBar {
 public:
  // interactive: `out` is a terminal, so lines are redrawn in place and coloured.
  ProgressBar(std::int64_t target, int verbose, std::ostream& out, bool interactive,
              double interval_seconds = 0.1, Clock clock = steady_seconds);

  // `current` steps are done; `values` (shown sorted by name) are the running metrics.
  void update(std::int64_t current, const std::map<std::string, double>& values,
              bool finalize = false);
  // Whether update without finalize would draw now.
  bool draws() const;

 private:
  double seconds_per_step(std::int64_t current, double now) const;
  std::string progress_line(std::int64_t current, const std::map<std::string, double>& values,
                            bool finalize, double now, std::size_t& visible_width) const;
  std::string summary_line(std::int64_t current, const std::map<std::string, double>& values,
                           double now) const;

  std::int64_t target_;
  int verbose_;
  std::ostream& out_;
  bool interactive_;
  double interval_seconds_;
  Clock clock_;
  double start_;
  double after_first_step_ = -1.0;
  double last_draw_ = -1.0;
  std::size_t previous_width_ = 0;
};

// Keras' number format in logs: 4 decimals, or scientific notation below 1e-3 in magnitude.
std::string format_metric(double value);
// "9ms/step", "120us/step", "2s/step".
std::string format_time_per_step(double seconds);
// Whether standard output is a terminal.
bool stdout_is_terminal();

}  // namespace tandem::train::detail
