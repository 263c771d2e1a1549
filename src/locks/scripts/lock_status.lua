-- Reads what an operator wants to know about a lock, in one atomic step.
--
-- KEYS[1] the lock hash          KEYS[2] the fencing counter
--
-- Returns {type, pttl, last token, {field, count, field, count, ...}}
--   type: "none" (free), "hash" (a reentrant lock, if its fields read as holders) or another
--         Redis type, or "hash of over 64 fields" (not a dlock lock);
--   pttl: as PTTL (-2 no key, -1 no TTL); last token: the counter's value, "0" if never used.
local kind = redis.call('type', KEYS[1]).ok
local holders = {}
if kind == 'hash' then
  -- A lock has a few holders; a big hash is someone's data and is not read whole.
  if redis.call('hlen', KEYS[1]) > 64 then
    kind = 'hash of over 64 fields'
  else
    holders = redis.call('hgetall', KEYS[1])
  end
end
return {kind, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or '0', holders}
