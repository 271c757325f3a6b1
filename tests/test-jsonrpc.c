/* test-jsonrpc.c — message shapes, ids and line writing. */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <glib-unix.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-param-headers.h"
#include "common/mcp-protocol.h"

static json_t *
parse (const char *text)
{
  g_autoptr(GError) error = NULL;
  json_t *value = mcp_jsonrpc_parse (text, strlen (text), &error);

  g_assert_no_error (error);
  return value;
}

static void
test_classify (void)
{
  struct { const char *text; McpMessageKind kind; } cases[] = {
    { "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\"}", MCP_MESSAGE_REQUEST },
    { "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"ping\"}", MCP_MESSAGE_REQUEST },
    { "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", MCP_MESSAGE_NOTIFICATION },
    { "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}", MCP_MESSAGE_RESPONSE },
    { "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":null}", MCP_MESSAGE_RESPONSE },
    { "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}", MCP_MESSAGE_RESPONSE },
    { "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", MCP_MESSAGE_INVALID },
    { "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", MCP_MESSAGE_INVALID },
    { "{\"jsonrpc\":\"2.0\",\"method\":42}", MCP_MESSAGE_INVALID },
    { "{\"jsonrpc\":\"2.0\",\"id\":3}", MCP_MESSAGE_INVALID },
    { "{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":\"oops\"}", MCP_MESSAGE_INVALID },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(json_t) message = parse (cases[i].text);
      g_assert_cmpint (mcp_jsonrpc_classify (message), ==, cases[i].kind);
    }
}

static void
test_parse_refuses (void)
{
  const char *bad[] = { "not json", "[{\"id\":1}]", "42", "\"text\"", "{\"a\":" };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(json_t) value = mcp_jsonrpc_parse (bad[i], strlen (bad[i]), &error);

      g_assert_null (value);
      g_assert_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_PARSE);
    }
}

static void
test_id_keys (void)
{
  static const json_int_t edges[] = { 1, 9, 10, -1, -10, 1234567890, G_MAXINT64, G_MININT64 };
  g_autoptr(json_t) zero = json_integer (0);
  g_autoptr(json_t) five = json_integer (5);
  g_autoptr(json_t) five_text = json_string ("5");
  g_autoptr(json_t) real = json_real (5.0);
  g_autofree char *zero_key = mcp_jsonrpc_id_key (zero);
  g_autofree char *five_key = mcp_jsonrpc_id_key (five);
  g_autofree char *five_text_key = mcp_jsonrpc_id_key (five_text);

  g_assert_true (mcp_jsonrpc_id_is_valid (zero));
  g_assert_cmpstr (zero_key, ==, "i:0");
  g_assert_cmpstr (five_key, !=, five_text_key);
  g_assert_false (mcp_jsonrpc_id_is_valid (real));
  g_assert_null (mcp_jsonrpc_id_key (real));

  /* Written out by hand: the edges of a 64-bit integer. */
  for (gsize i = 0; i < G_N_ELEMENTS (edges); i++)
    {
      g_autoptr(json_t) id = json_integer (edges[i]);
      g_autofree char *key = mcp_jsonrpc_id_key (id);
      g_autofree char *expected = g_strdup_printf ("i:%" JSON_INTEGER_FORMAT, edges[i]);

      g_assert_cmpstr (key, ==, expected);
    }
}

/* "\u0000" is valid JSON: it parses, keeps its length, goes out as it came
 * in, and ids that differ only after it stay apart. */
#define NUL_MESSAGE "{\"id\":\"a\\u0000b\",\"method\":\"m\",\"params\":{\"s\":\"x\\u0000y\"}}"

static void
test_nul (void)
{
  static const char text[] = NUL_MESSAGE;
  g_autoptr(json_t) message = parse (text);
  g_autoptr(json_t) other_id = json_stringn ("a\0c", 3);
  json_t *value = json_object_get (json_object_get (message, "params"), "s");
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (message, "id"));
  g_autofree char *other_key = mcp_jsonrpc_id_key (other_id);
  g_autofree char *line = NULL;
  gsize length;

  g_assert_cmpint (mcp_jsonrpc_classify (message), ==, MCP_MESSAGE_REQUEST);
  g_assert_cmpmem (json_string_value (value), json_string_length (value), "x\0y", 3);
  g_assert_cmpstr (key, !=, other_key);
  line = mcp_jsonrpc_to_line (message, &length, NULL);
  g_assert_cmpmem (line, length, NUL_MESSAGE "\n", sizeof text);
}

