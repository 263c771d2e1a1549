-- Releases one hold of a reentrant lock; the last hold deletes it and publishes the unlock message
-- that wakes waiters (Redisson's channel and message, so Redisson waiters wake too).
--
-- KEYS[1] the lock hash          ARGV[1] unlock message ("0", as Redisson)
-- KEYS[2] the unlock channel     ARGV[2] lease in milliseconds, re-set while holds remain
-- KEYS[3] this release's latch   ARGV[3] this holder's field
--                                ARGV[4] latch lifetime in milliseconds
--                                ARGV[5] how many holds to release (1; all of them for a hold
--                                        the client already counts as lost)
--
-- A release may be retried after a lost connection, without knowing whether the first try ran.
-- The latch key (unique per release) remembers the first outcome, so a retry returns it again
-- instead of releasing a second hold, or a hold that someone else has taken since.
--
-- Returns 1 released (last hold), 0 one hold fewer (still held), -1 not held by this holder.
local done = redis.call('get', KEYS[3])
if done then
  return tonumber(done)
end
local result
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  result = -1
elseif redis.call('hincrby', KEYS[1], ARGV[3], -tonumber(ARGV[5])) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  result = 0
else
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[1])
  result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[4])
return result
