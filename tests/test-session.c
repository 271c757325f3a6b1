/* test-session.c — one live session against the fixture server: handshake,
 * concurrency, timeouts, crashes, noise, floods, shutdown of whole process
 * groups.  Every test ends by checking that no process and no fd is left. */
#include "config.h"

#include <signal.h>
#include <string.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "pool/mcp-session.h"
#include "test-client.h"
#include "test-io-thread.h"
#include "test-procs.h"
#include "test-wait.h"

typedef struct {
  TestIoThread *io;
  McpSession   *session;
  GPid          pid;
  guint         fds_before;
  GAsyncQueue  *notifications;   /* method names, in arrival order */
  GAsyncQueue  *closed;          /* error messages from on_closed */
  /* With a handler of server requests: the methods it takes, and what it
   * declares in initialize. */
  const char   *take_method;
  json_t       *capabilities;
  GAsyncQueue  *requests;        /* McpSessionResponder taken, unanswered */
} Fixture;

static void
on_notification (McpSession *session,
                 const char *method,
                 json_t     *params,
                 gpointer    user_data)
{
  Fixture *fixture = user_data;
  g_async_queue_push (fixture->notifications, g_strdup (method));
}

static void
on_closed (McpSession   *session,
           const GError *reason,
           gpointer      user_data)
{
  Fixture *fixture = user_data;
  g_async_queue_push (fixture->closed, g_strdup (reason->message));
}

static gboolean
on_request (McpSession          *session,
            const char          *method,
            json_t              *params,
            McpSessionResponder *responder,
            gpointer             user_data)
{
  Fixture *fixture = user_data;

  if (g_strcmp0 (method, fixture->take_method) != 0)
    return FALSE;
  g_assert_cmpstr (mcp_session_responder_get_method (responder), ==, method);
  g_assert_cmpstr (mcp_session_responder_get_server (responder), ==, "fixture");
  g_assert_true (json_is_object (params));
  g_async_queue_push (fixture->requests, responder);
  return TRUE;
}

static void
setup (Fixture       *fixture,
       gconstpointer  data)
{
  fixture->fds_before = test_count_open_fds ();
  fixture->io = test_io_thread_new ();
  fixture->notifications = g_async_queue_new_full (g_free);
  fixture->closed = g_async_queue_new_full (g_free);
  fixture->requests = g_async_queue_new ();
}

static McpSession *
start_config (Fixture          *fixture,
              McpServerConfig  *config,
              GError          **error)
{
  McpSessionCallbacks callbacks = {
    on_notification, on_closed, fixture, NULL,
    fixture->take_method != NULL ? on_request : NULL, fixture->capabilities,
  };

  fixture->session = mcp_session_start (config, test_io_thread_get_context (fixture->io),
                                        &callbacks, NULL, error);
  if (fixture->session != NULL)
    fixture->pid = mcp_session_get_pid (fixture->session);
  return fixture->session;
}

/* Starts the fixture with the space-separated flags of the test's data. */
static McpSession *
start (Fixture       *fixture,
       gconstpointer  data)
{
  g_auto(GStrv) flags = g_strsplit (data != NULL ? data : "", " ", -1);
  g_autoptr(McpServerConfig) config = test_fixture_config ("fixture", NULL);
  g_autoptr(GError) error = NULL;
  McpSession *session;

  g_strfreev (config->args);
  config->args = g_strdupv (flags[0] != NULL && flags[0][0] != '\0' ? flags : (char *[]) { NULL });
  session = start_config (fixture, config, &error);
  g_assert_no_error (error);
  g_assert_nonnull (session);
  return session;
}

static void
teardown (Fixture       *fixture,
          gconstpointer  data)
{
  if (fixture->session != NULL)
    {
      mcp_session_shutdown (fixture->session, 200 * 1000, 200 * 1000);
      g_clear_pointer (&fixture->session, mcp_session_unref);
    }
  if (fixture->pid != 0)
    g_assert_true (test_process_group_gone (fixture->pid));
  test_assert_no_children ();

  g_clear_pointer (&fixture->io, test_io_thread_free);
  test_assert_open_fds (fixture->fds_before);
  g_async_queue_unref (fixture->notifications);
  g_async_queue_unref (fixture->closed);
  g_assert_cmpint (g_async_queue_length (fixture->requests), ==, 0);
  g_async_queue_unref (fixture->requests);
  json_decref (fixture->capabilities);
}

