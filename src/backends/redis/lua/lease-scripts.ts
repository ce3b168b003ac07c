import { groupScript } from './script.js';

/*
 * The leases' scripts: a group's start, and fetch (peek, claim), renew and
 * settle. Past ~400 lines on purpose: they are Lua over the same keys, and
 * the claim's writes are read best beside the settle that undoes them.
 */

/**
 * Sets a group's start in one partition unless it already has state there.
 * ARGV[3]: 'after' or 'at'; ARGV[4]: the sequence or the time in ms.
 */
export const INIT_GROUP = groupScript(
  'init-group',
  `
if cursor() then return 0 end
redis.call('HSET', KST, 'cursor', fmt(start_cursor(ARGV[3], ARGV[4])), 'leased', 0)
return 1
`,
);

/**
 * Fetch, first step: without claiming, the sizes of the partition's next
 * claimable deliveries in claim order (spent ones skipped), until `limit`
 * (ARGV[4]) of them or until their sizes pass `maxBytes` (ARGV[5]).
 * ARGV[3] is maxAttempts. Returns `{sizes, more, largest}`: largest is the
 * partition's largest event size ever appended (-1: unknown).
 */
export const PEEK = groupScript(
  'peek',
  `
local err = require_group() if err then return err end
local maxAttempts, limit, maxBytes = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
promote()
local h = high()
local c = advance()
local ready, ri = {}, 0
local function next_ready()
  ri = ri + 1
  if ri > #ready then
    local from = '-inf'
    if #ready > 0 then from = '(' .. ready[#ready] end
    ready = redis.call('ZRANGEBYSCORE', KR, from, '+inf', 'LIMIT', 0, 256)
    ri = 1
  end
  if ready[ri] then return tonumber(ready[ri]) end
  return nil
end
-- As in CLAIM: with nothing held and nothing open above the cursor, every
-- sequence above it is new, so the walk over them needs no lookups, and
-- their sizes come from one XRANGE per window instead of one per entry.
local top = redis.call('ZRANGE', KO, -1, -1)[1]
local simple = redis.call('ZCARD', KH) == 0 and (not top or tonumber(top) <= c)
local function next_new(from)
  if simple then
    if from <= h then return from end
    return nil
  end
  for s = from, h do
    if redis.call('HEXISTS', KD, fmt(s)) == 0 and redis.call('ZSCORE', KH, fmt(s)) == false then return s end
  end
  return nil
end
local sizes, bytes, more = {}, 0, 0
local window, windowEnd = {}, c
local function size_of(s, fromReady)
  if simple and not fromReady then
    if s > windowEnd then
      -- The next window of new entries, at most the sizes still wanted.
      window = {}
      local upto = math.min(h, s + (limit - #sizes) - 1)
      for _, row in ipairs(redis.call('XRANGE', KLOG, fmt(s) .. '-0', fmt(upto) .. '-0')) do
        window[tonumber(string.match(row[1], '^(%d+)'))] = tonumber(row[2][4])
      end
      windowEnd = upto
    end
    if window[s] then return window[s] end
  end
  return tonumber(entry(s)[4])
end
local nr, nn = next_ready(), next_new(c + 1)
while true do
  local s, fromReady
  if nr and (not nn or nr < nn) then s, fromReady = nr, true else s, fromReady = nn, false end
  if not s then break end
  if #sizes >= limit then more = 1 break end
  local usable = true
  if fromReady then
    if dget(s).a + 1 > maxAttempts then usable = false end
    nr = next_ready()
  else
    nn = next_new(s + 1)
  end
  if usable then
    local z = size_of(s, fromReady)
    sizes[#sizes + 1] = z
    bytes = bytes + z
    if bytes > maxBytes then more = 1 break end
  end
end
return { sizes, more, max_size() }
`,
);

/**
 * Fetch, second step: claims up to `n` (ARGV[4]) deliveries lowest sequence
 * first while their sizes stay within `cap` (ARGV[5]; the first claim always
 * when ARGV[6] is '1'), dead-letters the spent deliveries it passes on the
 * way, and with ARGV[7] = '1' takes one more turn that only dead-letters
 * spent deliveries (the round-robin walk reached this partition again and
 * found nothing to claim). ARGV[3] maxAttempts, ARGV[8] leaseMs,
 * ARGV[9] consumer id, ARGV[10] dead-letter order, ARGV[11] a fresh
 * unguessable token: the k-th claim's lease id is the token followed by k
 * (one argument instead of one per claim). ARGV[12], when not empty, is the
 * largest event size the caller's plan allows: a partition that ever held a
 * larger one (or does not know) claims nothing and answers 0 for the list.
 * Returns `{now, {sequence, attempt, t, d}..., largest, tail}`, largest as
 * PEEK's; tail is the high watermark when the claim stopped because nothing
 * else was claimable (it took everything claimable up to there), else -1:
 * where a blocking fetch waits for the next append (blocking-fetch.ts).
 */
