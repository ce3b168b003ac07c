/**
 * Lua shared by every script over one group's state in one partition. Each
 * such script declares the same ten keys, all under the partition's hash tag
 * (keys.ts), so on Redis Cluster the whole step runs on one slot:
 *
 *   1 log   the partition's Redis Stream; entry id `<sequence>-0`, fields t (timestamp ms), z (size), d (event JSON)
 *   2 meta  hash: hw (high watermark), last (latest timestamp), mono (0 once timestamps went backwards), dlc (dead-letter counter),
 *           lw (low watermark, absent: 1), inc (the stream's incarnation, written by createStream),
 *           maxz (largest event size ever appended; absent on partitions made before it was kept)
 *   3 st    hash: cursor (highest sequence ever offered), leased (count)
 *   4 d     hash: sequence -> open delivery `state|attempt|leasedAt|visibleAt|leaseId|consumerId`
 *   5 o     zset: open sequences (score = sequence), for the frontier and the storage gauge
 *   6 t     zset: open deliveries not yet claimable, by the time they become claimable
 *   7 r     zset: claimable open deliveries, by sequence
 *   8 h     zset: settled sequences above the cursor, left by a replay (see memory/group-partition.ts)
 *   9 dl    hash: sequence -> dead letter `id|attempt|deadLetteredAt|reason` (reason `n` or `s<text>`)
 *  10 dlo   zset, all scores 0: `<id>:<sequence>`, ids fixed-width digits so lexical order is id order
 *
 * ARGV[1] is `now` in epoch ms, or '' to read the server's `TIME` (the
 * default time authority); ARGV[2] is the partition number.
 *
 * The model is the memory backend's (memory/group-partition.ts): a cursor
 * over the log plus open deliveries; acked deliveries are deleted, so a
 * group's keys hold its unsettled window and dead letters only.
 */
/**
 * Defines NOW, in epoch ms: ARGV[1] when the caller passes its clock (a
 * backend given a clock, as the conformance suite's ManualClock), else the
 * server's TIME, the one time authority. Every script that reads time starts with it.
 */
export const NOW_LUA = `local NOW
if ARGV[1] ~= '' then
  NOW = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

const GROUP_HEAD = `
local KLOG, KMETA, KST, KD, KO, KT, KR, KH, KDL, KDLO = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local function fmt(n) return string.format('%d', n) end
${NOW_LUA}
local PART = tonumber(ARGV[2])
`;

/**
 * The helpers, in an order where each uses only those before it. A script
 * gets only the ones it calls (groupPrelude): each one defined is a closure
 * the server builds on every run of the script, and after an idle spell
 * that is a cost of its own (measured: docs/performance.md).
 */
const HELPERS: ReadonlyArray<readonly [name: string, source: string]> = [
  [
    'high',
    `local function high() return tonumber(redis.call('HGET', KMETA, 'hw') or '0') end
`,
  ],
  [
    'max_size',
    `-- The largest event size ever appended here, -1 when unknown (lua/log-scripts.ts).
local function max_size() return tonumber(redis.call('HGET', KMETA, 'maxz') or '-1') end
`,
  ],
  [
    'low',
    `-- First retained sequence (a trim raises it; lua/retention-scripts.ts).
local function low() return tonumber(redis.call('HGET', KMETA, 'lw') or '1') end
`,
  ],
  [
    'cursor',
    `local function cursor()
  local c = redis.call('HGET', KST, 'cursor')
  if not c then return nil end
  return tonumber(c)
end
`,
  ],
  [
    'entry',
    `local function entry(s)
  local e = redis.call('XRANGE', KLOG, fmt(s) .. '-0', fmt(s) .. '-0')[1]
  if not e then return nil end
  return e[2]
end
`,
  ],
  [
    'dparse',
    `-- An open delivery from its stored form (nil stays nil).
local function dparse(v)
  if not v then return nil end
  local st, a, la, va, rest = string.match(v, '^(%a)|(%d+)|(%-?%d+)|(%-?%d+)|(.*)$')
  local lid, cid = string.match(rest, '^([^|]*)|(.*)$')
  return { s = st, a = tonumber(a), la = tonumber(la), va = tonumber(va), lid = lid, cid = cid }