static json_t *
call_tool (McpSession  *session,
           const char  *tool,
           json_t      *arguments,
           gint64       timeout_ms,
           GError     **error)
{
  g_autoptr(json_t) params = json_pack ("{s:s, s:o}", "name", tool,
                                        "arguments", arguments ? arguments : json_object ());

  return mcp_session_call (session, "tools/call", params, timeout_ms, error);
}

static const char *
first_text (json_t *result)
{
  return mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text");
}

static json_t *
fixture_stats (McpSession *session)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "stats", NULL, 0, &error);

  g_assert_no_error (error);
  return json_incref (json_object_get (result, "structuredContent"));
}

static void
test_handshake (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(json_t) info = mcp_session_dup_server_info (session);
  g_autoptr(json_t) tools = mcp_session_dup_tools (session);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;

  g_assert_cmpstr (mcp_session_get_protocol_version (session), ==, MCP_PROTOCOL_VERSION_NEWEST);
  g_assert_cmpstr (mcp_json_get_string (info, "name"), ==, "mcp-pool-fixture");
  g_assert_nonnull (test_find_tool (tools, "echo"));
  g_assert_nonnull (test_find_tool (tools, "sleep"));

  result = call_tool (session, "echo", json_pack ("{s:s}", "message", "hi"), 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (first_text (result), ==, "Echo: hi");

  /* The server saw the handshake's last step before any call. */
  {
    g_autoptr(json_t) stats = fixture_stats (session);
    g_assert_true (json_is_true (json_object_get (stats, "initialized")));
  }
}

static void
test_version_older (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);

  g_assert_cmpstr (mcp_session_get_protocol_version (session), ==, "2024-11-05");
}

static void
test_version_unknown (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = test_fixture_config ("oldie", "--protocol-version", "1999-01-01", NULL);
  g_autoptr(GError) error = NULL;

  g_assert_null (start_config (fixture, config, &error));
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_VERSION);
  g_assert_nonnull (strstr (error->message, "1999-01-01"));
  g_assert_nonnull (strstr (error->message, MCP_PROTOCOL_VERSION_NEWEST));
}

static void
test_pagination (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(json_t) tools = mcp_session_dup_tools (session);
  g_autoptr(json_t) again = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_nonnull (test_find_tool (tools, "echo"));
  for (int i = 0; i < 10; i++)
    {
      g_autofree char *name = g_strdup_printf ("dummy_%d", i);
      g_assert_nonnull (test_find_tool (tools, name));
    }

  again = mcp_session_list_tools (session, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (json_array_size (again), ==, json_array_size (tools));
}

typedef struct {
  McpSession *session;
  int         index;
  char       *text;
  GError     *error;
} ConcurrentCall;

static gpointer
concurrent_call (gpointer data)
{
  ConcurrentCall *call = data;
  g_autoptr(json_t) result = NULL;

  /* Different lengths, so replies come back out of order; long enough,
   * even under valgrind, for all eight to be sent before the first ends. */
  result = call_tool (call->session, "sleep",
                      json_pack ("{s:i}", "ms", test_timeout_ms (400 - 40 * call->index)), 0, &call->error);
  if (result != NULL)
    call->text = g_strdup (first_text (result));
  return NULL;
}

/* Many requests in flight on one session, each matched to its own reply;
 * the overlap is proven by the server's own count, not by timing. */
static void
test_concurrent (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  ConcurrentCall calls[8];
  GThread *threads[8];
  g_autoptr(json_t) stats = NULL;

  for (int i = 0; i < 8; i++)
    {
      calls[i] = (ConcurrentCall) { session, i, NULL, NULL };
      threads[i] = g_thread_new ("caller", concurrent_call, &calls[i]);
    }
  for (int i = 0; i < 8; i++)
    {
      g_autofree char *expected = g_strdup_printf ("slept %u", test_timeout_ms (400 - 40 * i));

      g_thread_join (threads[i]);
      g_assert_no_error (calls[i].error);
      g_assert_cmpstr (calls[i].text, ==, expected);
      g_free (calls[i].text);
    }

  stats = fixture_stats (session);
  g_assert_cmpint (json_integer_value (json_object_get (stats, "max_inflight")), >=, 8);
  g_assert_cmpuint (mcp_session_get_in_flight (session), ==, 0);
}

/* A timed-out request is cancelled; its late reply must not be taken for
 * the reply of the next request. */
static void
test_timeout (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) late = NULL;
  g_autoptr(json_t) next = NULL;
  g_autoptr(json_t) hung = NULL;

  late = call_tool (session, "sleep", json_pack ("{s:i}", "ms", 300), 50, &error);
  g_assert_null (late);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "fixture"));
  g_clear_error (&error);

  /* The first reply arrives while this one waits. */
  next = call_tool (session, "sleep", json_pack ("{s:i}", "ms", 500), 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (first_text (next), ==, "slept 500");

  hung = call_tool (session, "hang", NULL, 100, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT);
  g_assert_true (mcp_session_is_alive (session));
  g_assert_cmpuint (mcp_session_get_in_flight (session), ==, 0);
}

