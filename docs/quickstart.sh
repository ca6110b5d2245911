#!/usr/bin/env bash
# The README's first payment, as a script: two users, one EUR account each, a deposit into
# Alice's account, and a payment from Alice to Bob. Every id comes from the answer that created it.
#
#   OP=<operator key> docs/quickstart.sh            # against http://localhost:8080
#   WALLET_URL=http://127.0.0.1:9000 OP=... docs/quickstart.sh
#
# Needs curl only. Exits non-zero, naming the step, if any answer is not the expected status.
set -euo pipefail

url=${WALLET_URL:-http://localhost:8080}
op=${OP:?set OP to the operator key that scripts/run.sh printed}
run_id=$(date +%s%N)

# call METHOD PATH KEY EXPECTED_STATUS [BODY [IDEMPOTENCY_KEY]]: prints the body of the answer.
call() {
  local method=$1 path=$2 key=$3 expected=$4 body=${5:-} idem=${6:-}
  local args=(-s -o /tmp/quickstart.$$ -w '%{http_code}' -X "$method" "$url$path" -H "Authorization: Bearer $key")
  if [[ -n $body ]]; then args+=(-H 'Content-Type: application/json' -d "$body"); fi
  if [[ -n $idem ]]; then args+=(-H "Idempotency-Key: $idem"); fi
  local status
  status=$(curl "${args[@]}")
  local answer
  answer=$(cat /tmp/quickstart.$$)
  rm -f /tmp/quickstart.$$
  if [[ $status != "$expected" ]]; then
    echo "quickstart: $method $path answered $status, expected $expected: $answer" >&2
    exit 1
  fi
  echo "$answer"
}
# field NAME JSON: a top-level string or integer member.
field() { sed -n "s/.*\"$1\":\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" <<<"$2"; }

alice=$(call POST /v1/principals "$op" 201 '{"name":"alice","role":"user"}')
bob=$(call POST /v1/principals "$op" 201 '{"name":"bob","role":"user"}')
alice_id=$(field id "$alice"); alice_key=$(field apiKey "$alice")
bob_id=$(field id "$bob")
echo "alice is principal $alice_id, bob is principal $bob_id"

alice_account=$(field id "$(call POST /v1/accounts "$op" 201 "{\"ownerId\":$alice_id,\"currency\":\"EUR\"}")")
bob_account=$(field id "$(call POST /v1/accounts "$op" 201 "{\"ownerId\":$bob_id,\"currency\":\"EUR\"}")")
echo "alice's account is $alice_account, bob's is $bob_account"

call POST /v1/deposits "$op" 201 "{\"accountId\":$alice_account,\"amount\":50000}" "dep-$run_id" >/dev/null
payment=$(call POST /v1/transfers "$alice_key" 201 \
  "{\"fromAccountId\":$alice_account,\"toAccountId\":$bob_account,\"amount\":1000}" "pay-$run_id")
echo "payment $(field transactionId "$payment"): alice has $(field fromBalanceAfter "$payment") left"
echo "bob's balance: $(field balance "$(call GET "/v1/accounts/$bob_account" "$op" 200)")"
