-- Reads or changes a semaphore's count (Redisson's RPermitExpirableSemaphore layout, see
-- semaphore_acquire.lua). Expired permits are given back first (all of them), as Redisson's
-- availablePermits and updateLeaseTime do.
--
-- KEYS[1] the count              ARGV[1] "available", "try_set" or "add"
-- KEYS[2] the holders' zset      ARGV[2] the permits of a semaphore that does not exist yet
-- KEYS[3] the channel            ARGV[3] n: try_set's count, add's change (may be negative)
--                                ARGV[4] "publish", or "spublish" on a Redis Cluster
--
--   available  initialises the count to ARGV[2] if the semaphore does not exist; returns {1, count}
--   try_set    sets the count to n only if it does not exist (Redisson's trySetPermits), publishes
--              n; returns {1, n} when set, {0, count} when it existed
--   add        initialises as `available`, adds n (Redisson's addPermits), publishes n when n > 0;
--              returns {1, count}
-- Returns {-1, what} when a key is not a semaphore's: `what` says what it is; {-2, why} when an
-- add would take the count out of the integers Lua holds exactly (nothing changed).
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

local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expired = redis.call('zrangebyscore', KEYS[2], 0, now)
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  value = redis.call('incrby', KEYS[1], #expired)
  if value > 0 then
    redis.call(ARGV[4], KEYS[3], value)
  end
end

local n = tonumber(ARGV[3])
if ARGV[1] == 'try_set' then
  if value then
    return {0, tonumber(value)}
  end
  redis.call('set', KEYS[1], ARGV[3])
  redis.call(ARGV[4], KEYS[3], ARGV[3])
  return {1, n}
end

if not value and holders_kind == 'none' then
  value = ARGV[2]
  redis.call('set', KEYS[1], value)
end
if ARGV[1] == 'add' then
  -- Lua's numbers are doubles: past 2^53 counts round, and Redis writes a number argument with
  -- %.17g (1e+17), which no later INCRBY reads. Written with %d; a sum past +-(2^53 - 1) is
  -- refused, nothing changed.
  local sum = tonumber(value or '0') + n
  if sum > 9007199254740991 or sum < -9007199254740991 then
    return {-2, 'the count would pass 2^53 - 1 (it is ' .. (value or '0') .. ')'}
  end
  value = string.format('%d', sum)
  redis.call('set', KEYS[1], value)
  if n > 0 then
    redis.call(ARGV[4], KEYS[3], ARGV[3])
  end
end
return {1, tonumber(value or '0')}
