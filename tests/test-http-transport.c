/* test-http-transport.c — the event-stream parser, and sessions over the
 * HTTP transports: against a fault server of our own (a SoupServer on
 * 127.0.0.1, in this process, on a thread of its own) and against the
 * real server-everything in its streamableHttp and sse modes.
 */
#include "config.h"

#include <signal.h>
#include <string.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "pool/mcp-pool.h"
#include "pool/mcp-session.h"
#include "transport/mcp-http-transport.h"
#include "transport/mcp-sse-parser.h"
#include "test-client.h"
#include "test-files.h"
#include "test-io-thread.h"
#include "test-procs.h"
#include "test-wait.h"

/* The parser */

typedef struct {
  GPtrArray *events;   /* "TYPE|DATA|ID" */
} Collected;

static void
collect_event (const char *event,
               const char *data,
               gsize       length,
               const char *id,
               gpointer    user_data)
{
  Collected *collected = user_data;

  g_assert_cmpuint (strlen (data), ==, length);
  g_ptr_array_add (collected->events, g_strdup_printf ("%s|%s|%s", event, data, id ? id : "-"));
}

/* Feeds @text whole, then again one byte at a time: a line end split
 * across chunks (CR, then LF) must not count twice. */
static void
assert_parses (const char         *text,
               const char * const *expected,
               gint64              retry_ms)
{
  guint step;

  for (step = 0; step < 2; step++)
    {
      Collected collected = { g_ptr_array_new_with_free_func (g_free) };
      g_autoptr(McpSseParser) parser = mcp_sse_parser_new (4096, collect_event, &collected);
      g_autoptr(GError) error = NULL;
      gsize i, length = strlen (text);
      guint n;

      if (step == 0)
        g_assert_true (mcp_sse_parser_feed (parser, text, length, &error));
      else
        for (i = 0; i < length; i++)
          g_assert_true (mcp_sse_parser_feed (parser, text + i, 1, &error));
      g_assert_no_error (error);
      for (n = 0; expected[n] != NULL; n++)
        {
          g_assert_cmpuint (n, <, collected.events->len);
          g_assert_cmpstr (g_ptr_array_index (collected.events, n), ==, expected[n]);
        }
      g_assert_cmpuint (collected.events->len, ==, n);
      g_assert_cmpint (mcp_sse_parser_get_retry_ms (parser), ==, retry_ms);
      g_ptr_array_unref (collected.events);
    }
}

static void
test_sse_fields (void)
{
  assert_parses ("data: one\n\n", (const char *[]) { "message|one|-", NULL }, -1);
  /* Several data lines join with LF; one leading space goes, not two. */
  assert_parses ("data: a\ndata:  b\ndata\n\n", (const char *[]) { "message|a\n b\n|-", NULL }, -1);
  assert_parses ("event: endpoint\ndata: /messages?s=1\n\ndata: x\n\n",
                 (const char *[]) { "endpoint|/messages?s=1|-", "message|x|-", NULL }, -1);
  /* An id stays for the later events; an empty one clears it. */
  assert_parses ("id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n",
                 (const char *[]) { "message|a|7", "message|b|7", "message|c|-", NULL }, -1);
  /* Comments, unknown fields, events without data and a bad retry are
   * nothing; a good retry is kept. */
  assert_parses (": keep-alive\nfoo: bar\nretry: 25x\n\nevent: x\n\nretry: 250\ndata: z\n\n",
                 (const char *[]) { "message|z|-", NULL }, 250);
  /* An event not ended by a blank line is not dispatched. */
  assert_parses ("data: a\n\ndata: unfinished\n", (const char *[]) { "message|a|-", NULL }, -1);
  /* A byte order mark may open the stream. */
  assert_parses ("\xEF\xBB\xBF" "data: bom\n\n", (const char *[]) { "message|bom|-", NULL }, -1);
}

static void
test_sse_line_ends (void)
{
  const char *expected[] = { "message|a\nb|1", "message|c|1", NULL };

  assert_parses ("id: 1\ndata: a\ndata: b\n\ndata: c\n\n", expected, -1);
  assert_parses ("id: 1\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", expected, -1);
  assert_parses ("id: 1\rdata: a\rdata: b\r\rdata: c\r\r", expected, -1);
  assert_parses ("id: 1\r\ndata: a\rdata: b\n\r\ndata: c\r\r", expected, -1);
}

static void
test_sse_too_long (void)
{
  Collected collected = { g_ptr_array_new_with_free_func (g_free) };
  g_autoptr(McpSseParser) parser = mcp_sse_parser_new (64, collect_event, &collected);
  g_autoptr(GError) error = NULL;
  g_autofree char *line = g_strnfill (40, 'x');
  guint i;

  /* The cap is on the event: lines that each fit may add up past it. */
  g_assert_true (mcp_sse_parser_feed (parser, "data: ok\n\n", 10, &error));
  g_assert_true (mcp_sse_parser_feed (parser, "data: ", 6, &error));
  g_assert_true (mcp_sse_parser_feed (parser, line, 40, &error));
  g_assert_true (mcp_sse_parser_feed (parser, "\ndata: ", 7, &error));
  for (i = 0; i < 10 && error == NULL; i++)
    mcp_sse_parser_feed (parser, line, 40, &error);
  g_assert_error (error, MCP_SSE_ERROR, MCP_SSE_ERROR_TOO_LONG);
  g_assert_nonnull (strstr (error->message, "64 bytes"));
  g_clear_error (&error);
  g_assert_false (mcp_sse_parser_feed (parser, "\n\n", 2, &error));
  g_assert_error (error, MCP_SSE_ERROR, MCP_SSE_ERROR_FAILED);
  g_assert_cmpuint (collected.events->len, ==, 1);
  g_ptr_array_unref (collected.events);
}

/* The fault server: a Streamable HTTP server of our own whose tools
 * misbehave on purpose, on its own thread and context. */

typedef struct {
  GThread      *thread;
  GMainContext *context;
  GMainLoop    *loop;
  gboolean      tls;            /* https, with tests/tls/server.pem */
  guint         port;
  GMutex        lock;
  GCond         cond;
  gboolean      ready;
  /* protected by lock */
  guint         generation;     /* the session id is "s<generation>" */
  gboolean      expired;
  guint         deletes;
  char         *resume_id;      /* the id of the request a GET resumes */
  char         *last_event_id;  /* what the last resuming GET sent */
  GPtrArray    *paused;         /* the "slow" calls, never answered */
  gboolean      serve_get;      /* offer a GET stream (else 405) */
  GString      *get_ids;        /* the Last-Event-ID of each GET stream, "-" for none */
  gboolean      ping_answered;  /* the reply to the ping on the GET stream came */
  gboolean      saw_header;     /* the config's header came on every POST */
  char         *last_host;      /* the Host of the last request */
  gboolean      broken;         /* every POST answered 500 */
  guint         posts;
  guint         tool_lists;
  SoupServerMessage *asking;    /* the "ask" call's stream, waiting for the answer to q1 */
  json_t       *asking_id;      /* its request's id */
  SoupServerMessage *held_initialized; /* its 202 held back a moment; server thread */
  gboolean      overtaken;      /* a POST came while notifications/initialized was held */
  guint         in_progress;    /* requests handled and not yet ended; server thread */
} FaultServer;

static void
respond (SoupServerMessage *message,
         guint              status,
         const char        *type,
         const char        *body)
{
  soup_server_message_set_status (message, status, NULL);
  if (body != NULL)
    soup_server_message_set_response (message, type, SOUP_MEMORY_COPY, body, strlen (body));
}

static void
respond_json (SoupServerMessage *message,
              json_t            *id,
              json_t            *result)
{
  g_autoptr(json_t) reply = mcp_jsonrpc_result_new (id, result);
  g_autofree char *text = json_dumps (reply, JSON_COMPACT);

  respond (message, SOUP_STATUS_OK, "application/json", text);
}

static char *
response_event (json_t     *id,
                const char *text,
                const char *event_id)
{
  g_autoptr(json_t) reply = mcp_jsonrpc_result_new (id, json_pack ("{s:[{s:s, s:s}]}", "content",
                                                                   "type", "text", "text", text));
  g_autofree char *data = json_dumps (reply, JSON_COMPACT);

  if (event_id != NULL)
    return g_strdup_printf ("id: %s\ndata: %s\n\n", event_id, data);
  return g_strdup_printf ("data: %s\n\n", data);
}

static void
on_drop_chunk_written (SoupServerMessage *message,
                       gpointer           user_data)
{
  /* The stream breaks off after its first event, as a crashed server's.
   * The body is then complete, so that the request ends (its last chunk
   * fails) and nothing of it waits for the server's end. */
  g_socket_shutdown (soup_server_message_get_socket (message), TRUE, TRUE, NULL);
  soup_message_body_complete (soup_server_message_get_response_body (message));
}

