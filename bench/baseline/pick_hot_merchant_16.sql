-- Hot merchant with 16 credit sub-accounts: the payee row is drawn from the merchant's 16 rows.
\set payer random(1, 100000)
\set payee random(100001, 100016)
\set amount random(1, 100)
