#include "persistence/webhooks.hpp"

#include <pqxx/pqxx>

#include <functional>

#include "base/assert.hpp"
#include "persistence/database.hpp"
#include "persistence/outbox.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// The transaction-scoped lock that serializes the endpoint count check of one owner (two-key
// form: a class of our own, and the owner id folded into int4; a collision only serializes two
// owners' creations).
constexpr std::int32_t k_endpoint_lock_class = 0x77686b73;  // "whks"

std::string utc(const std::string& column) {
  return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

const std::string k_endpoint_columns =
    "id, owner_id, all_accounts, account_id, url, array_to_string(event_types, ','),"
    " feed_cursor, " +
    utc("created_at") + ", COALESCE(" + utc("disabled_at") + ", ''), COALESCE(disabled_reason, ''), COALESCE(" +
    utc("secret_rotated_at") + ", ''), CASE WHEN previous_secret_expires_at > now() THEN " +
    utc("previous_secret_expires_at") + " ELSE '' END";

constexpr const char* k_owner_lock = "webhook_owner_lock";
const std::string k_owner_lock_sql =
    "SELECT pg_advisory_xact_lock(" + std::to_string(k_endpoint_lock_class) + ", ($1::bigint % 2147483647)::int)";

constexpr const char* k_count_live = "webhook_count_live";
constexpr const char* k_count_live_sql =
    "SELECT count(*) FROM webhook_endpoint WHERE owner_id = $1 AND deleted_at IS NULL";

// The end of the feed now: the last index of the highest position given.
constexpr const char* k_feed_end = "webhook_feed_end";
const std::string k_feed_end_sql =
    "SELECT COALESCE((SELECT feed_seq FROM outbox_event WHERE feed_seq IS NOT NULL ORDER BY feed_seq DESC LIMIT 1), "
    "0)";

constexpr const char* k_insert_endpoint = "webhook_insert_endpoint";
const std::string k_insert_endpoint_sql =
    "INSERT INTO webhook_endpoint (owner_id, all_accounts, account_id, url, event_types, signing_secret, feed_cursor)"
    " VALUES ($1, $2, $3, $4, $5::text[], $6, $7) RETURNING " +
    k_endpoint_columns;

constexpr const char* k_list_endpoints = "webhook_list_endpoints";
const std::string k_list_endpoints_sql = "SELECT " + k_endpoint_columns +
                                         " FROM webhook_endpoint WHERE deleted_at IS NULL AND ($1::bigint IS NULL OR "
                                         "owner_id = $1) AND id > $2 ORDER BY id LIMIT $3";

constexpr const char* k_find_endpoint = "webhook_find_endpoint";
const std::string k_find_endpoint_sql = "SELECT " + k_endpoint_columns +
                                        " FROM webhook_endpoint WHERE id = $1 AND deleted_at IS NULL AND ($2::bigint "
                                        "IS NULL OR owner_id = $2)";

// The fan-out's shared position (migration 029), held FOR SHARE by every change that decides what
// a following endpoint is given, before it touches the endpoint's row: a fan-out step holds it FOR
// UPDATE from reading the following endpoints until it commits, so it sees such a change whole or
// not at all, and the position cannot move under the change.
constexpr const char* k_hold_position = "webhook_hold_position";
constexpr const char* k_hold_position_sql = "SELECT cursor FROM webhook_fan_out WHERE singleton FOR SHARE";
// Where an endpoint stands, given the position $N: a following endpoint at the position or at its
// own cursor, whichever is further; any other at its own cursor.
std::string standing(const std::string& position) {
  return "CASE WHEN follows_fan_out THEN GREATEST(feed_cursor, " + position + ") ELSE feed_cursor END";
}

// Disabling by request keeps the reason of an endpoint disabled already (the 200 shows it). A
// disabled endpoint stops following the shared position: where it stood ($4 the position) becomes
// its own cursor, from which it goes on once enabled.
constexpr const char* k_disable_endpoint = "webhook_disable_endpoint";
const std::string k_disable_endpoint_sql =
    "UPDATE webhook_endpoint SET disabled_at = now(), disabled_reason = $3, feed_cursor = " + standing("$4::bigint") +
    ", follows_fan_out = false"
    " WHERE id = $1 AND deleted_at IS NULL AND disabled_at IS NULL AND ($2::bigint IS NULL OR owner_id = $2)"
    " RETURNING " +
    k_endpoint_columns;
// Enabling answers the delivery that disabled the endpoint (null: none, or disabled by request). An
// endpoint enabled goes on from its own cursor and joins the shared position once it reaches it
// (disabling took it out already; this also holds for one disabled by a server from before
// migration 029, which left it in).
constexpr const char* k_enable_endpoint = "webhook_enable_endpoint";
constexpr const char* k_enable_endpoint_sql =
    "UPDATE webhook_endpoint e SET disabled_at = NULL, disabled_reason = NULL, disabled_by_delivery = NULL,"
    " follows_fan_out = false"
    " FROM (SELECT id, disabled_by_delivery FROM webhook_endpoint WHERE id = $1 AND deleted_at IS NULL"
    "       AND disabled_at IS NOT NULL AND ($2::bigint IS NULL OR owner_id = $2) FOR UPDATE) old"
    " WHERE e.id = old.id RETURNING old.disabled_by_delivery";
// A delivery given up disables its endpoint (answers true; $4 the position, as above), or, when the endpoint was disabled
// meanwhile (an attempt in flight when it was paused on request), becomes the delivery its enabling
// sends again, unless one is named already (answers false). The endpoint row is locked first and
// judged as it is then, so that an enable committing meanwhile is seen rather than skipped: the
// delivery is never left FAILED behind an enabled endpoint with nothing naming it.
constexpr const char* k_disable_after_failure = "webhook_disable_after_failure";
const std::string k_disable_after_failure_sql =
    "UPDATE webhook_endpoint e SET disabled_at = COALESCE(e.disabled_at, now()),"
    " disabled_reason = COALESCE(e.disabled_reason, $2), disabled_by_delivery = COALESCE(e.disabled_by_delivery, $3),"
    " feed_cursor = CASE WHEN e.follows_fan_out THEN GREATEST(e.feed_cursor, $4::bigint) ELSE e.feed_cursor END,"
    " follows_fan_out = false"
    " FROM (SELECT id, disabled_at IS NULL AS was_enabled FROM webhook_endpoint WHERE id = $1 AND deleted_at IS NULL"
    "       FOR NO KEY UPDATE) locked"
    " WHERE e.id = locked.id RETURNING locked.was_enabled";

// The secret replaced goes on signing until now() + $4 seconds, or not at all ($4 = 0).
constexpr const char* k_rotate_secret = "webhook_rotate_secret";
const std::string k_rotate_secret_sql =
    "UPDATE webhook_endpoint SET signing_secret = $3, secret_rotated_at = now(),"
    " previous_signing_secret = CASE WHEN $4::bigint > 0 THEN signing_secret END,"
    " previous_secret_expires_at = CASE WHEN $4::bigint > 0 THEN now() + $4::bigint * interval '1 second' END"
    " WHERE id = $1 AND deleted_at IS NULL AND ($2::bigint IS NULL OR owner_id = $2)"
    " RETURNING " +
    k_endpoint_columns;

// $5: whether the account changes, to $6 (null: any account). An endpoint that is not an
// operator's takes only an account of its owner's (the row is then left as it is).
constexpr const char* k_update_endpoint = "webhook_update_endpoint";
const std::string k_update_endpoint_sql =
    "UPDATE webhook_endpoint e SET url = COALESCE($3, url), event_types = COALESCE($4::text[], event_types),"
    " account_id = CASE WHEN $5::boolean THEN $6::bigint ELSE account_id END"
    " WHERE id = $1 AND deleted_at IS NULL AND ($2::bigint IS NULL OR owner_id = $2)"
    "   AND (NOT $5::boolean OR $6::bigint IS NULL OR all_accounts"
    "        OR EXISTS (SELECT 1 FROM account a WHERE a.id = $6::bigint AND a.owner_id = e.owner_id))"
    " RETURNING " +
    k_endpoint_columns;

constexpr const char* k_delete_endpoint = "webhook_delete_endpoint";
constexpr const char* k_delete_endpoint_sql =
    "UPDATE webhook_endpoint SET deleted_at = now() WHERE id = $1 AND deleted_at IS NULL"
    " AND ($2::bigint IS NULL OR owner_id = $2)";
// A deleted endpoint's pending deliveries end with it: nothing sends them any more (an attempt in
// flight records nothing: its outcome is written only over a PENDING row).
constexpr const char* k_end_deleted_deliveries = "webhook_end_deleted_deliveries";
constexpr const char* k_end_deleted_deliveries_sql =
    "UPDATE webhook_delivery SET status = 'FAILED', completed_at = now(), lease_until = NULL,"
    " last_error = 'the endpoint was deleted' WHERE endpoint_id = $1 AND status = 'PENDING'";

const std::string k_delivery_columns =
    "id, endpoint_id, event_cursor, event_id, event_type, status, attempts, last_status_code, "
    "COALESCE(last_error, ''), CASE WHEN status = 'PENDING' THEN " +
    utc("next_attempt_at") + " ELSE '' END, COALESCE(" + utc("last_attempt_at") + ", ''), COALESCE(" +
    utc("completed_at") + ", ''), " + utc("created_at");

constexpr const char* k_list_deliveries = "webhook_list_deliveries";
const std::string k_list_deliveries_sql = "SELECT " + k_delivery_columns +
                                          " FROM webhook_delivery WHERE endpoint_id = $1 AND id > $2 ORDER BY id "
                                          "LIMIT $3";

constexpr const char* k_retry = "webhook_retry";
const std::string k_retry_sql =
    "UPDATE webhook_delivery SET status = 'PENDING', next_attempt_at = now(), span_attempts = 0,"
    " first_attempt_at = NULL, lease_until = NULL, completed_at = NULL"
    " WHERE id = $1 AND endpoint_id = $2 AND status = 'FAILED'"
    "   AND EXISTS (SELECT 1 FROM webhook_endpoint e WHERE e.id = $2 AND e.deleted_at IS NULL)"
    " RETURNING " +
    k_delivery_columns;
constexpr const char* k_find_delivery = "webhook_find_delivery";
const std::string k_find_delivery_sql = "SELECT " + k_delivery_columns +
                                        " FROM webhook_delivery WHERE id = $1 AND endpoint_id = $2 AND EXISTS "
                                        "(SELECT 1 FROM webhook_endpoint e WHERE e.id = $2 AND e.deleted_at IS NULL)";

// The enabled endpoints that do not follow the shared position (migration 029), by cursor and id,
// after ($1, $2).
constexpr const char* k_lagging_endpoints = "webhook_lagging_endpoints";
const std::string k_lagging_endpoints_sql =
    "SELECT " + k_endpoint_columns +
    " FROM webhook_endpoint WHERE NOT follows_fan_out AND deleted_at IS NULL AND disabled_at IS NULL"
    " AND (feed_cursor, id) > ($1, $2) ORDER BY feed_cursor, id LIMIT $3";

// The feed's end (as k_feed_end), the shared position, and whether an enabled endpoint does not
// follow it.
constexpr const char* k_fan_out_state = "webhook_fan_out_state";
const std::string k_fan_out_state_sql = "SELECT (" + k_feed_end_sql +
                                        "), (SELECT cursor FROM webhook_fan_out WHERE singleton),"
                                        " EXISTS (SELECT 1 FROM webhook_endpoint WHERE NOT follows_fan_out"
                                        "         AND deleted_at IS NULL AND disabled_at IS NULL)";

// A step of the shared position: its row locked (a step of another server waits, then finds it
// moved), the following endpoints its events may be for (those of the owners the events touch, and
// the operators'), their deliveries, and the position moved.
constexpr const char* k_lock_position = "webhook_lock_position";
constexpr const char* k_lock_position_sql = "SELECT cursor FROM webhook_fan_out WHERE singleton FOR UPDATE";
constexpr const char* k_following_endpoints = "webhook_following_endpoints";
const std::string k_following_endpoints_sql =
    "SELECT " + k_endpoint_columns +
    " FROM webhook_endpoint WHERE follows_fan_out AND deleted_at IS NULL AND disabled_at IS NULL"
    " AND NOT all_accounts AND owner_id = ANY($1::bigint[])"
    " UNION ALL SELECT " +
    k_endpoint_columns +
    " FROM webhook_endpoint WHERE follows_fan_out AND deleted_at IS NULL AND disabled_at IS NULL AND all_accounts";
constexpr const char* k_add_deliveries = "webhook_add_deliveries";
constexpr const char* k_add_deliveries_sql =
    "INSERT INTO webhook_delivery (endpoint_id, event_cursor, event_id, event_type, body)"
    " SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[])"
    " ON CONFLICT (endpoint_id, event_cursor) DO NOTHING";
constexpr const char* k_move_position = "webhook_move_position";
constexpr const char* k_move_position_sql = "UPDATE webhook_fan_out SET cursor = $1 WHERE singleton";

// Enabled endpoints that do not follow the position and have reached it ($1, held FOR SHARE) join,
// their rows locked in id order (two servers joining at once never wait on each other in a cycle)
// and judged again once locked.
constexpr const char* k_join_position = "webhook_join_position";
constexpr const char* k_join_position_sql =
    "UPDATE webhook_endpoint e SET follows_fan_out = true"
    " FROM (SELECT id FROM webhook_endpoint WHERE NOT follows_fan_out AND deleted_at IS NULL"
    "       AND disabled_at IS NULL AND feed_cursor >= $1 ORDER BY id FOR NO KEY UPDATE) j"
    " WHERE e.id = j.id AND NOT e.follows_fan_out AND e.deleted_at IS NULL AND e.disabled_at IS NULL"
    "   AND e.feed_cursor >= $1";

// Several endpoints' own fan-out steps (endpoints that do not follow the shared position): their
// rows locked in id order (two servers' steps never wait on each other in a cycle), each cursor
// moved only from where the step began and while the endpoint is live, enabled, does not follow the
// position and keeps the event types and the account its deliveries were chosen by (a change of
// them waits for this to commit, or makes it find them changed), and the deliveries of the moved
// endpoints inserted. The quals are checked again on each row once locked.
constexpr const char* k_fan_out_steps = "webhook_fan_out_steps";
constexpr const char* k_fan_out_steps_sql =
    "WITH step AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $10::bigint[])"
    "              AS s(id, f, t, types, account)),"
    " locked AS (SELECT e.id FROM webhook_endpoint e JOIN step ON step.id = e.id ORDER BY e.id FOR NO KEY UPDATE OF e),"
    " moved AS (UPDATE webhook_endpoint e SET feed_cursor = step.t FROM step"
    "   WHERE e.id = step.id AND e.id IN (SELECT id FROM locked) AND e.feed_cursor = step.f"
    "     AND NOT e.follows_fan_out AND e.deleted_at IS NULL AND e.disabled_at IS NULL"
    "     AND e.event_types = step.types::text[] AND COALESCE(e.account_id, 0) = step.account"
    "   RETURNING e.id),"
    " added AS (INSERT INTO webhook_delivery (endpoint_id, event_cursor, event_id, event_type, body)"
    "   SELECT u.e, u.c, u.i, u.t, u.b FROM unnest($5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::text[])"
    "     AS u(e, c, i, t, b) WHERE u.e IN (SELECT id FROM moved)"
    "   ON CONFLICT (endpoint_id, event_cursor) DO NOTHING)"
    " SELECT id FROM moved";

// The head of each queue: the endpoints with deliveries pending are walked through the pending
// index one endpoint at a time (a loose index scan: one descent per such endpoint, its oldest
// pending delivery first), so a claim costs the endpoints that have something to send, not every
// endpoint registered (with 2,000 endpoints of which one had deliveries, probing each endpoint's
// head cost every claim 2,000 probes). Each head's endpoint must be live, enabled and not busy here
// (one primary-key probe each, the state judged above it: with the state in the probe, a plan may
// take the partial index of the enabled endpoints and filter it for the id). The heads, when due and not leased, are locked without waiting;
// then their leases and the attempts counted, in the same statement. Two servers never hold one
// row: the second skips what the first locked, and once the first commits, the lease keeps it out
// until the attempt is over. The due and lease conditions sit at the level that locks, so that a
// row leased by a transaction that committed meanwhile is checked again once locked (READ
// COMMITTED re-reads it) and left alone.
//
// The heads are then read by primary key (an array of their ids), and the status is checked there
// as "not finished", which the pending index's predicate cannot be proved from: joined to the heads
// instead, a plan made while webhook_delivery was nearly empty read every pending delivery once per
// endpoint (159 ms a claim with 200 endpoints and 1,000 deliveries pending, 0.5 ms this way;
// tests/persistence/posting_plan_tests.cpp).
constexpr const char* k_claim = "webhook_claim";
constexpr const char* k_claim_sql =
    "WITH RECURSIVE pending AS ("
    "  (SELECT d.endpoint_id, d.id FROM webhook_delivery d WHERE d.status = 'PENDING'"
    "    ORDER BY d.endpoint_id, d.event_cursor LIMIT 1)"
    "  UNION ALL"
    "  SELECT n.endpoint_id, n.id FROM pending p"
    "  CROSS JOIN LATERAL (SELECT d.endpoint_id, d.id FROM webhook_delivery d"
    "                      WHERE d.status = 'PENDING' AND d.endpoint_id > p.endpoint_id"
    "                      ORDER BY d.endpoint_id, d.event_cursor LIMIT 1) n),"
    " heads AS ("
    "  SELECT p.id FROM pending p"
    "  CROSS JOIN LATERAL (SELECT e.deleted_at IS NULL AND e.disabled_at IS NULL AS live FROM webhook_endpoint e"
    "                      WHERE e.id = p.endpoint_id LIMIT 1) e"
    "  WHERE e.live AND p.endpoint_id <> ALL($2::bigint[])),"
    " claimed AS ("
    "  SELECT d.id FROM webhook_delivery d"
    "  WHERE d.id = ANY (ARRAY(SELECT id FROM heads)) AND d.status NOT IN ('DELIVERED', 'FAILED')"
    "    AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until < now())"
    "  ORDER BY d.next_attempt_at LIMIT $1 FOR UPDATE OF d SKIP LOCKED)"
    " UPDATE webhook_delivery d SET attempts = d.attempts + 1, span_attempts = d.span_attempts + 1,"
    "   first_attempt_at = COALESCE(d.first_attempt_at, now()), last_attempt_at = now(),"
    "   lease_until = now() + ($3::bigint * interval '1 millisecond')"
    " FROM claimed c, webhook_endpoint e WHERE d.id = c.id AND e.id = d.endpoint_id"
    " RETURNING d.id, d.endpoint_id, d.attempts, d.span_attempts,"
    "   (extract(epoch FROM now() - COALESCE(d.first_attempt_at, now())) * 1000)::bigint,"
    "   d.event_id, e.url, e.signing_secret,"
    "   CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_signing_secret ELSE '' END, d.body";

constexpr const char* k_record_delivered = "webhook_record_delivered";
constexpr const char* k_record_delivered_sql =
    "UPDATE webhook_delivery SET status = 'DELIVERED', completed_at = now(), lease_until = NULL,"
    " last_status_code = $3, last_error = NULL WHERE id = $1 AND attempts = $2 AND status = 'PENDING'";
constexpr const char* k_record_retry = "webhook_record_retry";
constexpr const char* k_record_retry_sql =
    "UPDATE webhook_delivery SET lease_until = NULL, last_status_code = $3, last_error = $4,"
    " next_attempt_at = now() + ($5::bigint * interval '1 millisecond')"
    " WHERE id = $1 AND attempts = $2 AND status = 'PENDING'";
constexpr const char* k_record_failed = "webhook_record_failed";
constexpr const char* k_record_failed_sql =
    "UPDATE webhook_delivery SET status = 'FAILED', completed_at = now(), lease_until = NULL,"
    " last_status_code = $3, last_error = $4 WHERE id = $1 AND attempts = $2 AND status = 'PENDING'"
    " RETURNING endpoint_id";

constexpr const char* k_prune = "webhook_prune";
constexpr const char* k_prune_sql =
    "WITH doomed AS ("
    "  SELECT d.id FROM webhook_delivery d"
    "   WHERE d.status <> 'PENDING' AND d.completed_at < now() - $1::bigint * interval '1 day'"
    "     AND NOT EXISTS (SELECT 1 FROM webhook_endpoint e WHERE e.disabled_by_delivery = d.id)"
    "   ORDER BY d.completed_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED)"
    " DELETE FROM webhook_delivery d USING doomed WHERE d.id = doomed.id";

constexpr std::size_t k_error_text_max = 500;

// Why a given-up delivery disabled its endpoint, as its owner reads it.
std::string failure_reason(const webhook_attempt_outcome& o, const std::string& error) {
  std::string why =
      "delivery " + std::to_string(o.delivery_id) + " was given up after " + std::to_string(o.attempts) + " attempts";
  if (!error.empty()) return why + ": " + error;
  if (o.status_code) return why + ": answered " + std::to_string(*o.status_code);
  return why;
}

std::vector<std::string> split_types(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

webhook_endpoint_record read_endpoint(const pqxx::row& row) {
  webhook_endpoint_record e;
  e.id = row[0].as<std::int64_t>();
  e.owner = row[1].as<std::int64_t>();
  e.all_accounts = row[2].as<bool>();
  if (!row[3].is_null()) e.account = row[3].as<std::int64_t>();
  e.url = row[4].as<std::string>();
  e.event_types = split_types(row[5].as<std::string>());
  e.feed_cursor = row[6].as<std::int64_t>();
  e.created_at = row[7].as<std::string>();
  e.disabled_at = row[8].as<std::string>();
  e.disabled_reason = row[9].as<std::string>();
  e.secret_rotated_at = row[10].as<std::string>();
  e.previous_secret_expires_at = row[11].as<std::string>();
  return e;
}

std::optional<webhook_delivery_status> parse_status(std::string_view s) {
  if (s == "PENDING") return webhook_delivery_status::pending;
  if (s == "DELIVERED") return webhook_delivery_status::delivered;
  if (s == "FAILED") return webhook_delivery_status::failed;
  return std::nullopt;
}

webhook_delivery_record read_delivery(const pqxx::row& row) {
  webhook_delivery_record d;
  d.id = row[0].as<std::int64_t>();
  d.endpoint_id = row[1].as<std::int64_t>();
  d.event_cursor = row[2].as<std::int64_t>();
  d.event_id = row[3].as<std::string>();
  d.event_type = row[4].as<std::string>();
  d.status = parse_column(parse_status, row[5].as<std::string>(), "webhook_delivery.status");
  d.attempts = row[6].as<int>();
  if (!row[7].is_null()) d.last_status_code = row[7].as<int>();
  d.last_error = row[8].as<std::string>();
  d.next_attempt_at = row[9].as<std::string>();
  d.last_attempt_at = row[10].as<std::string>();
  d.completed_at = row[11].as<std::string>();
  d.created_at = row[12].as<std::string>();
  return d;
}

}  // namespace

std::string_view to_string(webhook_delivery_status s) {
  switch (s) {
    case webhook_delivery_status::pending: return "PENDING";
    case webhook_delivery_status::delivered: return "DELIVERED";
    case webhook_delivery_status::failed: return "FAILED";
  }
  return "PENDING";
}

void prepare_webhook_statements(pqxx::connection& conn) {
  conn.prepare(k_owner_lock, k_owner_lock_sql);
  conn.prepare(k_count_live, k_count_live_sql);
  conn.prepare(k_feed_end, k_feed_end_sql);
  conn.prepare(k_insert_endpoint, k_insert_endpoint_sql);
  conn.prepare(k_list_endpoints, k_list_endpoints_sql);
  conn.prepare(k_find_endpoint, k_find_endpoint_sql);
  conn.prepare(k_rotate_secret, k_rotate_secret_sql);
  conn.prepare(k_update_endpoint, k_update_endpoint_sql);
  conn.prepare(k_delete_endpoint, k_delete_endpoint_sql);
  conn.prepare(k_end_deleted_deliveries, k_end_deleted_deliveries_sql);
  conn.prepare(k_disable_endpoint, k_disable_endpoint_sql);
  conn.prepare(k_enable_endpoint, k_enable_endpoint_sql);
  conn.prepare(k_disable_after_failure, k_disable_after_failure_sql);
  conn.prepare(k_list_deliveries, k_list_deliveries_sql);
  conn.prepare(k_retry, k_retry_sql);
  conn.prepare(k_find_delivery, k_find_delivery_sql);
  conn.prepare(k_hold_position, k_hold_position_sql);
  conn.prepare(k_lagging_endpoints, k_lagging_endpoints_sql);
  conn.prepare(k_fan_out_state, k_fan_out_state_sql);
  conn.prepare(k_lock_position, k_lock_position_sql);
  conn.prepare(k_following_endpoints, k_following_endpoints_sql);
  conn.prepare(k_add_deliveries, k_add_deliveries_sql);
  conn.prepare(k_move_position, k_move_position_sql);
  conn.prepare(k_join_position, k_join_position_sql);
  conn.prepare(k_fan_out_steps, k_fan_out_steps_sql);
  conn.prepare(k_claim, k_claim_sql);
  conn.prepare(k_record_delivered, k_record_delivered_sql);
  conn.prepare(k_record_retry, k_record_retry_sql);
  conn.prepare(k_record_failed, k_record_failed_sql);
  conn.prepare(k_prune, k_prune_sql);
}

std::optional<webhook_endpoint_record> create_webhook_endpoint(pqxx::connection& conn, const new_webhook_endpoint& e,
                                                               std::int64_t live_max, const audit_entry* audit,
                                                               replayable<webhook_endpoint_record>* replay) {
  WALLET_ASSERT(e.owner > 0 && !e.event_types.empty() && !e.signing_secret.empty(), "a complete endpoint");
  pqxx::work txn(conn);
  if (replay && (replay->stored = claim_replay(txn, replay->request))) return std::nullopt;
  txn.exec_prepared(k_owner_lock, e.owner);
  if (txn.exec_prepared1(k_count_live, e.owner)[0].as<std::int64_t>() >= live_max) return std::nullopt;
  const auto top = txn.exec_prepared1(k_feed_end)[0].as<std::int64_t>();
  const auto start = top == 0 ? 0 : event_cursor(top, k_events_per_row_max - 1);
  auto created = read_endpoint(txn.exec_prepared1(k_insert_endpoint, e.owner, e.all_accounts, e.account, e.url,
                                                  pg_array(e.event_types), e.signing_secret, start));
  if (audit) {
    append_audit(txn, *audit, "webhook_endpoint:" + std::to_string(created.id));
  }
  if (replay) record_replay(txn, replay->request, replay->status, replay->render(created));
  txn.commit();
  return created;
}

std::vector<webhook_endpoint_record> list_webhook_endpoints(pqxx::connection& conn,
                                                            std::optional<ledger::principal_id> owner,
                                                            std::int64_t after, int limit) {
  pqxx::read_transaction txn(conn);
  std::vector<webhook_endpoint_record> out;
  for (const auto& row : txn.exec_prepared(k_list_endpoints, owner, after, limit)) out.push_back(read_endpoint(row));
  return out;
}

std::optional<webhook_endpoint_record> find_webhook_endpoint(pqxx::connection& conn, std::int64_t id,
                                                             std::optional<ledger::principal_id> owner) {
  pqxx::read_transaction txn(conn);
  const auto found = txn.exec_prepared(k_find_endpoint, id, owner);
  if (found.empty()) return std::nullopt;
  return read_endpoint(found[0]);
}

bool delete_webhook_endpoint(pqxx::connection& conn, std::int64_t id, std::optional<ledger::principal_id> owner,
                             const audit_entry* audit) {
  pqxx::work txn(conn);
  txn.exec_prepared(k_hold_position);
  if (txn.exec_prepared(k_delete_endpoint, id, owner).affected_rows() != 1) return false;
  txn.exec_prepared(k_end_deleted_deliveries, id);
  if (audit) append_audit(txn, *audit, "webhook_endpoint:" + std::to_string(id));
  txn.commit();
  return true;
}

std::optional<webhook_endpoint_record> disable_webhook_endpoint(pqxx::connection& conn, std::int64_t id,
                                                                std::optional<ledger::principal_id> owner,
                                                                const std::string& reason, const audit_entry* audit) {
  WALLET_ASSERT(!reason.empty(), "a disabled endpoint says why");
  pqxx::work txn(conn);
  const auto position = txn.exec_prepared1(k_hold_position)[0].as<std::int64_t>();
  const auto disabled = txn.exec_prepared(k_disable_endpoint, id, owner, reason, position);
  if (disabled.empty()) {
    const auto found = txn.exec_prepared(k_find_endpoint, id, owner);
    if (found.empty()) return std::nullopt;
    return read_endpoint(found[0]);
  }
  if (audit) append_audit(txn, *audit, "webhook_endpoint:" + std::to_string(id));
  auto out = read_endpoint(disabled[0]);
  txn.commit();
  return out;
}

std::optional<webhook_endpoint_record> rotate_webhook_secret(pqxx::connection& conn, std::int64_t id,
                                                             std::optional<ledger::principal_id> owner,
                                                             const std::string& new_secret,
                                                             std::int64_t previous_valid_s, const audit_entry* audit,
                                                             replayable<webhook_endpoint_record>* replay) {
  WALLET_ASSERT(!new_secret.empty() && previous_valid_s >= 0, "a secret, and how long the previous one signs");
  pqxx::work txn(conn);
  if (replay && (replay->stored = claim_replay(txn, replay->request))) return std::nullopt;
  const auto rotated = txn.exec_prepared(k_rotate_secret, id, owner, new_secret, previous_valid_s);
  if (rotated.empty()) return std::nullopt;
  if (audit) append_audit(txn, *audit, "webhook_endpoint:" + std::to_string(id));
  auto out = read_endpoint(rotated[0]);
  if (replay) record_replay(txn, replay->request, replay->status, replay->render(out));
  txn.commit();
  return out;
}

webhook_update_result update_webhook_endpoint(pqxx::connection& conn, std::int64_t id,
                                              std::optional<ledger::principal_id> owner,
                                              const std::optional<std::string>& url,
                                              const std::optional<std::vector<std::string>>& event_types,
                                              const std::optional<std::optional<ledger::account_id>>& account,
                                              const audit_entry* audit) {
  WALLET_ASSERT(url || event_types || account, "an update changes something");
  WALLET_ASSERT(!event_types || !event_types->empty(), "an endpoint names one event type at least");
  std::optional<std::string> types;
  if (event_types) types = pg_array(*event_types);
  const std::optional<ledger::account_id> new_account = account ? *account : std::nullopt;
  webhook_update_result out;
  pqxx::work txn(conn);
  // New event types or a new account apply to a following endpoint from the position on.
  txn.exec_prepared(k_hold_position);
  const auto updated = txn.exec_prepared(k_update_endpoint, id, owner, url, types, account.has_value(), new_account);
  if (updated.empty()) {
    const auto found = txn.exec_prepared(k_find_endpoint, id, owner);
    if (found.empty()) return out;
    out.outcome = webhook_update_result::kind::account_not_owners;
    out.endpoint = read_endpoint(found[0]);
    return out;
  }
  if (audit) append_audit(txn, *audit, "webhook_endpoint:" + std::to_string(id));
  out.outcome = webhook_update_result::kind::updated;
  out.endpoint = read_endpoint(updated[0]);
  txn.commit();
  return out;
}

std::optional<webhook_endpoint_record> enable_webhook_endpoint(pqxx::connection& conn, std::int64_t id,
                                                               std::optional<ledger::principal_id> owner,
                                                               const audit_entry* audit) {
  pqxx::work txn(conn);
  const auto enabled = txn.exec_prepared(k_enable_endpoint, id, owner);
  if (!enabled.empty()) {
    // The delivery that disabled it is sent again first (it is the oldest pending one when nothing
    // older was retried meanwhile), unless an operator's retry made it PENDING already.
    if (!enabled[0][0].is_null()) txn.exec_prepared(k_retry, enabled[0][0].as<std::int64_t>(), id);
    if (audit) append_audit(txn, *audit, "webhook_endpoint:" + std::to_string(id));
  }
  const auto found = txn.exec_prepared(k_find_endpoint, id, owner);
  if (found.empty()) return std::nullopt;
  auto out = read_endpoint(found[0]);
  txn.commit();
  return out;
}

std::optional<webhook_deliveries_page> list_webhook_deliveries(pqxx::connection& conn, std::int64_t endpoint_id,
                                                               std::optional<ledger::principal_id> owner,
                                                               std::int64_t after, int limit) {
  WALLET_ASSERT(limit > 0, "a page holds one delivery at least");
  pqxx::read_transaction txn(conn);
  if (txn.exec_prepared(k_find_endpoint, endpoint_id, owner).empty()) return std::nullopt;
  webhook_deliveries_page page;
  for (const auto& row : txn.exec_prepared(k_list_deliveries, endpoint_id, after, limit + 1)) {
    if (static_cast<int>(page.deliveries.size()) == limit) {
      page.next_after = page.deliveries.back().id;
      break;
    }
    page.deliveries.push_back(read_delivery(row));
  }
  return page;
}

delivery_retry_result retry_webhook_delivery(pqxx::connection& conn, std::int64_t endpoint_id, std::int64_t delivery_id,
                                             const audit_entry* audit) {
  pqxx::work txn(conn);
  delivery_retry_result out;
  const auto retried = txn.exec_prepared(k_retry, delivery_id, endpoint_id);
  if (retried.empty()) {
    const auto found = txn.exec_prepared(k_find_delivery, delivery_id, endpoint_id);
    if (found.empty()) {
      out.outcome = delivery_retry_outcome::no_delivery;
    } else {
      out.outcome = delivery_retry_outcome::not_failed;
      out.delivery = read_delivery(found[0]);
    }
    return out;
  }
  out.delivery = read_delivery(retried[0]);
  if (audit) append_audit(txn, *audit, "webhook_delivery:" + std::to_string(delivery_id));
  txn.commit();
  return out;
}

webhook_fan_out_state read_webhook_fan_out_state(pqxx::connection& conn) {
  pqxx::read_transaction txn(conn);
  const auto row = txn.exec_prepared1(k_fan_out_state);
  const auto top = row[0].as<std::int64_t>();
  return {top == 0 ? 0 : event_cursor(top, k_events_per_row_max - 1), row[1].as<std::int64_t>(), row[2].as<bool>()};
}

std::vector<webhook_endpoint_record> lagging_webhook_endpoints(pqxx::connection& conn, std::int64_t after_cursor,
                                                               std::int64_t after_id, int limit) {
  pqxx::read_transaction txn(conn);
  std::vector<webhook_endpoint_record> out;
  for (const auto& row : txn.exec_prepared(k_lagging_endpoints, after_cursor, after_id, limit))
    out.push_back(read_endpoint(row));
  return out;
}

std::optional<std::size_t> take_shared_fan_out_step(
    pqxx::connection& conn, std::int64_t from, std::int64_t to, const std::vector<ledger::principal_id>& owners,
    std::size_t deliveries_per_statement,
    const std::function<std::vector<webhook_fan_out_step>(const std::vector<webhook_endpoint_record>&)>& steps_of) {
  WALLET_ASSERT(to >= from && deliveries_per_statement > 0, "the position only moves forward");
  pqxx::work txn(conn);
  if (txn.exec_prepared1(k_lock_position)[0].as<std::int64_t>() != from) return std::nullopt;
  std::vector<webhook_endpoint_record> following;
  for (const auto& row : txn.exec_prepared(k_following_endpoints, pg_array(owners))) {
    following.push_back(read_endpoint(row));
  }
  std::size_t made = 0;
  std::vector<std::int64_t> endpoints, cursors;
  std::vector<std::string> event_ids, event_types, bodies;
  const auto write = [&] {
    if (endpoints.empty()) return;
    txn.exec_prepared(k_add_deliveries, pg_array(endpoints), pg_array(cursors), pg_array(event_ids),
                      pg_array(event_types), pg_array(bodies));
    made += endpoints.size();
    endpoints.clear();
    cursors.clear();
    event_ids.clear();
    event_types.clear();
    bodies.clear();
  };
  for (const auto& step : steps_of(following)) {
    WALLET_ASSERT(step.to == to && step.from >= from, "a following endpoint's step is the position's");
    for (const auto& d : step.deliveries) {
      WALLET_ASSERT(d.event_cursor > step.from && d.event_cursor <= step.to,
                    "a delivery's event is in the endpoint's step");
      endpoints.push_back(step.endpoint_id);
      cursors.push_back(d.event_cursor);
      event_ids.push_back(d.event_id);
      event_types.push_back(d.event_type);
      bodies.push_back(d.body);
      if (endpoints.size() == deliveries_per_statement) write();
    }
  }
  write();
  txn.exec_prepared(k_move_position, to);
  txn.commit();
  return made;
}

std::int64_t join_webhook_fan_out(pqxx::connection& conn) {
  pqxx::work txn(conn);
  const auto position = txn.exec_prepared1(k_hold_position)[0].as<std::int64_t>();
  const auto joined = txn.exec_prepared(k_join_position, position).affected_rows();
  txn.commit();
  return static_cast<std::int64_t>(joined);
}

std::vector<std::int64_t> add_webhook_deliveries(pqxx::connection& conn, std::span<const webhook_fan_out_step> steps) {
  if (steps.empty()) return {};
  std::vector<std::int64_t> ids, froms, tos, accounts, delivery_endpoints, cursors;
  std::vector<std::string> types, event_ids, event_types, bodies;
  for (const auto& step : steps) {
    WALLET_ASSERT(step.to >= step.from, "an endpoint's cursor only moves forward");
    WALLET_ASSERT(!step.event_types.empty(), "an endpoint names one event type at least");
    ids.push_back(step.endpoint_id);
    froms.push_back(step.from);
    tos.push_back(step.to);
    types.push_back(pg_array(step.event_types));
    accounts.push_back(step.account.value_or(0));
    for (const auto& d : step.deliveries) {
      WALLET_ASSERT(d.event_cursor > step.from && d.event_cursor <= step.to,
                    "a delivery's event is in the cursor's step");
      delivery_endpoints.push_back(step.endpoint_id);
      cursors.push_back(d.event_cursor);
      event_ids.push_back(d.event_id);
      event_types.push_back(d.event_type);
      bodies.push_back(d.body);
    }
  }
  pqxx::work txn(conn);
  std::vector<std::int64_t> moved;
  for (const auto& row :
       txn.exec_prepared(k_fan_out_steps, pg_array(ids), pg_array(froms), pg_array(tos), pg_array(types),
                         pg_array(delivery_endpoints), pg_array(cursors), pg_array(event_ids), pg_array(event_types),
                         pg_array(bodies), pg_array(accounts))) {
    moved.push_back(row[0].as<std::int64_t>());
  }
  txn.commit();
  return moved;
}

std::vector<claimed_webhook_delivery> claim_webhook_deliveries(pqxx::connection& conn, int limit,
                                                               const std::vector<std::int64_t>& busy_endpoints,
                                                               std::int64_t lease_ms) {
  WALLET_ASSERT(limit > 0 && lease_ms > 0, "a claim takes one delivery at least, for a while");
  pqxx::work txn(conn);
  std::vector<claimed_webhook_delivery> out;
  for (const auto& row : txn.exec_prepared(k_claim, limit, pg_array(busy_endpoints), lease_ms)) {
    claimed_webhook_delivery c;
    c.id = row[0].as<std::int64_t>();
    c.endpoint_id = row[1].as<std::int64_t>();
    c.attempts = row[2].as<int>();
    c.span_attempts = row[3].as<int>();
    c.span_elapsed_ms = row[4].as<std::int64_t>();
    c.event_id = row[5].as<std::string>();
    c.url = row[6].as<std::string>();
    c.signing_secret = row[7].as<std::string>();
    c.previous_signing_secret = row[8].as<std::string>();
    c.body = row[9].as<std::string>();
    out.push_back(std::move(c));
  }
  txn.commit();
  return out;
}

webhook_attempt_recorded record_webhook_attempt(pqxx::connection& conn, const webhook_attempt_outcome& o) {
  pqxx::work txn(conn);
  const auto error = o.error.substr(0, k_error_text_max);
  const std::optional<std::string> error_or_null = error.empty() ? std::nullopt : std::optional<std::string>(error);
  auto out = webhook_attempt_recorded::fenced_out;
  if (o.delivered) {
    if (txn.exec_prepared(k_record_delivered, o.delivery_id, o.attempts, o.status_code).affected_rows() == 1)
      out = webhook_attempt_recorded::recorded;
  } else if (o.retry_delay_ms) {
    if (txn.exec_prepared(k_record_retry, o.delivery_id, o.attempts, o.status_code, error_or_null, *o.retry_delay_ms)
            .affected_rows() == 1)
      out = webhook_attempt_recorded::recorded;
  } else {
    const auto failed = txn.exec_prepared(k_record_failed, o.delivery_id, o.attempts, o.status_code, error_or_null);
    if (!failed.empty()) {
      out = webhook_attempt_recorded::recorded;
      const auto endpoint = failed[0][0].as<std::int64_t>();
      const auto position = txn.exec_prepared1(k_hold_position)[0].as<std::int64_t>();
      const auto judged =
          txn.exec_prepared(k_disable_after_failure, endpoint, failure_reason(o, error), o.delivery_id, position);
      if (!judged.empty() && judged[0][0].as<bool>()) out = webhook_attempt_recorded::endpoint_disabled;
    }
  }
  txn.commit();
  return out;
}

std::int64_t prune_webhook_deliveries(pqxx::connection& conn, std::int64_t retention_days, int limit) {
  WALLET_ASSERT(retention_days > 0 && limit > 0, "a retention and a batch");
  pqxx::work txn(conn);
  const auto deleted = txn.exec_prepared(k_prune, retention_days, limit).affected_rows();
  txn.commit();
  return static_cast<std::int64_t>(deleted);
}

}  // namespace persistence
