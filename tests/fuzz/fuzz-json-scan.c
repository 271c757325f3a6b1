/* fuzz-json-scan.c — libFuzzer target: the JSON scanner against Jansson.
 *
 * The input is one JSON text.  The scanner must accept exactly what
 * json_loadb (JSON_DECODE_ANY | JSON_ALLOW_NUL) accepts (the flags of
 * mcp_jsonrpc_parse()), call a "\u0000" in a member name what Jansson
 * calls it, and for an object report each member once, with a span that
 * Jansson reads, and mcp_json_scan_load() loads, as the value it kept for
 * that name.  The one difference the scanner documents, a NUL byte right
 * after a number or literal that Jansson skips, is turned into the space
 * Jansson reads it as, and the comparison goes on.  A line that mcp_raw_call_parse() takes must be,
 * parsed, the tools/call it says it is.  Any disagreement aborts.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "common/mcp-json-scan.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-raw-call.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define LOAD_FLAGS (JSON_DECODE_ANY | JSON_ALLOW_NUL)

/* Scans @text, replacing each NUL the scanner calls stray by a space. */
static McpJsonScan *
scan_as_jansson_reads (char    *text,
                       gsize    size,
                       GError **error)
{
  for (;;)
    {
      g_autoptr(GError) local_error = NULL;
      gsize offset = 0;
      McpJsonScan *scan = mcp_json_scan (text, size, &offset, &local_error);

      if (scan != NULL)
        return scan;
      if (!g_error_matches (local_error, MCP_JSON_SCAN_ERROR, MCP_JSON_SCAN_ERROR_STRAY_NUL))
        {
          g_propagate_error (error, g_steal_pointer (&local_error));
          return NULL;
        }
      g_assert_cmpuint (offset, <, size);
      g_assert_cmpint (text[offset], ==, '\0');
      text[offset] = ' ';
    }
}

static void
check_members (const char  *text,
               gsize        size,
               json_t      *value,
               McpJsonScan *scan)
{
  static const char * const names[] = { "result", "error", "method", "params", NULL };
  int first = -1;

  g_assert_cmpint (scan->is_object, ==, json_is_object (value));
  if (!scan->is_object)
    {
      g_assert_cmpuint (scan->members->len, ==, 0);
      return;
    }
  g_assert_cmpuint (scan->members->len, ==, json_object_size (value));
  for (guint i = 0; i < scan->members->len; i++)
    {
      const McpJsonMember *member = &g_array_index (scan->members, McpJsonMember, i);
      json_t *expected = json_object_get (value, member->name);
      g_autoptr(json_t) spanned = NULL;

      g_assert_nonnull (expected);
      g_assert_cmpuint (member->start, <, member->end);
      g_assert_true (mcp_json_scan_lookup (scan, member->name) == member);
      spanned = json_loadb (text + member->start, member->end - member->start, LOAD_FLAGS, NULL);
      if (spanned == NULL || !json_equal (spanned, expected))
        g_error ("The span of member “%s” is not its value: %.*s", member->name,
                 (int) MIN (member->end - member->start, 200), text + member->start);
      g_clear_pointer (&spanned, json_decref);
      spanned = mcp_json_scan_load (text, member);
      if (spanned == NULL || !json_equal (spanned, expected))
        g_error ("mcp_json_scan_load() of member “%s” is not its value: %.*s", member->name,
                 (int) MIN (member->end - member->start, 200), text + member->start);
      for (int n = 0; first < 0 && names[n] != NULL; n++)
        if (strcmp (member->name, names[n]) == 0)
          first = n;
    }
  /* Members come in the order their names first appear. */
  g_assert_cmpint (mcp_json_scan_find_first (text, size, names), ==, first);
}

/* What a raw call holds is what the parsed request holds, and it takes
 * only requests the warm path takes whole: params of a name and, maybe,
 * an object of arguments and a _meta without a progress token. */
static void
check_raw_call (const char *text,
                gsize       size,
                json_t     *value)
{
  g_auto(McpRawCall) call = { 0 };
  json_t *params;
  json_t *arguments;
  json_t *meta;
  g_autoptr(json_t) raw_arguments = NULL;

  if (!mcp_raw_call_parse (text, size, NULL, &call))
    return;
  params = json_object_get (value, "params");
  arguments = json_object_get (params, "arguments");
  meta = json_object_get (params, "_meta");
  g_assert_cmpint (mcp_jsonrpc_classify (value), ==, MCP_MESSAGE_REQUEST);
  g_assert_cmpstr (mcp_json_get_string (value, "method"), ==, "tools/call");
  g_assert_true (json_equal (call.id, json_object_get (value, "id")));
  g_assert_cmpstr (call.name, ==, mcp_json_get_string (params, "name"));
  g_assert_cmpuint (json_object_size (params), ==, 1 + (arguments != NULL) + (meta != NULL));
  g_assert_true (meta == NULL ? call.meta == NULL : json_equal (call.meta, meta));
  g_assert_null (json_object_get (meta, "progressToken"));
  g_assert_cmpint (call.arguments != NULL, ==, arguments != NULL);
  if (arguments == NULL)
    return;
  g_assert_true (json_is_object (arguments));
  raw_arguments = json_loadb (call.arguments, call.arguments_length, LOAD_FLAGS, NULL);
  g_assert_true (json_equal (raw_arguments, arguments));
}

int
LLVMFuzzerTestOneInput (const uint8_t *data,
                        size_t         size)
{
  g_autofree char *text = g_memdup2 (data, size);
  g_autoptr(json_t) value = NULL;
  g_autoptr(McpJsonScan) scan = NULL;
  g_autoptr(GError) error = NULL;
  json_error_t json_error;

  value = json_loadb ((const char *) data, size, LOAD_FLAGS, &json_error);
  scan = scan_as_jansson_reads (text, size, &error);

  if (value != NULL && scan == NULL)
    g_error ("Jansson accepts what the scanner refuses: %s", error->message);
  if (value == NULL && scan != NULL)
    g_error ("The scanner accepts what Jansson refuses: %s", json_error.text);
  if (value == NULL)
    {
      g_assert_cmpint (json_error_code (&json_error) == json_error_null_byte_in_key, ==,
                       g_error_matches (error, MCP_JSON_SCAN_ERROR, MCP_JSON_SCAN_ERROR_NUL_IN_NAME));
      return 0;
    }
  check_members (text, size, value, scan);
  check_raw_call ((const char *) data, size, value);
  return 0;
}
