#!/usr/bin/env bash
# The compose suite: the deployment in deploy/ brought up for real and driven
# through its proxy. Run after `cargo build --release --workspace --bins`.
#
#  1. builds the local base image world-base:bookworm when missing
#     (deploy/build-base.sh: debootstrap + docker import; reused afterwards),
#  2. builds the images with --build-arg BASE=world-base:bookworm; an override
#     file swaps Jaeger (which cannot be pulled here) for the otlp-sink image
#     and the proxy's nginx image for the base (nginx-light is baked in),
#  3. bootstraps the store as an operator would: serve once, publish the echo
#     example and mint a session (both attended: the answers are typed into a
#     pseudo-terminal with `script`, CI removed from that child only), genesis,
#  4. brings up core + 3 edges + proxy + receiver and checks, through the
#     proxy on a loopback port: /v1/health, A2A tasks/send to tools.echo
#     (completed, echoing its input), the calls spread over several edge
#     replicas (each replica's /metrics), and the traces: per call one trace
#     with the edge's spans and the core's (rpc.server, admit, invoke,
#     capsule.run). WORLD_COMPOSE_REQUIRE_EDGE_SPANS=0 accepts core-only traces
#     when the edge binary exports no spans at all,
#  5. signs in through the proxy as an MCP client would (OAuth: discovery from the 401,
#     registration, the approval page, `session approve` at a terminal, the code exchanged with
#     PKCE, a call, a refresh, a reused refresh token ending the sign-in), each step landing on
#     whichever edge the proxy picks,
#  6. kills one edge replica while four clients call through the proxy: every
#     call that ended before the kill or started after it succeeds; only a call
#     in flight during the kill may fail, and then with a whole HTTP answer.
#
# Bounded in time (WORLD_COMPOSE_TIMEOUT seconds, default 900), with a compose
# project name unique to the run; everything it creates is removed on exit
# (the base image is kept: it is the cache). WORLD_COMPOSE_KEEP=1 keeps the
# project up for inspection and prints how to remove it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

limit=${WORLD_COMPOSE_TIMEOUT:-900}
base=${WORLD_BASE_IMAGE:-world-base:bookworm}
edges=3
calls=12
started=$SECONDS

say() { printf 'test-compose: %s\n' "$*"; }
fail() {
    printf 'test-compose: FAIL: %s\n' "$*" >&2
    exit 1
}

# --- bounded in time --------------------------------------------------------
# A watchdog ends the run (and so triggers the cleanup trap) after $limit s.
main_pid=$$
(
    sleep "$limit" &
    nap=$!
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    wait "$nap"
    printf 'test-compose: FAIL: the suite exceeded %s s\n' "$limit" >&2
    kill -TERM "$main_pid" 2>/dev/null
) >/dev/null &
watchdog=$!

# --- prerequisites ------------------------------------------------------------
for bin in world-core world-edge world-publish ailang otlp-sink; do
    [ -x "target/release/$bin" ] ||
        fail "target/release/$bin is missing: run cargo build --release --workspace --bins first"
done
if [ -n "${WORLD_COMPOSE:-}" ]; then
    read -r -a compose_cmd <<<"$WORLD_COMPOSE"
elif docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
else
    command -v docker-compose >/dev/null 2>&1 || fail "neither docker compose nor docker-compose is installed"
    compose_cmd=(docker-compose)
fi
command -v script >/dev/null 2>&1 || fail "script (util-linux) is needed to answer the attended prompts"
command -v python3 >/dev/null 2>&1 || fail "python3 is needed to check the JSON answers"
say "using ${compose_cmd[*]} ($("${compose_cmd[@]}" version --short 2>/dev/null || echo unknown version))"

