package simbaredis

import "github.com/redis/go-redis/v9"

// Every backend operation is one of the scripts below, run atomically by
// Redis (EVALSHA, reloaded with EVAL after a NOSCRIPT). Times come from the
// server's TIME; the client's clock is never used.
//
// Keys (P is the key prefix, sid a session id):
//
//	P session:<sid>  hash, PX = the session lease: {opened, identity,
//	                 +<name> for the leases it owned while nodes waited}
//	P joined:<sid>   set of group names, expires with the session
//	P lease:<name>   hash {session, token, since, w}, never expires; w is
//	                 set while nodes wait for the lease (and counts them in)
//	P waiters:<name> sorted set of the ids of the nodes waiting for the
//	                 lease, first come first, never expires
//	P group:<group>  sorted set sid -> session expiry (ms, server time)
//	P permits:<name> hash {n, token} of semaphore name: the number of
//	                 permits its slots were last taken under and the
//	                 highest token of its slots; never expires, and Sweep
//	                 leaves it
//	P floor          string: the highest token of a lease hash Sweep removed
//	P released       pub/sub channel, payload = the name of a lease whose
//	                 owner closed, for every waiter
//	P released:<id>  pub/sub channel of one Backend, payload = the name of a
//	                 released lease it is first in line for
//
// Nothing but the lease hash records who owns a lease: the engine sends
// the leases it holds with each keep-alive, which checks a few of them
// (ADR 0007), so acquire and release write one key each. The session hash
// names, in fields that start with '+' (a character no lease name holds,
// so they never meet opened or identity), the leases it owned while nodes
// waited for them: those are the releases CloseSession announces. A field
// may outlive the term it was written for; it only ever causes one more
// announcement.
//
// Scripts that need keys they can only compute while running (the leases of
// a session, the session that owns a lease) build them from the prefix
// passed in ARGV. On Redis Cluster that is only valid when every key shares
// one hash slot, which is why New requires a hash tag in the prefix there.

// The Lua helpers below are put in front of the scripts that use them:
// each one costs its definition on every run, so a script takes only what
// it calls.
//
// luaTry: try runs a command and returns nil when the key holds another
// type than the command works on; other errors abort the script. must does
// the same but aborts with an error that names the key.
const luaTry = `
local function try(cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then
    if string.find(r.err, 'WRONGTYPE', 1, true) == 1 then return nil end
    error(r)
  end
  return r
end
local function must(kind, cmd, key, ...)
  local r = try(cmd, key, ...)
  if r == nil then error({err = 'WRONGTYPE key ' .. key .. ' holds a ' .. redis.call('TYPE', key)['ok'] .. ', not a ' .. kind}) end
  return r
end
`

// luaInt: int formats a number as an integer argument (Lua's own
// conversion may print large numbers in exponent form).
const luaInt = `
local function int(n) return string.format('%d', n) end
`

// luaNow: now is the server time in whole milliseconds.
const luaNow = `
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// luaMember (needs luaTry and luaInt): member renews sid's membership of
// group key m until exp, drops members whose session expiry has passed,
// keeps the key alive as long as its longest member and returns the member
// count (nil if m is not a sorted set).
const luaMember = `
local function member(m, sid, t, exp)
  if try('ZADD', m, int(exp), sid) == nil then return nil end
  redis.call('ZREMRANGEBYSCORE', m, '-inf', '(' .. int(t))
  local top = redis.call('ZRANGE', m, -1, -1, 'WITHSCORES')
  if #top == 0 then return 0 end
  redis.call('PEXPIREAT', m, int(tonumber(top[2])))
  return redis.call('ZCARD', m)
