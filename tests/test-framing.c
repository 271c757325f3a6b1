/* test-framing.c — the line framer and the fd line reader. */
#include "config.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <glib-unix.h>

#include "common/mcp-framing.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-raw-response.h"

static void
collect_line (const char *line,
              gsize       length,
              gpointer    user_data)
{
  g_ptr_array_add (user_data, g_strndup (line, length));
}

static GPtrArray *
frame (McpLineFramer *framer,
       const char    *data,
       gsize          piece,
       GError       **error)
{
  GPtrArray *lines = g_ptr_array_new_with_free_func (g_free);
  gsize length = strlen (data);

  /* Feeding in small pieces must give the same lines as one big feed. */
  for (gsize offset = 0; offset < length; offset += piece)
    {
      g_autoptr(GError) local_error = NULL;

      if (!mcp_line_framer_feed (framer, data + offset, MIN (piece, length - offset),
                                 collect_line, lines, &local_error) &&
          error != NULL && *error == NULL)
        g_propagate_error (error, g_steal_pointer (&local_error));
    }
  return lines;
}

static void
test_lines (void)
{
  const char *input = "{\"a\":1}\r\n\n   \r\n{\"b\":2}\n{\"c\"";
  gsize pieces[] = { 1, 2, 3, 7, 1000 };

  for (gsize i = 0; i < G_N_ELEMENTS (pieces); i++)
    {
      g_autoptr(McpLineFramer) framer = mcp_line_framer_new (1024);
      g_autoptr(GPtrArray) lines = frame (framer, input, pieces[i], NULL);

      g_assert_cmpuint (lines->len, ==, 2);
      g_assert_cmpstr (g_ptr_array_index (lines, 0), ==, "{\"a\":1}");
      g_assert_cmpstr (g_ptr_array_index (lines, 1), ==, "{\"b\":2}");
      /* The unfinished line waits for its newline. */
      g_assert_cmpuint (mcp_line_framer_buffered (framer), ==, 4);
    }
}

/* An over-long line is refused, never buffered past the cap, and the lines
 * after it still arrive. */
static void
test_too_long (void)
{
  g_autoptr(McpLineFramer) framer = mcp_line_framer_new (16);
  g_autoptr(GString) input = g_string_new ("{\"ok\":1}\n");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) lines = NULL;

  for (int i = 0; i < 100; i++)
    g_string_append (input, "xxxxxxxxxx");
  g_string_append (input, "\n{\"ok\":2}\n");

  lines = frame (framer, input->str, 5, &error);
  g_assert_error (error, MCP_FRAMING_ERROR, MCP_FRAMING_ERROR_LINE_TOO_LONG);
  g_assert_cmpuint (lines->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (lines, 1), ==, "{\"ok\":2}");
  g_assert_cmpuint (mcp_line_framer_buffered (framer), ==, 0);
}

static void
test_exact_cap (void)
{
  g_autoptr(McpLineFramer) framer = mcp_line_framer_new (8);
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) lines = frame (framer, "12345678\n123456789\n", 3, &error);

  g_assert_error (error, MCP_FRAMING_ERROR, MCP_FRAMING_ERROR_LINE_TOO_LONG);
  g_assert_cmpuint (lines->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (lines, 0), ==, "12345678");
}

typedef struct {
  GMainLoop *loop;
  GPtrArray *messages;
  GPtrArray *noise;
  guint      too_long;
  gboolean   closed;
  GPtrArray *raw;       /* lines offered to on_response_line */
} ReaderResults;

static void
on_message (json_t *message, gpointer user_data)
{
  ReaderResults *results = user_data;
  g_ptr_array_add (results->messages, json_dumps (message, JSON_COMPACT | JSON_SORT_KEYS));
}

static void
on_noise (const char *line, gsize length, GError *error, gpointer user_data)
{
  ReaderResults *results = user_data;
  g_ptr_array_add (results->noise, g_strndup (line, length));
}

static void
on_too_long (GError *error, gpointer user_data)
{
  ReaderResults *results = user_data;
  results->too_long++;
}

