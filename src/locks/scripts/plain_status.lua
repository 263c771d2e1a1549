-- Reads what an operator wants to know about a plain lock, in one atomic step.
--
-- KEYS[1] the lock key           KEYS[2] the fencing counter
--
-- Returns {type, pttl, last token, value}
--   type: "none" (free), "string" (a plain lock: the holder's value) or another Redis type;
--   pttl: as PTTL (-2 no key, -1 no TTL); last token: the counter's value, "0" if never used;
--   value: the holder's value for a string, else "".
local kind = redis.call('type', KEYS[1]).ok
local value = ''
if kind == 'string' then
  value = redis.call('get', KEYS[1])
end
return {kind, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or '0', value}
