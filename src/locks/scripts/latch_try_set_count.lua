-- Sets the latch's count only when it does not exist, as Redisson's
-- RCountDownLatch.trySetCount(): SET, then "1" is published (a new count: nobody may pass).
--
-- KEYS[1] the latch key   KEYS[2] its channel (names.hpp, latch_channel)
-- ARGV[1] the count (a non-negative decimal integer)   ARGV[2] "publish", or "spublish"
--
-- Returns {1} when set, {0} when a latch exists already (unchanged), or {-1, what} when the key
--         is not a latch (see latch_count_down.lua).
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call(ARGV[2], KEYS[2], '1')
  return {1}
end
if kind == 'string' and string.find(redis.call('get', KEYS[1]), '^%-?%d+$') then
  return {0}
end
return {-1, kind}