static void
test_crash (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  g_autofree char *reason = NULL;

  result = call_tool (session, "crash", NULL, 0, &error);
  g_assert_null (result);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED);
  g_assert_false (mcp_session_is_alive (session));

  reason = g_async_queue_timeout_pop (fixture->closed, 5 * G_USEC_PER_SEC);
  g_assert_nonnull (reason);
  g_assert_nonnull (strstr (reason, "fixture"));

  /* Later calls fail at once with the same reason; nothing is replayed. */
  g_clear_error (&error);
  result = call_tool (session, "echo", json_pack ("{s:s}", "message", "x"), 0, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED);
}

static void
test_crash_after (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) first = call_tool (session, "echo", json_pack ("{s:s}", "message", "1"), 0, &error);
  g_autoptr(json_t) second = NULL;

  g_assert_no_error (error);
  second = call_tool (session, "echo", json_pack ("{s:s}", "message", "2"), 0, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED);
  g_assert_nonnull (strstr (error->message, "status 3"));
}

static void
test_noise (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "echo", json_pack ("{s:s}", "message", "through noise"),
                                        0, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (first_text (result), ==, "Echo: through noise");
}

/* 2 MB of stderr while the session works: stderr is drained all the time,
 * so the server never blocks on it, and only the tail is kept. */
static void
test_stderr_flood (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) wrote = call_tool (session, "stderr", json_pack ("{s:i}", "bytes", 2000000), 0, &error);
  g_autoptr(json_t) echo = NULL;
  g_autofree char *tail = NULL;

  g_assert_no_error (error);
  echo = call_tool (session, "echo", json_pack ("{s:s}", "message", "after flood"), 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (first_text (echo), ==, "Echo: after flood");

  tail = mcp_session_dup_stderr_tail (session, 0);
  g_assert_cmpuint (strlen (tail), <=, 64 * 1024);
  g_assert_cmpuint (strlen (tail), >, 0);
}

static void
test_huge_reply (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "huge", json_pack ("{s:i}", "bytes", 20 * 1024 * 1024),
                                        0, &error);
  const char *text;

  g_assert_no_error (error);
  text = first_text (result);
  g_assert_cmpuint (strlen (text), ==, 20 * 1024 * 1024);
  g_assert_true (text[0] == 'x' && text[20 * 1024 * 1024 - 1] == 'x');
}

/* A reply over the line cap is a protocol error that ends the session. */
static void
test_line_cap (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = test_fixture_config ("capped", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;

  config->max_line = 1024 * 1024;
  g_assert_nonnull (start_config (fixture, config, &error));
  result = call_tool (fixture->session, "huge", json_pack ("{s:i}", "bytes", 2 * 1024 * 1024), 0, &error);
  g_assert_null (result);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL);
  g_assert_nonnull (strstr (error->message, "1048576"));
  g_assert_false (mcp_session_is_alive (fixture->session));
}

