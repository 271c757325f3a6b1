/* test-interop.c — sessions against real, unmodified MCP servers from the
 * npm registry (pinned in tests/interop/package-lock.json). */
#include "config.h"

#include <string.h>
#include <sys/prctl.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "common/mcp-jsonrpc.h"
#include "pool/mcp-pool.h"
#include "common/mcp-protocol.h"
#include "pool/mcp-session.h"
#include "test-client.h"
#include "test-io-thread.h"
#include "test-procs.h"
#include "test-sdk-client.h"

static void
test_everything (void)
{
  g_autofree char *entry = test_interop_file ("@modelcontextprotocol/server-everything/dist/index.js");
  g_autoptr(TestIoThread) io = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(json_t) info = NULL;
  g_autoptr(json_t) params = NULL;
  g_autoptr(json_t) result = NULL;
  g_autoptr(GError) error = NULL;
  json_t *tool;
  size_t index;
  GPid pid;

  if (entry == NULL)
    return;

  io = test_io_thread_new ();
  config = mcp_server_config_new ("everything", "node", (const char *[]) { entry, "stdio", NULL });
  session = mcp_session_start (config, test_io_thread_get_context (io), NULL, NULL, &error);
  g_assert_no_error (error);
  pid = mcp_session_get_pid (session);

  /* The server announces list_changed before and after the handshake;
   * the session must have tolerated it. */
  g_assert_cmpstr (mcp_session_get_protocol_version (session), ==, MCP_PROTOCOL_VERSION_NEWEST);
  info = mcp_session_dup_server_info (session);
  g_assert_cmpstr (mcp_json_get_string (info, "name"), ==, "mcp-servers/everything");

  tools = mcp_session_dup_tools (session);
  g_assert_cmpuint (json_array_size (tools), >=, 5);
  g_assert_nonnull (test_find_tool (tools, "echo"));
  g_assert_nonnull (test_find_tool (tools, "get-sum"));
  json_array_foreach (tools, index, tool)
    g_assert_true (json_is_object (json_object_get (tool, "inputSchema")));

  params = json_pack ("{s:s, s:{s:s}}", "name", "echo", "arguments", "message", "hello pool");
  result = mcp_session_call (session, "tools/call", params, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text"),
                   ==, "Echo: hello pool");

  /* Observed: with a live timer it ignores stdin EOF; the group still goes. */
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_assert_true (test_process_group_gone (pid));
  test_assert_no_children ();
}

static void
queue_notification (McpSession *session, const char *method, json_t *params, gpointer user_data)
{
  g_async_queue_push (user_data, g_strdup (method));
}

/* Others (the subscription's acknowledgment) may come first. */
static gboolean
wait_notification (GAsyncQueue *notifications,
                   const char  *wanted)
{
  gint64 deadline = g_get_monotonic_time () + test_timeout_ms (10000) * G_TIME_SPAN_MILLISECOND;

  for (;;)
    {
      g_autofree char *method = g_async_queue_timeout_pop (notifications,
                                                           MAX (0, deadline - g_get_monotonic_time ()));
      if (method == NULL || g_str_equal (method, wanted))
        return method != NULL;
    }
}

static json_t *
call_tool (McpSession *session, json_t *params)
{
  g_autoptr(json_t) owned = params;
  g_autoptr(GError) error = NULL;
  json_t *result = mcp_session_call (session, "tools/call", owned, 0, &error);

  g_assert_no_error (error);
  return result;
}

/* Answers elicitation like a user: with the name @user_data, or a
 * decline when it is NULL. */
static gboolean
answer_name (McpSession          *session,
             const char          *method,
             json_t              *params,
             McpSessionResponder *responder,
             gpointer             user_data)
{
  const char *name = user_data;

  if (g_strcmp0 (method, "elicitation/create") != 0)
    return FALSE;
  g_assert_cmpstr (mcp_json_get_string (params, "message"), ==, "What is your name?");
  mcp_session_responder_return_result (responder, name != NULL
                                       ? json_pack ("{s:s, s:{s:s}}", "action", "accept", "content", "name", name)
                                       : json_pack ("{s:s}", "action", "decline"));
  return TRUE;
}

