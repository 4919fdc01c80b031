#pragma once
// Runs the built `tandem` binary (TANDEM_CLI_PATH) and captures its exit status and output, and
// checks that text is well-formed JSON.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "data/idx_files.h"
#include "support/shell.h"

namespace tandem::testing {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

// How long one run of a program may take before the test gives up on it: far above the longest
// run of the suite (one epoch of Fashion-MNIST through XLA:CPU, under a minute here), so that
// only a hang reaches it.
inline constexpr std::chrono::seconds kProgramTimeLimit{900};

// What every thread of the process `pid` is doing, from gdb where it is installed: a hung run
// should say where it hangs, since it may hang only on another machine (CI).
inline std::string thread_stacks(pid_t pid) {
  const std::string command =
      "gdb -batch -nx -p " + std::to_string(pid) + " -ex 'thread apply all bt 30' 2>&1 </dev/null";
  if (run_shell("command -v gdb >/dev/null 2>&1") != 0) return "(no gdb to show the threads)\n";
  return run_capturing(command).output;
}

// Starts `program` with `args`, standard input closed, its outputs into the two files; returns
// its pid, or -1 with errno set when it cannot start.
inline pid_t start_program(const std::string& program, const std::vector<std::string>& args,
                           const std::string& out_path, const std::string& err_path) {
  std::vector<std::string> argv_text{program};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_text)
    argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, program.c_str(), &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (spawned != 0) {
    errno = spawned;
    return -1;
  }
  return pid;
}

// Runs `program` with `args`, standard input closed, capturing both outputs. A run that takes
// longer than `limit` is stopped: its status is 124 (as timeout(1) reports)
// and its standard error ends with what its threads were doing.
inline CliResult run_program(const std::string& program, const std::vector<std::string>& args,
                             std::chrono::seconds limit = kProgramTimeLimit) {
  ScratchDir scratch;
  const std::string out_path = scratch.file("out");
  const std::string err_path = scratch.file("err");
  const pid_t pid = start_program(program, args, out_path, err_path);
  CliResult result;
  if (pid < 0) {
    result.status = 127;
    result.err = program + ": cannot start: " + std::strerror(errno) + "\n";
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int raw = 0;
  bool timed_out = false;
  while (true) {
    const pid_t done = ::waitpid(pid, &raw, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(done == 0 ? 20 : 0));
  }
  std::string stacks;
  if (timed_out) {
    stacks = thread_stacks(pid);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &raw, 0);
  }
  result.status = timed_out ? 124 : exit_status(raw);
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  if (timed_out) {
    result.err += "\n[test] " + program + " did not finish in " + std::to_string(limit.count()) +
                  " s and was stopped; its threads were:\n" + stacks;
  }
  return result;
}

inline CliResult run_cli(const std::vector<std::string>& args) {
  return run_program(TANDEM_CLI_PATH, args);
}

inline void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in:\n" << text;
}

// `tandem ARGS` fails with `status`, nothing on stdout, one `tandem: error:` line naming `parts`.
inline void expect_error(const std::vector<std::string>& args, int status,
                         const std::vector<std::string>& parts) {
  const CliResult result = run_cli(args);
  std::string command = "tandem";
  for (const std::string& arg : args)
    command += " " + arg;
  SCOPED_TRACE(command);
  EXPECT_EQ(result.status, status) << result.err;
  EXPECT_TRUE(result.err.starts_with("tandem: error: ")) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  for (const std::string& part : parts)
    expect_contains(result.err, part);
}

// A strict JSON syntax check (RFC 8259) that also collects the top-level members' raw text.
class JsonChecker {
 public:
  explicit JsonChecker(std::string text) : text_(std::move(text)) {}

  bool valid() {
    position_ = 0;
    skip_space();
    if (!value(0)) return false;
    skip_space();
    return position_ == text_.size();
  }
  const std::map<std::string, std::string>& top_level() const { return top_level_; }

 private:
  bool value(int depth) {
    skip_space();
    if (position_ >= text_.size()) return false;
    const char c = text_[position_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return string(nullptr);
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    for (const char* word : {"true", "false", "null"}) {
      if (text_.compare(position_, std::strlen(word), word) == 0) {
        position_ += std::strlen(word);
        return true;
      }
    }
    return false;
  }
  bool object(int depth) {
    ++position_;
    skip_space();
    if (peek() == '}') return ++position_, true;
    while (true) {
      skip_space();
      std::string key;
      if (!string(&key)) return false;
      skip_space();
      if (peek() != ':') return false;
      ++position_;
      skip_space();
      const std::size_t start = position_;
      if (!value(depth + 1)) return false;
      if (depth == 0) top_level_[key] = text_.substr(start, position_ - start);
      skip_space();
      if (peek() == ',') {
        ++position_;
        continue;
      }
      if (peek() == '}') return ++position_, true;
      return false;
    }
  }
  bool array(int depth) {
    ++position_;
    skip_space();
    if (peek() == ']') return ++position_, true;
    while (true) {
      if (!value(depth + 1)) return false;
      skip_space();
      if (peek() == ',') {
        ++position_;
        continue;
      }
      if (peek() == ']') return ++position_, true;
      return false;
    }
  }
  bool string(std::string* out) {
    if (peek() != '"') return false;
    ++position_;
    while (position_ < text_.size()) {
      const char c = text_[position_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (position_ >= text_.size()) return false;
        const char escaped = text_[position_++];
        if (escaped == 'u') {
          for (int i = 0; i < 4; ++i) {
            if (position_ >= text_.size() ||
                !std::isxdigit(static_cast<unsigned char>(text_[position_++]))) {
              return false;
            }
          }
        } else if (std::string("\"\\/bfnrt").find(escaped) == std::string::npos) {
          return false;
        }
      } else if (out) {
        *out += c;
      }
    }
    return false;
  }
  bool number() {
    const std::size_t start = position_;
    if (peek() == '-') ++position_;
    if (peek() == '0') {
      ++position_;
    } else if (!digits()) {
      return false;
    }
    if (peek() == '.') {
      ++position_;
      if (!digits()) return false;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++position_;
      if (peek() == '+' || peek() == '-') ++position_;
      if (!digits()) return false;
    }
    return position_ > start;
  }
  bool digits() {
    const std::size_t start = position_;
    while (std::isdigit(static_cast<unsigned char>(peek())))
      ++position_;
    return position_ > start;
  }
  char peek() const { return position_ < text_.size() ? text_[position_] : '\0'; }
  void skip_space() {
    while (position_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[position_]))) {
      ++position_;
    }
  }

  std::string text_;
  std::size_t position_ = 0;
  std::map<std::string, std::string> top_level_;
};

}  // namespace tandem::testing