end
`

// openScript creates a session, with the identity of its client when one
// is given.
// KEYS: session. ARGV: lease ms[, 'identity', identity]: the fields it
// writes besides opened. Reply: remaining ms.
var openScript = redis.NewScript(luaInt + luaNow + `
local s = KEYS[1]
if redis.call('EXISTS', s) == 1 then return redis.error_reply('ERR session id already in use') end
redis.call('HSET', s, 'opened', int(now()), unpack(ARGV, 2))
redis.call('PEXPIRE', s, ARGV[1])
return redis.call('PTTL', s)
`)

// keepAliveScript renews a session, checks the leases the caller names
// against their hashes and counts the members of its groups.
// KEYS: session, joined, then the lease hashes of n held names, then those
// of the unsure names. ARGV: lease ms, prefix, sid, n, then the token of
// each held name.
// Reply: {-1} when the session is gone, else {remaining ms, {index of each
// held name the session does not own at its token}, {index, token of each
// unsure name it owns, ...}, {group, members, ...}, {key of the wrong
// type, ...}}, indexes counted from 1 in the order of KEYS after the first
// two.
//
// The work grows with the names sent and the groups joined, not with the
// leases the session owns. A lease or group key of the wrong type is
// skipped and reported rather than failing the whole renewal, so one
// damaged key cannot expire the session: a held lease whose key is
// damaged counts as lost.
var keepAliveScript = redis.NewScript(luaTry + luaInt + luaNow + luaMember + `
local s, j = KEYS[1], KEYS[2]
local ms, p, sid, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if not must('hash', 'HGET', s, 'opened') then return {-1} end
redis.call('PEXPIRE', s, ms)
local bad, lost, owned = {}, {}, {}
for i = 3, #KEYS do
  local cur = try('HMGET', KEYS[i], 'session', 'token')
  if cur == nil then bad[#bad + 1] = KEYS[i] end
  local mine = cur ~= nil and cur[1] == sid and cur[2]
  if i - 2 <= n then
    if not mine or cur[2] ~= ARGV[i + 2] then lost[#lost + 1] = i - 2 end
  elseif mine then
    owned[#owned + 1] = i - 2
    owned[#owned + 1] = cur[2]
  end
end
local groups = {}
local joined = must('set', 'SMEMBERS', j)
if #joined > 0 then
  local t = now()
  local exp = t + tonumber(ms)
  for _, g in ipairs(joined) do
    local m = p .. 'group:' .. g
    local c = member(m, sid, t, exp)
    if c == nil then
      bad[#bad + 1] = m
    else
      groups[#groups + 1] = g
      groups[#groups + 1] = c
    end
  end
  redis.call('PEXPIRE', j, ms)
end
return {redis.call('PTTL', s), lost, owned, groups, bad}
`)

// acquireScript starts a new term when the lease is free, owned by an
// expired session, or owned by the caller, and records when it began
// (since, server time in ms). The new token is the lease's token + 1, or
// for a name without a lease hash (never used, or removed by sweepScript)
// the floor + 1, the floor being the highest token ever removed; or the
// server's TIME in microseconds when that is greater, so that a Redis that
// lost the lease hash and the floor (a failover to a replica without them)
// still hands out a token above the earlier ones (ADR 0020). Tokens below
// 9 * 10^15 (TIME reaches it in the year 2255) are computed as Lua
// numbers, exact below 2^53; a counter above that goes on by HINCRBY, TIME
// far below. It reads the session hash and the lease hash and writes the
// lease hash only, and the session hash too when nodes wait for the lease
// (field w), so that closing the session announces it. Every piece of Lua
// counts here (ADR 0015): the commands are plain redis.call, so a key of
// the wrong type aborts the script with WRONGTYPE before anything is
// written (the caller then names the key); since is cut from TIME's reply
// as a string.
// KEYS: lease, session. ARGV: sid, prefix, name.
// Reply: -1 session gone, 0 held by another live session, else the token
// as a string (a Lua number would round tokens above 2^53).
var acquireScript = redis.NewScript(luaTakeRead + luaTakeToken + `return token`)

// The two halves of acquireScript, which permitScript runs with its own
// steps in between. luaTakeRead checks the caller's session, reads the
// lease, sets busy when another live session holds it and token to the
// base of the new token: the lease's, or the floor (read only for a lease
// without a token, so never for a held one). luaTakeToken returns 0 when
// busy, else takes the lease with the next token after the base.
const (
	luaTakeRead = `
local l, s, sid = KEYS[1], KEYS[2], ARGV[1]
if redis.call('HEXISTS', s, 'opened') == 0 then return -1 end
local cur = redis.call('HMGET', l, 'session', 'token', 'w')
local busy = cur[1] and cur[1] ~= sid and redis.call('EXISTS', ARGV[2] .. 'session:' .. cur[1]) == 1
local token = cur[2] or redis.call('GET', ARGV[2] .. 'floor') or '0'
`
	luaTakeToken = `
if busy then return 0 end
local t = redis.call('TIME')
local us = t[1] .. string.sub('00000' .. t[2], -6)
local since = string.sub(us, 1, -4)
if #token < 16 or (#token == 16 and token < '9000000000000000') then
  token = string.format('%d', math.max(tonumber(token) + 1, tonumber(us)))
  redis.call('HSET', l, 'session', sid, 'token', token, 'since', since)
else
  if token ~= cur[2] then redis.call('HSET', l, 'token', token) end
  redis.call('HINCRBY', l, 'token', 1)
  token = redis.call('HGET', l, 'token')
  redis.call('HSET', l, 'session', sid, 'since', since)
end
if cur[3] then redis.call('HSET', s, '+' .. ARGV[3], 1) end
`
)

// permitScript is acquireScript for the lease of a semaphore's slot, with
// the semaphore's record (P permits:<semaphore>, {n, token}) in the same
// atomic step. When the record names another number of permits than the
// caller's and a live session holds one of the slots 0 to n-1 it records
// (held as acquireScript decides it, the caller's own session included),
// it changes nothing and replies that number. Otherwise the slot's token
// is based on the greater of the lease's (or the floor) and the record's,
// so that it is above every token of the semaphore's slots, and the
// record keeps the caller's number and the new token. Tokens are compared
// as decimal strings, exact at any size.
// KEYS: lease, session, record. ARGV: sid, prefix, name, semaphore, permits.
// Reply: those of acquireScript, or the recorded number of permits (> 0)
// when it is not the caller's and one of its slots is held.
var permitScript = redis.NewScript(luaAbove + luaTakeRead + `
local rec = redis.call('HMGET', KEYS[3], 'n', 'token')
if rec[1] and rec[1] ~= ARGV[5] then
  for i = 0, tonumber(rec[1]) - 1 do
    local o = redis.call('HGET', ARGV[2] .. 'lease:' .. ARGV[4] .. ':' .. i, 'session')
    if o and redis.call('EXISTS', ARGV[2] .. 'session:' .. o) == 1 then return tonumber(rec[1]) end
  end
end
if rec[2] and above(rec[2], token) then token = rec[2] end
` + luaTakeToken + `
redis.call('HSET', KEYS[3], 'n', ARGV[5], 'token', token)
return token
`)

// luaAbove: above reports whether token a is greater than token b, both
// decimal strings without leading zeros, exact at any size.
const luaAbove = `
local function above(a, b) return #a > #b or (#a == #b and a > b) end
`

// holderScript reports who holds a lease: the session its hash names, if
// that session's key still exists (as in acquireScript, the owner's key is
// built from the prefix). It reads two hashes and writes nothing.
// KEYS: lease. ARGV: prefix.
// Reply: 0 when no live session owns the lease, else {sid, token, since,
// identity}, with an empty string for a since or an identity that was
// never written.
var holderScript = redis.NewScript(luaTry + `
local cur = must('hash', 'HMGET', KEYS[1], 'session', 'token', 'since')
if not cur[1] then return 0 end
local s = must('hash', 'HMGET', ARGV[1] .. 'session:' .. cur[1], 'opened', 'identity')
if not (s[1] or s[2]) then return 0 end
return {cur[1], cur[2] or '', cur[3] or '', s[2] or ''}
`)

// luaHandOn: handOn announces that lease l (name) was freed to the first
// node in its waiter queue q, on that node's own channel (ch:<id>), removes
// it from the queue, and clears the lease's field w once the queue is
// empty. Other waiters hear nothing: no thundering herd.
const luaHandOn = `
local function handOn(l, q, ch, name)
  local first = redis.call('ZPOPMIN', q)
  if redis.call('EXISTS', q) == 0 then redis.call('HDEL', l, 'w') end
  if #first > 0 then redis.call('PUBLISH', ch .. ':' .. first[1], name) end
end
`

// releaseScript frees a lease if the caller owns it with the given token.
// When nodes wait for the lease (field w, set by watchScript) it announces
// the release to the first of them and takes the lease out of the session
// hash; a lock nobody waits for costs no PUBLISH and touches only its own
// hash. As in acquireScript, a key of the wrong type aborts the script
// with WRONGTYPE before anything is written.
// KEYS: lease, session, waiter queue. ARGV: sid, token, channel, name.
// Reply: 1 released, 0 not owned with that token.
var releaseScript = redis.NewScript(luaHandOn + `
local l = KEYS[1]
local cur = redis.call('HMGET', l, 'session', 'token', 'w')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then return 0 end
redis.call('HDEL', l, 'session')
if cur[3] then
  redis.pcall('HDEL', KEYS[2], '+' .. ARGV[4])
  if type(redis.pcall('ZCARD', KEYS[3])) == 'number' then handOn(l, KEYS[3], ARGV[3], ARGV[4]) end
end
return 1
`)

// watchScript puts a node in the queue of nodes waiting for a lease
// (sorted set P waiters:<name>, member the node's id, scored in order of
// arrival by the lease's counter w), unless the lease is free now (no
// owner, or an owner whose session is gone), which it reports instead. A
// node already queued keeps its place. The owner's session hash gets the
// lease's field, so that closing the session announces it. A lease key of
// the wrong type counts as free: the caller's next acquire reports it.
// KEYS: lease, waiter queue. ARGV: prefix, node id, name.
// Reply: 1 queued, 0 free now.
var watchScript = redis.NewScript(luaTry + `
local cur = try('HGET', KEYS[1], 'session')
local s = cur and ARGV[1] .. 'session:' .. cur
if not s or redis.call('EXISTS', s) == 0 then return 0 end
if try('ZSCORE', KEYS[2], ARGV[2]) == nil then return 0 end
redis.call('ZADD', KEYS[2], 'NX', redis.call('HINCRBY', KEYS[1], 'w', 1), ARGV[2])
redis.pcall('HSET', s, '+' .. ARGV[3], 1)
return 1
`)

// passScript hands a release on to the next node in the lease's waiter
// queue, for a node that was told of the release but no longer waits.
// Nothing happens while a live session holds the lease: its release will.
// KEYS: lease, waiter queue. ARGV: prefix, channel, name.
// Reply: 1 handed on, 0 not.
var passScript = redis.NewScript(luaTry + luaHandOn + `
local cur = try('HGET', KEYS[1], 'session')
if cur == nil or try('ZCARD', KEYS[2]) == nil then return 0 end
if cur and redis.call('EXISTS', ARGV[1] .. 'session:' .. cur) == 1 then return 0 end
handOn(KEYS[1], KEYS[2], ARGV[2], ARGV[3])
return 1
`)

// joinScript adds the session to a group.
// KEYS: session, joined, group. ARGV: sid, group name.
// Reply: -1 session gone, else the live member count.
var joinScript = redis.NewScript(luaTry + luaInt + luaNow + luaMember + `
local s, j, m = KEYS[1], KEYS[2], KEYS[3]
if must('hash', 'HLEN', s) == 0 then return -1 end
must('sorted set', 'ZCARD', m)
must('set', 'SADD', j, ARGV[2])
local ttl = redis.call('PTTL', s)
redis.call('PEXPIRE', j, int(ttl))
local t = now()
return member(m, ARGV[1], t, t + ttl)
`)

// leaveScript removes the session from a group.
// KEYS: joined, group. ARGV: sid, group name. Reply: 1.
var leaveScript = redis.NewScript(luaTry + `
must('set', 'SCARD', KEYS[1])
must('sorted set', 'ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[1], ARGV[2])
return 1
`)

// luaFree (needs luaTry): free clears the owner of lease key l (of name)
// when it is sid, and announces it to every watcher when nodes wait for
// it.
const luaFree = `
local function free(l, ch, sid, name)
  local cur = try('HMGET', l, 'session', 'w')
  if cur and cur[1] == sid then
    redis.call('HDEL', l, 'session')
    if cur[2] then redis.call('PUBLISH', ch, name) end
  end
end
`

// closeScript ends a session: it leaves its groups and deletes its keys,
// which frees every lease it owns at once (a lease whose owner's session
// is gone is free), and clears and announces the first closeBatch of the
// leases its hash names (those nodes waited for). It returns the names of
// the others, which the caller clears with freeScript in batches, so that
// closing a session with 100,000 of them does not block Redis for long.
// Damaged lease or group keys are skipped.
// KEYS: session, joined. ARGV: sid, prefix, channel, batch size.
// Reply: the names of the leases left to clear.
var closeScript = redis.NewScript(luaTry + luaFree + `
local s, j = KEYS[1], KEYS[2]
local sid, p, ch, batch = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local fields = try('HKEYS', s) or {}
local joined = try('SMEMBERS', j) or {}
for _, g in ipairs(joined) do
  try('ZREM', p .. 'group:' .. g, sid)
end
redis.call('DEL', s, j)
local done, rest = 0, {}
for _, f in ipairs(fields) do
  if string.byte(f) == 43 then
    if done < batch then
      free(p .. 'lease:' .. string.sub(f, 2), ch, sid, string.sub(f, 2))
      done = done + 1
    else
      rest[#rest + 1] = string.sub(f, 2)
    end
  end
end
return rest
`)

// freeScript clears the owner of the leases of a closed session that
// closeScript left, and announces those that nodes wait for.
// KEYS: lease... ARGV: sid, channel, the name of each lease in order.
// Reply: 1.
var freeScript = redis.NewScript(luaTry + luaFree + `
for i = 1, #KEYS do free(KEYS[i], ARGV[2], ARGV[1], ARGV[i + 2]) end
return 1
`)

// sweepScript removes the lease hashes among KEYS[2..] that nobody holds
// (no owner, or an owner whose session is gone), nobody waits for (no
// waiter queue; a field w left by waiters that gave up does not count), and
// whose last term began at least idle ms ago, and raises the floor
// (KEYS[1]) to the highest token it removed, so that a name used again
// starts above every token it had. Hashes without since (written by a
// version of this package that did not record it) and keys of another type
// are left alone. Tokens are compared as decimal strings, exact at any size.
// KEYS: floor, lease... ARGV: prefix, idle ms. Reply: the number removed.
var sweepScript = redis.NewScript(luaTry + luaNow + luaAbove + `
local limit = now() - tonumber(ARGV[2])
local floor = redis.call('GET', KEYS[1]) or '0'
local top, removed = floor, 0
for i = 2, #KEYS do
  local h = try('HMGET', KEYS[i], 'session', 'token', 'since', 'w')
  if h and h[2] and h[3] and tonumber(h[3]) <= limit
     and (not h[1] or redis.call('EXISTS', ARGV[1] .. 'session:' .. h[1]) == 0)
     and not (h[4] and redis.call('EXISTS', ARGV[1] .. 'waiters:' .. string.sub(KEYS[i], #ARGV[1] + 7)) == 1) then
    if above(h[2], top) then top = h[2] end
    redis.call('DEL', KEYS[i])
    removed = removed + 1
  end
end
if top ~= floor then redis.call('SET', KEYS[1], top) end
return removed
`)
