/* test-serve.c — `mcp-pool serve` driven over its stdin and stdout, the way
 * an MCP client drives it, with fixture servers in the pool behind it. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <gio/gunixoutputstream.h>
#include <glib/gstdio.h>

#include "test-client.h"
#include "test-procs.h"
#include "test-wait.h"

#define GONE_TIMEOUT_MS (10 * 1000)  /* scaled by test_wait_for() */
/* What a run that ended its client's Python session adds to its error. */
#define SESSION_ENDED "; the Python session ended with it (its variables are gone; the next call starts a new one)"
#define NULL_ID         TEST_CLIENT_NULL_ID

static char *scratch_home;

/* A config file with the fixture under each name; @servers alternates
 * names and JSON arrays of fixture flags, NULL-terminated. */
static char *
write_config (const char * const *servers)
{
  g_autoptr(json_t) entries = json_object ();
  g_autoptr(json_t) config = json_pack ("{s:O}", "mcpServers", entries);
  g_autofree char *path = g_build_filename (scratch_home, "servers.json", NULL);
  g_autofree char *fixture = g_canonicalize_filename (test_fixture_path (), NULL);

  for (guint i = 0; servers[i] != NULL; i += 2)
    json_object_set_new (entries, servers[i],
                         json_pack ("{s:s, s:o}", "command", fixture,
                                    "args", json_loads (servers[i + 1], 0, NULL)));
  g_assert_cmpint (json_dump_file (config, path, JSON_INDENT (2)), ==, 0);
  return g_steal_pointer (&path);
}

/* serve with @option @option_value (@option may be NULL), and
 * @variable=@value (may be NULL) in mcp-pool's environment; over HTTP
 * (`--listen 127.0.0.1:0`) if @http. */
static TestClient *
serve_launch_over (gboolean    http,
                   const char *config,
                   const char *option,
                   const char *option_value,
                   const char *variable,
                   const char *value)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) wrapped = NULL;

  g_ptr_array_add (argv, (char *) test_mcp_pool_path ());
  g_ptr_array_add (argv, "serve");
  g_ptr_array_add (argv, "--config");
  g_ptr_array_add (argv, (char *) config);
  if (http)
    {
      g_ptr_array_add (argv, "--listen");
      g_ptr_array_add (argv, "127.0.0.1:0");
    }
  if (option != NULL)
    {
      g_ptr_array_add (argv, (char *) option);
      g_ptr_array_add (argv, (char *) option_value);
    }
  g_ptr_array_add (argv, NULL);

  /* A home and a working folder of its own, so no real config leaks in. */
  g_subprocess_launcher_setenv (launcher, "HOME", scratch_home, TRUE);
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_CONFIG");
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_EXPOSE");
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_TIMEOUT");
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_LISTEN");
  g_subprocess_launcher_set_cwd (launcher, scratch_home);
  if (variable != NULL)
    g_subprocess_launcher_setenv (launcher, variable, value, TRUE);
  wrapped = test_wrap_argv ((const char * const *) argv->pdata);
  return http ? test_client_new_http (launcher, (const char * const *) wrapped)
              : test_client_new (launcher, (const char * const *) wrapped);
}

static TestClient *
serve_launch (const char *config,
              const char *option,
              const char *option_value,
              const char *variable,
              const char *value)
{
  return serve_launch_over (FALSE, config, option, option_value, variable, value);
}

/* @expose may be NULL: serve's default. */
static TestClient *
serve_new_with (const char *config,
                const char *expose,
                const char *variable,
                const char *value)
{
  return serve_launch (config, expose != NULL ? "--expose" : NULL, expose, variable, value);
}

static TestClient *
serve_new (const char *config,
           const char *expose)
{
  return serve_new_with (config, expose, NULL, NULL);
}

/* initialize with id 0, as clients do; the result. */
/* Takes @capabilities (NULL: none). */
static json_t *
serve_initialize_with (TestClient *client,
                       const char *version,
                       json_t     *capabilities)
{
  g_autoptr(json_t) reply = NULL;

  test_client_send (client, json_pack ("{s:s, s:i, s:s, s:{s:s, s:o, s:{s:s, s:s}}}",
                                       "jsonrpc", "2.0", "id", 0, "method", "initialize", "params",
                                       "protocolVersion", version, "capabilities",
                                       capabilities != NULL ? capabilities : json_object (),
                                       "clientInfo", "name", "test-serve", "version", "1"));
  reply = test_client_read_reply (client, 0);
  g_assert_true (json_is_object (json_object_get (reply, "result")));
  return json_incref (json_object_get (reply, "result"));
}

static json_t *
serve_initialize (TestClient *client,
                  const char *version)
{
  return serve_initialize_with (client, version, NULL);
}

static void
serve_ping (TestClient *client)
{
  g_autoptr(json_t) result = test_client_result (client, "ping", NULL);

  g_assert_cmpuint (json_object_size (result), ==, 0);
}

/* Two round trips: whatever mcp-pool's main context had queued before the
 * first is written before the second reply. */
static void
serve_settle (TestClient *client)
{
  serve_ping (client);
  serve_ping (client);
}

/* Closing stdin is a normal end, with status 0. */
static void
serve_finish (TestClient *client)
{
  test_client_close_input (client);
  test_client_wait_exit (client);
  g_assert_true (g_subprocess_get_if_exited (client->process));
  g_assert_cmpint (g_subprocess_get_exit_status (client->process), ==, 0);
}

/* Tools */

/* Takes @arguments. */
static json_t *
call_tool (TestClient *client,
           const char *name,
           json_t     *arguments)
{
  return test_client_result (client, "tools/call",
                             json_pack ("{s:s, s:o}", "name", name, "arguments", arguments));
}

/* tools/call params for the gateway's call_tool; takes @arguments.
 * @timeout in seconds, 0 for the default. */
static json_t *
gateway_call_params (const char *server,
                     const char *tool,
                     json_t     *arguments,
                     double      timeout)
{
  return json_pack ("{s:s, s:{s:s, s:s, s:o, s:o*}}", "name", "call_tool", "arguments",
                    "server", server, "tool", tool, "arguments", arguments,
                    "timeout", timeout > 0 ? json_real (timeout) : NULL);
}

/* A downstream tool through the gateway's call_tool; takes @arguments. */
static json_t *
gateway_call (TestClient *client,
              const char *server,
              const char *tool,
              json_t     *arguments)
{
  return test_client_result (client, "tools/call", gateway_call_params (server, tool, arguments, 0));
}

/* The fixture's counters (pid, max_inflight, …) through the gateway. */
static json_t *
fixture_stats (TestClient *client,
               const char *server)
{
  g_autoptr(json_t) result = gateway_call (client, server, "stats", json_object ());
  json_t *stats = json_object_get (result, "structuredContent");

  g_assert_true (json_is_object (stats));
  return json_incref (stats);
}

static json_int_t
fixture_stat (TestClient *client,
              const char *server,
              const char *counter)
{
  g_autoptr(json_t) stats = fixture_stats (client, server);

  g_assert_true (json_is_integer (json_object_get (stats, counter)));
  return json_integer_value (json_object_get (stats, counter));
}

/* Item @index of the array @key in a tool result's structuredContent. */
static json_t *
structured_item (json_t     *result,
                 const char *key,
                 guint       index)
{
  return json_array_get (json_object_get (json_object_get (result, "structuredContent"), key), index);
}

/* Checks isError and that the text names every NULL-terminated needle. */
static void
assert_result (json_t     *result,
               gboolean    is_error,
               const char *needle,
               ...)
{
  const char *text = test_result_text (result);
  va_list needles;

  g_assert_nonnull (text);
  g_assert_cmpint (json_is_true (json_object_get (result, "isError")), ==, is_error);
  va_start (needles, needle);
  for (; needle != NULL; needle = va_arg (needles, const char *))
    if (strstr (text, needle) == NULL)
      g_error ("“%s” is not in the result text “%s”", needle, text);
  va_end (needles);
}

static json_t *
list_tools (TestClient *client)
{
  g_autoptr(json_t) result = test_client_result (client, "tools/list", NULL);

  g_assert_true (json_is_array (json_object_get (result, "tools")));
  return json_incref (json_object_get (result, "tools"));
}

/* Fixture: one mcp-pool serve, initialized */

typedef struct {
  const char *expose;
  const char *servers[12];   /* name, flags as a JSON array, …, NULL */
  const char *server;        /* --server this one instead of --expose */
  gboolean    http;          /* over HTTP (--listen), not stdio: ADD_BOTH */
} ServeSetup;

typedef struct {
  char       *config;
  TestClient *client;
} Fixture;

/* The setups over HTTP, freed after the run. */
static GPtrArray *http_setups;

/* @setup over HTTP: a copy, kept for the whole run. */
static const ServeSetup *
over_http (const ServeSetup *setup)
{
  ServeSetup *copy = g_memdup2 (setup, sizeof *setup);

  copy->http = TRUE;
  if (http_setups == NULL)
    http_setups = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (http_setups, copy);
  return copy;
}

static void fixture_set_up (Fixture *fixture, gconstpointer data);
static void fixture_tear_down (Fixture *fixture, gconstpointer data);

/* /serve/X over HTTP, as /serve/http/X. */
static void
add_over_http (const char         *path,
               const ServeSetup   *setup,
               void              (*test) (Fixture *fixture, gconstpointer data))
{
  g_autofree char *name = g_strconcat ("/serve/http", path + strlen ("/serve"), NULL);

  g_test_add (name, Fixture, over_http (setup), fixture_set_up, test, fixture_tear_down);
}

static void
fixture_set_up (Fixture       *fixture,
                gconstpointer  data)
{
  const ServeSetup *setup = data;

  fixture->config = write_config (setup->servers);
  if (setup->server != NULL)
    fixture->client = serve_launch_over (setup->http, fixture->config, "--server", setup->server, NULL, NULL);
  else
    fixture->client = serve_launch_over (setup->http, fixture->config, setup->expose != NULL ? "--expose" : NULL,
                                         setup->expose, NULL, NULL);
  json_decref (serve_initialize (fixture->client, "2025-11-25"));
  test_client_notify (fixture->client, "notifications/initialized", NULL);
}

static void
fixture_tear_down (Fixture       *fixture,
                   gconstpointer  data)
{
  if (!fixture->client->exited)
    serve_finish (fixture->client);
  g_clear_pointer (&fixture->client, test_client_free);
  g_free (fixture->config);
  test_assert_no_children ();
}

#define LONG_NAME "a-server-name-so-long-that-no-tool-name-built-on-it-fits-into-64-characters"

static const ServeSetup gateway_setup = { "gateway", { "fixture", "[]", NULL } };
static const ServeSetup proxy_setup = { "proxy", { "fixture", "[]", NULL } };
static const ServeSetup proxy_names_setup = {
  "proxy", { "one", "[]", "two", "[]", "my.server", "[]", LONG_NAME "-1", "[]", LONG_NAME "-2", "[]", NULL }
};
static const ServeSetup task_tool_setup = {
  "proxy", { "alpha", "[\"--task-tool\"]", "beta", "[\"--task-tool\"]", NULL }
};
static const ServeSetup lazy_setup = { "proxy,gateway", { "one", "[]", "two", "[]", NULL } };
static const ServeSetup resources_setup = {
  "proxy", { "alpha", "[\"--resources\", \"alpha\"]", "beta", "[\"--resources\", \"beta\"]", "plain", "[]", NULL }
};
static const ServeSetup logging_setup = {
  "proxy", { "talker", "[\"--logging\"]", "late", "[\"--logging\"]", "quiet", "[]", NULL }
};
static const ServeSetup prompts_setup = {
  "proxy", { "speaker", "[\"--prompts\", \"--resources\", \"speaker\"]", "mute", "[]", NULL }
};
static const ServeSetup one_server_setup = {
  NULL, { "speaker", "[\"--prompts\", \"--resources\", \"speaker\", \"--logging\"]", "other", "[]", NULL },
  "speaker",
};
static const ServeSetup code_setup = { NULL, { "alpha", "[]", "beta", "[]", NULL } };
static const ServeSetup slow_start_setup = { "gateway", { "slow", "[\"--slow-start\", \"60000\"]", NULL } };
static const ServeSetup ending_setup = {
  "gateway", { "stubborn", "[\"--ignore-sigterm\", \"--ignore-eof\"]", "launcher", "[\"--grandchild\"]", NULL }
};

/* Handshake */

static void
assert_initialize_result (json_t     *result,
                          const char *version)
{
  json_t *info = json_object_get (result, "serverInfo");
  const char *instructions = mcp_json_get_string (result, "instructions");

  g_assert_cmpstr (mcp_json_get_string (result, "protocolVersion"), ==, version);
  g_assert_cmpstr (mcp_json_get_string (info, "name"), ==, "mcp-pool");
  g_assert_nonnull (mcp_json_get_string (info, "version"));
  g_assert_nonnull (mcp_json_get_string (info, "title"));
  g_assert_true (instructions != NULL && instructions[0] != '\0');
  g_assert_true (json_is_true (json_object_get (json_object_get (json_object_get (result, "capabilities"),
                                                                 "tools"), "listChanged")));
}

static void
test_handshake (void)
{
  static const char * const servers[] = { "fixture", "[]", NULL };
  static const struct {
    const char *asked, *answered;
  } versions[] = {
    { "2024-11-05", "2024-11-05" },
    { "2025-03-26", "2025-03-26" },
    { "2025-06-18", "2025-06-18" },
    { "2025-11-25", "2025-11-25" },
    { "1999-01-01", "2025-11-25" },
  };
  g_autofree char *config = write_config (servers);

  for (guint i = 0; i < G_N_ELEMENTS (versions); i++)
    {
      g_autoptr(TestClient) client = serve_new (config, "gateway");
      g_autoptr(json_t) result = serve_initialize (client, versions[i].asked);

      assert_initialize_result (result, versions[i].answered);
      test_client_notify (client, "notifications/initialized", NULL);
      serve_ping (client);
      serve_finish (client);
    }
  test_assert_no_children ();
}

/* The stateless revision */

/* @params (taken, NULL: {}) with the `_meta` of a client of MCP
 * 2026-07-28 that speaks @version. */
static json_t *
modern_params (json_t     *params,
               const char *version)
{
  json_t *with = params != NULL ? params : json_object ();

  json_object_set_new (with, "_meta", json_pack ("{s:s, s:{}, s:{s:s, s:s}}",
                                                 "io.modelcontextprotocol/protocolVersion", version,
                                                 "io.modelcontextprotocol/clientCapabilities",
                                                 "io.modelcontextprotocol/clientInfo", "name", "test", "version", "1"));
  return with;
}

