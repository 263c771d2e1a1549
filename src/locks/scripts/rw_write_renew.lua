-- Renews (or checks) many write holds in one call: for each lock hash KEYS[i] whose writer field
-- ARGV[i + 1] is still there, re-set its TTL to at least ARGV[1] milliseconds (never shorter: the
-- same owner's read holds may have longer leases). ARGV[1] = "0" only checks.
--
-- Returns one integer per key: 1 renewed (held), 0 gone (the hold is lost).
local lease = tonumber(ARGV[1])
local renewed = {}
for i, key in ipairs(KEYS) do
  if redis.call('hget', key, 'mode') == 'write' and redis.call('hexists', key, ARGV[i + 1]) == 1 then
    if lease > 0 then
      redis.call('pexpire', key, math.max(redis.call('pttl', key), lease))
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
