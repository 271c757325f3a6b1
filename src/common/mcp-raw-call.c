/* mcp-raw-call.c — a tools/call request read without parsing it whole.
 *
 * What counts as a request follows mcp_jsonrpc_classify(), and what the
 * warm path of a tools/call accepts follows mcp_upstream_handle_request_warm():
 * a string method, a valid id, params an object with a string name and,
 * if given, an object of arguments.
 */
#include "config.h"

#include "common/mcp-raw-call.h"
#include "common/mcp-json-scan.h"
#include "common/mcp-jsonrpc.h"

#include <string.h>

/* @span, [start, end) of @text, is exactly the JSON string @expected
 * (written without escapes, as every client writes "tools/call"). */
static gboolean
span_is_string (const char *text,
                gsize       start,
                gsize       end,
                const char *expected)
{
  gsize length = strlen (expected);

  return end - start == length + 2 && text[start] == '"' &&
         memcmp (text + start + 1, expected, length) == 0;
}

/* @member's value parsed, or the cache's when it is the same text. */
static json_t *
load_meta (const char          *line,
           const McpJsonMember *member,
           McpRawMetaCache     *cache)
{
  gsize length = member->end - member->start;
  json_t *meta;

  if (cache != NULL && cache->meta != NULL && cache->length == length &&
      memcmp (cache->text, line + member->start, length) == 0)
    return json_incref (cache->meta);
  meta = mcp_json_scan_load (line, member);
  if (cache != NULL && meta != NULL)
    {
      mcp_raw_meta_cache_clear (cache);
      cache->text = g_memdup2 (line + member->start, length);
      cache->length = length;
      cache->meta = json_incref (meta);
    }
  return meta;
}

gboolean
mcp_raw_call_parse (const char      *line,
                    gsize            length,
                    McpRawMetaCache *cache,
                    McpRawCall      *call)
{
  g_autoptr(McpJsonScan) scan = mcp_json_scan_nested (line, length, "params", NULL, NULL);
  g_autoptr(json_t) id = NULL;
  g_autoptr(json_t) name = NULL;
  g_autoptr(json_t) meta = NULL;
  const McpJsonMember *method, *id_member, *name_member, *arguments, *meta_member;

  /* A lone CR is JSON whitespace, but a server that reads lines with
   * universal newlines would split the line there: such a line is
   * parsed and written compactly, as it always was. */
  if (scan == NULL || !scan->is_object || memchr (line, '\r', length) != NULL)
    return FALSE;
  method = mcp_json_scan_lookup (scan, "method");
  if (method == NULL || !span_is_string (line, method->start, method->end, "tools/call") || scan->nested == NULL)
    return FALSE;
  id_member = mcp_json_scan_lookup (scan, "id");
  id = mcp_json_scan_load (line, id_member);
  if (!mcp_jsonrpc_id_is_valid (id))
    return FALSE;

  /* params, an object, holds a name and maybe arguments and a _meta,
   * nothing else; a _meta that asks for progress is the parsed path's. */
  name_member = mcp_json_scan_lookup_nested (scan, "name");
  arguments = mcp_json_scan_lookup_nested (scan, "arguments");
  meta_member = mcp_json_scan_lookup_nested (scan, "_meta");
  if (name_member == NULL || scan->nested->len != 1u + (arguments != NULL) + (meta_member != NULL))
    return FALSE;
  if (meta_member != NULL)
    meta = load_meta (line, meta_member, cache);
  if (meta_member != NULL && (!json_is_object (meta) || json_object_get (meta, "progressToken") != NULL))
    return FALSE;
  if (arguments != NULL && line[arguments->start] != '{')
    return FALSE;
  name = mcp_json_scan_load (line, name_member);
  if (!json_is_string (name))
    return FALSE;

  call->id = g_steal_pointer (&id);
  call->name = g_strdup (json_string_value (name));
  call->meta = g_steal_pointer (&meta);
  call->arguments = arguments != NULL ? line + arguments->start : NULL;
  call->arguments_length = arguments != NULL ? arguments->end - arguments->start : 0;
  return TRUE;
}

void
mcp_raw_call_clear (McpRawCall *call)
{
  g_clear_pointer (&call->id, json_decref);
  g_clear_pointer (&call->name, g_free);
  g_clear_pointer (&call->meta, json_decref);
  call->arguments = NULL;
  call->arguments_length = 0;
}

void
mcp_raw_meta_cache_clear (McpRawMetaCache *cache)
{
  g_clear_pointer (&cache->text, g_free);
  g_clear_pointer (&cache->meta, json_decref);
  cache->length = 0;
}