/* The error code of the reply to @method with @params (taken). */
static json_int_t
error_code_of (TestClient *client,
               const char *method,
               json_t     *params)
{
  g_autoptr(json_t) reply = test_client_read_reply (client, test_client_request (client, method, params));

  g_assert_null (json_object_get (reply, "result"));
  return json_integer_value (json_object_get (json_object_get (reply, "error"), "code"));
}

/* A client of 2026-07-28 over stdio sends no initialize: every request
 * names its revision; what the revision removed is not found, and a
 * server's log messages reach it only while a request that asked for
 * them (_meta logLevel) is in flight. */
static void
test_stateless (void)
{
  static const char * const servers[] = { "talker", "[\"--logging\"]", "fixture", "[]", NULL };
  g_autofree char *config = write_config (servers);
  g_autoptr(TestClient) client = serve_new (config, "proxy");
  g_autoptr(json_t) discovered = test_client_result (client, "server/discover", modern_params (NULL, "2026-07-28"));
  g_autoptr(json_t) listed = test_client_result (client, "tools/list", modern_params (NULL, "2026-07-28"));
  g_autoptr(json_t) logged = NULL;
  g_autoptr(json_t) echoed = NULL;
  g_autoptr(json_t) bare = json_object ();
  json_t *asked;
  json_t *tools = json_object_get (listed, "tools");

  g_assert_cmpstr (json_string_value (json_array_get (json_object_get (discovered, "supportedVersions"), 0)), ==,
                   "2026-07-28");
  g_assert_null (json_object_get (json_object_get (discovered, "capabilities"), "logging"));
  g_assert_cmpstr (mcp_json_get_string (listed, "resultType"), ==, "complete");
  g_assert_true (json_is_integer (json_object_get (listed, "ttlMs")));
  g_assert_nonnull (test_find_tool (tools, "fixture__echo"));
  g_assert_nonnull (test_find_tool (tools, "talker__log"));
  for (gsize i = 1; i < json_array_size (tools); i++)
    g_assert_cmpstr (mcp_json_get_string (json_array_get (tools, i - 1), "name"), <,
                     mcp_json_get_string (json_array_get (tools, i), "name"));

  echoed = test_client_result (client, "tools/call",
                               modern_params (json_pack ("{s:s, s:{s:s}}", "name", "fixture__echo", "arguments",
                                                         "message", "no handshake"), "2026-07-28"));
  assert_result (echoed, FALSE, "Echo: no handshake", NULL);
  /* Finished as spliced, on the warm path. */
  g_assert_cmpstr (mcp_json_get_string (echoed, "resultType"), ==, "complete");
  g_assert_nonnull (json_object_get (json_object_get (echoed, "_meta"), "io.modelcontextprotocol/serverInfo"));
  logged = test_client_result (client, "tools/call",
                               modern_params (json_pack ("{s:s, s:{s:s}}", "name", "talker__log", "arguments",
                                                         "text", "unasked"), "2026-07-28"));
  assert_result (logged, FALSE, "logged", NULL);
  /* Asked for: the message comes while the call is in flight, before
   * its reply; the next call, which does not ask, gets none. */
  asked = modern_params (json_pack ("{s:s, s:{s:s}}", "name", "talker__log", "arguments", "text", "asked"),
                         "2026-07-28");
  json_object_set_new (json_object_get (asked, "_meta"), "io.modelcontextprotocol/logLevel", json_string ("debug"));
  json_decref (test_client_result (client, "tools/call", asked));
  g_assert_cmpuint (test_client_count_notifications (client, "notifications/message"), ==, 1);
  json_decref (test_client_result (client, "tools/call",
                                   modern_params (json_pack ("{s:s, s:{s:s}}", "name", "talker__log", "arguments",
                                                             "text", "unasked again"), "2026-07-28")));

  g_assert_cmpint (error_code_of (client, "ping", modern_params (NULL, "2026-07-28")), ==, -32601);
  g_assert_cmpint (error_code_of (client, "initialize", modern_params (NULL, "2026-07-28")), ==, -32601);
  g_assert_cmpint (error_code_of (client, "logging/setLevel",
                                  modern_params (json_pack ("{s:s}", "level", "debug"), "2026-07-28")), ==, -32601);
  g_assert_cmpint (error_code_of (client, "tools/list", modern_params (NULL, "2099-01-01")), ==, -32022);
  json_object_set_new (bare, "_meta", json_pack ("{s:s}", "io.modelcontextprotocol/protocolVersion", "2026-07-28"));
  g_assert_cmpint (error_code_of (client, "tools/list", g_steal_pointer (&bare)), ==, -32602);
  /* Without _meta, discovery is refused: it is the new revision's. */
  g_assert_cmpint (error_code_of (client, "server/discover", NULL), ==, -32602);

  /* A log message goes out before the reply of the call it came in. */
  g_assert_cmpuint (test_client_count_notifications (client, "notifications/message"), ==, 1);
  serve_finish (client);
  test_assert_no_children ();
}

/* A tools/call of @tool with @arguments (taken) from a 2026-07-28 client
 * that answers elicitation; @retry (taken, NULL: none) adds its
 * inputResponses and requestState. */
static json_t *
modern_input_call (const char *tool,
                   json_t     *arguments,
                   json_t     *retry)
{
  json_t *params = modern_params (json_pack ("{s:s, s:o}", "name", tool, "arguments", arguments), "2026-07-28");

  json_object_set_new (json_object_get (params, "_meta"), "io.modelcontextprotocol/clientCapabilities",
                       json_pack ("{s:{}}", "elicitation"));
  if (retry != NULL)
    json_object_update (params, retry);
  json_decref (retry);
  return params;
}

/* A 2026-07-28 client over stdio is never asked: a 2025 server's
 * elicitation/create during its call becomes an InputRequiredResult, and
 * its retry with the answer gets the call's result.  A retry that names
 * no waiting call, and one of a call whose client took too long, are
 * refused, and an abandoned call's late end goes nowhere. */
static void
test_stateless_input (void)
{
  static const char * const servers[] = { "fixture", "[]", NULL };
  g_autofree char *config = write_config (servers);
  g_autoptr(TestClient) client = serve_new (config, "proxy");
  g_autoptr(TestClient) slow = serve_new_with (config, "proxy", "MCP_POOL_INPUT_TIMEOUT", "1");
  g_autoptr(json_t) asked = NULL;
  g_autoptr(json_t) answered = NULL;
  g_autoptr(json_t) abandoned = NULL;
  g_autoptr(json_t) stats = NULL;
  json_t *requests;
  const char *state, *key = NULL;
  json_t *question = NULL;
  gint64 until;

  asked = test_client_result (client, "tools/call",
                              modern_input_call ("fixture__ask_client",
                                                 json_pack ("{s:s, s:{s:s}}", "method", "elicitation/create",
                                                            "params", "message", "Your name?"), NULL));
  g_assert_cmpstr (mcp_json_get_string (asked, "resultType"), ==, "input_required");
  state = mcp_json_get_string (asked, "requestState");
  g_assert_true (g_str_has_prefix (state, "mcp-pool-input-"));
  requests = json_object_get (asked, "inputRequests");
  g_assert_cmpuint (json_object_size (requests), ==, 1);
  json_object_foreach (requests, key, question)
    break;
  g_assert_cmpstr (mcp_json_get_string (question, "method"), ==, "elicitation/create");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (question, "params"), "message"), ==, "Your name?");

  g_assert_cmpint (error_code_of (client, "tools/call",
                                  modern_input_call ("fixture__ask_client", json_pack ("{s:s}", "method", "x"),
                                                     json_pack ("{s:s, s:{}}", "requestState",
                                                                "mcp-pool-input-none", "inputResponses"))), ==, -32602);
  answered = test_client_result (client, "tools/call",
                                 modern_input_call ("fixture__ask_client",
                                                    json_pack ("{s:s}", "method", "elicitation/create"),
                                                    json_pack ("{s:s, s:{s:{s:s, s:{s:s}}}}", "requestState", state,
                                                               "inputResponses", key, "action", "accept",
                                                               "content", "name", "Ada")));
  g_assert_nonnull (strstr (test_result_text (answered), "Ada"));
  g_assert_cmpint (error_code_of (client, "tools/call",
                                  modern_input_call ("fixture__ask_client", json_pack ("{s:s}", "method", "x"),
                                                     json_pack ("{s:s, s:{}}", "requestState", state,
                                                                "inputResponses"))), ==, -32602);

  /* Never retried: after a second the server is answered with an error,
   * and its call ends (the fixture counts it out of flight). */
  abandoned = test_client_result (slow, "tools/call",
                                  modern_input_call ("fixture__ask_client",
                                                     json_pack ("{s:s}", "method", "elicitation/create"), NULL));
  g_assert_cmpstr (mcp_json_get_string (abandoned, "resultType"), ==, "input_required");
  until = g_get_monotonic_time () + test_timeout_ms (20 * 1000) * G_TIME_SPAN_MILLISECOND;
  do
    {
      g_clear_pointer (&stats, json_decref);
      g_usleep (G_USEC_PER_SEC / 20);
      stats = test_client_result (slow, "tools/call", modern_params (json_pack ("{s:s, s:{}}", "name", "fixture__stats",
                                                                                "arguments"), "2026-07-28"));
    }
  while (json_integer_value (json_object_get (json_object_get (stats, "structuredContent"), "inflight")) > 1 &&
         g_get_monotonic_time () < until);
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (stats, "structuredContent"), "inflight")),
                   ==, 1);
  g_assert_cmpint (error_code_of (slow, "tools/call",
                                  modern_input_call ("fixture__ask_client", json_pack ("{s:s}", "method", "elicitation/create"),
                                                     json_pack ("{s:s, s:{}}", "requestState",
                                                                mcp_json_get_string (abandoned, "requestState"),
                                                                "inputResponses"))), ==, -32602);
  serve_finish (client);
  serve_finish (slow);
  /* Nothing but the replies above: the abandoned call's end was dropped. */
  g_assert_cmpuint (slow->stash->len, ==, 0);
  test_assert_no_children ();
}

/* @params (taken, NULL: {}) of a 2026-07-28 client that declares the
 * tasks extension. */
static json_t *
tasks_params (json_t *params)
{
  json_t *with = modern_params (params, "2026-07-28");

  json_object_set_new (json_object_get (with, "_meta"), "io.modelcontextprotocol/clientCapabilities",
                       json_pack ("{s:{s:{}}}", "extensions", "io.modelcontextprotocol/tasks"));
  return with;
}

/* The tasks extension of 2026-07-28 over stdio, made of a 2025 server's
 * tasks: its tool that needs a task is refused to a client that did not
 * declare the extension (-32021, naming it) and is a flat task for one
 * that did, which tasks/get shows ended with the server's result; the
 * extension's methods are refused undeclared, for tasks not made here,
 * and tasks/result and tasks/list are gone. */
static void
test_stateless_tasks (void)
{
  static const char * const servers[] = { "fixture", "[\"--task-tool\"]", NULL };
  g_autofree char *config = write_config (servers);
  g_autoptr(TestClient) client = serve_new (config, "proxy");
  g_autoptr(json_t) discovered = test_client_result (client, "server/discover", modern_params (NULL, "2026-07-28"));
  g_autoptr(json_t) refused = NULL;
  g_autoptr(json_t) created = NULL;
  g_autoptr(json_t) got = NULL;
  g_autoptr(json_t) updated = NULL;
  g_autoptr(json_t) cancelled = NULL;
  json_t *data, *result;
  const char *id;

  g_assert_nonnull (json_object_get (json_object_get (json_object_get (discovered, "capabilities"), "extensions"),
                                     "io.modelcontextprotocol/tasks"));
  g_assert_null (json_object_get (json_object_get (discovered, "capabilities"), "tasks"));

  refused = test_client_read_reply (client, test_client_request (client, "tools/call",
                                                                 modern_params (json_pack ("{s:s, s:{s:s}}", "name",
                                                                                           "fixture__research", "arguments",
                                                                                           "topic", "owls"), "2026-07-28")));
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (refused, "error"), "code")), ==, -32021);
  data = json_object_get (json_object_get (refused, "error"), "data");
  g_assert_nonnull (json_object_get (json_object_get (json_object_get (data, "requiredCapabilities"), "extensions"),
                                     "io.modelcontextprotocol/tasks"));

  created = test_client_result (client, "tools/call",
                                tasks_params (json_pack ("{s:s, s:{s:s}}", "name", "fixture__research", "arguments",
                                                         "topic", "owls")));
  g_assert_cmpstr (mcp_json_get_string (created, "resultType"), ==, "task");
  g_assert_null (json_object_get (created, "task"));
  g_assert_cmpint (json_integer_value (json_object_get (created, "ttlMs")), ==, 60000);
  id = mcp_json_get_string (created, "taskId");
  g_assert_nonnull (id);

  got = test_client_result (client, "tasks/get", tasks_params (json_pack ("{s:s}", "taskId", id)));
  g_assert_cmpstr (mcp_json_get_string (got, "resultType"), ==, "complete");
  g_assert_cmpstr (mcp_json_get_string (got, "taskId"), ==, id);
  g_assert_cmpstr (mcp_json_get_string (got, "status"), ==, "completed");
  result = json_object_get (got, "result");
  assert_result (result, FALSE, "researched: owls", NULL);
  g_assert_null (json_object_get (json_object_get (result, "_meta"), "io.modelcontextprotocol/related-task"));

  updated = test_client_result (client, "tasks/update",
                                tasks_params (json_pack ("{s:s, s:{s:{}}}", "taskId", id, "inputResponses", "none")));
  g_assert_cmpstr (mcp_json_get_string (updated, "resultType"), ==, "complete");
  g_assert_null (json_object_get (updated, "status"));
  /* The server keeps its tasks; it cancels one that ended, this ack
   * is the same either way. */
  cancelled = test_client_result (client, "tasks/cancel", tasks_params (json_pack ("{s:s}", "taskId", id)));
  g_assert_cmpstr (mcp_json_get_string (cancelled, "resultType"), ==, "complete");
  g_assert_null (json_object_get (cancelled, "taskId"));

  g_assert_cmpint (error_code_of (client, "tasks/get",
                                  modern_params (json_pack ("{s:s}", "taskId", id), "2026-07-28")), ==, -32021);
  g_assert_cmpint (error_code_of (client, "tasks/get", tasks_params (json_pack ("{s:s}", "taskId", "made-elsewhere"))),
                   ==, -32602);
  g_assert_cmpint (error_code_of (client, "tasks/update", tasks_params (json_pack ("{s:s}", "taskId", id))), ==,
                   -32602);
  g_assert_cmpint (error_code_of (client, "tasks/result", tasks_params (json_pack ("{s:s}", "taskId", id))), ==,
                   -32601);
  g_assert_cmpint (error_code_of (client, "tasks/list", tasks_params (NULL)), ==, -32601);
  serve_finish (client);
  test_assert_no_children ();
}