/* tests/interop/sdk2-server.mjs started as a 2026-07-28 session. */
static McpSession *
start_sdk2_server (TestIoThread        *io,
                   McpSessionCallbacks *callbacks)
{
  g_autofree char *script = g_test_build_filename (G_TEST_DIST, "interop", "sdk2-server.mjs", NULL);
  const char *modules = g_getenv ("MCP_POOL_NODE_MODULES");
  g_autoptr(McpServerConfig) config = mcp_server_config_new ("sdk2", "node", (const char *[]) { script, NULL });
  g_autoptr(GError) error = NULL;
  McpSession *session;

  if (modules != NULL)
    {
      g_strfreev (config->env);
      config->env = g_new0 (char *, 2);
      config->env[0] = g_strdup_printf ("MCP_POOL_NODE_MODULES=%s", modules);
    }
  session = mcp_session_start (config, test_io_thread_get_context (io), callbacks, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (mcp_session_get_protocol_version (session), ==, MCP_PROTOCOL_VERSION_STATELESS);
  return session;
}

/* Whether nothing but what the stdio server sent before its last reply
 * is queued: @wanted is not among it. */
static gboolean
none_queued (GAsyncQueue *notifications,
             const char  *wanted)
{
  char *method;
  gboolean seen = FALSE;

  while ((method = g_async_queue_try_pop (notifications)) != NULL)
    {
      seen = seen || g_str_equal (method, wanted);
      g_free (method);
    }
  return !seen;
}

static json_t *
session_request (McpSession *session,
                 const char *method,
                 json_t     *params)
{
  g_autoptr(json_t) owned = params;
  g_autoptr(GError) error = NULL;
  json_t *result = mcp_session_call (session, method, owned, 0, &error);

  g_assert_no_error (error);
  return result;
}

/* A 2026-07-28 server has no resources/subscribe: the session makes it a
 * subscriptions/listen of the URI, answered once the server acknowledges
 * it, whose updates reach on_notification; resources/unsubscribe cancels
 * it, and updates stop.  The server writes its notification before the
 * tool's reply, on one pipe, so none is left to come after the reply. */
static void
check_sdk2_subscription (McpSession  *session,
                         GAsyncQueue *notifications)
{
  g_autoptr(json_t) subscribed = session_request (session, "resources/subscribe",
                                                  json_pack ("{s:s}", "uri", "note://pad"));
  g_autoptr(json_t) written = call_tool (session, json_pack ("{s:s, s:{s:s}}", "name", "write_note",
                                                             "arguments", "text", "first"));
  g_autoptr(json_t) unsubscribed = NULL;
  g_autoptr(json_t) rewritten = NULL;

  g_assert_cmpuint (json_object_size (subscribed), ==, 0);
  g_assert_true (wait_notification (notifications, "notifications/resources/updated"));
  unsubscribed = session_request (session, "resources/unsubscribe", json_pack ("{s:s}", "uri", "note://pad"));
  g_assert_cmpuint (json_object_size (unsubscribed), ==, 0);
  rewritten = call_tool (session, json_pack ("{s:s, s:{s:s}}", "name", "write_note", "arguments", "text", "second"));
  g_assert_true (none_queued (notifications, "notifications/resources/updated"));
}

/* A 2026-07-28 server has no logging/setLevel either: the session's level
 * goes in each request's _meta, and the server logs what it lets through. */
static void
check_sdk2_log_level (McpSession  *session,
                      GAsyncQueue *notifications)
{
  g_autoptr(json_t) logged = NULL;
  g_autoptr(json_t) quiet = NULL;

  g_assert_true (mcp_session_set_log_level (session, "info"));
  logged = call_tool (session, json_pack ("{s:s, s:{s:s}}", "name", "log", "arguments", "message", "seen"));
  g_assert_true (wait_notification (notifications, "notifications/message"));
  g_assert_true (mcp_session_set_log_level (session, "error"));
  quiet = call_tool (session, json_pack ("{s:s, s:{s:s}}", "name", "log", "arguments", "message", "unseen"));
  g_assert_true (none_queued (notifications, "notifications/message"));
}

/* A server on the SDK v2 (tests/interop/sdk2-server.mjs) is kept as a
 * 2026-07-28 session: no initialize, every request carrying mcp-pool's
 * envelope, and its list changes reaching the session through the
 * subscriptions/listen it opened; resource subscriptions and the log
 * level as such a server takes them. */
static void
test_sdk2_server (void)
{
  g_autofree char *sdk = test_interop_file ("@modelcontextprotocol/server/package.json");
  g_autoptr(GAsyncQueue) notifications = g_async_queue_new_full (g_free);
  g_autoptr(TestIoThread) io = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) info = NULL;
  g_autoptr(json_t) echo = NULL;
  g_autoptr(json_t) envelope = NULL;
  g_autoptr(json_t) added = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(GError) error = NULL;
  McpSessionCallbacks callbacks = { .on_notification = queue_notification, .user_data = notifications };
  json_t *seen;
  GPid pid;

  if (sdk == NULL)
    return;
  io = test_io_thread_new ();
  session = start_sdk2_server (io, &callbacks);
  pid = mcp_session_get_pid (session);
  info = mcp_session_dup_server_info (session);
  g_assert_cmpstr (mcp_json_get_string (info, "name"), ==, "sdk2-server");

  echo = call_tool (session, json_pack ("{s:s, s:{s:s}}", "name", "echo", "arguments", "message", "warm"));
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (echo, "content"), 0), "text"),
                   ==, "Echo: warm");
  envelope = call_tool (session, json_pack ("{s:s}", "name", "envelope"));
  seen = json_object_get (envelope, "structuredContent");
  g_assert_cmpstr (mcp_json_get_string (seen, MCP_META_PROTOCOL_VERSION), ==, MCP_PROTOCOL_VERSION_STATELESS);
  g_assert_cmpstr (mcp_json_get_string (json_object_get (seen, MCP_META_CLIENT_INFO), "name"), ==, PACKAGE_NAME);

  added = call_tool (session, json_pack ("{s:s, s:{s:s}}", "name", "add_tool", "arguments", "name", "late"));
  g_assert_true (wait_notification (notifications, "notifications/tools/list_changed"));
  tools = mcp_session_list_tools (session, 0, &error);
  g_assert_no_error (error);
  g_assert_nonnull (test_find_tool (tools, "late"));

  check_sdk2_subscription (session, notifications);
  check_sdk2_log_level (session, notifications);

  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_assert_true (test_process_group_gone (pid));
  test_assert_no_children ();
}

