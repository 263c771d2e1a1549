-- Releases one hold of a reentrant lock; the last hold deletes it and publishes the unlock message
-- that wakes waiters (Redisson's channel and message, so Redisson waiters wake too).
--
-- KEYS[1] the lock hash          ARGV[1] unlock message ("0", as Redisson)
-- KEYS[2] the unlock channel     ARGV[2] lease in milliseconds, re-set while holds remain
-- KEYS[3] this release's latch   ARGV[3] this holder's field
--                                ARGV[4] latch lifetime in milliseconds
--                                ARGV[5] the holds this holder keeps after the release, as the
--                                        client counts them (0: release the lock)
--
-- A release may be retried after a lost connection, without knowing whether the first try ran.
-- The latch key (unique per release) remembers the first outcome, so a retry returns it again
-- instead of releasing a second hold, or a hold that someone else has taken since.
--
-- The client's count is the truth for its own field (see reentrant_lock.lua): the count is set,
-- not decremented, so a hold the client never learned of cannot outlive its last unlock.
--
-- Returns 1 released (last hold), 0 one hold fewer (still held), -1 not held by this holder.
local done = redis.call('get', KEYS[3])
if done then
  return tonumber(done)
end
local result
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  result = -1
elseif tonumber(ARGV[5]) > 0 then
  redis.call('hset', KEYS[1], ARGV[3], ARGV[5])
  redis.call('pexpire', KEYS[1], ARGV[2])
  result = 0
else
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[1])
  result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[4])
return result
