#pragma once

// The actors' scheduler policy (`actors.scheduler_policy = "sharing"`): one queue of runnable
// actors shared by the scheduler's workers, idle workers parked on a condition variable.
//
// CAF's own sharing policy (caf/policy/work_sharing.hpp) does the same, with two costs that show
// on every request when the workers are mostly idle, as they are between a server's requests:
//
// - It notifies the condition variable while it still holds the queue's lock. The parked worker
//   wakes, blocks at once on that lock, and the enqueuing thread wakes it a second time when it
//   unlocks, where the kernel usually hands the CPU over to the worker and preempts the enqueuing
//   thread: two futex wakes and two context switches per message to an idle scheduler, on the HTTP
//   threads that send the requests (bench/PROFILE.md, twenty-fifth part).
// - Its queue is a std::list: one node allocated per runnable actor, freed by another thread.
//
// Here the worker is woken after the lock is released, and only when one is parked; the queue is
// a deque. The order is first in, first out, and an actor is in the queue at most once (CAF's
// mailbox decides when to enqueue it).
//
// The workers also run under Linux's SCHED_BATCH policy: a woken worker does not preempt the
// thread that woke it. An HTTP thread that hands over a request goes on reading the next ones
// until it waits for the network, and the worker then runs the messages that piled up together,
// on a free core at once, or when the waker's time slice ends. Same priority, same share of the
// CPU; under load, fewer switches (the worker's 0.6 a transfer at 6,000/s fell to 0.3, the HTTP
// threads' preemptions from 0.5 to 0.1) and, with the CPU saturated, 5 µs less of the server's
// CPU per transfer (bench/PROFILE.md, twenty-fifth part). A thread started from an actor inherits
// the policy (the cluster link's connector is the one such; none is on a request's path).

#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/scheduler/worker.hpp>

#include <pthread.h>
#include <sched.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

namespace actors {

class sharing_policy : public caf::policy::unprofiled {
 public:
  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) {}

    std::mutex lock;
    std::condition_variable ready;
    std::deque<caf::resumable*> queue;  // guarded by lock
    std::size_t parked = 0;             // workers waiting on `ready`; guarded by lock
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {}
  };

  template <class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    push(d(self), job);
  }

  template <class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job);
  }

  template <class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job);
  }

  // The job gave up its worker to let others run: it goes to the back of the queue.
  template <class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    push(d(self->parent()), job);
  }

  template <class Worker>
  caf::resumable* dequeue(Worker* self) {
    // Only workers dequeue: the first time on each, it becomes a batch thread. Refused (a
    // sandbox that forbids it), the worker runs as before.
    thread_local const bool batched = [] {
      sched_param param{};
      param.sched_priority = 0;
      return pthread_setschedparam(pthread_self(), SCHED_BATCH, &param) == 0;
    }();
    static_cast<void>(batched);
    auto& data = d(self->parent());
    std::unique_lock guard(data.lock);
    while (data.queue.empty()) {
      ++data.parked;
      data.ready.wait(guard);
      --data.parked;
    }
    auto* job = data.queue.front();
    data.queue.pop_front();
    return job;
  }

  // Workers keep no jobs of their own.
  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker*, UnaryFunction) {}

  // At shutdown, after the workers stopped: every job still queued (and any that their cleanup
  // queued in turn).
  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator* self, UnaryFunction f) {
    auto& data = d(self);
    for (;;) {
      std::deque<caf::resumable*> left;
      {
        std::lock_guard guard(data.lock);
        left.swap(data.queue);
      }
      if (left.empty()) return;
      for (auto* job : left) f(job);
    }
  }

 private:
  static void push(coordinator_data& data, caf::resumable* job) {
    bool wake = false;
    {
      std::lock_guard guard(data.lock);
      data.queue.push_back(job);
      wake = data.parked > 0;
    }
    // After the unlock: the woken worker finds the lock free.
    if (wake) data.ready.notify_one();
  }
};

}  // namespace actors
