/* mcp-upstream-server.c — one pooled server served as it is.
 *
 * `serve --server NAME` shows a client one server of the pool: the
 * server's own initialize result (capabilities, serverInfo,
 * instructions), its tools from the pool's cache, and every other request
 * passed on to it and answered as it answered, its JSON-RPC errors too.
 * Tool calls without a task take the pool's usual path (mcp-upstream.c,
 * and the warm path); the pool keeps the log level for a restart.
 */
#include "config.h"

#include "mcp/mcp-upstream.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"

/* The revision the client asked for when the server's session speaks it
 * or a newer one (revisions are dates), else the session's. */
static const char *
negotiated_version (const char *asked,
                    const char *session_version)
{
  if (mcp_protocol_version_is_known (asked) && strcmp (asked, session_version) <= 0)
    return asked;
  return session_version;
}

static json_t *
handle_initialize (McpPool    *pool,
                   const char *server,
                   json_t     *id,
                   json_t     *params)
{
  g_autoptr(GError) error = NULL;
  json_t *result = mcp_pool_dup_initialize_result (pool, server, &error);

  if (result == NULL)
    return mcp_upstream_failure_reply (id, MCP_JSONRPC_INTERNAL_ERROR, error);
  json_object_set_new (result, "protocolVersion",
                       json_string (negotiated_version (mcp_json_get_string (params, "protocolVersion"),
                                                        mcp_json_get_string (result, "protocolVersion"))));
  return mcp_jsonrpc_result_new (id, result);
}

static json_t *
handle_tools_list (McpPool    *pool,
                   const char *server,
                   json_t     *id)
{
  g_autoptr(GError) error = NULL;
  json_t *tools = mcp_pool_list_tools (pool, server, MCP_TOOL_DETAIL_FULL, &error);
  json_t *tool;
  size_t index;

  if (tools == NULL)
    return mcp_upstream_failure_reply (id, MCP_JSONRPC_INTERNAL_ERROR, error);
  /* The pool names the server in each tool; the client knows it. */
  json_array_foreach (tools, index, tool)
    json_object_del (tool, "server");
  return mcp_jsonrpc_result_new (id, json_pack ("{s:o}", "tools", tools));
}

json_t *
mcp_upstream_handle_server_request (McpExpose    *expose,
                                    json_t       *request,
                                    gint64        timeout_ms,
                                    GCancellable *cancellable)
{
  McpPool *pool = mcp_expose_get_pool (expose);
  const char *server = mcp_expose_get_server (expose);
  const char *method = mcp_json_get_string (request, "method");
  json_t *id = json_object_get (request, "id");
  json_t *params = json_object_get (request, "params");
  McpCallOptions options = { .timeout_ms = timeout_ms, .cancellable = cancellable };
  g_autoptr(GError) error = NULL;
  json_t *result;

  if (g_str_equal (method, "initialize"))
    return handle_initialize (pool, server, id, params);
  if (g_str_equal (method, "ping"))
    return mcp_jsonrpc_result_new (id, json_object ());
  if (g_str_equal (method, "tools/list"))
    return handle_tools_list (pool, server, id);
  if (g_str_equal (method, "logging/setLevel"))
    {
      if (!mcp_pool_set_log_level (pool, mcp_json_get_string (params, "level"), &error))
        return mcp_upstream_failure_reply (id, MCP_JSONRPC_INVALID_PARAMS, error);
      return mcp_jsonrpc_result_new (id, json_object ());
    }

  result = mcp_pool_request (pool, server, method, params, &options, &error);
  if (result == NULL)
    return mcp_upstream_failure_reply (id, MCP_JSONRPC_INTERNAL_ERROR, error);
  return mcp_jsonrpc_result_new (id, result);
}
