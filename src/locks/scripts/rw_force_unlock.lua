-- Deletes a read-write lock whoever holds it (readers and writer) and wakes every waiter with "1";
-- refuses any other key. The readers' lease keys lapse on their own (they count for nothing
-- without the hash); waiting writers' intents stay (they are still waiting).
--
-- KEYS[1] the lock hash   KEYS[2] the channel   ARGV[1] "publish", or "spublish" on a cluster
--
-- Returns {1} deleted, {0} no key, {-1, what} not a read-write lock: `what` says what it is.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0}
end
if kind ~= 'hash' then
  return {-1, 'a ' .. kind}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode ~= 'read' and mode ~= 'write' then
  return {-1, 'a hash without a mode (a reentrant lock: dlock::mutex, Redisson RLock; or other data)'}
end
redis.call('del', KEYS[1])
redis.call(ARGV[1], KEYS[2], '1')
return {1}
