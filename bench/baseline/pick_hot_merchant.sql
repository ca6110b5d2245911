-- Hot merchant: a random funded payer pays the one merchant row.
\set payer random(1, 100000)
\set payee 100001
\set amount random(1, 100)
