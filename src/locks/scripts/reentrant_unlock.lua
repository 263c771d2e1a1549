-- Releases one hold of a reentrant lock; the last hold deletes it, reserves it for the first client
-- in its wait line and calls that client on its own channel (wait_line.lua, put in front), then
-- publishes the unlock message on the shared channel (Redisson's channel and message, so Redisson
-- waiters wake too, and dlock's waiting behind Redisson holders).
--
-- KEYS[1] the lock hash          ARGV[1] unlock message ("0", as Redisson)
-- KEYS[2] the unlock channel     ARGV[2] lease in milliseconds, re-set while holds remain
-- KEYS[3] the fencing counter    ARGV[3] this holder's field
--                                ARGV[4] the holds this holder keeps after the release, as the
--                                        client counts them (0: release the lock)
--                                ARGV[5] the fencing token of the hold being released ("0":
--                                        no check)
--                                ARGV[6] "publish", or "spublish" on a Redis Cluster
-- KEYS[4] the wait line          ARGV[7] how long the lock is held back for the woken client (ms)
-- KEYS[5] the line's deadlines
-- KEYS[6] the reservation        ARGV[8] the prefix of the clients' call channels
--
-- The client's count is the truth for its own field (see reentrant_lock.lua): the count is set,
-- not decremented, so a hold the client never learned of cannot outlive its last unlock, and a
-- retry that repeats a release that did run sets the same count again.
--
-- A try may also come after the same holder released everything and acquired anew: a retry whose
-- first try timed out but ran, or a first try that waited in the client for a failover to end
-- while the holder's next lock went ahead. Every new first hold takes a new token from the name's
-- own counter, so a counter above the released hold's token says that hold is over: the try
-- changes nothing.
--
-- Returns 1 released (last hold), 2 released and the call or the unlock message reached a listener
-- (a waiting client: its holder's client writes its next release at once rather than with its
-- next request),
-- 0 one hold fewer (still held), -1 not held by this holder.
if ARGV[5] ~= '0' then
  local last = tonumber(redis.call('get', KEYS[3]) or '0')
  if last > tonumber(ARGV[5]) then
    return -1
  end
end
if tonumber(ARGV[4]) > 0 then
  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return -1
  end
  redis.call('hset', KEYS[1], ARGV[3], ARGV[4])
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
-- The last hold: deleting the holder's field, a reentrant lock's only one, deletes the lock.
if redis.call('hdel', KEYS[1], ARGV[3]) == 0 then
  return -1
end
local called = line_wake_head(KEYS[4], KEYS[5], KEYS[6], ARGV[8], ARGV[6], ARGV[7])
if redis.call(ARGV[6], KEYS[2], ARGV[1]) + called > 0 then
  return 2
end
return 1
