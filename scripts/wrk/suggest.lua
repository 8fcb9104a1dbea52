-- wrk script: GET /v1/suggest for each line of the file named by $PREFIXES (URL-encoded
-- prefixes, one per line), cycling, with $EXTRA (e.g. "&match=prefix") appended. Requests are formatted once, at load, so the generator
-- spends its time sending, not building strings.
local requests = {}
local extra = os.getenv("EXTRA") or ""
for line in io.lines(os.getenv("PREFIXES")) do
  requests[#requests + 1] = wrk.format("GET", "/v1/suggest?q=" .. line .. extra)
end
local i = 0

request = function()
  i = i % #requests + 1
  return requests[i]
end
