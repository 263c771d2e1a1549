-- Releases a plain lock: deletes the key only while it holds this holder's value, then announces
-- the release to dlock waiters. A value is never reused (its nonce is a fencing token or random),
-- so a late or repeated release cannot delete a newer hold.
--
-- KEYS[1] the lock key           ARGV[1] the holder's value
-- KEYS[2] the unlock channel     ARGV[2] "publish", or "spublish" on a Redis Cluster
-- With a wait line (dlock::plain_lock; wait_line.lua is put in front; not with Redlock): the
-- freed lock is reserved for the first client in line, called on its own channel before the "0".
-- KEYS[3] the wait line          ARGV[3] how long the lock is held back for that client (ms)
-- KEYS[4] the line's deadlines   ARGV[4] the prefix of the clients' call channels
-- KEYS[5] the reservation
--
-- Returns 1 released, 2 released and the call or the unlock message reached a listener (a
-- waiting client: the releasing client sends the name's next release at once rather than with its
-- next request), 0 not held with this value (expired, or someone else's).
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
local called = 0
if #KEYS >= 5 then
  called = line_wake_head(KEYS[3], KEYS[4], KEYS[5], ARGV[4], ARGV[2], ARGV[3])
end
if redis.call(ARGV[2], KEYS[2], '0') + called > 0 then
  return 2
end
return 1