/* The cap comes from the config's maxMessageBytes, within bounds. */
static void
test_line_cap_config (void)
{
  g_autoptr(json_t) good = json_pack ("{s:s, s:i}", "command", "x", "maxMessageBytes", 1048576);
  g_autoptr(json_t) bad = json_pack ("{s:s, s:i}", "command", "x", "maxMessageBytes", 5);
  g_autoptr(McpServerConfig) config = mcp_server_config_new_from_json ("capped", good, "test.json", NULL);
  g_autoptr(McpServerConfig) refused = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_nonnull (config);
  g_assert_cmpuint (config->max_line, ==, 1048576);
  refused = mcp_server_config_new_from_json ("capped", bad, "test.json", &error);
  g_assert_null (refused);
  g_assert_error (error, MCP_CONFIG_ERROR, MCP_CONFIG_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "maxMessageBytes"));
}

static void
test_fail_start (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = test_fixture_config ("broken", "--fail-start", NULL);
  g_autoptr(GError) error = NULL;

  g_assert_null (start_config (fixture, config, &error));
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_START);
  g_assert_nonnull (strstr (error->message, "broken"));
  g_assert_nonnull (strstr (error->message, "status 2"));
  /* The stderr tail tells the user why. */
  g_assert_nonnull (strstr (error->message, "failing to start as asked"));
}

static void
test_start_timeout (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = test_fixture_config ("mute", "--hang-start", NULL);
  g_autoptr(GError) error = NULL;

  config->start_timeout_ms = 300;
  g_assert_null (start_config (fixture, config, &error));
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_START);
  g_assert_nonnull (strstr (error->message, "did not finish starting"));
}

static void
test_spawn_failure (Fixture *fixture, gconstpointer data)
{
  g_autoptr(McpServerConfig) config = mcp_server_config_new ("ghost", "/nonexistent/mcp-server", NULL);
  g_autoptr(GError) error = NULL;

  g_assert_null (start_config (fixture, config, &error));
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_START);
  g_assert_nonnull (strstr (error->message, "ghost"));
  g_assert_nonnull (strstr (error->message, "/nonexistent/mcp-server"));
}

/* A server that ignores stdin EOF and SIGTERM still goes, by SIGKILL. */
static void
test_shutdown_stubborn (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);

  mcp_session_shutdown (session, 100 * 1000, 100 * 1000);
  g_assert_true (test_process_group_gone (fixture->pid));
  g_assert_false (mcp_session_is_alive (session));
}

/* An npx-style launcher: the grandchild goes with the group. */
static void
test_shutdown_grandchild (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(json_t) stats = fixture_stats (session);
  GPid grandchild = json_integer_value (json_object_get (stats, "grandchild_pid"));

  g_assert_cmpint (grandchild, >, 0);
  g_assert_false (test_process_gone (grandchild));
  mcp_session_shutdown (session, 200 * 1000, 200 * 1000);
  g_assert_true (test_process_gone (grandchild));
  g_assert_true (test_process_group_gone (fixture->pid));
}

static void
test_server_ping (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(json_t) stats = NULL;
  json_t *ping;
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  /* The fixture pings right after the handshake; its answer is in stats. */
  do
    {
      g_clear_pointer (&stats, json_decref);
      stats = fixture_stats (session);
      ping = json_object_get (stats, "client_ping");
    }
  while (json_is_null (ping) && g_get_monotonic_time () < deadline);

  g_assert_true (json_is_object (json_object_get (ping, "result")));
  g_assert_cmpuint (json_object_size (json_object_get (ping, "result")), ==, 0);
}

static void
test_server_request_unsupported (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "ask_client", json_pack ("{s:s}", "method", "roots/list"),
                                        0, &error);
  json_t *response;

  g_assert_no_error (error);
  response = json_object_get (json_object_get (result, "structuredContent"), "response");
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (response, "error"), "code")),
                   ==, MCP_JSONRPC_METHOD_NOT_FOUND);
}

