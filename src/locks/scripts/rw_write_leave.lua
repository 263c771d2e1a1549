-- The last waiting writer of a client for a read-write lock gave up without the lock (its wait ran
-- out, it was cancelled, its client stops): the client's intents no longer hold new readers back
-- (rw_write_lock.lua records one per waiting writer, for ARGV[2]'s lease). When no intent is left
-- and no writer holds the lock, "1" wakes the readers they held back, instead of leaving them to
-- sleep until the intents' lease ends.
--
-- KEYS[1] the lock hash                 ARGV[1] the client's owner prefix "<client id>:"
-- KEYS[2] the waiting writers (zset)    ARGV[2] "publish", or "spublish" on a Redis Cluster
-- KEYS[3] the channel
--
-- Returns how many intents it withdrew.
local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('zremrangebyscore', KEYS[2], '-inf', now_ms)
local withdrawn = 0
for _, field in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do
  if string.sub(field, 1, #ARGV[1]) == ARGV[1] then
    withdrawn = withdrawn + redis.call('zrem', KEYS[2], field)
  end
end
if withdrawn > 0 and redis.call('zcard', KEYS[2]) == 0 then
  local kind = redis.call('type', KEYS[1]).ok
  if kind == 'none' or (kind == 'hash' and redis.call('hget', KEYS[1], 'mode') ~= 'write') then
    redis.call(ARGV[2], KEYS[3], '1')
  end
end
return withdrawn
