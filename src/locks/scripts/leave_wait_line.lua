-- A client stops waiting for a reentrant or plain lock (its last waiter gave up): it leaves the wait line
-- (wait_line.lua, put in front), and if the free lock was reserved for it, passes it on to the
-- next client in line, as a release would.
--
-- KEYS[1] the lock hash          ARGV[1] the client's wake id
-- KEYS[2] the unlock channel     ARGV[2] "publish", or "spublish" on a Redis Cluster
-- KEYS[3] the wait line          ARGV[3] how long the lock is held back for the woken client (ms)
-- KEYS[4] the line's deadlines   ARGV[4] the unlock message ("0")
-- KEYS[5] the reservation        ARGV[5] the prefix of the clients' call channels
--
-- Returns 1 when it passed a reservation on, else 0.
line_leave(KEYS[3], KEYS[4], ARGV[1])
if redis.call('get', KEYS[5]) ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[5])
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
line_wake_head(KEYS[3], KEYS[4], KEYS[5], ARGV[5], ARGV[2], ARGV[3])
redis.call(ARGV[2], KEYS[2], ARGV[4])
return 1