/* Gateway */

static void
test_gateway_list (Fixture       *fixture,
                   gconstpointer  data)
{
  static const char * const names[] = { "list_servers", "search_tools", "describe_tool", "call_tool" };
  g_autoptr(json_t) tools = list_tools (fixture->client);

  g_assert_cmpuint (json_array_size (tools), ==, G_N_ELEMENTS (names));
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      json_t *tool = test_find_tool (tools, names[i]);

      g_assert_nonnull (tool);
      g_assert_true (json_is_object (json_object_get (tool, "inputSchema")));
    }
}

static void
test_gateway_discovery (Fixture       *fixture,
                        gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) servers = call_tool (client, "list_servers", json_object ());
  g_autoptr(json_t) summary = call_tool (client, "search_tools",
                                         json_pack ("{s:s}", "query", "sleep milliseconds"));
  g_autoptr(json_t) full = call_tool (client, "search_tools",
                                      json_pack ("{s:s, s:s}", "query", "sleep milliseconds",
                                                 "detail", "full"));
  g_autoptr(json_t) described = call_tool (client, "describe_tool",
                                           json_pack ("{s:s, s:s}", "server", "fixture", "tool", "sleep"));
  json_t *first = structured_item (summary, "tools", 0);
  json_t *first_full = structured_item (full, "tools", 0);
  json_t *schema = json_object_get (json_object_get (described, "structuredContent"), "inputSchema");

  assert_result (servers, FALSE, "fixture", NULL);
  g_assert_cmpstr (mcp_json_get_string (structured_item (servers, "servers", 0), "name"), ==, "fixture");
  g_assert_cmpstr (mcp_json_get_string (first, "name"), ==, "sleep");
  g_assert_cmpstr (mcp_json_get_string (first, "server"), ==, "fixture");
  g_assert_cmpstr (mcp_json_get_string (first_full, "name"), ==, "sleep");
  g_assert_true (json_is_object (json_object_get (first_full, "inputSchema")));
  g_assert_true (json_is_object (json_object_get (json_object_get (schema, "properties"), "ms")));
}

static void
test_gateway_call (Fixture       *fixture,
                   gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) echo = gateway_call (client, "fixture", "echo", json_pack ("{s:s}", "message", "x"));
  g_autoptr(json_t) no_server = call_tool (client, "call_tool", json_pack ("{s:s}", "tool", "echo"));
  g_autoptr(json_t) unknown_server = gateway_call (client, "nosuch", "echo", json_object ());
  g_autoptr(json_t) unknown_tool = gateway_call (client, "fixture", "nosuch", json_object ());

  assert_result (echo, FALSE, "Echo: x", NULL);
  assert_result (no_server, TRUE, "server", NULL);
  assert_result (unknown_server, TRUE, "nosuch", "fixture", NULL);
  assert_result (unknown_tool, TRUE, "nosuch", "echo", "sleep", "stats", NULL);
}

/* The gateway reads search and description arguments as the sandbox's
 * RPC does (test-sandbox's /sandbox/tool-search-arguments): the same bad
 * argument gets the same message, word for word. */
static void
test_gateway_bad_arguments (Fixture       *fixture,
                            gconstpointer  data)
{
  static const struct {
    const char *tool, *arguments, *message;
  } cases[] = {
    { "search_tools", "{\"query\": \"echo\", \"limit\": 0}",
      "The argument “limit” must be a whole number from 1 to 50; leave it out for 10" },
    { "search_tools", "{\"query\": \"echo\", \"detail\": \"everything\"}",
      "The argument “detail” must be “summary” or “full”; leave it out for “summary”" },
    { "search_tools", "{\"query\": 5}",
      "The argument “query” is required and must be a non-empty string" },
    { "describe_tool", "{\"tool\": \"echo\"}",
      "The argument “server” is required and must be a non-empty string" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(json_t) result = call_tool (fixture->client, cases[i].tool,
                                            json_loads (cases[i].arguments, 0, NULL));

      g_assert_true (json_is_true (json_object_get (result, "isError")));
      g_assert_cmpstr (test_result_text (result), ==, cases[i].message);
    }
}

/* Proxy and code */

static void
test_proxy_names (Fixture       *fixture,
                  gconstpointer  data)
{
  g_autoptr(json_t) tools = list_tools (fixture->client);
  g_autoptr(json_t) again = list_tools (fixture->client);
  g_autoptr(GRegex) valid = g_regex_new ("^[a-zA-Z0-9_-]{1,64}$", 0, 0, NULL);
  g_autoptr(GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  guint n_long = 0;
  json_t *tool;
  size_t i;

  json_array_foreach (tools, i, tool)
    {
      const char *name = mcp_json_get_string (tool, "name");

      g_assert_nonnull (name);
      g_assert_true (g_regex_match (valid, name, 0, NULL));
      g_assert_true (g_hash_table_add (seen, (gpointer) name));
      g_assert_true (json_is_object (json_object_get (tool, "inputSchema")));
      n_long += g_str_has_prefix (name, "a-server-name-so-long");
    }
  /* Five servers with the same tools: none lost, none merged. */
  g_assert_cmpuint (json_array_size (tools) % 5, ==, 0);
  g_assert_cmpuint (n_long, ==, json_array_size (tools) / 5 * 2);
  g_assert_nonnull (test_find_tool (tools, "one__echo"));
  g_assert_nonnull (test_find_tool (tools, "two__echo"));
  g_assert_nonnull (test_find_tool (tools, "my_server__echo"));
  g_assert_nonnull (test_find_tool (tools, "one__notify_list_changed"));
  /* Stable from one listing to the next. */
  g_assert_true (json_equal (tools, again));
}

static void
test_proxy_call (Fixture       *fixture,
                 gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) tools = list_tools (client);
  g_autoptr(json_t) one = call_tool (client, "one__echo", json_pack ("{s:s}", "message", "1"));
  g_autoptr(json_t) two = call_tool (client, "two__echo", json_pack ("{s:s}", "message", "2"));
  g_autoptr(json_t) odd = call_tool (client, "my_server__echo", json_pack ("{s:s}", "message", "3"));
  json_t *tool;
  size_t i;

  assert_result (one, FALSE, "Echo: 1", NULL);
  assert_result (two, FALSE, "Echo: 2", NULL);
  assert_result (odd, FALSE, "Echo: 3", NULL);

  /* A cut name still reaches its own tool. */
  json_array_foreach (tools, i, tool)
    if (g_str_has_prefix (mcp_json_get_string (tool, "name"), "a-server-name-so-long") &&
        g_strcmp0 (mcp_json_get_string (tool, "description"), "Echo a message back.") == 0)
      {
        g_autoptr(json_t) echo = call_tool (client, mcp_json_get_string (tool, "name"),
                                            json_pack ("{s:s}", "message", "long"));

        assert_result (echo, FALSE, "Echo: long", NULL);
      }
}

/* A first call of a proxied name, before any tools/list, starts the one
 * server it names; list_servers says the other is not started. */
static void
test_proxy_call_starts_its_server (Fixture       *fixture,
                                   gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) echo = call_tool (client, "one__echo", json_pack ("{s:s}", "message", "first"));
  g_autoptr(json_t) servers = call_tool (client, "list_servers", json_object ());
  json_t *one = structured_item (servers, "servers", 0);
  json_t *two = structured_item (servers, "servers", 1);

  assert_result (echo, FALSE, "Echo: first", NULL);
  g_assert_cmpstr (mcp_json_get_string (one, "name"), ==, "one");
  g_assert_cmpstr (mcp_json_get_string (one, "state"), ==, "ready");
  g_assert_cmpint (json_integer_value (json_object_get (one, "tools")), >, 0);
  g_assert_cmpstr (mcp_json_get_string (two, "name"), ==, "two");
  g_assert_cmpstr (mcp_json_get_string (two, "state"), ==, "idle");
  g_assert_cmpstr (mcp_json_get_string (two, "tools"), ==, "not started");
}


/* The error message of a request that must fail with @code. */
static char *
request_error_coded (TestClient *client,
                     int         code,
                     const char *method,
                     json_t     *params)
{
  g_autoptr(json_t) reply = test_client_read_reply (client, test_client_request (client, method, params));
  json_t *error = json_object_get (reply, "error");

  g_assert_nonnull (error);
  g_assert_cmpint (json_integer_value (json_object_get (error, "code")), ==, code);
  return g_strdup (mcp_json_get_string (error, "message"));
}

static char *
request_error (TestClient *client,
               const char *method,
               json_t     *params)
{
  return request_error_coded (client, -32602, method, params);
}

/* A task-augmented call of a proxied tool makes a task of its server;
 * the task's id routes tasks/get, tasks/result and tasks/cancel back to
 * it, tasks/list joins every server's, and the servers' status
 * notifications reach the client. */
static void
test_proxy_tasks (Fixture       *fixture,
                  gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) again = serve_initialize (client, "2025-11-25");
  g_autoptr(json_t) tools = list_tools (client);
  g_autoptr(json_t) first = test_client_result (client, "tools/call",
                                                json_pack ("{s:s, s:{s:s}, s:{s:i}}", "name", "alpha__research",
                                                           "arguments", "topic", "pools", "task", "ttl", 60000));
  g_autoptr(json_t) second = test_client_result (client, "tools/call",
                                                 json_pack ("{s:s, s:{s:s}, s:{}}", "name", "beta__research",
                                                            "arguments", "topic", "queues", "task"));
  /* alpha lists its tasks one per page. */
  g_autoptr(json_t) third = test_client_result (client, "tools/call",
                                                json_pack ("{s:s, s:{s:s}, s:{}}", "name", "alpha__research",
                                                           "arguments", "topic", "stacks", "task"));
  const char *first_id = mcp_json_get_string (json_object_get (first, "task"), "taskId");
  const char *second_id = mcp_json_get_string (json_object_get (second, "task"), "taskId");
  const char *third_id = mcp_json_get_string (json_object_get (third, "task"), "taskId");
  g_autoptr(json_t) status = NULL;
  g_autoptr(json_t) result = NULL;
  g_autoptr(json_t) listed = NULL;
  g_autoptr(json_t) cancelled = NULL;
  g_autofree char *unknown = NULL;
  json_t *task;
  size_t index;
  guint found = 0;

  g_assert_nonnull (json_object_get (json_object_get (json_object_get (again, "capabilities"), "tasks"), "list"));
  g_assert_nonnull (test_find_tool (tools, "alpha__research"));
  g_assert_true (first_id != NULL && second_id != NULL && strcmp (first_id, second_id) != 0);
  g_assert_true (third_id != NULL && strcmp (first_id, third_id) != 0);
  while (test_client_count_notifications (client, "notifications/tasks/status") < 3)
    test_client_wait_notification (client, "notifications/tasks/status");

  /* Each id is asked of its own server, which knows no other. */
  status = test_client_result (client, "tasks/get", json_pack ("{s:s}", "taskId", second_id));
  g_assert_cmpstr (mcp_json_get_string (status, "status"), ==, "completed");
  result = test_client_result (client, "tasks/result", json_pack ("{s:s}", "taskId", first_id));
  assert_result (result, FALSE, "researched: pools", NULL);
  listed = test_client_result (client, "tasks/list", NULL);
  json_array_foreach (json_object_get (listed, "tasks"), index, task)
    found += g_strcmp0 (mcp_json_get_string (task, "taskId"), first_id) == 0 ||
             g_strcmp0 (mcp_json_get_string (task, "taskId"), second_id) == 0 ||
             g_strcmp0 (mcp_json_get_string (task, "taskId"), third_id) == 0;
  g_assert_cmpuint (found, ==, 3);
  g_assert_null (json_object_get (listed, "nextCursor"));
  cancelled = test_client_result (client, "tasks/cancel", json_pack ("{s:s}", "taskId", second_id));
  g_assert_cmpstr (mcp_json_get_string (cancelled, "status"), ==, "cancelled");

  unknown = request_error_coded (client, -32602, "tasks/get", json_pack ("{s:s}", "taskId", "made-up"));
  g_assert_nonnull (strstr (unknown, "No task has the id “made-up”"));
}

/* The proxy passes on the prompts of the servers that offer them, every
 * page, as server__prompt, and prompts/get reaches the server under the
 * prompt's own name. */
static void
test_proxy_prompts (Fixture       *fixture,
                    gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) listed = test_client_result (client, "prompts/list", NULL);
  json_t *prompts = json_object_get (listed, "prompts");
  g_autoptr(json_t) greeting = NULL;
  g_autoptr(json_t) plain = NULL;
  g_autofree char *unknown = NULL;
  g_autofree char *refused = NULL;
  g_autofree char *nameless = NULL;
  g_autoptr(json_t) again = serve_initialize (client, "2025-11-25");

  g_assert_true (json_is_object (json_object_get (json_object_get (again, "capabilities"), "prompts")));
  g_assert_cmpuint (json_array_size (prompts), ==, 2);
  g_assert_cmpstr (mcp_json_get_string (json_array_get (prompts, 0), "name"), ==, "speaker__greet");
  g_assert_cmpstr (mcp_json_get_string (json_array_get (prompts, 0), "description"), ==, "Greet someone.");
  g_assert_true (json_is_true (json_object_get (json_array_get (json_object_get (json_array_get (prompts, 0),
                                                                                 "arguments"), 0),
                                                "required")));
  g_assert_cmpstr (mcp_json_get_string (json_array_get (prompts, 1), "name"), ==, "speaker__plain");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (json_array_get (prompts, 1), "_meta"), "note"), ==,
                   "kept");

  greeting = test_client_result (client, "prompts/get",
                                 json_pack ("{s:s, s:{s:s}}", "name", "speaker__greet", "arguments", "name", "Ada"));
  g_assert_cmpstr (mcp_json_get_string (json_object_get (json_array_get (json_object_get (greeting, "messages"), 0),
                                                         "content"), "text"), ==, "Hello, Ada");
  plain = test_client_result (client, "prompts/get", json_pack ("{s:s}", "name", "speaker__plain"));
  g_assert_cmpstr (mcp_json_get_string (json_object_get (json_array_get (json_object_get (plain, "messages"), 0),
                                                         "content"), "text"), ==, "A plain prompt.");

  /* What is wrong is named: the prompt, with the ones there are; the
   * server's own refusal; a request without a name. */
  unknown = request_error (client, "prompts/get", json_pack ("{s:s}", "name", "speaker__nope"));
  g_assert_nonnull (strstr (unknown, "speaker__nope"));
  g_assert_nonnull (strstr (unknown, "speaker__greet, speaker__plain"));
  refused = request_error (client, "prompts/get", json_pack ("{s:s}", "name", "speaker__greet"));
  g_assert_nonnull (strstr (refused, "no prompt greet with those arguments"));
  nameless = request_error (client, "prompts/get", json_pack ("{s:{}}", "arguments"));
  g_assert_nonnull (strstr (nameless, "“name”"));
}