static void
on_closed (GError *error, gpointer user_data)
{
  ReaderResults *results = user_data;
  g_assert_no_error (error);
  results->closed = TRUE;
  g_main_loop_quit (results->loop);
}

/* Noise from a real pipe: garbage, blank lines, CRLF, a batch, a huge
 * line; the JSON objects around it come through in order. */
static void
test_reader (void)
{
  static const McpLineReaderFuncs funcs = { on_message, on_noise, on_too_long, on_closed };
  ReaderResults results = { 0 };
  g_autoptr(GMainContext) context = g_main_context_new ();
  g_autoptr(GString) input = g_string_new (NULL);
  GSource *reader;
  int fds[2];

  results.loop = g_main_loop_new (context, FALSE);
  results.messages = g_ptr_array_new_with_free_func (free);
  results.noise = g_ptr_array_new_with_free_func (g_free);

  g_string_append (input, "Server starting...\n\n{\"id\":0,\"result\":{}}\r\n");
  g_string_append (input, "[1,2]\n");
  for (int i = 0; i < 2000; i++)
    g_string_append (input, "0123456789");
  g_string_append (input, "\n{\"method\":\"x\"}\n");

  g_assert_true (g_unix_open_pipe (fds, FD_CLOEXEC, NULL));
  reader = mcp_line_reader_new (fds[0], 1000, &funcs, &results, NULL);
  g_source_attach (reader, context);

  g_assert_cmpint (write (fds[1], input->str, input->len), ==, (gssize) input->len);
  close (fds[1]);
  g_main_loop_run (results.loop);

  g_assert_true (results.closed);
  g_assert_cmpuint (results.messages->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (results.messages, 0), ==, "{\"id\":0,\"result\":{}}");
  g_assert_cmpstr (g_ptr_array_index (results.messages, 1), ==, "{\"method\":\"x\"}");
  g_assert_cmpuint (results.noise->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (results.noise, 0), ==, "Server starting...");
  g_assert_cmpuint (results.too_long, ==, 1);
  g_assert_true (g_source_is_destroyed (reader));

  g_source_unref (reader);
  g_main_loop_unref (results.loop);
  g_ptr_array_unref (results.messages);
  g_ptr_array_unref (results.noise);
}

static gboolean
on_reader_stuck (gpointer user_data)
{
  g_error ("A paused reader did not see its peer hang up");
  return G_SOURCE_REMOVE;
}

/* A paused reader reads nothing, but a peer that closes its end still
 * ends it: nothing the peer wrote is handed over. */
static void
test_paused_hang_up (void)
{
  static const McpLineReaderFuncs funcs = { on_message, on_noise, on_too_long, on_closed };
  static const char line[] = "{\"method\":\"x\"}\n";
  ReaderResults results = { 0 };
  g_autoptr(GMainContext) context = g_main_context_new ();
  g_autoptr(GSource) stuck = g_timeout_source_new_seconds (60);
  GSource *reader;
  int fds[2];

  results.loop = g_main_loop_new (context, FALSE);
  results.messages = g_ptr_array_new_with_free_func (free);
  results.noise = g_ptr_array_new_with_free_func (g_free);
  g_assert_true (g_unix_open_pipe (fds, FD_CLOEXEC, NULL));
  reader = mcp_line_reader_new (fds[0], 0, &funcs, &results, NULL);
  g_source_attach (reader, context);
  mcp_line_reader_set_paused (reader, TRUE);
  g_source_set_callback (stuck, on_reader_stuck, NULL, NULL);
  g_source_attach (stuck, context);

  g_assert_cmpint (write (fds[1], line, sizeof line - 1), ==, sizeof line - 1);
  close (fds[1]);
  g_main_loop_run (results.loop);

  g_assert_true (results.closed);
  g_assert_cmpuint (results.messages->len, ==, 0);
  g_assert_true (g_source_is_destroyed (reader));

  g_source_destroy (stuck);
  g_source_unref (reader);
  g_main_loop_unref (results.loop);
  g_ptr_array_unref (results.messages);
  g_ptr_array_unref (results.noise);
}

