-- Releases write holds of a read-write lock (Redisson's RedissonWriteLock layout, see
-- rw_write_lock.lua). The last write hold deletes the hash, or, when the same owner took read
-- holds meanwhile (downgrade), turns it into mode "read"; either way it publishes "1" (Redisson's
-- write unlock message: every waiter tries again). Redisson publishes nothing on a downgrade; its
-- readers then wake at their TTL poll.
--
-- KEYS[1] the lock hash          ARGV[1] lease in milliseconds, re-set while holds remain
-- KEYS[2] the channel            ARGV[2] this writer's field ("<field>:write")
-- KEYS[3] the fencing counter    ARGV[3] the holds it keeps afterwards, as the client counts
--                                        them (0: release the write lock)
--                                ARGV[4] the fencing token of the released hold ("0": no check)
--                                ARGV[5] "publish", or "spublish" on a Redis Cluster
--
-- A newer first hold of the name took a larger token: a try carrying an older one (a retry, or
-- one held back during a failover) changes nothing, as in reentrant_unlock.lua.
--
-- Returns 1 the write hold is released, 0 one hold fewer (still held), -1 not held by this writer.
if ARGV[4] ~= '0' then
  local last = tonumber(redis.call('get', KEYS[3]) or '0')
  if last > tonumber(ARGV[4]) then
    return -1
  end
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or
    redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return -1
end
if tonumber(ARGV[3]) > 0 then
  redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return 0
end
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) > 1 then
  redis.call('hset', KEYS[1], 'mode', 'read')
else
  redis.call('del', KEYS[1])
end
redis.call(ARGV[5], KEYS[2], '1')
return 1