static json_t *
completion_values (TestClient *client,
                   json_t     *ref,
                   const char *argument,
                   const char *typed)
{
  g_autoptr(json_t) result = test_client_result (client, "completion/complete",
                                                 json_pack ("{s:o, s:{s:s, s:s}}", "ref", ref, "argument",
                                                            "name", argument, "value", typed));

  return json_incref (json_object_get (json_object_get (result, "completion"), "values"));
}

/* Completions of a proxied prompt's and template's arguments come from
 * the server that has them, asked in its own names. */
static void
test_proxy_completions (Fixture       *fixture,
                        gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) again = serve_initialize (client, "2025-11-25");
  g_autoptr(json_t) names = completion_values (client, json_pack ("{s:s, s:s}", "type", "ref/prompt",
                                                                  "name", "speaker__greet"), "name", "A");
  g_autoptr(json_t) ids = completion_values (client, json_pack ("{s:s, s:s}", "type", "ref/resource",
                                                                "uri", "speaker://item/{id}"), "id", "2");
  g_autoptr(json_t) expected_names = json_pack ("[s, s]", "Ada", "Alan");
  g_autoptr(json_t) expected_ids = json_pack ("[s]", "2");
  g_autofree char *unknown = request_error (client, "completion/complete",
                                            json_pack ("{s:{s:s, s:s}, s:{s:s, s:s}}", "ref", "type", "ref/prompt",
                                                       "name", "speaker__nope", "argument", "name", "x",
                                                       "value", ""));
  g_autofree char *refless = request_error (client, "completion/complete", json_object ());

  g_assert_true (json_is_object (json_object_get (json_object_get (again, "capabilities"), "completions")));
  g_assert_true (json_equal (names, expected_names));
  g_assert_true (json_equal (ids, expected_ids));
  g_assert_nonnull (strstr (unknown, "speaker__nope"));
  g_assert_nonnull (strstr (refless, "ref/prompt"));
}

/* The text of the first content of a resources/read of @uri. */
static char *
read_text (TestClient *client,
           const char *uri,
           char      **content_uri)
{
  g_autoptr(json_t) read = test_client_result (client, "resources/read", json_pack ("{s:s}", "uri", uri));
  json_t *content = json_array_get (json_object_get (read, "contents"), 0);

  if (content_uri != NULL)
    *content_uri = g_strdup (mcp_json_get_string (content, "uri"));
  return g_strdup (mcp_json_get_string (content, "text"));
}

static json_t *
find_by (json_t     *list,
         const char *key,
         const char *value)
{
  json_t *item;
  size_t index;

  json_array_foreach (list, index, item)
    if (g_strcmp0 (mcp_json_get_string (item, key), value) == 0)
      return item;
  return NULL;
}

/* The proxy passes on every server's resources under their own URIs (a
 * URI two servers list: the second's rewritten), and its templates; a
 * read goes to the server that listed the URI, or whose template it
 * fits, before any listing too. */
static void
test_proxy_resources (Fixture       *fixture,
                      gconstpointer  data)
{
  TestClient *client = fixture->client;
  const char *rewritten = "mcp-pool://resource/beta/shared%3A%2F%2Fsame";
  g_autofree char *from_template = read_text (client, "beta://item/7", NULL);
  g_autoptr(json_t) listed = test_client_result (client, "resources/list", NULL);
  g_autoptr(json_t) templates = test_client_result (client, "resources/templates/list", NULL);
  json_t *resources = json_object_get (listed, "resources");
  g_autofree char *alpha_own = read_text (client, "alpha://own", NULL);
  g_autofree char *same = read_text (client, "shared://same", NULL);
  g_autofree char *same_uri = NULL;
  g_autofree char *second_same = read_text (client, rewritten, &same_uri);
  g_autofree char *missing = request_error_coded (client, -32002, "resources/read",
                                                  json_pack ("{s:s}", "uri", "nowhere://x"));

  g_assert_cmpstr (from_template, ==, "beta says beta://item/7");
  g_assert_cmpuint (json_array_size (resources), ==, 5);
  g_assert_nonnull (find_by (resources, "uri", "mcp-pool://capabilities"));
  g_assert_nonnull (find_by (resources, "uri", "alpha://own"));
  g_assert_nonnull (find_by (resources, "uri", "beta://own"));
  g_assert_cmpstr (mcp_json_get_string (json_object_get (find_by (resources, "uri", "shared://same"), "annotations"),
                                        "audience"), ==, "user");
  g_assert_nonnull (find_by (resources, "uri", rewritten));
  g_assert_nonnull (find_by (json_object_get (templates, "resourceTemplates"), "uriTemplate", "alpha://item/{id}"));
  g_assert_nonnull (find_by (json_object_get (templates, "resourceTemplates"), "uriTemplate", "beta://item/{id}"));

  g_assert_cmpstr (alpha_own, ==, "alpha says alpha://own");
  g_assert_cmpstr (same, ==, "alpha says shared://same");
  g_assert_cmpstr (second_same, ==, "beta says shared://same");
  g_assert_cmpstr (same_uri, ==, rewritten);
  g_assert_nonnull (strstr (missing, "nowhere://x"));
}

static char *
stats_log_level (TestClient *client,
                 const char *tool)
{
  g_autoptr(json_t) stats = call_tool (client, tool, json_object ());

  return g_strdup (mcp_json_get_string (json_object_get (stats, "structuredContent"), "log_level"));
}

/* The servers' log messages reach a client that set a level, under the
 * server's name; every server that offers logging is asked for that
 * level, one that starts later too, and a level that is none is named. */
static void
test_proxy_logging (Fixture       *fixture,
                    gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) before = call_tool (client, "talker__log", json_pack ("{s:s}", "text", "before"));
  g_autoptr(json_t) set = NULL;
  g_autoptr(json_t) below = NULL;
  g_autoptr(json_t) after = NULL;
  g_autoptr(json_t) quiet = NULL;
  g_autofree char *refused = NULL;
  g_autofree char *talker_level = NULL;
  g_autofree char *late_level = NULL;
  json_t *message;

  /* A server's message goes out before its reply, so none came. */
  assert_result (before, FALSE, "logged", NULL);
  g_assert_cmpuint (test_client_count_notifications (client, "notifications/message"), ==, 0);

  set = test_client_result (client, "logging/setLevel", json_pack ("{s:s}", "level", "warning"));
  g_assert_cmpuint (json_object_size (set), ==, 0);
  talker_level = stats_log_level (client, "talker__stats");
  g_assert_cmpstr (talker_level, ==, "warning");
  late_level = stats_log_level (client, "late__stats");
  g_assert_cmpstr (late_level, ==, "warning");
  quiet = call_tool (client, "quiet__echo", json_pack ("{s:s}", "message", "q"));
  assert_result (quiet, FALSE, "Echo: q", NULL);

  /* The fixture logs at info whatever it was asked: below the client's
   * level, that is dropped; at the level, passed on. */
  below = call_tool (client, "talker__log", json_pack ("{s:s}", "text", "below"));
  assert_result (below, FALSE, "logged", NULL);
  g_assert_cmpuint (test_client_count_notifications (client, "notifications/message"), ==, 0);
  json_decref (test_client_result (client, "logging/setLevel", json_pack ("{s:s}", "level", "info")));
  after = call_tool (client, "talker__log", json_pack ("{s:s}", "text", "after"));
  assert_result (after, FALSE, "logged", NULL);
  g_assert_cmpuint (test_client_count_notifications (client, "notifications/message"), ==, 1);
  message = test_client_last_notification (client, "notifications/message");
  g_assert_cmpstr (mcp_json_get_string (message, "logger"), ==, "talker/fixture");
  g_assert_cmpstr (mcp_json_get_string (message, "data"), ==, "after");
  g_assert_cmpstr (mcp_json_get_string (message, "level"), ==, "info");

  refused = request_error (client, "logging/setLevel", json_pack ("{s:s}", "level", "loud"));
  g_assert_nonnull (strstr (refused, "“loud”"));
  g_assert_nonnull (strstr (refused, "debug, info, notice"));
}

/* What the test's client answers when a server asks it. */
static json_t *
answer_as_client (const char *method,
                  json_t     *params,
                  gpointer    user_data)
{
  if (g_str_equal (method, "roots/list"))
    return json_pack ("{s:[{s:s, s:s}]}", "roots", "uri", "file:///work", "name", "work");
  if (g_str_equal (method, "sampling/createMessage"))
    return json_pack ("{s:s, s:{s:s, s:s}, s:s}", "role", "assistant", "content", "type", "text",
                      "text", "sampled", "model", "test-model");
  return NULL;
}

/* A server's request for the roots or for sampling reaches serve's client,
 * which declared them, and its answer comes back to the server; what the
 * client did not declare is neither declared to the server nor relayed.
 * The client's roots/list_changed reaches the running servers. */
static void
test_proxy_client_requests (Fixture       *fixture,
                            gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) again = NULL;
  g_autoptr(json_t) roots = NULL;
  g_autoptr(json_t) sampled = NULL;
  g_autoptr(json_t) elicited = NULL;
  g_autoptr(json_t) stats = NULL;
  json_t *declared;

  client->on_request = answer_as_client;
  again = serve_initialize_with (client, "2025-11-25", json_pack ("{s:{s:b}, s:{}}", "roots", "listChanged", TRUE,
                                                                 "sampling"));
  roots = call_tool (client, "fixture__ask_client", json_pack ("{s:s}", "method", "roots/list"));
  sampled = call_tool (client, "fixture__ask_client",
                       json_pack ("{s:s, s:{s:[], s:i}}", "method", "sampling/createMessage", "params",
                                  "messages", "maxTokens", 10));
  elicited = call_tool (client, "fixture__ask_client", json_pack ("{s:s}", "method", "elicitation/create"));
  test_client_notify (client, "notifications/roots/list_changed", NULL);
  stats = call_tool (client, "fixture__stats", json_object ());
  declared = json_object_get (json_object_get (stats, "structuredContent"), "client_capabilities");

  g_assert_nonnull (strstr (test_result_text (roots), "file:///work"));
  g_assert_nonnull (strstr (test_result_text (sampled), "sampled"));
  g_assert_nonnull (strstr (test_result_text (elicited), "-32601"));
  g_assert_cmpuint (client->requests->len, ==, 2);
  g_assert_true (json_is_true (json_object_get (json_object_get (declared, "roots"), "listChanged")));
  g_assert_nonnull (json_object_get (declared, "sampling"));
  g_assert_null (json_object_get (declared, "elicitation"));
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (stats, "structuredContent"),
                                                        "roots_changed")), ==, 1);
}

/* A subscription goes to the server that has the resource, under its own
 * URI; its resources/updated comes back under the URI the client knows,
 * and the servers' list changes reach the client. */
static void
test_proxy_resource_updates (Fixture       *fixture,
                             gconstpointer  data)
{
  TestClient *client = fixture->client;
  const char *rewritten = "mcp-pool://resource/beta/shared%3A%2F%2Fsame";
  g_autoptr(json_t) again = serve_initialize (client, "2025-11-25");
  g_autoptr(json_t) listed = test_client_result (client, "resources/list", NULL);
  g_autoptr(json_t) one = test_client_result (client, "resources/subscribe", json_pack ("{s:s}", "uri", rewritten));
  g_autoptr(json_t) two = test_client_result (client, "resources/subscribe", json_pack ("{s:s}", "uri", "alpha://own"));
  g_autoptr(json_t) alpha_stats = call_tool (client, "alpha__stats", json_object ());
  g_autoptr(json_t) beta_stats = call_tool (client, "beta__stats", json_object ());
  g_autoptr(json_t) expected_alpha = json_pack ("[s]", "alpha://own");
  g_autoptr(json_t) expected_beta = json_pack ("[s]", "shared://same");
  g_autoptr(json_t) updated = NULL;
  g_autoptr(json_t) prompts_changed = NULL;
  g_autoptr(json_t) resources_changed = NULL;
  g_autofree char *unknown = NULL;

  g_assert_true (json_is_true (json_object_get (json_object_get (json_object_get (again, "capabilities"),
                                                                 "resources"), "subscribe")));
  g_assert_true (json_equal (json_object_get (json_object_get (alpha_stats, "structuredContent"), "subscribed"),
                             expected_alpha));
  g_assert_true (json_equal (json_object_get (json_object_get (beta_stats, "structuredContent"), "subscribed"),
                             expected_beta));

  updated = call_tool (client, "beta__notify", json_pack ("{s:s, s:{s:s}}", "method", "notifications/resources/updated",
                                                          "params", "uri", "shared://same"));
  assert_result (updated, FALSE, "sent", NULL);
  g_assert_cmpstr (mcp_json_get_string (test_client_last_notification (client, "notifications/resources/updated"),
                                        "uri"), ==, rewritten);
  prompts_changed = call_tool (client, "alpha__notify", json_pack ("{s:s}", "method", "notifications/prompts/list_changed"));
  resources_changed = call_tool (client, "alpha__notify",
                                 json_pack ("{s:s}", "method", "notifications/resources/list_changed"));
  g_assert_cmpuint (test_client_count_notifications (client, "notifications/prompts/list_changed"), ==, 1);
  g_assert_cmpuint (test_client_count_notifications (client, "notifications/resources/list_changed"), ==, 1);

  unknown = request_error (client, "resources/subscribe", json_pack ("{s:s}", "uri", "nowhere://x"));
  g_assert_nonnull (strstr (unknown, "nowhere://x"));
}

/* A server that stops waiting for its request to the client (here it
 * dies) has the client told: notifications/cancelled for serve's id. */
static void
test_proxy_client_request_cancelled (Fixture       *fixture,
                                     gconstpointer  data)
{
  g_autoptr(json_t) again = serve_initialize_with (fixture->client, "2025-11-25", json_pack ("{s:{}}", "roots"));

  test_client_check_request_cancelled_by_crash (fixture->client, "fixture");
}

/* --server: one server as it is.  Its own handshake and names, pages
 * and notifications as it sends them, its JSON-RPC errors with their
 * data. */
