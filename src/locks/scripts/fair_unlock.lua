-- Releases one hold of a fair lock; the last hold deletes it and wakes the head of the waiting
-- list on that waiter's own channel ("<unlock channel>:<field>", message "0", as Redisson's
-- RFairLock). The free lock is kept for the head (fair_lock.lua refuses everyone else), so the
-- head takes it without a race. Nobody's field is written for it: a Redisson head would then
-- count two holds and its single unlock would leave the lock held.
--
-- KEYS[1] the lock hash          ARGV[1] unlock message ("0", as Redisson)
-- KEYS[2] the waiting list       ARGV[2] lease in milliseconds, re-set while holds remain
-- KEYS[3] the deadlines          ARGV[3] this holder's field
-- KEYS[4] the unlock channel     ARGV[4] the holds this holder keeps after the release, as the
--         (the head's channel            client counts them (0: release the lock)
--         is this + ":" + field) ARGV[5] the fencing token of the hold being released ("0": no
-- KEYS[5] the fencing counter            check)
--                                ARGV[6] "publish", or "spublish" on a Redis Cluster
--
-- The count is set, not decremented, and a try whose hold's token is older than the counter
-- changes nothing (see reentrant_unlock.lua).
--
-- Returns 1 released (last hold), 0 one hold fewer (still held), -1 not held by this holder.
if ARGV[5] ~= '0' then
  local last = tonumber(redis.call('get', KEYS[5]) or '0')
  if last > tonumber(ARGV[5]) then
    return -1
  end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then
    break
  end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline and tonumber(deadline) <= now then
    redis.call('zrem', KEYS[3], head)
    redis.call('lpop', KEYS[2])
  else
    break
  end
end
local function wake_head()
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[6], KEYS[4] .. ':' .. head, ARGV[1])
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  wake_head()  -- as Redisson: a lapsed lock is free for the head now
  return -1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return -1
end
if tonumber(ARGV[4]) > 0 then
  redis.call('hset', KEYS[1], ARGV[3], ARGV[4])
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
wake_head()
return 1
