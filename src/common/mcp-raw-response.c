/* mcp-raw-response.c — a JSON-RPC response kept as the line it came as.
 *
 * What counts as a response, and whether it is an error, follows
 * mcp_jsonrpc_classify() and the session's reading of a reply, so that a
 * line taken raw means what it would have meant parsed.
 */
#include "config.h"

#include "common/mcp-raw-response.h"
#include "common/mcp-json-scan.h"
#include "common/mcp-jsonrpc.h"

#include <glib/gi18n-lib.h>

/* The flags of mcp_jsonrpc_parse(), for the parts parsed here. */
#define LOAD_FLAGS (JSON_DECODE_ANY | JSON_ALLOW_NUL)

struct _McpRawResponse {
  gatomicrefcount  ref_count;
  GBytes          *line;
  json_t          *id;            /* an integer, a string or null */
  json_t          *error;         /* NULL for a result */
  gsize            result_start;  /* the result's span in @line, without @error */
  gsize            result_end;
};

static McpRawResponse *
not_a_response (GError **error)
{
  g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_PARSE,
               _("The line is not a JSON-RPC response"));
  return NULL;
}

/* Copies @line.  Fails with MCP_JSONRPC_ERROR_UNSUPPORTED where
 * mcp_jsonrpc_parse() would, and with MCP_JSONRPC_ERROR_PARSE for
 * anything else that is not a response; a caller then parses the line as
 * usual, which also reads the rare lines only Jansson accepts (see
 * mcp-json-scan.h). */
McpRawResponse *
mcp_raw_response_parse (const char  *line,
                        gsize        length,
                        GError     **error)
{
  g_autoptr(GError) scan_error = NULL;
  g_autoptr(McpJsonScan) scan = mcp_json_scan (line, length, NULL, &scan_error);
  g_autoptr(json_t) id = NULL;
  g_autoptr(json_t) remote_error = NULL;
  const McpJsonMember *result;
  McpRawResponse *response;

  if (scan == NULL)
    {
      g_set_error_literal (error, MCP_JSONRPC_ERROR,
                           g_error_matches (scan_error, MCP_JSON_SCAN_ERROR, MCP_JSON_SCAN_ERROR_NUL_IN_NAME)
                           ? MCP_JSONRPC_ERROR_UNSUPPORTED : MCP_JSONRPC_ERROR_PARSE,
                           scan_error->message);
      return NULL;
    }
  if (!scan->is_object || mcp_json_scan_lookup (scan, "method") != NULL)
    return not_a_response (error);

  /* As mcp_jsonrpc_classify(): an id, and a result or an error object. */
  id = mcp_json_scan_load (line, mcp_json_scan_lookup (scan, "id"));
  remote_error = mcp_json_scan_load (line, mcp_json_scan_lookup (scan, "error"));
  result = mcp_json_scan_lookup (scan, "result");
  if (!(mcp_jsonrpc_id_is_valid (id) || json_is_null (id)) ||
      (result == NULL && !json_is_object (remote_error)))
    return not_a_response (error);

  response = g_new0 (McpRawResponse, 1);
  g_atomic_ref_count_init (&response->ref_count);
  response->line = g_bytes_new (line, length);
  response->id = g_steal_pointer (&id);
  /* As the session reads a reply: any error member makes it an error. */
  response->error = g_steal_pointer (&remote_error);
  if (response->error == NULL)
    {
      response->result_start = result->start;
      response->result_end = result->end;
    }
  return response;
}

McpRawResponse *
mcp_raw_response_ref (McpRawResponse *response)
{
  g_atomic_ref_count_inc (&response->ref_count);
  return response;
}

void
mcp_raw_response_unref (McpRawResponse *response)
{
  if (response == NULL || !g_atomic_ref_count_dec (&response->ref_count))
    return;
  g_bytes_unref (response->line);
  json_decref (response->id);
  json_decref (response->error);
  g_free (response);
}

/* Borrowed; json null for a response to an unreadable request. */
json_t *
mcp_raw_response_get_id (McpRawResponse *response)
{
  return response->id;
}

/* Borrowed; NULL unless the response is an error. */
json_t *
mcp_raw_response_get_error (McpRawResponse *response)
{
  return response->error;
}

/* The result's JSON text inside the line (not NUL-terminated), or NULL
 * for an error response. */
const char *
mcp_raw_response_get_result (McpRawResponse *response,
                             gsize          *length)
{
  if (response->error != NULL)
    {
      *length = 0;
      return NULL;
    }
  *length = response->result_end - response->result_start;
  return (const char *) g_bytes_get_data (response->line, NULL) + response->result_start;
}

/* The result parsed, for a caller that needs its value (a rewriting
 * exposure, a blocking call); NULL with @error for an error response. */
json_t *
mcp_raw_response_dup_result (McpRawResponse  *response,
                             GError         **error)
{
  gsize length;
  const char *text = mcp_raw_response_get_result (response, &length);
  json_error_t json_error;
  json_t *result;

  if (text == NULL)
    {
      g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_PARSE,
                   _("The response is an error and has no result"));
      return NULL;
    }
  /* The scan made sure this parses; only memory could run out. */
  result = json_loadb (text, length, LOAD_FLAGS, &json_error);
  if (result == NULL)
    g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_PARSE,
                 _("Not valid JSON at column %d: %s"),
                 json_error.column, json_error.text);
  return result;
}

/* The whole line, without its newline. */
GBytes *
mcp_raw_response_get_line (McpRawResponse *response)
{
  return response->line;
}

/* Whether a line looks like a response from its first members, read up
 * to the first that tells: "result" or "error" before "method" or
 * "params".  Not a validation; mcp_raw_response_parse() decides.  Costs
 * only the members before that one, usually "jsonrpc" and "id". */
gboolean
mcp_raw_response_sniff (const char *line,
                        gsize       length)
{
  static const char * const telling[] = { "result", "error", "method", "params", NULL };
  int first = mcp_json_scan_find_first (line, length, telling);

  return first == 0 || first == 1;
}
