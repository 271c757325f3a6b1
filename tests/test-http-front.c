/* test-http-front.c — `mcp-pool serve --listen`: the Streamable HTTP
 * front, driven over real sockets with libsoup against a real serve and
 * the fixture server behind it (tests/interop/sdk-http-client.mjs drives
 * it with the official SDK): sessions, JSON and event-stream answers,
 * cancellation, a Python session per HTTP session, the security checks and
 * bounds, unix sockets, and the end on SIGTERM.  Every test checks that no
 * process is left.
 */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <jansson.h>
#include <libsoup/soup.h>

#include "common/mcp-jsonrpc.h"
#include "mcp/mcp-http-front.h"
#include "test-client.h"
#include "test-files.h"
#include "test-procs.h"
#include "test-wait.h"

#define EXIT_TIMEOUT_MS   (20 * 1000)  /* scaled by test_wait_for() */
#define ANSWER_TIMEOUT_MS (60 * 1000)

typedef struct {
  char         *folder;     /* config, state, token and socket */
  char         *log;        /* serve's stderr, a file: no pipe for it to fill */
  GSubprocess  *serve;
  char         *url;        /* http://…/mcp, or unix:PATH */
  SoupSession  *http;
} Front;

typedef struct {
  guint               status;
  json_t             *body;      /* the JSON answer, or NULL */
  char               *text;      /* the body as it came */
  SoupMessageHeaders *headers;   /* the response's */
} Answer;

static void
answer_clear (Answer *answer)
{
  g_clear_pointer (&answer->body, json_decref);
  g_clear_pointer (&answer->text, g_free);
  g_clear_pointer (&answer->headers, soup_message_headers_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Answer, answer_clear)

/* Starts `serve --listen @listen` with @extra arguments; the URL it says. */
static void
front_start (Front              *front,
             const char         *listen,
             const char * const *extra)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE);
  g_autofree char *config = g_build_filename (front->folder, "servers.json", NULL);
  g_autofree char *state = g_build_filename (front->folder, "state", NULL);
  g_autofree char *contents = g_strdup_printf ("{\"mcpServers\": {\"fx\": {\"command\": \"%s\", "
                                               "\"args\": [\"--resources\", \"fx\"]}}}",
                                               test_fixture_path ());
  g_autoptr(GStrvBuilder) argv = g_strv_builder_new ();
  g_auto(GStrv) args = NULL;
  g_auto(GStrv) wrapped = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_true (g_file_set_contents (config, contents, -1, NULL));
  g_subprocess_launcher_setenv (launcher, "MCP_BRIDGE_STATE_DIR", state, TRUE);
  g_subprocess_launcher_set_child_setup (launcher, test_die_with_parent, NULL, NULL);
  g_clear_pointer (&front->log, g_free);
  front->log = g_build_filename (front->folder, "serve.log", NULL);
  g_subprocess_launcher_set_stderr_file_path (launcher, front->log);
  g_strv_builder_add_many (argv, test_mcp_pool_path (), "serve", "--config", config,
                           "--expose", "proxy,code", "--listen", listen, NULL);
  if (extra != NULL)
    g_strv_builder_addv (argv, (const char **) extra);
  args = g_strv_builder_end (argv);
  wrapped = test_wrap_argv ((const char * const *) args);
  front->serve = g_subprocess_launcher_spawnv (launcher, (const char * const *) wrapped, &error);
  g_assert_no_error (error);
  front->url = test_wait_for_http_url (front->log, ANSWER_TIMEOUT_MS);
  g_assert_nonnull (front->url);
  if (g_str_has_prefix (front->url, "unix:"))
    {
      g_autoptr(GSocketAddress) address = g_unix_socket_address_new (front->url + 5);

      front->http = soup_session_new_with_options ("remote-connectable", address, NULL);
    }
  else
    front->http = soup_session_new ();
  /* Straight to serve, whatever proxy the environment names. */
  soup_session_set_proxy_resolver (front->http, NULL);
}

static void
setup (Front         *front,
       gconstpointer  data)
{
  front->folder = g_dir_make_tmp ("mcp-pool-http-front-XXXXXX", NULL);
  /* A root serve's sandboxes must pass it to reach the state dir in it. */
  g_chmod (front->folder, 0755);
  if (data != NULL)
    return;
  front_start (front, "127.0.0.1:0", NULL);
}

/* Ends serve with SIGTERM: it exits by itself, leaving nothing. */
static void
front_stop (Front *front)
{
  if (front->serve == NULL)
    return;
  g_subprocess_send_signal (front->serve, SIGTERM);
  g_assert_true (test_subprocess_wait (front->serve, EXIT_TIMEOUT_MS));
  if (!g_subprocess_get_successful (front->serve))
    {
      g_autofree char *log = NULL;

      g_file_get_contents (front->log, &log, NULL, NULL);
      g_test_message ("serve's stderr:\n%s", log != NULL ? log : "");
    }
  g_assert_true (g_subprocess_get_if_exited (front->serve));
  g_assert_cmpint (g_subprocess_get_exit_status (front->serve), ==, 0);
  g_clear_object (&front->serve);
}

static void
teardown (Front         *front,
          gconstpointer  data)
{
  front_stop (front);
  g_clear_object (&front->http);
  g_clear_pointer (&front->url, g_free);
  g_clear_pointer (&front->log, g_free);
  test_assert_no_children ();
  test_remove_tree (front->folder);
  g_free (front->folder);
}

/* The URL that requests go to (over a unix socket, any http URL). */
static const char *
request_url (Front *front)
{
  return g_str_has_prefix (front->url, "unix:") ? "http://localhost/mcp" : front->url;
}

typedef struct {
  gboolean  done;
  GBytes   *bytes;
} Pending;

static void
on_sent (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  Pending *pending = user_data;

  pending->bytes = soup_session_send_and_read_finish (SOUP_SESSION (source), result, NULL);
  pending->done = TRUE;
}

static gboolean
pending_done (gpointer data)
{
  g_main_context_iteration (NULL, FALSE);
  return ((Pending *) data)->done;
}

/* Sends @body (NULL: none) with @session_id (NULL: none) and the header
 * pairs of @headers (NULL-terminated), and reads the whole answer, which
 * must come within ANSWER_TIMEOUT_MS. */
static void
send_http (Front              *front,
           const char         *method,
           const char         *session_id,
           const char         *body,
           const char * const *headers,
           Answer             *answer)
{
  g_autoptr(SoupMessage) message = soup_message_new (method, request_url (front));
  SoupMessageHeaders *request_headers = soup_message_get_request_headers (message);
  g_autoptr(GBytes) bytes = NULL;
  Pending pending = { 0 };
  const char *content_type;

  soup_message_headers_replace (request_headers, "Accept", "application/json, text/event-stream");
  if (session_id != NULL)
    soup_message_headers_replace (request_headers, "Mcp-Session-Id", session_id);
  for (gsize i = 0; headers != NULL && headers[i] != NULL; i += 2)
    soup_message_headers_replace (request_headers, headers[i], headers[i + 1]);
  if (body != NULL)
    {
      g_autoptr(GBytes) sent = g_bytes_new (body, strlen (body));

      soup_message_set_request_body_from_bytes (message, "application/json", sent);
    }
  soup_session_send_and_read_async (front->http, message, G_PRIORITY_DEFAULT, NULL, on_sent, &pending);
  g_assert_true (test_wait_for (pending_done, &pending, ANSWER_TIMEOUT_MS));
  bytes = pending.bytes;
  g_assert_nonnull (bytes);
  answer->status = soup_message_get_status (message);
  answer->text = g_strndup (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes));
  answer->headers = soup_message_headers_ref (soup_message_get_response_headers (message));
  content_type = soup_message_headers_get_content_type (answer->headers, NULL);
  if (g_strcmp0 (content_type, "application/json") == 0)
    answer->body = json_loads (answer->text, 0, NULL);
}

static void
post (Front      *front,
      const char *session_id,
      const char *body,
      Answer     *answer)
{
  send_http (front, "POST", session_id, body, NULL, answer);
}

/* Sends @request as it is over a new connection to serve, and reads the
 * answer: its headers and its Content-Length of body (the connection may
 * stay open, serve waiting for a body that is not sent). */
