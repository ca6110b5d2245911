-- Which report line settled each transaction (docs/settlements.md, "Matching"): the import that
-- paired it, and the line's settledAt. A later import pairs a transaction paired before only with
-- a line of the same key and the same settledAt (the same report imported again, or one that
-- overlaps it), so a line the provider lists again in another report (a payment settled twice) is
-- left over, and a transaction an earlier report settled is not taken for another one's. Pairs of
-- imports made before this migration are not known.
CREATE TABLE settlement_pairing (
  transaction_id  UUID PRIMARY KEY REFERENCES journal_transaction (id),
  settled_us      BIGINT NOT NULL,
  import_id       BIGINT NOT NULL REFERENCES settlement_import (id)
);

GRANT SELECT, INSERT ON settlement_pairing TO wallet_app;
