/// The Lua scripts of Parley's Redis backends. Each touches the keys of one room (one hash
/// tag, so one slot in a Redis Cluster) or one cross-room key, runs atomically, and never
/// fails after its first write (a failed `XADD` is caught before anything is written), so a
/// script either happens whole or not at all.
///
/// Keys a script builds from its arguments (a node's member set) carry the room's hash tag
/// too: they are on the slot of the declared keys.
public enum RedisBackendScripts {
    /// Every script, for ``RedisConfiguration/scriptsToLoad``.
    public static let all: [RedisScript] = [append, trim, loadRoom, addMember, removeMember, reapMembers, listMembers, renewLease,
                                            expiredLeases, deleteMessage, readRange, readHistory, findMessage]

    /// Lua shared by the scripts that keep messages' state (``RoomKeys/state``).
    ///
    /// - `forget(state, entry)`: a stream entry retention drops takes its state and id along.
    /// - `tombstone(state, deleted, o)`: message `o` and its edits read as tombstones, its
    ///   state goes.
    /// - `current(stream, deleted, state, entry)`: `{entry id, record, deleted 0/1, latest
    ///   body, edit count, edit time, reactions}` of a message entry (`""` for no state).
    static let stateFunctions = """
        local function forget(state, entry)
          local o = string.match(entry[1], '^(%d+)')
          local fields = entry[2]
          for i = 1, #fields, 2 do
            if fields[i] == 'i' then redis.call('HDEL', state, 'i:' .. fields[i + 1]) end
          end
          redis.call('HDEL', state, 'b:' .. o, 't:' .. o, 'n:' .. o, 'e:' .. o, 'r:' .. o)
        end
        local function tombstone(state, deleted, o)
          redis.call('SADD', deleted, o)
          local edits = redis.call('HGET', state, 'e:' .. o)
          if edits then
            for e in string.gmatch(edits, '%d+') do redis.call('SADD', deleted, e) end
          end
          redis.call('HDEL', state, 'b:' .. o, 't:' .. o, 'n:' .. o, 'r:' .. o, 'e:' .. o)
        end
        local function isAction(entry)
          local fields = entry[2]
          for i = 1, #fields, 2 do if fields[i] == 'k' then return true end end
          return false
        end
        local function current(deleted, state, entry)
          local o = string.match(entry[1], '^(%d+)')
          local fields = entry[2]
          local record = ''
          for i = 1, #fields, 2 do if fields[i] == 'd' then record = fields[i + 1] end end
          if redis.call('SISMEMBER', deleted, o) == 1 then return {entry[1], record, 1, '', '', '', ''} end
          local values = redis.call('HMGET', state, 'b:' .. o, 'n:' .. o, 't:' .. o, 'r:' .. o)
          for i = 1, 4 do if not values[i] then values[i] = '' end end
          return {entry[1], record, 0, values[1], values[2], values[3], values[4]}
        end
        """

    /// A message of a room by id, in its current state.
    ///
    /// KEYS: stream, deleted offsets, state. ARGV: message id.
    /// Returns `{}` when the room has no such message, else `{item}` (as `current`).
    public static let findMessage = RedisScript(stateFunctions + "\n" + """
        local o = redis.call('HGET', KEYS[3], 'i:' .. ARGV[1])
        if not o then return {} end
        local found = redis.call('XRANGE', KEYS[1], o .. '-0', o .. '-0')
        if #found == 0 or isAction(found[1]) then return {} end
        return {current(KEYS[2], KEYS[3], found[1])}
        """)

    /// A page of history: the newest messages (actions walked over) up to an offset, each in
    /// its current state, at most `max bytes` of them.
    ///
    /// KEYS: stream, deleted offsets, state. ARGV: end (`+` or an offset, inclusive), most
    /// messages, max bytes (0: no limit; the first is always kept, each counts 96 plus its
    /// record and state bytes).
    /// Returns `{items newest first (as `current`), 1 when messages were left out for bytes}`.
    public static let readHistory = RedisScript(stateFunctions + "\n" + """
        local want = tonumber(ARGV[2])
        local budget = tonumber(ARGV[3])
        local out = {}
        local used = 0
        local cut = 0
        local cursor = ARGV[1]
        while #out < want do
          local entries = redis.call('XREVRANGE', KEYS[1], cursor, '-', 'COUNT', 100)
          if #entries == 0 then break end
          for _, entry in ipairs(entries) do
            if not isAction(entry) then
              local item = current(KEYS[2], KEYS[3], entry)
              local size = 96 + #item[2] + #item[4] + #item[7]
              if budget > 0 and #out > 0 and used + size > budget then
                cut = 1
                break
              end
              used = used + size
              out[#out + 1] = item
              if #out >= want then break end
            end
          end
          if cut == 1 or #entries < 100 then break end
          cursor = '(' .. entries[#entries][1]
        end
        return {out, cut}
        """)

