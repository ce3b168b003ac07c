import type { LuaScript } from './script.js';

/* The log's script: appends. */

/**
 * KEYS: log, meta, ids. ARGV[1]: pub/sub channel to PUBLISH on when the
 * script wrote an event ('' for none: on one server the backend publishes
 * after the scripts instead, log.ts); ARGV[2]: the
 * stream's incarnation ('' for a stream created before incarnations); then per
 * event: id, check ('1' when the caller gave the id), timestamp ms, size,
 * event JSON. Allocating the sequence (HINCRBY-free: hw is read, bumped and
 * written in the same script) and adding the entry are one step, so no crash
 * can leave a gap. The meta hash's `maxz`, written as 0 by createStream, keeps
 * the largest size ever appended to the partition (a fetch that cannot pass
 * its byte budget with events that large skips PEEK: leases.ts); a partition
 * without it (made before it existed) is left without it.
 *
 * Per event the script makes one call, the XADD: the id index is written with
 * one HSET per thousand events at the end, since every Redis call inside a
 * script costs about as much as the command itself (it is also what the AOF
 * records). A batch never repeats an id (log.ts sends each given id once), and
 * the ids it checks are looked up before any of its own are indexed.
 * Returns per event its sequence as an integer or, for an id already stored in
 * this partition, `{sequence, t, d}`.
 */
export const APPEND: LuaScript = {
  name: 'append',
  keys: 3,
  source: `
local KLOG, KMETA, KIDS = KEYS[1], KEYS[2], KEYS[3]
-- One read for the incarnation and the rest (each command inside a script costs about as much as the command itself).
local meta = redis.call('HMGET', KMETA, 'inc', 'hw', 'last', 'mono', 'maxz')
-- A stream deleted since the caller looked it up has no incarnation here: write nothing.
if ARGV[2] ~= '' and meta[1] ~= ARGV[2] then return redis.error_reply('RHEO_NOSTREAM the stream was deleted') end
local h = tonumber(meta[2] or '0')
local last = meta[3] and tonumber(meta[3])
local mono = meta[4] ~= '0'
local maxz = meta[5] and tonumber(meta[5])
local grew = false
local out = {}
local index = {}
for i = 3, #ARGV, 5 do
  local id = ARGV[i]
  local existing = false
  if ARGV[i + 1] == '1' then existing = redis.call('HGET', KIDS, id) end
  if existing then
    local e = redis.call('XRANGE', KLOG, existing .. '-0', existing .. '-0')[1][2]
    out[#out + 1] = { existing, e[2], e[6] }
  else
    h = h + 1
    local ts = tonumber(ARGV[i + 2])
    if last and ts < last then mono = false end
    last = ts
    local z = tonumber(ARGV[i + 3])
    if maxz and z > maxz then maxz, grew = z, true end
    local s = string.format('%d', h)
    redis.call('XADD', KLOG, s .. '-0', 't', ARGV[i + 2], 'z', ARGV[i + 3], 'd', ARGV[i + 4])
    index[#index + 1] = id
    index[#index + 1] = s
    out[#out + 1] = h
  end
end
if #index > 0 then
  for j = 1, #index, 2000 do
    redis.call('HSET', KIDS, unpack(index, j, math.min(j + 1999, #index)))
  end
  local m = '1'
  if not mono then m = '0' end
  local hs = string.format('%d', h)
  if grew then
    redis.call('HSET', KMETA, 'hw', hs, 'last', string.format('%d', last), 'mono', m, 'maxz', string.format('%d', maxz))
  else
    redis.call('HSET', KMETA, 'hw', hs, 'last', string.format('%d', last), 'mono', m)
  end
  if ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], '') end
end
return out
`,
};
