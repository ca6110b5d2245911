#pragma once

// Process-wide logging: readable lines by default, or one JSON object per line.

#include "config/settings.hpp"

namespace config {

// Installs the default spdlog logger on stderr with the level and format of `settings`.
void setup_logging(const log_settings& settings, const std::string& program);

}  // namespace config
