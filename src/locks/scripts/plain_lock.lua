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
-- With a wait line of clients (dlock::plain_lock; wait_line.lua is put in front; Redlock passes
-- neither these keys nor these arguments), as reentrant_lock.lua has it:
-- KEYS[3] the wait line          ARGV[5] the client's wake id
-- KEYS[4] the line's deadlines   ARGV[6] "1": the caller waits if this attempt fails
-- KEYS[5] the reservation        ARGV[7] after taking the lock: "r" back to the tail, "l" leave
--                                ARGV[8] how long a client stays in line without attempting (ms)
--
-- A value of this owner that the client does not know of (an acquisition whose reply was lost,
-- or a release that never arrived) is taken over as a fresh hold. One the client does know of is
-- not re-entered: the lock is not reentrant.
--
-- Returns {1, token}             acquired: token strictly greater than every earlier one
--         {0, pttl, dlock}       held by someone else: ms until its lease ends (-1: no TTL);
--                                dlock = 1 when the holder is a dlock client (its release
--                                publishes), 0 for a foreign holder (poll for its release); or
--                                free but reserved for another client: its time left, dlock = 1
--         {0, pttl, dlock, calls}  the same with a wait line; calls = 1 when the holder's
--                                release calls the line's first client on its own channel (a
--                                dlock::plain_lock holder, or a reservation), 0 when only the
--                                shared channel hears it (Redlock's holders, which keep no line)
--         {2}                    the client knows this owner already holds it
--         {3}                    the key holds this very value already (ARGV[3] not ""): the
--                                same attempt reached this server before. Redlock's nonce is new
--                                per attempt and never sent twice, so two of its "masters" are
--                                one server
--         {-1, what, name}       the key is not a plain lock: `what` names its kind for people,
--                                `name` is KEYS[1]; nothing is changed
--
-- Kinds. A hash is a reentrant or read-write lock (dlock, Redisson). A string that is a decimal
-- number of at most 20 bytes (an int64) is a semaphore's or a latch's count, never a plain lock's
-- value: dlock's has colons; redis-py's Lock takes uuid1().hex (32 hex digits), node-redlock
-- randomBytes(16) as hex (32 hex digits), redsync 16 random bytes in standard base64 (24 bytes
-- ending in "=="). A 32-digit token made only of decimal digits is longer than any count. Only a
-- token chosen by hand (redis-py's acquire(token=...)) could be a short number: it reads as a count.
local counter_ttl_ms = '86400000'  -- a string: Redis formats a number arg with %.17g, dearly
local dlock_value = '^' .. string.rep('%x', 32) .. ':%d+:%w+$'

local lined = #KEYS >= 5 and ARGV[5] ~= nil and ARGV[5] ~= ''

-- A dlock::plain_lock holder's nonce is its fencing token (decimal); Redlock's is random hex.
local lined_value = '^' .. string.rep('%x', 32) .. ':%d+:%d+$'

local function refused(pttl, dlock, calls)
  if not lined then
    return {0, pttl, dlock}
  end
  if ARGV[6] == '1' then
    line_join(KEYS[3], KEYS[4], ARGV[5], ARGV[8])
  end
  return {0, pttl, dlock, calls}
end

local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' then
  return {-1, 'a reentrant lock or a read-write lock (a hash)', KEYS[1]}
end
if kind ~= 'none' and kind ~= 'string' then
  return {-1, 'a ' .. kind .. ' (not a lock)', KEYS[1]}
end

local holder = redis.call('get', KEYS[1])
if holder and #holder <= 20 and string.find(holder, '^%-?%d+$') then
  return {-1, 'a semaphore or a latch (a string count)', KEYS[1]}
end
if holder then
  local mine = string.sub(holder, 1, #ARGV[2] + 1) == ARGV[2] .. ':'
  if mine and ARGV[4] == '1' then
    return {2}
  end
  if mine and ARGV[3] ~= '' and holder == ARGV[2] .. ':' .. ARGV[3] then
    return {3}
  end
  if not mine then
    local dlock, calls = 0, 0
    if string.find(holder, dlock_value) then
      dlock = 1
    end
    if string.find(holder, lined_value) then
      calls = 1
    end
    return refused(redis.call('pttl', KEYS[1]), dlock, calls)
  end
elseif #KEYS >= 5 then
  local reserved = redis.call('get', KEYS[5])
  if reserved and reserved ~= ARGV[5] then
    return refused(redis.call('pttl', KEYS[5]), 1, 1)
  end
  if reserved then
    redis.call('del', KEYS[5])
  end
end

-- The clock in whole milliseconds (still counted in microseconds): Redlock's masters, asked
-- within one millisecond, then hand out the same token, and Redlock need not raise the others'
-- counters to the largest (one more script per master, nearly every time, with microseconds).
local now = redis.call('time')
local clock = tonumber(now[1]) * 1000000 + math.floor(tonumber(now[2]) / 1000) * 1000  -- < 2^53
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
if lined and ARGV[7] == 'r' then
  line_requeue(KEYS[3], KEYS[4], ARGV[5], ARGV[8])
elseif lined and ARGV[7] == 'l' then
  line_leave(KEYS[3], KEYS[4], ARGV[5])
end
return {1, token}