static void
handle_call (FaultServer       *server,
             SoupServerMessage *message,
             json_t            *id,
             const char        *tool)
{
  g_autofree char *events = NULL;
  g_autofree char *progress = NULL;
  g_autofree char *huge = NULL;

  if (strcmp (tool, "echo") == 0)
    {
      /* A notification first, then the answer, on one event stream. */
      g_autofree char *answer = response_event (id, "echoed", "e2");

      events = g_strdup_printf ("event: message\nid: e1\ndata: %s\n\n%s",
                                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                                "\"params\":{\"level\":\"info\",\"data\":\"hi\"}}", answer);
      respond (message, SOUP_STATUS_OK, "text/event-stream", events);
    }
  else if (strcmp (tool, "change") == 0)
    {
      /* The tools change while the call runs: the server says so first. */
      g_autofree char *answer = response_event (id, "changed", NULL);

      events = g_strdup_printf ("data: %s\n\n%s",
                                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}", answer);
      respond (message, SOUP_STATUS_OK, "text/event-stream", events);
    }
  else if (strcmp (tool, "ask") == 0)
    {
      /* A request of the server's own on the call's stream; the answer
       * to the call follows once the client has answered it. */
      static const char asked[] = "data: {\"jsonrpc\":\"2.0\",\"id\":\"q1\",\"method\":\"roots/list\"}\n\n";

      soup_server_message_set_status (message, SOUP_STATUS_OK, NULL);
      soup_message_headers_set_encoding (soup_server_message_get_response_headers (message),
                                         SOUP_ENCODING_CHUNKED);
      soup_message_headers_set_content_type (soup_server_message_get_response_headers (message),
                                             "text/event-stream", NULL);
      soup_message_body_append (soup_server_message_get_response_body (message), SOUP_MEMORY_STATIC,
                                asked, strlen (asked));
      g_mutex_lock (&server->lock);
      server->asking = g_object_ref (message);
      server->asking_id = json_incref (id);
      g_mutex_unlock (&server->lock);
    }
  else if (strcmp (tool, "fail") == 0)
    respond (message, SOUP_STATUS_SERVICE_UNAVAILABLE, "text/plain", "backend exploded\n");
  else if (strcmp (tool, "slow") == 0)
    {
      g_mutex_lock (&server->lock);
      g_ptr_array_add (server->paused, g_object_ref (message));
      g_mutex_unlock (&server->lock);
      soup_server_message_pause (message);
    }
  else if (strcmp (tool, "resume") == 0)
    {
      /* The server ends the stream on purpose before the answer, with a
       * retry; the answer waits for the GET with Last-Event-ID. */
      g_mutex_lock (&server->lock);
      g_free (server->resume_id);
      server->resume_id = json_dumps (id, JSON_ENCODE_ANY);
      g_mutex_unlock (&server->lock);
      respond (message, SOUP_STATUS_OK, "text/event-stream", "id: r1\nretry: 10\ndata:\n\n");
    }
  else if (strcmp (tool, "drop") == 0)
    {
      soup_server_message_set_status (message, SOUP_STATUS_OK, NULL);
      soup_message_headers_set_encoding (soup_server_message_get_response_headers (message),
                                         SOUP_ENCODING_CHUNKED);
      soup_message_headers_set_content_type (soup_server_message_get_response_headers (message),
                                             "text/event-stream", NULL);
      progress = g_strdup (": working\n\n");
      soup_message_body_append (soup_server_message_get_response_body (message), SOUP_MEMORY_COPY,
                                progress, strlen (progress));
      g_signal_connect (message, "wrote-chunk", G_CALLBACK (on_drop_chunk_written), NULL);
    }
  else if (strcmp (tool, "malformed") == 0)
    respond (message, SOUP_STATUS_OK, "text/event-stream", "data: {\"jsonrpc\": \"2.0\", \"id\n\n");
  else if (strcmp (tool, "huge") == 0)
    {
      huge = g_strnfill (256 * 1024, 'x');
      events = g_strdup_printf ("data: %s\n\n", huge);
      respond (message, SOUP_STATUS_OK, "text/event-stream", events);
    }
  else if (strcmp (tool, "huge-json") == 0)
    {
      huge = g_strnfill (256 * 1024, ' ');
      respond (message, SOUP_STATUS_OK, "application/json", huge);
    }
  else if (strcmp (tool, "expire") == 0)
    {
      g_mutex_lock (&server->lock);
      server->expired = TRUE;
      g_mutex_unlock (&server->lock);
      respond (message, SOUP_STATUS_NOT_FOUND, "text/plain", "no such session");
    }
  else
    respond (message, SOUP_STATUS_BAD_REQUEST, "text/plain", "unknown tool");
}

static json_t *
list_tools (void)
{
  static const char *names[] = { "echo", "change", "ask", "fail", "slow", "resume", "drop", "malformed", "huge",
                                 "huge-json", "expire" };
  json_t *tools = json_array ();
  guint i;

  for (i = 0; i < G_N_ELEMENTS (names); i++)
    json_array_append_new (tools, json_pack ("{s:s, s:{s:s}}", "name", names[i],
                                             "inputSchema", "type", "object"));
  return json_pack ("{s:o}", "tools", tools);
}

static gboolean
session_is_current (FaultServer       *server,
                    SoupServerMessage *message)
{
  const char *id = soup_message_headers_get_one (soup_server_message_get_request_headers (message),
                                                 "Mcp-Session-Id");
  g_autofree char *current = NULL;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&server->lock);

  current = g_strdup_printf ("s%u", server->generation);
  return !server->expired && g_strcmp0 (id, current) == 0;
}

/* The 202 of notifications/initialized goes out a moment late, or at once
 * when another POST overtakes it, which the client must never let happen:
 * a server may refuse requests before the handshake is over. */
static gboolean
release_initialized (gpointer data)
{
  FaultServer *server = data;
  SoupServerMessage *message = g_steal_pointer (&server->held_initialized);

  if (message != NULL)
    {
      respond (message, SOUP_STATUS_ACCEPTED, NULL, NULL);
      soup_server_message_unpause (message);
      g_object_unref (message);
    }
  return G_SOURCE_REMOVE;
}

static void
hold_initialized (FaultServer       *server,
                  SoupServerMessage *message)
{
  GSource *source = g_timeout_source_new (100);

  server->held_initialized = g_object_ref (message);
  soup_server_message_pause (message);
  g_source_set_callback (source, release_initialized, server, NULL);
  g_source_attach (source, server->context);
  g_source_unref (source);
}

static void
handle_post (FaultServer       *server,
             SoupServerMessage *message)
{
  SoupMessageBody *body = soup_server_message_get_request_body (message);
  g_autoptr(json_t) request = json_loadb (body->data, body->length, 0, NULL);
  const char *method = mcp_json_get_string (request, "method");
  json_t *id = json_object_get (request, "id");
  g_autofree char *session = NULL;
  const char *header = soup_message_headers_get_one (soup_server_message_get_request_headers (message),
                                                     "X-Fault-Test");

  g_mutex_lock (&server->lock);
  server->saw_header = (server->saw_header || g_strcmp0 (method, "initialize") == 0) &&
                       g_strcmp0 (header, "yes, really") == 0;
  if (method == NULL && g_strcmp0 (mcp_json_get_string (request, "id"), "p1") == 0 &&
      json_is_object (json_object_get (request, "result")))
    server->ping_answered = TRUE;
  if (method == NULL && g_strcmp0 (mcp_json_get_string (request, "id"), "q1") == 0 && server->asking != NULL)
    {
      g_autoptr(SoupServerMessage) asking = g_steal_pointer (&server->asking);
      g_autoptr(json_t) asking_id = g_steal_pointer (&server->asking_id);
      json_t *roots = json_object_get (json_object_get (request, "result"), "roots");
      g_autofree char *answer = response_event (asking_id, mcp_json_get_string (json_array_get (roots, 0), "uri")
                                                           ?: "no roots", NULL);
      SoupMessageBody *stream = soup_server_message_get_response_body (asking);

      soup_message_body_append (stream, SOUP_MEMORY_COPY, answer, strlen (answer));
      soup_message_body_complete (stream);
      soup_server_message_unpause (asking);
    }
  if (server->held_initialized != NULL)
    server->overtaken = TRUE;
  g_mutex_unlock (&server->lock);
  release_initialized (server);

  if (g_strcmp0 (method, "initialize") == 0)
    {
      g_mutex_lock (&server->lock);
      server->generation++;
      server->expired = FALSE;
      session = g_strdup_printf ("s%u", server->generation);
      g_mutex_unlock (&server->lock);
      soup_message_headers_replace (soup_server_message_get_response_headers (message),
                                    "Mcp-Session-Id", session);
      respond_json (message, id, json_pack ("{s:s, s:{s:{}}, s:{s:s, s:s}}",
                                            "protocolVersion", "2025-06-18",
                                            "capabilities", "tools",
                                            "serverInfo", "name", "fault", "version", "1"));
    }
  else if (!session_is_current (server, message))
    respond (message, SOUP_STATUS_NOT_FOUND, "text/plain", "no such session");
  else if (g_strcmp0 (soup_message_headers_get_one (soup_server_message_get_request_headers (message),
                                                   "MCP-Protocol-Version"), "2025-06-18") != 0)
    respond (message, SOUP_STATUS_BAD_REQUEST, "text/plain", "no MCP-Protocol-Version");
  else if (g_strcmp0 (method, "notifications/initialized") == 0)
    hold_initialized (server, message);
  else if (id == NULL || method == NULL)
    respond (message, SOUP_STATUS_ACCEPTED, NULL, NULL);
  else if (strcmp (method, "tools/list") == 0)
    {
      g_mutex_lock (&server->lock);
      server->tool_lists++;
      g_mutex_unlock (&server->lock);
      respond_json (message, id, list_tools ());
    }
  else if (strcmp (method, "tools/call") == 0)
    handle_call (server, message, id,
                 mcp_json_get_string (json_object_get (request, "params"), "name"));
  else
    respond (message, SOUP_STATUS_BAD_REQUEST, "text/plain", "unknown method");
}

/* The GET stream, when offered: a notification, then the end on purpose
 * with a retry; resumed, a ping request, then the end; after that, 405. */
static void
handle_get_stream (FaultServer       *server,
                   SoupServerMessage *message,
                   const char        *last)
{
  gboolean offered;

  g_mutex_lock (&server->lock);
  offered = server->serve_get;
  if (offered)
    g_string_append_printf (server->get_ids, "%s,", last ? last : "-");
  g_mutex_unlock (&server->lock);

  if (offered && last == NULL)
    respond (message, SOUP_STATUS_OK, "text/event-stream",
             "id: g1\nretry: 10\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
             "\"params\":{\"level\":\"info\",\"data\":\"A\"}}\n\n");
  else if (offered && strcmp (last, "g1") == 0)
    respond (message, SOUP_STATUS_OK, "text/event-stream",
             "id: g2\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"p1\",\"method\":\"ping\"}\n\n");
  else
    respond (message, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL, NULL);
}

/* A GET with Last-Event-ID r1 resumes the stream of the "resume" call. */
static void
handle_get (FaultServer       *server,
            SoupServerMessage *message)
{
  const char *last = soup_message_headers_get_one (soup_server_message_get_request_headers (message),
                                                   "Last-Event-ID");
  g_autoptr(json_t) id = NULL;
  g_autofree char *events = NULL;

  if (g_strcmp0 (last, "r1") != 0)
    {
      handle_get_stream (server, message, last);
      return;
    }
  g_mutex_lock (&server->lock);
  g_free (server->last_event_id);
  server->last_event_id = g_strdup (last);
  id = server->resume_id != NULL ? json_loads (server->resume_id, JSON_DECODE_ANY, NULL) : NULL;
  g_mutex_unlock (&server->lock);
  events = response_event (id, "resumed", "r2");
  respond (message, SOUP_STATUS_OK, "text/event-stream", events);
}

/* A request counts from its handler: libsoup also starts one for each
 * connection before its first byte, and one whose TLS handshake failed
 * never ends. */
static void
count_request (FaultServer       *server,
               SoupServerMessage *message)
{
  server->in_progress++;
  g_object_set_data (G_OBJECT (message), "fault-counted", GINT_TO_POINTER (TRUE));
}

static void
uncount_request (FaultServer       *server,
                 SoupServerMessage *message)
{
  if (g_object_steal_data (G_OBJECT (message), "fault-counted") != NULL)
    server->in_progress--;
}

