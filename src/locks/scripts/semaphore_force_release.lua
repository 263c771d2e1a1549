-- Gives back every permit of a semaphore whoever holds it (dlock or Redisson): empties the holders'
-- zset, adds their number to the count and publishes the new count. The count key stays.
--
-- KEYS[1] the count              ARGV[1] "publish", or "spublish" on a Redis Cluster
-- KEYS[2] the holders' zset
-- KEYS[3] the channel
--
-- Returns {n} the permits given back (0: none were held), {-1, what} when a key is not a
-- semaphore's.
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'string' then
  return {-1, 'a ' .. kind}
end
local holders_kind = redis.call('type', KEYS[2]).ok
if holders_kind ~= 'none' and holders_kind ~= 'zset' then
  return {-1, 'a ' .. holders_kind .. ' at its holders key'}
end
local value = redis.call('get', KEYS[1])
-- A count is a decimal integer Lua holds exactly (|count| <= 2^53 - 1, dlock::max_count).
if value and not (string.find(value, '^%-?%d+$') and math.abs(tonumber(value)) <= 9007199254740991) then
  return {-1, 'a string that is not a count'}
end
local n = redis.call('zcard', KEYS[2])
if n == 0 then
  return {0}
end
redis.call('del', KEYS[2])
local count = redis.call('incrby', KEYS[1], n)
redis.call(ARGV[1], KEYS[3], count)
return {n}
