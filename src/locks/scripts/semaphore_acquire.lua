-- Takes one permit of a semaphore, in the layout of Redisson's RPermitExpirableSemaphore, so Java
-- and C++ services share it: the string KEYS[1] counts the available permits (no TTL), the zset
-- KEYS[2] ("{N}:timeout") holds every taken permit as its 16 raw id bytes scored by its expiry in
-- epoch ms, and KEYS[3] ("redisson_sc:{N}") hears the count when permits come back.
--
-- Beyond Redisson: "now" is the server's TIME (never a client clock); a permit always has a lease
-- (the watchdog's or an explicit one), so a crashed holder's permit comes back; the count is
-- initialised to ARGV[3] when the semaphore does not exist yet (neither key exists).
--
-- KEYS[1] the count              ARGV[1] the permit id, 32 hex digits
-- KEYS[2] the holders' zset      ARGV[2] lease in milliseconds
-- KEYS[3] the channel            ARGV[3] the permits of a semaphore that does not exist yet
--                                ARGV[4] "publish", or "spublish" on a Redis Cluster
--
-- Expired permits are given back first (at most 100 per call), and the new count is published.
-- An id that is already a holder (an attempt whose reply was lost) is renewed, not counted twice.
--
-- Returns {1}                    acquired
--         {0, wait}              no permit: ms until the earliest permit's lease ends (-1: none
--                                that will end; wait for a message)
--         {-1, what, name}       KEYS[1] or KEYS[2] is not a semaphore's: `what` says what it is,
--                                `name` is KEYS[1]
local never = 922337203685477  -- Redisson's score for a permit without expiry

local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'string' then
  return {-1, 'a ' .. kind, KEYS[1]}
end
local holders_kind = redis.call('type', KEYS[2]).ok
if holders_kind ~= 'none' and holders_kind ~= 'zset' then
  return {-1, 'a ' .. holders_kind .. ' at its holders key', KEYS[1]}
end
local value = redis.call('get', KEYS[1])
-- A count is a decimal integer Lua holds exactly (|count| <= 2^53 - 1, dlock::max_count).
if value and not (string.find(value, '^%-?%d+$') and math.abs(tonumber(value)) <= 9007199254740991) then
  return {-1, 'a string that is not a count', KEYS[1]}
end

local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local expired = redis.call('zrangebyscore', KEYS[2], 0, now, 'limit', 0, 100)
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  value = redis.call('incrby', KEYS[1], #expired)
  if value > 0 then
    redis.call(ARGV[4], KEYS[3], value)
  end
end

if not value and holders_kind == 'none' then
  value = ARGV[3]
  redis.call('set', KEYS[1], value)
end

local id = string.gsub(ARGV[1], '%x%x', function(h) return string.char(tonumber(h, 16)) end)
local deadline = now + tonumber(ARGV[2])
if redis.call('zscore', KEYS[2], id) then
  redis.call('zadd', KEYS[2], deadline, id)
  return {1}
end
if value and tonumber(value) >= 1 then
  redis.call('decrby', KEYS[1], 1)
  redis.call('zadd', KEYS[2], deadline, id)
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return {1}
end

local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[1] and tonumber(first[2]) < never then
  return {0, math.max(tonumber(first[2]) - now, 0)}
end
return {0, -1}