static void
handle_request (SoupServer        *soup_server,
                SoupServerMessage *message,
                const char        *path,
                GHashTable        *query,
                gpointer           user_data)
{
  FaultServer *server = user_data;
  const char *method = soup_server_message_get_method (message);

  count_request (server, message);
  g_mutex_lock (&server->lock);
  g_free (server->last_host);
  server->last_host = g_strdup (soup_message_headers_get_one (soup_server_message_get_request_headers (message),
                                                              "Host"));
  g_mutex_unlock (&server->lock);
  if (strcmp (path, "/loop") == 0)
    {
      soup_server_message_set_redirect (message, SOUP_STATUS_FOUND, "/loop");
      return;
    }
  if (strcmp (path, "/elsewhere") == 0)
    {
      /* An HTTP+SSE server that sends the client's POSTs, and headers,
       * to another host. */
      respond (message, SOUP_STATUS_OK, "text/event-stream",
               "event: endpoint\ndata: https://example.com/steal\n\n");
      return;
    }
  if (strcmp (path, "/gone") == 0)
    {
      respond (message, SOUP_STATUS_NOT_FOUND, "text/plain", "nothing here");
      return;
    }
  if (strcmp (path, "/broken") == 0)
    {
      respond (message, SOUP_STATUS_INTERNAL_SERVER_ERROR, "text/html",
               "<html><body>backend\texploded</body></html>");
      return;
    }
  if (strcmp (path, "/auth") == 0)
    {
      soup_message_headers_replace (soup_server_message_get_response_headers (message),
                                    "WWW-Authenticate", "Bearer resource_metadata=\"http://127.0.0.1/prm\"");
      respond (message, SOUP_STATUS_UNAUTHORIZED, "text/plain", "log in");
      return;
    }
  if (strcmp (method, "POST") == 0)
    {
      gboolean broken;

      g_mutex_lock (&server->lock);
      server->posts++;
      broken = server->broken;
      g_mutex_unlock (&server->lock);
      if (broken)
        respond (message, SOUP_STATUS_INTERNAL_SERVER_ERROR, "text/plain", "down for now");
      else
        handle_post (server, message);
    }
  else if (strcmp (method, "GET") == 0)
    handle_get (server, message);
  else if (strcmp (method, "DELETE") == 0)
    {
      g_mutex_lock (&server->lock);
      server->deletes++;
      g_mutex_unlock (&server->lock);
      respond (message, SOUP_STATUS_OK, NULL, NULL);
    }
  else
    respond (message, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL, NULL);
}

static void
on_request_ended (SoupServer        *soup_server,
                  SoupServerMessage *message,
                  FaultServer       *server)
{
  uncount_request (server, message);
}

static gboolean
set_flag (gpointer data)
{
  *(gboolean *) data = TRUE;
  return G_SOURCE_REMOVE;
}

/* A reply the client has read can still be finishing: its last chunk is
 * written, and the request ends, on later iterations.  A request left
 * unfinished keeps its socket's hold on the context, and with it an fd. */
static void
finish_requests_in_progress (FaultServer *server)
{
  gboolean timed_out = FALSE;
  g_autoptr(GSource) timeout = g_timeout_source_new (test_timeout_ms (5000));

  g_source_set_callback (timeout, set_flag, &timed_out, NULL);
  g_source_attach (timeout, server->context);
  while (server->in_progress > 0 && !timed_out)
    g_main_context_iteration (server->context, TRUE);
  if (timed_out)
    g_test_message ("The fault server ends with %u requests in progress", server->in_progress);
  g_source_destroy (timeout);
}

static gpointer
fault_server_run (gpointer data)
{
  FaultServer *server = data;
  g_autoptr(SoupServer) soup_server = NULL;
  g_autoptr(GError) error = NULL;
  GSList *uris;
  guint i;

  g_main_context_push_thread_default (server->context);
  if (server->tls)
    {
      g_autofree char *pem = g_test_build_filename (G_TEST_DIST, "tls", "server.pem", NULL);
      g_autofree char *key = g_test_build_filename (G_TEST_DIST, "tls", "server.key", NULL);
      g_autoptr(GTlsCertificate) certificate = g_tls_certificate_new_from_files (pem, key, &error);

      g_assert_no_error (error);
      soup_server = soup_server_new ("tls-certificate", certificate, NULL);
    }
  else
    soup_server = soup_server_new (NULL, NULL);
  soup_server_add_handler (soup_server, NULL, handle_request, server, NULL);
  g_signal_connect (soup_server, "request-finished", G_CALLBACK (on_request_ended), server);
  g_signal_connect (soup_server, "request-aborted", G_CALLBACK (on_request_ended), server);
  g_assert_true (soup_server_listen_local (soup_server, 0,
                                           SOUP_SERVER_LISTEN_IPV4_ONLY |
                                           (server->tls ? SOUP_SERVER_LISTEN_HTTPS : 0), &error));
  g_assert_no_error (error);
  uris = soup_server_get_uris (soup_server);
  g_mutex_lock (&server->lock);
  server->port = g_uri_get_port (uris->data);
  server->ready = TRUE;
  g_cond_broadcast (&server->cond);
  g_mutex_unlock (&server->lock);
  g_slist_free_full (uris, (GDestroyNotify) g_uri_unref);

  g_main_loop_run (server->loop);

  release_initialized (server);
  /* The slow calls end with the server: their connections close here and
   * now.  An answer would be written on a later iteration of a context
   * that nobody runs any more, and its socket would stay open. */
  for (i = 0; i < server->paused->len; i++)
    {
      g_autoptr(GIOStream) stream = soup_server_message_steal_connection (g_ptr_array_index (server->paused, i));

      uncount_request (server, g_ptr_array_index (server->paused, i));   /* libsoup never ends it */
      g_io_stream_close (stream, NULL, NULL);
    }
  g_ptr_array_set_size (server->paused, 0);
  finish_requests_in_progress (server);
  soup_server_disconnect (soup_server);
  while (g_main_context_iteration (server->context, FALSE))
    ;
  g_clear_object (&soup_server);
  while (g_main_context_iteration (server->context, FALSE))
    ;
  g_main_context_pop_thread_default (server->context);
  return NULL;
}

static FaultServer *
fault_server_new (gboolean tls)
{
  FaultServer *server = g_new0 (FaultServer, 1);

  server->tls = tls;
  g_mutex_init (&server->lock);
  g_cond_init (&server->cond);
  server->paused = g_ptr_array_new_with_free_func (g_object_unref);
  server->get_ids = g_string_new (NULL);
  server->context = g_main_context_new ();
  server->loop = g_main_loop_new (server->context, FALSE);
  server->thread = g_thread_new ("fault-server", fault_server_run, server);
  g_mutex_lock (&server->lock);
  while (!server->ready)
    g_cond_wait (&server->cond, &server->lock);
  g_mutex_unlock (&server->lock);
  return server;
}

static gboolean
quit_loop (gpointer data)
{
  g_main_loop_quit (data);
  return G_SOURCE_REMOVE;
}

static void
fault_server_free (FaultServer *server)
{
  g_main_context_invoke (server->context, quit_loop, server->loop);
  g_thread_join (server->thread);
  g_main_loop_unref (server->loop);
  g_main_context_unref (server->context);
  g_ptr_array_unref (server->paused);
  g_string_free (server->get_ids, TRUE);
  g_free (server->resume_id);
  g_free (server->last_event_id);
  g_free (server->last_host);
  g_clear_object (&server->asking);
  g_clear_pointer (&server->asking_id, json_decref);
  g_mutex_clear (&server->lock);
  g_cond_clear (&server->cond);
  g_free (server);
}

typedef struct {
  FaultServer  *server;
  TestIoThread *io;
  guint         fds;
} Fixture;

static void
fixture_setup (Fixture *fixture, gconstpointer data)
{
  fixture->io = test_io_thread_new ();
  fixture->fds = test_count_open_fds ();
  fixture->server = fault_server_new (data != NULL);
}

static void
fixture_teardown (Fixture *fixture, gconstpointer data)
{
  /* Checked while the context still runs, as the pool's main loop does:
   * libsoup closes connections asynchronously.  The server's side of
   * kept-alive connections goes with the server. */
  fault_server_free (fixture->server);
  test_assert_open_fds (fixture->fds);
  test_io_thread_free (fixture->io);
  test_assert_no_children ();
}

static McpServerConfig *
remote_config (const char       *name,
               McpTransportKind  kind,
               const char       *url)
{
  McpServerConfig *config = mcp_server_config_new (name, NULL, NULL);

  config->transport = kind;
  config->url = g_strdup (url);
  config->start_timeout_ms = test_timeout_ms (10000);
  return config;
}

static McpServerConfig *
fault_config (Fixture *fixture, const char *path)
{
  g_autofree char *url = g_strdup_printf ("%s://127.0.0.1:%u%s", fixture->server->tls ? "https" : "http",
                                          fixture->server->port, path);
  McpServerConfig *config = remote_config ("faulty", MCP_TRANSPORT_HTTP, url);

  config->headers = g_strdupv ((char **) (const char *[]) { "X-Fault-Test:  yes, really ", NULL });
  return config;
}

static McpSession *
start_session (Fixture *fixture, McpServerConfig *config)
{
  g_autoptr(GError) error = NULL;
  McpSession *session = mcp_session_start (config, test_io_thread_get_context (fixture->io),
                                           NULL, NULL, &error);

  g_assert_no_error (error);
  return session;
}

static json_t *
call_tool (McpSession *session, const char *tool, gint64 timeout_ms, GError **error)
{
  g_autoptr(json_t) params = json_pack ("{s:s, s:{}}", "name", tool, "arguments");

  return mcp_session_call (session, "tools/call", params, timeout_ms, error);
}

static const char *
text_of (json_t *result)
{
  return mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text");
}

static void
assert_call_fails (McpSession *session, const char *tool, const char *part)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, tool, test_timeout_ms (10000), &error);

  g_assert_null (result);
  g_assert_nonnull (error);
  g_test_message ("%s: %s", tool, error->message);
  g_assert_nonnull (strstr (error->message, "“faulty”"));
  g_assert_nonnull (strstr (error->message, part));
}

static void
assert_echo_works (McpSession *session)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "echo", test_timeout_ms (10000), &error);

  g_assert_no_error (error);
  g_assert_cmpstr (text_of (result), ==, "echoed");
}

/* Handshake, an answer on an event stream, and DELETE at the end. */
static void
test_fault_basics (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = fault_config (fixture, "/mcp");
  g_autoptr(McpSession) session = start_session (fixture, config);
  g_autoptr(json_t) tools = mcp_session_dup_tools (session);

  g_assert_cmpstr (mcp_session_get_protocol_version (session), ==, "2025-06-18");
  g_assert_nonnull (test_find_tool (tools, "echo"));
  g_assert_cmpint (mcp_session_get_pid (session), ==, 0);
  assert_echo_works (session);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->deletes, ==, 1);
  g_assert_true (fixture->server->saw_header);
  g_assert_false (fixture->server->overtaken);
  g_mutex_unlock (&fixture->server->lock);
}

