#pragma once

// Transaction ids: UUIDs whose first 48 bits are the Unix time in milliseconds (the layout of
// UUID version 7), so that journal rows are inserted near the right edge of the primary-key
// index instead of at random places.

#include <string>

namespace actors {

std::string make_transaction_id();

}  // namespace actors
