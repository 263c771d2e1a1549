-- Deletes a fair lock whoever holds it and wakes the head of its waiting list (Redisson's
-- RFairLock.forceUnlock); the list stays. A key that is not a lock is left alone.
--
-- KEYS[1] the lock hash          ARGV[1] unlock message ("0")
-- KEYS[2] the waiting list       ARGV[2] "publish", or "spublish" on a Redis Cluster
-- KEYS[3] the deadlines
-- KEYS[4] the unlock channel
--
-- Returns {1} deleted, {0} no lock, {-1, what} the key holds something else (what it is).
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0}
end
if kind ~= 'hash' then
  return {-1, 'a ' .. kind}
end
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-1, 'a read-write lock (dlock::shared_mutex, Redisson RReadWriteLock)'}
end
if redis.call('hlen', KEYS[1]) > 64 then
  return {-1, 'a hash that is not a lock (too many fields)'}
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  -- "<client id>:<holder number>" -> a positive count in decimal digits, as status reads it
  -- (rlock_hold.hpp): 5.5, 1e3, 0x10, " 5" or inf are data, not counts.
  local count = fields[i + 1]
  if not string.find(fields[i], '^.+:%d+$') or not string.find(count, '^%d+$') or #count > 19 or
     not string.find(count, '[1-9]') then
    return {-1, 'a hash that is not a lock (field ' .. string.format('%q', fields[i]) .. ')'}
  end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then
    break
  end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline and tonumber(deadline) <= now then
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
  else
    break
  end
end
redis.call('del', KEYS[1])
local head = redis.call('lindex', KEYS[2], 0)
if head then
  redis.call(ARGV[2], KEYS[4] .. ':' .. head, ARGV[1])
end
return {1}
