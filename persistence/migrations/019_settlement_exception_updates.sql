-- An import that finds an open exception's key and kind again with other amounts brings that
-- exception up to date (docs/settlements.md, "Exceptions and their resolution"): what it shows is
-- what the latest import found, and its import is that one. Resolved exceptions still never change
-- (settlement_exception_resolves_once).
GRANT UPDATE (import_id, ledger_amount, report_amount, currency, report_currency, transaction_id, settled_at)
  ON settlement_exception TO wallet_app;