static char *
raw_exchange (Front      *front,
              const char *request)
{
  g_autoptr(GUri) uri = g_uri_parse (front->url, G_URI_FLAGS_NONE, NULL);
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection = NULL;
  g_autoptr(GString) answer = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  char buffer[4096];
  gssize n;

  g_socket_client_set_timeout (client, test_timeout_ms (ANSWER_TIMEOUT_MS) / 1000);
  connection = g_socket_client_connect_to_host (client, g_uri_get_host (uri), g_uri_get_port (uri), NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (connection)), request,
                                            strlen (request), NULL, NULL, &error));
  g_assert_no_error (error);
  while (TRUE)
    {
      const char *end = strstr (answer->str, "\r\n\r\n");
      const char *length = strstr (answer->str, "Content-Length: ");

      if (end != NULL && length != NULL &&
          answer->len >= (gsize) (end + 4 - answer->str) + g_ascii_strtoull (length + 16, NULL, 10))
        break;
      n = g_input_stream_read (g_io_stream_get_input_stream (G_IO_STREAM (connection)), buffer, sizeof buffer,
                               NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpint (n, >, 0);
      g_string_append_len (answer, buffer, n);
    }
  return g_string_free (g_steal_pointer (&answer), FALSE);
}

#define INITIALIZE \
  "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": {\"protocolVersion\": " \
  "\"2025-06-18\", \"capabilities\": {}, \"clientInfo\": {\"name\": \"test\", \"version\": \"1\"}}}"

/* A new session: its id, after initialize and initialized. */
static char *
open_session (Front *front)
{
  g_auto(Answer) initialized = { 0 };
  g_auto(Answer) answer = { 0 };
  const char *id;

  post (front, NULL, INITIALIZE, &answer);
  g_assert_cmpuint (answer.status, ==, SOUP_STATUS_OK);
  g_assert_cmpstr (mcp_json_get_string (json_object_get (answer.body, "result"), "protocolVersion"), ==,
                   "2025-06-18");
  id = soup_message_headers_get_one (answer.headers, "Mcp-Session-Id");
  g_assert_nonnull (id);
  post (front, id, "{\"jsonrpc\": \"2.0\", \"method\": \"notifications/initialized\"}", &initialized);
  g_assert_cmpuint (initialized.status, ==, SOUP_STATUS_ACCEPTED);
  return g_strdup (id);
}

/* The text of a tools/call answered with JSON. */
static const char *
call_text (Answer *answer)
{
  g_assert_cmpuint (answer->status, ==, SOUP_STATUS_OK);
  g_assert_nonnull (answer->body);
  return test_result_text (json_object_get (answer->body, "result"));
}

static char *
tools_call (const char *id,
            const char *name,
            const char *arguments)
{
  return g_strdup_printf ("{\"jsonrpc\": \"2.0\", \"id\": %s, \"method\": \"tools/call\", \"params\": "
                          "{\"name\": \"%s\", \"arguments\": %s}}", id, name, arguments);
}

/* A session: its id is 32 random bytes, requests name it, and DELETE
 * ends it. */
static void
test_session (Front         *front,
              gconstpointer  data)
{
  g_autofree char *session = open_session (front);
  g_autofree char *other = open_session (front);
  g_autofree char *echo = tools_call ("2", "fx__echo", "{\"message\": \"over HTTP\"}");
  g_auto(Answer) listed = { 0 };
  g_auto(Answer) echoed = { 0 };
  g_auto(Answer) anonymous = { 0 };
  g_auto(Answer) unknown = { 0 };
  g_auto(Answer) ended = { 0 };
  g_auto(Answer) after = { 0 };
  g_auto(Answer) other_after = { 0 };
  g_auto(Answer) batch = { 0 };
  g_auto(Answer) version = { 0 };
  g_auto(Answer) get = { 0 };

  g_assert_cmpuint (strlen (session), ==, 64);
  g_assert_cmpstr (session, !=, other);
  post (front, session, "{\"jsonrpc\": \"2.0\", \"id\": \"list\", \"method\": \"tools/list\"}", &listed);
  g_assert_cmpuint (listed.status, ==, SOUP_STATUS_OK);
  g_assert_nonnull (test_find_tool (json_object_get (json_object_get (listed.body, "result"), "tools"),
                                    "fx__echo"));
  post (front, session, echo, &echoed);
  g_assert_cmpstr (call_text (&echoed), ==, "Echo: over HTTP");

  post (front, NULL, echo, &anonymous);
  g_assert_cmpuint (anonymous.status, ==, SOUP_STATUS_BAD_REQUEST);
  g_assert_nonnull (strstr (anonymous.text, "Mcp-Session-Id"));
  post (front, "not-a-session", echo, &unknown);
  g_assert_cmpuint (unknown.status, ==, SOUP_STATUS_NOT_FOUND);
  post (front, session, "[" INITIALIZE "]", &batch);
  g_assert_cmpuint (batch.status, ==, SOUP_STATUS_BAD_REQUEST);
  send_http (front, "POST", session, echo, (const char *[]) { "MCP-Protocol-Version", "1999-01-01", NULL },
             &version);
  g_assert_cmpuint (version.status, ==, SOUP_STATUS_BAD_REQUEST);
  g_assert_nonnull (strstr (version.text, "2025-06-18"));
  /* GET is the session's event stream (the SDK test reads it); asked for
   * anything else, it says what it is. */
  send_http (front, "GET", session, NULL, (const char *[]) { "Accept", "application/json", NULL }, &get);
  g_assert_cmpuint (get.status, ==, SOUP_STATUS_NOT_ACCEPTABLE);

  send_http (front, "DELETE", session, NULL, NULL, &ended);
  g_assert_cmpuint (ended.status, ==, SOUP_STATUS_OK);
  post (front, session, echo, &after);
  g_assert_cmpuint (after.status, ==, SOUP_STATUS_NOT_FOUND);
  post (front, other, echo, &other_after);
  g_assert_cmpstr (call_text (&other_after), ==, "Echo: over HTTP");
}

/* A request that asks for progress is answered with an event stream: the
 * progress, then the reply. */
static void
test_progress_stream (Front         *front,
                      gconstpointer  data)
{
  g_autofree char *session = open_session (front);
  g_auto(Answer) answer = { 0 };
  g_auto(GStrv) events = NULL;
  guint progress = 0;
  json_t *last = NULL;

  post (front, session,
        "{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"tools/call\", \"params\": {\"name\": \"fx__progress\", "
        "\"arguments\": {\"steps\": 3, \"delay_ms\": 10}, \"_meta\": {\"progressToken\": \"p\"}}}", &answer);
  g_assert_cmpuint (answer.status, ==, SOUP_STATUS_OK);
  g_assert_cmpstr (soup_message_headers_get_content_type (answer.headers, NULL), ==, "text/event-stream");
  events = g_strsplit (answer.text, "\n\n", -1);
  for (char **event = events; *event != NULL; event++)
    {
      const char *data_line = strstr (*event, "data: ");
      g_autoptr(json_t) message = data_line != NULL ? json_loads (data_line + 6, 0, NULL) : NULL;

      if (message == NULL)
        continue;
      g_assert_null (last);
      if (g_strcmp0 (mcp_json_get_string (message, "method"), "notifications/progress") == 0)
        {
          g_assert_cmpstr (mcp_json_get_string (json_object_get (message, "params"), "progressToken"), ==, "p");
          progress++;
        }
      else
        last = json_incref (message);
    }
  g_assert_cmpuint (progress, ==, 3);
  g_assert_nonnull (last);
  g_assert_cmpint (json_integer_value (json_object_get (last, "id")), ==, 5);
  g_assert_cmpstr (test_result_text (json_object_get (last, "result")), ==, "done 3 steps");
  json_decref (last);
}

/* The events of an event stream's text: their ids and messages. */
static GPtrArray *
parse_events (const char *text,
              GArray     *ids)
{
  g_auto(GStrv) events = g_strsplit (text, "\n\n", -1);
  GPtrArray *messages = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);

  for (char **event = events; *event != NULL; event++)
    {
      const char *id = g_str_has_prefix (*event, "id: ") ? *event + 4 : strstr (*event, "\nid: ");
      const char *data = strstr (*event, "data: ");
      json_t *message = data != NULL ? json_loads (data + 6, 0, NULL) : NULL;
      guint64 number;

      if (message == NULL)
        continue;
      if (id != NULL && id[0] == '\n')
        id += 5;
      number = id != NULL ? g_ascii_strtoull (id, NULL, 10) : 0;
      g_array_append_val (ids, number);
      g_ptr_array_add (messages, message);
    }
  return messages;
}

