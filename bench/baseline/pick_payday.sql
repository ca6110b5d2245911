-- Payday: the one employer row pays a salary to a random account.
\set payer 200000
\set payee random(1, 100000)
\set amount random(1, 100)