/* Jansson cannot hold a NUL in a member name; the id is still found. */
static void
test_nul_in_name (void)
{
  static const char text[] = "{\"id\":7,\"method\":\"m\",\"params\":{\"a\\u0000b\":\"\\\\u0000\"}}";
  static const char no_id[] = "{\"method\":\"m\",\"params\":{\"a\\u0000\":1}}";
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) value = mcp_jsonrpc_parse (text, strlen (text), &error);
  g_autoptr(json_t) salvaged = NULL;
  g_autoptr(json_t) notification = NULL;

  g_assert_null (value);
  g_assert_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_UNSUPPORTED);
  salvaged = mcp_jsonrpc_parse_salvaged (text, strlen (text));
  g_assert_cmpint (mcp_jsonrpc_classify (salvaged), ==, MCP_MESSAGE_REQUEST);
  g_assert_cmpint (json_integer_value (json_object_get (salvaged, "id")), ==, 7);
  /* An escaped backslash before "u0000" is text, not a NUL. */
  g_assert_cmpstr (mcp_json_get_string (json_object_get (salvaged, "params"), "a\357\277\275b"), ==, "\\u0000");
  notification = mcp_jsonrpc_parse_salvaged (no_id, strlen (no_id));
  g_assert_cmpint (mcp_jsonrpc_classify (notification), ==, MCP_MESSAGE_NOTIFICATION);
}

static void
test_build (void)
{
  g_autoptr(json_t) params = json_pack ("{s:s}", "name", "echo");
  g_autoptr(json_t) request = mcp_jsonrpc_request_new (0, "tools/call", params);
  g_autoptr(json_t) id = json_string ("req-1");
  g_autoptr(json_t) result = mcp_jsonrpc_result_new (id, json_pack ("{s:b}", "ok", 1));
  g_autoptr(json_t) error = mcp_jsonrpc_error_new (NULL, MCP_JSONRPC_PARSE_ERROR, "Parse error", NULL);
  g_autoptr(json_t) notification = mcp_jsonrpc_notification_new ("notifications/initialized", NULL);

  g_assert_cmpint (mcp_jsonrpc_classify (request), ==, MCP_MESSAGE_REQUEST);
  g_assert_cmpint (json_integer_value (json_object_get (request, "id")), ==, 0);
  g_assert_cmpstr (mcp_json_get_string (request, "jsonrpc"), ==, "2.0");
  g_assert_true (json_object_get (json_object_get (request, "params"), "name") != NULL);

  g_assert_cmpint (mcp_jsonrpc_classify (result), ==, MCP_MESSAGE_RESPONSE);
  g_assert_cmpstr (mcp_json_get_string (result, "id"), ==, "req-1");

  g_assert_cmpint (mcp_jsonrpc_classify (error), ==, MCP_MESSAGE_RESPONSE);
  g_assert_true (json_is_null (json_object_get (error, "id")));
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (error, "error"), "code")),
                   ==, -32700);

  g_assert_cmpint (mcp_jsonrpc_classify (notification), ==, MCP_MESSAGE_NOTIFICATION);
  g_assert_null (json_object_get (notification, "params"));
}

/* A newline inside a string must be escaped, or it would split the frame. */
static void
test_line_is_one_line (void)
{
  g_autoptr(json_t) message = mcp_jsonrpc_notification_new ("x", NULL);
  g_autofree char *line = NULL;
  gsize length;

  json_object_set_new (message, "params", json_pack ("{s:s}", "text", "two\nlines\r\n"));
  line = mcp_jsonrpc_to_line (message, &length, NULL);
  g_assert_nonnull (line);
  g_assert_cmpint (line[length - 1], ==, '\n');
  g_assert_null (memchr (line, '\n', length - 1));
}

static void
assert_line (GBytes     *line,
             const char *expected,
             gsize       expected_length)
{
  gsize length;
  const char *data;

  g_assert_nonnull (line);
  data = g_bytes_get_data (line, &length);
  g_assert_cmpmem (data, length, expected, expected_length);
}

/* One message, one line: the exact compact bytes and the newline, a NUL
 * inside a string kept as its escape. */
static void
test_encode_line (void)
{
  static const char nul_text[] = NUL_MESSAGE;
  static const char expected[] = "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"a\":[1,true,null,\"\\n\"]}}\n";
  g_autoptr(json_t) id = json_string ("x");
  g_autoptr(json_t) result = mcp_jsonrpc_result_new (id, json_pack ("{s:[i,b,n,s]}", "a", 1, 1, "\n"));
  g_autoptr(json_t) nul = parse (nul_text);
  g_autoptr(GBytes) line = mcp_jsonrpc_encode_line (result);
  g_autoptr(GBytes) nul_line = mcp_jsonrpc_encode_line (nul);

  assert_line (line, expected, strlen (expected));
  assert_line (nul_line, NUL_MESSAGE "\n", sizeof nul_text);
  g_assert_null (mcp_jsonrpc_encode_line (NULL));
}

