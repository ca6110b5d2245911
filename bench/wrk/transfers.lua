-- wrk script: the transfers of wallet-loadgen's hot-merchant or payday workload, from the parties
-- of its setup file, each with an Idempotency-Key of its own. bench/cpu_per_request.sh
-- --client wrk uses it to measure what a minimal client costs beside wallet-loadgen.
--
--   WRK_PARTIES=parties.tsv WRK_WORKLOAD=hot-merchant WRK_RUN=abc wrk -s bench/wrk/transfers.lua URL
--
-- parties.tsv: "apiKey accountId" lines, the hub (the hot merchant, or the employer) first.

local parties_file = os.getenv("WRK_PARTIES")
local payday = os.getenv("WRK_WORKLOAD") == "payday"
local run = os.getenv("WRK_RUN") or "wrk"

local keys, accounts = {}, {}
for line in io.lines(parties_file) do
  local key, account = line:match("^(%S+)%s+(%d+)$")
  if key then
    keys[#keys + 1] = key
    accounts[#accounts + 1] = account
  end
end
local hub_key, hub_account = keys[1], accounts[1]
local parties = #keys - 1

local next_thread = 0
function setup(thread)
  thread:set("tid", next_thread)
  next_thread = next_thread + 1
end

local counter = 0
local headers = {["Content-Type"] = "application/json"}
wrk.method = "POST"
wrk.path = "/v1/transfers"

function init(args)
  math.randomseed(1000 + tid)
end

function request()
  counter = counter + 1
  local party = 1 + math.random(parties)
  local key, from, to
  if payday then
    key, from, to = hub_key, hub_account, accounts[party]
  else
    key, from, to = keys[party], accounts[party], hub_account
  end
  headers["Authorization"] = "Bearer " .. key
  headers["Idempotency-Key"] = run .. "-" .. tid .. "-" .. counter
  return wrk.format(nil, nil, headers,
    '{"fromAccountId":' .. from .. ',"toAccountId":' .. to .. ',"amount":' .. math.random(1, 100) .. '}')
end
