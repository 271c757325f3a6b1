/* test-json-scan.c — the JSON scanner, raw responses and spliced replies,
 * and tools/call requests read raw. */
#include "config.h"

#include <string.h>

#include "common/mcp-json-scan.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-raw-call.h"
#include "common/mcp-raw-response.h"

#define LOAD_FLAGS (JSON_DECODE_ANY | JSON_ALLOW_NUL)

/* Scans @length bytes (-1: up to the NUL) and checks that Jansson agrees
 * on whether they are JSON. */
static McpJsonScan *
scan_checked (const char *text,
              gssize      length,
              GError    **error)
{
  gsize size = length < 0 ? strlen (text) : (gsize) length;
  g_autoptr(json_t) value = json_loadb (text, size, LOAD_FLAGS, NULL);
  McpJsonScan *scan = mcp_json_scan (text, size, NULL, error);

  if ((value != NULL) != (scan != NULL))
    g_error ("Jansson %s but the scanner %s: %.*s", value ? "accepts" : "refuses",
             scan ? "accepts" : "refuses", (int) MIN (size, 80), text);
  return scan;
}

static void
assert_valid (const char *text)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(McpJsonScan) scan = scan_checked (text, -1, &error);

  g_assert_no_error (error);
}

static void
assert_invalid (const char *text,
                gssize      length)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(McpJsonScan) scan = scan_checked (text, length, &error);

  g_assert_error (error, MCP_JSON_SCAN_ERROR, MCP_JSON_SCAN_ERROR_SYNTAX);
}

static void
test_scalars (void)
{
  static const char * const valid[] = {
    "0", "-0", "1.5", "-12.5e+3", "1E-2", "true", " false ", "null\r\n", "\t\"\"",
    "9223372036854775807", "-9223372036854775808", "1e-400", "1.7976931348623157e308",
    "100000000000000000000.5",
  };
  static const char * const invalid[] = {
    "", " ", "01", "-", "+1", "1.", ".5", "1e", "1e+", "tru", "truex", "nul l", "NaN",
    "Infinity", "9223372036854775808", "-9223372036854775809", "12345678901234567890",
    "1e400", "-1e309", "1 2", "\"a\" x", "\v1", "\"abc",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (valid); i++)
    assert_valid (valid[i]);
  for (gsize i = 0; i < G_N_ELEMENTS (invalid); i++)
    assert_invalid (invalid[i], -1);
}

static void
test_strings (void)
{
  static const char * const valid[] = {
    "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"",
    "\"\\u00e9\\u20AC\"",
    "\"\\ud83d\\ude00\"",             /* a surrogate pair */
    "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"",
    "\"\\u0000\"",                    /* NUL is allowed in a value */
    "\"\x7f\"",
  };
  static const char * const invalid[] = {
    "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"\\U0041\"",
    "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"", "\"\\ud83d\\n\"", /* lone surrogates */
    "\"\t\"", "\"\n\"", "\"\x1f\"",                                        /* control characters */
    "\"\xc0\xaf\"", "\"\xe0\x80\xaf\"", "\"\xf0\x80\x80\xaf\"",            /* overlong */
    "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"",    /* surrogate, > U+10FFFF */
    "\"\x80\"", "\"\xc3\"", "\"\xe2\x82\"", "\"\xc3(\"",                   /* cut sequences */
    "\xc3\xa9", "\"\\",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (valid); i++)
    assert_valid (valid[i]);
  for (gsize i = 0; i < G_N_ELEMENTS (invalid); i++)
    assert_invalid (invalid[i], -1);
  /* A raw NUL byte is a control character. */
  assert_invalid ("\"a\0b\"", 5);
}

static void
test_structure (void)
{
  static const char * const valid[] = {
    "{}", "[]", " { } ", "[[],{}]", "{\"a\":{\"b\":[1,{\"c\":null}]}}", "[1 , 2\t,\n3]",
  };
  static const char * const invalid[] = {
    "{", "[", "}", "[1,]", "{\"a\":1,}", "{\"a\"}", "{\"a\" 1}", "{1:2}", "{'a':1}",
    "[1 2]", "[1,,2]", "{\"a\":1 \"b\":2}", "[}", "{]", "[1]]", "{}{}", "[1]x",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (valid); i++)
    assert_valid (valid[i]);
  for (gsize i = 0; i < G_N_ELEMENTS (invalid); i++)
    assert_invalid (invalid[i], -1);
}

