-- Gives one permit back by its id, as Redisson's RPermitExpirableSemaphore.tryRelease: removes the
-- id from the holders' zset, adds one to the count and publishes the new count. Permit ids are
-- never reused, so a repeated release finds nothing and changes nothing.
--
-- KEYS[1] the count              ARGV[1] the permit id, 32 hex digits
-- KEYS[2] the holders' zset      ARGV[2] "publish", or "spublish" on a Redis Cluster
-- KEYS[3] the channel
--
-- Returns 1 released; 0 not a holder (never taken, released already, or reclaimed after its
--         lease); 2 released, but its lease had run out (not reclaimed yet: it was lost).
--         A key of another type fails with Redis's WRONGTYPE.
local id = string.gsub(ARGV[1], '%x%x', function(h) return string.char(tonumber(h, 16)) end)
local expiry = redis.call('zscore', KEYS[2], id)
if not expiry then
  return 0
end
redis.call('zrem', KEYS[2], id)
local value = redis.call('incrby', KEYS[1], 1)
redis.call(ARGV[2], KEYS[3], value)
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if tonumber(expiry) <= now then
  return 2
end
return 1
