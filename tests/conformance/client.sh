#!/bin/sh
# The client that `conformance client --command` runs: the suite appends its
# test server's URL and names the scenario in $MCP_CONFORMANCE_SCENARIO
# (scenario data, e.g. pre-registered credentials, as JSON in
# $MCP_CONFORMANCE_CONTEXT).  Each scenario is mapped to the ad-hoc remote
# commands of the CLI, `mcp-pool tools --url` and `mcp-pool call --url`, so
# the suite tests what a user runs.  $MCP_POOL_MCP_POOL names the binary
# (tests/conformance/run sets it to the build's).
#
# Scenario (spec version)               what the suite checks / what we run
# ------------------------------------  --------------------------------------
# initialize (2025-06-18, 2025-11-25)   initialize with a known protocolVersion
#                                       and clientInfo: `tools --url URL`
# tools_call (2025-06-18, 2025-11-25)   add_numbers called with {a, b}:
#                                       `call --url URL add_numbers {"a":2,"b":3}`
# elicitation-sep1034-client-defaults   the elicitation during the call is
#   (2025-11-25)                        accepted with each field's default:
#                                       `call --url URL --elicitation
#                                       accept-defaults test_client_elicitation_defaults`
# sse-retry (2025-11-25)                the server closes the call's SSE stream
#                                       after `retry: 500`; the client waits
#                                       that long, GETs with Last-Event-ID and
#                                       takes the result from the GET stream:
#                                       `call --url URL test_reconnection`
# auth/metadata-default, -var1, -var2,  PRM and AS metadata discovery (each
#   -var3 (2025-11-25)                  well-known and path variant), DCR,
#                                       PKCE S256, token, then the call:
#                                       `call --url URL test-tool`
# auth/scope-from-www-authenticate,     the scope requested: from
#   -from-scopes-supported,             WWW-Authenticate, else scopes_supported,
#   -omitted-when-undefined (2025-11-25) else none: `call --url URL test-tool`
# auth/scope-step-up (2025-11-25)       403 insufficient_scope on tools/call:
#                                       a second login with the wider scope:
#                                       `call --url URL test-tool`
# auth/scope-retry-limit (2025-11-25)   a 403 that never ends: at most 3
#                                       logins, then an error (allowed here):
#                                       `call --url URL test-tool`
# auth/token-endpoint-auth-basic, -post, the token endpoint authenticated as
#   -none (2025-06-18, 2025-11-25)      advertised, `resource` (RFC 8707) sent
#                                       in both requests: `call --url URL test-tool`
# auth/pre-registration (2025-11-25)    no DCR; the context's client id and
#                                       secret, sent with client_secret_basic:
#                                       `call --url URL --oauth-client-id ID
#                                       --oauth-client-secret S test-tool`
# auth/basic-cimd (2025-11-25)          the AS supports Client ID Metadata
#                                       Documents: client_id is our HTTPS URL:
#                                       `call --url URL --oauth-client-id
#                                       https://conformance-test.local/client-metadata.json test-tool`
# auth/2025-03-26-oauth-metadata-backcompat, -oauth-endpoint-fallback
#   (2025-03-26)                        no PRM: AS metadata at the server's
#                                       root, else /authorize, /token and
#                                       /register there: `call --url URL test-tool`
# auth/resource-mismatch (draft)        the PRM names another resource: no
#                                       login at all, an error (allowed):
#                                       `call --url URL test-tool`
# auth/offline-access-scope,            refresh_token among the DCR grant
#   auth/offline-access-not-supported   types; offline_access never asked for
#   (draft)                             when the AS does not list it:
#                                       `call --url URL test-tool`
# request-metadata (2026-07-28)         every POST's _meta and MCP-Protocol-Version,
#                                       a retry after -32022 names 2026-07-28 as
#                                       supported: `tools --url URL`
# http-standard-headers (2026-07-28)    Mcp-Method on every POST, Mcp-Name on
#                                       tools/call: `tools`, then
#                                       `call --url URL test_headers {}`
# sep-2322-client-request-state         InputRequiredResults: the retry echoes
#   (2026-07-28)                        requestState (or sends none), with a new
#                                       id, only for its own call; no resultType
#                                       means complete: `call --elicitation
#                                       accept-defaults` of each test_mrtr_* tool
# json-schema-ref-no-deref (2026-07-28) a $ref to a network URL is never fetched:
#                                       `tools --url URL`
# json-schema-2020-12-preservation      the inputSchema of json_schema_2020_12_tool
#   (2025-11-25, 2026-07-28)            as listed, passed to json_schema_echo:
#                                       `tools --json`, then `call json_schema_echo`
# http-custom-headers (2026-07-28)      x-mcp-header parameters mirrored into
#                                       Mcp-Param-* headers, encoded: each call
#                                       of the context's toolCalls, `call`
# http-invalid-tool-headers (2026-07-28) tools with invalid x-mcp-header
#                                       annotations left out: `call` of every
#                                       tool `tools --json` lists
# auth/client-credentials-basic         client_credentials grant, the context's
#   (extension)                         secret sent with client_secret_basic:
#                                       `call --url URL --oauth '{"grant":
#                                       "client_credentials", "clientId", "clientSecret"}'`
# auth/client-credentials-jwt           the same with the context's EC key in a
#   (extension)                         0600 file: a private_key_jwt assertion,
#                                       `--oauth '{…, "privateKeyFile": FILE}'`
# auth/cross-app-access-complete-flow   the context's ID token exchanged at its
#   (extension)                         IdP for an ID-JAG, then a JWT bearer grant:
#                                       `--oauth '{"grant": "enterprise", …,
#                                       "idp": {"tokenEndpoint", "clientId",
#                                       "idTokenFile": FILE}}'`
#
# Logins are real: the CLI opens the authorization URL with $MCP_POOL_BROWSER,
# here visit-url, which follows the authorization server's redirect to the
# CLI's loopback listener.  Every run gets its own HOME, XDG directories and
# no session bus, so no user's config, keyring or tokens are read or written,
# and tokens of one scenario cannot satisfy another.
set -eu