/* A 2026-07-28 server's InputRequiredResult, for a caller that is no
 * 2026-07-28 client, is asked through on_request as a 2025 server's
 * request would be, and the call retried with the answer: the caller
 * sees the final result.  A server that asks again and again is stopped
 * after a bound, and a caller that is a 2026-07-28 client (its
 * capabilities in the call's _meta) gets the InputRequiredResult itself. */
static void
test_sdk2_input (void)
{
  g_autofree char *sdk = test_interop_file ("@modelcontextprotocol/server/package.json");
  g_autoptr(TestIoThread) io = NULL;
  g_autoptr(json_t) asking = json_pack ("{s:{}}", "elicitation");
  McpSessionCallbacks callbacks = { .on_request = answer_name, .user_data = (gpointer) "Ada",
                                    .client_capabilities = asking };
  McpSessionCallbacks declining = { .on_request = answer_name, .client_capabilities = asking };
  g_autoptr(McpSession) session = NULL;
  g_autoptr(McpSession) declined = NULL;
  g_autoptr(json_t) params = json_pack ("{s:s}", "name", "ask_name");
  g_autoptr(json_t) greeted = NULL;
  g_autoptr(json_t) passed = NULL;
  g_autoptr(json_t) none = NULL;
  g_autoptr(json_t) client_meta = json_pack ("{s:{s:{}}}", MCP_META_CLIENT_CAPABILITIES, "elicitation");
  g_autoptr(GError) error = NULL;
  McpCallOptions as_modern_client = { .meta = client_meta };
  GPid pids[2];

  if (sdk == NULL)
    return;
  io = test_io_thread_new ();
  session = start_sdk2_server (io, &callbacks);
  pids[0] = mcp_session_get_pid (session);
  greeted = call_tool (session, json_incref (params));
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (greeted, "content"), 0), "text"),
                   ==, "Hello, Ada!");
  g_assert_null (json_object_get (greeted, "inputRequests"));

  passed = mcp_session_call_full (session, "tools/call", params, &as_modern_client, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (mcp_json_get_string (passed, "resultType"), ==, "input_required");
  g_assert_nonnull (json_object_get (json_object_get (passed, "inputRequests"), "name"));

  /* Declined, the server asks again: at most INPUT_ROUNDS_MAX times. */
  declined = start_sdk2_server (io, &declining);
  pids[1] = mcp_session_get_pid (declined);
  none = mcp_session_call (declined, "tools/call", params, 0, &error);
  g_assert_null (none);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL);
  g_assert_nonnull (strstr (error->message, "asked for input 8 times"));
  g_assert_true (mcp_session_is_alive (declined));

  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  mcp_session_shutdown (declined, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_assert_true (test_process_group_gone (pids[0]));
  g_assert_true (test_process_group_gone (pids[1]));
  test_assert_no_children ();
}

