-- Acquires or re-enters a reentrant lock. Data as Redisson's RLock, so Java and C++ services can
-- share locks: a hash at the lock name, field "<client id>:<thread id>" -> hold count, PEXPIRE lease.
-- Beyond Redisson: every first acquisition takes a fencing token.
--
-- Tokens must keep increasing even when the server loses writes: a restart without persistence,
-- a failover whose replica missed the last acquisitions (asynchronous replication), the counter's
-- expiry. So a token is the larger of the last token + 1 and the server's clock in microseconds:
-- strictly increasing on one server whatever its clock does, and, after writes were lost, still
-- above every token handed out before as long as this server's clock does not read earlier than
-- the lost server's did when it handed them out (clocks in sync to well within a failover's
-- seconds). One lock name cannot take a million holds a second, so tokens follow the clock. The
-- counter expires a day after the last acquisition; the clock carries on from there.
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
--         {-1, 0}        the hash is a read-write lock (it has a "mode" field)
local counter_ttl_ms = 86400000

local function next_token()
  local now = redis.call('time')
  local clock = tonumber(now[1] .. string.format('%06d', tonumber(now[2])))  -- < 2^53: exact
  local token = tonumber(redis.call('get', KEYS[2]) or '0') + 1
  if clock > token then
    token = clock
  end
  redis.call('set', KEYS[2], string.format('%d', token), 'px', counter_ttl_ms)
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
if redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-1, 0}  -- a read-write lock (rw_read_lock.lua): not ours to take
end
return {0, redis.call('pttl', KEYS[1])}
