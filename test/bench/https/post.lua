-- wrk script for test/bench/run.sh: every request is the same POST of the
-- file named by $GK_BENCH_BODY (an AdmissionReview), sent as the API server
-- sends it (application/json, HTTP/1.1 keep-alive). At the end it prints one
-- line for run.sh to read:
--   WRK requests=N seconds=S rps=R p50_us=… p90_us=… p99_us=… max_us=…
--       connect_errors=… read_errors=… write_errors=… timeouts=… bad_status=…
-- (bad_status: answers with a status outside 2xx/3xx).
local name = os.getenv("GK_BENCH_BODY")
assert(name ~= nil and name ~= "", "set GK_BENCH_BODY to the request body file")
local file = assert(io.open(name, "rb"))
local payload = file:read("*a")
file:close()

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, */*"
wrk.body = payload

function done(summary, latency, requests)
  local seconds = summary.duration / 1000000
  local err = summary.errors
  io.write(string.format("WRK requests=%d seconds=%.3f rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d " ..
                         "connect_errors=%d read_errors=%d write_errors=%d timeouts=%d bad_status=%d\n",
                         summary.requests, seconds, summary.requests / seconds,
                         latency:percentile(50.0), latency:percentile(90.0), latency:percentile(99.0),
                         latency.max, err.connect, err.read, err.write, err.timeout, err.status))
end