export const CLAIM = groupScript(
  'claim',
  `
-- Every step of a claim is a command inside the script, each with a cost of
-- its own (on a spread stream, a partition's share of a fetch is a few dozen
-- events; after an idle spell, each costs several times more), so what
-- several helpers would read again is read once: the cursor and leased count
-- here, the high watermark and largest size in one HMGET.
local st = redis.call('HMGET', KST, 'cursor', 'leased')
if not st[1] then return require_group() end
local c0 = tonumber(st[1])
local maxAttempts, n, cap = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local force, extra, leaseMs, consumer = ARGV[6] == '1', ARGV[7] == '1', tonumber(ARGV[8]), ARGV[9]
local meta = redis.call('HMGET', KMETA, 'maxz', 'hw')
local largest = tonumber(meta[1] or '-1')
if ARGV[12] ~= '' and (largest < 0 or largest > tonumber(ARGV[12])) then return { fmt(NOW), 0, largest } end
-- Settled: no open delivery, timer, claimable retry or replay hold (Redis
-- deletes a sorted set when its last member goes). One EXISTS then stands
-- for the four reads below, and the claim takes only new sequences: the
-- claim of an idle consumer woken by an append.
local settled = redis.call('EXISTS', KO, KT, KR, KH) == 0
if not settled then promote() end
local h = tonumber(meta[2] or '0')
local out = {}
local claimed, bytes, leased = 0, 0, 0
local expires = NOW + leaseMs
-- Fast path for never-offered sequences: with nothing held and nothing open
-- above the cursor, the next new sequence is always cursor + 1, so the cursor
-- is kept here and written once; their log entries are read with one XRANGE
-- per window, and their delivery, open and timer rows are written with one
-- variadic HSET and two ZADDs per chunk after the loop (nothing in the loop
-- reads those rows of never-offered sequences). The lowest claimable retry
-- is re-read only after the loop took or dead-lettered it.
local top, simple = nil, true
if not settled then
  top = redis.call('ZRANGE', KO, -1, -1)[1]
  simple = redis.call('ZCARD', KH) == 0 and (not top or tonumber(top) <= c0)
end
-- In the fast path only this claim moves the cursor (retries it takes are
-- open already), so c0 stays the stored cursor until the end.
local c = c0
-- The current window of new entries (XRANGE's rows, in sequence order), the
-- next row to look at, and the last sequence the window covers.
local window, wi, windowEnd = {}, 1, c
local rows, opens, timers = {}, {}, {}
-- The lowest claimable retry, read again once taken (none when settled).
local r, rStale = nil, not settled
local fexpires = fmt(expires)
-- A new lease's stored form is rowHead, its number in this claim, rowTail
-- (state|attempt|leasedAt|visibleAt|leaseId|consumerId, the lease id being
-- the token followed by the number).
local rowHead = 'L|1|' .. fmt(NOW) .. '|' .. fexpires .. '|' .. ARGV[11]
local rowTail = '|' .. consumer
local exhausted = false
while true do
  local s, d
  if simple then
    if rStale then
      r = redis.call('ZRANGE', KR, 0, 0)[1]
      rStale = false
    end
    if r and tonumber(r) < c + 1 then
      s = tonumber(r)
      d = dget(s)
      rStale = true
    elseif c + 1 <= h then
      s = c + 1
    end
  else
    s, d = next_claimable(h)
  end
  if not s then
    exhausted = true
    break
  end
  if d and d.a + 1 > maxAttempts then
    if claimed < n or extra then
      close(s, d)
      dead(s, d.a, 'smax attempts exceeded', ARGV[10])
    else
      break
    end
  else
    if claimed >= n then break end
    local e, fs
    if simple and not d then
      if s > windowEnd then
        -- The next window of new entries, at most the claims still allowed.
        local upto = math.min(h, s + (n - claimed) - 1)
        window, wi = redis.call('XRANGE', KLOG, fmt(s) .. '-0', fmt(upto) .. '-0'), 1
        windowEnd = upto
      end
      -- New sequences come in order, so the window is walked once; an entry
      -- id is \`<sequence>-0\`, and its sequence part is the stored field name.
      while window[wi] do
        local id = string.sub(window[wi][1], 1, -3)
        local q = tonumber(id)
        if q >= s then
          if q == s then
            e, fs = window[wi][2], id
            wi = wi + 1
          end
          break
        end
        wi = wi + 1
      end
      e = e or entry(s)
    else
      e = entry(s)
    end
    local z = tonumber(e[4])
    if bytes + z > cap and not (force and claimed == 0) then break end
    bytes = bytes + z
    claimed = claimed + 1
    local attempt
    if d then
      d = take(s, d)
      lease(s, d, ARGV[11] .. claimed, consumer, expires)
      attempt = d.a
    elseif simple then
      c = s
      attempt = 1
      fs = fs or fmt(s)
      local k = #rows
      rows[k + 1], rows[k + 2] = fs, rowHead .. claimed .. rowTail
      opens[k + 1], opens[k + 2] = fs, fs
      timers[k + 1], timers[k + 2] = fexpires, fs
      leased = leased + 1
    else
      d = take(s, nil)
      lease(s, d, ARGV[11] .. claimed, consumer, expires)
      attempt = d.a
    end
    out[#out + 1] = { s, attempt, e[2], e[6] }
  end
end
-- Redis keeps a small sorted set or hash as one listpack, where every insert
-- and lookup walks the list (a sorted set's parsing each score it passes): for
-- the tens of open deliveries a partition holds on a spread stream, that cost
-- more than the rest of a claim (measured: docs/performance.md). One entry
-- longer than the listpack limit (64 bytes by default) turns the key into a
-- skiplist or hash table, and Redis never turns it back while the key lives:
-- widen() adds one to a key not yet converted (or not yet there), the rows
-- below go in, and unwiden() takes it out. A claim of fewer than 8 (an idle
-- consumer's, say) leaves the keys as they are: a list that short is cheap to
-- walk, and converting would cost it more than it saves. A key known to be
-- absent (the open set when \`top\` found nothing) is widened without asking
-- its encoding, and the delivery hash not at all when the rows themselves are
-- longer than the default limit: the HSET converts it before inserting them.
local WIDE = '~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~'
local function widen(key, hash, absent)
  if not absent then
    -- pcall: a server that refuses OBJECT (renamed or disabled) claims as before.
    local enc = redis.pcall('OBJECT', 'ENCODING', key)
    if type(enc) == 'table' or enc == 'skiplist' or enc == 'hashtable' then return false end
  end
  if hash then redis.call('HSET', key, WIDE, WIDE) else redis.call('ZADD', key, 0, WIDE) end
  return true
end
local function unwiden(key, hash, widened)
  if not widened then return end
  if hash then redis.call('HDEL', key, WIDE) else redis.call('ZREM', key, WIDE) end
end
local wideD, wideO, wideT = false, false, false
if #rows >= 2 * 8 then
  if #rows[2] <= 64 then wideD = widen(KD, true, false) end
  wideO, wideT = widen(KO, false, not top), widen(KT, false, false)
end
for i = 1, #rows, 2000 do
  local last = math.min(i + 1999, #rows)
  redis.call('HSET', KD, unpack(rows, i, last))
  redis.call('ZADD', KO, unpack(opens, i, last))
  redis.call('ZADD', KT, unpack(timers, i, last))
end
unwiden(KD, true, wideD)
unwiden(KO, false, wideO)
unwiden(KT, false, wideT)
if settled and leased > 0 then
  -- Nothing else in this claim changed the count (it took no retry): one write for both.
  redis.call('HSET', KST, 'cursor', fmt(c), 'leased', fmt(tonumber(st[2] or '0') + leased))
else
  if simple and c ~= c0 then redis.call('HSET', KST, 'cursor', fmt(c)) end
  if leased > 0 then redis.call('HINCRBY', KST, 'leased', leased) end
end
return { fmt(NOW), out, largest, exhausted and h or -1 }
`,
);

