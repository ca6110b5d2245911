#pragma once

// How many server processes the shared limit keeps room for (ratelimit/README.md, "Processes
// counted"). Every process that uses the local allowance keeps an entry in one Redis sorted set,
// renewed every `beat_ms` with an expiry `ttl_ms()` ahead by Redis's clock; each renewal answers
// how many live entries there are. Redis's scripts then keep back the local allowance of that many
// processes instead of `ratelimit.processes_max`, so a deployment of one server refuses no
// principal early for servers it does not run.
//
// A local admission weighs on the counts for `span_ms` (twice the longest window: a sliding
// estimate looks one window back). So that every count that decides next to it includes its
// process:
//
// - a process admits locally only once its entry has been in Redis for a count to be fresh and a
//   span on top (`fresh_ms + span_ms + margin_ms` after the renewal that made it, without a gap
//   in which it could have expired): every decision within a span of its first admission used a
//   count taken after the entry appeared;
// - it stops `span_ms + margin_ms` before its entry could expire, if renewals stop answering;
// - a count older than `fresh_ms` is not used: the scripts keep back `processes_max` again.
//
// `margin_ms` covers the time a command spends between being computed here and being run by
// Redis. Times are milliseconds on this process's monotonic clock, passed in by the caller so
// tests can move them; Redis's clock only sets the entries' expiry, against itself.
//
// Thread-safe: one thread calls renewed(); any thread reads.

#include <atomic>
#include <cstdint>

namespace ratelimit {

struct roster_timing {
  std::int64_t beat_ms = 250;     // how often a process renews its entry
  std::int64_t fresh_ms = 1'000;  // how long a count is used
  std::int64_t span_ms = 0;       // how long a local admission weighs: twice the longest window
  std::int64_t margin_ms = 1'000;
  // From the renewal that made the entry to the first local admission; -1: fresh + span + margin,
  // the bound above. Only tests that register every process before their first check shorten it.
  std::int64_t warmup_ms = -1;
  std::int64_t warmup() const { return warmup_ms >= 0 ? warmup_ms : fresh_ms + span_ms + margin_ms; }
  // The entry's lifetime in Redis: a process renewing every beat keeps admitting locally.
  std::int64_t ttl_ms() const { return span_ms + 2 * fresh_ms + 2 * margin_ms; }
};

// The timing for windows no longer than `longest_window_ms`.
roster_timing roster_timing_for(std::int64_t longest_window_ms);

class roster {
 public:
  roster(const roster_timing& timing, std::int64_t processes_max);

  // A renewal sent at `sent_ms` was answered at `answered_ms`: `count` live entries, this one's
  // included.
  void renewed(std::int64_t sent_ms, std::int64_t answered_ms, std::int64_t count);

  // The processes whose local admissions the shared limit keeps room for: the latest count while
  // it is fresh, otherwise `processes_max`; always within [1, processes_max].
  std::int64_t processes(std::int64_t now_ms) const;

  // Whether this process's local admissions are covered by every count decided next to them.
  bool may_admit_locally(std::int64_t now_ms) const;

  const roster_timing& timing() const { return timing_; }

 private:
  const roster_timing timing_;
  const std::int64_t processes_max_;
  // Written by renewed() only. A reader that sees a fresh_until_ sees the count_ stored before it,
  // and one that sees a usable_until_ sees the usable_from_ stored before it: a count is never
  // taken as fresher than it is, nor a restarted entry as older.
  std::atomic<std::int64_t> count_{0};
  std::atomic<std::int64_t> fresh_until_{-1};
  std::atomic<std::int64_t> usable_from_{0};
  std::atomic<std::int64_t> usable_until_{-1};
  // renewed()'s own: when the current unbroken run of renewals began, and the last one was sent.
  std::int64_t run_started_ = 0;
  std::int64_t last_sent_ = 0;
  bool running_ = false;
};

}  // namespace ratelimit