url=${1:?usage: client.sh SERVER_URL (run by conformance client --command)}
scenario=${MCP_CONFORMANCE_SCENARIO:?MCP_CONFORMANCE_SCENARIO is not set}
here=$(cd "$(dirname "$0")" && pwd)
mcp_pool=${MCP_POOL_MCP_POOL:-mcp-pool}

state=$(mktemp -d "${TMPDIR:-/tmp}/mcp-pool-conformance.XXXXXX")
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/config" "$state/data" "$state/state" "$state/cache" "$state/run"
chmod 0700 "$state/run"
export HOME="$state" XDG_CONFIG_HOME="$state/config" XDG_DATA_HOME="$state/data" \
  XDG_STATE_HOME="$state/state" XDG_CACHE_HOME="$state/cache" XDG_RUNTIME_DIR="$state/run"
# No Secret Service: tokens go to the 0600 file under $XDG_STATE_HOME.
export DBUS_SESSION_BUS_ADDRESS="unix:path=$state/run/no-bus"
export MCP_POOL_BROWSER="$here/visit-url"
export no_proxy="localhost,127.0.0.1,::1" NO_PROXY="localhost,127.0.0.1,::1"
unset MCP_POOL_CONFIG

# A field of $MCP_CONFORMANCE_CONTEXT.
context() {
  python3 -c 'import json, os, sys; print(json.loads(os.environ["MCP_CONFORMANCE_CONTEXT"])[sys.argv[1]])' "$1"
}

# Not exec: the trap removes the run's directory afterwards.
call() {
  "$mcp_pool" call --url "$url" "$@"
}

case "$scenario" in
  initialize)
    "$mcp_pool" tools --url "$url" ;;
  tools_call)
    call add_numbers '{"a": 2, "b": 3}' ;;
  elicitation-sep1034-client-defaults)
    call --elicitation accept-defaults test_client_elicitation_defaults '{}' ;;
  sse-retry)
    call test_reconnection '{}' ;;
  request-metadata | json-schema-ref-no-deref)
    "$mcp_pool" tools --url "$url" ;;
  http-standard-headers)
    "$mcp_pool" tools --url "$url" >/dev/null
    call test_headers '{}' ;;
  sep-2322-client-request-state)
    for tool in test_mrtr_echo_state test_mrtr_no_state test_mrtr_unrelated test_mrtr_no_result_type; do
      call --elicitation accept-defaults "$tool" '{}'
    done ;;
  json-schema-2020-12-preservation)
    schema=$("$mcp_pool" tools --url "$url" --json | python3 -c '
import json, sys
tools = json.load(sys.stdin)
tools = tools.get("tools", tools) if isinstance(tools, dict) else tools
print(json.dumps({"schema": next(t["inputSchema"] for t in tools if t["name"].endswith("json_schema_2020_12_tool"))}))')
    call json_schema_echo "$schema" ;;
  http-custom-headers)
    printf '%s' "$MCP_CONFORMANCE_CONTEXT" | python3 -c '
import json, sys
for call in json.load(sys.stdin)["toolCalls"]:
    print(call["name"], json.dumps(call["arguments"]))' |
    while read -r tool arguments; do
      call "$tool" "$arguments"
    done ;;
  http-invalid-tool-headers)
    for tool in $("$mcp_pool" tools --url "$url" --json | python3 -c '
import json, sys
tools = json.load(sys.stdin)
tools = tools.get("tools", tools) if isinstance(tools, dict) else tools
print(" ".join(t["name"] for t in tools))'); do
      call "$tool" '{"region": "us-west1"}'
    done ;;
  auth/pre-registration)
    call --oauth-client-id "$(context client_id)" \
         --oauth-client-secret "$(context client_secret)" test-tool '{}' ;;
  auth/basic-cimd)
    call --oauth-client-id https://conformance-test.local/client-metadata.json test-tool '{}' ;;
  auth/client-credentials-basic | auth/client-credentials-jwt | auth/cross-app-access-complete-flow)
    # The context's secrets go in files and the --oauth object, as a user
    # would write them in the entry.
    oauth=$(printf '%s' "$MCP_CONFORMANCE_CONTEXT" | python3 -c '
import json, os, sys
context = json.load(sys.stdin)
state = sys.argv[1]
def secret_file(name, text):
    path = os.path.join(state, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(text)
    return path
oauth = {"grant": "client_credentials", "clientId": context["client_id"]}
if "private_key_pem" in context:
    oauth["privateKeyFile"] = secret_file("client-key.pem", context["private_key_pem"])
if "client_secret" in context:
    oauth["clientSecret"] = context["client_secret"]
if "idp_id_token" in context:
    oauth["grant"] = "enterprise"
    oauth["idp"] = {"tokenEndpoint": context["idp_token_endpoint"],
                    "clientId": context["idp_client_id"],
                    "idTokenFile": secret_file("id-token", context["idp_id_token"])}
print(json.dumps(oauth))' "$state")
    call --oauth "$oauth" test-tool '{}' ;;
  auth/*)
    call test-tool '{}' ;;
  *)
    echo "client.sh: no mapping for the scenario '$scenario': add it to tests/conformance/client.sh" >&2
    exit 2 ;;
esac
