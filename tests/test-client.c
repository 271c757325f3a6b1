/* test-client.c — a raw MCP client of a program on stdio. */
#include "config.h"

#include "test-client.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <gio/gunixinputstream.h>
#include <glib/gstdio.h>

#include "test-http-lines.h"
#include "test-procs.h"

json_t *
test_find_tool (json_t     *tools,
                const char *name)
{
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    if (g_strcmp0 (json_string_value (json_object_get (tool, "name")), name) == 0)
      return tool;
  return NULL;
}

char *
test_interop_file (const char *relative_path)
{
  const char *root = g_getenv ("MCP_POOL_NODE_MODULES");
  g_autofree char *default_root = g_test_build_filename (G_TEST_DIST, "interop", "node_modules", NULL);
  g_autofree char *path = g_build_filename (root ? root : default_root, relative_path, NULL);
  g_autofree char *node = g_find_program_in_path ("node");

  if (node != NULL && g_file_test (path, G_FILE_TEST_EXISTS))
    return g_steal_pointer (&path);

  if (g_strcmp0 (g_getenv ("MCP_POOL_INTEROP_MUST_WORK"), "1") == 0)
    g_error ("%s is missing (node: %s): run `npm ci` in tests/interop",
             path, node ? node : "not found");
  {
    g_autofree char *reason =
      g_strdup_printf ("%s is not installed (node: %s); run `npm ci` in tests/interop to run this test",
                       path, node ? node : "not found");
    g_test_skip (reason);
  }
  return NULL;
}

/* A raw MCP client */

json_t *
test_never_answer (const char *method,
                   json_t     *params,
                   gpointer    user_data)
{
  return json_null ();
}

