-- Deletes the latch, as Redisson's RCountDownLatch.delete(): DEL, then "1" is published. dlock's
-- waiters re-read on every message and find no latch (open); Redisson's take "1" as "closed" and
-- keep waiting, as with Redisson's own delete.
--
-- KEYS[1] the latch key   KEYS[2] its channel (names.hpp, latch_channel)
-- ARGV[1] "publish", or "spublish" on a cluster
--
-- Returns {1} when deleted, {0} when there was no latch, or {-1, what} when the key is not a
--         latch (see latch_count_down.lua); nothing is deleted then.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0}
end
if kind ~= 'string' or not string.find(redis.call('get', KEYS[1]), '^%-?%d+$') then
  return {-1, kind}
end
redis.call('del', KEYS[1])
redis.call(ARGV[1], KEYS[2], '1')
return {1}