/* Answers the first request the handler takes, from this thread. */
static gpointer
answer_roots (gpointer data)
{
  Fixture *fixture = data;
  McpSessionResponder *responder = g_async_queue_timeout_pop (fixture->requests,
                                                              10 * G_USEC_PER_SEC);

  g_assert_nonnull (responder);
  g_assert_false (g_cancellable_is_cancelled (mcp_session_responder_get_cancellable (responder)));
  mcp_session_responder_return_result (responder,
                                       json_pack ("{s:[{s:s}]}", "roots", "uri", "file:///srv"));
  return NULL;
}

static json_t *
ask_client (McpSession *session,
            const char *method)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "ask_client", json_pack ("{s:s}", "method", method),
                                        0, &error);

  g_assert_no_error (error);
  return json_incref (json_object_get (json_object_get (result, "structuredContent"), "response"));
}

/* Taken, and answered later from another thread, while the tools/call
 * that caused it is in flight. */
static void
test_server_request_answered (Fixture *fixture, gconstpointer data)
{
  McpSession *session;
  GThread *answerer;
  g_autoptr(json_t) response = NULL;

  fixture->take_method = "roots/list";
  session = start (fixture, data);
  answerer = g_thread_new ("answerer", answer_roots, fixture);
  response = ask_client (session, "roots/list");
  g_thread_join (answerer);
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (json_object_get (response, "result"),
                                                                          "roots"), 0), "uri"),
                   ==, "file:///srv");
  g_assert_null (json_object_get (response, "error"));
}

/* A handler that does not take a method leaves today's answer. */
static void
test_server_request_not_taken (Fixture *fixture, gconstpointer data)
{
  McpSession *session;
  g_autoptr(json_t) response = NULL;

  fixture->take_method = "roots/list";
  session = start (fixture, data);
  response = ask_client (session, "sampling/createMessage");
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (response, "error"), "code")),
                   ==, MCP_JSONRPC_METHOD_NOT_FOUND);
  g_assert_cmpint (g_async_queue_length (fixture->requests), ==, 0);
}

static void
on_async_reply (json_t       *result,
                const GError *error,
                gpointer      user_data)
{
  GAsyncQueue *replies = user_data;

  json_decref (result);
  g_async_queue_push (replies, g_strdup (error != NULL ? error->message : "result"));
}

/* The session ends while its handler holds a request: the handler hears
 * of it through the cancellable, and its late answer goes nowhere. */
static void
test_server_request_closed (Fixture *fixture, gconstpointer data)
{
  McpSession *session;
  g_autoptr(GAsyncQueue) replies = g_async_queue_new_full (g_free);
  g_autoptr(json_t) params = json_pack ("{s:s, s:{s:s}}", "name", "ask_client",
                                        "arguments", "method", "roots/list");
  g_autofree char *reply = NULL;
  McpSessionResponder *responder;
  GCancellable *cancellable;

  fixture->take_method = "roots/list";
  session = start (fixture, data);
  mcp_session_call_async (session, "tools/call", params, NULL, on_async_reply, replies);
  responder = g_async_queue_timeout_pop (fixture->requests, 10 * G_USEC_PER_SEC);
  g_assert_nonnull (responder);
  cancellable = mcp_session_responder_get_cancellable (responder);

  mcp_session_shutdown (session, 200 * 1000, 200 * 1000);
  g_assert_true (g_cancellable_is_cancelled (cancellable));
  reply = g_async_queue_timeout_pop (replies, 10 * G_USEC_PER_SEC);
  g_assert_nonnull (strstr (reply, "shut down"));
  /* Still answered exactly once; dropped, and the responder is freed. */
  mcp_session_responder_return_error (responder, MCP_JSONRPC_INTERNAL_ERROR, "too late");
}

static json_t *
elicit (McpSession *session)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "elicit", NULL, 0, &error);

  g_assert_no_error (error);
  return g_steal_pointer (&result);
}

/* No handler: nothing declared, and the server knows not to elicit. */
static void
test_capabilities_none (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(json_t) stats = fixture_stats (session);
  g_autoptr(json_t) result = elicit (session);

  g_assert_true (json_is_object (json_object_get (stats, "client_capabilities")));
  g_assert_cmpuint (json_object_size (json_object_get (stats, "client_capabilities")), ==, 0);
  g_assert_true (json_is_true (json_object_get (result, "isError")));
  g_assert_nonnull (strstr (first_text (result), "did not declare"));
}