/* A request's event stream cut off goes on with GET and Last-Event-ID:
 * the events it missed, the rest, then the reply; the request was not
 * cancelled by the cut. */
static void
test_resume (Front         *front,
             gconstpointer  data)
{
  g_autofree char *session = open_session (front);
  static const char body[] =
    "{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"tools/call\", \"params\": {\"name\": \"fx__progress\", "
    "\"arguments\": {\"steps\": 5, \"delay_ms\": 200}, \"_meta\": {\"progressToken\": \"r\"}}}";
  g_autoptr(SoupMessage) message = soup_message_new ("POST", request_url (front));
  g_autoptr(GBytes) sent = g_bytes_new_static (body, strlen (body));
  g_autoptr(GInputStream) stream = NULL;
  g_autoptr(GString) first = g_string_new (NULL);
  g_autoptr(GArray) first_ids = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr(GPtrArray) first_events = NULL;
  g_autoptr(GPtrArray) events = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *last_id = NULL;
  g_auto(Answer) resumed = { 0 };
  json_t *reply;

  soup_message_headers_replace (soup_message_get_request_headers (message), "Mcp-Session-Id", session);
  soup_message_headers_replace (soup_message_get_request_headers (message), "Accept",
                                "application/json, text/event-stream");
  soup_message_set_request_body_from_bytes (message, "application/json", sent);
  stream = soup_session_send (front->http, message, NULL, &error);
  g_assert_no_error (error);
  /* The first event, then the connection is dropped. */
  while (strstr (first->str, "\n\n") == NULL)
    {
      char buffer[256];
      gssize n = g_input_stream_read (stream, buffer, sizeof buffer, NULL, &error);

      g_assert_no_error (error);
      g_assert_cmpint (n, >, 0);
      g_string_append_len (first, buffer, n);
    }
  g_input_stream_close (stream, NULL, NULL);
  g_clear_object (&stream);
  first_events = parse_events (first->str, first_ids);
  g_assert_cmpuint (first_ids->len, >=, 1);
  last_id = g_strdup_printf ("%" G_GUINT64_FORMAT, g_array_index (first_ids, guint64, first_ids->len - 1));

  send_http (front, "GET", session, NULL,
             (const char *[]) { "Accept", "text/event-stream", "Last-Event-ID", last_id, NULL }, &resumed);
  g_assert_cmpuint (resumed.status, ==, SOUP_STATUS_OK);
  events = parse_events (resumed.text, ids);
  g_assert_cmpuint (events->len, ==, 5 - first_events->len + 1);
  /* From the event after the last one seen, in order. */
  g_assert_cmpuint (g_array_index (ids, guint64, 0), >, g_ascii_strtoull (last_id, NULL, 10));
  for (guint i = 1; i < ids->len; i++)
    g_assert_cmpuint (g_array_index (ids, guint64, i), >, g_array_index (ids, guint64, i - 1));
  for (guint i = 0; i + 1 < events->len; i++)
    g_assert_cmpstr (mcp_json_get_string (events->pdata[i], "method"), ==, "notifications/progress");
  reply = events->pdata[events->len - 1];
  g_assert_cmpint (json_integer_value (json_object_get (reply, "id")), ==, 9);
  g_assert_cmpstr (test_result_text (json_object_get (reply, "result")), ==, "done 5 steps");
}

/* notifications/cancelled ends a request: its POST gets no reply. */
static void
test_cancel (Front         *front,
             gconstpointer  data)
{
  g_autofree char *session = open_session (front);
  g_autofree char *slow = tools_call ("\"slow\"", "fx__sleep", "{\"ms\": 600000}");
  g_autoptr(SoupMessage) message = soup_message_new ("POST", request_url (front));
  g_autoptr(GBytes) body = g_bytes_new (slow, strlen (slow));
  g_auto(Answer) cancelled = { 0 };
  g_auto(Answer) still = { 0 };
  g_autofree char *echo = tools_call ("3", "fx__echo", "{\"message\": \"after\"}");
  Pending pending = { 0 };

  soup_message_headers_replace (soup_message_get_request_headers (message), "Mcp-Session-Id", session);
  soup_message_set_request_body_from_bytes (message, "application/json", body);
  soup_session_send_and_read_async (front->http, message, G_PRIORITY_DEFAULT, NULL, on_sent, &pending);
  /* Until the server has the call: a cancellation of an unknown request
   * is dropped, as the specification asks.  Bounded: 100 tries, each
   * waiting 200 ms (scaled) for the answer. */
  for (guint tries = 0; !pending.done && tries < 100; tries++)
    {
      g_auto(Answer) sent = { 0 };

      g_main_context_iteration (NULL, FALSE);
      post (front, session, "{\"jsonrpc\": \"2.0\", \"method\": \"notifications/cancelled\", \"params\": "
            "{\"requestId\": \"slow\", \"reason\": \"test\"}}", &sent);
      g_assert_cmpuint (sent.status, ==, SOUP_STATUS_ACCEPTED);
      if (test_wait_for (pending_done, &pending, 200))
        break;
    }
  g_assert_true (test_wait_for (pending_done, &pending, 10000));
  g_assert_cmpuint (soup_message_get_status (message), ==, SOUP_STATUS_ACCEPTED);
  g_assert_cmpuint (g_bytes_get_size (pending.bytes), ==, 0);
  g_bytes_unref (pending.bytes);
  post (front, session, echo, &still);
  g_assert_cmpstr (call_text (&still), ==, "Echo: after");
}

static gboolean
sandbox_works (Answer *answer)
{
  return !test_sandbox_skipped (json_object_get (answer->body, "result"));
}

/* Each HTTP session is a client of its own, with its own Python session. */
static void
test_python_sessions (Front         *front,
                      gconstpointer  data)
{
  g_autofree char *first = open_session (front);
  g_autofree char *second = open_session (front);
  g_autofree char *set = tools_call ("2", "run_python", "{\"code\": \"x = 'kept'\\nprint('set')\"}");
  g_autofree char *read = tools_call ("3", "run_python", "{\"code\": \"print(x)\"}");
  g_auto(Answer) was_set = { 0 };
  g_auto(Answer) kept = { 0 };
  g_auto(Answer) other = { 0 };
  g_auto(Answer) ended = { 0 };
  g_autofree char *again = NULL;
  g_auto(Answer) gone = { 0 };

  post (front, first, set, &was_set);
  if (!sandbox_works (&was_set))
    return;
  g_assert_cmpstr (call_text (&was_set), ==, "set");
  post (front, first, read, &kept);
  g_assert_cmpstr (call_text (&kept), ==, "kept");
  post (front, second, read, &other);
  g_assert_nonnull (strstr (call_text (&other), "NameError"));
  /* A session's end ends its Python too. */
  send_http (front, "DELETE", first, NULL, NULL, &ended);
  g_assert_cmpuint (ended.status, ==, SOUP_STATUS_OK);
  again = open_session (front);
  post (front, again, read, &gone);
  g_assert_nonnull (strstr (call_text (&gone), "NameError"));
}

/* A stateless run_python of @code, with the session handle @handle (NULL:
 * none). */
static char *
stateless_run (const char *code,
               const char *handle)
{
  g_autoptr(json_t) body = json_pack ("{s:s, s:i, s:s, s:{s:s, s:{s:s}, s:{s:s, s:{}, s:{s:s, s:s}}}}",
                                      "jsonrpc", "2.0", "id", 7, "method", "tools/call", "params",
                                      "name", "run_python", "arguments", "code", code,
                                      "_meta", "io.modelcontextprotocol/protocolVersion", "2026-07-28",
                                      "io.modelcontextprotocol/clientCapabilities",
                                      "io.modelcontextprotocol/clientInfo", "name", "test", "version", "1");

  if (handle != NULL)
    json_object_set_new (json_object_get (json_object_get (body, "params"), "arguments"), "session",
                         json_string (handle));
  return json_dumps (body, JSON_COMPACT);
}

static void post_modern (Front *front, const char *body, const char *version, const char *method,
                         const char *name, Answer *answer);

/* A client without a session keeps a Python session by the handle its
 * first run returns; without it, each run is a new session, and a handle
 * that names none is refused. */
