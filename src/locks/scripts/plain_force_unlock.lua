-- Deletes a plain lock whoever holds it (dlock or a foreign client: redis-py, redsync,
-- node-redlock) and wakes dlock's waiters as a release does (the first client of the wait line is
-- called, wait_line.lua put in front, and the lock reserved for it). Refuses any other key, so an
-- operator's typo cannot delete data: a plain lock is a string with a TTL (every such client sets
-- one with PX), or without one when it holds a dlock value "<32 hex digits>:<number>:<nonce>".
--
-- KEYS[1] the lock key   KEYS[2] the unlock channel   ARGV[1] "publish", or "spublish" on a cluster
-- KEYS[3] the wait line   KEYS[4] its deadlines        ARGV[2] the reservation's grace (ms)
-- KEYS[5] the reservation                              ARGV[3] the prefix of the call channels
--
-- Returns {1} when a lock was deleted, {0} when there was no key, {-1, what} when the key is not a
--         plain lock: `what` says what it is ("a hash", "a string that is not a lock (no TTL)").
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0}
end
if kind ~= 'string' then
  return {-1, 'a ' .. kind}
end
local dlock_value = '^' .. string.rep('%x', 32) .. ':%d+:%w+$'
if redis.call('pttl', KEYS[1]) < 0 and not string.find(redis.call('get', KEYS[1]), dlock_value) then
  return {-1, 'a string that is not a lock (no TTL)'}
end
redis.call('del', KEYS[1])
line_wake_head(KEYS[3], KEYS[4], KEYS[5], ARGV[3], ARGV[1], ARGV[2])
redis.call(ARGV[1], KEYS[2], '0')
return {1}