static gpointer
decline_one (gpointer data)
{
  Fixture *fixture = data;
  McpSessionResponder *responder = g_async_queue_timeout_pop (fixture->requests,
                                                              10 * G_USEC_PER_SEC);
  json_t *params;

  g_assert_nonnull (responder);
  params = mcp_session_responder_get_params (responder);
  g_assert_cmpstr (mcp_json_get_string (params, "message"), ==, "Who are you?");
  g_assert_true (json_is_object (json_object_get (params, "requestedSchema")));
  mcp_session_responder_return_result (responder, json_pack ("{s:s}", "action", "decline"));
  return NULL;
}

/* A handler of elicitation declares it, and the server's request reaches it. */
static void
test_capabilities_elicitation (Fixture *fixture, gconstpointer data)
{
  McpSession *session;
  g_autoptr(json_t) stats = NULL;
  g_autoptr(json_t) result = NULL;
  GThread *answerer;

  fixture->take_method = "elicitation/create";
  fixture->capabilities = json_pack ("{s:{}}", "elicitation");
  session = start (fixture, data);
  stats = fixture_stats (session);
  g_assert_true (json_equal (json_object_get (stats, "client_capabilities"), fixture->capabilities));

  answerer = g_thread_new ("answerer", decline_one, fixture);
  result = elicit (session);
  g_thread_join (answerer);
  g_assert_false (json_is_true (json_object_get (result, "isError")));
  g_assert_cmpstr (first_text (result), ==, "{\"action\":\"decline\"}");
}

static void
on_progress (json_t   *params,
             gpointer  user_data)
{
  GPtrArray *seen = user_data;
  g_ptr_array_add (seen, GINT_TO_POINTER ((int) json_integer_value (json_object_get (params, "progress"))));
}

static void
test_progress (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GPtrArray) seen = g_ptr_array_new ();
  McpCallOptions options = { .progress = on_progress, .progress_data = seen };
  g_autoptr(json_t) params = json_pack ("{s:s, s:{s:i, s:i}}", "name", "progress",
                                        "arguments", "steps", 5, "delay_ms", 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = mcp_session_call_full (session, "tools/call", params, &options, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (first_text (result), ==, "done 5 steps");
  g_assert_cmpuint (seen->len, ==, 5);
  for (guint i = 0; i < 5; i++)
    g_assert_cmpint (GPOINTER_TO_INT (g_ptr_array_index (seen, i)), ==, i + 1);
  /* The caller's params were not changed. */
  g_assert_null (json_object_get (params, "_meta"));
}

static void
test_notifications (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  g_autofree char *method = NULL;

  /* --notify-before-init: one arrived before the handshake finished. */
  method = g_async_queue_timeout_pop (fixture->notifications, 5 * G_USEC_PER_SEC);
  g_assert_cmpstr (method, ==, "notifications/tools/list_changed");
  g_clear_pointer (&method, g_free);

  result = call_tool (session, "notify_list_changed", NULL, 0, &error);
  g_assert_no_error (error);
  method = g_async_queue_timeout_pop (fixture->notifications, 5 * G_USEC_PER_SEC);
  g_assert_cmpstr (method, ==, "notifications/tools/list_changed");
}

typedef struct {
  GCancellable *cancellable;
  McpSession   *session;
} CancelLater;

static gpointer
cancel_when_in_flight (gpointer data)
{
  CancelLater *later = data;
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  while (mcp_session_get_in_flight (later->session) == 0 && g_get_monotonic_time () < deadline)
    g_usleep (1000);
  g_cancellable_cancel (later->cancellable);
  return NULL;
}

static void
test_cancel (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  CancelLater later = { cancellable, session };
  McpCallOptions options = { .timeout_ms = 10000, .cancellable = cancellable };
  g_autoptr(json_t) params = json_pack ("{s:s, s:{}}", "name", "hang", "arguments");
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  GThread *canceller = g_thread_new ("canceller", cancel_when_in_flight, &later);

  result = mcp_session_call_full (session, "tools/call", params, &options, &error);
  g_thread_join (canceller);
  g_assert_null (result);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CANCELLED);
  g_assert_true (mcp_session_is_alive (session));
}

