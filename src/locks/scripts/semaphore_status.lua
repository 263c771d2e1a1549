-- Reads what an operator wants to know about a semaphore, in one atomic step, changing nothing.
--
-- KEYS[1] the count              KEYS[2] the holders' zset
--
-- Returns {type, count, pttl, {id, ms left, ...}}
--   type: the count key's Redis type ("none", "string", ...), or "<type> at its holders key" when
--   the zset key is not a zset; count: the available permits as text ("" when the key is not a
--   string); pttl: the count key's PTTL; then each holder's permit id (32 hex digits) and the ms
--   its lease has left (-1: no expiry, Redisson's acquire without a lease), soonest end first.
local never = 922337203685477
local kind = redis.call('type', KEYS[1]).ok
local holders_kind = redis.call('type', KEYS[2]).ok
if holders_kind ~= 'none' and holders_kind ~= 'zset' then
  return {holders_kind .. ' at its holders key', '', -2, {}}
end
local count = ''
if kind == 'string' then
  count = redis.call('get', KEYS[1])
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local holders = {}
local entries = redis.call('zrange', KEYS[2], 0, -1, 'withscores')
for i = 1, #entries, 2 do
  local hex = string.gsub(entries[i], '.', function(c) return string.format('%02x', string.byte(c)) end)
  local expiry = tonumber(entries[i + 1])
  local left = -1
  if expiry < never then
    left = math.max(expiry - now, 0)
  end
  holders[#holders + 1] = hex
  holders[#holders + 1] = left
end
return {kind, count, redis.call('pttl', KEYS[1]), holders}
