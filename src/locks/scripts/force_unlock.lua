-- Deletes a reentrant lock whoever holds it and wakes its waiters, as a release does: the first
-- client of its wait line (wait_line.lua, put in front) is called and the lock reserved for it,
-- then the unlock message goes out. Refuses any other key, so an operator's typo cannot delete data.
--
-- KEYS[1] the lock hash   KEYS[2] the unlock channel   ARGV[1] unlock message ("0")
--                                                      ARGV[2] "publish", or "spublish" on a cluster
-- KEYS[3] the wait line   KEYS[4] its deadlines        ARGV[3] the reservation's grace (ms)
-- KEYS[5] the reservation                              ARGV[4] the prefix of the call channels
--
-- A reentrant lock is a hash of at most 64 fields "<client id>:<holder>" -> positive hold count.
-- Returns {1} when a lock was deleted, {0} when there was no key, {-1, what} when the key is not a
--         lock: `what` says what it is ("a string", "a hash that is not a lock", ...).
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0}
end
if kind ~= 'hash' then
  return {-1, 'a ' .. kind}
end
if redis.call('hlen', KEYS[1]) > 64 then
  return {-1, 'a hash that is not a lock (too many fields)'}
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
  -- "<client id>:<holder number>" -> a positive count in decimal digits, as status reads it
  -- (rlock_hold.hpp): 5.5, 1e3, 0x10, " 5" or inf are data, not counts.
  local count = fields[i + 1]
  if not string.find(fields[i], '^.+:%d+$') or not string.find(count, '^%d+$') or #count > 19 or
     not string.find(count, '[1-9]') then
    return {-1, 'a hash that is not a lock (field ' .. string.format('%q', fields[i]) .. ')'}
  end
end
redis.call('del', KEYS[1])
line_wake_head(KEYS[3], KEYS[4], KEYS[5], ARGV[4], ARGV[2], ARGV[3])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return {1}
