-- Graylane generation 153 (revision 7)
local ENGINE = "nginx"
local STAGE = "decide"
local GEOIP = true
local POOL_HEADER = "x-graylane-pool"
local GEO_HEADER = "x-graylane-geoip-city"
local CLIENT_HEADER = "x-graylane-client-ip"
local REQUEST_LINE_LIMIT = 8192
local LINE_TOO_LONG = "The request line is over 8 KiB."
local SAMPLE_RATE = 0.0
local TRUSTED = {v4 = "a000000-affffff,", v6 = ""}
local LOCAL = {v4 = "a000000-affffff,7f000000-7fffffff,a9fe0000-a9feffff,ac100000-ac1fffff,c0a80000-c0a8ffff,", v6 = "00000000000000000000000000000001-00000000000000000000000000000001,fc000000000000000000000000000000-fdffffffffffffffffffffffffffffff,fe800000000000000000000000000000-febfffffffffffffffffffffffffffff,"}
local ENABLED = false
local LANE_COUNT = 0
local ORDER = {}
local USER_KEY = ""
local CITY_KEY = ""
local HEADER_RULES = {}
local IPS = {v4 = "", v4sets = "1,", v6 = "", v6sets = "1,"}
local CITIES = {}
local USER_TEXT = ""
local USER_LENGTHS = ""
local USER_SETS = ""
local PERCENTS = {}
local RANK_TEXT = {}
local SERVICE_RULES = {
}
local SET_TEXT = {"", }
local FOLD = {}
local SPACE = {}
local ROUTES = {
  ["ALL"] = {status = "ALL", lane = nil, headers = {{"x-gray-status", "ALL"}, }, baggage = "graylane.gray=ALL"},
  ["PROD"] = {status = "PROD", lane = nil, headers = {{"x-gray-status", "PROD"}, {"x-gray-versions", "*=V1"}, }, baggage = "graylane.gray=PROD"},
  ["gray"] = {status = "GRAY", lane = "gray", headers = {{"x-gray-status", "GRAY"}, {"x-gray-lane", "gray"}, {"x-gray-versions", "*=V2/V1"}, }, baggage = "graylane.gray=GRAY,graylane.lane=gray"},
  ["feature-x"] = {status = "GRAY", lane = "feature-x", headers = {{"x-gray-status", "GRAY"}, {"x-gray-lane", "feature-x"}, {"x-gray-versions", "*=V1,user-app=V3/V1"}, }, baggage = "graylane.gray=GRAY,graylane.lane=feature-x"},
}
local ROUTE_HEADERS = {"x-gray-status", "x-gray-lane", "x-gray-versions"}
local SERVICES = {
  ["order-app"] = {},
  ["pay-app"] = {["ALL"] = "pay-app", ["gray"] = "pay-app.V2", },
  ["user-app"] = {["ALL"] = "user-app", ["PROD"] = "user-app.V1", ["gray"] = "user-app.V2", ["feature-x"] = "user-app.V1", },
}
