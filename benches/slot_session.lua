-- wrk script: 3 SLOT calls (sort, retrieve, aggregate) per iteration on pre-created
-- sessions (SESSIONS env var: comma-separated ids), round-robin. Each call reads only the join
-- step's output, so calls of one session may arrive in any order over the 32 connections.
local sessions = {}
for s in string.gmatch(os.getenv("SESSIONS") or "", "[^,]+") do table.insert(sessions, s) end
local bodies = {
  '{"session_id":"%s","label":"SORTED_DF","arguments":{"data_source":"$starting_table_var$","key_name":"singer_Age","ascending":false}}',
  '{"session_id":"%s","label":"SELECT_COL_0","arguments":{"data_source":"$starting_table_var$","key_name":"singer_Name","distinct":false,"limit":-1}}',
  '{"session_id":"%s","label":"COUNT","arguments":{"data_source":"$starting_table_var$","aggregation_type":"count","key_name":"singer_Name"}}',
}
local paths = {"/tools/sort_data", "/tools/retrieve_data", "/tools/aggregate_data"}
local n = 0
request = function()
  local step = n % 3
  local s = sessions[(math.floor(n / 3) % #sessions) + 1]
  n = n + 1
  return wrk.format("POST", paths[step + 1], {["Content-Type"] = "application/json"}, string.format(bodies[step + 1], s))
end
response = function(status, headers, body)
  if status ~= 200 then error("HTTP " .. status .. ": " .. body) end
end