static void
count_message (McpSession *session, const char *method, json_t *params, gpointer user_data)
{
  if (g_strcmp0 (method, "notifications/message") == 0 &&
      g_strcmp0 (mcp_json_get_string (params, "data"), "A") == 0)
    g_atomic_int_inc ((int *) user_data);
}

typedef struct {
  FaultServer *server;
  int         *messages;
} GetStreamSeen;

static gboolean
get_stream_done (gpointer data)
{
  GetStreamSeen *seen = data;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&seen->server->lock);

  return g_atomic_int_get (seen->messages) == 1 && seen->server->ping_answered &&
         strcmp (seen->server->get_ids->str, "-,g1,g2,") == 0;
}

/* The GET stream opens after the handshake; a notification and a server
 * request arrive on it, and the stream the server ends on purpose is
 * resumed after its retry: with Last-Event-ID. */
static void
test_fault_get_stream (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = fault_config (fixture, "/mcp");
  g_autoptr(McpSession) session = NULL;
  g_autoptr(GError) error = NULL;
  int messages = 0;
  McpSessionCallbacks callbacks = { .on_notification = count_message, .user_data = &messages };
  GetStreamSeen seen = { fixture->server, &messages };

  g_mutex_lock (&fixture->server->lock);
  fixture->server->serve_get = TRUE;
  g_mutex_unlock (&fixture->server->lock);
  session = mcp_session_start (config, test_io_thread_get_context (fixture->io), &callbacks, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (test_wait_for (get_stream_done, &seen, 10000));
  assert_echo_works (session);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
}

/* Each failing call fails alone, with the server's name, and the session
 * goes on serving. */
static void
test_fault_requests (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = fault_config (fixture, "/mcp");
  g_autoptr(McpSession) session = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;

  config->max_line = 64 * 1024;
  session = start_session (fixture, config);
  assert_call_fails (session, "fail", "HTTP 503 Service Unavailable: backend exploded");
  assert_call_fails (session, "drop", "before answering");
  assert_call_fails (session, "malformed", "before answering");
  {
    /* What no caller heard of is in the log tail: the bad event. */
    g_autofree char *log = mcp_session_dup_stderr_tail (session, 4096);

    g_assert_nonnull (strstr (log, "Server “faulty” sent something that is not a JSON-RPC message"));
  }
  assert_call_fails (session, "huge", "65536 bytes");
  assert_call_fails (session, "huge-json", "65536 bytes (maxMessageBytes)");
  g_assert_true (mcp_session_is_alive (session));
  assert_echo_works (session);

  /* A slow answer: the session's timeout ends the call; the request
   * itself is dropped when the transport closes. */
  result = call_tool (session, "slow", 200, &error);
  g_assert_null (result);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT);
  assert_echo_works (session);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
}

/* A request the session gives up on (its timeout sends
 * notifications/cancelled) lets go of its connection: with three
 * connections to the host, four abandoned slow calls would otherwise
 * leave none for the echo. */
static void
test_fault_cancelled (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = fault_config (fixture, "/mcp");
  g_autoptr(McpSession) session = NULL;
  guint i;

  config->max_concurrency = 1;
  session = start_session (fixture, config);
  for (i = 0; i < 4; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(json_t) result = call_tool (session, "slow", 100, &error);

      g_assert_null (result);
      g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT);
    }
  assert_echo_works (session);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
}

/* A stream closed on purpose is resumed after `retry:` with
 * Last-Event-ID, and the answer comes on the resumed one. */
static void
test_fault_resume (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = fault_config (fixture, "/mcp");
  g_autoptr(McpSession) session = start_session (fixture, config);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "resume", test_timeout_ms (10000), &error);

  g_assert_no_error (error);
  g_assert_cmpstr (text_of (result), ==, "resumed");
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpstr (fixture->server->last_event_id, ==, "r1");
  g_mutex_unlock (&fixture->server->lock);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
}

static gboolean
session_is_dead (gpointer data)
{
  return !mcp_session_is_alive (data);
}

/* A 404 for the session closes it with a clear reason; nothing is sent
 * again. */
static void
test_fault_expiry (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = fault_config (fixture, "/mcp");
  g_autoptr(McpSession) session = start_session (fixture, config);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "expire", test_timeout_ms (10000), &error);

  g_assert_null (result);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "Server “faulty” ended the session (HTTP 404"));
  g_assert_true (test_wait_for (session_is_dead, session, 5000));
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->generation, ==, 1);
  g_mutex_unlock (&fixture->server->lock);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  /* A session that is gone gets no DELETE. */
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->deletes, ==, 0);
  g_mutex_unlock (&fixture->server->lock);
}

/* A pool of the fault server's one entry, "faulty", at /mcp. */
static McpPool *
fault_pool (Fixture                *fixture,
            gint64                  idle_timeout_ms,
            const McpPoolCallbacks *callbacks)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  /* A backoff long enough that a call right after a failure meets it on
   * the slowest host. */
  McpPoolOptions options = { .backoff_initial_ms = test_timeout_ms (2000), .backoff_max_ms = test_timeout_ms (4000),
                             .relist_debounce_ms = 10 };
  McpPool *pool = mcp_pool_new (test_io_thread_get_context (fixture->io), &options, callbacks);
  McpServerConfig *config = fault_config (fixture, "/mcp");

  config->idle_timeout_ms = idle_timeout_ms;
  g_ptr_array_add (configs, config);
  mcp_pool_set_servers (pool, configs);
  return pool;
}

static McpServerInfo *
faulty_info (McpPool *pool)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (pool);
  McpServerInfo *info = g_ptr_array_steal_index (servers, 0);

  g_assert_cmpstr (info->name, ==, "faulty");
  return info;
}

static gboolean
faulty_retry_due (gpointer data)
{
  g_autoptr(McpServerInfo) info = faulty_info (data);

  return info->state != MCP_SERVER_BACKOFF || info->retry_in_ms <= 0;
}

static gboolean
faulty_idle (gpointer data)
{
  g_autoptr(McpServerInfo) info = faulty_info (data);

  return info->state == MCP_SERVER_IDLE;
}

static gboolean
server_deleted (gpointer data)
{
  FaultServer *server = data;
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&server->lock);

  return server->deletes == 1;
}

static json_t *
call_faulty_echo (McpPool *pool, GError **error)
{
  g_autoptr(json_t) arguments = json_object ();

  return mcp_pool_call_tool (pool, "faulty", "echo", arguments, NULL, error);
}

/* The pool's own rules hold for a remote server: a failing connect backs
 * off (the calls meanwhile fail at once, without a request), the next try
 * after it connects; an idle session is ended with DELETE, and its tools
 * stay listed without a new session. */
static void
test_fault_pool_lifecycle (Fixture *fixture, gconstpointer data)
{
  McpPool *pool = fault_pool (fixture, 300, NULL);
  g_autoptr(json_t) echoed = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(McpServerInfo) info = NULL;
  g_autoptr(GError) error = NULL;
  guint posts;

  g_mutex_lock (&fixture->server->lock);
  fixture->server->broken = TRUE;
  g_mutex_unlock (&fixture->server->lock);
  g_assert_null (call_faulty_echo (pool, &error));
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_START);
  g_assert_nonnull (strstr (error->message, "“faulty”"));
  g_assert_nonnull (strstr (error->message, "HTTP 500"));
  g_clear_error (&error);
  g_mutex_lock (&fixture->server->lock);
  posts = fixture->server->posts;
  fixture->server->broken = FALSE;
  g_mutex_unlock (&fixture->server->lock);

  g_assert_null (call_faulty_echo (pool, &error));
  g_assert_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_BACKOFF);
  g_assert_nonnull (strstr (error->message, "tries again in"));
  g_clear_error (&error);
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->posts, ==, posts);
  g_mutex_unlock (&fixture->server->lock);

  g_assert_true (test_wait_for (faulty_retry_due, pool, 10000));
  echoed = call_faulty_echo (pool, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (echoed), ==, "echoed");

  g_assert_true (test_wait_for (faulty_idle, pool, 10000));
  g_assert_true (test_wait_for (server_deleted, fixture->server, 10000));
  tools = mcp_pool_list_tools (pool, "faulty", MCP_TOOL_DETAIL_SUMMARY, &error);
  g_assert_no_error (error);
  g_assert_nonnull (test_find_tool (tools, "echo"));
  info = faulty_info (pool);
  g_assert_cmpint (info->state, ==, MCP_SERVER_IDLE);
  /* The one that failed and the one that served. */
  g_assert_cmpuint (info->starts, ==, 2);
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->generation, ==, 1);
  g_mutex_unlock (&fixture->server->lock);

  mcp_pool_shutdown (pool, G_USEC_PER_SEC, G_USEC_PER_SEC);
  mcp_pool_free (pool);
}

static void
note_tools_changed (McpPool *pool, const char *server, gpointer user_data)
{
  g_async_queue_push (user_data, g_strdup (server));
}

/* tools/list_changed on a call's event stream: the pool lists the tools
 * again and says so. */
static void
test_fault_pool_list_changed (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GAsyncQueue) changed = g_async_queue_new_full (g_free);
  McpPoolCallbacks callbacks = { .on_tools_changed = note_tools_changed, .user_data = changed };
  McpPool *pool = fault_pool (fixture, 0, &callbacks);
  g_autoptr(json_t) arguments = json_object ();
  g_autoptr(json_t) result = NULL;
  g_autoptr(GError) error = NULL;

  result = mcp_pool_call_tool (pool, "faulty", "change", arguments, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (result), ==, "changed");
  /* The first listing, then the one the notice asked for. */
  for (guint i = 0; i < 2; i++)
    {
      g_autofree char *server = g_async_queue_timeout_pop (changed, test_timeout_ms (10000) * G_TIME_SPAN_MILLISECOND);

      g_assert_cmpstr (server, ==, "faulty");
    }
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->tool_lists, ==, 2);
  g_mutex_unlock (&fixture->server->lock);

  mcp_pool_shutdown (pool, G_USEC_PER_SEC, G_USEC_PER_SEC);
  mcp_pool_free (pool);
}

typedef struct {
  GMutex        lock;
  GCancellable *asked_for;     /* the only call in flight the request was for */
  guint         requests;
  guint         in_flight;
} Asked;