static void
test_python_session_handle (Front         *front,
                            gconstpointer  data)
{
  g_autofree char *set = stateless_run ("x = 'kept'\nprint('set')", NULL);
  g_autofree char *unnamed = stateless_run ("print(x)", NULL);
  g_autofree char *unknown = stateless_run ("print(x)", "no-such-handle");
  g_autofree char *read = NULL;
  g_auto(Answer) was_set = { 0 };
  g_auto(Answer) kept = { 0 };
  g_auto(Answer) other = { 0 };
  g_auto(Answer) refused = { 0 };
  const char *handle;

  post_modern (front, set, "2026-07-28", "tools/call", "run_python", &was_set);
  if (!sandbox_works (&was_set))
    return;
  handle = mcp_json_get_string (json_object_get (json_object_get (was_set.body, "result"), "structuredContent"),
                                "session");
  g_assert_nonnull (handle);
  g_assert_nonnull (strstr (call_text (&was_set), handle));
  g_assert_true (g_str_has_prefix (call_text (&was_set), "set\n"));

  read = stateless_run ("print(x)", handle);
  post_modern (front, read, "2026-07-28", "tools/call", "run_python", &kept);
  g_assert_cmpstr (call_text (&kept), ==, "kept");
  post_modern (front, unnamed, "2026-07-28", "tools/call", "run_python", &other);
  g_assert_nonnull (strstr (call_text (&other), "NameError"));
  post_modern (front, unknown, "2026-07-28", "tools/call", "run_python", &refused);
  g_assert_nonnull (strstr (call_text (&refused), "'session' names no Python session"));
  g_assert_true (json_is_true (json_object_get (json_object_get (refused.body, "result"), "isError")));
}

/* Nothing of the pool in an answer that failed a check. */
static void
assert_tells_nothing (Answer *answer)
{
  g_assert_null (strstr (answer->text, "fx"));
  g_assert_null (strstr (answer->text, "servers.json"));
  g_assert_null (strstr (answer->text, "mcp-pool-http-front"));
}

/* The DNS-rebinding rule, the token, the bounds: refused before anything
 * of the pool is seen. */
static void
test_security (Front         *front,
               gconstpointer  data)
{
  g_autofree char *token_file = g_build_filename (front->folder, "token", NULL);
  const char * const extra[] = { "--token-file", token_file, "--max-sessions", "2", NULL };
  g_autofree char *too_big = NULL;
  /* (header, value) pairs that fail the DNS-rebinding rule. */
  static const char * const forbidden[][2] = {
    { "Origin", "http://evil.example" }, { "Origin", "https://localhost.evil.example" }, { "Origin", "null" },
    { "Host", "evil.example" }, { "Host", "evil.example:80" }, { "Host", "127.0.0.1.evil.example" },
  };
  const char *bearer = "Bearer s3cret-token";
  g_auto(Answer) no_token = { 0 };
  g_auto(Answer) wrong_token = { 0 };
  g_auto(Answer) good_origin = { 0 };
  g_auto(Answer) third = { 0 };
  g_auto(Answer) first = { 0 };
  g_auto(Answer) second = { 0 };

  g_assert_true (g_file_set_contents (token_file, "s3cret-token\n", -1, NULL));
  front_start (front, "127.0.0.1:0", extra);

  send_http (front, "POST", NULL, INITIALIZE, NULL, &no_token);
  g_assert_cmpuint (no_token.status, ==, SOUP_STATUS_UNAUTHORIZED);
  g_assert_cmpstr (soup_message_headers_get_one (no_token.headers, "WWW-Authenticate"), ==, "Bearer");
  assert_tells_nothing (&no_token);
  send_http (front, "POST", NULL, INITIALIZE, (const char *[]) { "Authorization", "Bearer s3cret-tokem", NULL },
             &wrong_token);
  g_assert_cmpuint (wrong_token.status, ==, SOUP_STATUS_UNAUTHORIZED);
  assert_tells_nothing (&wrong_token);

  for (gsize i = 0; i < G_N_ELEMENTS (forbidden); i++)
    {
      g_auto(Answer) answer = { 0 };

      send_http (front, "POST", NULL, INITIALIZE,
                 (const char *[]) { "Authorization", bearer, forbidden[i][0], forbidden[i][1], NULL }, &answer);
      g_assert_cmpuint (answer.status, ==, SOUP_STATUS_FORBIDDEN);
      assert_tells_nothing (&answer);
    }

  /* A body over the bound is refused from its headers: a client that
   * expects 100-continue need not send it, and one that sends it anyway
   * has it read and dropped, not kept. */
  too_big = raw_exchange (front, "POST /mcp HTTP/1.1\r\nHost: localhost\r\n"
                                 "Authorization: Bearer s3cret-token\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 34603008\r\nExpect: 100-continue\r\n\r\n");
  g_assert_true (g_str_has_prefix (too_big, "HTTP/1.1 413 "));
  g_assert_nonnull (strstr (too_big, "a message may be 33554432 bytes at most"));
  g_assert_null (strstr (too_big, "fx"));
  {
    g_autoptr(GString) sent_anyway = g_string_new ("POST /mcp HTTP/1.1\r\nHost: localhost\r\n"
                                                   "Authorization: Bearer s3cret-token\r\n"
                                                   "Content-Type: application/json\r\n"
                                                   "Content-Length: 34603008\r\n\r\n");
    gsize headers_length = sent_anyway->len;
    guint64 rss_before = test_process_rss_kib (g_subprocess_get_identifier (front->serve));
    g_autofree char *answer = NULL;

    g_string_set_size (sent_anyway, headers_length + 34603008);
    memset (sent_anyway->str + headers_length, ' ', 34603008);
    answer = raw_exchange (front, sent_anyway->str);
    g_assert_true (g_str_has_prefix (answer, "HTTP/1.1 413 "));
    /* Under memcheck or ASan, serve's RSS holds what they keep of every
     * freed block, whatever serve keeps. */
#ifndef __SANITIZE_ADDRESS__
    if (!test_under_valgrind ())
      g_assert_cmpuint (test_process_rss_kib (g_subprocess_get_identifier (front->serve)), <,
                        rss_before + 8 * 1024);
#else
    (void) rss_before;
#endif
  }

  send_http (front, "POST", NULL, INITIALIZE,
             (const char *[]) { "Authorization", bearer, "Origin", "http://localhost:3000", NULL }, &good_origin);
  g_assert_cmpuint (good_origin.status, ==, SOUP_STATUS_OK);
  send_http (front, "POST", NULL, INITIALIZE, (const char *[]) { "Authorization", bearer, NULL }, &first);
  g_assert_cmpuint (first.status, ==, SOUP_STATUS_OK);
  /* good_origin's session and first's are the two there may be. */
  send_http (front, "POST", NULL, INITIALIZE, (const char *[]) { "Authorization", bearer, NULL }, &third);
  g_assert_cmpuint (third.status, ==, SOUP_STATUS_SERVICE_UNAVAILABLE);
  g_assert_nonnull (strstr (third.text, "sessions"));
  assert_tells_nothing (&third);
  send_http (front, "DELETE", soup_message_headers_get_one (first.headers, "Mcp-Session-Id"), NULL,
             (const char *[]) { "Authorization", bearer, NULL }, &second);
  g_assert_cmpuint (second.status, ==, SOUP_STATUS_OK);
}

/* A unix socket is made 0600, and serves. */
static void
test_unix_socket (Front         *front,
                  gconstpointer  data)
{
  g_autofree char *path = g_build_filename (front->folder, "mcp.sock", NULL);
  g_autofree char *listen = g_strdup_printf ("unix:%s", path);
  g_autofree char *session = NULL;
  g_autofree char *echo = tools_call ("2", "fx__echo", "{\"message\": \"by socket\"}");
  g_auto(Answer) echoed = { 0 };
  GStatBuf info;

  front_start (front, listen, NULL);
  g_assert_cmpint (g_stat (path, &info), ==, 0);
  g_assert_true (S_ISSOCK (info.st_mode));
  g_assert_cmpint (info.st_mode & 0777, ==, 0600);
  session = open_session (front);
  post (front, session, echo, &echoed);
  g_assert_cmpstr (call_text (&echoed), ==, "Echo: by socket");
  front_stop (front);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
}