/* Takes every line offered but those that say "decline". */
static gboolean
on_response_line (const char *line, gsize length, gpointer user_data)
{
  ReaderResults *results = user_data;

  g_ptr_array_add (results->raw, g_strndup (line, length));
  return g_strstr_len (line, length, "decline") == NULL;
}

/* A line of @length bytes or more: @head, a long string member, "}". */
static void
append_long_line (GString    *input,
                  const char *head,
                  gsize       length)
{
  gsize start = input->len;

  g_string_append_printf (input, "{%s,\"pad\":\"", head);
  while (input->len - start < length)
    g_string_append (input, "0123456789");
  g_string_append (input, "\"}\n");
}

/* Responses, long or short, are offered raw before they are parsed;
 * requests and notifications are not; a declined one is parsed as before. */
static void
test_response_line (void)
{
  static const McpLineReaderFuncs funcs = { on_message, on_noise, on_too_long, on_closed, on_response_line };
  ReaderResults results = { 0 };
  g_autoptr(GMainContext) context = g_main_context_new ();
  g_autoptr(GString) input = g_string_new (NULL);
  GSource *reader;
  int fds[2];

  results.loop = g_main_loop_new (context, FALSE);
  results.messages = g_ptr_array_new_with_free_func (free);
  results.noise = g_ptr_array_new_with_free_func (g_free);
  results.raw = g_ptr_array_new_with_free_func (g_free);

  append_long_line (input, "\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}", 8 * 1024);
  g_string_append (input, "{\"id\":2,\"result\":{}}\n");
  append_long_line (input, "\"id\":3,\"method\":\"tools/call\",\"params\":{}", 8 * 1024);
  append_long_line (input, "\"method\":\"notifications/message\",\"params\":{}", 100);
  append_long_line (input, "\"id\":4,\"error\":{\"code\":1,\"message\":\"decline\"}", 100);

  g_assert_true (g_unix_open_pipe (fds, FD_CLOEXEC, NULL));
  reader = mcp_line_reader_new (fds[0], 0, &funcs, &results, NULL);
  g_source_attach (reader, context);
  g_assert_cmpint (write (fds[1], input->str, input->len), ==, (gssize) input->len);
  close (fds[1]);
  g_main_loop_run (results.loop);

  g_assert_true (results.closed);
  g_assert_cmpuint (results.raw->len, ==, 3);
  g_assert_true (g_str_has_prefix (g_ptr_array_index (results.raw, 0), "{\"jsonrpc\":\"2.0\",\"id\":1,"));
  g_assert_cmpuint (strlen (g_ptr_array_index (results.raw, 0)), >=, 8 * 1024);
  g_assert_cmpstr (g_ptr_array_index (results.raw, 1), ==, "{\"id\":2,\"result\":{}}");
  g_assert_true (g_str_has_prefix (g_ptr_array_index (results.raw, 2), "{\"id\":4,"));
  /* All but those taken raw, in order. */
  g_assert_cmpuint (results.messages->len, ==, 3);
  g_assert_true (g_str_has_prefix (g_ptr_array_index (results.messages, 0), "{\"id\":3,\"method\""));
  g_assert_true (g_str_has_prefix (g_ptr_array_index (results.messages, 1), "{\"method\""));
  g_assert_true (g_str_has_prefix (g_ptr_array_index (results.messages, 2), "{\"error\""));
  g_assert_cmpuint (results.noise->len, ==, 0);

  g_source_unref (reader);
  g_main_loop_unref (results.loop);
  g_ptr_array_unref (results.messages);
  g_ptr_array_unref (results.noise);
  g_ptr_array_unref (results.raw);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/framing/lines", test_lines);
  g_test_add_func ("/framing/too-long", test_too_long);
  g_test_add_func ("/framing/exact-cap", test_exact_cap);
  g_test_add_func ("/framing/reader", test_reader);
  g_test_add_func ("/framing/paused-hang-up", test_paused_hang_up);
  g_test_add_func ("/framing/response-line", test_response_line);
  return g_test_run ();
}
