#pragma once

// Management requests sent with an Idempotency-Key, between the HTTP layer's ticket (the key, the
// request's hash, how the answer is written) and persistence's replayable (persistence/replays.hpp).

#include <optional>
#include <string>
#include <utility>

#include "actors/commands.hpp"
#include "actors/views.hpp"
#include "persistence/replays.hpp"

namespace actors {

// The persistence side of a request's ticket: its key under `route`, and its answer (`status`)
// written from the row as the API shows it (`to_view`). nullopt: no key.
template <typename Record, typename View, typename ToView>
std::optional<persistence::replayable<Record>> replay_guard(const request_origin& origin,
                                                            const std::optional<replay_ticket<View>>& ticket,
                                                            std::string route, int status, ToView to_view) {
  if (!ticket) return std::nullopt;
  persistence::replayable<Record> guard;
  guard.request = {origin.principal, ticket->key, std::move(route), ticket->request_hash};
  guard.status = status;
  guard.render = [render = ticket->render, to_view](const Record& r) { return render(to_view(r)); };
  return guard;
}

inline replayed_answer to_replayed(const persistence::stored_answer& a) { return {a.same_request, a.status, a.body}; }

}  // namespace actors