/* Jansson counts every value, scalars too, and allows 2048. */
static void
test_depth (void)
{
  struct { const char *open, *inner, *close; guint depth; gboolean valid; } cases[] = {
    { "[", "", "]", 2048, TRUE },
    { "[", "", "]", 2049, FALSE },
    { "[", "1", "]", 2047, TRUE },
    { "[", "1", "]", 2048, FALSE },
    { "{\"k\":", "{}", "}", 2047, TRUE },
    { "{\"k\":", "{}", "}", 2048, FALSE },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GString) text = g_string_new (NULL);
      g_autoptr(GError) error = NULL;
      g_autoptr(McpJsonScan) scan = NULL;

      for (guint n = 0; n < cases[i].depth; n++)
        g_string_append (text, cases[i].open);
      g_string_append (text, cases[i].inner);
      for (guint n = 0; n < cases[i].depth; n++)
        g_string_append (text, cases[i].close);
      scan = scan_checked (text->str, text->len, &error);
      g_assert_cmpint (scan != NULL, ==, cases[i].valid);
    }
}

static const McpJsonMember *
member (McpJsonScan *scan,
        const char  *name)
{
  const McpJsonMember *found = mcp_json_scan_lookup (scan, name);

  g_assert_nonnull (found);
  return found;
}

static char *
member_text (McpJsonScan *scan,
             const char  *text,
             const char  *name)
{
  const McpJsonMember *found = member (scan, name);

  return g_strndup (text + found->start, found->end - found->start);
}

static void
test_members (void)
{
  const char *text = " {\"jsonrpc\" : \"2.0\", \"id\":7 ,\"result\":{\"a\":[1, {\"id\":8}]},"
                     "\"s\\u00e9\\n\":\"\\\"}\" }\r\n";
  g_autoptr(GError) error = NULL;
  g_autoptr(McpJsonScan) scan = scan_checked (text, -1, &error);
  g_autofree char *result = NULL;
  g_autofree char *id = NULL;
  g_autofree char *escaped = NULL;

  g_assert_no_error (error);
  g_assert_true (scan->is_object);
  g_assert_cmpuint (scan->members->len, ==, 4);
  g_assert_cmpstr (g_array_index (scan->members, McpJsonMember, 0).name, ==, "jsonrpc");
  g_assert_cmpstr (g_array_index (scan->members, McpJsonMember, 3).name, ==, "s\xc3\xa9\n");
  id = member_text (scan, text, "id");
  g_assert_cmpstr (id, ==, "7");
  /* Nested names are not members. */
  result = member_text (scan, text, "result");
  g_assert_cmpstr (result, ==, "{\"a\":[1, {\"id\":8}]}");
  escaped = member_text (scan, text, "s\xc3\xa9\n");
  g_assert_cmpstr (escaped, ==, "\"\\\"}\"");
  g_assert_null (mcp_json_scan_lookup (scan, "a"));

  /* Only an object has members. */
  g_clear_pointer (&scan, mcp_json_scan_free);
  scan = scan_checked ("[{\"a\":1}]", -1, &error);
  g_assert_false (scan->is_object);
  g_assert_cmpuint (scan->members->len, ==, 0);
  g_clear_pointer (&scan, mcp_json_scan_free);
  scan = scan_checked ("{}", -1, &error);
  g_assert_true (scan->is_object);
  g_assert_cmpuint (scan->members->len, ==, 0);
}

/* The text of @scan's nested member @name. */
static char *
nested_text (McpJsonScan *scan,
             const char  *text,
             const char  *name)
{
  const McpJsonMember *member = mcp_json_scan_lookup_nested (scan, name);

  g_assert_nonnull (member);
  return g_strndup (text + member->start, member->end - member->start);
}

/* The members of one top-level member's object come in the same pass:
 * the last value of a repeated name, only an object's, and only a few. */