end
`,
  ],
  [
    'dget',
    `local function dget(s) return dparse(redis.call('HGET', KD, fmt(s))) end
`,
  ],
  [
    'dput',
    `local function dput(s, d)
  redis.call('HSET', KD, fmt(s), d.s .. '|' .. fmt(d.a) .. '|' .. fmt(d.la) .. '|' .. fmt(d.va) .. '|' .. d.lid .. '|' .. d.cid)
end
`,
  ],
  [
    'advance',
    `-- Keeps cursor + 1 neither open nor held, as GroupPartition#advance does.
local function advance()
  local c = cursor()
  local c0 = c
  while redis.call('HEXISTS', KD, fmt(c + 1)) == 1 or redis.call('ZREM', KH, fmt(c + 1)) == 1 do c = c + 1 end
  if c ~= c0 then redis.call('HSET', KST, 'cursor', fmt(c)) end
  return c
end
`,
  ],
  [
    'promote',
    `-- Moves deliveries whose time has come from t to r.
local function promote()
  local due = redis.call('ZRANGEBYSCORE', KT, '-inf', fmt(NOW))
  for i = 1, #due do redis.call('ZADD', KR, due[i], due[i]) end
  if #due > 0 then redis.call('ZREMRANGEBYSCORE', KT, '-inf', fmt(NOW)) end
end
`,
  ],
  [
    'frontier',
    `local function frontier()
  local c = cursor()
  local m = redis.call('ZRANGE', KO, 0, 0)[1]
  if m and tonumber(m) - 1 < c then return tonumber(m) - 1 end
  return c
end
`,
  ],
  [
    'next_claimable',
    `-- The lowest claimable sequence and its open delivery (nil for a never-offered one).
local function next_claimable(h)
  local r = redis.call('ZRANGE', KR, 0, 0)[1]
  local c = advance()
  local nxt = nil
  if c + 1 <= h then nxt = c + 1 end
  if r and (nxt == nil or tonumber(r) < nxt) then return tonumber(r), dget(tonumber(r)) end
  return nxt, nil
end
`,
  ],
  [
    'open_entry',
    `local function open_entry(s)
  local d = { s = 'P', a = 0, la = 0, va = 0, lid = '', cid = '' }
  dput(s, d)
  redis.call('ZADD', KO, fmt(s), fmt(s))
  return d
end
`,
  ],
  [
    'take',
    `local function take(s, d)
  if d then
    redis.call('ZREM', KR, fmt(s))
    return d
  end
  redis.call('HSET', KST, 'cursor', fmt(s))
  d = open_entry(s)
  advance()
  return d
end
`,
  ],
  [
    'lease',
    `local function lease(s, d, lid, cid, expires)
  if d.s ~= 'L' then redis.call('HINCRBY', KST, 'leased', 1) end
  d.s, d.a, d.lid, d.cid, d.la, d.va = 'L', d.a + 1, lid, cid, NOW, expires
  dput(s, d)
  redis.call('ZREM', KR, fmt(s))
  redis.call('ZADD', KT, fmt(expires), fmt(s))
end
`,
  ],
  [
    'pending',
    `local function pending(s, d, visible)
  if d.s == 'L' then redis.call('HINCRBY', KST, 'leased', -1) end
  d.s, d.lid, d.cid, d.va = 'P', '', '', visible
  dput(s, d)
  redis.call('ZREM', KR, fmt(s))
  redis.call('ZADD', KT, fmt(visible), fmt(s))
end
`,
  ],
  [
    'close',
    `local function close(s, d)
  if d.s == 'L' then redis.call('HINCRBY', KST, 'leased', -1) end
  redis.call('HDEL', KD, fmt(s))
  redis.call('ZREM', KO, fmt(s))
  redis.call('ZREM', KT, fmt(s))
  redis.call('ZREM', KR, fmt(s))
end
`,
  ],
  [
    'dead',
    `-- Dead-letter ids: 42 digits, compared as strings: 15 of ms, 12 of the