    /// Marks a stored message deleted (it reads as a tombstone from then on).
    ///
    /// KEYS: stream, deleted offsets, state. ARGV: offset.
    /// Returns 1 when the room still holds a message at that offset (deleted before or
    /// now), 0 when it holds none (never stored, dropped by retention, or an action there).
    /// The message's edits become tombstones too.
    public static let deleteMessage = RedisScript(stateFunctions + "\n" + """
        local id = ARGV[1] .. '-0'
        local found = redis.call('XRANGE', KEYS[1], id, id)
        if #found == 0 or isAction(found[1]) then return 0 end
        tombstone(KEYS[3], KEYS[2], ARGV[1])
        return 1
        """)

    /// A range of the stream with the deleted offsets among it, at most `max bytes` of it.
    ///
    /// KEYS: stream, deleted offsets. ARGV: `XRANGE` or `XREVRANGE`, start, end, count, max
    /// bytes (0: no limit; the first entry is always kept, each counts 96 plus its fields'
    /// bytes).
    /// Returns `{entries, deleted offsets among them, 1 when entries were left out for bytes}`.
    public static let readRange = RedisScript("""
        local entries = redis.call(ARGV[1], KEYS[1], ARGV[2], ARGV[3], 'COUNT', ARGV[4])
        local budget = tonumber(ARGV[5] or '0')
        local cut = 0
        if budget > 0 then
            local used = 0
            for i, entry in ipairs(entries) do
                local size = 96
                local fields = entry[2]
                for j = 1, #fields do size = size + #fields[j] end
                if i > 1 and used + size > budget then
                    for k = #entries, i, -1 do entries[k] = nil end
                    cut = 1
                    break
                end
                used = used + size
            end
        end
        local deleted = {}
        if #entries > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
            for _, entry in ipairs(entries) do
                local offset = string.match(entry[1], '^(%d+)')
                if redis.call('SISMEMBER', KEYS[2], offset) == 1 then deleted[#deleted + 1] = offset end
            end
        end
        return {entries, deleted, cut}
        """)

