-- wrk script for scripts/bench_mcp.py: MCP tools/call requests in the 2026-07-28 shape.
--
--   wrk -t1 -c8 -d10s -s scripts/bench_mcp.lua http://127.0.0.1:PORT/mcp -- SCENARIO TOKEN IDFILE NONCE [QUERY]
--
-- Each call is one POST with Mcp-Method / Mcp-Name / MCP-Protocol-Version headers and the
-- protocol version in params._meta. SCENARIO is noop, get, save, update, search_tag,
-- search_query, query-<density> (QUERY: the word to search for) or mixed. IDFILE holds "id revision" lines: get reads the ids; update
-- owns them, one request in flight per entry, and tracks each revision from the
-- responses (the JSON-RPC id names the entry), so updates succeed instead of conflicting.
-- Every response that is not HTTP 200 with a successful result counts as an error.

local VERSION = "2026-07-28"
local META = '"_meta":{"io.modelcontextprotocol/protocolVersion":"' .. VERSION .. '",'
  .. '"io.modelcontextprotocol/clientInfo":{"name":"bench-wrk","version":"1"},'
  .. '"io.modelcontextprotocol/clientCapabilities":{}}'

local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  scenario, token, nonce, query = args[1], args[2], args[4] or "0", args[5]
  errors, counter = 0, 0
  ids, revisions, free = {}, {}, {}
  if args[3] and args[3] ~= "-" then
    for line in io.lines(args[3]) do
      local id, revision = line:match("^(%S+)%s+(%d+)")
      if id then
        table.insert(ids, id)
        revisions[#ids] = tonumber(revision)
        table.insert(free, #ids)
      end
    end
  end
  headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["Authorization"] = "Bearer " .. token,
    ["MCP-Protocol-Version"] = VERSION,
    ["Mcp-Method"] = "tools/call",
  }
  math.randomseed(os.time() + tid * 7919)
end

local function call(rpc_id, name, arguments)
  headers["Mcp-Name"] = name
  local body = '{"jsonrpc":"2.0","id":' .. rpc_id .. ',"method":"tools/call","params":{"name":"' .. name
    .. '","arguments":' .. arguments .. "," .. META .. "}}"
  return wrk.format("POST", wrk.path, headers, body)
end

local CONTENT = "Field note about the launch checklist and its rollback step, written by the bench."
-- BENCH_CONTENT_FILE (plain text needing no JSON escape) and BENCH_NOTE_BYTES: each note is instead a stretch
-- of that many bytes of the text, from a random place (scripts/bench_capacity.py: notes of the size
-- docs/capacity.md assumes, with the words of real prose).
local TEXT = nil
local NOTE_BYTES = tonumber(os.getenv("BENCH_NOTE_BYTES") or "0")
if os.getenv("BENCH_CONTENT_FILE") then
  local file = assert(io.open(os.getenv("BENCH_CONTENT_FILE"), "r"))
  TEXT = file:read("*a")
  file:close()
end

local function content()
  if TEXT == nil or NOTE_BYTES <= 0 then
    return CONTENT
  end
  local start = math.random(1, #TEXT - NOTE_BYTES + 1)
  return TEXT:sub(start, start + NOTE_BYTES - 1)
end

local builders = {
  noop = function()
    return call(0, "noop", "{}")
  end,
  get = function()
    counter = counter + 1
    return call(0, "field_notes_get", '{"id":"' .. ids[counter % #ids + 1] .. '"}')
  end,
  save = function()
    counter = counter + 1
    local request_id = "wrk-" .. nonce .. "-" .. tid .. "-" .. counter
    return call(0, "field_notes_save", '{"requestId":"' .. request_id .. '","entry":{"content":"' .. content()
      .. " #" .. counter .. '","tags":["t' .. counter % 10 .. '","bench"]}}')
  end,
  update = function()
    local index = table.remove(free)
    if index == nil then -- more connections than entries: never happens with the sizes bench_mcp.py uses
      return call(0, "field_notes_get", '{"id":"' .. ids[1] .. '"}')
    end
    return call(index, "field_notes_update", '{"id":"' .. ids[index] .. '","expectedRevision":' .. revisions[index]
      .. ',"entry":{"content":"' .. content() .. " r" .. revisions[index] + 1 .. '","tags":["t1"]}}')
  end,
  search_tag = function()
    return call(0, "field_notes_search", '{"tag":"t3","limit":20}')
  end,
  search_query = function()
    return call(0, "field_notes_search", '{"query":"rollback","limit":20}')
  end,
}

-- A query-<density> scenario: the first page of a search for a word held by that share of a codex.
local function search_density()
  return call(0, "field_notes_search", '{"query":"' .. query .. '","limit":20}')
end

local MIX = { "get", "get", "get", "get", "search_tag", "search_query", "save", "save", "update", "update" }

function request()
  local name = scenario
  if name == "mixed" then
    name = MIX[math.random(#MIX)]
  end
  if name:sub(1, 6) == "query-" then
    return search_density()
  end
  return builders[name]()
end

function response(status, _, body)
  if status ~= 200 or body:find('"isError":true', 1, true) or not body:find('"result":', 1, true) then
    errors = errors + 1
  end
  -- An update answer (success or conflict) names its entry in the JSON-RPC id.
  local index = tonumber(body:match('^{"jsonrpc":"2.0","id":(%d+)') or "0")
  if index > 0 and revisions[index] then
    local revision = body:match('"revision":(%d+)') or body:match("at revision (%d+)")
    if revision then
      revisions[index] = tonumber(revision)
    end
    table.insert(free, index)
  end
end

function done(summary, latency, _)
  local failed = 0
  for _, thread in ipairs(threads) do
    failed = failed + thread:get("errors")
  end
  local socket = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("BENCH requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d socket_errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), failed, socket))
end