# --- the run's own project, images and files ----------------------------------
run_id="$(date +%s)$$"
project="worldtest${run_id}"
tag="worldtest:${run_id}"
work=$(mktemp -d "${TMPDIR:-/tmp}/world-compose.XXXXXX")
export COMPOSE_PROJECT_NAME=$project
export WORLD_IMAGE="${tag}-runtime"
export WORLD_PROXY_IMAGE=$base
# The proxy's port is chosen here, so the edges can be told the address clients see.
WORLD_HTTP_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export WORLD_HTTP_PORT
export WORLD_PUBLIC_URL="http://127.0.0.1:$WORLD_HTTP_PORT"
export JAEGER_UI_PORT=
export WORLD_STORE=/data/world.db
unset WORLD_CORE
export COMPOSE_INTERACTIVE_NO_CLI=1 # docker-compose 1.29: run/exec through dockerpty, not the docker CLI

cat >"$work/override.yml" <<EOF
version: "3.8"
services:
  jaeger:
    # Jaeger cannot be pulled here: the local receiver answers the same query API.
    build:
      context: $root/target/release
      dockerfile: $root/deploy/otlp-sink/Dockerfile
      args:
        BASE: $base
    image: ${tag}-sink
EOF
# Every compose call is bounded too, so a hung engine cannot stall the run.
compose() { timeout 600 "${compose_cmd[@]}" -p "$project" -f deploy/docker-compose.yml -f "$work/override.yml" "$@"; }

cleanup() {
    local rc=$?
    kill "$watchdog" 2>/dev/null || true
    trap - EXIT INT TERM
    if [ "$rc" -ne 0 ]; then
        say "logs of the failed run (last lines per service):"
        compose logs --no-color --tail=40 2>/dev/null | sed 's/^/  /' >&2 || true
    fi
    if [ "${WORLD_COMPOSE_KEEP:-}" = 1 ]; then
        say "kept project $project; remove it with: COMPOSE_PROJECT_NAME=$project ${compose_cmd[*]} -f deploy/docker-compose.yml -f $work/override.yml down -v"
    else
        compose down -v --remove-orphans --timeout 10 >/dev/null 2>&1 || true
        docker image rm "${tag}-runtime" "${tag}-sink" >/dev/null 2>&1 || true
        rm -rf "$work"
    fi
    say "$([ "$rc" -eq 0 ] && echo PASS || echo FAIL) in $((SECONDS - started)) s"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# Waits (bounded) until "$@" succeeds.
wait_for() {
    local what=$1 seconds=$2
    shift 2
    local until=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$until" ] || fail "timed out after ${seconds} s waiting for $what"
        sleep 1
    done
}

# Runs a command line on a pseudo-terminal, typing $1 into it once the prompt
# has had time to appear; CI is removed from this child only (attended steps
# refuse under CI). The output is kept in $work/tty.log.
attended() {
    local answer=$1 command=$2
    { sleep 3; printf '%s\n' "$answer"; sleep 2; } |
        timeout 180 env -u CI script -qec "$command" /dev/null >"$work/tty.log" 2>&1
}

# --- 1. base image (cached) ---------------------------------------------------
if docker image inspect "$base" >/dev/null 2>&1; then
    say "base image $base exists; reusing it"
else
    deploy/build-base.sh "$base"
fi

# --- 2. images ---------------------------------------------------------------
say "building images"
compose build --build-arg BASE="$base" core edge jaeger >"$work/build.log" 2>&1 ||
    { tail -n 40 "$work/build.log" >&2; fail "compose build failed"; }

# --- 3. bootstrap the store ---------------------------------------------------
q() { printf '%q ' "$@" | sed 's/ $//'; }
compose_line=$(q "${compose_cmd[@]}" -p "$project" -f deploy/docker-compose.yml -f "$work/override.yml")

say "bootstrap: first serve (epoch 1)"
compose up -d core >/dev/null 2>&1 || fail "compose up core failed"
wait_for "the core's startup line" 60 sh -c "timeout 30 $compose_line logs --no-color core | grep -q 'world-core listening on grpc://'"
compose stop core >/dev/null 2>&1

say "bootstrap: publish packages/examples (attended)"
attended "publish 1 transitions to /data/world.db" \
    "$compose_line run --rm --no-deps -v $(q "$root/packages/examples"):/opt/world/packages/examples:ro core \
     world-publish transitions --store /data/world.db --manifest packages/examples/transitions.json \
     --ailang-bin /usr/local/bin/ailang" ||
    { sed 's/^/  /' "$work/tty.log" >&2; fail "attended publish failed"; }

say "bootstrap: genesis"
compose run --rm --no-deps -T core world-core genesis --store /data/world.db >"$work/genesis.log" 2>&1 ||
    { cat "$work/genesis.log" >&2; fail "genesis failed"; }

say "up: core, $edges edges, proxy, receiver"
compose up -d --scale edge="$edges" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; fail "compose up failed"; }

