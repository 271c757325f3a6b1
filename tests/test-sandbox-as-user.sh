#!/bin/bash
# Runs tests/test-sandbox as an unprivileged user when the suite runs as
# root, so that CI (which runs as root) proves the sandbox holds both ways:
# as root the pool starts bwrap as nobody, as a user bwrap runs as that
# user, and the two take different paths through the kernel.
#
# The build tree may be private (a clone under /root), so the program, the
# fixture server and the runtime are copied to a folder the user can read.

user=${MCP_POOL_TEST_USER:-65534}
builddir=${G_TEST_BUILDDIR:-$(dirname "$0")}
runtime=${MCP_POOL_RUNTIME_DIR:-$(dirname "$0")/../src/sandbox}

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: not root; as a user, tests/test-sandbox itself is the run as a user"
    exit 77
fi
if ! command -v setpriv >/dev/null; then
    echo "SKIP: setpriv (util-linux) is missing, so the tests cannot drop to uid $user"
    exit 77
fi

scratch=$(mktemp -d /tmp/mcp-pool-as-user.XXXXXX) || exit 1
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/home"
cp "$builddir/test-sandbox" "$builddir/mcp-fixture-server" "$runtime/mcp_runtime.py" "$scratch/" || exit 1
chmod 0755 "$scratch"
chown "$user:$user" "$scratch/home"

cd "$scratch" || exit 1
setpriv --reuid="$user" --regid="$user" --clear-groups \
    env HOME="$scratch/home" G_TEST_BUILDDIR="$scratch" MCP_POOL_RUNTIME_DIR="$scratch" \
    "$scratch/test-sandbox" -k --tap