    /// Appends a message to a room: the publish of ``RedisBroker`` and the `append` of
    /// ``RedisMessageStore``.
    ///
    /// KEYS: offset, stream, client ids, client id times, state, deleted offsets.
    /// ARGV: record, timestamp ms, client message id (`""`: none), message id, idempotency
    /// window ms, max messages kept (0: all), max age ms (0: forever), channel to publish on
    /// (`""`: none), expected offset (0: the next one; else the append must have exactly it),
    /// action kind (`""`: a message), target offset, emoji, reactor id, reactor name, the
    /// edit's body (JSON text), most client message ids a room keeps.
    ///
    /// A message's id is indexed (`i:ID`); an action is applied to its target's state in the
    /// same script, by the rule of `Message.applying` (edit: body, time and count; delete:
    /// tombstones for it and its edits; react/unreact: once per reactor and emoji), unless
    /// the target is gone, deleted, or an action. Entries retention drops take their state.
    ///
    /// Returns `{1, offset}` (stored), `{0, "offset timestamp id"}` (a retry of a known client
    /// message id: nothing written), `{-1, last offset}` (the expected offset does not follow),
    /// `{-2, reason}` (the stream cannot take the message).
    ///
    /// The idempotency entry is a hash field plus a sorted-set score (not one key per id with
    /// `PX`), so a room's recent client message ids can be listed (``RedisMessageStore``'s
    /// `loadRoom`/`recover`); expired ones are dropped a hundred at a time by each publish,
    /// past the most a room keeps the oldest go first (as many at a time), and both keys
    /// expire a window after the room's last publish with an id.
    public static let append = RedisScript(stateFunctions + "\n" + """
        local function apply(offset)
          local kind, t = ARGV[10], ARGV[11]
          local found = redis.call('XRANGE', KEYS[2], t .. '-0', t .. '-0')
          if #found == 0 or isAction(found[1]) then return end
          if redis.call('SISMEMBER', KEYS[6], t) == 1 then
            -- An edit that passed its checks before the delete was stored: a tombstone, as
            -- the edits the delete found were.
            if kind == 'edit' then redis.call('SADD', KEYS[6], offset) end
            return
          end
          local state = KEYS[5]
          if kind == 'edit' then
            redis.call('HSET', state, 'b:' .. t, ARGV[15], 't:' .. t, ARGV[2])
            redis.call('HINCRBY', state, 'n:' .. t, 1)
            local edits = redis.call('HGET', state, 'e:' .. t)
            if edits then edits = edits .. ' ' .. offset else edits = offset end
            redis.call('HSET', state, 'e:' .. t, edits)
          elseif kind == 'delete' then
            tombstone(state, KEYS[6], t)
          else
            local emoji, rid = ARGV[12], ARGV[13]
            local raw = redis.call('HGET', state, 'r:' .. t)
            local list = {}
            if raw then list = cjson.decode(raw) end
            local index = nil
            for i, reaction in ipairs(list) do if reaction[1] == emoji then index = i end end
            if kind == 'react' then
              if index == nil then
                table.insert(list, {emoji, {{rid, ARGV[14]}}})
              else
                for _, reactor in ipairs(list[index][2]) do if reactor[1] == rid then return end end
                table.insert(list[index][2], {rid, ARGV[14]})
              end
            else
              if index == nil then return end
              local at = nil
              for i, reactor in ipairs(list[index][2]) do if reactor[1] == rid then at = i end end
              if at == nil then return end
              table.remove(list[index][2], at)
              if #list[index][2] == 0 then table.remove(list, index) end
            end
            if #list == 0 then redis.call('HDEL', state, 'r:' .. t) else redis.call('HSET', state, 'r:' .. t, cjson.encode(list)) end
          end
        end
        local now = tonumber(ARGV[2])
        local cmid = ARGV[3]
        local window = tonumber(ARGV[5])
        local expected = tonumber(ARGV[9])
        if cmid ~= '' then
          local stale = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. string.format('%d', now - window), 'LIMIT', 0, 100)
          for _, id in ipairs(stale) do
            redis.call('HDEL', KEYS[3], id)
            redis.call('ZREM', KEYS[4], id)
          end
          if expected == 0 then
            local known = redis.call('HGET', KEYS[3], cmid)
            if known then
              local knownTime = tonumber(string.match(known, '^%d+ (%-?%d+) '))
              if knownTime and knownTime >= now - window then return {0, known} end
            end
          end
        end
        local last = tonumber(redis.call('GET', KEYS[1]) or '0')
        local offset = last + 1
        if expected > 0 and expected ~= offset then return {-1, last} end
        local kind = ARGV[10] or ''
        local tag, tagValue = 'i', ARGV[4]
        if kind ~= '' then tag, tagValue = 'k', kind end
        local added = redis.pcall('XADD', KEYS[2], string.format('%d', offset) .. '-0', 'd', ARGV[1], 't', ARGV[2], tag, tagValue)
        if type(added) == 'table' and added.err then
          local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
          if #top == 0 or expected > 0 then
            return {-2, 'the stream ' .. KEYS[2] .. ' is ahead of its offset counter: ' .. added.err}
          end
          offset = tonumber(string.match(top[1][1], '^(%d+)')) + 1
          redis.call('XADD', KEYS[2], string.format('%d', offset) .. '-0', 'd', ARGV[1], 't', ARGV[2], tag, tagValue)
        end
        redis.call('SET', KEYS[1], string.format('%d', offset))
        if kind == '' then
          redis.call('HSET', KEYS[5], 'i:' .. ARGV[4], string.format('%d', offset))
        else
          apply(string.format('%d', offset))
        end
        local maxCount = tonumber(ARGV[6])
        if maxCount > 0 then
          local length = redis.call('XLEN', KEYS[2])
          if length > maxCount then
            for _, entry in ipairs(redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', length - maxCount)) do forget(KEYS[5], entry) end
            redis.call('XTRIM', KEYS[2], 'MAXLEN', maxCount)
          end
        end
        local maxAge = tonumber(ARGV[7])
        if maxAge > 0 then
          local cutoff = now - maxAge
          local head = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 32)
          local keep = nil
          for _, entry in ipairs(head) do
            local fields = entry[2]
            local t = nil
            for i = 1, #fields, 2 do if fields[i] == 't' then t = tonumber(fields[i + 1]) end end
            if t == nil or t >= cutoff then keep = entry[1] break end
          end
          if keep == nil and #head > 0 then
            keep = string.format('%d', tonumber(string.match(head[#head][1], '^(%d+)')) + 1)
          end
          if keep ~= nil and #head > 0 and keep ~= head[1][1] then
            for _, entry in ipairs(head) do
              if entry[1] == keep then break end
              forget(KEYS[5], entry)
            end
            redis.call('XTRIM', KEYS[2], 'MINID', keep)
          end
        end
        if cmid ~= '' then
          -- Room for this one first (so the trim never takes the id just added).
          local extra = redis.call('ZCARD', KEYS[4]) + 1 - (tonumber(ARGV[16]) or 100000)
          if extra > 0 then
            local oldest = redis.call('ZPOPMIN', KEYS[4], math.min(extra, 100))
            for i = 1, #oldest, 2 do redis.call('HDEL', KEYS[3], oldest[i]) end
          end
          redis.call('HSET', KEYS[3], cmid, string.format('%d', offset) .. ' ' .. ARGV[2] .. ' ' .. ARGV[4])
          redis.call('ZADD', KEYS[4], now, cmid)
          redis.call('PEXPIRE', KEYS[3], window)
          redis.call('PEXPIRE', KEYS[4], window)
        end
        if ARGV[8] ~= '' then
          redis.call('SPUBLISH', ARGV[8], 'm' .. string.format('%d', offset) .. ' ' .. ARGV[1])
        end
        return {1, offset}
        """)

