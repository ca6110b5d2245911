-- Uniform (P2P): a random payer pays a different random account.
\set payer random(1, 100000)
\set draw random(1, 99999)
\set payee CASE WHEN :draw >= :payer THEN :draw + 1 ELSE :draw END
\set amount random(1, 100)