static void
test_one_server_as_is (Fixture       *fixture,
                       gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) again = serve_initialize (client, "2025-06-18");
  json_t *capabilities = json_object_get (again, "capabilities");
  g_autoptr(json_t) tools = test_client_result (client, "tools/list", NULL);
  g_autoptr(json_t) first = test_client_result (client, "prompts/list", NULL);
  g_autoptr(json_t) second = NULL;
  g_autoptr(json_t) echo = call_tool (client, "echo", json_pack ("{s:s}", "message", "as is"));
  g_autoptr(json_t) failed = NULL;
  g_autoptr(json_t) logged = NULL;
  g_autoptr(json_t) greeting = NULL;
  g_autofree char *refused = NULL;
  json_t *error, *tool, *message;
  size_t index;

  g_assert_cmpstr (mcp_json_get_string (again, "protocolVersion"), ==, "2025-06-18");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (again, "serverInfo"), "name"), ==, "mcp-pool-fixture");
  g_assert_null (json_object_get (again, "instructions"));
  g_assert_true (json_is_true (json_object_get (json_object_get (capabilities, "resources"), "subscribe")));
  g_assert_nonnull (json_object_get (capabilities, "logging"));
  g_assert_nonnull (json_object_get (capabilities, "completions"));

  /* Own names, and nothing of the pool's in a tool. */
  g_assert_cmpuint (json_array_size (json_object_get (tools, "tools")), >, 0);
  json_array_foreach (json_object_get (tools, "tools"), index, tool)
    {
      g_assert_null (strstr (mcp_json_get_string (tool, "name"), "__"));
      g_assert_null (json_object_get (tool, "server"));
    }
  assert_result (echo, FALSE, "Echo: as is", NULL);

  /* The server's pages, followed by the client. */
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (first, "prompts"), 0), "name"), ==, "greet");
  g_assert_nonnull (mcp_json_get_string (first, "nextCursor"));
  second = test_client_result (client, "prompts/list",
                               json_pack ("{s:s}", "cursor", mcp_json_get_string (first, "nextCursor")));
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (second, "prompts"), 0), "name"), ==, "plain");
  greeting = test_client_result (client, "prompts/get",
                                 json_pack ("{s:s, s:{s:s}}", "name", "greet", "arguments", "name", "Ada"));
  g_assert_cmpstr (mcp_json_get_string (json_object_get (json_array_get (json_object_get (greeting, "messages"), 0),
                                                         "content"), "text"), ==, "Hello, Ada");
  refused = request_error_coded (client, -32602, "prompts/get", json_pack ("{s:s}", "name", "greet"));
  g_assert_cmpstr (refused, ==, "no prompt greet with those arguments");

  /* A JSON-RPC error of a tool call comes as the server sent it. */
  failed = test_client_read_reply (client, test_client_request (client, "tools/call",
                                                                json_pack ("{s:s, s:{}}", "name", "fail", "arguments")));
  error = json_object_get (failed, "error");
  g_assert_cmpint (json_integer_value (json_object_get (error, "code")), ==, -32603);
  g_assert_cmpstr (mcp_json_get_string (error, "message"), ==, "fixture failure as asked");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (error, "data"), "asked"), ==, "fail");

  /* Log messages as they came: the client sees one server. */
  logged = call_tool (client, "log", json_pack ("{s:s}", "text", "plain"));
  assert_result (logged, FALSE, "logged", NULL);
  message = test_client_last_notification (client, "notifications/message");
  g_assert_nonnull (message);
  g_assert_cmpstr (mcp_json_get_string (message, "logger"), ==, "fixture");
  g_assert_cmpstr (mcp_json_get_string (message, "data"), ==, "plain");
}

/* Runs @argv to its end with stdin closed; its exit status, and its
 * stderr in @err. */
static int
run_serve_refused (const char **argv,
                   char       **err)
{
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                               G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;

  g_subprocess_launcher_setenv (launcher, "HOME", scratch_home, TRUE);
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_EXPOSE");
  process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (process, NULL, NULL, NULL, err, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (process));
  return g_subprocess_get_exit_status (process);
}

/* --server names a configured server, and goes without --expose. */
static void
test_one_server_refusals (void)
{
  g_autofree char *config = write_config ((const char *[]) { "speaker", "[]", "other", "[]", NULL });
  const char *unknown[] = { test_mcp_pool_path (), "serve", "--config", config, "--server", "nobody", NULL };
  const char *both[] = { test_mcp_pool_path (), "serve", "--config", config, "--server", "speaker",
                         "--expose", "proxy", NULL };
  g_autofree char *unknown_err = NULL;
  g_autofree char *both_err = NULL;

  g_assert_cmpint (run_serve_refused (unknown, &unknown_err), ==, 2);
  g_assert_nonnull (strstr (unknown_err, "no server is named “nobody”"));
  g_assert_nonnull (strstr (unknown_err, "speaker, other"));
  g_assert_cmpint (run_serve_refused (both, &both_err), ==, 2);
  g_assert_nonnull (strstr (both_err, "does not go with --expose"));
  test_assert_no_children ();
}

/* Without the proxy there are no prompts, and asking says how to get them. */
static void
test_prompts_need_proxy (Fixture       *fixture,
                         gconstpointer  data)
{
  g_autoptr(json_t) listed = test_client_result (fixture->client, "prompts/list", NULL);
  g_autofree char *refused = request_error (fixture->client, "prompts/get", json_pack ("{s:s}", "name", "x"));

  g_autoptr(json_t) again = serve_initialize (fixture->client, "2025-11-25");

  g_assert_null (json_object_get (json_object_get (again, "capabilities"), "prompts"));
  g_assert_cmpuint (json_array_size (json_object_get (listed, "prompts")), ==, 0);
  g_assert_nonnull (strstr (refused, "--expose proxy"));
}

/* A warm tools/call of the usual shape reaches the server with its
 * arguments as the client wrote them (mcp-raw-call.h): nothing parses
 * and encodes them on the way.  One with a progress token is parsed, and
 * the server gets serve's own token. */
static void
test_proxy_arguments_as_sent (Fixture       *fixture,
                              gconstpointer  data)
{
  TestClient *client = fixture->client;
  const char *arguments = "{\"n\": 1.0e5, \"s\": \"\\u00e9\", \"a\": [ ]}";
  g_autoptr(json_t) warm_up = call_tool (client, "one__echo", json_pack ("{s:s}", "message", "1"));
  g_autofree char *line = g_strdup_printf ("{\"jsonrpc\":\"2.0\",\"id\":900,\"method\":\"tools/call\","
                                           "\"params\":{\"name\":\"one__request_line\",\"arguments\":%s}}",
                                           arguments);
  g_autofree char *expected = g_strdup_printf ("\"arguments\":%s", arguments);
  g_autofree char *with_token = g_strdup_printf ("{\"jsonrpc\":\"2.0\",\"id\":901,\"method\":\"tools/call\","
                                                 "\"params\":{\"name\":\"one__request_line\",\"arguments\":%s,"
                                                 "\"_meta\":{\"progressToken\":\"mine\"}}}", arguments);
  g_autoptr(json_t) reply = NULL;
  g_autoptr(json_t) parsed = NULL;
  const char *seen;

  assert_result (warm_up, FALSE, "Echo: 1", NULL);
  test_client_send_line (client, line);
  reply = test_client_read_reply (client, 900);
  seen = test_result_text (json_object_get (reply, "result"));
  g_assert_nonnull (strstr (seen, expected));
  g_assert_nonnull (strstr (seen, "\"name\":\"request_line\""));

  test_client_send_line (client, with_token);
  parsed = test_client_read_reply (client, 901);
  seen = test_result_text (json_object_get (parsed, "result"));
  g_assert_null (strstr (seen, expected));
  g_assert_null (strstr (seen, "mine"));
  g_assert_nonnull (strstr (seen, "\"progressToken\":"));
}

/* The client's trace context (OpenTelemetry's traceparent, tracestate and
 * baggage in _meta) reaches the server with the call, on the raw path and
 * the parsed one; nothing else of the client's _meta does, nor a 2026-07-28
 * client's capabilities, which a 2025 server had from initialize. */
static void
test_proxy_trace_context (Fixture       *fixture,
                          gconstpointer  data)
{
#define TRACEPARENT "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
  TestClient *client = fixture->client;
  g_autoptr(json_t) warm_up = call_tool (client, "one__echo", json_pack ("{s:s}", "message", "1"));
  const char *metas[] = {
    "{\"traceparent\":\"" TRACEPARENT "\",\"tracestate\":\"k=v\",\"other\":1}",
    "{\"traceparent\":\"" TRACEPARENT "\",\"tracestate\":\"k=v\",\"other\":1,\"progressToken\":\"p\"}",
    "{\"traceparent\":\"" TRACEPARENT "\",\"tracestate\":\"k=v\",\"other\":1,"
    "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
    "\"io.modelcontextprotocol/clientCapabilities\":{\"elicitation\":{}}}",
  };

  assert_result (warm_up, FALSE, "Echo: 1", NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (metas); i++)
    {
      g_autofree char *line = g_strdup_printf ("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
                                               "\"params\":{\"name\":\"one__request_line\",\"arguments\":{},"
                                               "\"_meta\":%s}}", 910 + (int) i, metas[i]);
      g_autoptr(json_t) reply = NULL;
      g_autoptr(json_t) seen = NULL;
      json_t *seen_meta;

      test_client_send_line (client, line);
      reply = test_client_read_reply (client, 910 + (json_int_t) i);
      seen = json_loads (test_result_text (json_object_get (reply, "result")), 0, NULL);
      seen_meta = json_object_get (json_object_get (seen, "params"), "_meta");
      g_assert_cmpstr (mcp_json_get_string (seen_meta, "traceparent"), ==, TRACEPARENT);
      g_assert_cmpstr (mcp_json_get_string (seen_meta, "tracestate"), ==, "k=v");
      g_assert_null (json_object_get (seen_meta, "other"));
      g_assert_null (json_object_get (seen_meta, "io.modelcontextprotocol/clientCapabilities"));
    }
#undef TRACEPARENT
}

/* A warm call makes no thread hop: once the server is started, its calls
 * are read, sent, answered and written by the main thread alone, so the
 * other threads of serve do not run meanwhile. */
static void
test_warm_no_thread_hop (Fixture       *fixture,
                         gconstpointer  data)
{
  enum { CALLS = 200 };
  TestClient *client = fixture->client;
  GPid pid = atoi (g_subprocess_get_identifier (client->process));
  g_autoptr(TestThreadSwitches) switches = NULL;

  if (test_under_valgrind ())
    {
      g_test_skip ("valgrind runs every thread of serve on one of its own, in turns");
      return;
    }
  /* The first call starts the server, on a worker. */
  json_decref (list_tools (client));
  json_decref (call_tool (client, "fixture__echo", json_pack ("{s:s}", "message", "start")));

  switches = test_thread_switches_begin (pid);
  for (guint i = 0; i < CALLS; i++)
    {
      g_autoptr(json_t) result = call_tool (client, "fixture__echo", json_pack ("{s:s}", "message", "warm"));

      assert_result (result, FALSE, "Echo: warm", NULL);
    }
  test_thread_switches_end (switches);

  /* Another thread that took part in the calls would switch at least once
   * per call; a few switches are left to threads that wake for their own
   * reasons (an idle worker that retires, a timer).  The main thread's are
   * only a sign that the counting sees it work: how often it sleeps
   * depends on how fast the client and the server are. */
  g_assert_cmpuint (test_thread_switches_of (switches, "main"), >, 0);
  g_assert_cmpuint (test_thread_switches_of (switches, "others"), <, CALLS / 10);
}

/* Default mode: run_python, whose code calls a server through the pool;
 * the run's servers are named, and the result carries the code's output. */
static void
test_code_run_python (Fixture       *fixture,
                      gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) tools = list_tools (client);
  g_autoptr(json_t) result = NULL;
  json_t *output;

  g_assert_nonnull (test_find_tool (tools, "run_python"));
  if (test_sandbox_skipped (NULL))
    return;
  result = call_tool (client, "run_python",
                      json_pack ("{s:s, s:[s]}", "code",
                                 "print((await mcp_alpha.echo(message='from code'))['content'][0]['text'])\n",
                                 "servers", "alpha"));
  output = json_object_get (result, "structuredContent");
  if (test_sandbox_skipped (result))
    return;
  /* The seed's compact format: the output as the text, and only what the
   * text does not imply in structuredContent. */
  g_assert_cmpstr (test_result_text (result), ==, "Echo: from code");
  test_assert_json (output, "{\"stdout\": [\"Echo: from code\"], \"servers\": [\"alpha\"]}");
  g_assert_false (json_is_true (json_object_get (result, "isError")));
}

/* Progress of the tools a run_python calls reaches the client as progress
 * of the run_python call, under its token, counting up, naming the tool. */
static void
test_code_progress (Fixture       *fixture,
                    gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) result = NULL;
  guint seen = 0;

  if (test_sandbox_skipped (NULL))
    return;
  result = test_client_result (client, "tools/call",
                               json_pack ("{s:s, s:{s:s, s:[s]}, s:{s:s}}", "name", "run_python", "arguments",
                                          "code", "print(await mcp_alpha.progress(steps=3, unwrap=True))\n", "servers", "alpha",
                                          "_meta", "progressToken", "run-1"));
  if (test_sandbox_skipped (result))
    return;
  g_assert_cmpstr (test_result_text (result), ==, "done 3 steps");
  /* A server's progress goes out before its reply, so all came before ours. */
  for (guint i = 0; i < client->notifications->len; i++)
    {
      json_t *notification = g_ptr_array_index (client->notifications, i);
      json_t *params = json_object_get (notification, "params");
      g_autofree char *message = g_strdup_printf ("alpha.progress: step %u", seen + 1);

      if (g_strcmp0 (mcp_json_get_string (notification, "method"), "notifications/progress") != 0)
        continue;
      g_assert_cmpstr (mcp_json_get_string (params, "progressToken"), ==, "run-1");
      g_assert_cmpint (json_integer_value (json_object_get (params, "progress")), ==, ++seen);
      g_assert_cmpstr (mcp_json_get_string (params, "message"), ==, message);
    }
  g_assert_cmpuint (seen, ==, 3);
}

/* run_python requests sent back to back run at once, each in a sandbox
 * of its own, while the warm sandbox is refilled; every one is answered,
 * round after round, and serve still ends on EOF. */
static void
test_code_concurrent_runs (Fixture       *fixture,
                           gconstpointer  data)
{
  TestClient *client = fixture->client;
  json_int_t ids[8];

  if (test_sandbox_skipped (NULL))
    return;
  for (guint round = 0; round < 3; round++)
    {
      for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
        {
          g_autofree char *source = g_strdup_printf ("print(await mcp_alpha.echo(message='run %u.%u', unwrap=True))\n",
                                                     round, i);

          ids[i] = test_client_request (client, "tools/call",
                                        json_pack ("{s:s, s:{s:s, s:[s]}}", "name", "run_python",
                                                   "arguments", "code", source, "servers", "alpha"));
        }
      for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
        {
          g_autoptr(json_t) reply = test_client_read_reply (client, ids[i]);
          json_t *result = json_object_get (reply, "result");
          g_autofree char *expected = g_strdup_printf ("Echo: run %u.%u", round, i);

          if (test_sandbox_skipped (result))
            return;
          if (json_is_true (json_object_get (result, "isError")))
            g_error ("Run %u.%u failed: %s", round, i, test_result_text (result));
          g_assert_cmpstr (test_result_text (result), ==, expected);
        }
    }
  serve_finish (client);
}

