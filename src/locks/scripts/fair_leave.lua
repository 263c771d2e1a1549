-- A waiter of a fair lock gives up (its wait ran out, it was cancelled, its client stops): it
-- leaves the waiting list, and the waiters behind it move up one place (their deadlines one wait
-- time earlier), as Redisson's acquireFailedAsync. Beyond Redisson: when it was the head of a
-- free lock, the new head is woken, instead of sleeping until the leaver's deadline.
--
-- KEYS[1] the waiting list       ARGV[1] the leaver's field
-- KEYS[2] the deadlines          ARGV[2] the thread wait time W (ms)
-- KEYS[3] the lock hash          ARGV[3] unlock message ("0")
-- KEYS[4] the unlock channel     ARGV[4] "publish", or "spublish" on a Redis Cluster
--
-- Returns 1 left the list, 0 was not in it.
local queue = redis.call('lrange', KEYS[1], 0, -1)
local i = 1
while i <= #queue and queue[i] ~= ARGV[1] do
  i = i + 1
end
redis.call('zrem', KEYS[2], ARGV[1])
if i > #queue then
  return 0
end
for j = i + 1, #queue do
  redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[j])
end
redis.call('lrem', KEYS[1], 0, ARGV[1])
if i == 1 and redis.call('exists', KEYS[3]) == 0 then
  local head = redis.call('lindex', KEYS[1], 0)
  if head then
    redis.call(ARGV[4], KEYS[4] .. ':' .. head, ARGV[3])
  end
end
return 1
