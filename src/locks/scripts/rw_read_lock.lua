-- Takes or re-enters a read hold of a read-write lock. Data as Redisson's RReadWriteLock
-- (RedissonReadLock): a hash at the lock name with "mode" = "read"/"write", reader fields
-- "<client id>:<thread>" -> hold count, and one lease key per read hold,
-- "<timeout prefix>:<i>" for i = 1..count, so a Redisson reader's unlock sees dlock's holds.
--
-- Beyond Redisson: a first hold is refused while a dlock writer waits (an unexpired member of the
-- writers' sorted set, see rw_write_lock.lua), so a stream of readers cannot starve a writer.
-- Re-entries and a writer's own read holds (downgrade) are always admitted: refusing them could
-- only deadlock their owner. Key ":1" holds the server's TIME in microseconds at the first hold:
-- the hold's id, checked by the release (rw_read_unlock.lua) so that a retry never releases a
-- newer first hold of the same owner. Redisson writes 1 there and never reads it.
--
-- KEYS[1] the lock hash                 ARGV[1] lease in milliseconds
-- KEYS[2] this reader's timeout prefix  ARGV[2] this reader's field
-- KEYS[3] the waiting writers (zset)    ARGV[3] the same owner's writer field ("<field>:write")
--                                       ARGV[4] how many read holds the client knows it has
--
-- Returns {1, id}      acquired (first hold); id as above
--         {2, count}   re-entered: the new hold count (the client's count + 1)
--         {0, ttl}     refused: milliseconds until the writer's lease ends, or until the
--                      waiting writers' intents run out (-1: no TTL)
--         {-1, what, name}  the key is not a read-write lock: `what` says what it is, `name` is
--                      KEYS[1]
local kind = redis.call('type', KEYS[1]).ok
if kind == 'string' then
  -- A decimal count of at most 20 bytes is a semaphore's or a latch's (see plain_lock.lua).
  local value = redis.call('get', KEYS[1])
  if #value <= 20 and string.find(value, '^%-?%d+$') then
    return {-1, 'a semaphore or a latch (a string count)', KEYS[1]}
  end
  return {-1, 'a plain lock or data (a string)', KEYS[1]}
end
if kind ~= 'none' and kind ~= 'hash' then
  return {-1, 'a ' .. kind .. ' (not a lock)', KEYS[1]}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if kind == 'hash' and not mode then
  return {-1, 'a reentrant lock (dlock::mutex, Redisson RLock)', KEYS[1]}
end
local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local lease = tonumber(ARGV[1])
local known = tonumber(ARGV[4])
local held = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')

local function keep_hash_alive()
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), lease))
end

if held > 0 and known > 0 then
  -- The client's count is the truth for its own field (see reentrant_lock.lua).
  local count = known + 1
  for i = count + 1, held do
    redis.call('del', KEYS[2] .. ':' .. i)
  end
  redis.call('hset', KEYS[1], ARGV[2], count)
  redis.call('set', KEYS[2] .. ':' .. count, 1, 'px', lease)
  keep_hash_alive()
  return {2, count}
end

local downgrade = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if held == 0 and not downgrade then
  if mode == 'write' then
    return {0, redis.call('pttl', KEYS[1])}
  end
  redis.call('zremrangebyscore', KEYS[3], '-inf', now_ms)
  local last = redis.call('zrange', KEYS[3], -1, -1, 'withscores')
  if #last > 0 then
    return {0, tonumber(last[2]) - now_ms}
  end
end

-- A first hold (or one the client does not know of: taken over as a fresh one).
for i = 2, held do
  redis.call('del', KEYS[2] .. ':' .. i)
end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('hset', KEYS[1], ARGV[2], 1)
local id = tonumber(now[1]) * 1000000 + tonumber(now[2])  -- < 2^53: exact
redis.call('set', KEYS[2] .. ':1', string.format('%d', id), 'px', lease)
keep_hash_alive()
return {1, id}
