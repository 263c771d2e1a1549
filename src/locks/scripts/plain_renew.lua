-- Renews many plain-lock leases in one call: for each key KEYS[i] that still holds the value
-- ARGV[i + 1], re-set its TTL to ARGV[1] milliseconds. ARGV[1] = "0" only checks the holds.
--
-- Returns one integer per key: 1 renewed (or held), 0 gone or held by someone else.
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[i + 1] then
    if ARGV[1] ~= '0' then
      redis.call('pexpire', key, ARGV[1])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
