#pragma once

// Forward declaration of pqxx::connection (libpqxx 6.4), so that headers which only pass a
// connection by reference need not include all of libpqxx.

namespace pqxx {
class connect_direct;
template <typename ConnectPolicy>
class basic_connection_base;
using connection = basic_connection_base<connect_direct>;
}  // namespace pqxx