-- caller's order (a per-process counter, so deaths in one millisecond keep
-- the order the calls made them in), 5 of partition and 10 of a counter
-- shared by every group of the partition (no two groups' ids are equal).
local function dead(s, attempt, reason, order)
  local n = redis.call('HINCRBY', KMETA, 'dlc', 1)
  local id = string.format('%015d%012d%05d%010d', NOW, tonumber(order), PART, n)
  redis.call('HSET', KDL, fmt(s), id .. '|' .. fmt(attempt) .. '|' .. fmt(NOW) .. '|' .. reason)
  redis.call('ZADD', KDLO, 0, id .. ':' .. fmt(s))
end
`,
  ],
  [
    'undead',
    `local function undead(s)
  local v = redis.call('HGET', KDL, fmt(s))
  if not v then return end
  redis.call('HDEL', KDL, fmt(s))
  redis.call('ZREM', KDLO, string.match(v, '^(%d+)|') .. ':' .. fmt(s))
end
`,
  ],
  [
    'reopen',
    `local function reopen(s)
  if redis.call('HEXISTS', KD, fmt(s)) == 1 then return end
  pending(s, open_entry(s), NOW)
end
`,
  ],
  [
    'is_settled',
    `local function is_settled(s)
  if redis.call('HEXISTS', KD, fmt(s)) == 1 then return false end
  return s <= cursor() or redis.call('ZSCORE', KH, fmt(s)) ~= false
end
`,
  ],
  [
    'ts_of',
    `local function ts_of(s) return tonumber(entry(s)[2]) end
`,
  ],
  [
    'first_at',
    `-- Lowest sequence with timestamp >= at, or nil: a binary search while the
-- partition's timestamps never went backwards, else a scan (as StreamLog does).
local function first_at(at)
  local h = high()
  if redis.call('HGET', KMETA, 'mono') ~= '0' then
    local lo, hi = low(), h + 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if ts_of(mid) < at then lo = mid + 1 else hi = mid end
    end
    if lo <= h then return lo end
    return nil
  end
  local from = '-'
  while true do
    local page = redis.call('XRANGE', KLOG, from, '+', 'COUNT', 1000)
    if #page == 0 then return nil end
    for i = 1, #page do
      if tonumber(page[i][2][2]) >= at then return tonumber(string.match(page[i][1], '^(%d+)')) end
    end
    from = '(' .. page[#page][1]
  end
end
`,
  ],
  [
    'start_cursor',
    `local function start_cursor(kind, value)
  if kind == 'at' then
    local f = first_at(tonumber(value))
    if f then return f - 1 end
    return high()
  end
  -- A start below the low watermark starts at it (docs/semantics.md, "Retention").
  return math.max(tonumber(value), low() - 1)
end
`,
  ],
  [
    'require_group',
    `local function require_group()
  if not cursor() then return redis.error_reply('RHEO_NOGROUP the group has no state in this partition') end
  return nil
end
`,
  ],
];

/** A call of `name` (not a longer name, nor a method or field of that name). */
const HELPER_CALLS = HELPERS.map(([name]) => new RegExp(`(?<![\\w.:])${name}\\(`));
const withoutComments = (lua: string): string => lua.replace(/--[^\n]*/g, '');
const HELPER_CODE = HELPERS.map(([, source]) => withoutComments(source));

/**
 * The prelude for a script whose own Lua is `body`: the keys, NOW and PART,
 * then every helper that `body` calls, or that a helper it gets calls.
 */
export function groupPrelude(body: string): string {
  const code = withoutComments(body);
  const needed = HELPERS.map(() => false);
  // Later helpers only call earlier ones: one pass from the end finds them all.
  for (let i = HELPERS.length - 1; i >= 0; i--) {
    const call = HELPER_CALLS[i]!;
    needed[i] = call.test(code) || HELPER_CODE.some((source, j) => j > i && needed[j] && call.test(source));
  }
  return GROUP_HEAD + HELPERS.filter((_, i) => needed[i]).map(([, source]) => source).join('');
}