/* The session's context: the server's roots/list, answered with a root. */
static gboolean
answer_roots (McpSession          *session,
              const char          *method,
              json_t              *params,
              McpSessionResponder *responder,
              gpointer             user_data)
{
  Asked *asked = user_data;
  GPtrArray *in_flight = mcp_session_responder_get_in_flight (responder);

  g_mutex_lock (&asked->lock);
  asked->requests++;
  asked->in_flight = in_flight->len;
  asked->asked_for = in_flight->len == 1 ? g_ptr_array_index (in_flight, 0) : NULL;
  g_mutex_unlock (&asked->lock);
  mcp_session_responder_return_result (responder, json_pack ("{s:[{s:s}]}", "roots", "uri", "file:///asked"));
  return TRUE;
}

static void
on_slow_reply (json_t *result, const GError *error, gpointer user_data)
{
  json_decref (result);
}

/* A server's request on a call's own stream is for that call alone, even
 * with another call in flight: the one a front with many clients asks. */
static void
test_fault_related_request (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = fault_config (fixture, "/mcp");
  g_autoptr(GCancellable) slow_cancellable = g_cancellable_new ();
  g_autoptr(GCancellable) ask_cancellable = g_cancellable_new ();
  g_autoptr(json_t) slow_params = json_pack ("{s:s, s:{}}", "name", "slow", "arguments");
  g_autoptr(json_t) ask_params = json_pack ("{s:s, s:{}}", "name", "ask", "arguments");
  g_autoptr(json_t) result = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(GError) error = NULL;
  Asked asked = { 0 };
  McpSessionCallbacks callbacks = { .on_request = answer_roots, .user_data = &asked,
                                    .client_capabilities = json_pack ("{s:{}}", "roots") };
  McpCallOptions slow = { .cancellable = slow_cancellable, .timeout_ms = test_timeout_ms (20000) };
  McpCallOptions ask = { .cancellable = ask_cancellable, .timeout_ms = test_timeout_ms (20000) };

  g_mutex_init (&asked.lock);
  session = mcp_session_start (config, test_io_thread_get_context (fixture->io), &callbacks, NULL, &error);
  json_decref (callbacks.client_capabilities);
  g_assert_no_error (error);
  mcp_session_call_async (session, "tools/call", slow_params, &slow, on_slow_reply, NULL);
  result = mcp_session_call_full (session, "tools/call", ask_params, &ask, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (result), ==, "file:///asked");

  g_mutex_lock (&asked.lock);
  g_assert_cmpuint (asked.requests, ==, 1);
  g_assert_cmpuint (asked.in_flight, ==, 1);
  g_assert_true (asked.asked_for == ask_cancellable);
  g_mutex_unlock (&asked.lock);
  g_cancellable_cancel (slow_cancellable);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_mutex_clear (&asked.lock);
}

/* Through the pool: a session the server ended is started again on the
 * next call, re-initialised, and the call that met the 404 is not sent
 * again. */
static void
test_fault_pool_expiry (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autoptr(json_t) echo = json_object ();
  g_autoptr(json_t) first = NULL;
  g_autoptr(json_t) expired = NULL;
  g_autoptr(json_t) again = NULL;
  g_autoptr(GError) error = NULL;
  McpPool *pool = mcp_pool_new (test_io_thread_get_context (fixture->io), NULL, NULL);

  g_ptr_array_add (configs, fault_config (fixture, "/mcp"));
  mcp_pool_set_servers (pool, configs);
  first = mcp_pool_call_tool (pool, "faulty", "echo", echo, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (first), ==, "echoed");

  expired = mcp_pool_call_tool (pool, "faulty", "expire", echo, NULL, &error);
  g_assert_null (expired);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "ended the session"));
  g_clear_error (&error);

  again = mcp_pool_call_tool (pool, "faulty", "echo", echo, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (again), ==, "echoed");
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->generation, ==, 2);
  g_mutex_unlock (&fixture->server->lock);

  mcp_pool_shutdown (pool, G_USEC_PER_SEC, G_USEC_PER_SEC);
  mcp_pool_free (pool);
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->deletes, ==, 1);
  g_mutex_unlock (&fixture->server->lock);
}

static void assert_start_fails (Fixture *fixture, McpServerConfig *config, const char *part);

/* The seam alone, without a session: what the callbacks see. */
typedef struct {
  GMutex  lock;
  GCond   cond;
  GError *closed;    /* protected by lock */
  gint    refs;      /* what the transport holds of its owner; atomic */
} SeamWatch;

static void
seam_on_message (json_t *message, json_t *related, gpointer user_data)
{
}

static void
seam_on_closed (GError *reason, gpointer user_data)
{
  SeamWatch *watch = user_data;

  g_mutex_lock (&watch->lock);
  watch->closed = reason;
  g_cond_broadcast (&watch->cond);
  g_mutex_unlock (&watch->lock);
}

static gpointer
seam_ref (gpointer user_data)
{
  g_atomic_int_inc (&((SeamWatch *) user_data)->refs);
  return user_data;
}

static void
seam_unref (gpointer user_data)
{
  g_atomic_int_dec_and_test (&((SeamWatch *) user_data)->refs);
}

/* The owner frees the transport once the transport lets go of it. */
static gboolean
seam_released (gpointer user_data)
{
  return g_atomic_int_get (&((SeamWatch *) user_data)->refs) == 0;
}

/* A 401 closes the transport with MCP_TRANSPORT_ERROR_AUTH, and the
 * challenge stays readable for the login. */
static void
test_transport_auth (Fixture *fixture, gconstpointer data)
{
  static const McpTransportFuncs funcs = {
    .on_message = seam_on_message, .on_closed = seam_on_closed, .ref = seam_ref, .unref = seam_unref,
  };
  g_autoptr(McpServerConfig) config = fault_config (fixture, "/auth");
  g_autoptr(json_t) initialize = json_pack ("{s:s, s:i, s:s, s:{}}", "jsonrpc", "2.0", "id", 1,
                                            "method", "initialize", "params");
  g_autoptr(GError) error = NULL;
  g_autofree char *challenge = NULL;
  g_autofree char *log = NULL;
  gint64 deadline = g_get_monotonic_time () + test_timeout_ms (10000) * G_TIME_SPAN_MILLISECOND;
  SeamWatch watch = { 0 };
  McpTransport *transport;

  g_mutex_init (&watch.lock);
  g_cond_init (&watch.cond);
  transport = mcp_transport_new_for_config (config, test_io_thread_get_context (fixture->io),
                                            &funcs, &watch, &error);
  g_assert_no_error (error);
  g_assert_cmpint (mcp_transport_get_pid (transport), ==, 0);
  g_assert_null (mcp_http_dup_challenge (config->url));
  g_assert_true (mcp_transport_send (transport, initialize, &error));

  g_mutex_lock (&watch.lock);
  while (watch.closed == NULL && g_cond_wait_until (&watch.cond, &watch.lock, deadline))
    ;
  g_mutex_unlock (&watch.lock);
  g_assert_error (watch.closed, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_AUTH);
  g_assert_cmpstr (watch.closed->message, ==,
                   "Server “faulty” needs a login: run `mcp-pool auth faulty` (HTTP 401)");
  challenge = mcp_http_dup_challenge (config->url);
  g_assert_cmpstr (challenge, ==, "Bearer resource_metadata=\"http://127.0.0.1/prm\"");
  /* Header values, which may hold tokens, appear nowhere. */
  log = mcp_transport_dup_log_tail (transport, 4096);
  g_assert_null (strstr (log, "yes, really"));
  g_assert_null (mcp_transport_describe_end (transport, 0));

  mcp_transport_close (transport, G_USEC_PER_SEC, G_USEC_PER_SEC);
  mcp_transport_close (transport, G_USEC_PER_SEC, G_USEC_PER_SEC);
  g_assert_false (mcp_transport_send (transport, initialize, &error));
  g_assert_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CLOSED);
  g_assert_true (test_wait_for (seam_released, &watch, 5000));
  mcp_transport_free (transport);
  g_clear_error (&watch.closed);
  g_mutex_clear (&watch.lock);
  g_cond_clear (&watch.cond);
}

/* TLS through GIO: the test CA is not in the system's trust store, so
 * the server is refused until caFile names it, which then replaces the
 * system's store for that server. */
static void
test_fault_tls (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) untrusted = fault_config (fixture, "/mcp");
  g_autoptr(McpServerConfig) trusted = fault_config (fixture, "/mcp");
  g_autoptr(McpSession) session = NULL;

  assert_start_fails (fixture, untrusted, "name the CA's file in \"caFile\" in its entry");
  trusted->ca_file = g_test_build_filename (G_TEST_DIST, "tls", "ca.pem", NULL);
  session = start_session (fixture, trusted);
  assert_echo_works (session);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpuint (fixture->server->deletes, ==, 1);
  g_mutex_unlock (&fixture->server->lock);
}

static void
assert_start_fails_with (Fixture         *fixture,
                         McpServerConfig *config,
                         gint             code,
                         const char      *part)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(McpSession) session = mcp_session_start (config, test_io_thread_get_context (fixture->io),
                                                     NULL, NULL, &error);

  g_assert_null (session);
  g_assert_error (error, MCP_SESSION_ERROR, code);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, config->name));
  g_assert_nonnull (strstr (error->message, part));
}

static void
assert_start_fails (Fixture         *fixture,
                    McpServerConfig *config,
                    const char      *part)
{
  assert_start_fails_with (fixture, config, MCP_SESSION_ERROR_START, part);
}

static void
test_fault_start (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) broken = fault_config (fixture, "/broken");
  g_autoptr(McpServerConfig) loop = fault_config (fixture, "/loop");
  g_autoptr(McpServerConfig) auth = fault_config (fixture, "/auth");
  g_autoptr(McpServerConfig) gone = fault_config (fixture, "/gone");
  g_autoptr(McpServerConfig) elsewhere = fault_config (fixture, "/elsewhere");
  g_autoptr(McpServerConfig) refused = NULL;
  g_autofree char *closed_url = NULL;
  g_autoptr(GSocket) socket = NULL;
  g_autoptr(GSocketAddress) address = NULL;
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);

  assert_start_fails (fixture, broken, "HTTP 500 Internal Server Error: <html><body>backend exploded");
  assert_start_fails (fixture, loop, "could not be reached");
  /* A refusal is told apart, so that a command can log in and try again. */
  assert_start_fails_with (fixture, auth, MCP_SESSION_ERROR_LOGIN, "needs a login: run `mcp-pool auth faulty`");
  elsewhere->transport = MCP_TRANSPORT_SSE;
  assert_start_fails (fixture, elsewhere, "named an endpoint that is not on 127.0.0.1: https://example.com/steal");
  /* The POST's 404 leads to HTTP+SSE, whose GET gets 404 too. */
  assert_start_fails (fixture, gone, "answered GET /gone with HTTP 404 Not Found: nothing here; "
                                     "it had refused the Streamable HTTP POST with HTTP 404");

  /* A port where nothing listens: bound, not listening. */
  socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_assert_true (g_socket_bind (socket, any, TRUE, NULL));
  address = g_socket_get_local_address (socket, NULL);
  closed_url = g_strdup_printf ("http://127.0.0.1:%u/mcp",
                                g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (address)));
  refused = remote_config ("faulty", MCP_TRANSPORT_HTTP, closed_url);
  assert_start_fails (fixture, refused, "could not be reached");
}