/* What a 2025 client answers serve's elicitation with: a user's name. */
static json_t *
answer_name_as_client (const char *method,
                       json_t     *params,
                       gpointer    user_data)
{
  if (!g_str_equal (method, "elicitation/create"))
    return NULL;
  return json_pack ("{s:s, s:{s:s}}", "action", "accept", "content", "name", "Bob");
}

static json_t *
serve_call_tool (TestClient *client,
                 const char *name,
                 json_t     *arguments)
{
  return test_client_result (client, "tools/call", json_pack ("{s:s, s:o}", "name", name, "arguments", arguments));
}

/* A 2025 client of serve, which answers elicitation, reaches a 2026-07-28
 * server that asks by InputRequiredResult: the question comes to the
 * client as elicitation/create and its answer is the server's retry,
 * through the proxy, the gateway's call_tool and run_python's code. */
static void
test_sdk2_input_2025_client (void)
{
  g_autofree char *sdk = test_interop_file ("@modelcontextprotocol/server/package.json");
  g_autofree char *scratch = NULL;
  g_autofree char *config_path = NULL;
  g_autofree char *script = g_test_build_filename (G_TEST_DIST, "interop", "sdk2-server.mjs", NULL);
  const char *modules = g_getenv ("MCP_POOL_NODE_MODULES");
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(json_t) config = NULL;
  g_autoptr(json_t) initialized = NULL;
  g_autoptr(json_t) proxied = NULL;
  g_autoptr(json_t) gateway = NULL;
  g_autoptr(json_t) code = NULL;
  g_auto(GStrv) argv = NULL;
  TestClient *client;

  if (sdk == NULL)
    return;
  scratch = g_dir_make_tmp ("mcp-pool-interop-XXXXXX", NULL);
  config_path = g_build_filename (scratch, "servers.json", NULL);
  config = json_pack ("{s:{s:{s:s, s:[s], s:{s:s}}}}", "mcpServers", "sdk2", "command", "node", "args", script,
                      "env", "MCP_POOL_NODE_MODULES", modules != NULL ? modules : "");
  g_assert_cmpint (json_dump_file (config, config_path, 0), ==, 0);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_subprocess_launcher_setenv (launcher, "HOME", scratch, TRUE);
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_CONFIG");
  g_subprocess_launcher_set_cwd (launcher, scratch);
  argv = test_wrap_argv ((const char *[]) { test_mcp_pool_path (), "serve", "--config", config_path,
                                            "--expose", "proxy,gateway,code", NULL });
  client = test_client_new (launcher, (const char * const *) argv);
  client->on_request = answer_name_as_client;

  initialized = test_client_result (client, "initialize",
                                    json_pack ("{s:s, s:{s:{}}, s:{s:s, s:s}}", "protocolVersion", "2025-11-25",
                                               "capabilities", "elicitation", "clientInfo", "name", "old", "version", "1"));
  g_assert_cmpstr (mcp_json_get_string (initialized, "protocolVersion"), ==, "2025-11-25");
  test_client_notify (client, "notifications/initialized", NULL);

  proxied = serve_call_tool (client, "sdk2__ask_name", json_object ());
  g_assert_cmpstr (test_result_text (proxied), ==, "Hello, Bob!");
  g_assert_cmpstr (mcp_json_get_string (proxied, "resultType"), !=, "input_required");
  gateway = serve_call_tool (client, "call_tool",
                             json_pack ("{s:s, s:s, s:{}}", "server", "sdk2", "tool", "ask_name", "arguments"));
  g_assert_cmpstr (test_result_text (gateway), ==, "Hello, Bob!");
  g_assert_cmpuint (client->requests->len, ==, 2);
  if (!test_sandbox_skipped (NULL))
    {
      code = serve_call_tool (client, "run_python",
                              json_pack ("{s:s, s:[s]}", "code",
                                         "print((await mcp_sdk2.ask_name())['content'][0]['text'])\n",
                                         "servers", "sdk2"));
      if (!test_sandbox_skipped (code))
        {
          g_assert_cmpstr (test_result_text (code), ==, "Hello, Bob!");
          g_assert_cmpuint (client->requests->len, ==, 3);
        }
    }

  test_client_close_input (client);
  test_client_wait_exit (client);
  test_client_free (client);
  test_assert_no_children ();
  g_assert_cmpint (g_remove (config_path), ==, 0);
  g_assert_cmpint (g_rmdir (scratch), ==, 0);
}

