-- Renews many permits in one call: for each holders' zset KEYS[i] in which the permit ARGV[i + 1]
-- (32 hex digits) is still held and its lease has not run out, sets its expiry to now + ARGV[1]
-- milliseconds (server TIME). ARGV[1] = "0" only checks the permits (explicit leases).
--
-- Returns one integer per key: 1 renewed (or held), 0 gone or expired (the permit is lost).
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lease = tonumber(ARGV[1])
local renewed = {}
for i, key in ipairs(KEYS) do
  local id = string.gsub(ARGV[i + 1], '%x%x', function(h) return string.char(tonumber(h, 16)) end)
  local expiry = redis.call('zscore', key, id)
  if expiry and tonumber(expiry) > now then
    if lease > 0 then
      redis.call('zadd', key, 'xx', now + lease, id)
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
