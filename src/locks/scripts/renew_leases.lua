-- Renews many watchdog leases in one call: for each lock hash KEYS[i] that still holds the field
-- ARGV[i + 1], re-set its TTL to ARGV[1] milliseconds. ARGV[1] = "0" only checks the holds (for
-- explicit leases, which are never extended).
--
-- Returns one integer per key: 1 renewed, 0 gone or held by someone else (the hold is lost).
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.call('hexists', key, ARGV[i + 1]) == 1 then
    if ARGV[1] ~= '0' then
      redis.call('pexpire', key, ARGV[1])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
