#pragma once
// The project virtualenv for tests that check Tandem against a Python package (TensorBoard,
// TensorFlow, onnxruntime, PyTorch): scripts/python-env.sh GROUP installs the group's pinned
// requirements once per test process. Where the package index cannot be reached (the script
// exits 3) the test is skipped with the reason; any other failure fails it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "support/shell.h"

namespace tandem::testing {

// scripts/python-env.sh's exit status when the package index cannot be reached.
inline constexpr int kPackageIndexUnreachable = 3;

struct PythonEnv {
  std::string python;       // the interpreter; empty when the group is not available
  std::string skip_reason;  // why the tests using it are skipped
  std::string failure;      // why they fail
};

inline const PythonEnv& python_env(const std::string& group) {
  static std::map<std::string, PythonEnv> prepared;
  const auto found = prepared.find(group);
  if (found != prepared.end()) return found->second;
  const std::string root = TANDEM_SOURCE_DIR;
  const ShellResult setup =
      run_capturing(shell_quote(root + "/scripts/python-env.sh") + " " + group + " 2>&1");
  PythonEnv env;
  if (setup.status == kPackageIndexUnreachable) {
    env.skip_reason = "the Python group '" + group +
                      "' is not installed and the package index cannot be reached "
                      "(scripts/python-env.sh " +
                      group + " exited 3): " + setup.output;
  } else if (setup.status != 0) {
    env.failure = "scripts/python-env.sh " + group + " failed with status " +
                  std::to_string(setup.status) + ": " + setup.output;
  } else {
    const char* venv = std::getenv("TANDEM_VENV");
    env.python = (venv != nullptr ? std::string(venv) : root + "/.venv") + "/bin/python";
  }
  return prepared.emplace(group, env).first->second;
}

}  // namespace tandem::testing

// In a test body: `env` names the group's PythonEnv; skips or fails the test when it is absent.
#define TANDEM_REQUIRE_PYTHON_ENV(env, group)                                     \
  const ::tandem::testing::PythonEnv& env = ::tandem::testing::python_env(group); \
  if (!(env).skip_reason.empty()) GTEST_SKIP() << (env).skip_reason;              \
  if (!(env).failure.empty()) FAIL() << (env).failure
