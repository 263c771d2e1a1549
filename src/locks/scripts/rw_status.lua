-- Reads what an operator wants to know about a read-write lock, in one atomic step.
--
-- KEYS[1] the lock hash   KEYS[2] the fencing counter   KEYS[3] the waiting writers (zset)
--
-- Returns {type, pttl, last token, {field, count, ...}, waiting writers}
--   type: "none", "hash" (fields as read, "mode" among them) or another Redis type, or "hash of
--         over 64 fields" (not a lock; not read whole); pttl as PTTL; last token: the counter's
--         value, "0" if never used; waiting writers: unexpired intents.
local kind = redis.call('type', KEYS[1]).ok
local fields = {}
if kind == 'hash' then
  if redis.call('hlen', KEYS[1]) > 64 then
    kind = 'hash of over 64 fields'
  else
    fields = redis.call('hgetall', KEYS[1])
  end
end
local now = redis.call('time')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local writers = redis.call('zcount', KEYS[3], '(' .. now_ms, '+inf')
return {kind, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or '0', fields, writers}