static void
test_nested (void)
{
  static const char text[] = "{\"p\":{\"x\":1},\"q\":{\"y\":2},\"p\":{ \"a\" : [1,{\"b\":2}], \"c\":\"d\", \"a\":{}}}";
  g_autoptr(McpJsonScan) scan = mcp_json_scan_nested (text, strlen (text), "p", NULL, NULL);
  g_autoptr(McpJsonScan) array = mcp_json_scan_nested ("{\"p\":[{\"a\":1}]}", 15, "p", NULL, NULL);
  g_autoptr(McpJsonScan) empty = mcp_json_scan_nested ("{\"p\":{}}", 8, "p", NULL, NULL);
  g_autoptr(McpJsonScan) object_then_scalar = mcp_json_scan_nested ("{\"p\":{\"a\":1},\"p\":2}", 19, "p", NULL, NULL);
  g_autoptr(GString) many = g_string_new ("{\"p\":{");
  g_autoptr(McpJsonScan) too_many = NULL;
  g_autofree char *a = NULL;
  g_autofree char *c = NULL;

  g_assert_nonnull (scan);
  g_assert_cmpuint (scan->nested->len, ==, 2);
  a = nested_text (scan, text, "a");
  g_assert_cmpstr (a, ==, "{}");
  c = nested_text (scan, text, "c");
  g_assert_cmpstr (c, ==, "\"d\"");
  g_assert_null (mcp_json_scan_lookup_nested (scan, "x"));
  g_assert_null (mcp_json_scan_lookup_nested (scan, "b"));
  g_assert_null (array->nested);
  g_assert_cmpuint (empty->nested->len, ==, 0);
  g_assert_null (object_then_scalar->nested);

  for (int i = 0; i <= MCP_JSON_SCAN_NESTED_MAX; i++)
    g_string_append_printf (many, "%s\"k%d\":%d", i > 0 ? "," : "", i, i);
  g_string_append (many, "}}");
  too_many = mcp_json_scan_nested (many->str, many->len, "p", NULL, NULL);
  g_assert_nonnull (too_many);
  g_assert_null (too_many->nested);
}

/* Jansson keeps the last value of a repeated name, at the place of the
 * first; so do the spans, also past the linear lookup's size. */
static void
test_duplicates (void)
{
  g_autoptr(GString) text = g_string_new ("{\"a\":1,\"b\":2,\"a\":[3]");
  g_autoptr(GError) error = NULL;
  g_autoptr(McpJsonScan) scan = NULL;
  g_autoptr(json_t) value = NULL;
  g_autofree char *a = NULL;
  g_autofree char *k5 = NULL;

  for (int i = 0; i < 40; i++)
    g_string_append_printf (text, ",\"k%d\":%d", i % 20, i);
  g_string_append (text, "}");
  scan = scan_checked (text->str, text->len, &error);
  g_assert_no_error (error);
  value = json_loadb (text->str, text->len, LOAD_FLAGS, NULL);

  g_assert_cmpuint (scan->members->len, ==, 22);
  g_assert_cmpuint (json_object_size (value), ==, 22);
  g_assert_cmpstr (g_array_index (scan->members, McpJsonMember, 0).name, ==, "a");
  a = member_text (scan, text->str, "a");
  g_assert_cmpstr (a, ==, "[3]");
  k5 = member_text (scan, text->str, "k5");
  g_assert_cmpstr (k5, ==, "25");
  g_assert_cmpint (json_integer_value (json_object_get (value, "k5")), ==, 25);
}

/* "\u0000" is fine in values, not in names (Jansson cannot hold it), at
 * any depth; a stray NUL byte after a number is Jansson's quirk only. */
