-- Reads the latch's count, as Redisson's RCountDownLatch.getCount() (GET, missing = 0), checking
-- that the key is a latch.
--
-- KEYS[1] the latch key
--
-- Returns {1, count, exists}: count 0 and exists 0 when there is no latch, else the stored text
--         (Lua numbers are doubles) and 1; or {-1, what} when the key is not a latch (see
--         latch_count_down.lua).
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {1, 0, 0}
end
if kind == 'string' then
  local value = redis.call('get', KEYS[1])
  if string.find(value, '^%-?%d+$') then
    return {1, value, 1}
  end
end
return {-1, kind}