/* VmRSS of the serve process, in kB. */
static guint64
serve_rss_kb (TestClient *client)
{
  return test_process_rss_kib (g_subprocess_get_identifier (client->process));
}

/* How much serve may keep after a run that flooded it with requests: far
 * less than the flood (hundreds of MiB without a bound on the requests in
 * flight), far more than the noise. */
#define FLOOD_RSS_SLACK_KB (64 * 1024)

/* Code that writes tool calls on its RPC socket without end: the run
 * still ends by its timeout, and serve keeps none of the flood. */
static void
test_code_rpc_flood (Fixture       *fixture,
                     gconstpointer  data)
{
  static const char flood[] =
    "import os, socket\n"
    "raw = socket.socket(fileno=os.dup(int(os.environ['MCP_POOL_RPC_FD'])))\n"
    "line = (b'{\"id\":0,\"method\":\"call_tool\",\"params\":{\"server\":\"alpha\",'\n"
    "        b'\"tool\":\"echo\",\"arguments\":{\"message\":\"flood\"}}}\\n')\n"
    "print('flooding', flush=True)\n"
    "while True:\n"
    "    raw.sendall(line * 1000)\n";
  TestClient *client = fixture->client;
  g_autoptr(json_t) warm_up = NULL;
  g_autoptr(json_t) flooded = NULL;
  g_autoptr(json_t) after = NULL;
  guint64 rss_before;
  json_t *output;

  if (test_sandbox_skipped (NULL))
    return;
  /* The sandbox machinery and the server run once before the measure. */
  warm_up = call_tool (client, "run_python",
                       json_pack ("{s:s, s:[s]}", "code", "print(await mcp_alpha.echo(message='warm'))\n",
                                  "servers", "alpha"));
  if (test_sandbox_skipped (warm_up))
    return;
  assert_result (warm_up, FALSE, "Echo: warm", NULL);
  rss_before = serve_rss_kb (client);

  flooded = call_tool (client, "run_python",
                       json_pack ("{s:s, s:[s], s:i}", "code", flood, "servers", "alpha", "timeout", 3));
  output = json_object_get (flooded, "structuredContent");
  /* The seed's text, and that the client's Python session went with it. */
  g_assert_cmpstr (test_result_text (flooded), ==, "status: timeout\nflooding\nerror: Execution timed out after 3s"
                   SESSION_ENDED);
  test_assert_json (output, "{\"status\": \"timeout\", \"stdout\": [\"flooding\"], \"servers\": [\"alpha\"], "
                       "\"timeoutSeconds\": 3, \"error\": \"Execution timed out after 3s" SESSION_ENDED "\", "
                       "\"summary\": \"Timeout: execution exceeded 3s\"}");
  serve_settle (client);
  g_test_message ("serve's RSS: %" G_GUINT64_FORMAT " kB before the flood, %" G_GUINT64_FORMAT " kB after",
                  rss_before, serve_rss_kb (client));
#if !defined (__SANITIZE_ADDRESS__) && !defined (__SANITIZE_THREAD__)
  /* AddressSanitizer keeps freed memory in quarantine, and
   * ThreadSanitizer adds shadow memory, so RSS says nothing there. */
  g_assert_cmpuint (serve_rss_kb (client), <, rss_before + FLOOD_RSS_SLACK_KB);
#endif
  after = call_tool (client, "run_python",
                     json_pack ("{s:s, s:[s]}", "code", "print(await mcp_alpha.echo(message='after'))\n",
                                "servers", "alpha"));
  assert_result (after, FALSE, "Echo: after", NULL);
}

static void
test_code_resources (Fixture       *fixture,
                     gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) tools = list_tools (client);
  g_autoptr(json_t) listed = test_client_result (client, "resources/list", NULL);
  g_autoptr(json_t) read = test_client_result (client, "resources/read",
                                               json_pack ("{s:s}", "uri", "mcp-pool://capabilities"));
  g_autoptr(json_t) unknown = NULL;
  g_autoptr(json_t) seed = NULL;
  json_t *resource = json_array_get (json_object_get (listed, "resources"), 0);
  json_t *contents = json_array_get (json_object_get (read, "contents"), 0);
  const char *text = mcp_json_get_string (contents, "text");
  json_t *tool;
  size_t i;

  /* Neither gateway nor proxy tools; only run_python belongs here. */
  json_array_foreach (tools, i, tool)
    g_assert_cmpstr (mcp_json_get_string (tool, "name"), ==, "run_python");
  g_assert_cmpstr (mcp_json_get_string (resource, "uri"), ==, "mcp-pool://capabilities");
  g_assert_cmpstr (mcp_json_get_string (contents, "mimeType"), ==, "text/markdown");
  g_assert_nonnull (text);
  g_assert_nonnull (strstr (text, "alpha"));
  g_assert_nonnull (strstr (text, "beta"));
  /* The seed bridge's name for it reads the same. */
  seed = test_client_result (client, "resources/read",
                             json_pack ("{s:s}", "uri", "resource://mcp-server-code-execution-mode/capabilities"));
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (seed, "contents"), 0), "text"), ==, text);

  unknown = test_client_read_reply (client,
                                    test_client_request (client, "resources/read",
                                                         json_pack ("{s:s}", "uri", "mcp-pool://nosuch")));
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (unknown, "error"), "code")),
                   ==, MCP_JSONRPC_RESOURCE_NOT_FOUND);
}

/* Results pass through */

static void
test_pass_through (Fixture       *fixture,
                   gconstpointer  data)
{
  g_autoptr(json_t) failed = gateway_call (fixture->client, "fixture", "tool_error", json_object ());
  g_autoptr(json_t) stats = gateway_call (fixture->client, "fixture", "stats", json_object ());

  assert_result (failed, TRUE, "tool failed as asked", NULL);
  assert_result (stats, FALSE, "max_inflight", NULL);
  g_assert_true (json_is_integer (json_object_get (json_object_get (stats, "structuredContent"), "pid")));
}

/* A server that stops reading its stdin does not hold up the main
 * context: what it has not taken waits in mcp-pool, and other requests
 * are answered meanwhile. */
static void
test_server_not_reading (Fixture       *fixture,
                         gconstpointer  data)
{
  enum { BIG_CALLS = 4 };
  TestClient *client = fixture->client;
  g_autofree char *big = g_strnfill (256 * 1024, 'b');
  json_int_t ids[BIG_CALLS], ping;
  g_autoptr(json_t) pong = NULL;
  g_autoptr(json_t) stopped = NULL;

  json_decref (list_tools (client));
  stopped = call_tool (client, "fixture__stop_reading", json_object ());
  assert_result (stopped, FALSE, "stopped reading", NULL);

  /* A megabyte: more than the server reads and its pipe holds. */
  for (guint i = 0; i < BIG_CALLS; i++)
    ids[i] = test_client_request (client, "tools/call",
                                  json_pack ("{s:s, s:{s:s}}", "name", "fixture__echo", "arguments",
                                             "message", big));
  ping = test_client_request (client, "ping", NULL);
  pong = test_client_read_reply (client, ping);
  g_assert_nonnull (json_object_get (pong, "result"));
  /* Answered while the calls still wait for the server, not after they
   * failed.  The first may have been read, and answered, as the server's
   * reader stopped. */
  for (guint i = 1; i < BIG_CALLS; i++)
    for (guint j = 0; j < client->stash->len; j++)
      g_assert_false (test_message_has_id (g_ptr_array_index (client->stash, j), ids[i]));
}

/* Large results pass through as the server wrote them, whatever the id
 * of the client's request, and mean the same to the client. */
static void
test_large_results (Fixture       *fixture,
                    gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(GString) message = g_string_new (NULL);
  g_autoptr(json_t) huge = NULL;
  g_autoptr(json_t) echo = NULL;
  g_autoptr(json_t) reply = NULL;
  json_t *echoed;
  const char *text;

  json_decref (list_tools (client));
  /* A warm server: these go the main context's way. */
  json_decref (call_tool (client, "fixture__echo", json_pack ("{s:s}", "message", "start")));

  huge = call_tool (client, "fixture__huge", json_pack ("{s:i}", "bytes", 200000));
  text = test_result_text (huge);
  g_assert_nonnull (text);
  g_assert_cmpuint (strlen (text), ==, 200000);
  g_assert_true (text[0] == 'x' && text[199999] == 'x');

  /* Escapes, non-ASCII text and an embedded NUL survive. */
  while (message->len < 10000)
    g_string_append (message, "quote \" \\ tab\t é ✓ 𝄞 ");
  g_string_append_len (message, "nul\0end", 7);
  echo = call_tool (client, "fixture__echo",
                    json_pack ("{s:s%}", "message", message->str, (size_t) message->len));
  echoed = json_object_get (json_array_get (json_object_get (echo, "content"), 0), "text");
  g_assert_cmpuint (json_string_length (echoed), ==, strlen ("Echo: ") + message->len);
  g_assert_true (memcmp (json_string_value (echoed), "Echo: ", 6) == 0);
  g_assert_true (memcmp (json_string_value (echoed) + 6, message->str, message->len) == 0);

  /* The spliced reply carries the client's own id, here a string. */
  test_client_send_line (client, "{\"jsonrpc\":\"2.0\",\"id\":\"big-one\",\"method\":\"tools/call\","
                                 "\"params\":{\"name\":\"fixture__huge\",\"arguments\":{\"bytes\":50000}}}");
  reply = test_client_read_message (client);
  g_assert_cmpstr (mcp_json_get_string (reply, "id"), ==, "big-one");
  g_assert_cmpstr (mcp_json_get_string (reply, "jsonrpc"), ==, "2.0");
  g_assert_cmpuint (strlen (test_result_text (json_object_get (reply, "result"))), ==, 50000);
}

/* Failures evict; the next call starts afresh */

static void
test_crash (Fixture       *fixture,
            gconstpointer  data)
{
  json_int_t pid = fixture_stat (fixture->client, "fixture", "pid");
  g_autoptr(json_t) crash = gateway_call (fixture->client, "fixture", "crash", json_object ());

  assert_result (crash, TRUE, "fixture", "next call", NULL);
  g_assert_cmpint (fixture_stat (fixture->client, "fixture", "pid"), !=, pid);
}

static void
test_timeout (Fixture       *fixture,
              gconstpointer  data)
{
  json_int_t pid = fixture_stat (fixture->client, "fixture", "pid");
  g_autoptr(json_t) hang = test_client_result (fixture->client, "tools/call",
                                                gateway_call_params ("fixture", "hang", json_object (), 0.3));

  assert_result (hang, TRUE, "fixture", "in time", NULL);
  g_assert_cmpint (fixture_stat (fixture->client, "fixture", "pid"), !=, pid);
}

/* Bad input: an error, and serving goes on */

/* Sends @line; expects an error reply with @id (@code 0: any code). */
static void
assert_refused (TestClient *client,
                const char *line,
                json_int_t  id,
                int         code)
{
  g_autoptr(json_t) reply = NULL;
  json_t *error;

  test_client_send_line (client, line);
  reply = test_client_read_reply (client, id);
  error = json_object_get (reply, "error");
  g_assert_true (json_is_object (error));
  g_assert_nonnull (mcp_json_get_string (error, "message"));
  if (code != 0)
    g_assert_cmpint (json_integer_value (json_object_get (error, "code")), ==, code);
  serve_ping (client);
}

static void
test_bad_input (Fixture       *fixture,
                gconstpointer  data)
{
  TestClient *client = fixture->client;

  assert_refused (client, "not json", NULL_ID, MCP_JSONRPC_PARSE_ERROR);
  assert_refused (client, "[1,2]", NULL_ID, 0);
  assert_refused (client, "{\"jsonrpc\":\"2.0\",\"id\":1}", 1, MCP_JSONRPC_INVALID_REQUEST);
  assert_refused (client, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nosuch/method\"}", 2,
                  MCP_JSONRPC_METHOD_NOT_FOUND);
  assert_refused (client, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{}}", 3,
                  MCP_JSONRPC_INVALID_PARAMS);
  assert_refused (client,
                  "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"nosuch\"}}",
                  4, MCP_JSONRPC_INVALID_PARAMS);
  assert_refused (client, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":[1]}", 5,
                  MCP_JSONRPC_INVALID_PARAMS);
}

/* "\u0000" is valid JSON: a request that carries it is answered for its
 * id, and a NUL goes through a tool's arguments and result unchanged. */
static void
test_nul (Fixture       *fixture,
          gconstpointer  data)
{
  static const char expected[] = "Echo: a\0b";
  TestClient *client = fixture->client;
  g_autoptr(json_t) result = NULL;
  g_autoptr(json_t) reply = NULL;
  json_t *text;

  test_client_send_line (client, "{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"ping\","
                         "\"params\":{\"pad\":\"a\\u0000b\"}}");
  reply = test_client_read_reply (client, 41);
  g_assert_true (json_is_object (json_object_get (reply, "result")));

  result = gateway_call (client, "fixture", "echo", json_pack ("{s:s%}", "message", "a\0b", (size_t) 3));
  text = json_object_get (json_array_get (json_object_get (result, "content"), 0), "text");
  g_assert_true (json_is_string (text));
  g_assert_cmpmem (json_string_value (text), json_string_length (text), expected, sizeof expected - 1);

  /* Jansson cannot hold a NUL in a member name: still an answer for the id. */
  assert_refused (client, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\","
                  "\"params\":{\"a\\u0000b\":1}}", 42, MCP_JSONRPC_INVALID_REQUEST);
  /* A notification gets no answer, however it is written. */
  test_client_send_line (client, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\","
                         "\"params\":{\"a\\u0000b\":1}}");
  serve_settle (client);
  for (guint i = 0; i < client->stash->len; i++)
    g_assert_false (test_message_has_id (g_ptr_array_index (client->stash, i), NULL_ID));
}

/* The line cap is 32 MiB and has no option: one byte-heavy request. */
static void
test_long_line (Fixture       *fixture,
                gconstpointer  data)
{
  g_autoptr(GString) line =
    g_string_new ("{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"ping\",\"params\":{\"pad\":\"");
  gsize padding = 33 * 1024 * 1024;

  g_string_set_size (line, line->len + padding);
  memset (line->str + line->len - padding, 'x', padding);
  g_string_append (line, "\"}}");
  assert_refused (fixture->client, line->str, NULL_ID, 0);
}

/* The limit on a client's messages can be set; over it, a request is
 * refused and serving goes on. */
