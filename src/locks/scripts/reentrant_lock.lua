-- Acquires or re-enters a reentrant lock. Data as Redisson's RLock, so Java and C++ services can
-- share locks: a hash at the lock name, field "<client id>:<thread id>" -> hold count, PEXPIRE lease.
-- Beyond Redisson: every first acquisition takes a fencing token, and clients that wait stand in
-- a wait line, so that a release wakes one client rather than all (wait_line.lua, put in front).
--
-- Tokens must keep increasing even when the server loses writes: a restart without persistence,
-- a failover whose replica missed the last acquisitions (asynchronous replication), the counter's
-- expiry. So a token is the larger of the last token + 1 and the server's clock in microseconds:
-- strictly increasing on one server whatever its clock does, and, after writes were lost, still
-- above every token handed out before as long as this server's clock does not read earlier than
-- the lost server's did when it handed them out (clocks in sync to well within a failover's
-- seconds). One lock name cannot take a million holds a second, so tokens follow the clock. The
-- counter expires a day after the last acquisition; the clock carries on from there.
--
-- KEYS[1] the lock hash          ARGV[1] lease in milliseconds
-- KEYS[2] the fencing counter    ARGV[2] this holder's field
-- KEYS[3] the wait line          ARGV[3] how many holds the client knows this holder has
-- KEYS[4] the line's deadlines   ARGV[4] the client's wake id ("": it takes no part in the line)
-- KEYS[5] the reservation        ARGV[5] "1": the caller waits if this attempt fails
-- KEYS[6] (optional) the fair lock's waiting list of the same name (fair_lock.lua)
--                                ARGV[6] after taking the lock: "r" the client has other waiters
--                                        (back to the line's tail), "l" leave the line, "" none
--                                ARGV[7] how long a client stays in line without attempting (ms)
--
-- The client's count is the truth for its own field: a hold the client does not know of (an
-- acquisition whose reply was lost) is taken over as a fresh one, and a re-entry sets the count
-- to known + 1, so such an orphan can never keep the lock after the holder's last unlock.
--
-- A free lock reserved for another client (its release woke that client) is refused, as if held,
-- with the reservation's time left.
--
-- Returns {1, token}     acquired (first hold): token strictly greater than every earlier one
--         {2, count}     re-entered: the holder's new hold count
--         {0, pttl, calls}  held (or reserved) by someone else: milliseconds until its lease (or
--                        the reservation) ends (-1: no TTL); calls = 1 when the holder's release
--                        will call the line's first client on its own channel (a dlock holder,
--                        or a reservation), 0 when only the shared channel will hear it (a
--                        Redisson holder): a dlock waiter then listens there too
--         {-1, what, name}  the key is not a reentrant lock: `what` names its kind for people
--                        ("a read-write lock ...", "a semaphore or a latch ...", "a fair lock
--                        ..." while its waiting list KEYS[6] exists, "a hash that is not a
--                        lock ..." when its holder's field is not a lock's), `name` is KEYS[1]
local counter_ttl_ms = '86400000'  -- a string: Redis formats a number arg with %.17g, dearly
local id = ARGV[4]
local lifetime = ARGV[7]

local function next_token()
  local now = redis.call('time')
  local clock = tonumber(now[1]) * 1000000 + tonumber(now[2])  -- < 2^53: exact
  local token = tonumber(redis.call('get', KEYS[2]) or '0') + 1
  if clock > token then
    token = clock
  end
  redis.call('set', KEYS[2], string.format('%d', token), 'px', counter_ttl_ms)
  return token
end

local function refused(pttl, calls)
  if ARGV[5] == '1' and id ~= '' then
    line_join(KEYS[3], KEYS[4], id, lifetime)
  end
  return {0, pttl, calls}
end

-- A dlock holder's field: its client id (32 hex digits) and an owner number. Redisson's client
-- ids are UUIDs (with dashes). dlock 0.1 clients have the same form but do not call (they predate
-- the line): behind one, a waiter is called by nobody and re-checks every line_refresh.
local dlock_field = '^%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x:%d+$'

-- Other kinds first, before any field of a hash is looked at: a read-write lock's reader field has
-- the same form as ours, and a string would fail on HKEYS with Redis's bare WRONGTYPE. A decimal
-- string of at most 20 bytes (an int64) is a semaphore's or a latch's count (plain_lock.lua says
-- why no plain lock's value looks so); any other string is a plain lock or data.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'string' then
  local value = redis.call('get', KEYS[1])
  if #value <= 20 and string.find(value, '^%-?%d+$') then
    return {-1, 'a semaphore or a latch (a string count)', KEYS[1]}
  end
  return {-1, 'a plain lock or data (a string)', KEYS[1]}
end
if kind ~= 'none' and kind ~= 'hash' then
  return {-1, 'a ' .. kind .. ' (not a lock)', KEYS[1]}
end
-- A held lock's fields, read in one call (each call costs a script about a microsecond): its
-- holder's, the only one, or a read-write lock's, 'mode' among them.
local holder, mine = nil, false
if kind == 'hash' then
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    if field == 'mode' then
      return {-1, 'a read-write lock (dlock::shared_mutex, Redisson RReadWriteLock)', KEYS[1]}
    end
    mine = mine or field == ARGV[2]
    holder = holder or field
  end
end
local free = kind == 'none'
-- What may stand in a free lock's way: a reservation (KEYS[5]) and a fair lock's waiting list
-- (KEYS[6]). Most attempts on a free lock find neither, and one EXISTS asks for both.
local in_way = not free or redis.call('exists', KEYS[5], KEYS[6] or KEYS[5]) > 0
-- A fair lock's hash looks like ours; its waiting list tells it apart while someone waits, and
-- taking it then would jump that line.
if in_way and KEYS[6] and redis.call('exists', KEYS[6]) == 1 then
  return {-1, 'a fair lock (dlock::fair_mutex, Redisson RFairLock) with waiters in its line',
          KEYS[1]}
end

local known = tonumber(ARGV[3])
if free and in_way then
  local reserved = redis.call('get', KEYS[5])
  if reserved and reserved ~= id then
    return refused(redis.call('pttl', KEYS[5]), 1)
  end
  if reserved then
    redis.call('del', KEYS[5])
  end
end
if free or (known == 0 and mine) then
  redis.call('hset', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  if ARGV[6] == 'r' then
    line_requeue(KEYS[3], KEYS[4], id, lifetime)
  elseif ARGV[6] == 'l' then
    line_leave(KEYS[3], KEYS[4], id)
  end
  return {1, next_token()}
end
if mine then
  redis.call('hset', KEYS[1], ARGV[2], string.format('%d', known + 1))
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {2, known + 1}
end
-- A holder field that is not "<client id>:<holder number>" is someone's data (status and the
-- force-unlock script say so too, rlock_hold.hpp): waiting for it to be released would be for ever.
if not string.find(holder or '', '^.+:%d+$') then
  return {-1, 'a hash that is not a lock (field ' .. string.format('%q', holder or '') .. ')',
          KEYS[1]}
end
local calls = 0
if string.find(holder or '', dlock_field) then
  calls = 1
end
return refused(redis.call('pttl', KEYS[1]), calls)
