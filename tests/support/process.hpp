#pragma once

// Child processes for the tests: the current environment as a map, argv/envp arrays for
// exec-style calls, and a program run to its end with its output captured.

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace test_support {

// The current process environment as a map.
std::map<std::string, std::string> current_environment();

// `NAME=value` strings of `env`, in the form execve() takes once passed through c_array().
std::vector<std::string> environment_strings(const std::map<std::string, std::string>& env);

// A null-terminated argv- or envp-style array pointing into `strings`, which must outlive it.
std::vector<char*> c_array(std::vector<std::string>& strings);

// Runs a program to its end (at most `timeout`, then SIGKILL) with exactly `env`; captures
// stdout and stderr together. exit_code is -1 when it did not exit by itself.
struct run_result {
  int exit_code = -1;
  std::string output;
};
run_result run_program(const std::string& binary, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env, std::chrono::milliseconds timeout);

}  // namespace test_support