static void
test_nul (void)
{
  static const char stray[] = "[1\0]";
  g_autoptr(GError) error = NULL;
  g_autoptr(McpJsonScan) scan = NULL;
  g_autoptr(json_t) value = NULL;
  gsize offset = 0;

  scan = scan_checked ("{\"a\":\"x\\u0000y\"}", -1, &error);
  g_assert_no_error (error);
  g_clear_pointer (&scan, mcp_json_scan_free);

  scan = scan_checked ("{\"a\\u0000\":1}", -1, &error);
  g_assert_error (error, MCP_JSON_SCAN_ERROR, MCP_JSON_SCAN_ERROR_NUL_IN_NAME);
  g_clear_error (&error);
  scan = scan_checked ("[{\"a\":{\"\\u0000\":1}}]", -1, &error);
  g_assert_error (error, MCP_JSON_SCAN_ERROR, MCP_JSON_SCAN_ERROR_NUL_IN_NAME);
  g_clear_error (&error);
  /* A name that is invalid anyway is a syntax error, as in Jansson. */
  assert_invalid ("{\"\\u0000\\ud800\":1}", -1);

  value = json_loadb (stray, sizeof stray - 1, LOAD_FLAGS, NULL);
  g_assert_nonnull (value);
  scan = mcp_json_scan (stray, sizeof stray - 1, &offset, &error);
  g_assert_null (scan);
  g_assert_error (error, MCP_JSON_SCAN_ERROR, MCP_JSON_SCAN_ERROR_STRAY_NUL);
  g_assert_cmpuint (offset, ==, 2);
}

static int
find_first (const char         *text,
            const char * const *names)
{
  return mcp_json_scan_find_first (text, strlen (text), names);
}

static void
test_find_first (void)
{
  static const char * const names[] = { "result", "error", "method", NULL };

  g_assert_cmpint (find_first ("{\"id\":1,\"result\":", names), ==, 0);
  g_assert_cmpint (find_first ("{\"id\":{\"result\":1},\"method\":\"x\"", names), ==, 2);
  g_assert_cmpint (find_first ("{\"id\":1}", names), ==, -1);
  g_assert_cmpint (find_first ("[{\"result\":1}]", names), ==, -1);
  g_assert_cmpint (find_first ("{\"id\":01,\"result\":1}", names), ==, -1);
}

/* A reply of the shape server-memory's read_graph gives, about 29 KB. */
static char *
big_reply_line (json_t *id,
                gsize  *length)
{
  g_autoptr(json_t) graph = json_array ();
  g_autoptr(json_t) result = NULL;
  g_autoptr(json_t) reply = NULL;
  g_autofree char *graph_text = NULL;

  for (int i = 0; i < 200; i++)
    json_array_append_new (graph, json_pack ("{s:s, s:s, s:[s,s]}", "name", "entity",
                                             "entityType", "thing \"quoted\" é",
                                             "observations", "an observation\nwith a newline", "\\u0000"));
  graph_text = json_dumps (graph, JSON_INDENT (2));
  result = json_pack ("{s:[{s:s, s:s}]}", "content", "type", "text", "text", graph_text);
  reply = mcp_jsonrpc_result_new (id, g_steal_pointer (&result));
  return mcp_jsonrpc_to_line (reply, length, NULL);
}

/* The spliced reply is, to Jansson, the reply a full parse and encode
 * would have written. */
static void
test_splice (void)
{
  json_t *ids[] = { json_integer (42), json_integer (0), json_integer (G_MININT64), json_string ("a\"b\u00e9"),
                    json_stringn ("x\0y", 3), json_null () };

  for (gsize i = 0; i < G_N_ELEMENTS (ids); i++)
    {
      g_autoptr(json_t) id = ids[i];
      g_autoptr(json_t) downstream_id = json_integer (7);
      g_autoptr(GError) error = NULL;
      gsize length, raw_length, full_length;
      g_autofree char *line = big_reply_line (downstream_id, &length);
      g_autoptr(McpRawResponse) response = mcp_raw_response_parse (line, length - 1, &error);
      g_autoptr(json_t) result = NULL;
      g_autoptr(json_t) full_reply = NULL;
      g_autofree char *full_line = NULL;
      g_autoptr(GBytes) spliced = NULL;
      g_autoptr(json_t) spliced_value = NULL;
      g_autoptr(json_t) full_value = NULL;
      const char *raw;
      gsize spliced_length;
      const char *spliced_data;

      g_assert_no_error (error);
      g_assert_cmpuint (length, >, 20000);
      g_assert_true (json_equal (mcp_raw_response_get_id (response), downstream_id));
      g_assert_null (mcp_raw_response_get_error (response));
      raw = mcp_raw_response_get_result (response, &raw_length);
      g_assert_nonnull (raw);

      /* The old way: parse the whole line, put the result under a new id. */
      result = mcp_raw_response_dup_result (response, &error);
      g_assert_no_error (error);
      full_reply = mcp_jsonrpc_result_new (id, g_steal_pointer (&result));
      full_line = mcp_jsonrpc_to_line (full_reply, &full_length, NULL);

      spliced = mcp_jsonrpc_splice_reply (id, raw, raw_length);
      spliced_data = g_bytes_get_data (spliced, &spliced_length);
      g_assert_cmpint (spliced_data[spliced_length - 1], ==, '\n');
      g_assert_null (memchr (spliced_data, '\n', spliced_length - 1));
      spliced_value = json_loadb (spliced_data, spliced_length - 1, LOAD_FLAGS, NULL);
      full_value = json_loadb (full_line, full_length - 1, LOAD_FLAGS, NULL);
      g_assert_nonnull (spliced_value);
      g_assert_true (json_equal (spliced_value, full_value));
      /* Compact in, compact out: the same bytes. */
      g_assert_cmpmem (spliced_data, spliced_length, full_line, full_length);
    }
}

