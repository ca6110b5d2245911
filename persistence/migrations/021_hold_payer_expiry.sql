-- A payer's due holds, found by payer and expiry together: the expirer locks a payer and expires
-- its due holds, the longest due first, without reading the holds of that payer that are not due
-- yet (up to 30 days of them). Every query that found active holds by payer alone uses this index
-- as well as it used hold_payer, which it replaces.
CREATE INDEX hold_payer_expiry ON hold (payer_id, expires_at) WHERE status = 'ACTIVE';
DROP INDEX hold_payer;
