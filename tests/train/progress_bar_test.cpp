// The Keras-format progress bar renderer with a fake clock: exact lines, in-place redrawing with
// throttling on a terminal, one line per epoch elsewhere, and verbose 2.
#include <gtest/gtest.h>

#include <sstream>

#include "train/progress_bar.h"

namespace tandem::train::detail {
namespace {

const std::map<std::string, double> kLogs{{"loss", 0.5123}, {"accuracy", 0.8213}};

// Step 1 ends at 0.1 s, then every step takes 9 ms: 469 steps end at 4.312 s.
struct FakeClock {
  double now = 0.0;
  Clock clock() {
    return [this] { return now; };
  }
};

void run_epoch(ProgressBar& bar, FakeClock& time, std::int64_t steps) {
  for (std::int64_t step = 1; step <= steps; ++step) {
    time.now = step == 1 ? 0.1 : 0.1 + 0.009 * static_cast<double>(step - 1);
    bar.update(step, kLogs);
  }
  bar.update(steps, kLogs, /*finalize=*/true);
}

TEST(ProgressBar, NonInteractivePrintsTheFinishedLineOnly) {
  FakeClock time;
  std::ostringstream out;
  ProgressBar bar(469, 1, out, /*interactive=*/false, 0.1, time.clock());
  run_epoch(bar, time, 469);
  EXPECT_EQ(out.str(),
            "469/469 ━━━━━━━━━━━━━━━━━━━━ 4s 9ms/step - accuracy: 0.8213 - loss: 0.5123\n");
}

TEST(ProgressBar, VerboseTwoPrintsTheEpochSummary) {
  FakeClock time;
  std::ostringstream out;
  ProgressBar bar(469, 2, out, false, 0.1, time.clock());
  run_epoch(bar, time, 469);
  EXPECT_EQ(out.str(), "469/469 - 4s - 9ms/step - accuracy: 0.8213 - loss: 0.5123\n");
}

TEST(ProgressBar, InteractiveRedrawsInPlaceAtMostEveryInterval) {
  FakeClock time;
  std::ostringstream out;
  ProgressBar bar(469, 1, out, /*interactive=*/true, 0.1, time.clock());
  run_epoch(bar, time, 469);
  const std::string text = out.str();
  std::size_t redraws = 0;
  for (char ch : text)
    redraws += ch == '\r';
  // 4.3 s at 10 Hz is about 43 redraws, plus the first and the final line; never one per step.
  EXPECT_GE(redraws, 40u);
  EXPECT_LE(redraws, 48u);
  EXPECT_EQ(text.back(), '\n');
  // The last line: bold count, a full green bar, the time taken.
  const std::string last = text.substr(text.rfind('\r') + 1);
  EXPECT_EQ(last,
            "\x1b[1m469/469\x1b[0m \x1b[32m━━━━━━━━━━━━━━━━━━━━\x1b[0m \x1b[1m4s\x1b[0m 9ms/step - "
            "accuracy: 0.8213 - loss: 0.5123\n");
  // A line in the middle shows the time left: at step 2 (0.109 s) 467 steps of 9 ms remain.
  const std::size_t first_break = text.find('\r', 1);
  const std::string early = text.substr(1, first_break - 1);
  EXPECT_NE(early.find("  1/469"), std::string::npos) << early;
}

// draws() says ahead of update() whether it would draw (fit reads the logs only then).
TEST(ProgressBar, SaysWhetherItWouldDrawNow) {
  FakeClock time;
  std::ostringstream out;
  ProgressBar live(469, 1, out, /*interactive=*/true, 0.1, time.clock());
  EXPECT_TRUE(live.draws());  // nothing drawn yet
  time.now = 0.1;
  live.update(1, kLogs);
  time.now = 0.15;
  EXPECT_FALSE(live.draws());
  const std::size_t before = out.str().size();
  live.update(2, kLogs);
  EXPECT_EQ(out.str().size(), before);
  time.now = 0.2;
  EXPECT_TRUE(live.draws());
  ProgressBar file(469, 1, out, /*interactive=*/false, 0.1, time.clock());
  EXPECT_FALSE(file.draws());  // only the finished line, from the epoch's logs
  ProgressBar summary(469, 2, out, false, 0.1, time.clock());
  EXPECT_FALSE(summary.draws());
}

TEST(ProgressBar, PartialBarShowsTheTimeLeft) {
  FakeClock time;
  std::ostringstream out;
  ProgressBar bar(100, 1, out, false, 0.1, time.clock());
  time.now = 1.0;
  bar.update(1, {});
  time.now = 2.0;
  bar.update(50, {});  // non-interactive: nothing drawn until the end
  EXPECT_EQ(out.str(), "");
  ProgressBar live(100, 1, out, true, 0.1, time.clock());
  time.now = 12.0;
  live.update(1, {});
  time.now = 22.0;
  live.update(51, {{"loss", 0.00012}});
  // 50 steps in 10 s after the first: 200 ms/step, 49 steps left: 9.8 s -> "9s"; 10 bars done.
  const std::string text = out.str();
  EXPECT_NE(text.find("\r\x1b[1m 51/100\x1b[0m \x1b[32m━━━━━━━━━━\x1b[0m\x1b[37m━━━━━━━━━━\x1b[0m "
                      "\x1b[1m9s\x1b[0m 200ms/step - loss: 1.2000e-04"),
            std::string::npos)
      << text;
}

TEST(ProgressBar, Formats) {
  EXPECT_EQ(format_metric(0.5), "0.5000");
  EXPECT_EQ(format_metric(0.0), "0.0000");
  EXPECT_EQ(format_metric(0.0001), "1.0000e-04");
  EXPECT_EQ(format_time_per_step(0.009), "9ms/step");
  EXPECT_EQ(format_time_per_step(0.00012), "120us/step");
  EXPECT_EQ(format_time_per_step(2.4), "2s/step");
}

}  // namespace
}  // namespace tandem::train::detail
