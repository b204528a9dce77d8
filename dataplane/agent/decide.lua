-- The gray decision of one generation, in Envoy (its HTTP Lua filter) and in nginx
-- (lua-nginx-module): one code for both, LuaJIT in both. The agent puts the generation's
-- data above this code (dataplane/agent/lua_data.py): the rules as routing_engine.portable
-- exports them from the structures GrayMatcher decides by, and per route (a flag, and its
-- lane under GRAY) the pools and the headers the Python gateway sends on
-- (dataplane.gateway.routing). Everything is looked up in tables built once per worker
-- (Envoy) or once in the master (nginx), so 100,000 users cost one CRC and one hash lookup,
-- and 10,000 CIDRs one binary search.
--
-- Header values are compared as the Python gateway compares them: its headers are read as
-- Latin-1 text and the rules' strings are Unicode, so a value's bytes are made the UTF-8 of
-- their Latin-1 reading before they are compared or hashed (nothing changes for ASCII).
--
-- Per request it uses string.byte, string.sub, string.find (plain) and string.lower only:
-- LuaJIT compiles those, not string.match, gmatch or gsub (each call leaves the compiled
-- trace for the interpreter).
local bit = require("bit")
local ffi = require("ffi")
local band, bxor, rshift = bit.band, bit.bxor, bit.rshift
local byte, sub, find, lower, char = string.byte, string.sub, string.find, string.lower, string.char
local concat = table.concat
-- The engine's access to a request's headers (below): get(h, name) its last value,
-- all(h, name, separator) its values joined, set, remove, geo_city(h, ip) GeoIP's city.
local IO

local CRC = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) == 1 then c = bxor(rshift(c, 1), 0xEDB88320) else c = rshift(c, 1) end
  end
  CRC[i] = c
end

-- zlib.crc32(s, seed): the CRC-32 of s (of its bytes first..last if given) continued from
-- seed (0 for none), unsigned.
local function crc32(s, seed, first, last)
  local c = bxor(seed, 0xFFFFFFFF)
  for i = first or 1, last or #s do
    c = bxor(CRC[band(bxor(c, byte(s, i)), 0xFF)], rshift(c, 8))
  end
  c = bxor(c, 0xFFFFFFFF)
  if c < 0 then c = c + 4294967296 end
  return c
end

-- The UTF-8 of a value's Latin-1 reading (bytes 0x80-0xFF become two bytes).
local function utf8_of_latin1(text)
  local wide = false
  for i = 1, #text do
    if byte(text, i) >= 128 then wide = true break end
  end
  if not wide then return text end
  local out = {}
  for i = 1, #text do
    local b = byte(text, i)
    if b < 128 then out[i] = char(b) else out[i] = char(0xC0 + rshift(b, 6), 0x80 + band(b, 0x3F)) end
  end
  return concat(out)
end

