-- Releases read holds of a read-write lock (Redisson's RedissonReadLock layout, see
-- rw_read_lock.lua). The last reader deletes the hash and publishes "0" (Redisson's read unlock
-- message); while other holds remain the hash lives as long as their longest lease key, computed
-- as Redisson's read unlock does, so a reader that crashed does not keep the lock.
--
-- KEYS[1] the lock hash                 ARGV[1] lease in milliseconds (unused; as other unlocks)
-- KEYS[2] the channel                   ARGV[2] this reader's field
-- KEYS[3] this reader's timeout prefix  ARGV[3] the holds it keeps afterwards, as the client
-- KEYS[4] the key base of every           counts them (0: release them all)
--         reader's timeout prefix       ARGV[4] the hold's id (":1"'s value; "0": no check)
--         ("<base>:<field>:rwlock_      ARGV[5] "publish", or "spublish" on a Redis Cluster
--         timeout"), built here for other readers: same slot
--
-- Returns 1 released and the lock is free, 0 released (the lock is still held), -1 not held by
-- this reader (or a newer first hold of it: the id differs).
local mode = redis.call('hget', KEYS[1], 'mode')
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if not mode or count == 0 then
  return -1
end
if ARGV[4] ~= '0' and redis.call('get', KEYS[3] .. ':1') ~= ARGV[4] then
  return -1
end
local keep = tonumber(ARGV[3])
if keep > 0 then
  for i = keep + 1, count do
    redis.call('del', KEYS[3] .. ':' .. i)
  end
  redis.call('hset', KEYS[1], ARGV[2], keep)
  return 0
end
for i = 1, count do
  redis.call('del', KEYS[3] .. ':' .. i)
end
redis.call('hdel', KEYS[1], ARGV[2])
if mode == 'write' then
  return 0  -- a writer's own read hold (downgrade): the write hold remains
end
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  local fields = redis.call('hgetall', KEYS[1])
  for f = 1, #fields, 2 do
    local n = tonumber(fields[f + 1])
    if fields[f] ~= 'mode' and n then
      for i = 1, n do
        local ttl = redis.call('pttl', KEYS[4] .. ':' .. fields[f] .. ':rwlock_timeout:' .. i)
        longest = math.max(longest, ttl)
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[5], KEYS[2], '0')
return 1
