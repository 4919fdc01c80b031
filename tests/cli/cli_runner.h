#pragma once
// Runs the built `tandem` binary (TANDEM_CLI_PATH) and captures its exit status and output, and
// checks that text is well-formed JSON.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "data/idx_files.h"
#include "support/shell.h"

namespace tandem::testing {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs `program` with `args`, standard input closed, capturing both outputs.
inline CliResult run_program(const std::string& program, const std::vector<std::string>& args) {
  ScratchDir scratch;
  std::string command = shell_quote(program);
  for (const std::string& arg : args)
    command += " " + shell_quote(arg);
  command += " >" + shell_quote(scratch.file("out")) + " 2>" + shell_quote(scratch.file("err")) +
             " </dev/null";
  CliResult result;
  result.status = run_shell(command);
  result.out = slurp(scratch.file("out"));
  result.err = slurp(scratch.file("err"));
  return result;
}

inline CliResult run_cli(const std::vector<std::string>& args) {
  return run_program(TANDEM_CLI_PATH, args);
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
