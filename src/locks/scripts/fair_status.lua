-- What a fair lock holds, read at once: the lock hash as lock_status.lua reads it, then the
-- waiting list with each waiter's deadline left (ms, on the server's clock; <= 0: past, the
-- waiter is dropped by the next script that runs). At most 1,000 waiters are listed.
--
-- KEYS[1] the lock hash, KEYS[2] the fencing counter, KEYS[3] the waiting list,
-- KEYS[4] the deadlines.
--
-- Returns {type, pttl, last token, {field, count, ...}, {field, deadline left or '', ...},
--          waiters in all}
local kind = redis.call('type', KEYS[1]).ok
local holders = {}
if kind == 'hash' then
  if redis.call('hlen', KEYS[1]) > 64 then
    kind = 'hash of over 64 fields'
  else
    holders = redis.call('hgetall', KEYS[1])
  end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local queue = {}
local total = 0
if redis.call('type', KEYS[3]).ok == 'list' then
  total = redis.call('llen', KEYS[3])
  local fields = redis.call('lrange', KEYS[3], 0, 999)
  for i = 1, #fields do
    queue[#queue + 1] = fields[i]
    local deadline = redis.call('zscore', KEYS[4], fields[i])
    if deadline then
      queue[#queue + 1] = string.format('%d', tonumber(deadline) - now)
    else
      queue[#queue + 1] = ''
    end
  end
end
return {kind, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or '0', holders, queue, total}