/* What the raw form takes as a response is what classify() calls one,
 * and an error member makes it an error, as the session reads it. */
static void
test_raw_response (void)
{
  static const char * const not_responses[] = {
    "[1]", "{\"id\":1}", "{\"id\":1,\"method\":\"x\",\"result\":{}}", "{\"id\":1.5,\"result\":{}}",
    "{\"id\":[1],\"result\":{}}", "{\"result\":{}}", "{\"id\":1,\"error\":\"x\"}", "{\"id\":1,\"result\":}",
  };
  g_autoptr(GError) error = NULL;
  g_autoptr(McpRawResponse) response = NULL;
  g_autoptr(json_t) result = NULL;
  gsize length;
  const char *line;

  for (gsize i = 0; i < G_N_ELEMENTS (not_responses); i++)
    {
      g_autoptr(json_t) parsed = json_loadb (not_responses[i], strlen (not_responses[i]), LOAD_FLAGS, NULL);

      g_assert_cmpint (mcp_jsonrpc_classify (parsed), !=, MCP_MESSAGE_RESPONSE);
      g_assert_null (mcp_raw_response_parse (not_responses[i], strlen (not_responses[i]), &error));
      g_assert_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_PARSE);
      g_clear_error (&error);
    }

  line = "{\"id\":\"s\",\"error\":{\"code\":-32601,\"message\":\"no\"}}";
  response = mcp_raw_response_parse (line, strlen (line), &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_string_value (mcp_raw_response_get_id (response)), ==, "s");
  g_assert_cmpint (json_integer_value (json_object_get (mcp_raw_response_get_error (response), "code")), ==, -32601);
  g_assert_null (mcp_raw_response_get_result (response, &length));
  g_assert_null (mcp_raw_response_dup_result (response, &error));
  g_assert_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_PARSE);
  g_clear_error (&error);
  g_clear_pointer (&response, mcp_raw_response_unref);

  /* Both: the error wins.  A null id answers an unreadable request. */
  line = "{\"id\":null,\"result\":{},\"error\":{\"code\":1}}";
  response = mcp_raw_response_parse (line, strlen (line), &error);
  g_assert_no_error (error);
  g_assert_true (json_is_null (mcp_raw_response_get_id (response)));
  g_assert_nonnull (mcp_raw_response_get_error (response));
  g_clear_pointer (&response, mcp_raw_response_unref);

  line = "{\"id\":3,\"result\":[1,{\"a\":\"\\u0000\"}]}";
  response = mcp_raw_response_parse (line, strlen (line), &error);
  g_assert_no_error (error);
  result = mcp_raw_response_dup_result (response, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (json_array_size (result), ==, 2);
  g_assert_cmpuint (g_bytes_get_size (mcp_raw_response_get_line (response)), ==, strlen (line));

  line = "{\"id\":3,\"result\":{\"\\u0000\":1}}";
  g_assert_null (mcp_raw_response_parse (line, strlen (line), &error));
  g_assert_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_UNSUPPORTED);
}

static gboolean
sniff (const char *line)
{
  return mcp_raw_response_sniff (line, strlen (line));
}