/* A pool with the three real servers, as a user would configure them. */
typedef struct {
  TestIoThread *io;
  McpPool      *pool;
  char         *scratch;
  char         *everything;
  char         *filesystem;
  char         *memory;
} PoolFixture;

static void
pool_setup (PoolFixture *fixture, gconstpointer data)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  McpServerConfig *memory;

  fixture->everything = test_interop_file ("@modelcontextprotocol/server-everything/dist/index.js");
  fixture->filesystem = test_interop_file ("@modelcontextprotocol/server-filesystem/dist/index.js");
  fixture->memory = test_interop_file ("@modelcontextprotocol/server-memory/dist/index.js");
  if (fixture->everything == NULL || fixture->filesystem == NULL || fixture->memory == NULL)
    return;

  fixture->scratch = g_dir_make_tmp ("mcp-pool-interop-XXXXXX", NULL);
  fixture->io = test_io_thread_new ();
  fixture->pool = mcp_pool_new (test_io_thread_get_context (fixture->io), NULL, NULL);

  g_ptr_array_add (configs, mcp_server_config_new ("everything", "node",
                                                   (const char *[]) { fixture->everything, "stdio", NULL }));
  g_ptr_array_add (configs, mcp_server_config_new ("files", "node",
                                                   (const char *[]) { fixture->filesystem, fixture->scratch, NULL }));
  memory = mcp_server_config_new ("memory", "node", (const char *[]) { fixture->memory, NULL });
  g_strfreev (memory->env);
  memory->env = g_new0 (char *, 2);
  memory->env[0] = g_strdup_printf ("MEMORY_FILE_PATH=%s/memory.jsonl", fixture->scratch);
  g_ptr_array_add (configs, memory);
  mcp_pool_set_servers (fixture->pool, configs);
}

static void
pool_teardown (PoolFixture *fixture, gconstpointer data)
{
  if (fixture->pool != NULL)
    {
      /* The budget of a client that closes stdin, then SIGTERMs. */
      mcp_pool_shutdown (fixture->pool, G_USEC_PER_SEC, G_USEC_PER_SEC);
      mcp_pool_free (fixture->pool);
      test_assert_no_children ();
      test_io_thread_free (fixture->io);
      g_autofree char *command = g_strdup_printf ("rm -rf '%s'", fixture->scratch);
      g_assert_true (g_spawn_command_line_sync (command, NULL, NULL, NULL, NULL));
    }
  g_free (fixture->scratch);
  g_free (fixture->everything);
  g_free (fixture->filesystem);
  g_free (fixture->memory);
}

static json_t *
pool_call (PoolFixture *fixture, const char *server, const char *tool, json_t *arguments)
{
  g_autoptr(GError) error = NULL;
  json_t *result = mcp_pool_call_tool (fixture->pool, server, tool, arguments, NULL, &error);

  json_decref (arguments);
  g_assert_no_error (error);
  g_assert_false (json_is_true (json_object_get (result, "isError")));
  return result;
}

static const char *
text_of (json_t *result)
{
  return mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text");
}

static void
count_progress (json_t *params, gpointer user_data)
{
  g_atomic_int_inc ((int *) user_data);
}