say "bootstrap: mint a session (attended, while the core serves)"
attended y "$compose_line exec core world-core session mint --store /data/world.db --episode ep1 \
    --grant world.apply=world:100000 --out /data/session" ||
    { sed 's/^/  /' "$work/tty.log" >&2; fail "attended session mint failed"; }
token=$(compose exec -T core cat /data/session | tr -d '\r\n')
[ -n "$token" ] || fail "the minted session file is empty"

# --- 4. through the proxy ------------------------------------------------------
port=$(compose port proxy 80 | sed -n 's/.*:\([0-9][0-9]*\)$/\1/p')
[ -n "$port" ] || fail "the proxy publishes no port"
url="http://127.0.0.1:$port"
say "proxy on $url"
wait_for "$url/v1/health" 60 curl -fsS --max-time 5 "$url/v1/health"

edge_ids=$(compose ps -q edge)
[ "$(wc -w <<<"$edge_ids")" -eq "$edges" ] || fail "expected $edges edge containers, found: $edge_ids"
for id in $edge_ids; do
    wait_for "edge $id healthy" 60 timeout 30 docker exec "$id" curl -fsS --max-time 5 -o /dev/null http://127.0.0.1:7644/v1/health
done

# Requests the edge has answered on /a2a/, from one replica's /metrics.
a2a_count() {
    timeout 30 docker exec "$1" curl -fsS --max-time 10 http://127.0.0.1:7644/metrics |
        awk '/^world_edge_http_requests_total\{/ && /a2a/ { n += $NF } END { print n + 0 }'
}
declare -A before
for id in $edge_ids; do before[$id]=$(a2a_count "$id"); done

say "A2A tasks/send ×$calls to tools.echo"
for i in $(seq 1 "$calls"); do
    trace_id=$(printf '%016x%016x' "$((RANDOM * 32768 + RANDOM + 1))" "$((RANDOM * 32768 + RANDOM + 1))")
    traceparent=$(printf '00-%s-%016x-01' "$trace_id" "$((RANDOM + 1))")
    echo "$trace_id" >>"$work/sent-traces"
    body=$(printf '{"jsonrpc":"2.0","id":%d,"method":"tasks/send","params":{"id":"compose-%s-%d","metadata":{"skill_id":"tools.echo"},"message":{"role":"user","parts":[{"type":"data","data":{"n":%d}}]}}}' \
        "$i" "$run_id" "$i" "$i")
    reply=$(curl -sS --max-time 30 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        -H "traceparent: $traceparent" -d "$body" "$url/a2a/") || fail "call $i: no reply"
    python3 - "$reply" "$i" <<'PY' || fail "call $i: unexpected reply: $reply"
import json, sys
reply, n = json.loads(sys.argv[1]), int(sys.argv[2])
result = reply["result"]
assert result["status"]["state"] == "completed", result["status"]
text = json.dumps(result)
assert '"echo"' in text and f'"n": {n}' in text, "the artifact does not echo the input"
PY
done
say "all $calls calls completed with the echoed input"

served=0
for id in $edge_ids; do
    delta=$(($(a2a_count "$id") - ${before[$id]}))
    say "  edge ${id:0:12}: $delta A2A request(s)"
    [ "$delta" -gt 0 ] && served=$((served + 1))
done
[ "$served" -ge 2 ] || fail "the proxy sent every call to one edge replica"
say "calls spread over $served of $edges edge replicas"

