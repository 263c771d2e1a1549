-- Raises a fencing counter to at least ARGV[1] (Redlock writes the token a majority agreed on back
-- to the masters that granted it, so that later majorities hand out larger tokens). Never lowers.
--
-- KEYS[1] the fencing counter    ARGV[1] the token
--
-- Returns the counter's value afterwards.
local counter_ttl_ms = '86400000'  -- a string: Redis formats a number arg with %.17g, dearly
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if wanted > current then
  current = wanted
end
local text = string.format('%d', current)
redis.call('set', KEYS[1], text, 'px', counter_ttl_ms)
return text