TestClient *
test_client_new (GSubprocessLauncher *launcher,
                 const char * const  *argv)
{
  g_autoptr(GError) error = NULL;
  TestClient *client = g_new0 (TestClient, 1);
  GInputStream *output;

  g_subprocess_launcher_set_flags (launcher, G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  client->process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  client->input = g_object_ref (g_subprocess_get_stdin_pipe (client->process));
  output = g_subprocess_get_stdout_pipe (client->process);
  client->output_fd = g_unix_input_stream_get_fd (G_UNIX_INPUT_STREAM (output));
  client->pending = g_string_new (NULL);
  client->stash = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  client->notifications = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  client->requests = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  client->next_id = 1;
  return client;
}

static void
on_ended (GObject      *process,
          GAsyncResult *result,
          gpointer      user_data)
{
  TestClient *client = user_data;

  g_subprocess_wait_finish (G_SUBPROCESS (process), result, NULL);
  g_clear_object (&client->waiting);
}

static gboolean
program_ended (gpointer data)
{
  TestClient *client = data;

  return client->waiting == NULL;
}

TestClient *
test_client_new_http (GSubprocessLauncher *launcher,
                      const char * const  *argv)
{
  g_autoptr(GError) error = NULL;
  TestClient *client = g_new0 (TestClient, 1);
  int log_fd = g_file_open_tmp ("mcp-pool-test-client-XXXXXX.log", &client->log, &error);
  g_autofree char *url = NULL;

  g_assert_no_error (error);
  close (log_fd);
  g_subprocess_launcher_set_flags (launcher, G_SUBPROCESS_FLAGS_STDIN_INHERIT);
  g_subprocess_launcher_set_stderr_file_path (launcher, client->log);
  /* No stdin to end it: a test that dies takes it along. */
  g_subprocess_launcher_set_child_setup (launcher, test_die_with_parent, NULL, NULL);
  client->process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  client->waiting = g_cancellable_new ();
  g_subprocess_wait_async (client->process, client->waiting, on_ended, client);
  url = test_wait_for_http_url (client->log, TEST_CLIENT_WAIT_MS);
  if (url == NULL)
    g_error ("serve --listen said no URL within %d s", TEST_CLIENT_TIMEOUT_MS / 1000);
  client->http = test_http_lines_new (url);
  client->output_fd = -1;
  client->pending = g_string_new (NULL);
  client->stash = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  client->notifications = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  client->requests = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  client->next_id = 1;
  return client;
}

void
test_client_free (TestClient *client)
{
  if (client->http != NULL)
    {
      g_autofree char *log = NULL;

      g_clear_pointer (&client->http, test_http_lines_free);
      if (client->waiting != NULL)
        {
          /* Its callback clears it, cancelled or not. */
          g_cancellable_cancel (client->waiting);
          while (client->waiting != NULL)
            g_main_context_iteration (NULL, TRUE);
        }
      if (g_test_failed () && g_file_get_contents (client->log, &log, NULL, NULL))
        g_test_message ("serve's stderr:\n%s", log);
      g_unlink (client->log);
      g_free (client->log);
    }
  g_clear_object (&client->input);
  g_clear_object (&client->process);
  g_string_free (client->pending, TRUE);
  g_ptr_array_unref (client->stash);
  g_ptr_array_unref (client->notifications);
  g_ptr_array_unref (client->requests);
  g_free (client);
}

void
test_client_send_line (TestClient *client,
                       const char *line)
{
  g_autoptr(GError) error = NULL;

  if (client->http != NULL)
    {
      test_http_lines_send (client->http, line);
      return;
    }
  if (g_output_stream_write_all (client->input, line, strlen (line), NULL, NULL, &error))
    g_output_stream_write_all (client->input, "\n", 1, NULL, NULL, &error);
  g_assert_no_error (error);
}

/* Takes @message. */
void
test_client_send (TestClient *client,
                  json_t     *message)
{
  g_autoptr(json_t) owned = message;
  g_autofree char *line = json_dumps (owned, JSON_COMPACT);

  test_client_send_line (client, line);
}

/* The next line without its newline, or NULL at end of file (an
 * unterminated last line is dropped, as a client drops it). */
char *
test_client_read_line (TestClient *client)
{
  gint64 deadline = g_get_monotonic_time () + TEST_CLIENT_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;

  if (client->http != NULL)
    {
      char *line = test_http_lines_read (client->http, deadline, program_ended, client);

      if (line == NULL && !program_ended (client))
        g_error ("The MCP server sent nothing for %d s", TEST_CLIENT_TIMEOUT_MS / 1000);
      return line;
    }
  for (;;)
    {
      char *newline = memchr (client->pending->str, '\n', client->pending->len);
      struct pollfd pfd = { .fd = client->output_fd, .events = POLLIN };
      char chunk[16384];
      gint64 left;
      ssize_t n;

      if (newline != NULL)
        {
          char *line = g_strndup (client->pending->str, newline - client->pending->str);

          g_string_erase (client->pending, 0, newline - client->pending->str + 1);
          return line;
        }
      left = deadline - g_get_monotonic_time ();
      if (left <= 0)
        g_error ("The MCP server wrote nothing for %d s", TEST_CLIENT_TIMEOUT_MS / 1000);
      if (poll (&pfd, 1, left / 1000 + 1) <= 0)
        continue;
      n = read (client->output_fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      g_assert_cmpint (n, >=, 0);
      if (n == 0)
        return NULL;
      g_string_append_len (client->pending, chunk, n);
    }
}

/* The next message, or NULL at end of file. */
json_t *
test_client_read_message (TestClient *client)
{
  g_autofree char *line = test_client_read_line (client);
  json_error_t error;
  json_t *message;

  if (line == NULL)
    return NULL;
  /* Replies may carry "\u0000", as the requests may. */
  message = json_loads (line, JSON_ALLOW_NUL, &error);
  if (!json_is_object (message))
    g_error ("The MCP server wrote a line that is not a JSON object (%s): %.200s", error.text, line);
  return message;
}

gboolean
test_message_has_id (json_t     *message,
                     json_int_t  id)
{
  json_t *value = json_object_get (message, "id");

  if (json_object_get (message, "method") != NULL)
    return FALSE;
  if (id == TEST_CLIENT_NULL_ID)
    return json_is_null (value);
  return json_is_integer (value) && json_integer_value (value) == id;
}

/* Files a message that is not the one awaited.  The servers under test
 * send their client no requests. */
static void
client_keep (TestClient *client,
             json_t     *message)
{
  if (json_object_get (message, "method") != NULL && json_object_get (message, "id") != NULL)
    {
      json_t *result;

      g_assert_nonnull (client->on_request);
      result = client->on_request (json_string_value (json_object_get (message, "method")),
                                   json_object_get (message, "params"), client->on_request_data);
      if (json_is_null (result))
        json_decref (result);
      else if (result != NULL)
        test_client_send (client, json_pack ("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
                                             json_object_get (message, "id"), "result", result));
      else
        test_client_send (client, json_pack ("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                                             json_object_get (message, "id"), "error", "code", -32601,
                                             "message", "not answered by the test"));
      g_ptr_array_add (client->requests, message);
    }
  else if (json_object_get (message, "method") != NULL)
    g_ptr_array_add (client->notifications, message);
  else
    g_ptr_array_add (client->stash, message);
}

/* The reply with @id, in whatever order replies come. */
json_t *
test_client_read_reply (TestClient *client,
                        json_int_t  id)
{
  json_t *message;

  for (guint i = 0; i < client->stash->len; i++)
    if (test_message_has_id (g_ptr_array_index (client->stash, i), id))
      return g_ptr_array_steal_index (client->stash, i);

  while ((message = test_client_read_message (client)) != NULL)
    {
      if (test_message_has_id (message, id))
        return message;
      client_keep (client, message);
    }
  g_error ("The MCP server closed its stdout before the reply to request %" JSON_INTEGER_FORMAT, id);
}

/* Sends a request with a new id; takes @params (may be NULL). */
json_int_t
test_client_request (TestClient *client,
                     const char *method,
                     json_t     *params)
{
  json_int_t id = client->next_id++;

  test_client_send (client, json_pack ("{s:s, s:I, s:s, s:o*}", "jsonrpc", "2.0", "id", id,
                                       "method", method, "params", params));
  return id;
}

/* The result of a request that must succeed; takes @params. */
json_t *
test_client_result (TestClient *client,
                    const char *method,
                    json_t     *params)
{
  g_autoptr(json_t) reply = test_client_read_reply (client, test_client_request (client, method, params));
  json_t *result = json_object_get (reply, "result");

  if (result == NULL)
    {
      g_autofree char *text = json_dumps (reply, JSON_COMPACT);

      g_error ("%s failed: %s", method, text);
    }
  return json_incref (result);
}

/* Takes @params (may be NULL). */
void
test_client_notify (TestClient *client,
                    const char *method,
                    json_t     *params)
{
  test_client_send (client, json_pack ("{s:s, s:s, s:o*}", "jsonrpc", "2.0", "method", method,
                                       "params", params));
}

/* How many messages of @messages have @method. */
static guint
count_method (GPtrArray  *messages,
              const char *method)
{
  guint count = 0;

  for (guint i = 0; i < messages->len; i++)
    count += g_strcmp0 (json_string_value (json_object_get (g_ptr_array_index (messages, i), "method")),
                        method) == 0;
  return count;
}

guint
test_client_count_notifications (TestClient *client,
                                 const char *method)
{
  return count_method (client->notifications, method);
}

json_t *
test_client_last_notification (TestClient *client,
                               const char *method)
{
  for (guint i = client->notifications->len; i > 0; i--)
    {
      json_t *notification = g_ptr_array_index (client->notifications, i - 1);

      if (g_strcmp0 (json_string_value (json_object_get (notification, "method")), method) == 0)
        return json_object_get (notification, "params");
    }
  return NULL;
}

/* Reads until @messages (the client's requests or notifications) has
 * one more of @method than now. */
static void
wait_for_one_more (TestClient *client,
                   GPtrArray  *messages,
                   const char *method)
{
  guint seen = count_method (messages, method);

  while (count_method (messages, method) == seen)
    {
      json_t *message = test_client_read_message (client);

      if (message == NULL)
        g_error ("The MCP server closed its stdout before sending %s", method);
      client_keep (client, message);
    }
}

void
test_client_wait_request (TestClient *client,
                          const char *method)
{
  wait_for_one_more (client, client->requests, method);
}

/* Waits for one more notification @method than seen so far. */
void
test_client_wait_notification (TestClient *client,
                               const char *method)
{
  wait_for_one_more (client, client->notifications, method);
}

/* What MCP clients do first to end a server. */
void
test_client_close_input (TestClient *client)
{
  g_autoptr(GError) error = NULL;

  if (client->http != NULL)
    {
      g_subprocess_send_signal (client->process, SIGTERM);
      return;
    }
  g_output_stream_close (client->input, NULL, &error);
  g_assert_no_error (error);
  g_clear_object (&client->input);
}

/* Stops reading: the server's next write fails. */
void
test_client_close_output (TestClient *client)
{
  g_autoptr(GError) error = NULL;

  g_assert_null (client->http);
  g_input_stream_close (g_subprocess_get_stdout_pipe (client->process), NULL, &error);
  g_assert_no_error (error);
  client->output_fd = -1;
}

/* Files every message up to end of file, then waits (bounded) for the
 * process to exit. */
void
test_client_wait_exit (TestClient *client)
{
  json_t *message;

  while ((client->http != NULL || client->output_fd >= 0) && (message = test_client_read_message (client)) != NULL)
    client_keep (client, message);
  test_client_wait_process (client);
}

/* Waits (bounded) for the process to exit, reading nothing of its output. */
void
test_client_wait_process (TestClient *client)
{
  if (!test_subprocess_wait (client->process, TEST_CLIENT_WAIT_MS))
    g_error ("The MCP server did not exit within %d s", TEST_CLIENT_TIMEOUT_MS / 1000);
  client->exited = TRUE;
  /* What a sanitizer or a failure printed, before an assertion on the
   * status ends the test (stdio serve's stderr is the test's own). */
  if (client->log != NULL && !(g_subprocess_get_if_exited (client->process) &&
                               g_subprocess_get_exit_status (client->process) == 0))
    {
      g_autofree char *log = NULL;

      if (g_file_get_contents (client->log, &log, NULL, NULL))
        g_test_message ("serve ended with status %d; its stderr:\n%s",
                        g_subprocess_get_status (client->process), log);
    }
}

const char *
test_result_text (json_t *result)
{
  return mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text");
}

void
test_client_check_request_cancelled_by_crash (TestClient *client,
                                              const char *server)
{
  g_autofree char *ask_tool = g_strconcat (server, "__ask_client", NULL);
  g_autofree char *crash_tool = g_strconcat (server, "__crash", NULL);
  g_autoptr(json_t) crashed = NULL;
  g_autoptr(json_t) answered = NULL;
  json_t *asked, *cancelled;
  json_int_t ask;

  client->on_request = test_never_answer;
  ask = test_client_request (client, "tools/call", json_pack ("{s:s, s:{s:s}}", "name", ask_tool,
                                                              "arguments", "method", "roots/list"));
  test_client_wait_request (client, "roots/list");
  asked = g_ptr_array_index (client->requests, client->requests->len - 1);
  crashed = test_client_read_reply (client, test_client_request (client, "tools/call",
                                                                 json_pack ("{s:s, s:{}}", "name", crash_tool,
                                                                            "arguments")));
  /* It may have come with the reply to the crash already. */
  if (test_client_count_notifications (client, "notifications/cancelled") == 0)
    test_client_wait_notification (client, "notifications/cancelled");
  cancelled = test_client_last_notification (client, "notifications/cancelled");
  answered = test_client_read_reply (client, ask);

  g_assert_true (json_equal (json_object_get (cancelled, "requestId"), json_object_get (asked, "id")));
  g_assert_nonnull (json_object_get (crashed, "result"));
  g_assert_nonnull (json_object_get (answered, "result"));
}

void
test_assert_json (json_t     *value,
                  const char *expected)
{
  g_autoptr(json_t) wanted = json_loads (expected, 0, NULL);
  g_autofree char *text = value != NULL ? json_dumps (value, JSON_COMPACT | JSON_ENCODE_ANY) : g_strdup ("NULL");

  g_assert_nonnull (wanted);
  if (!json_equal (value, wanted))
    g_error ("Expected %s, got %s", expected, text);
}

gboolean
test_sandbox_skipped (json_t *result)
{
  const char *status = mcp_json_get_string (json_object_get (result, "structuredContent"), "status");

  /* The sandbox that serve starts under valgrind never answers within the
   * bounds; test-sandbox's runs are skipped under valgrind too. */
  if (test_under_valgrind ())
    {
      g_test_skip ("A sandbox started by mcp-pool under valgrind does not answer in time");
      return TRUE;
    }
  if (result != NULL && g_strcmp0 (status, "success") != 0 &&
      strstr (test_result_text (result), "user namespaces") != NULL &&
      g_strcmp0 (g_getenv ("MCP_POOL_SANDBOX_MUST_WORK"), "1") != 0)
    {
      g_test_skip (test_result_text (result));
      return TRUE;
    }
  return FALSE;
}