# --- the explorer behind the proxy ---------------------------------------------
say "the explorer through the proxy: /ui/ and the calls it reads"
headers=$(curl -fsS --max-time 10 -D - -o /dev/null "$url/ui/") || fail "GET /ui/ through the proxy failed"
grep -qi "^content-security-policy: default-src 'none'" <<<"$headers" || fail "/ui/ lacks its policy: $headers"
page=$(curl -fsS --max-time 10 -H "Authorization: Bearer $token" "$url/v1/calls?find=compose-$run_id-1") ||
    fail "GET /v1/calls through the proxy failed"
python3 - "$page" "$run_id" <<'PY' || fail "the explorer's read does not show call 1: $page"
import json, sys
page, run_id = json.loads(sys.argv[1]), sys.argv[2]
[call] = page["items"]
assert call["invocationId"].endswith(f":compose-{run_id}-1") and call["outcome"] == "ok", call
PY

# --- OAuth sign-in through the proxy ---------------------------------------------
# Every step goes through the proxy, so consecutive steps land on different edges: the
# approval, the code and the refresh tokens live in the core's store, not in an edge.
say "OAuth sign-in through the proxy: discovery, then two sign-ins"
python3 - "$url" <<'PY' || fail "the proxy's OAuth discovery is not as it should be"
import json, sys, urllib.error, urllib.request
url = sys.argv[1]
try:
    urllib.request.urlopen(urllib.request.Request(url + "/mcp/", data=b"{}", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}), timeout=30)
    raise SystemExit("an unauthenticated /mcp/ request was served")
except urllib.error.HTTPError as denied:
    assert denied.code == 401, denied.code
    challenge = denied.headers["WWW-Authenticate"]
    assert challenge == f'Bearer resource_metadata="{url}/.well-known/oauth-protected-resource/mcp/"', challenge
get = lambda path: json.load(urllib.request.urlopen(url + path, timeout=30))
resource = get("/.well-known/oauth-protected-resource/mcp/")
assert resource["authorization_servers"] == [url], resource
server = get("/.well-known/oauth-authorization-server")
assert server["issuer"] == url and server["code_challenge_methods_supported"] == ["S256"], server
assert server["registration_endpoint"] == url + "/register", server
assert server["authorization_endpoint"] == url + "/authorize", server
PY

# One sign-in as client "compose $1": registration, the approval page, the approval at the core's
# terminal (attended), then the approved page's redirect back with the code. Writes the
# client, its PKCE verifier, its redirect and the code to $work/oauth-$1.json.
sign_in() {
    local client="compose $1" grant="$work/oauth-$1.json"
    python3 - "$url" "$client" >"$grant" <<'PY' || fail "the sign-in of $client could not start"
import base64, hashlib, json, re, secrets, sys, urllib.parse, urllib.request
url, name = sys.argv[1:3]
redirect = "http://127.0.0.1:9/callback"
registration = json.dumps({"client_name": name, "redirect_uris": [redirect]}).encode()
client = json.load(urllib.request.urlopen(urllib.request.Request(
    url + "/register", data=registration, headers={"Content-Type": "application/json"}), timeout=30))
verifier = secrets.token_urlsafe(48)
challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
query = urllib.parse.urlencode({"response_type": "code", "client_id": client["client_id"], "redirect_uri": redirect,
    "state": "compose", "code_challenge": challenge, "code_challenge_method": "S256"})
page = urllib.request.urlopen(url + "/authorize?" + query, timeout=30).read().decode()
json.dump({"client_id": client["client_id"], "verifier": verifier, "redirect": redirect,
           "approval": re.search(r'id="approval-code">([^<]+)<', page).group(1),
           "request": re.search(r'url=/authorize/wait\?request=([^"]+)"', page).group(1)}, sys.stdout)
PY
    local approval_code
    approval_code=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["approval"])' "$grant")
    say "OAuth: approving $approval_code for $client at the core's terminal (attended)"
    attended y "$compose_line exec core world-core session approve $approval_code --store /data/world.db \
    --episode ep-oauth --grant world.apply=world:100" ||
        { sed 's/^/  /' "$work/tty.log" >&2; fail "attended session approve failed"; }
    python3 - "$url" "$grant" <<'PY' || fail "the approved sign-in of $client did not redirect back as it should"