/* `mcp-pool tools --url … --json` through the proxy the environment
 * names, with the --header it was given: the fault server, standing in
 * for the proxy, gets the request for the far host with the header. */
static void
test_fault_proxy (Fixture *fixture, gconstpointer data)
{
  g_autofree char *proxy = g_strdup_printf ("http://127.0.0.1:%u", fixture->server->port);
  const char *argv[] = { test_mcp_pool_path (), "tools", "--url", "http://mcp-pool-proxied.invalid/mcp",
                         "--allow-insecure-http", "--header", "X-Fault-Test: yes, really", "--json", NULL };
  g_auto(GStrv) wrapped = test_wrap_argv (argv);
  g_auto(GStrv) envp = g_get_environ ();
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(GError) error = NULL;
  int status;

  envp = g_environ_setenv (envp, "http_proxy", proxy, TRUE);
  envp = g_environ_unsetenv (envp, "no_proxy");
  envp = g_environ_unsetenv (envp, "NO_PROXY");
  g_assert_true (g_spawn_sync (NULL, wrapped, envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("mcp-pool tools --url through the proxy failed: %s", err);
  tools = json_loads (out, 0, NULL);
  g_assert_true (json_is_array (tools));
  g_assert_nonnull (test_find_tool (tools, "echo"));
  g_mutex_lock (&fixture->server->lock);
  g_assert_cmpstr (fixture->server->last_host, ==, "mcp-pool-proxied.invalid");
  g_assert_true (fixture->server->saw_header);
  g_mutex_unlock (&fixture->server->lock);
}

/* What the config says is checked before any I/O. */
static void
test_config_refused (void)
{
  static const struct {
    const char *url;
    const char *header;
    const char *ca_file;
    gboolean    insecure;
    const char *part;
  } cases[] = {
    { "http://example.com/mcp", NULL, NULL, FALSE, "set \"allowInsecureHttp\": true" },
    { "http://10.0.0.1/mcp", NULL, NULL, FALSE, "refusing plain http:// to 10.0.0.1" },
    { "ftp://example.com/mcp", NULL, NULL, FALSE, "https:// or http://" },
    { "not a url", NULL, NULL, FALSE, "no valid url" },
    { "https://example.com/mcp", "Authorization secret", NULL, FALSE, "header 1 of its entry" },
    { "https://example.com/mcp", NULL, "/nonexistent/ca.pem", FALSE, "/nonexistent/ca.pem" },
  };
  const McpTransportFuncs funcs = { 0 };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(McpServerConfig) config = remote_config ("remote", MCP_TRANSPORT_HTTP, cases[i].url);
      g_autoptr(GError) error = NULL;
      McpTransport *transport;

      if (cases[i].header != NULL)
        config->headers = g_strdupv ((char **) (const char *[]) { cases[i].header, NULL });
      config->ca_file = g_strdup (cases[i].ca_file);
      transport = mcp_transport_new_for_config (config, NULL, &funcs, NULL, &error);
      g_assert_null (transport);
      g_assert_error (error, MCP_TRANSPORT_ERROR, MCP_TRANSPORT_ERROR_CONFIG);
      g_assert_nonnull (strstr (error->message, "“remote”"));
      g_assert_nonnull (strstr (error->message, cases[i].part));
      g_assert_null (strstr (error->message, "secret"));
    }

  g_assert_true (mcp_http_host_is_loopback ("localhost"));
  g_assert_true (mcp_http_host_is_loopback ("127.0.0.2"));
  g_assert_true (mcp_http_host_is_loopback ("::1"));
  g_assert_false (mcp_http_host_is_loopback ("localhost.example.com"));
  g_assert_false (mcp_http_host_is_loopback ("192.168.1.1"));
}

/* server-everything, unmodified */

typedef struct {
  TestIoThread *io;
  GSubprocess  *node;
  guint         port;
  guint         fds;
} EverythingFixture;

static guint
free_port (void)
{
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM,
                                            G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) address = NULL;

  g_assert_true (g_socket_bind (socket, any, TRUE, NULL));
  address = g_socket_get_local_address (socket, NULL);
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (address));
}

static gboolean
port_listens (gpointer data)
{
  EverythingFixture *fixture = data;
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketConnection) connection =
    g_socket_client_connect_to_host (client, "127.0.0.1", fixture->port, NULL, NULL);

  g_assert_true (g_subprocess_get_identifier (fixture->node) != NULL);
  return connection != NULL;
}

static void
everything_setup (EverythingFixture *fixture, gconstpointer data)
{
  g_autofree char *entry = test_interop_file ("@modelcontextprotocol/server-everything/dist/index.js");
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autofree char *port = NULL;
  g_autoptr(GError) error = NULL;

  g_autofree char *sdk_server = g_test_build_filename (G_TEST_DIST, "interop", "sdk-http-server.mjs", NULL);
  g_autofree char *sdk2_server = g_test_build_filename (G_TEST_DIST, "interop", "sdk2-server.mjs", NULL);
  gboolean sdk = strcmp (data, "sdk") == 0;
  gboolean sdk2 = strcmp (data, "sdk2") == 0;
  g_autofree char *sdk2_package = sdk2 ? test_interop_file ("@modelcontextprotocol/server/package.json") : NULL;

  if (entry == NULL || (sdk2 && sdk2_package == NULL))
    return;
  fixture->io = test_io_thread_new ();
  fixture->fds = test_count_open_fds ();
  fixture->port = free_port ();
  port = g_strdup_printf ("%u", fixture->port);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_subprocess_launcher_setenv (launcher, "PORT", port, TRUE);
  g_subprocess_launcher_set_child_setup (launcher, test_die_with_parent, NULL, NULL);
  /* The fallback runs against the sse mode too; "sdk" is the SDK's own
   * Streamable HTTP server (tests/interop/sdk-http-server.mjs). */
  /* "sdk2" is a 2026-07-28 endpoint on the SDK v2, which refuses
   * initialize (tests/interop/sdk2-server.mjs --http). */
  fixture->node = g_subprocess_launcher_spawn (launcher, &error, "node", sdk ? sdk_server : sdk2 ? sdk2_server : entry,
                                               sdk ? NULL : sdk2 ? "--http"
                                               : strcmp (data, "streamableHttp") == 0 ? "streamableHttp" : "sse",
                                               NULL);
  g_assert_no_error (error);
  g_assert_true (test_wait_for (port_listens, fixture, 20000));
}

static void
everything_teardown (EverythingFixture *fixture, gconstpointer data)
{
  if (fixture->node == NULL)
    return;
  g_subprocess_send_signal (fixture->node, SIGTERM);
  g_assert_true (test_subprocess_wait (fixture->node, 10000));
  g_clear_object (&fixture->node);
  test_assert_no_children ();
  /* While the context runs, as in fixture_teardown(). */
  test_assert_open_fds (fixture->fds);
  test_io_thread_free (fixture->io);
}

static void
count_progress (json_t *params, gpointer user_data)
{
  g_atomic_int_inc ((int *) user_data);
}

typedef struct {
  GMutex lock;
  GCond  cond;
  guint  left;
  guint  right;
} Calls;

static void
on_echo_reply (json_t *result, const GError *error, gpointer user_data)
{
  g_autoptr(json_t) owned = result;
  Calls *calls = user_data;

  g_mutex_lock (&calls->lock);
  if (error == NULL && g_str_has_prefix (text_of (result), "Echo: "))
    calls->right++;
  calls->left--;
  g_cond_broadcast (&calls->cond);
  g_mutex_unlock (&calls->lock);
}

/* Many calls in flight at once on one remote session. */
static void
assert_many_calls (McpSession *session, guint count)
{
  Calls calls = { .left = count };
  gint64 deadline = g_get_monotonic_time () + test_timeout_ms (20000) * G_TIME_SPAN_MILLISECOND;
  guint i;

  g_mutex_init (&calls.lock);
  g_cond_init (&calls.cond);
  for (i = 0; i < count; i++)
    {
      g_autofree char *number = g_strdup_printf ("%u", i);
      g_autoptr(json_t) params = json_pack ("{s:s, s:{s:s+}}", "name", "echo", "arguments",
                                            "message", "call ", number);

      mcp_session_call_async (session, "tools/call", params, NULL, on_echo_reply, &calls);
    }
  g_mutex_lock (&calls.lock);
  while (calls.left > 0 && g_cond_wait_until (&calls.cond, &calls.lock, deadline))
    ;
  g_assert_cmpuint (calls.left, ==, 0);
  g_assert_cmpuint (calls.right, ==, count);
  g_mutex_unlock (&calls.lock);
  g_mutex_clear (&calls.lock);
  g_cond_clear (&calls.cond);
}

static void
test_everything (EverythingFixture *fixture, gconstpointer data)
{
  const char *mode = data;
  g_autofree char *url = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(json_t) info = NULL;
  g_autoptr(json_t) params = NULL;
  g_autoptr(json_t) result = NULL;
  g_autoptr(json_t) long_run = NULL;
  g_autoptr(GError) error = NULL;
  int progress = 0;
  McpCallOptions options = { .progress = count_progress, .progress_data = &progress,
                             .timeout_ms = test_timeout_ms (20000) };

  if (fixture->node == NULL)
    return;
  /* Streamable HTTP at /mcp; HTTP+SSE at /sse, reached both by asking for
   * it and by falling back from a refused POST. */
  url = g_strdup_printf ("http://127.0.0.1:%u/%s", fixture->port,
                         strcmp (mode, "streamableHttp") == 0 ? "mcp" : "sse");
  config = remote_config ("everything", strcmp (mode, "sse") == 0 ? MCP_TRANSPORT_SSE : MCP_TRANSPORT_HTTP,
                          url);
  session = mcp_session_start (config, test_io_thread_get_context (fixture->io), NULL, NULL, &error);
  g_assert_no_error (error);

  info = mcp_session_dup_server_info (session);
  g_assert_cmpstr (mcp_json_get_string (info, "name"), ==, "mcp-servers/everything");
  tools = mcp_session_dup_tools (session);
  g_assert_nonnull (test_find_tool (tools, "echo"));

  params = json_pack ("{s:s, s:{s:s}}", "name", "echo", "arguments", "message", "over http");
  result = mcp_session_call (session, "tools/call", params, test_timeout_ms (20000), &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (result), ==, "Echo: over http");

  assert_many_calls (session, 32);

  /* Progress on the request's stream reaches the caller. */
  json_decref (params);
  params = json_pack ("{s:s, s:{s:i, s:i}}", "name", "trigger-long-running-operation",
                      "arguments", "duration", 1, "steps", 3);
  long_run = mcp_session_call_full (session, "tools/call", params, &options, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_atomic_int_get (&progress), >=, 1);

  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_assert_false (mcp_session_is_alive (session));
}