static void
test_max_message_bytes (void)
{
  g_autofree char *config = write_config ((const char * const []) { "fixture", "[]", NULL });
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  const char *argv[] = { test_mcp_pool_path (), "serve", "--config", config, "--expose", "gateway", NULL };
  g_auto(GStrv) wrapped = test_wrap_argv (argv);
  g_autoptr(GString) line = g_string_new ("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":{\"pad\":\"");
  g_autoptr(TestClient) client = NULL;
  g_autoptr(json_t) result = NULL;

  g_subprocess_launcher_setenv (launcher, "HOME", scratch_home, TRUE);
  g_subprocess_launcher_setenv (launcher, "MCP_POOL_MAX_MESSAGE_BYTES", "2048", TRUE);
  g_subprocess_launcher_set_cwd (launcher, scratch_home);
  client = test_client_new (launcher, (const char * const *) wrapped);
  result = serve_initialize (client, "2025-11-25");

  for (int i = 0; i < 3000; i++)
    g_string_append_c (line, 'x');
  g_string_append (line, "\"}}");
  assert_refused (client, line->str, NULL_ID, MCP_JSONRPC_INVALID_REQUEST);
  serve_finish (client);
  g_clear_pointer (&client, test_client_free);
  test_assert_no_children ();
}

/* Progress */

static void
test_progress (Fixture       *fixture,
               gconstpointer  data)
{
  TestClient *client = fixture->client;
  json_t *params = gateway_call_params ("fixture", "progress", json_pack ("{s:i}", "steps", 3), 0);
  g_autoptr(json_t) reply = NULL;
  json_int_t step = 0;

  json_object_set_new (params, "_meta", json_pack ("{s:s}", "progressToken", "tok"));
  g_ptr_array_set_size (client->notifications, 0);
  reply = test_client_read_reply (client, test_client_request (client, "tools/call", params));
  assert_result (json_object_get (reply, "result"), FALSE, "done 3 steps", NULL);

  /* Every one of them came before the reply, in order. */
  for (guint i = 0; i < client->notifications->len; i++)
    {
      json_t *progress = json_object_get (g_ptr_array_index (client->notifications, i), "params");

      g_assert_cmpstr (mcp_json_get_string (progress, "progressToken"), ==, "tok");
      g_assert_cmpint (json_integer_value (json_object_get (progress, "progress")), ==, ++step);
    }
  g_assert_cmpint (step, ==, 3);
  g_assert_cmpuint (test_client_count_notifications (client, "notifications/progress"), ==, 3);
}

/* Cancellation */

static gboolean
hang_in_flight (gpointer data)
{
  /* The stats call counts itself. */
  return fixture_stat (data, "fixture", "inflight") >= 2;
}

static void
test_cancel (Fixture       *fixture,
             gconstpointer  data)
{
  TestClient *client = fixture->client;
  json_int_t pid = fixture_stat (client, "fixture", "pid");
  json_int_t id = test_client_request (client, "tools/call",
                                       gateway_call_params ("fixture", "hang", json_object (), 100));

  g_assert_true (test_wait_for (hang_in_flight, client, TEST_CLIENT_WAIT_MS));
  test_client_notify (client, "notifications/cancelled",
                      json_pack ("{s:I, s:s}", "requestId", id, "reason", "test"));
  serve_ping (client);
  g_assert_cmpint (fixture_stat (client, "fixture", "pid"), ==, pid);

  serve_finish (client);
  for (guint i = 0; i < client->stash->len; i++)
    g_assert_false (test_message_has_id (g_ptr_array_index (client->stash, i), id));
}

/* Concurrency */

static void
test_concurrency (Fixture       *fixture,
                  gconstpointer  data)
{
  TestClient *client = fixture->client;
  json_int_t ids[8];
  g_autofree char *slept = g_strdup_printf ("slept %u", test_timeout_ms (300));

  /* Started first, so the eight calls overlap in the server, not in its
   * start; long enough, even under valgrind, for all eight to overlap. */
  fixture_stat (client, "fixture", "pid");
  for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
    ids[i] = test_client_request (client, "tools/call",
                                  gateway_call_params ("fixture", "sleep",
                                                       json_pack ("{s:i}", "ms", test_timeout_ms (300)), 0));
  for (guint i = G_N_ELEMENTS (ids); i > 0; i--)
    {
      g_autoptr(json_t) reply = test_client_read_reply (client, ids[i - 1]);

      assert_result (json_object_get (reply, "result"), FALSE, slept, NULL);
    }
  g_assert_cmpint (fixture_stat (client, "fixture", "max_inflight"), >=, 8);
}

/* Ending */

/* Reaps @pid if it was orphaned to this process; TRUE once it is gone. */
static gboolean
process_reaped (gpointer data)
{
  GPid pid = GPOINTER_TO_INT (data);
  pid_t result = waitpid (pid, NULL, WNOHANG);

  return result == pid || (result < 0 && test_process_gone (pid));
}

/* The stubborn server's pid, the launcher's and its grandchild's, after
 * calls that make sure they run. */
static void
ending_pids (TestClient *client,
             GPid        pids[3])
{
  g_autoptr(json_t) launcher = fixture_stats (client, "launcher");

  pids[0] = fixture_stat (client, "stubborn", "pid");
  pids[1] = json_integer_value (json_object_get (launcher, "pid"));
  pids[2] = json_integer_value (json_object_get (launcher, "grandchild_pid"));
  g_assert_cmpint (pids[2], >, 0);
}

static void
assert_all_gone (const GPid pids[3])
{
  for (guint i = 0; i < 3; i++)
    g_assert_true (test_wait_for (process_reaped, GINT_TO_POINTER (pids[i]), GONE_TIMEOUT_MS));
}

static void
test_end_on_eof (Fixture       *fixture,
                 gconstpointer  data)
{
  GPid pids[3];

  ending_pids (fixture->client, pids);
  serve_finish (fixture->client);
  assert_all_gone (pids);
}

static void
test_end_on_sigterm (Fixture       *fixture,
                     gconstpointer  data)
{
  GPid pids[3];

  ending_pids (fixture->client, pids);
  g_subprocess_send_signal (fixture->client->process, SIGTERM);
  test_client_wait_exit (fixture->client);
  assert_all_gone (pids);
}

/* SIGKILL leaves mcp-pool no time to end anything: its keeper kills every
 * group, so the launcher's grandchild, which PR_SET_PDEATHSIG does not
 * reach, is gone too. */
static void
test_end_on_sigkill (Fixture       *fixture,
                     gconstpointer  data)
{
  GPid pids[3];

  ending_pids (fixture->client, pids);
  g_subprocess_send_signal (fixture->client->process, SIGKILL);
  test_client_wait_exit (fixture->client);
  g_assert_true (g_subprocess_get_if_signaled (fixture->client->process));
  g_assert_cmpint (g_subprocess_get_term_sig (fixture->client->process), ==, SIGKILL);
  assert_all_gone (pids);
}

/* list_changed */

static void
test_list_changed (Fixture       *fixture,
                   gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) tools = list_tools (client);
  g_autoptr(json_t) sent = NULL;

  /* Announcements of the first start are written by now: what comes next
   * is the answer to the server's notification. */
  serve_settle (client);
  g_ptr_array_set_size (client->notifications, 0);
  sent = call_tool (client, "fixture__notify_list_changed", json_object ());
  assert_result (sent, FALSE, "sent", NULL);
  test_client_wait_notification (client, "notifications/tools/list_changed");
}

/* A client that leaves or lags, a server that is busy */

static gboolean
server_starting (gpointer data)
{
  g_autoptr(json_t) listed = call_tool (data, "list_servers", json_object ());

  return g_strcmp0 (mcp_json_get_string (structured_item (listed, "servers", 0), "state"), "starting") == 0;
}

/* A call waiting for a start when the client leaves gets an answer that
 * says why. */
static void
test_end_while_starting (Fixture       *fixture,
                         gconstpointer  data)
{
  TestClient *client = fixture->client;
  json_t *params = gateway_call_params ("slow", "echo", json_pack ("{s:s}", "message", "x"), 0);
  json_int_t id = test_client_request (client, "tools/call", params);
  g_autoptr(json_t) reply = NULL;
  json_t *result;

  g_assert_true (test_wait_for (server_starting, client, TEST_CLIENT_WAIT_MS));
  serve_finish (client);
  reply = test_client_read_reply (client, id);
  result = json_object_get (reply, "result");
  assert_result (result, TRUE, "slow", "shutting down", NULL);
}

/* A client that stops reading its replies must not kill mcp-pool. */
static void
test_end_stdout_closed (Fixture       *fixture,
                        gconstpointer  data)
{
  TestClient *client = fixture->client;

  test_client_close_output (client);
  test_client_request (client, "ping", NULL);
  test_client_close_input (client);
  test_client_wait_exit (client);
  g_assert_true (g_subprocess_get_if_exited (client->process));
  g_assert_cmpint (g_subprocess_get_exit_status (client->process), ==, 0);
}

/* A ping needs no server: it is answered while every worker is busy. */
static void
test_ping_while_busy (Fixture       *fixture,
                      gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(json_t) reply = NULL;

  fixture_stat (client, "fixture", "pid");
  /* More than mcp-serve.c's 32 workers; each call gives up after 5 s. */
  for (guint i = 0; i < 40; i++)
    test_client_request (client, "tools/call", gateway_call_params ("fixture", "hang", json_object (), 5));
  reply = test_client_read_reply (client, test_client_request (client, "ping", NULL));
  g_assert_true (json_is_object (json_object_get (reply, "result")));
  /* No call had finished: the ping did not wait for one. */
  g_assert_cmpuint (client->stash->len, ==, 0);
}

/* The client stops reading for a while.  The stall is the scenario under
 * test, not a wait for something to happen. */
#define CLIENT_STALL_US (2 * G_USEC_PER_SEC)

/* Every line a client reads is a whole message, even after it stalled. */
static void
test_slow_client (Fixture       *fixture,
                  gconstpointer  data)
{
  TestClient *client = fixture->client;
  json_int_t ping;
  char *line;

  test_client_request (client, "tools/call",
                       gateway_call_params ("fixture", "huge", json_pack ("{s:i}", "bytes", 1 << 20), 0));
  g_usleep (CLIENT_STALL_US);
  ping = test_client_request (client, "ping", NULL);
  while ((line = test_client_read_line (client)) != NULL)
    {
      g_autoptr(json_t) message = json_loads (line, 0, NULL);

      g_free (line);
      g_assert_nonnull (message);
      if (test_message_has_id (message, ping))
        return;
    }
  g_assert_not_reached ();
}

/* A client that reads a little at a time, slowly, so that replies far
 * larger than the pipe go out in many pieces: each arrives whole, in order. */
#define SLOW_READER_REPLIES 40
#define SLOW_READER_ID_SIZE (30 * 1024)
#define SLOW_READER_BITE    4096
#define SLOW_READER_PAUSE_US 500    /* the slowness under test, not a wait */

static char *
slow_reader_id (guint index)
{
  g_autofree char *head = g_strdup_printf ("slow-%03u-", index);
  GString *id = g_string_new (head);

  while (id->len < SLOW_READER_ID_SIZE)
    g_string_append_c (id, 'a' + (index + id->len) % 26);
  return g_string_free (id, FALSE);
}

/* Lines of @text that are complete, parsed into @lines; the rest stays. */
static void
take_complete_lines (GString   *text,
                     GPtrArray *lines)
{
  char *newline;

  while ((newline = memchr (text->str, '\n', text->len)) != NULL)
    {
      json_t *message = json_loadb (text->str, newline - text->str, 0, NULL);

      g_assert_true (json_is_object (message));
      g_ptr_array_add (lines, message);
      g_string_erase (text, 0, newline - text->str + 1);
    }
}

static void
test_slow_reader (Fixture       *fixture,
                  gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GPtrArray) replies = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  gint64 deadline;

  /* Everything before this is read: what follows are the pings' replies. */
  serve_settle (client);
  for (guint i = 0; i < SLOW_READER_REPLIES; i++)
    {
      g_autofree char *id = slow_reader_id (i);

      test_client_send (client, json_pack ("{s:s, s:s, s:s}", "jsonrpc", "2.0", "id", id, "method", "ping"));
    }
  deadline = g_get_monotonic_time () + TEST_CLIENT_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
  while (replies->len < SLOW_READER_REPLIES)
    {
      struct pollfd pfd = { .fd = client->output_fd, .events = POLLIN };
      char bite[SLOW_READER_BITE];
      ssize_t n;

      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      if (poll (&pfd, 1, 100) <= 0)
        continue;
      n = read (client->output_fd, bite, sizeof bite);
      if (n < 0 && errno == EINTR)
        continue;
      g_assert_cmpint (n, >, 0);
      g_string_append_len (text, bite, n);
      take_complete_lines (text, replies);
      g_usleep (SLOW_READER_PAUSE_US);
    }
  g_assert_cmpuint (text->len, ==, 0);
  for (guint i = 0; i < SLOW_READER_REPLIES; i++)
    {
      json_t *reply = g_ptr_array_index (replies, i);
      g_autofree char *id = slow_reader_id (i);

      g_assert_cmpstr (mcp_json_get_string (reply, "id"), ==, id);
      g_assert_true (json_is_object (json_object_get (reply, "result")));
    }
  serve_settle (client);
}

/* The names of @pid's threads that start with @prefix. */
static guint
count_threads_named (GPid        pid,
                     const char *prefix)
{
  g_autofree char *tasks = g_strdup_printf ("/proc/%d/task", (int) pid);
  g_autoptr(GDir) dir = g_dir_open (tasks, 0, NULL);
  const char *task;
  guint count = 0;

  g_assert_nonnull (dir);
  while ((task = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (tasks, task, "comm", NULL);
      g_autofree char *name = NULL;

      /* A thread may end between the listing and the read. */
      if (!g_file_get_contents (path, &name, NULL, NULL))
        continue;
      g_test_message ("thread %s: %s", task, g_strchomp (name));
      count += g_str_has_prefix (name, prefix);
    }
  return count;
}

#define NO_WRITER_PINGS 1000

/* Replies go out from the main context: serving pings (which need no
 * worker), even a burst that waits for a client that reads late, starts
 * no thread of a GThreadPool, as the writer thread was. */
static void
test_no_writer_thread (Fixture       *fixture,
                       gconstpointer  data)
{
  TestClient *client = fixture->client;
  GPid pid = atoi (g_subprocess_get_identifier (client->process));
  json_int_t first = 0;

  /* Under valgrind (check-valgrind's wrapper) the threads are still
   * mcp-pool's, with their names. */
  for (guint i = 0; i < NO_WRITER_PINGS; i++)
    {
      json_int_t id = test_client_request (client, "ping", NULL);

      first = i == 0 ? id : first;
    }
  for (guint i = 0; i < NO_WRITER_PINGS; i++)
    {
      g_autoptr(json_t) reply = test_client_read_reply (client, first + i);

      g_assert_true (json_is_object (json_object_get (reply, "result")));
    }
  g_assert_cmpuint (count_threads_named (pid, "pool-"), ==, 0);
}

/* Limits */

#define MAX_PENDING     4
#define OVER_THE_LIMIT  16
/* Longer than the test: these calls end when their server is killed. */
#define HELD_SLEEP_MS   (10 * 60 * 1000)

static void
assert_busy (json_t *reply)
{
  json_t *error = json_object_get (reply, "error");
  const char *message = mcp_json_get_string (error, "message");

  g_assert_true (json_is_object (error));
  g_assert_cmpint (json_integer_value (json_object_get (error, "code")), ==, MCP_JSONRPC_SERVER_BUSY);
  g_assert_nonnull (message);
  g_assert_nonnull (strstr (message, "busy"));
  g_assert_nonnull (strstr (message, G_STRINGIFY (MAX_PENDING) " requests"));
  g_assert_nonnull (strstr (message, "Retry later"));
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (error, "data"), "maxPending")),
                   ==, MAX_PENDING);
}