static void
test_sniff (void)
{
  g_assert_true (sniff ("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"));
  g_assert_true (sniff ("{\"error\":"));
  g_assert_false (sniff ("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"result\":"));
  g_assert_false (sniff ("{\"params\":{},\"result\":1}"));
  g_assert_false (sniff ("Server started"));
}

/* A line taken raw means what the parsed line means: the same id and
 * name, and arguments that Jansson reads as the parsed line's. */
static void
assert_raw_call (const char *line,
                 const char *arguments)
{
  g_autoptr(json_t) parsed = json_loadb (line, strlen (line), LOAD_FLAGS, NULL);
  json_t *params = json_object_get (parsed, "params");
  g_auto(McpRawCall) call = { 0 };

  g_assert_true (mcp_raw_call_parse (line, strlen (line), NULL, &call));
  g_assert_true (json_equal (call.id, json_object_get (parsed, "id")));
  g_assert_cmpstr (call.name, ==, json_string_value (json_object_get (params, "name")));
  if (arguments == NULL)
    g_assert_null (call.arguments);
  else
    {
      g_autoptr(json_t) raw = json_loadb (call.arguments, call.arguments_length, LOAD_FLAGS, NULL);

      g_assert_cmpmem (call.arguments, call.arguments_length, arguments, strlen (arguments));
      g_assert_true (json_equal (raw, json_object_get (params, "arguments")));
    }
}

static void
assert_not_raw_call (const char *line)
{
  McpRawCall call = { 0 };

  g_assert_false (mcp_raw_call_parse (line, strlen (line), NULL, &call));
  g_assert_null (call.id);
  g_assert_null (call.name);
}

/* A reader's calls that repeat a _meta share one parsed value; any other
 * _meta is parsed afresh (and replaces it), and one with a progress token
 * still sends the line to the parsed path. */
static void
test_raw_call_meta_cache (void)
{
#define CALL_WITH_META(id, meta) \
  "{\"jsonrpc\":\"2.0\",\"id\":" id ",\"method\":\"tools/call\",\"params\":{\"name\":\"s__echo\"," \
  "\"arguments\":{},\"_meta\":" meta "}}"
#define MODERN_META "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}"
  static const char * const lines[] = {
    CALL_WITH_META ("1", MODERN_META),
    CALL_WITH_META ("2", MODERN_META),
    CALL_WITH_META ("3", "{\"traceparent\":\"t\"}"),
    CALL_WITH_META ("4", "{\"progressToken\":\"p\"}"),
    CALL_WITH_META ("5", "{\"traceparent\":\"t\"}"),
  };
  McpRawMetaCache cache = { 0 };
  McpRawCall calls[G_N_ELEMENTS (lines)] = { 0 };
  gboolean taken[G_N_ELEMENTS (lines)];

  for (gsize i = 0; i < G_N_ELEMENTS (lines); i++)
    taken[i] = mcp_raw_call_parse (lines[i], strlen (lines[i]), &cache, &calls[i]);
  g_assert_true (taken[0] && taken[1] && taken[2] && !taken[3] && taken[4]);
  g_assert_true (calls[0].meta == calls[1].meta);
  g_assert_cmpstr (json_string_value (json_object_get (calls[1].meta, "io.modelcontextprotocol/protocolVersion")),
                   ==, "2026-07-28");
  g_assert_cmpstr (json_string_value (json_object_get (calls[2].meta, "traceparent")), ==, "t");
  g_assert_true (calls[4].meta != calls[2].meta);
  g_assert_true (json_equal (calls[4].meta, calls[2].meta));
  /* The calls hold their values past the cache. */
  mcp_raw_meta_cache_clear (&cache);
  g_assert_cmpstr (json_string_value (json_object_get (calls[0].meta, "io.modelcontextprotocol/protocolVersion")),
                   ==, "2026-07-28");
  for (gsize i = 0; i < G_N_ELEMENTS (lines); i++)
    mcp_raw_call_clear (&calls[i]);
#undef MODERN_META
#undef CALL_WITH_META
}

