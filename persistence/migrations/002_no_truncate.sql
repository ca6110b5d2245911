-- TRUNCATE fires no row triggers: refuse it on the append-only tables too.
CREATE TRIGGER ledger_entry_no_truncate BEFORE TRUNCATE ON ledger_entry
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER journal_transaction_no_truncate BEFORE TRUNCATE ON journal_transaction
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
