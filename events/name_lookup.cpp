#include "events/name_lookup.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace events {

host_addresses lookup_host(const std::string& host) {
  host_addresses out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    out.error = rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : std::string(gai_strerror(rc));
    return out;
  }
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, &freeaddrinfo);
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* bytes = nullptr;
    if (a->ai_family == AF_INET) {
      bytes = &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    } else if (a->ai_family == AF_INET6) {
      bytes = &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
    } else {
      continue;
    }
    if (inet_ntop(a->ai_family, bytes, text, sizeof text) == nullptr) continue;
    if (std::find(out.addresses.begin(), out.addresses.end(), text) == out.addresses.end()) {
      out.addresses.emplace_back(text);
    }
  }
  if (out.addresses.empty()) out.error = "no address";
  return out;
}

lookup_pool::lookup_pool(lookup_fn lookup, std::size_t threads) : lookup_(std::move(lookup)) {
  threads_.reserve(std::max<std::size_t>(threads, 1));
  for (std::size_t i = 0; i < std::max<std::size_t>(threads, 1); ++i) threads_.emplace_back([this] { run(); });
}

lookup_pool::~lookup_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void lookup_pool::lookup(const std::string& host, done_fn done, wanted_fn wanted) {
  {
    std::lock_guard lock(mutex_);
    auto [it, first] = waiting_.try_emplace(host);
    it->second.push_back({std::move(done), std::move(wanted)});
    if (!first) return;
    queue_.push_back(host);
  }
  wake_.notify_one();
}

void lookup_pool::run() {
  for (;;) {
    std::string host;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      host = std::move(queue_.front());
      queue_.pop_front();
      const auto& waiters = waiting_.at(host);
      const bool wanted =
          std::any_of(waiters.begin(), waiters.end(), [](const waiter& w) { return !w.wanted || w.wanted(); });
      if (!wanted) {
        waiting_.erase(host);
        continue;
      }
    }
    const auto result = lookup_(host);
    std::vector<waiter> waiters;
    {
      std::lock_guard lock(mutex_);
      auto it = waiting_.find(host);
      waiters = std::move(it->second);
      waiting_.erase(it);
    }
    for (auto& w : waiters) w.done(result);
  }
}

}  // namespace events