static void
test_pool_everything (PoolFixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) sum = NULL;
  g_autoptr(json_t) echo = NULL;
  g_autoptr(json_t) long_run = NULL;
  g_autoptr(json_t) arguments = json_pack ("{s:i, s:i}", "duration", 1, "steps", 3);
  g_autoptr(GError) error = NULL;
  int progress = 0;
  McpCallOptions options = { .progress = count_progress, .progress_data = &progress };

  if (fixture->pool == NULL)
    return;
  sum = pool_call (fixture, "everything", "get-sum", json_pack ("{s:i, s:i}", "a", 2, "b", 3));
  g_assert_nonnull (strstr (text_of (sum), "5"));
  echo = pool_call (fixture, "everything", "echo", json_pack ("{s:s}", "message", "warm"));
  g_assert_cmpstr (text_of (echo), ==, "Echo: warm");

  /* Progress from a real server reaches the caller. */
  long_run = mcp_pool_call_tool (fixture->pool, "everything", "trigger-long-running-operation",
                                 arguments, &options, &error);
  g_assert_no_error (error);
  g_assert_true (json_is_array (json_object_get (long_run, "content")));
  g_assert_cmpint (g_atomic_int_get (&progress), >=, 1);
}

static void
test_pool_filesystem (PoolFixture *fixture, gconstpointer data)
{
  g_autofree char *path = NULL;
  g_autoptr(json_t) written = NULL;
  g_autoptr(json_t) read = NULL;
  g_autoptr(json_t) listing = NULL;

  if (fixture->pool == NULL)
    return;
  path = g_build_filename (fixture->scratch, "note.txt", NULL);
  written = pool_call (fixture, "files", "write_file",
                       json_pack ("{s:s, s:s}", "path", path, "content", "kept warm"));
  read = pool_call (fixture, "files", "read_text_file", json_pack ("{s:s}", "path", path));
  g_assert_cmpstr (text_of (read), ==, "kept warm");
  listing = pool_call (fixture, "files", "list_directory", json_pack ("{s:s}", "path", fixture->scratch));
  g_assert_nonnull (strstr (text_of (listing), "note.txt"));
}

static void
test_pool_memory (PoolFixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) created = NULL;
  g_autoptr(json_t) graph = NULL;

  if (fixture->pool == NULL)
    return;
  created = pool_call (fixture, "memory", "create_entities",
                       json_pack ("{s:[{s:s, s:s, s:[s]}]}", "entities", "name", "mcp-pool",
                                  "entityType", "project", "observations", "keeps servers warm"));
  /* The same warm session remembers it. */
  graph = pool_call (fixture, "memory", "read_graph", json_object ());
  g_assert_nonnull (strstr (text_of (graph), "keeps servers warm"));
}

/* `mcp-pool serve` as IDEs run it: launched over stdio by the official
 * TypeScript SDK client (tests/interop/sdk-client.mjs), through every
 * exposure, with the three real servers behind it. */
static void
test_sdk_client (void)
{
  test_sdk_client_run (NULL, FALSE, NULL);
  test_assert_no_children ();
}

/* The SDK v2 client, of the stateless revision, over stdio (probing) and
 * HTTP (tests/interop/sdk2-client.mjs); nothing is left behind, the
 * probe's own serve included. */
static void
test_sdk2_client (void)
{
  test_sdk2_client_run (NULL, FALSE, NULL);
  test_assert_no_children ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  json_object_seed (0);
  /* Whatever mcp-pool leaves behind comes to this process, so a leaked
   * server shows as a child. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  g_test_add_func ("/interop/server-everything/handshake-tools-echo", test_everything);
  g_test_add_func ("/interop/session/sdk2-server", test_sdk2_server);
  g_test_add_func ("/interop/session/sdk2-input", test_sdk2_input);
  g_test_add_func ("/interop/serve/sdk2-input-2025-client", test_sdk2_input_2025_client);
  g_test_add ("/interop/pool/everything", PoolFixture, NULL, pool_setup, test_pool_everything, pool_teardown);
  g_test_add ("/interop/pool/filesystem", PoolFixture, NULL, pool_setup, test_pool_filesystem, pool_teardown);
  g_test_add ("/interop/pool/memory", PoolFixture, NULL, pool_setup, test_pool_memory, pool_teardown);
  g_test_add_func ("/interop/serve/sdk-client", test_sdk_client);
  g_test_add_func ("/interop/serve/sdk-http-client", test_sdk_http_client_run);
  g_test_add_func ("/interop/serve/sdk2-client", test_sdk2_client);
  return g_test_run ();
}