-- Comma-separated lists into arrays (at start, not per request).
local function numbers(text, base)
  local out = {}
  for item in text:gmatch("([^,]+),") do out[#out + 1] = tonumber(item, base) end
  return out
end

local function strings(text)
  local out = {}
  for item in text:gmatch("([^,]+),") do out[#out + 1] = item end
  return out
end

-- Ranges "first-last,..." (hex; IPv4 as numbers, IPv6 as 32-digit strings, which sort
-- like the numbers) into sorted arrays searched by bisection.
local function ranges(text, numeric)
  local firsts, lasts = {}, {}
  for first, last in text:gmatch("(%x+)-(%x+),") do
    if numeric then first, last = tonumber(first, 16), tonumber(last, 16) end
    firsts[#firsts + 1], lasts[#lasts + 1] = first, last
  end
  return {firsts, lasts}
end

local function covered(set, key)
  local firsts, lasts = set[1], set[2]
  local lo, hi = 1, #firsts
  while lo <= hi do
    local mid = rshift(lo + hi, 1)
    if firsts[mid] <= key then lo = mid + 1 else hi = mid - 1 end
  end
  return hi >= 1 and key <= lasts[hi]
end

-- bisect_right(bounds, key): how many bounds are at most key.
local function bisect_right(bounds, key)
  local lo, hi = 1, #bounds
  while lo <= hi do
    local mid = rshift(lo + hi, 1)
    if bounds[mid] <= key then lo = mid + 1 else hi = mid - 1 end
  end
  return hi
end

local function is_digit(b) return b ~= nil and b >= 48 and b <= 57 end
-- Python's str.strip() of ASCII: space, \t \n \v \f \r and \x1c-\x1f.
local function is_space(b) return b == 32 or (b >= 9 and b <= 13) or (b >= 28 and b <= 31) end

-- "a.b.c.d" as ipaddress reads it (decimal parts of 1-3 digits, no leading zero, <= 255),
-- as a number.
local function v4_number(ip)
  local number, part, dots, digits, first = 0, 0, 0, 0, 0
  for i = 1, #ip do
    local b = byte(ip, i)
    if b == 46 then
      if digits == 0 or dots == 3 then return nil end
      number, part, dots, digits = number * 256 + part, 0, dots + 1, 0
    elseif is_digit(b) then
      if digits == 0 then first = b elseif first == 48 or digits == 3 then return nil end
      part, digits = part * 10 + b - 48, digits + 1
      if part > 255 then return nil end
    else
      return nil
    end
  end
  if dots ~= 3 or digits == 0 then return nil end
  return number * 256 + part
end

-- An IPv6 address as 32 hex digits, or (nil, IPv4 number) for ::ffff:a.b.c.d.
local function v6_hex(ip)
  local groups = {}
  local dotted = ip:match(":(%d+%.%d+%.%d+%.%d+)$")
  if dotted then
    local v4 = v4_number(dotted)
    if not v4 then return nil end
    ip = ip:sub(1, #ip - #dotted) .. string.format("%x:%x", math.floor(v4 / 65536), v4 % 65536)
  end
  local head, tail = ip:match("^(.-)::(.*)$")
  local function split(part, out)
    if part == "" then return true end
    for group in (part .. ":"):gmatch("([^:]*):") do
      if not group:match("^%x%x?%x?%x?$") then return false end
      out[#out + 1] = string.rep("0", 4 - #group) .. group:lower()
    end
    return true
  end
  if head then
    local left, right = {}, {}
    if not (split(head, left) and split(tail, right)) or #left + #right > 7 then return nil end
    for _ = 1, 8 - #left - #right do left[#left + 1] = "0000" end
    for _, group in ipairs(right) do left[#left + 1] = group end
    groups = left
  elseif not split(ip, groups) or #groups ~= 8 then
    return nil
  end
  local hex = concat(groups)
  if hex:sub(1, 24) == "00000000000000000000ffff" then
    return nil, tonumber(hex:sub(25), 16)
  end
  return hex
end

-- An address (text) as its IPv4 number (IPv4-mapped IPv6 too), or as (nil, IPv6 hex);
-- nil, nil for text that is no address. Parsed once, looked up in several range sets.
local function address_key(ip)
  local number = v4_number(ip)
  if number then return number end
  local hex, mapped = v6_hex(ip)
  if mapped then return mapped end
  return nil, hex
end

local function in_networks(set, number, hex)
  if number then return covered(set.v4, number) end
  return hex ~= nil and covered(set.v6, hex)
end

local function networks(text) return {v4 = ranges(text.v4, true), v6 = ranges(text.v6, false)} end
local TRUSTED_NETS, LOCAL_NETS = networks(TRUSTED), networks(LOCAL)
local HAS_TRUSTED = #TRUSTED_NETS.v4[1] + #TRUSTED_NETS.v6[1] > 0

local function strip(text)
  local first, last = 1, #text
  while first <= last and is_space(byte(text, first)) do first = first + 1 end
  while last >= first and is_space(byte(text, last)) do last = last - 1 end
  return sub(text, first, last)
end

-- The pieces of a comma-separated list, empty ones too (Python's split(",")).
local function split_commas(text)
  local found, start = {}, 1
  while true do
    local comma = find(text, ",", start, true)
    if not comma then found[#found + 1] = sub(text, start) return found end
    found[#found + 1] = sub(text, start, comma - 1)
    start = comma + 1
  end
end

-- routing_engine.CallerResolver.client_ip, of a trusted peer: the nearest X-Forwarded-For
-- hop that is not a trusted proxy (the peer itself for a garbled chain).
local function client_ip(peer, forwarded)
  if not forwarded or forwarded == "" then return peer end
  local hops = split_commas(forwarded)
  for i = #hops, 1, -1 do
    hops[i] = strip(hops[i])
    local number, hex = address_key(hops[i])
    if not (number or hex) then return peer end
    if not in_networks(TRUSTED_NETS, number, hex) then return hops[i] end
  end
  return hops[1]
end

-- The address in the form a GeoIP lookup takes (IPv4-mapped IPv6 as IPv4), and its key.
local function lookup_form(ip)
  local number, hex = address_key(ip)
  if number and find(ip, ":", 1, true) then
    ip = string.format("%d.%d.%d.%d", rshift(number, 24) % 256, rshift(number, 16) % 256,
      rshift(number, 8) % 256, number % 256)
  end
  return ip, number, hex
end

-- "host:port" or "[v6]:port" without the port (as is without one).
local function peer_of(address)
  local colon = #address
  while colon > 0 and is_digit(byte(address, colon)) do colon = colon - 1 end
  if colon == #address or colon == 0 or byte(address, colon) ~= 58 then return address end
  if byte(address, 1) == 91 and colon > 2 and byte(address, colon - 1) == 93 then
    return sub(address, 2, colon - 2)
  end
  return sub(address, 1, colon - 1)
end

-- Envoy's X-Forwarded-For, to which a header mutation appended the peer (joined with "," to
-- a chain the client sent): the client's chain (nil for none) and the peer.
local function chain_and_peer(value)
  for i = #value, 1, -1 do
    if byte(value, i) == 44 then return sub(value, 1, i - 1), sub(value, i + 1) end
  end
  return nil, value
end

-- The first segment of the path ("/<service>/..."), nil for none.
local function service_of(path)
  if byte(path, 1) ~= 47 then return nil end
  local last = 1
  while true do
    local b = byte(path, last + 1)
    if b == nil or b == 47 or b == 63 or b == 35 then break end
    last = last + 1
  end
  return last > 1 and sub(path, 2, last) or nil
end

-- A W3C baggage value without the members whose key names a gray flag
-- (dataplane.gateway.headers.strip_gray_baggage).
local function strip_gray_baggage(value)
  local kept = {}
  for _, member in ipairs(split_commas(value)) do
    local key = sub(member, 1, (find(member, "=", 1, true) or #member + 1) - 1)
    if strip(member) ~= "" and not find(lower(strip(key)), "gray", 1, true) then
      kept[#kept + 1] = member
    end
  end
  return concat(kept, ",")
end

if STAGE == "caller" then
  -- Envoy with --geoip: the first Lua filter names the client for its geoip filter (which
  -- reads CLIENT_HEADER), so a city is looked up for the client behind trusted proxies, as
  -- the Python gateway looks it up. The decision runs in the second one.
  function envoy_on_request(handle)
    local headers = handle:headers()
    headers:remove(CLIENT_HEADER)
    local peer = peer_of(handle:streamInfo():downstreamDirectRemoteAddress())
    local number, hex = address_key(peer)
    local ip = peer
    if HAS_TRUSTED and in_networks(TRUSTED_NETS, number, hex) then
      local chain = {}
      for i = 0, headers:getNumValues("x-forwarded-for") - 1 do
        chain[#chain + 1] = headers:getAtIndex("x-forwarded-for", i)
      end
      ip = client_ip(peer, #chain > 0 and concat(chain, ", ") or nil)
    end
    local form, lookup_number, lookup_hex = lookup_form(ip)
    -- Loopback and private addresses are `local` without a lookup.
    if not in_networks(LOCAL_NETS, lookup_number, lookup_hex) then
      headers:replace(CLIENT_HEADER, form)
    end
  end
  return
end

-- Lane sets: SETS[id] is an array of lanes' places (0: the lane tried first).
local SETS = {}
for id, text in ipairs(SET_TEXT) do SETS[id] = numbers(text, 10) end

local V4_BOUNDS, V4_SETS = numbers(IPS.v4, 16), numbers(IPS.v4sets, 10)
local V6_BOUNDS, V6_SETS = strings(IPS.v6), numbers(IPS.v6sets, 10)
local HAS_IPS = #V4_BOUNDS + #V6_BOUNDS > 0
local HAS_CITIES = next(CITIES) ~= nil

-- A lane's rank of each bucket (routing_engine.lanes.lane_rank), for lanes with a percent
-- other than the gray lane (whose rank is the bucket itself).
local RANK = {}
for place, text in pairs(RANK_TEXT) do
  local rank, i = ffi.new("uint16_t[10000]"), 0
  for value in text:gmatch("(%d+),") do rank[i], i = tonumber(value), i + 1 end
  RANK[place] = rank
end

local function taken(place, bucket, threshold)
  local rank = RANK[place]
  if rank then bucket = rank[bucket] end
  return bucket < threshold
end

-- Percents ({place, threshold} each) as lookups made once: `always`, the places whose
-- percent is whole (taken with or without a user), and by_bucket[bucket], the places whose
-- percent takes that bucket (nil for none). A request looks its bucket up once: Envoy runs
-- most of the decision in LuaJIT's interpreter (a call into Envoy ends a trace), where
-- indexing a lane's rank (an FFI array) for each lane cost more than the rest of the
-- decision.
local function percent_places(entries)
  local always, by_bucket, shared = {}, {}, {}
  for i = 1, #entries do
    if entries[i][2] >= 10000 then always[#always + 1] = entries[i][1] end
  end
  if #always == #entries then return {always = always, by_bucket = by_bucket} end
  for bucket = 0, 9999 do
    local places
    for i = 1, #entries do
      local place, threshold = entries[i][1], entries[i][2]
      if threshold < 10000 and taken(place, bucket, threshold) then
        places = places or {}
        places[#places + 1] = place
      end
    end
    if places then
      local key = concat(places, ",")
      shared[key] = shared[key] or places
      by_bucket[bucket] = shared[key]
    end
  end
  return {always = always, by_bucket = by_bucket}
end
local LANE_PERCENTS = percent_places(PERCENTS)
for _, own in pairs(SERVICE_RULES) do
  own.own = #own.own > 0 and percent_places(own.own) or nil
end

-- The users' places in USER_TEXT (start * 65536 + length: an entry has at most 256
-- characters, 1,024 bytes) and their lane sets, in an open-addressing table keyed by their
-- CRC-32, in FFI arrays. 100,000 strings of their own (a Lua table of the users) were as
-- many objects for the garbage collector to mark and sweep in each cycle, and a Lua table of
-- numbers is still traversed: either cost Envoy more per request than the rest of the
-- decision.
local USER_COUNT = select(2, USER_LENGTHS:gsub(",", ""))
local USER_MASK = 1
while USER_MASK < 2 * USER_COUNT do USER_MASK = USER_MASK * 2 end
USER_MASK = USER_MASK - 1
local SLOT_CRC = ffi.new("uint32_t[?]", USER_MASK + 1)
local SLOT_PLACE = ffi.new("double[?]", USER_MASK + 1)  -- 0: an empty slot
local SLOT_SET = ffi.new("int32_t[?]", USER_MASK + 1)
do
  local start, sets = 1, numbers(USER_SETS, 10)
  local n = 0
  for length in USER_LENGTHS:gmatch("(%d+),") do
    length, n = tonumber(length), n + 1
    local key = crc32(USER_TEXT, 0, start, start + length - 1)
    local slot = band(key, USER_MASK)
    while SLOT_PLACE[slot] ~= 0 do slot = band(slot + 1, USER_MASK) end
    SLOT_CRC[slot], SLOT_PLACE[slot], SLOT_SET[slot] = key, start * 65536 + length, sets[n]
    start = start + length
  end
end
local HAS_USERS = USER_COUNT > 0

local function at_place(user, place)
  local start = math.floor(place / 65536)
  if place - start * 65536 ~= #user then return false end
  for i = 1, #user do
    if byte(user, i) ~= byte(USER_TEXT, start + i - 1) then return false end
  end
  return true
end

-- The lane set of a listed user (`key`: its CRC-32), nil for another; users that share a
-- CRC sit in slots one after another: each is compared.
local function user_set(user, key)
  local slot = band(key, USER_MASK)
  while true do
    local place = SLOT_PLACE[slot]
    if place == 0 then return nil end
    if SLOT_CRC[slot] == key and at_place(user, place) then return SLOT_SET[slot] end
    slot = band(slot + 1, USER_MASK)
  end
end

-- A city as the engine compares it, from UTF-8: str.strip() then str.casefold(), one
-- character at a time (FOLD and SPACE hold the characters either changes beyond ASCII).
local function utf8_chars(text)
  local chars, i = {}, 1
  while i <= #text do
    local b = byte(text, i)
    local n = b < 0x80 and 1 or b < 0xE0 and 2 or b < 0xF0 and 3 or 4
    chars[#chars + 1] = sub(text, i, i + n - 1)
    i = i + n
  end
  return chars
end

local function is_space_char(c) return (#c == 1 and is_space(byte(c))) or SPACE[c] == true end

local function fold_city(text)
  local ascii = true
  for i = 1, #text do
    if byte(text, i) >= 128 then ascii = false break end
  end
  if ascii then return lower(strip(text)) end
  local chars = utf8_chars(text)
  local first, last = 1, #chars
  while first <= last and is_space_char(chars[first]) do first = first + 1 end
  while last >= first and is_space_char(chars[last]) do last = last - 1 end
  local out = {}
  for i = first, last do out[#out + 1] = FOLD[chars[i]] or lower(chars[i]) end
  return concat(out)
end

-- The city of a request (routing_engine.CallerResolver.city): the city header's from a
-- trusted proxy, else `local` for loopback and private addresses, else GeoIP's.
local function city_of(h, ip, number, hex, trusted)
  local header = trusted and IO.get(h, CITY_KEY) or nil
  if header and header ~= "" then return utf8_of_latin1(header) end
  if in_networks(LOCAL_NETS, number, hex) then return "local" end
  return IO.geo_city(h, ip)
end

-- The route (routing_engine.matcher._lanes_decider): the first lane, by its place, that
-- any of its rules takes, its header, IP, city and user rules where the service's `rules`
-- allow them, its lane-wide percent where `percents` does, and the service's members' own
-- percents; "PROD" when none does. `forwarded`: the client's X-Forwarded-For.
local NO_SERVICE = {}

-- The first lane of `set` that `allowed` allows (nil: all), if before `best`. A function of
-- its own, not a closure per request: LuaJIT does not compile making a closure.
local function first_of(set, allowed, best)
  for i = 1, #set do
    local place = set[i]
    if place < best and (allowed == nil or allowed[place]) then best = place end
  end
  return best
end

local function decide(service, h, peer, forwarded)
  if not ENABLED then return "ALL" end
  local own = SERVICE_RULES[service] or NO_SERVICE
  local rules_ok, percents_ok = own.rules, own.percents
  local best = LANE_COUNT
  for i = 1, #HEADER_RULES do
    local rule = HEADER_RULES[i]
    local value = IO.get(h, rule[1])
    if value then
      local id = rule[2][utf8_of_latin1(value)]
      if id then best = first_of(SETS[id], rules_ok, best) end
    end
  end
  if HAS_IPS or HAS_CITIES then
    local ip = peer
    local number, hex = address_key(peer)
    local trusted = HAS_TRUSTED and in_networks(TRUSTED_NETS, number, hex)
    if trusted then
      ip = client_ip(peer, forwarded)
      number, hex = address_key(ip)
    end
    if HAS_IPS then
      if number then
        best = first_of(SETS[V4_SETS[bisect_right(V4_BOUNDS, number) + 1]], rules_ok, best)
      elseif hex then
        best = first_of(SETS[V6_SETS[bisect_right(V6_BOUNDS, hex) + 1]], rules_ok, best)
      end
    end
    if HAS_CITIES then
      local city = city_of(h, ip, number, hex, trusted)
      local id = city and CITIES[fold_city(city)]
      if id then best = first_of(SETS[id], rules_ok, best) end
    end
  end
  local user = IO.get(h, USER_KEY)
  if user == "" then user = nil end
  if user then user = utf8_of_latin1(user) end
  local key = user and crc32(user, 0)
  if key and HAS_USERS then
    local id = user_set(user, key)
    if id then best = first_of(SETS[id], rules_ok, best) end
  end
  best = first_of(LANE_PERCENTS.always, percents_ok, best)
  if key then
    local places = LANE_PERCENTS.by_bucket[key % 10000]
    if places then best = first_of(places, percents_ok, best) end
  end
  local mine = own.own
  if mine then
    best = first_of(mine.always, nil, best)
    local places = user and mine.by_bucket[crc32(user, own.seed) % 10000]
    if places then best = first_of(places, nil, best) end
  end
  if best == LANE_COUNT then return "PROD" end
  return ORDER[best]
end

-- The route headers a route does not set: dropped from the request (the others are set,
-- which replaces what the client sent).
for _, route in pairs(ROUTES) do
  local sets, clear = {}, {}
  for i = 1, #route.headers do sets[route.headers[i][1]] = true end
  for i = 1, #ROUTE_HEADERS do
    if not sets[ROUTE_HEADERS[i]] then clear[#clear + 1] = ROUTE_HEADERS[i] end
  end
  route.clear = clear
end

-- Sampled requests (dataplane/agent/samples.py): one in 1/SAMPLE_RATE, drawn here, with
-- what the decision read as JSON for the engine's sample log. Only a sampled request pays
-- for the rest (string.gsub included).
local random = math.random
local SAMPLE_HEADERS = {}
do
  local seen = {[""] = true}
  local function add(name)
    if not seen[name] then seen[name], SAMPLE_HEADERS[#SAMPLE_HEADERS + 1] = true, name end
  end
  for i = 1, #HEADER_RULES do add(HEADER_RULES[i][1]) end
  add(USER_KEY)
  add(CITY_KEY)
end

local JSON_ESCAPES = {['"'] = '\\"', ['\\'] = '\\\\'}
for i = 0, 31 do JSON_ESCAPES[char(i)] = string.format("\\u%04x", i) end
local function json_string(text)
  if text == nil then return "null" end
  return '"' .. (text:gsub('[%z\1-\31"\\]', JSON_ESCAPES)) .. '"'
end

-- The Python gateway's sample (dataplane/gateway/proxy.py) but its status, latency and
-- time, which the engine logs: the client and city behind trusted proxies, the user and
-- the headers some rule names (values as the decision reads them).
local function sample_json(h, name, path, peer, forwarded)
  local ip, number, hex = peer, address_key(peer)
  local trusted = HAS_TRUSTED and in_networks(TRUSTED_NETS, number, hex)
  if trusted then
    ip = client_ip(peer, forwarded)
    number, hex = address_key(ip)
  end
  local user, headers = nil, {}
  for i = 1, #SAMPLE_HEADERS do
    local value = IO.get(h, SAMPLE_HEADERS[i])
    if value then
      value = utf8_of_latin1(value)
      headers[#headers + 1] = json_string(SAMPLE_HEADERS[i]) .. ":" .. json_string(value)
      if SAMPLE_HEADERS[i] == USER_KEY and value ~= "" then user = value end
    end
  end
  local city = city_of(h, ip, number, hex, trusted)
  if city == "" then city = nil end
  return concat({
    '{"service":', json_string(name), ',"method":', json_string(IO.method(h)),
    ',"path":', json_string(sub(path, 1, (find(path, "?", 1, true) or #path + 1) - 1)),
    ',"ip":', json_string(ip), ',"user":', json_string(user), ',"city":', json_string(city),
    ',"headers":{', concat(headers, ","), "}}",
  })
end

-- What the Python gateway does to a request's head (ClientConnection._upstream_head): the
-- client's route headers and gray baggage dropped, the peer appended to X-Forwarded-For,
-- the route decided, and its headers and baggage members set. Returns the status and detail
-- of an answer (nil, nil to proxy), the pool, the route, the service and the sample (nil
-- for a request not sampled). `sent`: the client's X-Forwarded-For (nil for none).
local function route_request(h, path, peer, sent)
  local name = service_of(path)
  local service = name and SERVICES[name]
  if not service then return 404, "no such service" end
  local forwarded = sent ~= "" and sent or nil
  local baggage = IO.all(h, "baggage", ",")
  IO.forward(h, forwarded, peer)
  local key = decide(name, h, peer, forwarded)
  local sample = SAMPLE_RATE > 0 and random() < SAMPLE_RATE
    and sample_json(h, name, path, peer, forwarded) or nil
  local route = ROUTES[key]
  IO.route(h, route)
  local kept = baggage and strip_gray_baggage(baggage) or ""
  IO.put(h, "baggage", kept ~= "" and (kept .. "," .. route.baggage) or route.baggage, baggage)
  local pool = service[key]
  if not pool then return 503, "no routable instance", nil, route, name, sample end
  return nil, nil, pool, route, name, sample
end

local function detail_json(detail) return '{"detail": "' .. detail .. '"}' end

if ENGINE == "envoy" then
  -- Each call into Envoy costs about as much as the rest of the decision: get() joins a
  -- header's values with ",", so a value without one is the header's only value, and the
  -- values are read one by one only when there is a comma. The client's route headers and
  -- pool header are dropped before this filter (envoy_config's header mutation).
  local function values(h, name, separator)
    local values = {}
    for i = 0, h:getNumValues(name) - 1 do values[i + 1] = h:getAtIndex(name, i) end
    return concat(values, separator)
  end
  IO = {
    get = function(h, name)
      local value = h:get(name)
      if value == nil or not find(value, ",", 1, true) then return value end
      return h:getAtIndex(name, h:getNumValues(name) - 1)
    end,
    all = function(h, name, separator)
      local value = h:get(name)
      if value == nil or not find(value, ",", 1, true) then return value end
      return values(h, name, separator)
    end,
    -- One value, however many the client sent (`sent`: what it sent, nil for none).
    put = function(h, name, value, sent)
      if sent ~= nil then h:remove(name) end
      h:add(name, value)
    end,
    -- Envoy wrote "<chain>,<peer>" (or the peer alone): the Python gateway's ", " instead.
    forward = function(h, forwarded, peer)
      if forwarded then h:replace("x-forwarded-for", forwarded .. ", " .. peer) end
    end,
    route = function(h, route)
      for i = 1, #route.headers do h:add(route.headers[i][1], route.headers[i][2]) end
    end,
    method = function(h) return h:get(":method") end,
    -- The geoip filter looked up CLIENT_HEADER, which the first Lua filter set to `ip`.
    geo_city = function(h, _) return GEOIP and h:get(GEO_HEADER) or nil end,
  }

  local function answer(handle, status, detail)
    handle:respond({[":status"] = status, ["content-type"] = "application/json"}, detail_json(detail))
  end

  -- The request line, "METHOD target HTTP/1.1", over its limit: Envoy has no setting for it
  -- (the connection manager counts the headers and their bytes). Measured once the whole
  -- head is read (at most 64 KiB), so the connection can go on after the answer.
  local function line_too_long(headers, path)
    return #path > REQUEST_LINE_LIMIT - 32 and
      #(headers:get(":method") or "") + #path + 10 > REQUEST_LINE_LIMIT
  end

  function envoy_on_request(handle)
    local headers = handle:headers()
    local path = headers:get(":path") or "/"
    if line_too_long(headers, path) then return answer(handle, "414", LINE_TOO_LONG) end
    local sent, peer = chain_and_peer(headers:get("x-forwarded-for"))
    local status, detail, pool, _, _, sample = route_request(headers, path, peer, sent)
    if sample then handle:streamInfo():dynamicMetadata():set("graylane", "sample", sample) end
    if status then return answer(handle, tostring(status), detail) end
    headers:add(POOL_HEADER, pool)  -- the client's was dropped before this filter
    handle:clearRouteCache()
  end
  return
end

local set_header, clear_header = ngx.req.set_header, ngx.req.clear_header
-- The headers' table's names are lower-case; rawget, not its metatable, which makes a name
-- it lacks lower-case with "-" for "_" (a new string per header a request lacks).
IO = {
  get = function(h, name)
    local value = rawget(h, name)
    if type(value) == "table" then return value[#value] end
    return value
  end,
  all = function(h, name, separator)
    local value = rawget(h, name)
    if type(value) == "table" then return concat(value, separator) end
    return value
  end,
  put = function(_, name, value) set_header(name, value) end,
  forward = function(_, forwarded, peer)
    set_header("x-forwarded-for", forwarded and (forwarded .. ", " .. peer) or peer)
  end,
  method = function() return ngx.req.get_method() end,
  route = function(_, route)
    for i = 1, #route.clear do clear_header(route.clear[i]) end
    for i = 1, #route.headers do set_header(route.headers[i][1], route.headers[i][2]) end
  end,
  -- The geoip2 module looks up $graylane_client_ip when its city variable is read.
  geo_city = function(_, ip)
    if not GEOIP then return nil end
    ngx.var.graylane_client_ip = lookup_form(ip)
    local city = ngx.var.graylane_geoip_city
    if city == "" then return nil end
    return city
  end,
}

-- nginx's access phase: the pool, flag and lane into the location's variables (proxy_pass
-- and the access log read them), or the answer.
return {
  access = function()
    local headers = ngx.req.get_headers(0)
    local status, detail, pool, route, name, sample =
      route_request(headers, ngx.var.request_uri, ngx.var.remote_addr,
        IO.all(headers, "x-forwarded-for", ", "))
    if sample then ngx.var.graylane_sample = sample end
    if route then
      ngx.var.graylane_service, ngx.var.graylane_pool = name, pool or ""
      ngx.var.graylane_flag = route.status
      if route.lane then ngx.var.graylane_lane = route.lane end  -- "" (the server's `set`)
    end
    if status then
      ngx.status = status
      ngx.header["Content-Type"] = "application/json"
      ngx.print(detail_json(detail))
      return ngx.exit(ngx.HTTP_OK)
    end
  end,
}
