#!/bin/bash
# Checks data/mcp-pool.bash-completion by calling its completion function
# with COMP_WORDS and COMP_CWORD set as bash sets them.

srcdir=${G_TEST_SRCDIR:-$(dirname "$0")}/..
program=${MCP_POOL_MCP_POOL:-mcp-pool}
failures=0

# shellcheck source=/dev/null
source "$srcdir/data/mcp-pool.bash-completion" || exit 1

scratch=$(mktemp -d) || exit 1
trap 'rm -rf "$scratch"' EXIT
cat > "$scratch/servers.json" <<'JSON'
{ "mcpServers": { "alpha": { "command": "/bin/true" },
                  "beta-2": { "command": "/bin/cat" },
                  "remote": { "url": "http://localhost:1" } } }
JSON
touch "$scratch/script.py"
# Nothing of the user's own configuration.
export HOME=$scratch/home
mkdir -p "$HOME"
unset MCP_POOL_CONFIG
cd "$scratch" || exit 1

# expect "WANTED REPLIES" WORD… : the replies, sorted and joined by spaces.
expect()
{
    local wanted=$1 got
    shift
    COMP_WORDS=("$program" "$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _mcp_pool
    got=$(printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort | tr '\n' ' ')
    got=${got% }
    if [[ $got == "$wanted" ]]; then
        echo "ok: mcp-pool $*"
    else
        echo "FAIL: mcp-pool $*: wanted “$wanted”, got “$got”"
        failures=$((failures + 1))
    fi
}

expect "--help --version auth call demo doctor evict help reload run serve servers tools" ""
expect "serve servers" se
expect "reload run" r
expect "reload" rel
expect "--version" --v
expect "--allow-remote --config --expose --fresh-python --help --listen --max-message-bytes --max-pending --max-sessions --path --server --shared --timeout --token-file --verbose" serve --
expect "--calls --help" demo --
expect "--config --help --run-timeout --servers --shared --timeout --verbose" run --
expect "--config --help --shared --timeout --verbose" reload --
expect "--config --help --timeout --verbose" doctor --
expect "--shared" servers --sh
expect "--shared" tools --sh
expect "--shared" call --sh
expect "--shared" evict --sh
expect "--shared" reload --s
expect "--logout" auth --l
expect "--shared" auth --sh
expect "" doctor --sh
expect "" demo --sh
expect "--json" servers --j
expect "code gateway proxy" serve --expose ""
expect "alpha beta-2 remote" serve --config servers.json --server ""
expect "--server=beta-2" serve -c servers.json --server=b
expect "code,gateway code,proxy" serve -e code,
expect "code,proxy,gateway" serve --expose = code,proxy,
expect "--expose=gateway" serve --expose=g
expect "servers.json" serve --config serv
expect "servers.json" doctor -c serv
expect "--config=servers.json" tools --config=serv
expect "alpha beta-2 remote" tools --config servers.json ""
expect "beta-2" evict -c servers.json b
# --shared does not go with --config: the names come from $MCP_POOL_CONFIG.
MCP_POOL_CONFIG=servers.json expect "alpha beta-2 remote" evict --shared ""
MCP_POOL_CONFIG=servers.json expect "alpha" call --shared a
expect "servers.json" reload -c serv
expect "" reload ""
expect "" reload --shared ""
expect "alpha" call --config=servers.json a
expect "" call --config=servers.json alpha ""
expect "alpha,beta-2 alpha,remote" run -c servers.json --servers alpha,
expect "script.py" run -c servers.json scr
expect "" tools --config missing.json ""
expect "" tools --timeout ""
expect "--url" tools --ur
expect "--oauth --oauth-client-id --oauth-client-secret" call --oauth
expect "" servers --ur
expect "http sse" tools --url https://example.com/mcp --transport ""
expect "--transport=sse" call --transport=s
expect "" tools --url https://example.com/mcp ""
expect "" call --config servers.json --url https://example.com/mcp ""
expect "" call -H ""
expect "--elicitation" call --eli
expect "" tools --eli
expect "accept-defaults decline" call --elicitation ""
expect "--elicitation=accept-defaults" call --elicitation=a
COMP_WORDS=(/nonexistent/mcp-pool tools "")
COMP_CWORD=2
_mcp_pool && [[ ${#COMPREPLY[@]} == 0 ]] && echo "ok: a missing program completes nothing" ||
    { echo "FAIL: a missing program"; failures=$((failures + 1)); }

if ((failures > 0)); then
    echo "$failures check(s) failed"
    exit 1
fi
