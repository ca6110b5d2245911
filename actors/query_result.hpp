#pragma once

// The answer to a read or an administrative write: its value, or why there is none.

#include <functional>
#include <string>

#include "ledger/errors.hpp"

namespace actors {

template <typename T>
struct query_result {
  ledger::error_code outcome = ledger::error_code::ok;
  std::string detail;
  T value{};
};

template <typename T>
using query_callback = std::function<void(query_result<T>)>;

}  // namespace actors
