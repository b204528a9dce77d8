-- The gray decision inside Envoy (an HTTP Lua filter, per route configuration): the same
-- rules, order and sticky hash as routing_engine.GrayMatcher. The agent puts the data of
-- one generation above this code (render_envoy); everything is looked up in tables built
-- once per worker, so 100,000 users cost one CRC and one hash lookup, and 10,000 CIDRs one
-- binary search.
--
-- Per request it uses string.byte, string.sub, string.find (plain) and string.lower only:
-- LuaJIT compiles those, not string.match, gmatch or gsub (each call leaves the compiled
-- trace for the interpreter).
local bit = require("bit")
local band, bxor, rshift = bit.band, bit.bxor, bit.rshift
local byte, sub, find, lower = string.byte, string.sub, string.find, string.lower

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
    c = bxor(CRC[band(bxor(c, s:byte(i)), 0xFF)], rshift(c, 8))
  end
  c = bxor(c, 0xFFFFFFFF)
  if c < 0 then c = c + 4294967296 end
  return c
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
    local mid = math.floor((lo + hi) / 2)
    if firsts[mid] <= key then lo = mid + 1 else hi = mid - 1 end
  end
  return hi >= 1 and key <= lasts[hi]
end

local function is_digit(b) return b >= 48 and b <= 57 end
local function is_space(b) return b == 32 or (b >= 9 and b <= 13) end

-- "a.b.c.d" (decimal, each part 1 digit or more and <= 255) as a number.
local function v4_number(ip)
  local number, part, dots, digits = 0, 0, 0, 0
  for i = 1, #ip do
    local b = byte(ip, i)
    if b == 46 then
      if digits == 0 or dots == 3 then return nil end
      number, part, dots, digits = number * 256 + part, 0, dots + 1, 0
    elseif is_digit(b) then
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
  local groups, v4 = {}, nil
  local dotted = ip:match(":(%d+%.%d+%.%d+%.%d+)$")
  if dotted then
    v4 = v4_number(dotted)
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
  local hex = table.concat(groups)
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

local function in_networks(v4set, v6set, number, hex)
  if number then return covered(v4set, number) end
  return hex ~= nil and covered(v6set, hex)
end

local IPS4, IPS6 = ranges(IPS.v4, true), ranges(IPS.v6, false)
local TRUSTED4, TRUSTED6 = ranges(TRUSTED.v4, true), ranges(TRUSTED.v6, false)
local LOCAL4, LOCAL6 = ranges(LOCAL.v4, true), ranges(LOCAL.v6, false)
local HAS_IPS = #IPS4[1] + #IPS6[1] > 0
local HAS_TRUSTED = #TRUSTED4[1] + #TRUSTED6[1] > 0
local HAS_CITIES = next(CITIES) ~= nil

-- The users' places in USER_TEXT (start * 65536 + length: an entry has at most 256
-- characters, 1,024 bytes), in an open-addressing table keyed by their CRC-32, in FFI arrays.
-- 100,000 strings of their own (a Lua table of the users) were as many objects for the
-- garbage collector to mark and sweep in each cycle, and a Lua table of numbers is still
-- traversed: either cost Envoy more per request than the rest of the decision.
local ffi = require("ffi")
local USER_COUNT = select(2, USER_LENGTHS:gsub(",", ""))
local USER_MASK = 1
while USER_MASK < 2 * USER_COUNT do USER_MASK = USER_MASK * 2 end
USER_MASK = USER_MASK - 1
local SLOT_CRC = ffi.new("uint32_t[?]", USER_MASK + 1)
local SLOT_PLACE = ffi.new("double[?]", USER_MASK + 1)  -- 0: an empty slot
do
  local start = 1
  for length in USER_LENGTHS:gmatch("(%d+),") do
    length = tonumber(length)
    local key = crc32(USER_TEXT, 0, start, start + length - 1)
    local slot = band(key, USER_MASK)
    while SLOT_PLACE[slot] ~= 0 do slot = band(slot + 1, USER_MASK) end
    SLOT_CRC[slot], SLOT_PLACE[slot] = key, start * 65536 + length
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

-- Users that share a CRC sit in slots one after another: each is compared.
local function is_user(user)
  local key = crc32(user, 0)
  local slot = band(key, USER_MASK)
  while true do
    local place = SLOT_PLACE[slot]
    if place == 0 then return false end
    if SLOT_CRC[slot] == key and at_place(user, place) then return true end
    slot = band(slot + 1, USER_MASK)
  end
end

local function strip(text)
  local first, last = 1, #text
  while first <= last and is_space(byte(text, first)) do first = first + 1 end
  while last >= first and is_space(byte(text, last)) do last = last - 1 end
  return sub(text, first, last)
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

