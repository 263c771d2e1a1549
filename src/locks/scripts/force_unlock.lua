-- Deletes a lock whoever holds it and wakes its waiters.
--
-- KEYS[1] the lock hash   KEYS[2] the unlock channel   ARGV[1] unlock message ("0")
--
-- Returns 1 when a lock was deleted, 0 when there was none.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], ARGV[1])
  return 1
end
return 0
