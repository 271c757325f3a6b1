/* fuzz-sandbox-rpc.c — libFuzzer target: one line of the sandbox's RPC
 * channel, as the code in the sandbox may write anything there.
 *
 * The line is parsed and classified as the sandbox's reader does, and a
 * request gets the reply the host would send back, from the same handler
 * as a real run (list_servers, list_tools, query_tool_docs,
 * search_tool_docs, call_tool) over a pool with no servers, so nothing is
 * spawned and no bwrap runs.  The run may call "fuzz" and "other", which
 * the pool does not know.  A bug is any sanitizer report, a critical, or a
 * reply that is not one JSON line with the request's id and either a
 * result or an error with a message.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "sandbox/mcp-code.h"
#include "common/mcp-jsonrpc.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const char * const run_servers[] = { "fuzz", "other", NULL };

static McpPool *pool;
static McpCode *code;

static void
check_reply (json_t *request,
             json_t *reply)
{
  json_t *error = json_object_get (reply, "error");
  g_autofree char *line = NULL;
  gsize length;

  g_assert_true (json_is_object (reply));
  g_assert_true (json_equal (json_object_get (reply, "id"), json_object_get (request, "id")));
  g_assert_true ((json_object_get (reply, "result") != NULL) != (error != NULL));
  if (error != NULL)
    g_assert_nonnull (mcp_json_get_string (error, "message"));

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

  if (code == NULL)
    {
      /* bwrap is never reached: nothing here starts a sandbox. */
      McpCodeOptions options = { .limits.bwrap = "/nonexistent/bwrap", .keep_warm = FALSE };

      g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
      pool = mcp_pool_new (NULL, NULL, NULL);
      code = mcp_code_new (pool, NULL, &options);
    }

  request = mcp_jsonrpc_parse ((const char *) data, size, NULL);
  if (request == NULL || mcp_jsonrpc_classify (request) != MCP_MESSAGE_REQUEST)
    return 0;
  reply = mcp_code_reply_rpc (code, run_servers, request);
  check_reply (request, reply);
  return 0;
}
