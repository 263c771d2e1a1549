-- Acquires or re-enters a fair lock. Data as Redisson's RFairLock, so Java and C++ services can
-- share one: the lock hash at the name (field "<client id>:<thread id>" -> hold count, PEXPIRE
-- lease, as RLock), a list of waiting fields in arrival order and a sorted set of their deadlines
-- (epoch ms by which each must have taken the lock once it is at the head; a waiter past its
-- deadline is dropped as dead). A free lock goes to the head of the list only. Beyond Redisson: a
-- fencing token per first hold (as reentrant_lock.lua), deadlines on the server's clock, a live
-- waiter's deadline is raised on each attempt (so it is never dropped while it polls), and an
-- attempt that will not wait (try_lock) never joins the list.
--
-- KEYS[1] the lock hash          ARGV[1] lease in milliseconds
-- KEYS[2] the waiting list       ARGV[2] this holder's field
-- KEYS[3] the deadlines          ARGV[3] how many holds the client knows this holder has
-- KEYS[4] the fencing counter    ARGV[4] the thread wait time W (ms): how long a head may take
--                                        to take a free lock before it is dropped
--                                ARGV[5] "1": the caller waits if this attempt fails (joins the
--                                        list), "0": it does not
--
-- Returns {1, token}     acquired (first hold): token strictly greater than every earlier one
--         {2, count}     re-entered: the holder's new hold count
--         {0, sleep}     refused: milliseconds until the holder's lease ends or, while the free
--                        lock is kept for an earlier waiter, until that waiter's deadline (-1:
--                        the holder has no TTL)
--         {-1, what, name}  the key is not a fair lock: `what` names its kind for people (as
--                        reentrant_lock.lua), `name` is KEYS[1]
local counter_ttl_ms = '86400000'  -- a string: Redis formats a number arg with %.17g, dearly
local field = ARGV[2]
local wait = tonumber(ARGV[4])
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function next_token()
  local clock = tonumber(time[1]) * 1000000 + tonumber(time[2])  -- < 2^53: exact
  local token = tonumber(redis.call('get', KEYS[4]) or '0') + 1
  if clock > token then
    token = clock
  end
  redis.call('set', KEYS[4], string.format('%d', token), 'px', counter_ttl_ms)
  return token
end

-- Other kinds first, as reentrant_lock.lua tells them apart.
local kind = redis.call('type', KEYS[1]).ok
if kind == 'string' then
  local value = redis.call('get', KEYS[1])
  if #value <= 20 and string.find(value, '^%-?%d+$') then
    return {-1, 'a semaphore or a latch (a string count)', KEYS[1]}
  end
  return {-1, 'a plain lock or data (a string)', KEYS[1]}
end
if kind == 'hash' and redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-1, 'a read-write lock (dlock::shared_mutex, Redisson RReadWriteLock)', KEYS[1]}
end
if kind ~= 'none' and kind ~= 'hash' then
  return {-1, 'a ' .. kind .. ' (not a lock)', KEYS[1]}
end

-- Waiters at the head whose deadline passed are gone (as Redisson: only the head is looked at).
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

local function hold(count)
  redis.call('hset', KEYS[1], field, count)
  redis.call('pexpire', KEYS[1], ARGV[1])
end

local known = tonumber(ARGV[3])
if kind == 'none' then
  local head = redis.call('lindex', KEYS[2], 0)
  if not head or head == field then
    if head then
      redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], field)
    -- Everyone behind moves up one place: one wait time less (Redisson does the same).
    local members = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #members do
      redis.call('zincrby', KEYS[3], -wait, members[i])
    end
    hold(1)
    return {1, next_token()}
  end
elseif redis.call('hexists', KEYS[1], field) == 1 then
  if known == 0 then
    -- A hold the client does not know of (an acquisition whose reply was lost): a fresh one.
    hold(1)
    return {1, next_token()}
  end
  hold(known + 1)
  return {2, known + 1}
end
-- A holder field that is not "<client id>:<holder number>" is someone's data, as
-- reentrant_lock.lua tells it: waiting in line for its release would be for ever.
if kind == 'hash' then
  local holder = redis.call('hkeys', KEYS[1])[1]
  if not string.find(holder or '', '^.+:%d+$') then
    return {-1, 'a hash that is not a lock (field ' .. string.format('%q', holder or '') .. ')',
            KEYS[1]}
  end
end

local pttl = redis.call('pttl', KEYS[1])
local function sleep()
  if pttl ~= -2 then
    return pttl
  end
  -- Free, kept for the head: until the head takes it or its deadline passes.
  local head = redis.call('lindex', KEYS[2], 0)
  local deadline = tonumber(redis.call('zscore', KEYS[3], head) or now + wait)
  return math.max(1, deadline - now)
end

local score = redis.call('zscore', KEYS[3], field)
if score then
  local position = redis.call('lpos', KEYS[2], field)
  if position then
    -- Alive: at least one wait time per place ahead and the holder's lease left.
    local floor = now + math.max(pttl, 0) + (position + 1) * wait
    if tonumber(score) < floor then
      redis.call('zadd', KEYS[3], floor, field)
    end
    return {0, sleep()}
  end
  redis.call('zrem', KEYS[3], field)  -- a deadline without a place: joins again below
end
if ARGV[5] ~= '1' then
  return {0, sleep()}
end
-- Joins at the tail, as Redisson: the deadline of the last waiter (or the lease end) plus W.
local last = redis.call('lindex', KEYS[2], -1)
local last_deadline = last and redis.call('zscore', KEYS[3], last)
local base
if last_deadline and last ~= field then
  base = tonumber(last_deadline) - now
else
  base = pttl
end
if redis.call('zadd', KEYS[3], base + wait + now, field) == 1 then
  redis.call('rpush', KEYS[2], field)
end
return {0, sleep()}
