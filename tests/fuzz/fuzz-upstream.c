/* fuzz-upstream.c — libFuzzer target: one message from the upstream
 * client (the LLM's MCP client), answered as `mcp-pool serve` answers it.
 *
 * The bytes are parsed as a JSON-RPC message; a request goes to
 * mcp_upstream_handle_request() with the gateway and proxy tools exposed
 * over a pool with no servers (nothing is spawned).  A bug is any
 * sanitizer report, a critical, or a reply that is not a JSON-RPC 2.0
 * response to the same id, with either a result object or an error with
 * an integer code and a message, that encodes as one line.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "mcp/mcp-expose.h"
#include "common/mcp-jsonrpc.h"
#include "mcp/mcp-upstream.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static McpPool *pool;
static McpExpose *expose;

static void
on_progress (json_t   *params,
             gpointer  user_data)
{
  /* No server runs, so no progress can come. */
  g_assert_not_reached ();
}

static void
check_reply (json_t *request,
             json_t *reply)
{
  json_t *result = json_object_get (reply, "result");
  json_t *error = json_object_get (reply, "error");
  g_autofree char *line = NULL;
  gsize length;

  g_assert_true (json_is_object (reply));
  g_assert_cmpstr (mcp_json_get_string (reply, "jsonrpc"), ==, "2.0");
  g_assert_true (json_equal (json_object_get (reply, "id"), json_object_get (request, "id")));
  g_assert_cmpint (mcp_jsonrpc_classify (reply), ==, MCP_MESSAGE_RESPONSE);
  g_assert_true ((result != NULL) != (error != NULL));
  if (result != NULL)
    g_assert_true (json_is_object (result));
  else
    {
      g_assert_true (json_is_integer (json_object_get (error, "code")));
      g_assert_nonnull (mcp_json_get_string (error, "message"));
    }

  line = mcp_jsonrpc_to_line (reply, &length, NULL);
  g_assert_nonnull (line);
  g_assert_null (memchr (line, '\n', length - 1));
}

int
LLVMFuzzerTestOneInput (const uint8_t *data,
                        size_t         size)
{
  g_autoptr(json_t) request = NULL;
  g_autoptr(json_t) reply = NULL;

  if (expose == NULL)
    {
      g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
      pool = mcp_pool_new (NULL, NULL, NULL);
      expose = mcp_expose_new (pool, MCP_EXPOSE_GATEWAY | MCP_EXPOSE_PROXY,
                               MCP_CALL_TIMEOUT_DEFAULT_MS, NULL);
    }

  request = mcp_jsonrpc_parse ((const char *) data, size, NULL);
  if (request == NULL || mcp_jsonrpc_classify (request) != MCP_MESSAGE_REQUEST)
    return 0;
  reply = mcp_upstream_handle_request (expose, request, NULL, 0, NULL, on_progress, NULL);
  check_reply (request, reply);
  return 0;
}