    /// Applies a room's retention: keeps at most a count, drops what is older than an age.
    ///
    /// KEYS: stream, state. ARGV: max messages (0: all), max age ms (0: forever), now (ms).
    /// Returns 1 when more old messages may remain (it scans at most 10,000 per call).
    /// Entries it drops take their state along.
    public static let trim = RedisScript(stateFunctions + "\n" + """
        local maxCount = tonumber(ARGV[1])
        local maxAge = tonumber(ARGV[2])
        if maxCount > 0 then
          local length = redis.call('XLEN', KEYS[1])
          if length > maxCount then
            local excess = length - maxCount
            while excess > 0 do
              local batch = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', math.min(excess, 1000))
              if #batch == 0 then break end
              for _, entry in ipairs(batch) do forget(KEYS[2], entry) end
              redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d', tonumber(string.match(batch[#batch][1], '^(%d+)')) + 1))
              excess = excess - #batch
            end
          end
        end
        if maxAge <= 0 then return 0 end
        local cutoff = tonumber(ARGV[3]) - maxAge
        local start = '-'
        local keep = nil
        local more = 1
        for page = 1, 100 do
          local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 100)
          if #entries == 0 then more = 0 break end
          local young = nil
          for _, entry in ipairs(entries) do
            local fields = entry[2]
            local t = nil
            for i = 1, #fields, 2 do if fields[i] == 't' then t = tonumber(fields[i + 1]) end end
            if t == nil or t >= cutoff then young = entry[1] break end
            forget(KEYS[2], entry)
          end
          if young ~= nil then keep = young more = 0 break end
          keep = string.format('%d', tonumber(string.match(entries[#entries][1], '^(%d+)')) + 1)
          start = keep
        end
        if keep ~= nil then redis.call('XTRIM', KEYS[1], 'MINID', keep) end
        return more
        """)

    /// A room's last offset and its client message ids from a time on.
    ///
    /// KEYS: offset, client ids, client id times. ARGV: since (ms), most ids.
    /// Returns `{last offset, id1, "offset timestamp id", id2, …}`.
    public static let loadRoom = RedisScript("""
        local out = {tonumber(redis.call('GET', KEYS[1]) or '0')}
        local ids = redis.call('ZRANGEBYSCORE', KEYS[3], ARGV[1], '+inf', 'LIMIT', 0, tonumber(ARGV[2]))
        for _, id in ipairs(ids) do
          local value = redis.call('HGET', KEYS[2], id)
          if value then
            table.insert(out, id)
            table.insert(out, value)
          end
        end
        return out
        """)

