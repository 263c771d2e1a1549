-- Renews (or checks) many read holds in one call. Target t is the lock hash KEYS[2t - 1] and the
-- reader's timeout prefix KEYS[2t], with its field ARGV[2t] and its hold id ARGV[2t + 1] (":1"'s
-- value; "0": no check). A held target gets every lease key of the reader (1..count) and the
-- hash re-set to at least ARGV[1] milliseconds; ARGV[1] = "0" only checks.
--
-- Returns one integer per target: 1 renewed (held), 0 gone (the hold is lost).
local lease = tonumber(ARGV[1])
local renewed = {}
for t = 1, #KEYS / 2 do
  local hash, prefix = KEYS[2 * t - 1], KEYS[2 * t]
  local field, id = ARGV[2 * t], ARGV[2 * t + 1]
  local count = tonumber(redis.call('hget', hash, field) or '0')
  local first = redis.call('get', prefix .. ':1')
  if count > 0 and first and (id == '0' or first == id) then
    if lease > 0 then
      for i = 1, count do
        redis.call('pexpire', prefix .. ':' .. i, lease)
      end
      redis.call('pexpire', hash, math.max(redis.call('pttl', hash), lease))
    end
    renewed[t] = 1
  else
    renewed[t] = 0
  end
end
return renewed
