-- Counts the latch down by one, as Redisson's RCountDownLatch.countDown(): DECR; at or below zero
-- the key is deleted, and exactly at zero "0" is published so that waiters re-read the count.
-- A missing latch stays missing (DECR makes -1, which is deleted) and publishes nothing.
--
-- KEYS[1] the latch key   KEYS[2] its channel (names.hpp, latch_channel)
-- ARGV[1] "publish", or "spublish" on a cluster
--
-- Returns {1, count left} (0 when it reached zero, -1 when there was no latch), or {-1, what}
--         when the key is not a latch: `what` is its Redis type, or "string" for a string that
--         is not a whole number (a plain lock, or data); nothing is changed then.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'string' then
  return {-1, kind}
end
if kind == 'string' and not string.find(redis.call('get', KEYS[1]), '^%-?%d+$') then
  return {-1, 'string'}
end
local left = redis.call('decr', KEYS[1])
if left <= 0 then
  redis.call('del', KEYS[1])
end
if left == 0 then
  redis.call(ARGV[1], KEYS[2], '0')
end
return {1, left}