typedef struct {
  const char *path;
  const char *line;
  guint       count;
} NoteCount;

/* TRUE once the fixture's note file has @line at least @count times. */
static gboolean
noted (gpointer data)
{
  NoteCount *wanted = data;
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;
  guint count = 0;

  if (!g_file_get_contents (wanted->path, &text, NULL, NULL))
    return FALSE;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    count += g_str_equal (lines[i], wanted->line);
  return count >= wanted->count;
}

/* Past MCP_POOL_MAX_PENDING requests in flight, a request is refused at
 * once; the others are answered, every request exactly once, and serving
 * goes on.  The calls in flight sleep longer than the test, so "at once"
 * needs no clock: the refusals can only come while they still run. */
static void
test_max_pending (void)
{
  g_autofree char *notes = g_build_filename (scratch_home, "max-pending-notes.txt", NULL);
  g_autofree char *flags = g_strdup_printf ("[\"--note-file\", \"%s\"]", notes);
  g_autofree char *config = write_config ((const char * const []) { "fixture", flags, NULL });
  NoteCount all_held = { notes, "call sleep", MAX_PENDING };
  g_autoptr(TestClient) client = serve_new_with (config, "gateway", "MCP_POOL_MAX_PENDING",
                                                 G_STRINGIFY (MAX_PENDING));
  json_int_t held[MAX_PENDING], refused[OVER_THE_LIMIT], after[MAX_PENDING];
  g_autoptr(json_t) result = serve_initialize (client, "2025-11-25");
  json_int_t pid;

  test_client_notify (client, "notifications/initialized", NULL);
  pid = fixture_stat (client, "fixture", "pid");
  for (guint i = 0; i < MAX_PENDING; i++)
    held[i] = test_client_request (client, "tools/call",
                                   gateway_call_params ("fixture", "sleep",
                                                        json_pack ("{s:i}", "ms", HELD_SLEEP_MS), 120));
  for (guint i = 0; i < OVER_THE_LIMIT; i++)
    refused[i] = test_client_request (client, "tools/call",
                                      gateway_call_params ("fixture", "sleep", json_pack ("{s:i}", "ms", 1), 0));
  for (guint i = 0; i < OVER_THE_LIMIT; i++)
    {
      g_autoptr(json_t) reply = test_client_read_reply (client, refused[i]);

      assert_busy (reply);
    }
  /* Answered by mcp-pool itself, so not held back by the limit. */
  serve_ping (client);
  for (guint i = 0; i < client->stash->len; i++)
    for (guint j = 0; j < MAX_PENDING; j++)
      g_assert_false (test_message_has_id (g_ptr_array_index (client->stash, i), held[j]));

  /* The held calls end with their server, with an error each, once each
   * has reached it: one still on its way would start a new server, and
   * sleep there for the rest of the test. */
  g_assert_true (test_wait_for (noted, &all_held, TEST_CLIENT_WAIT_MS));
  g_assert_cmpint (kill (pid, SIGKILL), ==, 0);
  for (guint i = 0; i < MAX_PENDING; i++)
    {
      g_autoptr(json_t) reply = test_client_read_reply (client, held[i]);

      assert_result (json_object_get (reply, "result"), TRUE, "fixture", NULL);
    }

  /* Below the limit again: calls go through. */
  for (guint i = 0; i < MAX_PENDING; i++)
    after[i] = test_client_request (client, "tools/call",
                                    gateway_call_params ("fixture", "sleep", json_pack ("{s:i}", "ms", 1), 0));
  for (guint i = 0; i < MAX_PENDING; i++)
    {
      g_autoptr(json_t) reply = test_client_read_reply (client, after[i]);

      assert_result (json_object_get (reply, "result"), FALSE, "slept 1", NULL);
    }

  /* No second answer to anything came before the end. */
  serve_finish (client);
  for (guint i = 0; i < client->stash->len; i++)
    {
      json_t *message = g_ptr_array_index (client->stash, i);

      for (guint j = 0; j < MAX_PENDING; j++)
        g_assert_false (test_message_has_id (message, held[j]) || test_message_has_id (message, after[j]));
      for (guint j = 0; j < OVER_THE_LIMIT; j++)
        g_assert_false (test_message_has_id (message, refused[j]));
    }
  g_clear_pointer (&client, test_client_free);
  g_unlink (notes);
  test_assert_no_children ();
}

/* Far more pings than mcp-pool keeps answers for plus what the pipes hold. */
#define FLOOD_MAX_PINGS 200000
#define FLOOD_FIRST_ID  1000000
#define PUSH_BACK_QUIET_MS 2000

/* Sends pings without reading until mcp-pool stops reading them; the
 * number sent. */
static json_int_t
flood_until_pushed_back (TestClient *client)
{
  int fd = g_unix_output_stream_get_fd (G_UNIX_OUTPUT_STREAM (client->input));
  int flags = fcntl (fd, F_GETFL);
  json_int_t sent = 0;

  g_assert_cmpint (fcntl (fd, F_SETFL, flags | O_NONBLOCK), ==, 0);
  while (sent < FLOOD_MAX_PINGS)
    {
      g_autofree char *line =
        g_strdup_printf ("{\"jsonrpc\":\"2.0\",\"id\":%" JSON_INTEGER_FORMAT ",\"method\":\"ping\"}\n",
                         FLOOD_FIRST_ID + sent);
      ssize_t n = write (fd, line, strlen (line));

      /* A line shorter than PIPE_BUF goes into the pipe whole or not at all.
       * A full pipe may only mean that mcp-pool is a moment behind; one
       * that stays full is the push-back.  (On a loaded machine a stall
       * can pass for it, which weakens the test but cannot fail it.) */
      if (n < 0 && errno == EAGAIN)
        {
          struct pollfd pfd = { .fd = fd, .events = POLLOUT };

          if (poll (&pfd, 1, PUSH_BACK_QUIET_MS) == 0)
            break;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      g_assert_cmpint (n, ==, strlen (line));
      sent++;
    }
  g_assert_cmpint (fcntl (fd, F_SETFL, flags), ==, 0);
  g_test_message ("mcp-pool pushed back after %" JSON_INTEGER_FORMAT " pings", sent);
  g_assert_cmpint (sent, <, FLOOD_MAX_PINGS);
  return sent;
}

/* A client that sends and never reads is pushed back through its pipe,
 * instead of mcp-pool queueing answers for it without bound; once it
 * reads, every request has its one answer. */
static void
test_push_back (Fixture       *fixture,
                gconstpointer  data)
{
  TestClient *client = fixture->client;
  g_autoptr(GHashTable) seen = g_hash_table_new (NULL, NULL);
  json_int_t sent = flood_until_pushed_back (client);

  while ((guint) g_hash_table_size (seen) < sent)
    {
      g_autoptr(json_t) reply = test_client_read_message (client);
      json_int_t id = json_integer_value (json_object_get (reply, "id"));

      g_assert_nonnull (reply);
      g_assert_true (json_is_object (json_object_get (reply, "result")));
      g_assert_true (id >= FLOOD_FIRST_ID && id < FLOOD_FIRST_ID + sent);
      g_assert_true (g_hash_table_add (seen, GINT_TO_POINTER ((int) (id - FLOOD_FIRST_ID))));
    }
  serve_settle (client);
}

/* A client that is being pushed back and closes stdin ends mcp-pool then,
 * though mcp-pool reads no more and its answers are not taken away: the
 * process exits while the client still reads nothing. */
static void
test_push_back_eof (Fixture       *fixture,
                    gconstpointer  data)
{
  TestClient *client = fixture->client;

  flood_until_pushed_back (client);
  test_client_close_input (client);
  test_client_wait_process (client);
  g_assert_true (g_subprocess_get_if_exited (client->process));
  g_assert_cmpint (g_subprocess_get_exit_status (client->process), ==, 0);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  /* Orphans of mcp-pool come to this process, so a leak shows as a child. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  signal (SIGPIPE, SIG_IGN);

#define ADD(path, setup, test) \
  g_test_add (path, Fixture, &setup, fixture_set_up, test, fixture_tear_down)
  /* Over stdio as PATH, and over HTTP as /serve/http/… */
#define ADD_BOTH(path, setup, test) \
  G_STMT_START { ADD (path, setup, test); add_over_http (path, &setup, test); } G_STMT_END
  g_test_add_func ("/serve/handshake", test_handshake);
  g_test_add_func ("/serve/stateless", test_stateless);
  g_test_add_func ("/serve/stateless-input", test_stateless_input);
  g_test_add_func ("/serve/stateless-tasks", test_stateless_tasks);
  ADD_BOTH ("/serve/gateway/list", gateway_setup, test_gateway_list);
  ADD_BOTH ("/serve/gateway/discovery", gateway_setup, test_gateway_discovery);
  ADD_BOTH ("/serve/gateway/call", gateway_setup, test_gateway_call);
  ADD_BOTH ("/serve/gateway/bad-arguments", gateway_setup, test_gateway_bad_arguments);
  ADD_BOTH ("/serve/proxy/names", proxy_names_setup, test_proxy_names);
  ADD_BOTH ("/serve/proxy/call", proxy_names_setup, test_proxy_call);
  ADD ("/serve/proxy/arguments-as-sent", proxy_names_setup, test_proxy_arguments_as_sent);
  ADD ("/serve/proxy/trace-context", proxy_names_setup, test_proxy_trace_context);
  ADD_BOTH ("/serve/proxy/prompts", prompts_setup, test_proxy_prompts);
  ADD_BOTH ("/serve/one-server/as-is", one_server_setup, test_one_server_as_is);
  g_test_add_func ("/serve/one-server/refusals", test_one_server_refusals);
  ADD_BOTH ("/serve/proxy/completions", prompts_setup, test_proxy_completions);
  ADD_BOTH ("/serve/proxy/logging", logging_setup, test_proxy_logging);
  ADD ("/serve/proxy/client-requests", proxy_setup, test_proxy_client_requests);
  ADD ("/serve/proxy/client-request-cancelled", proxy_setup, test_proxy_client_request_cancelled);
  ADD_BOTH ("/serve/proxy/resources", resources_setup, test_proxy_resources);
  ADD_BOTH ("/serve/proxy/resource-updates", resources_setup, test_proxy_resource_updates);
  ADD_BOTH ("/serve/proxy/call-starts-its-server", lazy_setup, test_proxy_call_starts_its_server);
  ADD_BOTH ("/serve/proxy/tasks", task_tool_setup, test_proxy_tasks);
  ADD_BOTH ("/serve/gateway/no-prompts", gateway_setup, test_prompts_need_proxy);
  ADD ("/serve/warm/no-thread-hop", proxy_setup, test_warm_no_thread_hop);
  ADD ("/serve/warm/server-not-reading", proxy_setup, test_server_not_reading);
  ADD_BOTH ("/serve/code/resources", code_setup, test_code_resources);
  ADD_BOTH ("/serve/code/progress", code_setup, test_code_progress);
  ADD_BOTH ("/serve/code/run-python", code_setup, test_code_run_python);
  ADD_BOTH ("/serve/code/concurrent-runs", code_setup, test_code_concurrent_runs);
  ADD ("/serve/code/rpc-flood", code_setup, test_code_rpc_flood);
  ADD_BOTH ("/serve/results/pass-through", gateway_setup, test_pass_through);
  ADD_BOTH ("/serve/results/large", proxy_setup, test_large_results);
  ADD_BOTH ("/serve/failure/crash", gateway_setup, test_crash);
  ADD_BOTH ("/serve/failure/timeout", gateway_setup, test_timeout);
  ADD_BOTH ("/serve/bad-input/messages", gateway_setup, test_bad_input);
  ADD ("/serve/bad-input/long-line", gateway_setup, test_long_line);
  ADD ("/serve/bad-input/nul", gateway_setup, test_nul);
  g_test_add_func ("/serve/bad-input/max-message-bytes", test_max_message_bytes);
  ADD_BOTH ("/serve/progress", gateway_setup, test_progress);
  ADD_BOTH ("/serve/cancel", gateway_setup, test_cancel);
  ADD_BOTH ("/serve/concurrency", gateway_setup, test_concurrency);
  ADD ("/serve/end/stdin-eof", ending_setup, test_end_on_eof);
  ADD ("/serve/end/sigterm", ending_setup, test_end_on_sigterm);
  ADD ("/serve/end/sigkill", ending_setup, test_end_on_sigkill);
  ADD_BOTH ("/serve/proxy/list-changed", proxy_setup, test_list_changed);
  ADD ("/serve/end/while-starting", slow_start_setup, test_end_while_starting);
  ADD ("/serve/end/stdout-closed", gateway_setup, test_end_stdout_closed);
  ADD ("/serve/busy/ping", gateway_setup, test_ping_while_busy);
  ADD ("/serve/busy/slow-client", gateway_setup, test_slow_client);
  ADD ("/serve/busy/slow-reader", gateway_setup, test_slow_reader);
  ADD ("/serve/threads/no-writer", gateway_setup, test_no_writer_thread);
  g_test_add_func ("/serve/busy/max-pending", test_max_pending);
  ADD ("/serve/busy/push-back", gateway_setup, test_push_back);
  ADD ("/serve/busy/push-back-eof", gateway_setup, test_push_back_eof);
#undef ADD

  scratch_home = g_dir_make_tmp ("mcp-pool-home-XXXXXX", NULL);
  status = g_test_run ();
  g_clear_pointer (&http_setups, g_ptr_array_unref);
  {
    g_autofree char *command = g_strdup_printf ("rm -rf '%s'", scratch_home);
    g_spawn_command_line_sync (command, NULL, NULL, NULL, NULL);
  }
  return status;
}
