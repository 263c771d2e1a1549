-- The wait line of a lock N (docs/design/contention.md), shared by the scripts that use it: this
-- file is put in front of the reentrant and plain locks' lock, unlock and force-unlock scripts and
-- leave_wait_line.lua, never run alone.
--
-- The line holds clients, not threads: a client's wake id (a decimal number >= 2) in the ZSET
-- `line` scored by arrival, with the server time by which it must attempt again to stay in line
-- in the hash `deadlines`. Each attempt of a client that will wait refreshes its deadline. A
-- release pops the first client still in time, reserves the freed lock for it (`reserved` = its
-- id, for `grace` ms) and calls it on its own channel, `call_prefix` .. id: only that client
-- hears it. The unlock message on N's shared channel follows, for Redisson's waiters and for
-- dlock's waiting behind a holder that does not call (a Redisson or dlock 0.1 client).

local function line_now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Every argument of redis.call here is a string: a Lua number is formatted with "%.17g" on its way
-- into Redis, which costs a script more than many a command does.

-- Joins the line at its tail (or keeps its place in it) and stays for `lifetime` ms (a decimal
-- string, as the client sent it). Scores strictly increase along the line, also for arrivals
-- within one millisecond.
local function line_join(line, deadlines, id, lifetime)
  local now = line_now_ms()
  local tail = redis.call('zrange', line, '-1', '-1', 'withscores')[2]
  local score = now
  if tail and tonumber(tail) >= now then
    score = tonumber(tail) + 1
  end
  redis.call('zadd', line, 'NX', string.format('%d', score), id)
  redis.call('hset', deadlines, id, string.format('%d', now + tonumber(lifetime)))
  redis.call('pexpire', line, lifetime)
  redis.call('pexpire', deadlines, lifetime)
end

-- Took the lock and still has waiters: back to the tail, as a newcomer.
local function line_requeue(line, deadlines, id, lifetime)
  redis.call('zrem', line, id)
  line_join(line, deadlines, id, lifetime)
end

local function line_leave(line, deadlines, id)
  redis.call('zrem', line, id)
  redis.call('hdel', deadlines, id)
end

-- The lock is free: reserves it for the first client in line whose deadline has not passed (the
-- others left or died) and publishes that client's id on its call channel. Returns how many
-- connections heard the call (0 also when nobody was called). At most 100 stale entries per call.
local function line_wake_head(line, deadlines, reserved, call_prefix, publish, grace)
  local now  -- read once someone is in line: most releases find the line empty
  for _ = 1, 100 do
    local head = redis.call('zrange', line, '0', '0')[1]
    if not head then
      return 0
    end
    now = now or line_now_ms()
    redis.call('zrem', line, head)
    local deadline = tonumber(redis.call('hget', deadlines, head) or '0')
    redis.call('hdel', deadlines, head)
    if deadline >= now then
      redis.call('set', reserved, head, 'px', grace)
      return redis.call(publish, call_prefix .. head, head)
    end
  end
  return 0
end
