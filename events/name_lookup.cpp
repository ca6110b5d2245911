#include "events/name_lookup.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include <spdlog/spdlog.h>

#include "ledger/webhooks.hpp"

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

destination_judge::destination_judge(lookup_fn lookup, std::size_t at_once, std::chrono::milliseconds wait)
    : wait_(wait), at_once_(std::max<std::size_t>(at_once, 1)), pool_(std::move(lookup), at_once_) {}

std::shared_ptr<destination_judge> destination_judge::admit() {
  {
    std::lock_guard lock(mutex_);
    if (admitted_ >= at_once_) return nullptr;
    ++admitted_;
  }
  auto self = shared_from_this();
  return std::shared_ptr<destination_judge>(self.get(), [self](destination_judge* judge) {
    std::lock_guard lock(judge->mutex_);
    --judge->admitted_;
  });
}

std::optional<std::string> destination_judge::refused(const std::string& host, bool allow_loopback) {
  host_addresses found;
  const bool literal = ledger::classify_address(host).has_value();
  if (literal) {
    found.addresses.push_back(host);
  } else {
    // Shared with the pool's thread, which may answer after this call has given up.
    struct answer {
      std::mutex mutex;
      std::condition_variable ready;
      std::optional<host_addresses> found;
      std::atomic<bool> wanted{true};
    };
    auto a = std::make_shared<answer>();
    pool_.lookup(
        host,
        [a](const host_addresses& r) {
          {
            std::lock_guard lock(a->mutex);
            a->found = r;
          }
          a->ready.notify_all();
        },
        [a] { return a->wanted.load(); });
    std::unique_lock lock(a->mutex);
    if (!a->ready.wait_for(lock, wait_, [&a] { return a->found.has_value(); })) {
      a->wanted = false;
      return "the host " + host + " did not resolve within " + std::to_string(wait_.count()) +
             " ms: check its DNS servers, and try again";
    }
    found = std::move(*a->found);
  }
  // What a name resolves to on the server's network is not the caller's to learn (whether an
  // internal name exists, and its address): a name is refused in one way whatever the reason, which
  // the log keeps. An address written in the URL is named.
  auto refuse = [&](const std::string& why) -> std::string {
    if (literal) return why;
    spdlog::info("webhook destination {} refused: {}", host, why);
    return "the host " + host +
           " does not resolve, or resolves to an address that is not public: webhooks go to public addresses only";
  };
  if (!found.error.empty()) return refuse("it does not resolve (" + found.error + ")");
  for (const auto& address : found.addresses) {
    const auto kind = ledger::classify_address(address);
    if (!kind) return refuse(address + " is an address of an unknown kind");
    if (!ledger::destination_allowed(*kind, allow_loopback)) {
      return refuse(address + " is a " + std::string(ledger::to_string(*kind)) +
                    " address: webhooks go to public addresses only");
    }
  }
  return std::nullopt;
}

}  // namespace events