/* Addresses serve may not listen on are refused with the reason. */
static void
test_refused_addresses (Front         *front,
                        gconstpointer  data)
{
  static const struct { const char *listen, *extra, *said; } cases[] = {
    { "0.0.0.0:0", NULL, "--allow-remote" },
    { "0.0.0.0:0", "--allow-remote", "--token-file" },
    { "nonsense", NULL, "127.0.0.1:PORT" },
    { "127.0.0.1:99999", NULL, "127.0.0.1:PORT" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GSubprocess) serve = NULL;
      g_autoptr(GError) error = NULL;
      g_autofree char *errors = NULL;

      serve = g_subprocess_new (G_SUBPROCESS_FLAGS_STDERR_PIPE | G_SUBPROCESS_FLAGS_STDOUT_SILENCE, &error,
                                test_mcp_pool_path (), "serve", "--config", "/dev/null", "--listen", cases[i].listen,
                                cases[i].extra, NULL);
      g_assert_no_error (error);
      g_assert_true (g_subprocess_communicate_utf8 (serve, NULL, NULL, NULL, &errors, &error));
      g_assert_no_error (error);
      g_assert_false (g_subprocess_get_successful (serve));
      g_assert_nonnull (strstr (errors, cases[i].said));
    }
}

/* How many fds serve has open. */
static guint
serve_fds (Front *front)
{
  g_autofree char *path = g_strdup_printf ("/proc/%s/fd", g_subprocess_get_identifier (front->serve));
  g_autoptr(GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;

  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

typedef struct {
  Front *front;
  guint  at_most;
} FdWait;

static gboolean
serve_fds_down (gpointer data)
{
  FdWait *wait = data;

  return serve_fds (wait->front) <= wait->at_most;
}

/* Clients that each come on a connection of their own and close it once
 * answered leave serve no fd: every connection is closed on its side too
 * (with libsoup's own listener, libsoup 3.2 kept each one open for good). */
static void
test_closed_connections (Front         *front,
                         gconstpointer  data)
{
  g_autofree char *session = open_session (front);
  FdWait wait = { front, serve_fds (front) };

  for (guint i = 0; i < 40; i++)
    {
      g_autoptr(SoupSession) own = front->http;
      g_auto(Answer) answer = { 0 };

      front->http = soup_session_new ();
      soup_session_set_proxy_resolver (front->http, NULL);
      post (front, session, "{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"ping\"}", &answer);
      g_assert_cmpuint (answer.status, ==, SOUP_STATUS_OK);
      /* The connection goes with its session. */
      g_clear_object (&front->http);
      front->http = g_steal_pointer (&own);
    }
  g_assert_true (test_wait_for (serve_fds_down, &wait, ANSWER_TIMEOUT_MS));
}

/* The stateless revision (MCP 2026-07-28) */

#define MODERN_META \
  "\"_meta\": {\"io.modelcontextprotocol/protocolVersion\": \"2026-07-28\", " \
  "\"io.modelcontextprotocol/clientCapabilities\": {}, " \
  "\"io.modelcontextprotocol/clientInfo\": {\"name\": \"test\", \"version\": \"1\"}}"

/* POSTs @body of the stateless revision with its headers: @method as
 * Mcp-Method, @name (NULL: none) as Mcp-Name, and @version (NULL: none)
 * as MCP-Protocol-Version. */
static void
post_modern (Front      *front,
             const char *body,
             const char *version,
             const char *method,
             const char *name,
             Answer     *answer)
{
  const char *headers[7] = { NULL };
  gsize n = 0;

  if (version != NULL)
    headers[n++] = "MCP-Protocol-Version", headers[n++] = version;
  if (method != NULL)
    headers[n++] = "Mcp-Method", headers[n++] = method;
  if (name != NULL)
    headers[n++] = "Mcp-Name", headers[n++] = name;
  send_http (front, "POST", NULL, body, headers, answer);
}

static gint64
error_code (Answer *answer)
{
  return json_integer_value (json_object_get (json_object_get (answer->body, "error"), "code"));
}

/* A stateless call of fx__log (which logs at info) asking for @level. */
static void
post_logged_call (Front      *front,
                  const char *level,
                  Answer     *answer)
{
  g_autofree char *body = g_strdup_printf (
    "{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\", \"params\": {\"name\": \"fx__log\", "
    "\"arguments\": {\"text\": \"asked for\"}, \"_meta\": {\"io.modelcontextprotocol/protocolVersion\": "
    "\"2026-07-28\", \"io.modelcontextprotocol/clientCapabilities\": {}, \"io.modelcontextprotocol/logLevel\": "
    "\"%s\", \"io.modelcontextprotocol/clientInfo\": {\"name\": \"test\", \"version\": \"1\"}}}}", level);

  post_modern (front, body, "2026-07-28", "tools/call", "fx__log", answer);
  g_assert_cmpuint (answer->status, ==, SOUP_STATUS_OK);
}

/* A stateless request's logLevel: the servers' log messages from that
 * level up come on the request's own stream, before its reply. */
static void
test_stateless_log_level (Front         *front,
                          gconstpointer  data)
{
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr(GArray) quiet_ids = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_auto(Answer) logged = { 0 };
  g_auto(Answer) quiet = { 0 };
  g_autoptr(GPtrArray) events = NULL;
  g_autoptr(GPtrArray) quiet_events = NULL;
  json_t *message;

  post_logged_call (front, "info", &logged);
  events = parse_events (logged.text, ids);
  g_assert_cmpuint (events->len, ==, 2);
  message = events->pdata[0];
  g_assert_cmpstr (mcp_json_get_string (message, "method"), ==, "notifications/message");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (message, "params"), "level"), ==, "info");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (message, "params"), "data"), ==, "asked for");
  g_assert_cmpstr (test_result_text (json_object_get (events->pdata[1], "result")), ==, "logged");

  post_logged_call (front, "warning", &quiet);
  quiet_events = parse_events (quiet.text, quiet_ids);
  g_assert_cmpuint (quiet_events->len, ==, 1);
  g_assert_cmpstr (test_result_text (json_object_get (quiet_events->pdata[0], "result")), ==, "logged");
}

/* A client of 2026-07-28 sends no initialize and gets no session: each
 * request carries its revision, and the headers must say what the body
 * says.  A client of the handshake revisions is served beside it. */