    /// Adds a member to a room (or refreshes it, keeping its place).
    ///
    /// KEYS: join sequence, member order, member data. ARGV: member id, node, member JSON,
    /// node member-set prefix, channel to announce a new member on (`""`: none).
    /// Returns `{1, members}` for a new member, `{0, members}` for a refresh.
    public static let addMember = RedisScript("""
        local record = ARGV[2] .. '\\n' .. ARGV[3]
        local old = redis.call('HGET', KEYS[3], ARGV[1])
        if old then
          redis.call('HSET', KEYS[3], ARGV[1], record)
          local oldNode = string.match(old, '^([^\\n]*)')
          if oldNode ~= ARGV[2] then
            redis.call('SREM', ARGV[4] .. oldNode, ARGV[1])
            redis.call('SADD', ARGV[4] .. ARGV[2], ARGV[1])
          end
          return {0, redis.call('ZCARD', KEYS[2])}
        end
        local sequence = redis.call('INCR', KEYS[1])
        redis.call('ZADD', KEYS[2], sequence, ARGV[1])
        redis.call('HSET', KEYS[3], ARGV[1], record)
        redis.call('SADD', ARGV[4] .. ARGV[2], ARGV[1])
        if ARGV[5] ~= '' then redis.call('SPUBLISH', ARGV[5], 'j ' .. ARGV[3]) end
        return {1, redis.call('ZCARD', KEYS[2])}
        """)

    /// Removes a member from a room.
    ///
    /// KEYS: member order, member data. ARGV: member id, node member-set prefix, channel to
    /// announce the leave on (`""`: none).
    /// Returns `{removed 1/0, members left, members left of its node, its node}`.
    public static let removeMember = RedisScript("""
        local old = redis.call('HGET', KEYS[2], ARGV[1])
        if not old then return {0, redis.call('ZCARD', KEYS[1]), 0, ''} end
        local node = string.match(old, '^([^\\n]*)')
        redis.call('HDEL', KEYS[2], ARGV[1])
        redis.call('ZREM', KEYS[1], ARGV[1])
        redis.call('SREM', ARGV[2] .. node, ARGV[1])
        if ARGV[3] ~= '' then redis.call('SPUBLISH', ARGV[3], 'l ' .. string.sub(old, #node + 2)) end
        return {1, redis.call('ZCARD', KEYS[1]), redis.call('SCARD', ARGV[2] .. node), node}
        """)

    /// Removes up to a batch of a (dead) node's members from a room and announces each leave.
    /// Two reapers at once remove and announce each member once.
    ///
    /// KEYS: member order, member data. ARGV: node, node member-set prefix, channel, batch.
    /// Returns `{removed, the node's members left, members left}`.
    public static let reapMembers = RedisScript("""
        local setKey = ARGV[2] .. ARGV[1]
        local ids = redis.call('SPOP', setKey, tonumber(ARGV[4]))
        local removed = 0
        for _, id in ipairs(ids) do
          local old = redis.call('HGET', KEYS[2], id)
          if old then
            local node = string.match(old, '^([^\\n]*)')
            if node == ARGV[1] then
              redis.call('HDEL', KEYS[2], id)
              redis.call('ZREM', KEYS[1], id)
              if ARGV[3] ~= '' then redis.call('SPUBLISH', ARGV[3], 'l ' .. string.sub(old, #node + 2)) end
              removed = removed + 1
            end
          end
        end
        return {removed, redis.call('SCARD', setKey), redis.call('ZCARD', KEYS[1])}
        """)

    /// A room's members in join order.
    ///
    /// KEYS: member order, member data. ARGV: most members.
    /// Returns `{total, member JSON…}`.
    public static let listMembers = RedisScript("""
        local out = {redis.call('ZCARD', KEYS[1])}
        local limit = tonumber(ARGV[1])
        if limit > 0 and out[1] > 0 then
          local ids = redis.call('ZRANGE', KEYS[1], 0, limit - 1)
          for _, id in ipairs(ids) do
            local record = redis.call('HGET', KEYS[2], id)
            if record then
              local node = string.match(record, '^([^\\n]*)')
              table.insert(out, string.sub(record, #node + 2))
            end
          end
        end
        return out
        """)

    /// Renews a node's lease, in Redis's time (so nodes' clocks need not agree).
    ///
    /// KEYS: nodes. ARGV: node, lease ms.
    /// Returns `{now ms, lapsed 1/0}`: lapsed when the lease was missing or had expired (a
    /// reaper may have removed the node's members).
    public static let renewLease = RedisScript("""
        local time = redis.call('TIME')
        local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        local previous = redis.call('ZSCORE', KEYS[1], ARGV[1])
        local lapsed = 0
        if not previous or tonumber(previous) < now then lapsed = 1 end
        redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
        return {now, lapsed}
        """)

    /// Nodes whose lease has expired, in Redis's time.
    ///
    /// KEYS: nodes. ARGV: most nodes.
    public static let expiredLeases = RedisScript("""
        local time = redis.call('TIME')
        local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', now), 'LIMIT', 0, tonumber(ARGV[1]))
        """)
}