static void
test_raw_call (void)
{
  assert_raw_call ("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                   "\"params\":{\"name\":\"s__echo\",\"arguments\":{\"message\":\"hi\"}}}",
                   "{\"message\":\"hi\"}");
  /* Kept as written: spaces, escapes, numbers Jansson would write
   * otherwise, nesting. */
  assert_raw_call (" { \"params\" : { \"arguments\" : { \"n\" : 1.0e5, \"s\": \"\\u00e9\\n\", \"a\": [ {} ] } ,"
                   " \"name\" : \"x\" } , \"method\" : \"tools/call\" , \"id\" : \"abc\" } ",
                   "{ \"n\" : 1.0e5, \"s\": \"\\u00e9\\n\", \"a\": [ {} ] }");
  /* No arguments; an escaped name; members the request path ignores. */
  assert_raw_call ("{\"id\":-3,\"method\":\"tools/call\",\"params\":{\"name\":\"a\\u0062c\"},\"extra\":[1]}",
                   NULL);

  /* A _meta beside, as a stateless client sends it, parsed. */
  {
    static const char line[] =
      "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"s__echo\","
      "\"arguments\":{},\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}";
    g_auto(McpRawCall) call = { 0 };

    assert_raw_call (line, "{}");
    g_assert_true (mcp_raw_call_parse (line, strlen (line), NULL, &call));
    g_assert_cmpstr (json_string_value (json_object_get (call.meta, "io.modelcontextprotocol/protocolVersion")),
                     ==, "2026-07-28");
  }

  /* Anything else is left to the parsed path. */
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/list\",\"params\":{\"name\":\"x\"}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools\\/call\",\"params\":{\"name\":\"x\"}}");
  assert_not_raw_call ("{\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}");
  assert_not_raw_call ("{\"id\":null,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}");
  assert_not_raw_call ("{\"id\":1.5,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\"}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":[\"x\"]}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"arguments\":{}}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":7}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":[]}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{},"
                       "\"_meta\":{\"progressToken\":1}}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"task\":{}}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"_meta\":[]}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{}}");
  assert_not_raw_call ("[{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}]");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{\"a\":\r1}}}");
  assert_not_raw_call ("{\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"arguments\":{\"\\u0000\":1}}}");
}

/* A request spliced around params that are JSON text is the request
 * Jansson would have written. */
static void
test_splice_request (void)
{
  const char *params = "{\"name\":\"x\",\"arguments\":{\"n\": 1.0e5}}";
  json_int_t ids[] = { 0, 7, -12, G_MAXINT64, G_MININT64 };

  for (gsize i = 0; i < G_N_ELEMENTS (ids); i++)
    {
      g_autoptr(GBytes) line = mcp_jsonrpc_splice_request (ids[i], "tools/call", params, strlen (params));
      g_autoptr(json_t) parsed_params = json_loads (params, 0, NULL);
      g_autoptr(json_t) expected = mcp_jsonrpc_request_new (ids[i], "tools/call", parsed_params);
      g_autoptr(json_t) spliced = NULL;
      gsize length;
      const char *text = g_bytes_get_data (line, &length);

      g_assert_cmpint (text[length - 1], ==, '\n');
      g_assert_null (memchr (text, '\n', length - 1));
      g_assert_nonnull (g_strstr_len (text, length, params));
      spliced = json_loadb (text, length - 1, 0, NULL);
      g_assert_true (json_equal (spliced, expected));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/json-scan/scalars", test_scalars);
  g_test_add_func ("/json-scan/strings", test_strings);
  g_test_add_func ("/json-scan/structure", test_structure);
  g_test_add_func ("/json-scan/depth", test_depth);
  g_test_add_func ("/json-scan/members", test_members);
  g_test_add_func ("/json-scan/duplicates", test_duplicates);
  g_test_add_func ("/json-scan/nested", test_nested);
  g_test_add_func ("/json-scan/nul", test_nul);
  g_test_add_func ("/json-scan/find-first", test_find_first);
  g_test_add_func ("/raw-response/splice", test_splice);
  g_test_add_func ("/raw-response/parse", test_raw_response);
  g_test_add_func ("/raw-response/sniff", test_sniff);
  g_test_add_func ("/raw-call/parse", test_raw_call);
  g_test_add_func ("/raw-call/meta-cache", test_raw_call_meta_cache);
  g_test_add_func ("/raw-call/splice-request", test_splice_request);
  return g_test_run ();
}