static void
test_stateless (Front         *front,
                gconstpointer  data)
{
  static const char list[] =
    "{\"jsonrpc\": \"2.0\", \"id\": \"l\", \"method\": \"tools/list\", \"params\": {" MODERN_META "}}";
  static const char echo[] =
    "{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/call\", \"params\": {\"name\": \"fx__echo\", "
    "\"arguments\": {\"message\": \"stateless\"}, " MODERN_META "}}";
  g_autofree char *session = open_session (front);
  g_autofree char *legacy_echo = tools_call ("2", "fx__echo", "{\"message\": \"in a session\"}");
  g_autofree char *encoded = g_strdup_printf ("=?base64?%s?=", "ZnhfX2VjaG8=");  /* fx__echo */
  g_auto(Answer) discovered = { 0 };
  g_auto(Answer) listed = { 0 };
  g_auto(Answer) echoed = { 0 };
  g_auto(Answer) echoed_encoded = { 0 };
  g_auto(Answer) other_name = { 0 };
  g_auto(Answer) no_name = { 0 };
  g_auto(Answer) other_method = { 0 };
  g_auto(Answer) other_version = { 0 };
  g_auto(Answer) no_version = { 0 };
  g_auto(Answer) unsupported = { 0 };
  g_auto(Answer) no_capabilities = { 0 };
  g_auto(Answer) ping = { 0 };
  g_auto(Answer) get = { 0 };
  g_auto(Answer) legacy = { 0 };
  json_t *result, *tools, *supported;

  post_modern (front, "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"server/discover\", \"params\": {"
               MODERN_META "}}", "2026-07-28", "server/discover", NULL, &discovered);
  g_assert_cmpuint (discovered.status, ==, SOUP_STATUS_OK);
  g_assert_null (soup_message_headers_get_one (discovered.headers, "Mcp-Session-Id"));
  result = json_object_get (discovered.body, "result");
  g_assert_cmpstr (json_string_value (json_array_get (json_object_get (result, "supportedVersions"), 0)), ==,
                   "2026-07-28");
  g_assert_nonnull (json_object_get (json_object_get (result, "capabilities"), "tools"));

  /* Lists in name order, with the caching hints and who answered. */
  post_modern (front, list, "2026-07-28", "tools/list", NULL, &listed);
  g_assert_cmpuint (listed.status, ==, SOUP_STATUS_OK);
  result = json_object_get (listed.body, "result");
  g_assert_cmpstr (mcp_json_get_string (result, "resultType"), ==, "complete");
  g_assert_cmpstr (mcp_json_get_string (result, "cacheScope"), ==, "private");
  g_assert_true (json_is_integer (json_object_get (result, "ttlMs")));
  g_assert_nonnull (json_object_get (json_object_get (result, "_meta"), "io.modelcontextprotocol/serverInfo"));
  tools = json_object_get (result, "tools");
  g_assert_nonnull (test_find_tool (tools, "fx__echo"));
  for (gsize i = 1; i < json_array_size (tools); i++)
    g_assert_cmpstr (mcp_json_get_string (json_array_get (tools, i - 1), "name"), <,
                     mcp_json_get_string (json_array_get (tools, i), "name"));

  post_modern (front, echo, "2026-07-28", "tools/call", "fx__echo", &echoed);
  g_assert_cmpstr (call_text (&echoed), ==, "Echo: stateless");
  /* Each ends for good: more than may be in flight at once, one by one. */
  for (guint i = 0; i <= MCP_HTTP_FRONT_IN_FLIGHT_DEFAULT; i++)
    {
      g_auto(Answer) again = { 0 };

      post_modern (front, echo, "2026-07-28", "tools/call", "fx__echo", &again);
      g_assert_cmpuint (again.status, ==, SOUP_STATUS_OK);
    }
  g_assert_cmpstr (mcp_json_get_string (json_object_get (echoed.body, "result"), "resultType"), ==, "complete");
  post_modern (front, echo, "2026-07-28", "tools/call", encoded, &echoed_encoded);
  g_assert_cmpstr (call_text (&echoed_encoded), ==, "Echo: stateless");

  /* Headers that say something else than the body: refused with the
   * request's id, before anything runs. */
  post_modern (front, echo, "2026-07-28", "tools/call", "fx__other", &other_name);
  g_assert_cmpuint (other_name.status, ==, SOUP_STATUS_BAD_REQUEST);
  g_assert_cmpint (error_code (&other_name), ==, -32020);
  g_assert_cmpint (json_integer_value (json_object_get (other_name.body, "id")), ==, 7);
  g_assert_nonnull (strstr (other_name.text, "fx__other"));
  post_modern (front, echo, "2026-07-28", "tools/call", NULL, &no_name);
  g_assert_cmpint (error_code (&no_name), ==, -32020);
  post_modern (front, echo, "2026-07-28", "tools/list", "fx__echo", &other_method);
  g_assert_cmpint (error_code (&other_method), ==, -32020);
  post_modern (front, echo, "2025-11-25", "tools/call", "fx__echo", &other_version);
  g_assert_cmpuint (other_version.status, ==, SOUP_STATUS_BAD_REQUEST);
  g_assert_cmpint (error_code (&other_version), ==, -32020);
  post_modern (front, echo, NULL, "tools/call", "fx__echo", &no_version);
  g_assert_cmpint (error_code (&no_version), ==, -32020);

  /* A revision mcp-pool does not speak: the ones it does. */
  post_modern (front, "{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/list\", \"params\": {\"_meta\": "
               "{\"io.modelcontextprotocol/protocolVersion\": \"2099-01-01\", "
               "\"io.modelcontextprotocol/clientCapabilities\": {}}}}", "2099-01-01", "tools/list", NULL,
               &unsupported);
  g_assert_cmpuint (unsupported.status, ==, SOUP_STATUS_BAD_REQUEST);
  g_assert_cmpint (error_code (&unsupported), ==, -32022);
  supported = json_object_get (json_object_get (json_object_get (unsupported.body, "error"), "data"), "supported");
  g_assert_cmpstr (json_string_value (json_array_get (supported, 0)), ==, "2026-07-28");
  post_modern (front, "{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/list\", \"params\": {\"_meta\": "
               "{\"io.modelcontextprotocol/protocolVersion\": \"2026-07-28\"}}}", "2026-07-28", "tools/list", NULL,
               &no_capabilities);
  g_assert_cmpuint (no_capabilities.status, ==, SOUP_STATUS_BAD_REQUEST);
  g_assert_cmpint (error_code (&no_capabilities), ==, -32602);

  /* What the revision removed is not found; its GET stream is gone. */
  post_modern (front, "{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"ping\", \"params\": {" MODERN_META "}}",
               "2026-07-28", "ping", NULL, &ping);
  g_assert_cmpuint (ping.status, ==, SOUP_STATUS_NOT_FOUND);
  g_assert_cmpint (error_code (&ping), ==, -32601);
  send_http (front, "GET", NULL, NULL,
             (const char *[]) { "Accept", "text/event-stream", "MCP-Protocol-Version", "2026-07-28", NULL }, &get);
  g_assert_cmpuint (get.status, ==, SOUP_STATUS_METHOD_NOT_ALLOWED);

  /* The session of the handshake client is as it was. */
  post (front, session, legacy_echo, &legacy);
  g_assert_cmpstr (call_text (&legacy), ==, "Echo: in a session");
  g_assert_null (json_object_get (json_object_get (legacy.body, "result"), "resultType"));
}

typedef struct {
  gboolean  done;
  gssize    n;
} Read;

static void
on_read (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  Read *read = user_data;

  read->n = g_input_stream_read_finish (G_INPUT_STREAM (source), result, NULL);
  read->done = TRUE;
}

static gboolean
read_done (gpointer data)
{
  g_main_context_iteration (NULL, FALSE);
  return ((Read *) data)->done;
}

/* The next message of event @stream, read into @text, within
 * ANSWER_TIMEOUT_MS. */
static json_t *
next_event (GInputStream *stream,
            GString      *text)
{
  const char *end;
  const char *data;
  json_t *message;

  while ((end = strstr (text->str, "\n\n")) == NULL)
    {
      char buffer[1024];
      Read read = { 0 };

      g_input_stream_read_async (stream, buffer, sizeof buffer, G_PRIORITY_DEFAULT, NULL, on_read, &read);
      g_assert_true (test_wait_for (read_done, &read, ANSWER_TIMEOUT_MS));
      g_assert_cmpint (read.n, >, 0);
      g_string_append_len (text, buffer, read.n);
    }
  data = strstr (text->str, "data: ");
  message = data != NULL && data < end ? json_loadb (data + 6, end - data - 6, 0, NULL) : NULL;
  g_string_erase (text, 0, end + 2 - text->str);
  return message;
}

/* A stateless tools/call of fx__notify that sends resources/updated of
 * @uri. */
static void
post_resource_updated (Front      *front,
                       const char *uri)
{
  g_autofree char *body =
    g_strdup_printf ("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/call\", \"params\": {\"name\": "
                     "\"fx__notify\", \"arguments\": {\"method\": \"notifications/resources/updated\", "
                     "\"params\": {\"uri\": \"%s\"}}, " MODERN_META "}}", uri);
  g_auto(Answer) sent = { 0 };

  post_modern (front, body, "2026-07-28", "tools/call", "fx__notify", &sent);
  g_assert_cmpuint (sent.status, ==, SOUP_STATUS_OK);
}

/* The fixture's stats member @name. */
static json_t *
fixture_stat (Front      *front,
              const char *name)
{
  static const char stats[] =
    "{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\", \"params\": {\"name\": \"fx__stats\", "
    "\"arguments\": {}, " MODERN_META "}}";
  g_auto(Answer) answer = { 0 };

  post_modern (front, stats, "2026-07-28", "tools/call", "fx__stats", &answer);
  return json_incref (json_object_get (json_object_get (json_object_get (answer.body, "result"),
                                                        "structuredContent"), name));
}

/* Whether the fixture was asked to subscribe to @uri. */
static gboolean
fixture_subscribed (Front      *front,
                    const char *uri)
{
  g_autoptr(json_t) subscribed = fixture_stat (front, "subscribed");

  for (size_t i = 0; i < json_array_size (subscribed); i++)
    if (g_strcmp0 (json_string_value (json_array_get (subscribed, i)), uri) == 0)
      return TRUE;
  return FALSE;
}

/* The fixture's subscribes and unsubscribes, "+URI" and "-URI" in order,
 * joined by spaces. */