import json, sys, urllib.error, urllib.parse, urllib.request
url, path = sys.argv[1:3]
start = json.load(open(path))

class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None

try:
    urllib.request.build_opener(NoRedirect).open(url + "/authorize/wait?request=" + start["request"], timeout=60)
    raise SystemExit("the approved page did not redirect")
except urllib.error.HTTPError as moved:
    assert moved.code == 302, moved.code
    location = moved.headers["Location"]
base, _, query = location.partition("?")
back = dict(urllib.parse.parse_qsl(query))
assert base == start["redirect"] and back["state"] == "compose" and back["iss"] == url, location
json.dump({**start, "code": back["code"]}, open(path, "w"))
PY
}
sign_in code
sign_in refresh

say "OAuth: the first code exchanged, then reused; the second sign-in refreshed, then its refresh token reused"
python3 - "$url" "$work/oauth-code.json" "$work/oauth-refresh.json" <<'PY' || fail "the OAuth tokens through the proxy did not behave as they should"
import json, sys, urllib.error, urllib.parse, urllib.request
url = sys.argv[1]
exchanged, refreshed = (json.load(open(path)) for path in sys.argv[2:4])

def token(form):
    request = urllib.request.Request(url + "/token", data=urllib.parse.urlencode(form).encode(),
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as refused:
        return refused.code, json.load(refused)

def exchange(grant):
    return token({"grant_type": "authorization_code", "client_id": grant["client_id"], "code": grant["code"],
                  "redirect_uri": grant["redirect"], "code_verifier": grant["verifier"]})

def tools(access):
    """The status of an MCP tools/list with this access token, and the tools it names."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    request = urllib.request.Request(url + "/mcp/", data=body, headers={"Authorization": "Bearer " + access,
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read().decode()
    except urllib.error.HTTPError as denied:
        return denied.code, []
    data = json.loads(next(line[6:] for line in text.splitlines() if line.startswith("data: ")))
    return 200, [tool["name"] for tool in data["result"]["tools"]]

status, first = exchange(exchanged)
assert status == 200, (status, first)
assert tools(first["access_token"]) == (200, ["tools_decho"]), tools(first["access_token"])
status, reused = exchange(exchanged)
assert (status, reused["error"]) == (400, "invalid_grant"), (status, reused)
assert tools(first["access_token"])[0] == 401, "a reused code did not end the sign-in"
print("test-compose: OAuth code exchanged once; its reuse ended the sign-in")

status, first = exchange(refreshed)
assert status == 200, first
refresh = {"grant_type": "refresh_token", "client_id": refreshed["client_id"], "refresh_token": first["refresh_token"]}
status, second = token(refresh)
assert status == 200 and second["access_token"] != first["access_token"], second
assert (tools(first["access_token"])[0], tools(second["access_token"])[0]) == (200, 200)
status, reused = token(refresh)
assert (status, reused["error"]) == (400, "invalid_grant"), reused
assert (tools(first["access_token"])[0], tools(second["access_token"])[0]) == (401, 401), \
    "reuse did not end the sign-in"
print("test-compose: OAuth refresh rotated once; its reuse ended the sign-in")
PY
say "OAuth sign-in through the proxy behaved"

# --- an edge dies mid-traffic -------------------------------------------------
victim=$(head -n 1 <<<"$edge_ids")
say "killing edge ${victim:0:12} while 4 clients call through the proxy"
python3 - "$url" "$token" "$run_id" "$victim" <<'PY' || fail "the proxy's clients did not keep succeeding through an edge's death"
import json, subprocess, sys, threading, time, urllib.error, urllib.request

url, token, run_id, victim = sys.argv[1:5]
calls, lock = [], threading.Lock()  # (started, ended, outcome)
stop = time.monotonic() + 12

def call(client, i):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tasks/send", "params": {
        "id": f"kill-{run_id}-{client}-{i}", "metadata": {"skill_id": "tools.echo"},
        "message": {"role": "user", "parts": [{"type": "data", "data": {"n": i}}]}}}).encode()
    request = urllib.request.Request(url + "/a2a/", data=body, headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            state = json.load(response)["result"]["status"]["state"]
            return "ok" if state == "completed" else f"state {state}"
    except urllib.error.HTTPError as error:
        return f"HTTP {error.code}"  # a whole answer, refusing
    except Exception as error:
        return f"broken: {error!r}"

def client(c):
    i = 0
    while time.monotonic() < stop:
        i += 1
        started = time.monotonic()
        outcome = call(c, i)
        with lock:
            calls.append((started, time.monotonic(), outcome))

threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
for thread in threads:
    thread.start()
time.sleep(3)
kill_started = time.monotonic()
subprocess.run(["docker", "kill", victim], check=True, capture_output=True)
kill_ended = time.monotonic()
for thread in threads:
    thread.join()
# The replica dies somewhere between the kill's start and its return: a call that overlaps
# that window may have been in flight on it.
overlaps = lambda c: c[0] < kill_ended and c[1] > kill_started
in_flight = [c for c in calls if overlaps(c)]
others = [c for c in calls if not overlaps(c)]
after = [c for c in others if c[0] >= kill_ended]
failed = [c[2] for c in others if c[2] != "ok"]
broken = [c[2] for c in in_flight if c[2].startswith("broken")]
print(f"test-compose: {len(calls)} calls, {len(after)} after the kill; "
      f"in flight at the kill: {[c[2] for c in in_flight]}")
assert not failed, f"calls not in flight at the kill failed: {failed}"
assert not broken, f"calls in flight at the kill ended without a whole answer: {broken}"
assert len(after) >= 8, f"too few calls after the kill: {len(after)}"
PY

# --- traces -------------------------------------------------------------------
# The receiver answers Jaeger's /api/traces; the query runs inside the
# network (from the proxy container), exactly as it would against Jaeger.
traces() { compose exec -T proxy curl -fsS --max-time 10 "http://jaeger:16686/api/traces?service=$1&limit=1000"; }
check_traces() {
    traces world-core >"$work/core-traces.json" && python3 - "$work/core-traces.json" "$work/sent-traces" "$@" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))["data"]
sent = set(open(sys.argv[2]).read().split())
require_edge = sys.argv[3] == "1"
invocation = {"rpc.server", "invoke", "capsule.run"}
core_traces = joint = admitted = from_client = edge_spans = 0
for trace in data:
    services = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    spans = [(services[s["processID"]], s["operationName"]) for s in trace["spans"]]
    core_ops = {op for svc, op in spans if svc == "world-core"}
    edge = [op for svc, op in spans if svc == "world-edge"]
    edge_spans += len(edge)
    admitted += "admit" in core_ops
    if invocation <= core_ops:
        core_traces += 1
        joint += bool(edge)
        from_client += trace["traceID"] in sent
print(f"core-invocation-traces={core_traces} with-admit={admitted} edge+core-traces={joint} "
      f"edge-spans={edge_spans} continuing-client-traceparent={from_client}")
calls = len(sent)
ok = core_traces >= calls and admitted > 0 and (
    (joint >= calls and from_client >= calls) or (not require_edge and edge_spans == 0))
sys.exit(0 if ok else 1)
PY
}
require_edge=${WORLD_COMPOSE_REQUIRE_EDGE_SPANS:-1}
say "waiting for traces at the receiver"
until=$((SECONDS + 60))
until check_traces "$require_edge" >"$work/trace-check.txt" 2>&1; do
    [ "$SECONDS" -lt "$until" ] || { cat "$work/trace-check.txt" >&2; fail "the traces did not reach the receiver as expected"; }
    sleep 2
done
say "traces: $(cat "$work/trace-check.txt")"
if grep -q 'edge-spans=0' "$work/trace-check.txt"; then
    say "NOTE: the edge exported no spans; only the core's spans were asserted"
fi