/* The pool over Streamable HTTP or HTTP+SSE (by @data), as a user's
 * config would have it. */
static void
test_everything_pool (EverythingFixture *fixture, gconstpointer data)
{
  gboolean sse = strcmp (data, "sse") == 0;
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autofree char *url = NULL;
  g_autoptr(json_t) echo = NULL;
  g_autoptr(json_t) sum = NULL;
  g_autoptr(json_t) message = json_pack ("{s:s}", "message", "pooled");
  g_autoptr(json_t) numbers = json_pack ("{s:i, s:i}", "a", 2, "b", 3);
  g_autoptr(GError) error = NULL;
  McpPool *pool;

  if (fixture->node == NULL)
    return;
  url = g_strdup_printf ("http://127.0.0.1:%u/%s", fixture->port, sse ? "sse" : "mcp");
  pool = mcp_pool_new (test_io_thread_get_context (fixture->io), NULL, NULL);
  g_ptr_array_add (configs, remote_config ("everything", sse ? MCP_TRANSPORT_SSE : MCP_TRANSPORT_HTTP, url));
  mcp_pool_set_servers (pool, configs);

  echo = mcp_pool_call_tool (pool, "everything", "echo", message, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (echo), ==, "Echo: pooled");
  sum = mcp_pool_call_tool (pool, "everything", "get-sum", numbers, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (strstr (text_of (sum), "5"));

  mcp_pool_shutdown (pool, G_USEC_PER_SEC, G_USEC_PER_SEC);
  mcp_pool_free (pool);
}

/* What a 2026-07-28 server asked of the session and told it. */
typedef struct {
  int asked;     /* elicitation requests, answered with the name "Lin" */
  int changed;   /* notifications/tools/list_changed */
  int updated;   /* notifications/resources/updated */
} Modern;

/* The session's context. */
static gboolean
answer_name (McpSession          *session,
             const char          *method,
             json_t              *params,
             McpSessionResponder *responder,
             gpointer             user_data)
{
  Modern *modern = user_data;

  if (g_strcmp0 (method, "elicitation/create") != 0)
    return FALSE;
  g_atomic_int_inc (&modern->asked);
  mcp_session_responder_return_result (responder, json_pack ("{s:s, s:{s:s}}", "action", "accept",
                                                             "content", "name", "Lin"));
  return TRUE;
}

static void
count_changes (McpSession *session,
               const char *method,
               json_t     *params,
               gpointer    user_data)
{
  Modern *modern = user_data;

  if (g_strcmp0 (method, "notifications/tools/list_changed") == 0)
    g_atomic_int_inc (&modern->changed);
  if (g_strcmp0 (method, "notifications/resources/updated") == 0)
    g_atomic_int_inc (&modern->updated);
}

static gboolean
resource_updated (gpointer data)
{
  Modern *modern = data;

  return g_atomic_int_get (&modern->updated) > 0;
}

static gboolean
tools_changed (gpointer data)
{
  Modern *modern = data;

  return g_atomic_int_get (&modern->changed) > 0;
}

/* A Streamable HTTP endpoint of 2026-07-28 only, which refuses initialize:
 * the server/discover probe finds it, every request carries the envelope
 * and the headers it checks, list changes come on the subscriptions/listen
 * stream, an InputRequiredResult is asked through on_request and the
 * call retried with the answer, and a resource subscription is a stream
 * of its own that the resource's updates come on. */
static void
test_sdk2_server (EverythingFixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) asking = json_pack ("{s:{}}", "elicitation");
  Modern modern = { 0 };
  McpSessionCallbacks callbacks = {
    .on_notification = count_changes, .on_request = answer_name, .user_data = &modern,
    .client_capabilities = asking,
  };
  g_autofree char *url = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) info = NULL;
  g_autoptr(json_t) echo = NULL;
  g_autoptr(json_t) added = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(json_t) greeted = NULL;
  g_autoptr(json_t) echo_params = json_pack ("{s:s, s:{s:s}}", "name", "echo", "arguments", "message", "stateless http");
  g_autoptr(json_t) add_params = json_pack ("{s:s, s:{s:s}}", "name", "add_tool", "arguments", "name", "late");
  g_autoptr(json_t) ask_params = json_pack ("{s:s}", "name", "ask_name");
  g_autoptr(json_t) subscribe_params = json_pack ("{s:s}", "uri", "note://pad");
  g_autoptr(json_t) write_params = json_pack ("{s:s, s:{s:s}}", "name", "write_note", "arguments", "text", "new");
  g_autoptr(json_t) subscribed = NULL;
  g_autoptr(json_t) written = NULL;
  g_autoptr(json_t) unsubscribed = NULL;
  g_autoptr(GError) error = NULL;

  if (fixture->node == NULL)
    return;
  url = g_strdup_printf ("http://127.0.0.1:%u/mcp", fixture->port);
  config = remote_config ("sdk2", MCP_TRANSPORT_HTTP, url);
  session = mcp_session_start (config, test_io_thread_get_context (fixture->io), &callbacks, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (mcp_session_get_protocol_version (session), ==, MCP_PROTOCOL_VERSION_STATELESS);
  info = mcp_session_dup_server_info (session);
  g_assert_cmpstr (mcp_json_get_string (info, "name"), ==, "sdk2-server");

  echo = mcp_session_call (session, "tools/call", echo_params, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (echo), ==, "Echo: stateless http");
  assert_many_calls (session, 16);

  added = mcp_session_call (session, "tools/call", add_params, 0, &error);
  g_assert_no_error (error);
  g_assert_true (test_wait_for (tools_changed, &modern, 20000));
  tools = mcp_session_list_tools (session, 0, &error);
  g_assert_no_error (error);
  g_assert_nonnull (test_find_tool (tools, "late"));

  greeted = mcp_session_call (session, "tools/call", ask_params, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (text_of (greeted), ==, "Hello, Lin!");
  g_assert_cmpint (g_atomic_int_get (&modern.asked), ==, 1);

  /* A subscription is a subscriptions/listen stream of the resource. */
  subscribed = mcp_session_call (session, "resources/subscribe", subscribe_params, 0, &error);
  g_assert_no_error (error);
  written = mcp_session_call (session, "tools/call", write_params, 0, &error);
  g_assert_no_error (error);
  g_assert_true (test_wait_for (resource_updated, &modern, 20000));
  unsubscribed = mcp_session_call (session, "resources/unsubscribe", subscribe_params, 0, &error);
  g_assert_no_error (error);

  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_assert_false (mcp_session_is_alive (session));
}

static int
compare_names (gconstpointer a,
               gconstpointer b)
{
  return g_strcmp0 (*(char * const *) a, *(char * const *) b);
}

/* The names of @tools that start with @prefix (NULL: all), without it,
 * but for those that run only as tasks (the proxy does not list them),
 * sorted and joined with commas. */
static char *
tool_names (json_t     *tools,
            const char *prefix)
{
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    {
      const char *name = mcp_json_get_string (tool, "name");

      /* One that runs only as a task the proxy does not list. */
      if (g_strcmp0 (mcp_json_get_string (json_object_get (tool, "execution"), "taskSupport"), "required") == 0)
        continue;
      if (prefix == NULL)
        g_ptr_array_add (names, g_strdup (name));
      else if (g_str_has_prefix (name, prefix))
        g_ptr_array_add (names, g_strdup (name + strlen (prefix)));
    }
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return g_strjoinv (",", (char **) names->pdata);
}

/* `mcp-pool serve --config @config` with @option and @value, started in
 * @dir and initialized; its initialize result in @initialized. */
static TestClient *
start_serve (const char  *dir,
             const char  *config,
             const char  *option,
             const char  *value,
             json_t     **initialized)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  const char *argv[] = { test_mcp_pool_path (), "serve", "--config", config, option, value, NULL };
  g_auto(GStrv) wrapped = test_wrap_argv (argv);
  TestClient *client;
  g_autoptr(json_t) reply = NULL;

  g_subprocess_launcher_setenv (launcher, "HOME", dir, TRUE);
  g_subprocess_launcher_set_cwd (launcher, dir);
  client = test_client_new (launcher, (const char * const *) wrapped);
  test_client_send (client, json_pack ("{s:s, s:i, s:s, s:{s:s, s:{}, s:{s:s, s:s}}}",
                                       "jsonrpc", "2.0", "id", 0, "method", "initialize", "params",
                                       "protocolVersion", "2025-06-18", "capabilities",
                                       "clientInfo", "name", "test-http", "version", "1"));
  reply = test_client_read_reply (client, 0);
  g_assert_true (json_is_object (json_object_get (reply, "result")));
  *initialized = json_incref (json_object_get (reply, "result"));
  test_client_notify (client, "notifications/initialized", NULL);
  return client;
}

static void
stop_serve (TestClient *client)
{
  test_client_close_input (client);
  test_client_wait_exit (client);
  test_client_free (client);
}

static json_t *
call_serve_tool (TestClient *client,
                 const char *tool,
                 json_t     *arguments)
{
  return test_client_result (client, "tools/call", json_pack ("{s:s, s:o}", "name", tool, "arguments", arguments));
}

/* A user's config of a local and a remote server (Streamable HTTP or
 * HTTP+SSE, by @data) behind `mcp-pool serve`, in every exposure: the
 * proxy offers the remote server's tools under their prefix, the same
 * tools a session straight to it lists, and calls reach both;
 * list_servers and the capabilities resource tell its transport; the
 * gateway's call_tool and run_python's code reach it; `--server` offers
 * it as it is. */