static char *
subscription_changes (Front *front)
{
  g_autoptr(json_t) changes = fixture_stat (front, "subscription_changes");
  g_autoptr(GString) joined = g_string_new (NULL);

  for (size_t i = 0; i < json_array_size (changes); i++)
    g_string_append_printf (joined, "%s%s", i > 0 ? " " : "", json_string_value (json_array_get (changes, i)));
  return g_string_free (g_steal_pointer (&joined), FALSE);
}

typedef struct {
  Front      *front;
  const char *expected;
} ChangesWait;

static gboolean
changes_are (gpointer data)
{
  ChangesWait *wait = data;
  g_autofree char *changes = subscription_changes (wait->front);

  return g_str_equal (changes, wait->expected);
}

/* A subscriptions/listen stream of @body, its status checked. */
static GInputStream *
start_listen (Front      *front,
              const char *body)
{
  g_autoptr(SoupMessage) message = soup_message_new ("POST", request_url (front));
  SoupMessageHeaders *headers = soup_message_get_request_headers (message);
  g_autoptr(GBytes) sent = g_bytes_new_static (body, strlen (body));
  g_autoptr(GError) error = NULL;
  GInputStream *stream;

  soup_message_headers_replace (headers, "Accept", "application/json, text/event-stream");
  soup_message_headers_replace (headers, "MCP-Protocol-Version", "2026-07-28");
  soup_message_headers_replace (headers, "Mcp-Method", "subscriptions/listen");
  soup_message_set_request_body_from_bytes (message, "application/json", sent);
  stream = soup_session_send (front->http, message, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (soup_message_get_status (message), ==, SOUP_STATUS_OK);
  return stream;
}

/* subscriptions/listen: acknowledged first with what the pool agrees to
 * (the resources named once each, strings only), then a server's list
 * change, tagged with the subscription, and the updates of the resource
 * it follows, which the pool subscribed to at its server, and not of
 * another. */
static void
test_listen (Front         *front,
             gconstpointer  data)
{
  static const char body[] =
    "{\"jsonrpc\": \"2.0\", \"id\": \"sub\", \"method\": \"subscriptions/listen\", \"params\": {" MODERN_META ", "
    "\"notifications\": {\"toolsListChanged\": true, \"resourceSubscriptions\": [\"fx://own\", 7, \"fx://own\"]}}}";
  static const char notify[] =
    "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/call\", \"params\": {\"name\": "
    "\"fx__notify_list_changed\", \"arguments\": {}, " MODERN_META "}}";
  g_autoptr(json_t) updated = NULL;
  json_t *followed;
  gint64 until;
  g_autoptr(GInputStream) stream = start_listen (front, body);
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(json_t) acknowledged = NULL;
  g_autoptr(json_t) changed = NULL;
  g_auto(Answer) notified = { 0 };
  json_t *params;

  acknowledged = next_event (stream, text);
  g_assert_cmpstr (mcp_json_get_string (acknowledged, "method"), ==, "notifications/subscriptions/acknowledged");
  params = json_object_get (acknowledged, "params");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (params, "_meta"), "io.modelcontextprotocol/subscriptionId"),
                   ==, "sub");
  g_assert_true (json_is_true (json_object_get (json_object_get (params, "notifications"), "toolsListChanged")));
  followed = json_object_get (json_object_get (params, "notifications"), "resourceSubscriptions");
  g_assert_cmpuint (json_array_size (followed), ==, 1);
  g_assert_cmpstr (json_string_value (json_array_get (followed, 0)), ==, "fx://own");

  post_modern (front, notify, "2026-07-28", "tools/call", "fx__notify_list_changed", &notified);
  g_assert_cmpuint (notified.status, ==, SOUP_STATUS_OK);
  changed = next_event (stream, text);
  g_assert_cmpstr (mcp_json_get_string (changed, "method"), ==, "notifications/tools/list_changed");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (json_object_get (changed, "params"), "_meta"),
                                        "io.modelcontextprotocol/subscriptionId"), ==, "sub");

  until = g_get_monotonic_time () + test_timeout_ms (10 * 1000) * G_TIME_SPAN_MILLISECOND;
  while (!fixture_subscribed (front, "fx://own") && g_get_monotonic_time () < until)
    g_usleep (G_USEC_PER_SEC / 50);
  g_assert_true (fixture_subscribed (front, "fx://own"));
  /* In order: the other resource's update, had it come, came first.  A
   * list change announced meanwhile (the pool announces each listing
   * that changed its cache, which a slow start may bring later) is not
   * what this waits for. */
  post_resource_updated (front, "shared://same");
  post_resource_updated (front, "fx://own");
  do
    {
      g_clear_pointer (&updated, json_decref);
      updated = next_event (stream, text);
    }
  while (g_strcmp0 (mcp_json_get_string (updated, "method"), "notifications/tools/list_changed") == 0);
  g_assert_cmpstr (mcp_json_get_string (updated, "method"), ==, "notifications/resources/updated");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (updated, "params"), "uri"), ==, "fx://own");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (json_object_get (updated, "params"), "_meta"),
                                        "io.modelcontextprotocol/subscriptionId"), ==, "sub");
  g_input_stream_close (stream, NULL, NULL);
}

/* A 2025 session's resources/subscribe or unsubscribe (@method) of
 * fx://own, which must succeed. */
static void
session_subscription (Front      *front,
                      const char *session,
                      const char *method)
{
  g_autofree char *body = g_strdup_printf ("{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"%s\", \"params\": "
                                           "{\"uri\": \"fx://own\"}}", method);
  g_auto(Answer) answer = { 0 };

  post (front, session, body, &answer);
  g_assert_cmpuint (answer.status, ==, SOUP_STATUS_OK);
  g_assert_true (json_is_object (json_object_get (answer.body, "result")));
}

/* A server's subscription is every client's: a listen stream and two 2025
 * sessions that follow one resource have the server subscribe once, and
 * unsubscribe once, when the last of them lets go, whichever way (an
 * unsubscribe, the stream's end, the session's end).  A server that
 * restarts meanwhile is subscribed again to what is held. */
static void
test_shared_subscriptions (Front         *front,
                           gconstpointer  data)
{
  static const char listen[] =
    "{\"jsonrpc\": \"2.0\", \"id\": \"sub\", \"method\": \"subscriptions/listen\", \"params\": {" MODERN_META ", "
    "\"notifications\": {\"resourceSubscriptions\": [\"fx://own\"]}}}";
  static const char crash[] =
    "{\"jsonrpc\": \"2.0\", \"id\": 6, \"method\": \"tools/call\", \"params\": {\"name\": \"fx__crash\", "
    "\"arguments\": {}, " MODERN_META "}}";
  g_autoptr(GInputStream) stream = start_listen (front, listen);
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(json_t) acknowledged = next_event (stream, text);
  g_autofree char *first = open_session (front);
  g_autofree char *second = open_session (front);
  g_autofree char *changes = NULL;
  ChangesWait subscribed = { front, "+fx://own" };
  ChangesWait released = { front, "+fx://own -fx://own" };
  g_auto(Answer) crashed = { 0 };
  g_auto(Answer) ended = { 0 };

  g_assert_cmpstr (mcp_json_get_string (acknowledged, "method"), ==, "notifications/subscriptions/acknowledged");
  /* The stream's subscription is made on a thread of its own. */
  g_assert_true (test_wait_for (changes_are, &subscribed, ANSWER_TIMEOUT_MS));
  session_subscription (front, first, "resources/subscribe");
  session_subscription (front, second, "resources/subscribe");
  changes = subscription_changes (front);
  g_assert_cmpstr (changes, ==, "+fx://own");

  post_modern (front, crash, "2026-07-28", "tools/call", "fx__crash", &crashed);
  g_assert_cmpuint (crashed.status, ==, SOUP_STATUS_OK);
  /* The next call starts the server again, which is subscribed anew. */
  g_assert_true (test_wait_for (changes_are, &subscribed, ANSWER_TIMEOUT_MS));

  session_subscription (front, first, "resources/unsubscribe");
  g_input_stream_close (stream, NULL, NULL);
  send_http (front, "DELETE", second, NULL, NULL, &ended);
  g_assert_cmpuint (ended.status, ==, SOUP_STATUS_OK);
  g_assert_true (test_wait_for (changes_are, &released, ANSWER_TIMEOUT_MS));
}

#define ELICITING_META \
  "\"_meta\": {\"io.modelcontextprotocol/protocolVersion\": \"2026-07-28\", " \
  "\"io.modelcontextprotocol/clientCapabilities\": {\"elicitation\": {}}}"

