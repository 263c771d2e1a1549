-- Takes or re-enters the write hold of a read-write lock. Data as Redisson's RReadWriteLock
-- (RedissonWriteLock): the hash at the lock name with "mode" = "write" and the writer's field
-- "<client id>:<thread>:write" -> hold count. Beyond Redisson:
--   * a fencing token per first hold, from the same counter as reentrant_lock.lua;
--   * a re-entry re-sets the lease instead of adding one (a crashed writer blocks one lease);
--   * readers whose every lease key has lapsed (crashed) are dropped, so a writer does not wait
--     for the hash's own TTL;
--   * writer preference: a refused writer that will wait records its intent in a sorted set
--     (member = its field, score = now + ARGV[6]), which new dlock readers respect
--     (rw_read_lock.lua); it re-attempts at least every ARGV[7] ms, which renews the intent. A
--     refused attempt that will not wait (try_lock, or the last one at the deadline) withdraws
--     it and, when it was the last, publishes "1" so readers held back by it try again.
--   * a thread that holds only read holds gets {-2} (no upgrade: it would wait for itself).
--
-- KEYS[1] the lock hash                 ARGV[1] lease in milliseconds
-- KEYS[2] the fencing counter           ARGV[2] this writer's field ("<field>:write")
-- KEYS[3] the waiting writers (zset)    ARGV[3] the same owner's reader field
-- KEYS[4] the key base of the readers'  ARGV[4] how many write holds the client knows it has
--         timeout prefixes              ARGV[5] "1" if the caller waits when refused, else "0"
-- KEYS[5] the channel                   ARGV[6] how long an intent lasts, in milliseconds
--                                       ARGV[7] the longest sleep before the next attempt (ms)
--                                       ARGV[8] "publish", or "spublish" on a Redis Cluster
--
-- Returns {1, token}   acquired (first hold); token as reentrant_lock.lua's
--         {2, count}   re-entered: the new hold count
--         {0, ttl}     refused: milliseconds to sleep at most before trying again
--         {-1, what, name}  the key is not a read-write lock (`name` is KEYS[1])
--         {-2}         this owner holds read holds only
local counter_ttl_ms = '86400000'  -- a string: Redis formats a number arg with %.17g, dearly

local function next_token()
  local now = redis.call('time')
  local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])  -- < 2^53: exact
  local token = tonumber(redis.call('get', KEYS[2]) or '0') + 1
  if clock > token then
    token = clock
  end
  redis.call('set', KEYS[2], string.format('%d', token), 'px', counter_ttl_ms)
  return token
end

local kind = redis.call('type', KEYS[1]).ok
if kind == 'string' then
  -- A decimal count of at most 20 bytes is a semaphore's or a latch's (see plain_lock.lua).
  local value = redis.call('get', KEYS[1])
  if #value <= 20 and string.find(value, '^%-?%d+$') then
    return {-1, 'a semaphore or a latch (a string count)', KEYS[1]}
  end
  return {-1, 'a plain lock or data (a string)', KEYS[1]}
end
if kind ~= 'none' and kind ~= 'hash' then
  return {-1, 'a ' .. kind .. ' (not a lock)', KEYS[1]}
end
local mode = redis.call('hget', KEYS[1], 'mode')
if kind == 'hash' and not mode then
  return {-1, 'a reentrant lock (dlock::mutex, Redisson RLock)', KEYS[1]}
end
local known = tonumber(ARGV[4])

if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if known > 0 then
    redis.call('hset', KEYS[1], ARGV[2], known + 1)
    redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
    return {2, known + 1}
  end
  -- A hold the client does not know of: taken over as a fresh one (see reentrant_lock.lua).
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('zrem', KEYS[3], ARGV[2])
  return {1, next_token()}
end

if mode == 'read' then
  if redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return {-2}
  end
  local fields = redis.call('hgetall', KEYS[1])
  for f = 1, #fields, 2 do
    local n = tonumber(fields[f + 1])
    if fields[f] ~= 'mode' and n then
      local alive = false
      for i = 1, n do
        if redis.call('exists', KEYS[4] .. ':' .. fields[f] .. ':rwlock_timeout:' .. i) == 1 then
          alive = true
          break
        end
      end
      if not alive then
        redis.call('hdel', KEYS[1], fields[f])
      end
    end
  end
  if redis.call('hlen', KEYS[1]) <= 1 then
    redis.call('del', KEYS[1])
    mode = false
  end
end

if not mode then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('zrem', KEYS[3], ARGV[2])
  return {1, next_token()}
end

local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('zremrangebyscore', KEYS[3], '-inf', now_ms)
if ARGV[5] == '1' then
  redis.call('zadd', KEYS[3], now_ms + tonumber(ARGV[6]), ARGV[2])
  redis.call('pexpire', KEYS[3], ARGV[6])
elseif redis.call('zrem', KEYS[3], ARGV[2]) == 1 and redis.call('zcard', KEYS[3]) == 0 and
    mode == 'read' then
  redis.call(ARGV[8], KEYS[5], '1')
end
local sleep = redis.call('pttl', KEYS[1])
local longest = tonumber(ARGV[7])
if sleep < 0 or sleep > longest then
  sleep = longest
end
return {0, sleep}
