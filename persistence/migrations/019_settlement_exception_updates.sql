-- An import that finds the difference of an open exception again (an amount mismatch or a payment
-- not settled, of the same transaction) with other amounts brings that exception up to date
-- (docs/settlements.md, "Exceptions and their resolution"): its amounts are then that import's,
-- and so is its import_id. Resolved exceptions still never change
-- (settlement_exception_resolves_once).
GRANT UPDATE (import_id, ledger_amount, report_amount, currency, report_currency, settled_at)
  ON settlement_exception TO wallet_app;