/** ARGV[3] leaseMs; then pairs of sequence, lease id. Returns `{now, {1|0...}}`: 0 is a stale lease. */
export const RENEW = groupScript(
  'renew',
  `
local leaseMs = tonumber(ARGV[3])
local out = {}
for i = 4, #ARGV, 2 do
  local s = tonumber(ARGV[i])
  local d = dget(s)
  if d and d.s == 'L' and d.lid == ARGV[i + 1] then
    d.va = NOW + leaseMs
    dput(s, d)
    redis.call('ZREM', KR, fmt(s))
    redis.call('ZADD', KT, fmt(d.va), fmt(s))
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return { fmt(NOW), out }
`,
);

/**
 * ARGV[3] maxAttempts, ARGV[4] the op layout; then per op, with layout `G`:
 * kind, sequence, lease id, reason (`n` or `s<text>`), delayMs, dead-letter
 * order; with layout `A` (every op an ack, the hot path): sequence, lease id
 * (a third of the arguments to encode and send). Each op is fenced by its
 * lease id; returns 1 (applied) or 0 (stale, nothing changed) per op.
 */
export const SETTLE = groupScript(
  'settle',
  `
local maxAttempts = tonumber(ARGV[3])
local allAcks = ARGV[4] == 'A'
-- Where each op's fields sit: its first argument, and the offsets of sequence and lease id.
local stride, seqAt, lidAt = 6, 1, 2
if allAcks then stride, seqAt, lidAt = 2, 0, 1 end
local out = {}
-- Acks are applied together after the loop (one HDEL and three ZREMs for the
-- batch); until then \`gone\` makes a repeated op in the batch see them settled.
-- Every op's delivery is read up front with HMGET (1000 per call), keyed by
-- its sequence as stored; an op that changed a delivery marks it \`touched\`,
-- and a later op on the same sequence reads it again.
local gone, acked, leasedAcked = {}, {}, 0
local pre, touched, fields = {}, {}, {}
for i = 5 + seqAt, #ARGV, stride do fields[#fields + 1] = fmt(tonumber(ARGV[i])) end
for i = 1, #fields, 1000 do
  local last = math.min(i + 999, #fields)
  local got = redis.call('HMGET', KD, unpack(fields, i, last))
  for k = 1, last - i + 1 do
    if got[k] then pre[fields[i + k - 1]] = got[k] end
  end
end
if allAcks then
  -- The hot path: an ack applies when its delivery is leased under its lease
  -- id, so only those two fields of the stored form are read (one match, no
  -- table: a full dparse was a quarter of this script's time).
  for j = 1, #fields do
    local f = fields[j]
    local v = pre[f]
    if v and not gone[f] and string.match(v, '^L|%d+|%-?%d+|%-?%d+|([^|]*)|') == ARGV[4 + 2 * j] then
      out[j] = 1
      gone[f] = true
      acked[#acked + 1] = f
    else
      out[j] = 0
    end
  end
  leasedAcked = #acked
else
  for i = 5, #ARGV, stride do
    local kind, s, lid = ARGV[i], tonumber(ARGV[i + seqAt]), ARGV[i + lidAt]
    local f = fmt(s)
    local d = nil
    if touched[f] then
      d = dget(s)
    elseif not gone[f] then
      d = dparse(pre[f])
    end
    if not d or d.s ~= 'L' or d.lid ~= lid then
      out[#out + 1] = 0
    else
      out[#out + 1] = 1
      if kind ~= 'ack' then touched[f] = true end
      if kind == 'ack' then
        gone[f] = true
        acked[#acked + 1] = f
        leasedAcked = leasedAcked + 1
      elseif kind == 'nack' then
        if d.a >= maxAttempts then
          close(s, d)
          dead(s, d.a, ARGV[i + 3], ARGV[i + 5])
        else
          pending(s, d, NOW + tonumber(ARGV[i + 4]))
        end
      elseif kind == 'reject' then
        close(s, d)
        dead(s, d.a, ARGV[i + 3], ARGV[i + 5])
      else
        d.a = d.a - 1
        pending(s, d, NOW)
      end
    end
  end
end
for i = 1, #acked, 1000 do
  local chunk = { unpack(acked, i, math.min(i + 999, #acked)) }
  redis.call('HDEL', KD, unpack(chunk))
  redis.call('ZREM', KO, unpack(chunk))
  redis.call('ZREM', KT, unpack(chunk))
  redis.call('ZREM', KR, unpack(chunk))
end
if leasedAcked > 0 then redis.call('HINCRBY', KST, 'leased', -leasedAcked) end
return out
`,
);
