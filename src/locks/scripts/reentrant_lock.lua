-- Acquires or re-enters a reentrant lock. Data as Redisson's RLock, so Java and C++ services can
-- share locks: a hash at the lock name, field "<client id>:<thread id>" -> hold count, PEXPIRE lease.
-- Beyond Redisson: every first acquisition takes the next fencing token from a counter key.
--
-- Tokens must keep increasing even when the server loses the counter (a restart without
-- persistence, a failover that lost the last writes, the counter's expiry). A missing counter
-- therefore starts from the server's clock in microseconds: above every token issued before, as
-- long as the server's clock does not read earlier than when the lost counter started plus one
-- microsecond per token it handed out (one lock name cannot take a million holds a second). That
-- is also why the counter may expire: a day after it was created.
--
-- KEYS[1] the lock hash          ARGV[1] lease in milliseconds
-- KEYS[2] the fencing counter    ARGV[2] this holder's field
--                                ARGV[3] how many holds the client knows this holder has
--
-- The client's count is the truth for its own field: a hold the client does not know of (an
-- acquisition whose reply was lost) is taken over as a fresh one, and a re-entry sets the count
-- to known + 1, so such an orphan can never keep the lock after the holder's last unlock.
--
-- Returns {1, token}     acquired (first hold): token strictly greater than every earlier one
--         {2, count}     re-entered: the holder's new hold count
--         {0, pttl}      held by someone else: milliseconds until its lease ends (-1: no TTL)
local counter_ttl_ms = 86400000

-- One INCR on the common path. A counter INCR just created (1) starts from the clock instead,
-- and expires counter_ttl_ms later (INCR keeps a TTL; restarting from the clock then is safe).
local function next_token()
  local token = redis.call('incr', KEYS[2])
  if token == 1 then
    local now = redis.call('time')
    local start = now[1] .. string.format('%06d', tonumber(now[2]))
    redis.call('set', KEYS[2], start, 'px', counter_ttl_ms)
    token = tonumber(start)  -- below 2^53: exact as a Lua number
  end
  return token
end

local known = tonumber(ARGV[3])
if redis.call('exists', KEYS[1]) == 0 or
    (known == 0 and redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, next_token()}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hset', KEYS[1], ARGV[2], known + 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {2, known + 1}
end
return {0, redis.call('pttl', KEYS[1])}
