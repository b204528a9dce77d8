-- The gray decision inside Envoy (an HTTP Lua filter, per route configuration): the same
-- rules, order and sticky hash as routing_engine.GrayMatcher. The agent puts the data of
-- one generation above this code (render_envoy); everything is looked up in tables built
-- once per worker, so 100,000 users cost one hash lookup and 10,000 CIDRs one binary search.
local bit = require("bit")
local band, bxor, rshift = bit.band, bit.bxor, bit.rshift

local CRC = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) == 1 then c = bxor(rshift(c, 1), 0xEDB88320) else c = rshift(c, 1) end
  end
  CRC[i] = c
end

-- zlib.crc32(s, seed): the CRC-32 of s continued from seed (0 for none), unsigned.
local function crc32(s, seed)
  local c = bxor(seed, 0xFFFFFFFF)
  for i = 1, #s do
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

local function v4_number(ip)
  local a, b, c, d = ip:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return nil end
  a, b, c, d = tonumber(a), tonumber(b), tonumber(c), tonumber(d)
  if a > 255 or b > 255 or c > 255 or d > 255 then return nil end
  return ((a * 256 + b) * 256 + c) * 256 + d
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

-- Is `ip` (text) in the (v4, v6) range sets?
local function in_networks(v4set, v6set, ip)
  if ip == nil then return false end
  local number = v4_number(ip)
  if number then return covered(v4set, number) end
  local hex, mapped = v6_hex(ip)
  if mapped then return covered(v4set, mapped) end
  return hex ~= nil and covered(v6set, hex)
end

local function is_address(ip)
  return v4_number(ip) ~= nil or v6_hex(ip) ~= nil or select(2, v6_hex(ip)) ~= nil
end

local IPS4, IPS6 = ranges(IPS.v4, true), ranges(IPS.v6, false)
local TRUSTED4, TRUSTED6 = ranges(TRUSTED.v4, true), ranges(TRUSTED.v6, false)
local LOCAL4, LOCAL6 = ranges(LOCAL.v4, true), ranges(LOCAL.v6, false)
local HAS_IPS = #IPS4[1] + #IPS6[1] > 0
local HAS_TRUSTED = #TRUSTED4[1] + #TRUSTED6[1] > 0
local HAS_CITIES = next(CITIES) ~= nil
local HAS_USERS = next(USERS) ~= nil

local function strip(text) return (text:gsub("^%s+", ""):gsub("%s+$", "")) end

local function peer_of(address)
  return address:match("^%[(.*)%]:%d+$") or address:match("^(.*):%d+$") or address
end

-- routing_engine.CallerResolver.client_ip: the nearest X-Forwarded-For hop that is not a
-- trusted proxy, believed only from a trusted peer.
local function client_ip(peer, forwarded)
  if not forwarded then return peer end
  local hops = {}
  for hop in forwarded:gmatch("[^,]+") do hops[#hops + 1] = strip(hop) end
  for i = #hops, 1, -1 do
    if not is_address(hops[i]) then return peer end
    if not in_networks(TRUSTED4, TRUSTED6, hops[i]) then return hops[i] end
  end
  return hops[1] or peer
end

local function decide(headers, peer, forwarded, route)
  if not ENABLED then return "ALL" end
  local user = nil
  if route.targeted then
    if HEADER_KEY and headers:get(HEADER_KEY) == HEADER_VALUE then return "GRAY" end
    if HAS_IPS or HAS_CITIES then
      local trusted = HAS_TRUSTED and in_networks(TRUSTED4, TRUSTED6, peer)
      local ip = peer
      if trusted then ip = client_ip(peer, forwarded) end
      if HAS_IPS and in_networks(IPS4, IPS6, ip) then return "GRAY" end
      if HAS_CITIES then
        local city = trusted and headers:get(CITY_KEY) or nil
        if city == nil then
          if in_networks(LOCAL4, LOCAL6, ip) then city = "local" else city = headers:get(GEO_HEADER) end
        end
        if city ~= nil and CITIES[strip(city):lower()] then return "GRAY" end
      end
    end
    if HAS_USERS then
      user = headers:get(USER_KEY)
      if user and USERS[user] then return "GRAY" end
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
  for member in baggage:gmatch("[^,]+") do
    local key = member:match("^([^=]*)")
    if strip(member) ~= "" and not strip(key):lower():find("gray", 1, true) then
      kept[#kept + 1] = member
    end
  end
  if #kept == 0 then headers:remove("baggage") else headers:replace("baggage", table.concat(kept, ",")) end
end

local function answer(handle, status, detail)
  handle:respond({[":status"] = status, ["content-type"] = "application/json"},
    '{"detail": "' .. detail .. '"}')
end

function envoy_on_request(handle)
  local headers = handle:headers()
  headers:remove("x-graylane-pool")  -- only the decision picks a pool
  local name = (headers:get(":path") or "/"):match("^/([^/?#]+)")
  local route = name and SERVICES[name]
  if not route then return answer(handle, "404", "no such service") end
  strip_gray_baggage(headers)
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