static void
test_everything_serve (EverythingFixture *fixture, gconstpointer data)
{
  gboolean sse = strcmp (data, "sse") == 0;
  g_autofree char *dir = NULL;
  g_autofree char *config = NULL;
  g_autofree char *text = NULL;
  g_autofree char *url = NULL;
  g_autofree char *direct_names = NULL;
  g_autofree char *described = NULL;
  g_autoptr(McpServerConfig) remote = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) direct_tools = NULL;
  g_autoptr(GError) error = NULL;
  TestClient *client;

  if (fixture->node == NULL)
    return;
  url = g_strdup_printf ("http://127.0.0.1:%u/%s", fixture->port, sse ? "sse" : "mcp");
  remote = remote_config ("everything", sse ? MCP_TRANSPORT_SSE : MCP_TRANSPORT_HTTP, url);
  session = mcp_session_start (remote, test_io_thread_get_context (fixture->io), NULL, NULL, &error);
  g_assert_no_error (error);
  direct_tools = mcp_session_dup_tools (session);
  direct_names = tool_names (direct_tools, NULL);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);

  dir = g_dir_make_tmp ("test-http-serve-XXXXXX", NULL);
  config = g_build_filename (dir, "servers.json", NULL);
  text = g_strdup_printf ("{\"mcpServers\": {\"everything\": {\"type\": \"%s\", \"url\": \"%s\"}, "
                          "\"local\": {\"command\": \"%s\"}}}", sse ? "sse" : "http", url, test_fixture_path ());
  g_assert_true (g_file_set_contents (config, text, -1, NULL));
  described = g_strdup_printf ("%s %s, auth: none", sse ? "sse" : "http", url);

  {
    g_autoptr(json_t) initialized = NULL;
    g_autoptr(json_t) tools = NULL;
    g_autoptr(json_t) local = NULL;
    g_autoptr(json_t) echo = NULL;
    g_autoptr(json_t) read = NULL;
    g_autofree char *proxied = NULL;

    client = start_serve (dir, config, "--expose", "proxy", &initialized);
    tools = test_client_result (client, "tools/list", NULL);
    proxied = tool_names (json_object_get (tools, "tools"), "everything__");
    g_assert_cmpstr (proxied, ==, direct_names);
    g_assert_nonnull (test_find_tool (json_object_get (tools, "tools"), "local__echo"));
    local = call_serve_tool (client, "local__echo", json_pack ("{s:s}", "message", "nearby"));
    g_assert_cmpstr (test_result_text (local), ==, "Echo: nearby");
    echo = call_serve_tool (client, "everything__echo", json_pack ("{s:s}", "message", "over HTTP"));
    g_assert_cmpstr (test_result_text (echo), ==, "Echo: over HTTP");
    read = test_client_result (client, "resources/read", json_pack ("{s:s}", "uri", "mcp-pool://capabilities"));
    g_assert_nonnull (strstr (mcp_json_get_string (json_array_get (json_object_get (read, "contents"), 0), "text"),
                              described));
    stop_serve (client);
  }
  {
    g_autoptr(json_t) initialized = NULL;
    g_autoptr(json_t) servers = NULL;
    g_autoptr(json_t) echo = NULL;
    json_t *listed = NULL, *server;
    size_t i;

    client = start_serve (dir, config, "--expose", "gateway", &initialized);
    echo = call_serve_tool (client, "call_tool", json_pack ("{s:s, s:s, s:{s:s}}", "server", "everything",
                                                            "tool", "echo", "arguments", "message", "over HTTP"));
    g_assert_cmpstr (test_result_text (echo), ==, "Echo: over HTTP");
    servers = call_serve_tool (client, "list_servers", json_object ());
    json_array_foreach (json_object_get (json_object_get (servers, "structuredContent"), "servers"), i, server)
      if (g_strcmp0 (mcp_json_get_string (server, "name"), "everything") == 0)
        listed = server;
    g_assert_nonnull (listed);
    g_assert_cmpstr (mcp_json_get_string (listed, "transport"), ==, sse ? "sse" : "http");
    g_assert_cmpstr (mcp_json_get_string (listed, "url"), ==, url);
    g_assert_cmpstr (mcp_json_get_string (listed, "auth"), ==, "none");
    g_assert_cmpstr (mcp_json_get_string (listed, "login"), ==, "none");
    stop_serve (client);
  }
  {
    g_autoptr(json_t) initialized = NULL;
    g_autoptr(json_t) run = NULL;

    client = start_serve (dir, config, "--expose", "code", &initialized);
    if (!test_sandbox_skipped (NULL))
      {
        run = call_serve_tool (client, "run_python",
                               json_pack ("{s:s, s:[s]}", "code",
                                          "r = await runtime.call_tool('everything', 'echo', {'message': 'from code'})\n"
                                          "print(r['content'][0]['text'])\n",
                                          "servers", "everything"));
        if (!test_sandbox_skipped (run))
          g_assert_cmpstr (test_result_text (run), ==, "Echo: from code");
      }
    stop_serve (client);
  }
  {
    g_autoptr(json_t) initialized = NULL;
    g_autoptr(json_t) tools = NULL;
    g_autoptr(json_t) echo = NULL;
    g_autofree char *names = NULL;

    client = start_serve (dir, config, "--server", "everything", &initialized);
    g_assert_cmpstr (mcp_json_get_string (json_object_get (initialized, "serverInfo"), "name"),
                     ==, "mcp-servers/everything");
    tools = test_client_result (client, "tools/list", NULL);
    names = tool_names (json_object_get (tools, "tools"), NULL);
    g_assert_cmpstr (names, ==, direct_names);
    echo = call_serve_tool (client, "echo", json_pack ("{s:s}", "message", "as it is"));
    g_assert_cmpstr (test_result_text (echo), ==, "Echo: as it is");
    stop_serve (client);
  }
  /* HOME was dir: what GLib keeps there (dconf's cache) goes too. */
  g_assert_true (test_remove_tree (dir));
}

/* `mcp-pool tools --url` and `call --url`: the server named by its URL
 * alone, as the conformance suite drives the CLI. */
static void
test_everything_cli (EverythingFixture *fixture, gconstpointer data)
{
  g_autofree char *url = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int status;

  if (fixture->node == NULL)
    return;
  url = g_strdup_printf ("http://127.0.0.1:%u/mcp", fixture->port);
  {
    const char *argv[] = { test_mcp_pool_path (), "tools", "--url", url, NULL };
    g_auto(GStrv) wrapped = test_wrap_argv (argv);

    g_assert_true (g_spawn_sync (NULL, wrapped, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error));
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
    g_assert_nonnull (strstr (out, "echo"));
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  {
    const char *argv[] = { test_mcp_pool_path (), "call", "--url", url, "echo", "message=by URL", NULL };
    g_auto(GStrv) wrapped = test_wrap_argv (argv);

    g_assert_true (g_spawn_sync (NULL, wrapped, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error));
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
    g_assert_cmpstr (out, ==, "Echo: by URL\n");
  }
}

/* The official SDK's Streamable HTTP server, as a second peer: the
 * handshake, its event-stream answers, many calls at once and DELETE. */
static void
test_sdk_server (EverythingFixture *fixture, gconstpointer data)
{
  g_autofree char *url = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) info = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(GError) error = NULL;

  if (fixture->node == NULL)
    return;
  url = g_strdup_printf ("http://127.0.0.1:%u/mcp", fixture->port);
  config = remote_config ("sdk", MCP_TRANSPORT_HTTP, url);
  session = mcp_session_start (config, test_io_thread_get_context (fixture->io), NULL, NULL, &error);
  g_assert_no_error (error);
  info = mcp_session_dup_server_info (session);
  g_assert_cmpstr (mcp_json_get_string (info, "name"), ==, "sdk-http-peer");
  tools = mcp_session_dup_tools (session);
  g_assert_nonnull (test_find_tool (tools, "echo"));
  assert_many_calls (session, 32);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  json_object_seed (1);
  /* GIO's modules keep fds of their own once loaded; load them before any
   * test counts fds. */
  g_object_unref (soup_session_new ());
  g_tls_backend_get_default ();
  g_proxy_resolver_get_default ();

  g_test_add_func ("/sse/fields", test_sse_fields);
  g_test_add_func ("/sse/line-ends", test_sse_line_ends);
  g_test_add_func ("/sse/too-long", test_sse_too_long);
  g_test_add_func ("/http/config-refused", test_config_refused);
  g_test_add ("/http/fault/basics", Fixture, NULL, fixture_setup, test_fault_basics, fixture_teardown);
  g_test_add ("/http/fault/get-stream", Fixture, NULL, fixture_setup, test_fault_get_stream, fixture_teardown);
  g_test_add ("/http/fault/requests", Fixture, NULL, fixture_setup, test_fault_requests, fixture_teardown);
  g_test_add ("/http/fault/cancelled", Fixture, NULL, fixture_setup, test_fault_cancelled, fixture_teardown);
  g_test_add ("/http/fault/resume", Fixture, NULL, fixture_setup, test_fault_resume, fixture_teardown);
  g_test_add ("/http/fault/expiry", Fixture, NULL, fixture_setup, test_fault_expiry, fixture_teardown);
  g_test_add ("/http/fault/pool-expiry", Fixture, NULL, fixture_setup, test_fault_pool_expiry, fixture_teardown);
  g_test_add ("/http/fault/pool-lifecycle", Fixture, NULL, fixture_setup, test_fault_pool_lifecycle,
              fixture_teardown);
  g_test_add ("/http/fault/pool-list-changed", Fixture, NULL, fixture_setup, test_fault_pool_list_changed,
              fixture_teardown);
  g_test_add ("/http/fault/tls", Fixture, "tls", fixture_setup, test_fault_tls, fixture_teardown);
  g_test_add ("/http/fault/transport-auth", Fixture, NULL, fixture_setup, test_transport_auth, fixture_teardown);
  g_test_add ("/http/fault/start", Fixture, NULL, fixture_setup, test_fault_start, fixture_teardown);
  g_test_add ("/http/fault/proxy", Fixture, NULL, fixture_setup, test_fault_proxy, fixture_teardown);
  g_test_add ("/http/fault/related-request", Fixture, NULL, fixture_setup, test_fault_related_request,
              fixture_teardown);
  g_test_add ("/http/everything/streamable", EverythingFixture, "streamableHttp",
              everything_setup, test_everything, everything_teardown);
  g_test_add ("/http/everything/sse", EverythingFixture, "sse",
              everything_setup, test_everything, everything_teardown);
  g_test_add ("/http/everything/pool", EverythingFixture, "streamableHttp",
              everything_setup, test_everything_pool, everything_teardown);
  g_test_add ("/http/everything/pool-sse", EverythingFixture, "sse",
              everything_setup, test_everything_pool, everything_teardown);
  g_test_add ("/http/everything/serve", EverythingFixture, "streamableHttp",
              everything_setup, test_everything_serve, everything_teardown);
  g_test_add ("/http/everything/serve-sse", EverythingFixture, "sse",
              everything_setup, test_everything_serve, everything_teardown);
  g_test_add ("/http/everything/cli", EverythingFixture, "streamableHttp",
              everything_setup, test_everything_cli, everything_teardown);
  g_test_add ("/http/sdk-server", EverythingFixture, "sdk", everything_setup, test_sdk_server, everything_teardown);
  g_test_add ("/http/sdk2-server", EverythingFixture, "sdk2", everything_setup, test_sdk2_server, everything_teardown);
  g_test_add ("/http/everything/fallback", EverythingFixture, "fallback",
              everything_setup, test_everything, everything_teardown);

  return g_test_run ();
}
