#pragma once

// A thread of its own that calls one function every interval until it is stopped: the timers of
// the sweeper, the hold expirer, the key revocation check and the kept-answer pruner.
//
// The first call comes one interval after start(); a call that takes longer than the interval
// delays the next one (calls never overlap). stop() wakes the thread, waits for a call in progress
// to return, and may be called more than once; the destructor stops too.

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace base {

class ticker {
 public:
  ticker() = default;
  ~ticker() { stop(); }
  ticker(const ticker&) = delete;
  ticker& operator=(const ticker&) = delete;

  // `name`: the thread's name as `top` and `perf` show it (at most 15 characters).
  void start(std::string name, std::chrono::milliseconds interval, std::function<void()> tick) {
    thread_ = std::thread([this, name = std::move(name), interval, tick = std::move(tick)] {
      pthread_setname_np(pthread_self(), name.c_str());
      std::unique_lock lock(mutex_);
      while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
        lock.unlock();
        tick();
        lock.lock();
      }
    });
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace base