/* A message of many megabytes, far past any first guess of its size, comes
 * out whole and the same as Jansson's own encoding of it. */
static void
test_encode_line_big (void)
{
  gsize big_length = 5 * 1024 * 1024 + 7;
  g_autofree char *big = g_malloc (big_length);
  g_autoptr(json_t) message = mcp_jsonrpc_notification_new ("x", NULL);
  g_autoptr(json_t) items = json_array ();
  g_autofree char *expected = NULL;
  g_autofree char *with_newline = NULL;
  g_autoptr(GBytes) line = NULL;

  for (gsize i = 0; i < big_length; i++)
    big[i] = i % 1000 == 999 ? '\0' : 'a' + i % 26;
  for (guint i = 0; i < 10000; i++)
    json_array_append_new (items, json_integer (i));
  json_object_set_new (message, "params", json_pack ("{s:s%, s:o}", "text", big, big_length, "items",
                                                     json_incref (items)));
  expected = json_dumps (message, JSON_COMPACT);
  with_newline = g_strconcat (expected, "\n", NULL);
  line = mcp_jsonrpc_encode_line (message);
  assert_line (line, with_newline, strlen (with_newline));
}

/* A peer that stops reading makes a write time out instead of blocking. */
static void
test_write_deadline (void)
{
  int fds[2];
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) message = mcp_jsonrpc_notification_new ("x", NULL);
  g_autofree char *big = g_malloc (1024 * 1024);
  gboolean ok;

  memset (big, 'a', 1024 * 1024 - 1);
  big[1024 * 1024 - 1] = '\0';
  json_object_set_new (message, "params", json_pack ("{s:s}", "text", big));

  g_assert_true (g_unix_open_pipe (fds, FD_CLOEXEC, NULL));
  g_assert_true (g_unix_set_fd_nonblocking (fds[1], TRUE, NULL));
  ok = mcp_jsonrpc_write_line (fds[1], message, g_get_monotonic_time () + 50 * 1000, &error);
  g_assert_false (ok);
  g_assert_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_WRITE_TIMEOUT);

  /* And a closed reader is a write error, not SIGPIPE. */
  g_clear_error (&error);
  close (fds[0]);
  ok = mcp_jsonrpc_write_line (fds[1], message, -1, &error);
  g_assert_false (ok);
  g_assert_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_WRITE);
  close (fds[1]);
}

/* Header values of Streamable HTTP 2026-07-28: plain where they can be,
 * the Base64 sentinel where not, and only strict Base64 read back. */
static void
test_header_values (void)
{
  static const char * const plain[] = { "us-west1", "a b", "=?base64?no-suffix" };
  static const char * const encoded[][2] = {
    { "Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?=" }, { " padded ", "=?base64?IHBhZGRlZCA=?=" },
    { "line1\nline2", "=?base64?bGluZTEKbGluZTI=?=" }, { "=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=" },
  };
  static const char * const refused[] = { "=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "=?base64?AA==AA==?=",
                                          "=?base64?AA==?=" /* NUL */ };

  for (gsize i = 0; i < G_N_ELEMENTS (plain); i++)
    {
      g_autofree char *value = mcp_protocol_header_value (plain[i]);
      g_autofree char *decoded = mcp_protocol_header_decode (plain[i]);

      g_assert_cmpstr (decoded, ==, plain[i]);
      if (i < 2)
        g_assert_cmpstr (value, ==, plain[i]);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (encoded); i++)
    {
      g_autofree char *value = mcp_protocol_header_value (encoded[i][0]);
      g_autofree char *decoded = mcp_protocol_header_decode (encoded[i][1]);

      g_assert_cmpstr (value, ==, encoded[i][1]);
      g_assert_cmpstr (decoded, ==, encoded[i][0]);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++)
    g_assert_null (mcp_protocol_header_decode (refused[i]));
}

static const char *
sent_header (const char *name,
             gpointer    user_data)
{
  return g_hash_table_lookup (user_data, name);
}

/* x-mcp-header annotations: the revision's rules, the headers of a call,
 * and a server's check of them. */