-- The non-empty pieces of a comma-separated list, as gmatch("[^,]+") finds them.
local function members(text)
  local found, start = {}, 1
  while start <= #text do
    local comma = find(text, ",", start, true) or #text + 1
    if comma > start then found[#found + 1] = sub(text, start, comma - 1) end
    start = comma + 1
  end
  return found
end

-- routing_engine.CallerResolver.client_ip: the nearest X-Forwarded-For hop that is not a
-- trusted proxy, believed only from a trusted peer.
local function client_ip(peer, forwarded)
  if not forwarded then return peer end
  local hops = members(forwarded)
  for i = #hops, 1, -1 do
    hops[i] = strip(hops[i])
    local number, hex = address_key(hops[i])
    if not (number or hex) then return peer end
    if not in_networks(TRUSTED4, TRUSTED6, number, hex) then return hops[i] end
  end
  return hops[1] or peer
end

local function decide(headers, peer, forwarded, route)
  if not ENABLED then return "ALL" end
  local user = nil
  if route.targeted then
    if HEADER_KEY and headers:get(HEADER_KEY) == HEADER_VALUE then return "GRAY" end
    if HAS_IPS or HAS_CITIES then
      local number, hex = address_key(peer)
      local trusted = HAS_TRUSTED and in_networks(TRUSTED4, TRUSTED6, number, hex)
      if trusted then
        local ip = client_ip(peer, forwarded)
        if ip ~= peer then number, hex = address_key(ip) end
      end
      if HAS_IPS and in_networks(IPS4, IPS6, number, hex) then return "GRAY" end
      if HAS_CITIES then
        local city = trusted and headers:get(CITY_KEY) or nil
        if city == nil then
          if in_networks(LOCAL4, LOCAL6, number, hex) then
            city = "local"
          else
            city = headers:get(GEO_HEADER)
          end
        end
        if city ~= nil and CITIES[lower(strip(city))] then return "GRAY" end
      end
    end
    if HAS_USERS then
      user = headers:get(USER_KEY)
      if user and is_user(user) then return "GRAY" end
    end
  end
  local threshold = route.percent * 100
  if threshold > 0 then
    user = user or headers:get(USER_KEY)
    if threshold >= 10000 then return "GRAY" end
    if user and user ~= "" and crc32(user, route.seed) % 10000 < threshold then return "GRAY" end
  end
  return "PROD"
end

local function strip_gray_baggage(headers)
  local baggage = headers:get("baggage")
  if not baggage then return end
  local kept = {}
  for _, member in ipairs(members(baggage)) do
    local key = sub(member, 1, (find(member, "=", 1, true) or #member + 1) - 1)
    if strip(member) ~= "" and not find(lower(strip(key)), "gray", 1, true) then
      kept[#kept + 1] = member
    end
  end
  if #kept == 0 then headers:remove("baggage") else headers:replace("baggage", table.concat(kept, ",")) end
end

local function answer(handle, status, detail)
  handle:respond({[":status"] = status, ["content-type"] = "application/json"},
    '{"detail": "' .. detail .. '"}')
end

-- The request line, "METHOD target HTTP/1.1", over its limit: Envoy has no setting for it
-- (the connection manager counts the headers and their bytes). Measured once the whole head
-- is read (at most 64 KiB), so the connection can go on after the answer.
local function line_too_long(headers, path)
  return #path > REQUEST_LINE_LIMIT - 32 and
    #(headers:get(":method") or "") + #path + 10 > REQUEST_LINE_LIMIT
end

function envoy_on_request(handle)
  local headers = handle:headers()
  local path = headers:get(":path") or "/"
  if line_too_long(headers, path) then return answer(handle, "414", LINE_TOO_LONG) end
  headers:remove("x-graylane-pool")  -- only the decision picks a pool
  local name = service_of(path)
  local route = name and SERVICES[name]
  if not route then return answer(handle, "404", "no such service") end
  strip_gray_baggage(headers)
  -- A client's lane and versions would steer the SDK's later hops: only gateways set them.
  headers:remove("x-gray-lane")
  headers:remove("x-gray-versions")
  local stream = handle:streamInfo()
  local peer = peer_of(stream:downstreamDirectRemoteAddress())
  local forwarded = headers:get("x-forwarded-for")
  -- As the Python gateway: the peer appended to the chain (Envoy's own append is off).
  headers:replace("x-forwarded-for", forwarded and (forwarded .. ", " .. peer) or peer)
  local flag = decide(headers, peer, forwarded, route)
  headers:replace("x-gray-status", flag)
  local pool = route[flag]
  if not pool then return answer(handle, "503", "no routable instance") end
  headers:replace("x-graylane-pool", pool)
  handle:clearRouteCache()
end
