/* test-interop.c — sessions against real, unmodified MCP servers from the
 * npm registry (pinned in tests/interop/package-lock.json). */
#include "config.h"

#include <string.h>

#include "mcp-jsonrpc.h"
#include "mcp-protocol.h"
#include "mcp-session.h"
#include "test-util.h"

static gboolean
has_tool (json_t     *tools,
          const char *name)
{
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    if (g_strcmp0 (mcp_json_get_string (tool, "name"), name) == 0)
      return TRUE;
  return FALSE;
}

static void
test_everything (void)
{
  g_autofree char *entry = test_interop_file ("@modelcontextprotocol/server-everything/dist/index.js");
  g_autoptr(TestIoThread) io = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(json_t) info = NULL;
  g_autoptr(json_t) params = NULL;
  g_autoptr(json_t) result = NULL;
  g_autoptr(GError) error = NULL;
  json_t *tool;
  size_t index;
  GPid pid;

  if (entry == NULL)
    return;

  io = test_io_thread_new ();
  config = mcp_server_config_new ("everything", "node", (const char *[]) { entry, "stdio", NULL });
  session = mcp_session_start (config, test_io_thread_get_context (io), NULL, NULL, &error);
  g_assert_no_error (error);
  pid = mcp_session_get_pid (session);

  /* The server announces list_changed before and after the handshake;
   * the session must have tolerated it. */
  g_assert_cmpstr (mcp_session_get_protocol_version (session), ==, MCP_PROTOCOL_VERSION_NEWEST);
  info = mcp_session_dup_server_info (session);
  g_assert_cmpstr (mcp_json_get_string (info, "name"), ==, "mcp-servers/everything");

  tools = mcp_session_dup_tools (session);
  g_assert_cmpuint (json_array_size (tools), >=, 5);
  g_assert_true (has_tool (tools, "echo"));
  g_assert_true (has_tool (tools, "get-sum"));
  json_array_foreach (tools, index, tool)
    g_assert_true (json_is_object (json_object_get (tool, "inputSchema")));

  params = json_pack ("{s:s, s:{s:s}}", "name", "echo", "arguments", "message", "hello pool");
  result = mcp_session_call (session, "tools/call", params, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text"),
                   ==, "Echo: hello pool");

  /* Observed: with a live timer it ignores stdin EOF; the group still goes. */
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_assert_true (test_process_group_gone (pid));
  test_assert_no_children ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  json_object_seed (0);
  g_test_add_func ("/interop/server-everything/handshake-tools-echo", test_everything);
  return g_test_run ();
}
