-- wrk script for scripts/bench-ingest: POST /v1/events with realistic events.
-- Arguments (after `--`): MODE (single|batch|session) SESSIONS ADS_PER_SESSION AD_POOL BATCH_SIZE PREFIX
-- single: one event per request; batch: BATCH_SIZE events per request, each of a random session;
-- session: BATCH_SIZE events per request, all of one random session (the shape a device's client
-- sends: its own session's events).
-- Sessions are PREFIX-<i> for i in 1..SESSIONS, registered beforehand with snapshot snap-PREFIX-<i>
-- holding ads ad-<(i + j*AD_POOL/ADS_PER_SESSION) % AD_POOL> at position j*5+3 (the same function as
-- the set-up in scripts/bench-ingest). 90% impressions (a fifth of them repeat the thread's previous
-- session/ad pair, i.e. duplicates), 10% clicks naming the snapshot and position.
-- Counts 200 answers and the accepted/duplicate/rejected totals from the bodies; non-200 statuses
-- are counted per code. done() prints one machine-readable line starting with BENCH.
-- Each request comes from one of 4,096 app installs behind a proxy: `X-Forwarded-For` names it
-- (10.0.x.y; in mode session, the session's own), and the server trusts 127.0.0.1 as the proxy
-- (ADTALLY_TRUSTED_PROXIES), so that its limits per client, on at their defaults, key on a fleet
-- of clients, none over its limit, as behind a real load balancer.

local mode, sessions, ads_per_session, ad_pool, batch_size, prefix
local last_session, last_ad = nil, nil

local threads = {}
local thread_id = 0

function setup(thread)
    thread_id = thread_id + 1
    thread:set("tid", thread_id)
    table.insert(threads, thread)
end

ok200, non200, accepted, duplicate, rejected = 0, 0, 0, 0, 0
statuses = ""  -- "code:count,code:count" of non-200 answers (only strings/numbers cross threads)
local status_counts = {}

function init(args)
    mode = args[1] or "single"
    sessions = tonumber(args[2] or "2000")
    ads_per_session = tonumber(args[3] or "5")
    ad_pool = tonumber(args[4] or "1000")
    batch_size = tonumber(args[5] or "50")
    prefix = args[6] or "s"
    math.randomseed(os.time() * 1000 + (tid or 0) * 7919 + math.floor(os.clock() * 1e6))
    wrk.method = "POST"
    wrk.path = "/v1/events"
    wrk.headers["Content-Type"] = "application/json"
    -- An app's agent, as real traffic has: the bot-agent filter reads every byte of it.
    wrk.headers["User-Agent"] = "FeedApp/3.14.1 (iPhone15,2; iOS 18.1.1; Scale/3.00) AdTallyClient/1.3 CFNetwork/1568.200.51 Darwin/24.1.0"
end

local random, format = math.random, string.format

local function uuid4()
    return format("%04x%04x-%04x-4%03x-%04x-%04x%04x%04x",
        random(0, 0xffff), random(0, 0xffff), random(0, 0xffff), random(0, 0xfff),
        0x8000 + random(0, 0x3fff), random(0, 0xffff), random(0, 0xffff), random(0, 0xffff))
end

-- One event; of session `fixed` when given (mode session), else of a random session.
local function event(now, fixed)
    local i, j
    local r = random()
    if r >= 0.9 then
        i, j = fixed or random(1, sessions), random(0, ads_per_session - 1)
        local session = prefix .. "-" .. i
        local k = (i + j * math.floor(ad_pool / ads_per_session)) % ad_pool
        return format('{"event_id":"%s","type":"click","session_id":"%s","ad_id":"ad-%d","occurred_at":"%s","snapshot_id":"snap-%s","position":%d}',
            uuid4(), session, k, now, session, j * 5 + 3)
    end
    if last_session ~= nil and r < 0.18 and (fixed == nil or fixed == last_session) then
        i, j = last_session, last_ad  -- the same impression again: a duplicate
    else
        i, j = fixed or random(1, sessions), random(0, ads_per_session - 1)
    end
    last_session, last_ad = i, j
    local session = prefix .. "-" .. i
    local k = (i + j * math.floor(ad_pool / ads_per_session)) % ad_pool
    if random() < 0.7 then
        return format('{"event_id":"%s","type":"impression","session_id":"%s","ad_id":"ad-%d","occurred_at":"%s","snapshot_id":"snap-%s","position":%d,"visible_fraction":0.8,"visible_ms":1200}',
            uuid4(), session, k, now, session, j * 5 + 3)
    end
    return format('{"event_id":"%s","type":"impression","session_id":"%s","ad_id":"ad-%d","occurred_at":"%s"}',
        uuid4(), session, k, now)
end

function request()
    local now = os.date("!%Y-%m-%dT%H:%M:%SZ")
    local body
    local client
    if mode == "batch" or mode == "session" then
        local fixed = (mode == "session") and random(1, sessions) or nil
        local events = {}
        for n = 1, batch_size do events[n] = event(now, fixed) end
        body = '{"events":[' .. table.concat(events, ",") .. ']}'
        client = fixed
    else
        body = event(now)
    end
    client = (client or random(0, 4095)) % 4096
    local headers = {["Content-Type"] = "application/json",
                     ["X-Forwarded-For"] = format("10.0.%d.%d", math.floor(client / 256), client % 256)}
    return wrk.format(nil, nil, headers, body)
end

function response(status, headers, body)
    if status == 200 then
        ok200 = ok200 + 1
        -- The counts lead the body: {"accepted": N, "duplicate": N, "rejected": N, ...}
        local a = body:match('"accepted"%s*:%s*(%d+)')
        local d = body:match('"duplicate"%s*:%s*(%d+)')
        local x = body:match('"rejected"%s*:%s*(%d+)')
        accepted = accepted + (tonumber(a) or 0)
        duplicate = duplicate + (tonumber(d) or 0)
        rejected = rejected + (tonumber(x) or 0)
    else
        non200 = non200 + 1
        status_counts[status] = (status_counts[status] or 0) + 1
        local parts = {}
        for code, count in pairs(status_counts) do parts[#parts + 1] = code .. ":" .. count end
        statuses = table.concat(parts, ",")
    end
end

function done(summary, latency, requests)
    local ok, bad, acc, dup, rej = 0, 0, 0, 0, 0
    local codes = {}
    for _, t in ipairs(threads) do
        ok = ok + t:get("ok200")
        bad = bad + t:get("non200")
        acc = acc + t:get("accepted")
        dup = dup + t:get("duplicate")
        rej = rej + t:get("rejected")
        local s = t:get("statuses")
        if s ~= nil and s ~= "" then codes[#codes + 1] = s end
    end
    local e = summary.errors
    io.write(format("BENCH requests=%d duration_us=%d ok200=%d non200=%d accepted=%d duplicate=%d rejected=%d p50_us=%d p99_us=%d max_us=%d sock_connect=%d sock_read=%d sock_write=%d sock_timeout=%d statuses=%s\n",
        summary.requests, summary.duration, ok, bad, acc, dup, rej,
        latency:percentile(50), latency:percentile(99), latency.max,
        e.connect, e.read, e.write, e.timeout, (#codes > 0) and table.concat(codes, ",") or "-"))
end