static void
test_remote_error (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) failed = call_tool (session, "fail", NULL, 0, &error);
  g_autoptr(json_t) tool_error = NULL;
  g_autoptr(GError) copy = NULL;
  json_t *remote;

  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_REMOTE);
  g_assert_nonnull (strstr (error->message, "-32603"));
  /* The server's error object comes with the error, and its copies. */
  copy = g_error_copy (error);
  g_clear_error (&error);
  remote = mcp_session_error_get_remote (copy);
  g_assert_cmpint (json_integer_value (json_object_get (remote, "code")), ==, -32603);
  g_assert_cmpstr (mcp_json_get_string (remote, "message"), ==, "fixture failure as asked");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (remote, "data"), "asked"), ==, "fail");
  g_set_error_literal (&error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED, "closed");
  g_assert_null (mcp_session_error_get_remote (error));
  g_clear_error (&error);

  tool_error = call_tool (session, "tool_error", NULL, 0, &error);
  g_assert_no_error (error);
  g_assert_true (json_is_true (json_object_get (tool_error, "isError")));
  g_assert_true (mcp_session_is_alive (session));
}

/* A reply that Jansson cannot hold ends its call with an error at once,
 * not with a timeout, and the session goes on. */
static void
test_nul_name (Fixture *fixture, gconstpointer data)
{
  McpSession *session = start (fixture, data);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call_tool (session, "nul_name", NULL, 0, &error);
  g_autoptr(json_t) stats = NULL;

  g_assert_null (result);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_REMOTE);
  g_assert_nonnull (strstr (error->message, "NUL"));
  stats = fixture_stats (session);
  g_assert_true (mcp_session_is_alive (session));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  json_object_seed (0);

#define ADD(path, flags, func) \
  g_test_add (path, Fixture, flags, setup, func, teardown)

  ADD ("/session/handshake", NULL, test_handshake);
  ADD ("/session/version/older", "--protocol-version 2024-11-05", test_version_older);
  ADD ("/session/version/unknown", NULL, test_version_unknown);
  ADD ("/session/pagination", "--page-size 3 --extra-tools 10", test_pagination);
  ADD ("/session/concurrent", NULL, test_concurrent);
  ADD ("/session/timeout", NULL, test_timeout);
  ADD ("/session/crash", NULL, test_crash);
  ADD ("/session/crash-after", "--crash-after 2", test_crash_after);
  ADD ("/session/noise", "--noise", test_noise);
  ADD ("/session/stderr-flood", "--stderr-flood 2000000", test_stderr_flood);
  ADD ("/session/huge-reply", NULL, test_huge_reply);
  ADD ("/session/line-cap", NULL, test_line_cap);
  g_test_add_func ("/session/line-cap-from-config", test_line_cap_config);
  ADD ("/session/start/fails", NULL, test_fail_start);
  ADD ("/session/start/timeout", NULL, test_start_timeout);
  ADD ("/session/start/no-such-program", NULL, test_spawn_failure);
  ADD ("/session/shutdown/stubborn", "--ignore-sigterm --ignore-eof", test_shutdown_stubborn);
  ADD ("/session/shutdown/grandchild", "--grandchild", test_shutdown_grandchild);
  ADD ("/session/server-ping", "--ping-client", test_server_ping);
  ADD ("/session/server-request-unsupported", NULL, test_server_request_unsupported);
  ADD ("/session/server-request/answered", NULL, test_server_request_answered);
  ADD ("/session/server-request/not-taken", NULL, test_server_request_not_taken);
  ADD ("/session/server-request/closed", NULL, test_server_request_closed);
  ADD ("/session/capabilities/none", NULL, test_capabilities_none);
  ADD ("/session/capabilities/elicitation", NULL, test_capabilities_elicitation);
  ADD ("/session/progress", NULL, test_progress);
  ADD ("/session/notifications", "--notify-before-init", test_notifications);
  ADD ("/session/cancel", NULL, test_cancel);
  ADD ("/session/remote-error", NULL, test_remote_error);
  ADD ("/session/nul-name", NULL, test_nul_name);

  return g_test_run ();
}