static void
test_param_headers (void)
{
  static const char * const invalid[] = {
    "{\"properties\": {\"v\": {\"type\": \"string\", \"x-mcp-header\": \"\"}}}",
    "{\"properties\": {\"v\": {\"type\": \"number\", \"x-mcp-header\": \"Score\"}}}",
    "{\"properties\": {\"v\": {\"type\": \"object\", \"x-mcp-header\": \"Data\"}}}",
    "{\"properties\": {\"v\": {\"type\": \"string\", \"x-mcp-header\": \"Has Space\"}}}",
    "{\"properties\": {\"a\": {\"type\": \"string\", \"x-mcp-header\": \"My\"}, "
    "\"b\": {\"type\": \"string\", \"x-mcp-header\": \"my\"}}}",
    "{\"properties\": {\"list\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"x-mcp-header\": \"Item\"}}}}",
    "{\"anyOf\": [{\"properties\": {\"v\": {\"type\": \"string\", \"x-mcp-header\": \"V\"}}}]}",
  };
  g_autoptr(json_t) schema = json_loads ("{\"type\": \"object\", \"properties\": {"
                                         "\"region\": {\"type\": \"string\", \"x-mcp-header\": \"Region\"},"
                                         "\"count\": {\"type\": \"integer\", \"x-mcp-header\": \"Count\"},"
                                         "\"on\": {\"type\": \"boolean\", \"x-mcp-header\": \"On\"},"
                                         "\"where\": {\"type\": \"object\", \"properties\": {"
                                         "  \"city\": {\"type\": \"string\", \"x-mcp-header\": \"City\"}}},"
                                         "\"query\": {\"type\": \"string\"}}}", 0, NULL);
  g_autoptr(json_t) arguments = json_loads ("{\"region\": \"us west\", \"count\": -7, \"on\": false, "
                                            "\"where\": {\"city\": \"Zürich\"}, \"query\": \"q\"}", 0, NULL);
  g_autoptr(json_t) partial = json_loads ("{\"region\": null, \"count\": 3}", 0, NULL);
  g_autoptr(GPtrArray) headers = NULL;
  g_autoptr(GPtrArray) fewer = NULL;
  g_autoptr(GHashTable) sent = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree char *fine = NULL;
  g_autofree char *missing = NULL;
  g_autofree char *differs = NULL;

  g_assert_null (mcp_param_headers_problem (schema));
  for (gsize i = 0; i < G_N_ELEMENTS (invalid); i++)
    {
      g_autoptr(json_t) bad = json_loads (invalid[i], 0, NULL);
      g_autofree char *problem = mcp_param_headers_problem (bad);

      g_assert_nonnull (bad);
      g_assert_nonnull (problem);
    }

  headers = mcp_param_headers_for_call (schema, arguments);
  g_assert_cmpuint (headers->len, ==, 8);
  for (guint i = 0; i < headers->len; i += 2)
    g_hash_table_insert (sent, headers->pdata[i], headers->pdata[i + 1]);
  g_assert_cmpstr (g_hash_table_lookup (sent, "Mcp-Param-Region"), ==, "us west");
  g_assert_cmpstr (g_hash_table_lookup (sent, "Mcp-Param-Count"), ==, "-7");
  g_assert_cmpstr (g_hash_table_lookup (sent, "Mcp-Param-On"), ==, "false");
  g_assert_cmpstr (g_hash_table_lookup (sent, "Mcp-Param-City"), ==, "=?base64?WsO8cmljaA==?=");
  /* A null or absent value has no header. */
  fewer = mcp_param_headers_for_call (schema, partial);
  g_assert_cmpuint (fewer->len, ==, 2);
  g_assert_cmpstr (fewer->pdata[0], ==, "Mcp-Param-Count");

  fine = mcp_param_headers_mismatch (schema, arguments, sent_header, sent);
  g_assert_null (fine);
  g_hash_table_remove (sent, "Mcp-Param-City");
  missing = mcp_param_headers_mismatch (schema, arguments, sent_header, sent);
  g_assert_nonnull (strstr (missing, "Mcp-Param-City"));
  g_hash_table_insert (sent, "Mcp-Param-City", "Bern");
  differs = mcp_param_headers_mismatch (schema, arguments, sent_header, sent);
  g_assert_nonnull (strstr (differs, "Bern"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  signal (SIGPIPE, SIG_IGN);

  g_test_add_func ("/jsonrpc/classify", test_classify);
  g_test_add_func ("/jsonrpc/parse-refuses", test_parse_refuses);
  g_test_add_func ("/jsonrpc/id-keys", test_id_keys);
  g_test_add_func ("/jsonrpc/nul", test_nul);
  g_test_add_func ("/jsonrpc/nul-in-name", test_nul_in_name);
  g_test_add_func ("/jsonrpc/build", test_build);
  g_test_add_func ("/jsonrpc/line-is-one-line", test_line_is_one_line);
  g_test_add_func ("/jsonrpc/encode-line", test_encode_line);
  g_test_add_func ("/jsonrpc/encode-line/big", test_encode_line_big);
  g_test_add_func ("/jsonrpc/write-deadline", test_write_deadline);
  g_test_add_func ("/protocol/header-values", test_header_values);
  g_test_add_func ("/protocol/param-headers", test_param_headers);
  return g_test_run ();
}
