-- Releases a plain lock: deletes the key only while it holds this holder's value, then announces
-- the release to dlock waiters. A value is never reused (its nonce is a fencing token or random),
-- so a late or repeated release cannot delete a newer hold.
--
-- KEYS[1] the lock key           ARGV[1] the holder's value
-- KEYS[2] the unlock channel     ARGV[2] "publish", or "spublish" on a Redis Cluster
--
-- Returns 1 released, 0 not held with this value (expired, or someone else's).
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[2], KEYS[2], '0')
return 1
