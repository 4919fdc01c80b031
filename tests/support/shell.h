#pragma once
// Running shell commands from tests: quoting, exit statuses, captured output, whole files.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace tandem::testing {

inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// How many times `part` occurs in `text` (overlaps counted).
inline std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++count;
  return count;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The exit status the shell reports: the program's own, or 128 + the signal that ended it.
inline int exit_status(int raw) {
  if (raw == -1) return -1;
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}

// Runs `command` with /bin/sh; its output goes where the test's goes.
inline int run_shell(const std::string& command) {
  return exit_status(std::system(command.c_str()));
}

struct ShellResult {
  int status = -1;
  std::string output;  // standard output (add 2>&1 to the command for standard error too)
};

inline ShellResult run_capturing(const std::string& command) {
  ShellResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr)
    result.output += buffer;
  result.status = exit_status(::pclose(pipe));
  return result;
}

}  // namespace tandem::testing
