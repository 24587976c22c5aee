-- wrk script for scripts/bench-reports' "hot now" workload: POST /v1/events with batches of BATCH
-- impressions of one ad (AD), each in a session of its own that no feed served (so each is stored,
-- rejected ad_not_served: what matters is that it is stored), until TOTAL events went out across
-- all threads (each thread sends its share, then stops). Arguments (after `--`): AD TOTAL BATCH THREADS
-- [MARKERS: a folder where each thread that sent its share leaves a file done-N].
-- done() prints one line starting with HOTNOW: requests answered 200, and the others.

local ad, total, batch, threads_n, share, markers
local sent = 0
local thread_id = 0
local threads = {}

function setup(thread)
    thread_id = thread_id + 1
    thread:set("tid", thread_id)
    table.insert(threads, thread)
end

ok200, other = 0, 0

function init(args)
    ad = args[1] or "hot-000"
    total = tonumber(args[2] or "2000000")
    batch = tonumber(args[3] or "500")
    threads_n = tonumber(args[4] or "2")
    markers = args[5]
    batch_size = batch  -- a global, for done() (which runs in wrk's main script state, where init never ran)
    share = math.ceil(total / batch / threads_n)
    math.randomseed(os.time() * 1000 + (tid or 0) * 7919 + math.floor(os.clock() * 1e6))
    wrk.method = "POST"
    wrk.path = "/v1/events"
    wrk.headers["Content-Type"] = "application/json"
end

local random, format = math.random, string.format

local function uuid4()
    return format("%04x%04x-%04x-4%03x-%04x-%04x%04x%04x",
        random(0, 0xffff), random(0, 0xffff), random(0, 0xffff), random(0, 0xfff),
        0x8000 + random(0, 0x3fff), random(0, 0xffff), random(0, 0xffff), random(0, 0xffff))
end

function request()
    local now = os.date("!%Y-%m-%dT%H:%M:%SZ")
    local parts = {}
    for k = 1, batch do
        parts[k] = format('{"event_id":"%s","type":"impression","session_id":"hot-%d-%d","ad_id":"%s","occurred_at":"%s"}',
            uuid4(), tid or 0, random(1, 1000000000), ad, now)
    end
    return wrk.format(nil, nil, nil, '{"events":[' .. table.concat(parts, ",") .. ']}')
end

function response(status, headers, body)
    if status == 200 then ok200 = ok200 + 1 else other = other + 1 end
    sent = sent + 1
    if sent == share then
        -- wrk itself runs until its -d duration is over whatever its threads do: a marker file per
        -- finished thread (in MARKERS, the fifth argument) tells the bench to interrupt it.
        wrk.thread:stop()
        if markers then
            local f = io.open(format("%s/done-%d", markers, tid or 0), "w")
            if f then f:close() end
        end
    end
end

function done(summary, latency, requests)
    local ok, bad, per = 0, 0, 0
    for _, thread in ipairs(threads) do
        ok = ok + thread:get("ok200")
        bad = bad + thread:get("other")
        per = thread:get("batch_size") or per
    end
    io.write(format("HOTNOW ok=%d other=%d events=%d seconds=%.1f\n", ok, bad, ok * per, summary.duration / 1e6))
end
