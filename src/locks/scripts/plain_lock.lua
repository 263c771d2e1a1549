-- Acquires a plain lock: the key holds one holder's value, set with a PX lease, as redis-py's
-- Lock, redsync and node-redlock keep it (SET key value NX PX), so they and dlock exclude each
-- other on the same key. Used by dlock::plain_lock (one server) and, on every master, by
-- dlock::redlock_mutex. Beyond those peers: a fencing token per acquisition, from the same kind of
-- counter as the reentrant lock's (see reentrant_lock.lua for why it follows the server's clock).
--
-- A dlock holder's value is "<client id>:<owner key>:<nonce>" (32 lowercase hex digits, a
-- number, letters and digits): the owner prefix lets a lost reply's hold be taken over, and lets a
-- waiter tell a dlock holder (whose release publishes) from a foreign one (whose release does not).
--
-- KEYS[1] the lock key           ARGV[1] lease in milliseconds
-- KEYS[2] the fencing counter    ARGV[2] this holder's owner, "<client id>:<owner key>"
--                                ARGV[3] the nonce; "" to use the new fencing token
--                                ARGV[4] "1" if the client knows this owner holds the lock
--
-- A value of this owner that the client does not know of (an acquisition whose reply was lost,
-- or a release that never arrived) is taken over as a fresh hold. One the client does know of is
-- not re-entered: the lock is not reentrant.
--
-- Returns {1, token}             acquired: token strictly greater than every earlier one
--         {0, pttl, dlock}       held by someone else: ms until its lease ends (-1: no TTL);
--                                dlock = 1 when the holder is a dlock client (its release
--                                publishes), 0 for a foreign holder (poll for its release)
--         {2}                    the client knows this owner already holds it
local counter_ttl_ms = 86400000
local dlock_value = '^' .. string.rep('%x', 32) .. ':%d+:%w+$'

local holder = redis.call('get', KEYS[1])
if holder then
  local mine = string.sub(holder, 1, #ARGV[2] + 1) == ARGV[2] .. ':'
  if mine and ARGV[4] == '1' then
    return {2}
  end
  if not mine then
    local dlock = 0
    if string.find(holder, dlock_value) then
      dlock = 1
    end
    return {0, redis.call('pttl', KEYS[1]), dlock}
  end
end

local now = redis.call('time')
local clock = tonumber(now[1] .. string.format('%06d', tonumber(now[2])))  -- < 2^53: exact
local token = tonumber(redis.call('get', KEYS[2]) or '0') + 1
if clock > token then
  token = clock
end
local text = string.format('%d', token)
redis.call('set', KEYS[2], text, 'px', counter_ttl_ms)
local nonce = ARGV[3]
if nonce == '' then
  nonce = text
end
redis.call('set', KEYS[1], ARGV[2] .. ':' .. nonce, 'px', ARGV[1])
return {1, token}