/* A stateless tools/call of fx__ask_client that asks the client
 * @method, with @extra params (a retry's, or ""). */
static char *
asking_call (int         id,
             const char *method,
             const char *extra)
{
  return g_strdup_printf ("{\"jsonrpc\": \"2.0\", \"id\": %d, \"method\": \"tools/call\", \"params\": {\"name\": "
                          "\"fx__ask_client\", \"arguments\": {\"method\": \"%s\", \"params\": {\"message\": "
                          "\"Your name?\", \"requestedSchema\": {\"type\": \"object\", \"properties\": {}}}}, %s"
                          ELICITING_META "}}", id, method, extra);
}

/* The requestState of an InputRequiredResult that asks for one
 * elicitation; the key of that request in @key. */
static char *
input_required_state (Answer  *answer,
                      char   **key)
{
  json_t *result = json_object_get (answer->body, "result");
  json_t *requests = json_object_get (result, "inputRequests");
  const char *name;
  json_t *request;

  g_assert_cmpuint (answer->status, ==, SOUP_STATUS_OK);
  g_assert_cmpstr (mcp_json_get_string (result, "resultType"), ==, "input_required");
  g_assert_cmpuint (json_object_size (requests), ==, 1);
  json_object_foreach (requests, name, request)
    {
      g_assert_cmpstr (mcp_json_get_string (request, "method"), ==, "elicitation/create");
      g_assert_cmpstr (mcp_json_get_string (json_object_get (request, "params"), "message"), ==, "Your name?");
      *key = g_strdup (name);
    }
  return g_strdup (mcp_json_get_string (result, "requestState"));
}

/* A 2025 server's request to the client during a stateless call becomes
 * an InputRequiredResult, and the retry's input its answer (multi
 * round-trip requests across the bridge); a client that did not declare
 * what the server asks for gets MissingRequiredClientCapability. */
static void
test_input_required (Front         *front,
                     gconstpointer  data)
{
  g_autofree char *first = asking_call (1, "elicitation/create", "");
  g_autofree char *key = NULL;
  g_autofree char *state = NULL;
  g_autofree char *responses = NULL;
  g_autofree char *retry = NULL;
  g_autofree char *other_tool = NULL;
  g_autofree char *sampling = NULL;
  g_auto(Answer) asked = { 0 };
  g_auto(Answer) answered = { 0 };
  g_auto(Answer) replayed = { 0 };
  g_auto(Answer) misdirected = { 0 };
  g_auto(Answer) undeclared = { 0 };
  json_t *response, *error;

  post_modern (front, first, "2026-07-28", "tools/call", "fx__ask_client", &asked);
  state = input_required_state (&asked, &key);
  g_assert_cmpint (json_integer_value (json_object_get (asked.body, "id")), ==, 1);

  /* The requestState works for the same call only. */
  other_tool = g_strdup_printf ("{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/call\", \"params\": {\"name\": "
                                "\"fx__echo\", \"arguments\": {}, \"requestState\": \"%s\", " ELICITING_META "}}",
                                state);
  post_modern (front, other_tool, "2026-07-28", "tools/call", "fx__echo", &misdirected);
  g_assert_cmpuint (misdirected.status, ==, SOUP_STATUS_BAD_REQUEST);
  g_assert_cmpint (error_code (&misdirected), ==, -32602);

  responses = g_strdup_printf ("\"requestState\": \"%s\", \"inputResponses\": {\"%s\": {\"action\": \"accept\", "
                               "\"content\": {\"name\": \"Ada\"}}}, ", state, key);
  retry = asking_call (3, "elicitation/create", responses);
  post_modern (front, retry, "2026-07-28", "tools/call", "fx__ask_client", &answered);
  g_assert_cmpuint (answered.status, ==, SOUP_STATUS_OK);
  g_assert_cmpint (json_integer_value (json_object_get (answered.body, "id")), ==, 3);
  g_assert_cmpstr (mcp_json_get_string (json_object_get (answered.body, "result"), "resultType"), ==, "complete");
  /* What the server got is what the client answered. */
  response = json_object_get (json_object_get (json_object_get (json_object_get (answered.body, "result"),
                                                                "structuredContent"), "response"), "result");
  g_assert_cmpstr (mcp_json_get_string (response, "action"), ==, "accept");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (response, "content"), "name"), ==, "Ada");

  /* Answered once: the state is spent. */
  post_modern (front, retry, "2026-07-28", "tools/call", "fx__ask_client", &replayed);
  g_assert_cmpint (error_code (&replayed), ==, -32602);

  sampling = asking_call (4, "sampling/createMessage", "");
  post_modern (front, sampling, "2026-07-28", "tools/call", "fx__ask_client", &undeclared);
  g_assert_cmpuint (undeclared.status, ==, SOUP_STATUS_BAD_REQUEST);
  g_assert_cmpint (error_code (&undeclared), ==, -32021);
  error = json_object_get (undeclared.body, "error");
  g_assert_nonnull (json_object_get (json_object_get (json_object_get (error, "data"), "requiredCapabilities"),
                                     "sampling"));
}

/* fx's calls in flight, counted by a stateless call of fx__stats (which
 * is one of them). */
static gboolean
only_stats_in_flight (gpointer data)
{
  static const char stats[] =
    "{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": \"tools/call\", \"params\": {\"name\": \"fx__stats\", "
    "\"arguments\": {}, " MODERN_META "}}";
  g_auto(Answer) answer = { 0 };
  json_t *counters;

  post_modern (data, stats, "2026-07-28", "tools/call", "fx__stats", &answer);
  counters = json_object_get (json_object_get (answer.body, "result"), "structuredContent");
  return json_integer_value (json_object_get (counters, "inflight")) == 1;
}

/* A call that asked for input and gets no retry is cancelled after the
 * bound, and the server's request answered: nothing waits for good. */
static void
test_input_abandoned (Front         *front,
                      gconstpointer  data)
{
  g_autofree char *first = asking_call (1, "elicitation/create", "");
  g_autofree char *key = NULL;
  g_autofree char *state = NULL;
  g_autofree char *responses = NULL;
  g_autofree char *retry = NULL;
  g_auto(Answer) asked = { 0 };
  g_auto(Answer) late = { 0 };

  g_setenv ("MCP_POOL_INPUT_TIMEOUT", "1", TRUE);
  front_start (front, "127.0.0.1:0", NULL);
  g_unsetenv ("MCP_POOL_INPUT_TIMEOUT");
  post_modern (front, first, "2026-07-28", "tools/call", "fx__ask_client", &asked);
  state = input_required_state (&asked, &key);
  g_assert_true (test_wait_for (only_stats_in_flight, front, ANSWER_TIMEOUT_MS));

  responses = g_strdup_printf ("\"requestState\": \"%s\", \"inputResponses\": {\"%s\": {\"action\": \"decline\"}}, ",
                               state, key);
  retry = asking_call (2, "elicitation/create", responses);
  post_modern (front, retry, "2026-07-28", "tools/call", "fx__ask_client", &late);
  g_assert_cmpint (error_code (&late), ==, -32602);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

#define ADD(path, own_start, func) g_test_add (path, Front, own_start, setup, func, teardown)
  ADD ("/http-front/session", NULL, test_session);
  ADD ("/http-front/progress-stream", NULL, test_progress_stream);
  ADD ("/http-front/cancel", NULL, test_cancel);
  ADD ("/http-front/resume", NULL, test_resume);
  ADD ("/http-front/stateless", NULL, test_stateless);
  ADD ("/http-front/listen", NULL, test_listen);
  ADD ("/http-front/shared-subscriptions", NULL, test_shared_subscriptions);
  ADD ("/http-front/stateless-log-level", NULL, test_stateless_log_level);
  ADD ("/http-front/input-required", NULL, test_input_required);
  ADD ("/http-front/input-abandoned", "own", test_input_abandoned);
  ADD ("/http-front/python-sessions", NULL, test_python_sessions);
  ADD ("/http-front/python-session-handle", NULL, test_python_session_handle);
  ADD ("/http-front/closed-connections", NULL, test_closed_connections);
  ADD ("/http-front/security", "own", test_security);
  ADD ("/http-front/unix-socket", "own", test_unix_socket);
  ADD ("/http-front/refused-addresses", "own", test_refused_addresses);
  return g_test_run ();
}
