-- A closed account stays closed (docs/money-flows.md, "Closing an account"). The server closes an
-- account only when it and its shards hold nothing, under their rows' locks, and refuses every
-- later status change (409 account_closed); the database refuses one too, whoever writes. The
-- trigger fires only for statements that set `status`, which no posting does, so a transfer's
-- writes pay nothing for it.
CREATE FUNCTION account_closed_stays_closed() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION 'account % is closed; its status does not change', OLD.id USING ERRCODE = 'check_violation';
END
$fn$;

CREATE TRIGGER account_closed_stays_closed BEFORE UPDATE OF status ON account
  FOR EACH ROW WHEN (OLD.status = 'closed' AND NEW.status IS DISTINCT FROM 'closed')
  EXECUTE FUNCTION account_closed_stays_closed();

-- An account with an adjustment awaiting approval does not close (its approval would have to credit
-- or debit it): close_account counts them through this index of the few that wait.
CREATE INDEX adjustment_pending_account ON adjustment (account_id) WHERE status = 'PENDING_APPROVAL';
