import type { LuaScript } from './script.js';

/* The log's script: appends. */

/**
 * KEYS: log, meta, ids. ARGV[1]: pub/sub channel ('' for none); ARGV[2]: the
 * stream's incarnation ('' for a stream created before incarnations); then per
 * event: id, check ('1' when the caller gave the id), timestamp ms, size,
 * event JSON. Allocating the sequence (HINCRBY-free: hw is read, bumped and
 * written in the same script) and adding the entry are one step, so no crash
 * can leave a gap. The meta hash's `maxz`, written as 0 by createStream, keeps
 * the largest size ever appended to the partition (a fetch that cannot pass
 * its byte budget with events that large skips PEEK: leases.ts); a partition
 * without it (made before it existed) is left without it. Returns per event `{sequence, 0}` or, for an id already
 * stored in this partition, `{sequence, 1, t, z, d}`.
 */
export const APPEND: LuaScript = {
  name: 'append',
  keys: 3,
  source: `
local KLOG, KMETA, KIDS = KEYS[1], KEYS[2], KEYS[3]
local function fmt(n) return string.format('%d', n) end
-- A stream deleted since the caller looked it up has no incarnation here: write nothing.
if ARGV[2] ~= '' and redis.call('HGET', KMETA, 'inc') ~= ARGV[2] then return redis.error_reply('RHEO_NOSTREAM the stream was deleted') end
local h = tonumber(redis.call('HGET', KMETA, 'hw') or '0')
local last = redis.call('HGET', KMETA, 'last')
if last then last = tonumber(last) end
local mono = redis.call('HGET', KMETA, 'mono') ~= '0'
local maxz = redis.call('HGET', KMETA, 'maxz')
if maxz then maxz = tonumber(maxz) end
local grew = false
local out = {}
local added = 0
for i = 3, #ARGV, 5 do
  local id = ARGV[i]
  local existing = false
  if ARGV[i + 1] == '1' then existing = redis.call('HGET', KIDS, id) end
  if existing then
    local e = redis.call('XRANGE', KLOG, existing .. '-0', existing .. '-0')[1][2]
    out[#out + 1] = { existing, 1, e[2], e[4], e[6] }
  else
    h = h + 1
    local ts = tonumber(ARGV[i + 2])
    if last and ts < last then mono = false end
    last = ts
    local z = tonumber(ARGV[i + 3])
    if maxz and z > maxz then maxz, grew = z, true end
    redis.call('XADD', KLOG, fmt(h) .. '-0', 't', ARGV[i + 2], 'z', ARGV[i + 3], 'd', ARGV[i + 4])
    redis.call('HSET', KIDS, id, fmt(h))
    out[#out + 1] = { fmt(h), 0 }
    added = added + 1
  end
end
if added > 0 then
  local m = '1'
  if not mono then m = '0' end
  if grew then
    redis.call('HSET', KMETA, 'hw', fmt(h), 'last', fmt(last), 'mono', m, 'maxz', fmt(maxz))
  else
    redis.call('HSET', KMETA, 'hw', fmt(h), 'last', fmt(last), 'mono', m)
  end
  if ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], '') end
end
return out
`,
};
