/* test-pool.c — the persistent pool against the fixture server: one start
 * for many first callers, multiplexing, eviction, backoff, idle reaping,
 * list_changed, the generation rule and whole-pool shutdown.  Every test
 * ends by checking that no process and no fd is left. */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>

#include "pool/mcp-config-watcher.h"
#include "common/mcp-jsonrpc.h"
#include "pool/mcp-pool.h"
#include "test-io-thread.h"
#include "test-procs.h"
#include "test-wait.h"

/* How long a test waits for a callback, scaled for slow runs. */
#define WAIT_US (test_timeout_ms (10 * 1000) * G_TIME_SPAN_MILLISECOND)

typedef struct {
  TestIoThread *io;
  McpPool      *pool;
  guint         fds_before;
  GAsyncQueue  *tools_changed;   /* server names */
  GAsyncQueue  *states;          /* "server:state" */
  char         *scratch;
} Fixture;

static void
on_state_changed (McpPool *pool, const char *server, McpServerState state, gpointer user_data)
{
  Fixture *fixture = user_data;
  g_async_queue_push (fixture->states, g_strdup_printf ("%s:%s", server, mcp_server_state_to_string (state)));
}

static void
on_tools_changed (McpPool *pool, const char *server, gpointer user_data)
{
  Fixture *fixture = user_data;
  g_async_queue_push (fixture->tools_changed, g_strdup (server));
}

static void
setup (Fixture *fixture, gconstpointer data)
{
  McpPoolOptions options = { .backoff_initial_ms = 200, .backoff_max_ms = 1600 };

  /* Tests that must not see a background re-list push it far out. */
  if (g_strcmp0 (data, "no-relist") == 0)
    options.relist_debounce_ms = 10 * 60 * 1000;
  McpPoolCallbacks callbacks = { on_state_changed, on_tools_changed, fixture };

  fixture->fds_before = test_count_open_fds ();
  fixture->io = test_io_thread_new ();
  fixture->tools_changed = g_async_queue_new_full (g_free);
  fixture->states = g_async_queue_new_full (g_free);
  fixture->pool = mcp_pool_new (test_io_thread_get_context (fixture->io), &options, &callbacks);
  fixture->scratch = g_dir_make_tmp ("mcp-pool-test-XXXXXX", NULL);
}

static void
teardown (Fixture *fixture, gconstpointer data)
{
  mcp_pool_shutdown (fixture->pool, 200 * 1000, 200 * 1000);
  g_clear_pointer (&fixture->pool, mcp_pool_free);
  test_assert_no_children ();
  g_clear_pointer (&fixture->io, test_io_thread_free);
  test_assert_open_fds (fixture->fds_before);
  g_async_queue_unref (fixture->tools_changed);
  g_async_queue_unref (fixture->states);
  g_rmdir (fixture->scratch);
  g_free (fixture->scratch);
}

/* Configures the pool with the given servers (NULL-terminated; the
 * references are taken). */
static void
configure (Fixture *fixture, McpServerConfig *first, ...)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  McpServerConfig *config;
  va_list args;

  va_start (args, first);
  for (config = first; config != NULL; config = va_arg (args, McpServerConfig *))
    g_ptr_array_add (configs, config);
  va_end (args);
  mcp_pool_set_servers (fixture->pool, configs);
}

static McpServerInfo *
server_info (Fixture *fixture, const char *name)
{
  g_autoptr(GPtrArray) infos = mcp_pool_list_servers (fixture->pool);

  for (guint i = 0; i < infos->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (infos, i);
      if (g_str_equal (info->name, name))
        return g_ptr_array_steal_index (infos, i);
    }
  return NULL;
}

static json_t *
call (Fixture *fixture, const char *server, const char *tool, json_t *arguments,
      gint64 timeout_ms, GError **error)
{
  McpCallOptions options = { .timeout_ms = timeout_ms };
  json_t *result = mcp_pool_call_tool (fixture->pool, server, tool, arguments, &options, error);

  json_decref (arguments);
  return result;
}

static const char *
first_text (json_t *result)
{
  return mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text");
}

static json_int_t
stat_of (Fixture *fixture, const char *server, const char *key)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = call (fixture, server, "stats", NULL, 0, &error);

  g_assert_no_error (error);
  return json_integer_value (json_object_get (json_object_get (result, "structuredContent"), key));
}

typedef struct {
  Fixture    *fixture;
  const char *server;
  const char *tool;
  json_t     *arguments;
  gint64      timeout_ms;
  json_t     *result;
  GError     *error;
} CallThread;

static gpointer
call_thread (gpointer data)
{
  CallThread *job = data;

  job->result = call (job->fixture, job->server, job->tool, job->arguments, job->timeout_ms, &job->error);
  return NULL;
}

static GThread *
call_in_thread (CallThread *job, Fixture *fixture, const char *server, const char *tool,
                json_t *arguments, gint64 timeout_ms)
{
  *job = (CallThread) { fixture, server, tool, arguments, timeout_ms, NULL, NULL };
  return g_thread_new ("caller", call_thread, job);
}

static void
call_thread_clear (CallThread *job)
{
  g_clear_pointer (&job->result, json_decref);
  g_clear_error (&job->error);
}

typedef struct {
  Fixture        *fixture;
  const char     *server;
  McpServerState  state;
} StateWait;

static gboolean
has_state (gpointer data)
{
  StateWait *wait = data;
  g_autoptr(McpServerInfo) info = server_info (wait->fixture, wait->server);

  return info != NULL && info->state == wait->state;
}

static void
wait_for_state (Fixture *fixture, const char *server, McpServerState state)
{
  StateWait wait = { fixture, server, state };

  g_assert_true (test_wait_for (has_state, &wait, 10000));
}

static gboolean
pid_gone (gpointer data)
{
  return test_process_gone (GPOINTER_TO_INT (data));
}

/* 16 callers of an idle server at once: exactly one spawn. */
static void
test_single_flight (Fixture *fixture, gconstpointer data)
{
  CallThread jobs[16];
  GThread *threads[16];
  g_autoptr(McpServerInfo) info = NULL;
  GPid pid = 0;

  configure (fixture, test_fixture_config ("slow", "--slow-start", "300", NULL), NULL);
  for (int i = 0; i < 16; i++)
    threads[i] = call_in_thread (&jobs[i], fixture, "slow", "stats", NULL, 0);
  for (int i = 0; i < 16; i++)
    {
      json_t *stats;

      g_thread_join (threads[i]);
      g_assert_no_error (jobs[i].error);
      stats = json_object_get (jobs[i].result, "structuredContent");
      if (pid == 0)
        pid = json_integer_value (json_object_get (stats, "pid"));
      g_assert_cmpint (json_integer_value (json_object_get (stats, "pid")), ==, pid);
      call_thread_clear (&jobs[i]);
    }

  info = server_info (fixture, "slow");
  g_assert_cmpuint (info->starts, ==, 1);
  g_assert_cmpuint (info->calls, ==, 16);
  g_assert_cmpint (info->state, ==, MCP_SERVER_READY);
}

/* 8 calls overlap on one session: the server's own count shows it. */
static void
test_multiplex (Fixture *fixture, gconstpointer data)
{
  CallThread jobs[8];
  GThread *threads[8];

  g_autofree char *slept = g_strdup_printf ("slept %u", test_timeout_ms (300));

  configure (fixture, test_fixture_config ("busy", NULL), NULL);
  /* Long enough, even under valgrind, for all eight to overlap. */
  for (int i = 0; i < 8; i++)
    threads[i] = call_in_thread (&jobs[i], fixture, "busy", "sleep",
                                 json_pack ("{s:i}", "ms", test_timeout_ms (300)), 0);
  for (int i = 0; i < 8; i++)
    {
      g_thread_join (threads[i]);
      g_assert_no_error (jobs[i].error);
      g_assert_cmpstr (first_text (jobs[i].result), ==, slept);
      call_thread_clear (&jobs[i]);
    }
  g_assert_cmpint (stat_of (fixture, "busy", "max_inflight"), >=, 8);
}

/* maxConcurrency 1: whole calls one after another. */
static void
test_max_concurrency (Fixture *fixture, gconstpointer data)
{
  McpServerConfig *config = test_fixture_config ("serial", NULL);
  CallThread jobs[4];
  GThread *threads[4];

  config->max_concurrency = 1;
  configure (fixture, config, NULL);
  for (int i = 0; i < 4; i++)
    threads[i] = call_in_thread (&jobs[i], fixture, "serial", "sleep", json_pack ("{s:i}", "ms", 100), 0);
  for (int i = 0; i < 4; i++)
    {
      g_thread_join (threads[i]);
      g_assert_no_error (jobs[i].error);
      call_thread_clear (&jobs[i]);
    }
  g_assert_cmpint (stat_of (fixture, "serial", "max_inflight"), ==, 1);
}

/* A crash evicts; the call is not replayed; the next call gets a new pid. */
static void
test_evict_crash (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) crashed = NULL;
  g_autoptr(McpServerInfo) info = NULL;
  json_int_t first_pid, second_pid;

  configure (fixture, test_fixture_config ("fragile", NULL), NULL);
  first_pid = stat_of (fixture, "fragile", "pid");

  crashed = call (fixture, "fragile", "crash", NULL, 0, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED);
  g_assert_nonnull (strstr (error->message, "fragile"));

  second_pid = stat_of (fixture, "fragile", "pid");
  g_assert_cmpint (second_pid, !=, first_pid);
  /* Only the stats call reached the new server: nothing was replayed. */
  g_assert_cmpint (stat_of (fixture, "fragile", "calls"), ==, 2);
  g_assert_true (test_wait_for (pid_gone, GINT_TO_POINTER (first_pid), 10000));

  info = server_info (fixture, "fragile");
  g_assert_cmpuint (info->starts, ==, 2);
  g_assert_cmpuint (info->errors, >=, 1);
  g_assert_nonnull (strstr (info->last_error, "fragile"));
}

static guint
count_lines (const char *path,
             const char *line)
{
  g_autofree char *contents = NULL;
  g_auto(GStrv) lines = NULL;
  guint count = 0;

  if (!g_file_get_contents (path, &contents, NULL, NULL))
    return 0;
  lines = g_strsplit (contents, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    count += g_str_equal (lines[i], line);
  return count;
}

/* A 2025 server that ignores what comes before initialize is probed with
 * server/discover once: it pays the probe's wait at its first start, not
 * at every restart, until its config changes. */
static void
test_probe_unanswered_once (Fixture *fixture, gconstpointer data)
{
  g_autofree char *notes = g_build_filename (fixture->scratch, "notes", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) crashed = NULL;
  g_autoptr(McpServerInfo) info = NULL;
  json_int_t first_pid;

  configure (fixture, test_fixture_config ("quiet", "--silent-before-init", "--note-file", notes, NULL), NULL);
  first_pid = stat_of (fixture, "quiet", "pid");
  g_assert_cmpuint (count_lines (notes, "unanswered server/discover"), ==, 1);

  crashed = call (fixture, "quiet", "crash", NULL, 0, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_CLOSED);
  g_assert_cmpint (stat_of (fixture, "quiet", "pid"), !=, first_pid);
  g_assert_cmpuint (count_lines (notes, "unanswered server/discover"), ==, 1);
  info = server_info (fixture, "quiet");
  g_assert_cmpuint (info->starts, ==, 2);

  /* A changed command may be another server: it is probed again. */
  configure (fixture, test_fixture_config ("quiet", "--silent-before-init", "--note-file", notes,
                                           "--logging", NULL), NULL);
  g_assert_cmpint (stat_of (fixture, "quiet", "calls"), ==, 1);
  g_assert_cmpuint (count_lines (notes, "unanswered server/discover"), ==, 2);
  g_assert_cmpint (g_unlink (notes), ==, 0);
}

/* A timeout evicts; a call in flight on the retired session still gets its
 * answer, while the next call already runs on a new session. */
static void
test_evict_timeout (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) hung = NULL;
  CallThread slow;
  GThread *thread;
  json_int_t first_pid, second_pid;

  configure (fixture, test_fixture_config ("slowpoke", NULL), NULL);
  first_pid = stat_of (fixture, "slowpoke", "pid");

  thread = call_in_thread (&slow, fixture, "slowpoke", "sleep", json_pack ("{s:i}", "ms", 1500), 0);
  hung = call (fixture, "slowpoke", "hang", NULL, 200, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT);

  second_pid = stat_of (fixture, "slowpoke", "pid");
  g_assert_cmpint (second_pid, !=, first_pid);
  g_assert_false (test_process_gone (first_pid));   /* still serving the sleep */

  g_thread_join (thread);
  g_assert_no_error (slow.error);
  g_assert_cmpstr (first_text (slow.result), ==, "slept 1500");
  call_thread_clear (&slow);
  g_assert_true (test_wait_for (pid_gone, GINT_TO_POINTER (first_pid), 10000));
}

/* Errors that are answers do not evict. */
static void
test_no_evict_on_answers (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) failed = NULL;
  g_autoptr(json_t) tool_error = NULL;
  json_int_t pid;

  configure (fixture, test_fixture_config ("steady", NULL), NULL);
  pid = stat_of (fixture, "steady", "pid");

  failed = call (fixture, "steady", "fail", NULL, 0, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_REMOTE);
  g_clear_error (&error);
  tool_error = call (fixture, "steady", "tool_error", NULL, 0, &error);
  g_assert_no_error (error);
  g_assert_true (json_is_true (json_object_get (tool_error, "isError")));

  g_assert_cmpint (stat_of (fixture, "steady", "pid"), ==, pid);
}

static void
test_unknown (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;

  configure (fixture, test_fixture_config ("alpha", NULL), test_fixture_config ("beta", NULL), NULL);

  result = call (fixture, "gamma", "echo", NULL, 0, &error);
  g_assert_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_UNKNOWN_SERVER);
  g_assert_nonnull (strstr (error->message, "alpha, beta"));
  g_clear_error (&error);

  result = call (fixture, "alpha", "nosuchtool", NULL, 0, &error);
  g_assert_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_UNKNOWN_TOOL);
  g_assert_nonnull (strstr (error->message, "nosuchtool"));
  g_assert_nonnull (strstr (error->message, "echo"));
}

static gboolean
retry_due (gpointer data)
{
  StateWait *wait = data;
  g_autoptr(McpServerInfo) info = server_info (wait->fixture, wait->server);

  return info->retry_in_ms == 0;
}

/* Until the backoff of @server has run out (bounded). */
static void
wait_for_retry (Fixture *fixture, const char *server)
{
  StateWait wait = { fixture, server, MCP_SERVER_BACKOFF };

  g_assert_true (test_wait_for (retry_due, &wait, 10000));
}

/* Start failures back off, doubling; during backoff calls fail at once
 * with the reason; once the cause is gone the server starts. */
static void
test_backoff (Fixture *fixture, gconstpointer data)
{
  g_autofree char *cause = g_build_filename (fixture->scratch, "broken", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(McpServerInfo) info = NULL;
  g_autoptr(json_t) result = NULL;

  g_assert_true (g_file_set_contents (cause, "", 0, NULL));
  configure (fixture, test_fixture_config ("flaky", "--fail-start-if-exists", cause, NULL), NULL);

  result = call (fixture, "flaky", "echo", json_pack ("{s:s}", "message", "1"), 0, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_START);
  g_clear_error (&error);

  /* At once, without a spawn: the name, the reason and when to retry. */
  result = call (fixture, "flaky", "echo", json_pack ("{s:s}", "message", "2"), 0, &error);
  g_assert_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_BACKOFF);
  g_assert_nonnull (strstr (error->message, "flaky"));
  g_assert_nonnull (strstr (error->message, "failing to start as asked"));
  g_assert_nonnull (strstr (error->message, "tries again in"));
  g_clear_error (&error);
  info = server_info (fixture, "flaky");
  g_assert_cmpuint (info->starts, ==, 1);
  g_assert_cmpint (info->state, ==, MCP_SERVER_BACKOFF);
  g_assert_cmpint (info->retry_in_ms, <=, 200);
  g_clear_pointer (&info, mcp_server_info_free);

  /* The second failure waits twice as long. */
  wait_for_state (fixture, "flaky", MCP_SERVER_BACKOFF);
  wait_for_retry (fixture, "flaky");
  result = call (fixture, "flaky", "echo", json_pack ("{s:s}", "message", "3"), 0, &error);
  g_assert_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_START);
  g_clear_error (&error);
  info = server_info (fixture, "flaky");
  g_assert_cmpuint (info->starts, ==, 2);
  g_assert_cmpint (info->retry_in_ms, >, 200);
  g_assert_cmpint (info->retry_in_ms, <=, 400);
  g_clear_pointer (&info, mcp_server_info_free);

  /* The cause is fixed: the next try after the backoff works. */
  g_unlink (cause);
  wait_for_retry (fixture, "flaky");
  result = call (fixture, "flaky", "echo", json_pack ("{s:s}", "message", "4"), 0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (first_text (result), ==, "Echo: 4");
  info = server_info (fixture, "flaky");
  g_assert_cmpint (info->state, ==, MCP_SERVER_READY);
}

/* An idle session is shut down; its tool cache stays, so listing tools does
 * not start it again. */
static void
test_idle_reap (Fixture *fixture, gconstpointer data)
{
  McpServerConfig *config = test_fixture_config ("sleepy", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(McpServerInfo) info = NULL;
  json_int_t pid;

  config->idle_timeout_ms = 200;
  configure (fixture, config, NULL);
  pid = stat_of (fixture, "sleepy", "pid");

  wait_for_state (fixture, "sleepy", MCP_SERVER_IDLE);
  g_assert_true (test_wait_for (pid_gone, GINT_TO_POINTER (pid), 10000));

  tools = mcp_pool_list_tools (fixture->pool, "sleepy", MCP_TOOL_DETAIL_SUMMARY, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (json_array_size (tools), >, 5);
  info = server_info (fixture, "sleepy");
  g_assert_cmpuint (info->starts, ==, 1);
  g_assert_cmpint (info->state, ==, MCP_SERVER_IDLE);
  g_assert_cmpint (info->n_tools, ==, (int) json_array_size (tools));
  g_clear_pointer (&info, mcp_server_info_free);

  /* The next call starts it again. */
  g_assert_cmpint (stat_of (fixture, "sleepy", "pid"), !=, pid);
  info = server_info (fixture, "sleepy");
  g_assert_cmpuint (info->starts, ==, 2);
}

/* A server that a client is subscribed to is not reaped when idle; once
 * the last subscription is let go, it is.  The subscribed one was last
 * used before the other, which is reaped twice meanwhile: the reaper's
 * passes in between would have taken it. */
static void
test_idle_subscribed (Fixture *fixture, gconstpointer data)
{
  McpServerConfig *held = test_fixture_config ("held", "--resources", "held", NULL);
  McpServerConfig *sleepy = test_fixture_config ("sleepy", NULL);
  McpCallOptions options = { .client = "test" };
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) subscribed = NULL;
  g_autoptr(json_t) released = NULL;
  g_autoptr(McpServerInfo) info = NULL;
  json_int_t held_pid;

  held->idle_timeout_ms = sleepy->idle_timeout_ms = 200;
  configure (fixture, held, sleepy, NULL);
  subscribed = mcp_pool_subscribe (fixture->pool, "held", "resources/subscribe", "held://own", &options, &error);
  g_assert_no_error (error);
  held_pid = stat_of (fixture, "held", "pid");

  for (int i = 0; i < 2; i++)
    {
      json_int_t pid = stat_of (fixture, "sleepy", "pid");

      wait_for_state (fixture, "sleepy", MCP_SERVER_IDLE);
      /* As in /pool/idle-reap: the reaped session ends after its state
       * says so. */
      g_assert_true (test_wait_for (pid_gone, GINT_TO_POINTER (pid), 10000));
    }
  info = server_info (fixture, "held");
  g_assert_cmpint (info->state, ==, MCP_SERVER_READY);

  released = mcp_pool_subscribe (fixture->pool, "held", "resources/unsubscribe", "held://own", &options, &error);
  g_assert_no_error (error);
  wait_for_state (fixture, "held", MCP_SERVER_IDLE);
  g_assert_true (test_wait_for (pid_gone, GINT_TO_POINTER (held_pid), 10000));
}

/* A client that can answer more (here roots) comes while a server
 * starts: that start is not installed, and the caller's call runs on a
 * session that declares the roots. */
static void
test_capabilities_grow_during_start (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) roots = json_pack ("{s:{}}", "roots");
  g_autoptr(json_t) stats = NULL;
  g_autoptr(GError) error = NULL;
  CallThread job;
  GThread *thread;

  configure (fixture, test_fixture_config ("slow", "--slow-start", "1000", NULL), NULL);
  thread = call_in_thread (&job, fixture, "slow", "echo", json_pack ("{s:s}", "message", "started"), 0);
  wait_for_state (fixture, "slow", MCP_SERVER_STARTING);
  mcp_pool_set_client_capabilities (fixture->pool, roots);
  g_thread_join (thread);
  g_assert_no_error (job.error);
  g_assert_cmpstr (first_text (job.result), ==, "Echo: started");
  call_thread_clear (&job);

  stats = call (fixture, "slow", "stats", NULL, 0, &error);
  g_assert_no_error (error);
  g_assert_nonnull (json_object_get (json_object_get (json_object_get (stats, "structuredContent"),
                                                      "client_capabilities"), "roots"));
}

/* A burst of list_changed leads to one re-list and one tools-changed. */
static void
test_list_changed (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  g_autofree char *changed = NULL;

  configure (fixture, test_fixture_config ("shifty", NULL), NULL);
  g_assert_cmpint (stat_of (fixture, "shifty", "lists"), ==, 1);
  /* The first list, from the start, counts as a change too. */
  changed = g_async_queue_timeout_pop (fixture->tools_changed, WAIT_US);
  g_assert_cmpstr (changed, ==, "shifty");
  g_clear_pointer (&changed, g_free);

  result = call (fixture, "shifty", "notify_list_changed", json_pack ("{s:i}", "count", 5), 0, &error);
  g_assert_no_error (error);
  changed = g_async_queue_timeout_pop (fixture->tools_changed, WAIT_US);
  g_assert_cmpstr (changed, ==, "shifty");
  g_assert_cmpint (stat_of (fixture, "shifty", "lists"), ==, 2);
}

/* A server that announces changes without pause is re-listed all the same:
 * each announcement no longer puts the re-list off for good.  When the
 * first forced re-list runs depends on the load, so the test takes the
 * counts as it finds them and waits for them to grow. */
static void
test_list_changed_flood (Fixture *fixture, gconstpointer data)
{
  gint64 deadline;
  json_int_t lists;
  json_int_t sent;

  configure (fixture, test_fixture_config ("restless", "--list-changed-flood", NULL), NULL);
  lists = stat_of (fixture, "restless", "lists");
  sent = stat_of (fixture, "restless", "list_changed_sent");
  g_assert_cmpint (lists, >=, 1);

  /* Each list, the first one from the start too, is a tools-changed. */
  deadline = g_get_monotonic_time () + test_timeout_ms (20 * 1000) * G_TIME_SPAN_MILLISECOND;
  while (stat_of (fixture, "restless", "lists") <= lists)
    {
      g_autofree char *changed = g_async_queue_timeout_pop (fixture->tools_changed,
                                                            MAX (deadline - g_get_monotonic_time (), 1));

      g_assert_cmpstr (changed, ==, "restless");
    }
  /* The announcements kept coming meanwhile. */
  g_assert_cmpint (stat_of (fixture, "restless", "list_changed_sent"), >, sent);
}

static void
test_tools_detail (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) summary = NULL;
  g_autoptr(json_t) cached = NULL;
  g_autoptr(json_t) described = NULL;
  json_t *echo;

  configure (fixture, test_fixture_config ("docs", NULL), NULL);
  g_assert_null (mcp_pool_dup_cached_tools (fixture->pool, "docs", MCP_TOOL_DETAIL_SUMMARY));

  summary = mcp_pool_list_tools (fixture->pool, "docs", MCP_TOOL_DETAIL_SUMMARY, &error);
  g_assert_no_error (error);
  echo = json_array_get (summary, 0);
  g_assert_cmpstr (mcp_json_get_string (echo, "name"), ==, "echo");
  g_assert_cmpstr (mcp_json_get_string (echo, "server"), ==, "docs");
  g_assert_nonnull (mcp_json_get_string (echo, "description"));
  g_assert_null (json_object_get (echo, "inputSchema"));

  cached = mcp_pool_dup_cached_tools (fixture->pool, "docs", MCP_TOOL_DETAIL_FULL);
  g_assert_true (json_is_object (json_object_get (json_array_get (cached, 0), "inputSchema")));

  described = mcp_pool_describe_tool (fixture->pool, "docs", "sleep", &error);
  g_assert_no_error (error);
  g_assert_nonnull (json_object_get (json_object_get (json_object_get (described, "inputSchema"),
                                                      "properties"), "ms"));
}

/* A changed command restarts the server; an unchanged one keeps it warm; a
 * removed one is shut down and forgotten. */
static void
test_generation (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  json_int_t keep_pid, change_pid, drop_pid;

  configure (fixture, test_fixture_config ("keep", NULL), test_fixture_config ("change", NULL),
             test_fixture_config ("drop", NULL), NULL);
  keep_pid = stat_of (fixture, "keep", "pid");
  change_pid = stat_of (fixture, "change", "pid");
  drop_pid = stat_of (fixture, "drop", "pid");

  configure (fixture, test_fixture_config ("keep", NULL),
             test_fixture_config ("change", "--extra-tools", "1", NULL), NULL);

  g_assert_cmpint (stat_of (fixture, "keep", "pid"), ==, keep_pid);
  g_assert_cmpint (stat_of (fixture, "change", "pid"), !=, change_pid);
  result = call (fixture, "change", "dummy_0", NULL, 0, &error);
  g_assert_no_error (error);
  g_clear_pointer (&result, json_decref);

  result = call (fixture, "drop", "echo", json_pack ("{s:s}", "message", "x"), 0, &error);
  g_assert_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_UNKNOWN_SERVER);
  g_assert_true (test_wait_for (pid_gone, GINT_TO_POINTER (change_pid), 10000));
  g_assert_true (test_wait_for (pid_gone, GINT_TO_POINTER (drop_pid), 10000));
}

/* The config changes while a start is under way: the session that start
 * produces belongs to the old generation and must not be installed. */
static void
test_generation_late_start (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) tools = NULL;
  CallThread job;
  GThread *thread;

  configure (fixture, test_fixture_config ("late", "--slow-start", "500", NULL), NULL);
  thread = call_in_thread (&job, fixture, "late", "stats", NULL, 0);
  wait_for_state (fixture, "late", MCP_SERVER_STARTING);

  configure (fixture, test_fixture_config ("late", "--extra-tools", "2", NULL), NULL);
  g_thread_join (thread);
  g_assert_no_error (job.error);
  call_thread_clear (&job);

  /* The call was served by the new config's server. */
  tools = mcp_pool_dup_cached_tools (fixture->pool, "late", MCP_TOOL_DETAIL_SUMMARY);
  g_assert_cmpstr (mcp_json_get_string (json_array_get (tools, json_array_size (tools) - 1), "name"),
                   ==, "dummy_1");
}

static void
test_flood_and_huge (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) flood = NULL;
  g_autoptr(json_t) huge = NULL;

  configure (fixture, test_fixture_config ("loud", "--stderr-flood", "2000000", NULL), NULL);
  flood = call (fixture, "loud", "stderr", json_pack ("{s:i}", "bytes", 2000000), 0, &error);
  g_assert_no_error (error);
  huge = call (fixture, "loud", "huge", json_pack ("{s:i}", "bytes", 20 * 1024 * 1024), 0, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (strlen (first_text (huge)), ==, 20 * 1024 * 1024);
}

/* Notifications the flooding server sends while the calls run, at least;
 * some MiB of JSON, more than any memory bound below. */
#define FLOOD_NOTIFICATIONS 200000
#define FLOOD_CALLS         20
/* Enough for the pipe to be full and the flood in its stride. */
#define FLOOD_STEADY        10000
/* Each call lasts a while, so that the flood goes on around it. */
#define FLOOD_CALL_MS       20
/* How long the flood may stall: a loaded host may let it through slowly,
 * but it goes on. */
#define FLOOD_STALL_MS      (20 * 1000)
/* How much this process may grow while the flood goes on: far less than
 * the flood, so nothing keeps what it sent. */
#define FLOOD_RSS_SLACK_KB  (16 * 1024)

static guint64
rss_kb (void)
{
  g_autofree char *status = NULL;
  const char *line;

  g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
  line = strstr (status, "VmRSS:");
  g_assert_nonnull (line);
  return g_ascii_strtoull (line + strlen ("VmRSS:"), NULL, 10);
}

typedef struct {
  Fixture *fixture;
  json_int_t until;
} FloodWait;

static gboolean
flood_reached (gpointer data)
{
  FloodWait *wait = data;

  return stat_of (wait->fixture, "flood", "flood_sent") >= wait->until;
}

/* Waits until the server has sent @until notifications in all, however
 * slowly, as long as they keep coming. */
static void
wait_for_flood (Fixture    *fixture,
                json_int_t  until)
{
  FloodWait wait = { fixture, 0 };
  json_int_t sent;

  while ((sent = stat_of (fixture, "flood", "flood_sent")) < until)
    {
      wait.until = sent + 1;
      g_assert_true (test_wait_for (flood_reached, &wait, FLOOD_STALL_MS));
    }
}

/* A server that sends notifications without pause (log messages, progress
 * for a token nobody holds) does not starve the replies: every call is
 * answered within its normal timeout while the flood runs, and the pool
 * keeps none of the flood (see mcp-pool-upkeep.c, log_server_message). */
static void
test_notification_flood (Fixture *fixture, gconstpointer data)
{
  json_int_t sent_before, sent_during;
  guint64 rss_before;

  configure (fixture, test_fixture_config ("flood", "--notification-flood", NULL), NULL);
  wait_for_flood (fixture, FLOOD_STEADY);
  sent_before = stat_of (fixture, "flood", "flood_sent");
  rss_before = rss_kb ();
  for (guint i = 0; i < FLOOD_CALLS; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *expected = g_strdup_printf ("slept %d", FLOOD_CALL_MS);
      g_autoptr(json_t) slept = call (fixture, "flood", "sleep", json_pack ("{s:i}", "ms", FLOOD_CALL_MS), 0,
                                      &error);

      g_assert_no_error (error);
      g_assert_cmpstr (first_text (slept), ==, expected);
    }
  sent_during = stat_of (fixture, "flood", "flood_sent") - sent_before;
  g_test_message ("%" JSON_INTEGER_FORMAT " notifications came during %d calls", sent_during, FLOOD_CALLS);
  g_assert_cmpint (sent_during, >, 0);

  /* Then let far more come than any bound below could hold. */
  wait_for_flood (fixture, sent_before + FLOOD_NOTIFICATIONS);
  g_test_message ("RSS %" G_GUINT64_FORMAT " kB before the flood, %" G_GUINT64_FORMAT " kB after %d notifications",
                  rss_before, rss_kb (), FLOOD_NOTIFICATIONS);
#if !defined (__SANITIZE_ADDRESS__) && !defined (__SANITIZE_THREAD__)
  /* AddressSanitizer and valgrind keep freed memory in quarantine, and
   * ThreadSanitizer adds shadow memory, so RSS says nothing there. */
  if (!test_under_valgrind ())
    g_assert_cmpuint (rss_kb (), <, rss_before + FLOOD_RSS_SLACK_KB);
#endif
}

/* The whole pool goes at once, stubborn servers and grandchildren too, and
 * a start under way is abandoned rather than waited for. */
static void
test_shutdown (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  CallThread starting;
  GThread *thread;
  json_int_t stubborn_pid, grandchild_pid;

  configure (fixture,
             test_fixture_config ("stubborn", "--ignore-sigterm", "--ignore-eof", NULL),
             test_fixture_config ("launcher", "--grandchild", NULL),
             test_fixture_config ("glacial", "--slow-start", "20000", NULL), NULL);
  stubborn_pid = stat_of (fixture, "stubborn", "pid");
  grandchild_pid = stat_of (fixture, "launcher", "grandchild_pid");
  thread = call_in_thread (&starting, fixture, "glacial", "stats", NULL, 0);
  wait_for_state (fixture, "glacial", MCP_SERVER_STARTING);

  mcp_pool_shutdown (fixture->pool, 200 * 1000, 200 * 1000);
  g_thread_join (thread);
  g_assert_nonnull (starting.error);
  call_thread_clear (&starting);

  g_assert_true (test_process_gone (stubborn_pid));
  g_assert_true (test_process_gone (grandchild_pid));
  test_assert_no_children ();

  result = call (fixture, "stubborn", "echo", NULL, 0, &error);
  g_assert_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_SHUT_DOWN);
}

/* File watching drives the pool: the watcher re-discovers, the pool
 * applies the result by the generation rule. */
typedef struct {
  Fixture             *fixture;
  McpDiscoveryOptions  options;
  McpConfigWatcher    *watcher;
  GMutex               lock;
  GCond                cond;
  gboolean             done;
} WatchSetup;

static void
on_discovery (McpDiscovery *discovery, gpointer user_data)
{
  WatchSetup *setup = user_data;

  mcp_pool_set_servers (setup->fixture->pool, discovery->servers);
  mcp_discovery_free (discovery);
}

/* Watchers are created and freed on the thread that runs their context. */
static gboolean
toggle_watcher (gpointer user_data)
{
  WatchSetup *setup = user_data;

  if (setup->watcher == NULL)
    setup->watcher = mcp_config_watcher_new (&setup->options,
                                             test_io_thread_get_context (setup->fixture->io),
                                             on_discovery, setup);
  else
    g_clear_pointer (&setup->watcher, mcp_config_watcher_free);
  g_mutex_lock (&setup->lock);
  setup->done = TRUE;
  g_cond_signal (&setup->cond);
  g_mutex_unlock (&setup->lock);
  return G_SOURCE_REMOVE;
}

static void
toggle_watcher_and_wait (WatchSetup *setup)
{
  setup->done = FALSE;
  g_main_context_invoke (test_io_thread_get_context (setup->fixture->io), toggle_watcher, setup);
  g_mutex_lock (&setup->lock);
  while (!setup->done)
    g_cond_wait (&setup->cond, &setup->lock);
  g_mutex_unlock (&setup->lock);
}

typedef struct {
  Fixture    *fixture;
  json_int_t  old_pid;
} PidChange;

static gboolean
server_restarted (gpointer data)
{
  PidChange *change = data;
  g_autoptr(McpServerInfo) info = server_info (change->fixture, "watched");

  return info != NULL && info->generation > 0;
}

static void
test_reload_from_file (Fixture *fixture, gconstpointer data)
{
  g_autofree char *path = g_build_filename (fixture->scratch, "servers.json", NULL);
  g_autofree char *first = g_strdup_printf ("{\"mcpServers\": {\"watched\": {\"command\": \"%s\"}}}",
                                            test_fixture_path ());
  g_autofree char *second = g_strdup_printf ("{\"mcpServers\": {\"watched\": {\"command\": \"%s\", "
                                             "\"args\": [\"--extra-tools\", \"1\"]}}}", test_fixture_path ());
  const char *files[] = { path, NULL };
  WatchSetup setup = { fixture, { .config_files = files } };
  g_autoptr(McpDiscovery) discovery = NULL;
  PidChange change = { fixture, 0 };
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;

  g_mutex_init (&setup.lock);
  g_cond_init (&setup.cond);
  g_assert_true (g_file_set_contents (path, first, -1, NULL));
  toggle_watcher_and_wait (&setup);
  discovery = mcp_config_discover (&setup.options);
  mcp_pool_set_servers (fixture->pool, discovery->servers);
  change.old_pid = stat_of (fixture, "watched", "pid");

  g_assert_true (g_file_set_contents (path, second, -1, NULL));
  g_assert_true (test_wait_for (server_restarted, &change, 10000));
  result = call (fixture, "watched", "dummy_0", NULL, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpint (stat_of (fixture, "watched", "pid"), !=, change.old_pid);
  g_assert_true (test_wait_for (pid_gone, GINT_TO_POINTER (change.old_pid), 10000));

  toggle_watcher_and_wait (&setup);
  g_unlink (path);
  g_mutex_clear (&setup.lock);
  g_cond_clear (&setup.cond);
}

/* A tools/list that dies with its server is tried once more, on a new
 * session (listing has no side effects, unlike tools/call). */
static void
test_list_retried (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(McpServerInfo) info = NULL;

  configure (fixture, test_fixture_config ("lister", "--crash-on-list", "2", NULL), NULL);
  result = call (fixture, "lister", "notify_list_changed", NULL, 0, &error);
  g_assert_no_error (error);

  /* The cache is stale now; the re-list crashes the first server. */
  tools = mcp_pool_list_tools (fixture->pool, "lister", MCP_TOOL_DETAIL_SUMMARY, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (json_array_size (tools), >, 5);
  info = server_info (fixture, "lister");
  g_assert_cmpuint (info->starts, ==, 2);
}

static void
test_search (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) listed = NULL;
  g_autoptr(json_t) found = NULL;
  g_autoptr(json_t) nothing_yet = NULL;

  configure (fixture, test_fixture_config ("one", NULL), test_fixture_config ("two", NULL), NULL);
  nothing_yet = mcp_pool_search_tools (fixture->pool, "sleep", 0, MCP_TOOL_DETAIL_SUMMARY);
  g_assert_cmpuint (json_array_size (nothing_yet), ==, 0);

  listed = mcp_pool_list_tools (fixture->pool, "two", MCP_TOOL_DETAIL_SUMMARY, &error);
  g_assert_no_error (error);
  found = mcp_pool_search_tools (fixture->pool, "sleep milliseconds", 3, MCP_TOOL_DETAIL_FULL);
  g_assert_cmpuint (json_array_size (found), >=, 1);
  g_assert_cmpstr (mcp_json_get_string (json_array_get (found, 0), "name"), ==, "sleep");
  g_assert_cmpstr (mcp_json_get_string (json_array_get (found, 0), "server"), ==, "two");
  g_assert_nonnull (json_object_get (json_array_get (found, 0), "inputSchema"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  json_object_seed (0);

#define ADD(path, func) g_test_add (path, Fixture, NULL, setup, func, teardown)
  ADD ("/pool/single-flight", test_single_flight);
  ADD ("/pool/multiplex", test_multiplex);
  ADD ("/pool/max-concurrency", test_max_concurrency);
  ADD ("/pool/evict/crash", test_evict_crash);
  ADD ("/pool/probe/unanswered-once", test_probe_unanswered_once);
  ADD ("/pool/evict/timeout-keeps-in-flight", test_evict_timeout);
  ADD ("/pool/evict/not-on-answers", test_no_evict_on_answers);
  ADD ("/pool/unknown", test_unknown);
  ADD ("/pool/backoff", test_backoff);
  ADD ("/pool/idle-reap", test_idle_reap);
  ADD ("/pool/idle-subscribed", test_idle_subscribed);
  ADD ("/pool/capabilities-grow-during-start", test_capabilities_grow_during_start);
  ADD ("/pool/list-changed", test_list_changed);
  ADD ("/pool/list-changed-flood", test_list_changed_flood);
  ADD ("/pool/tools-detail", test_tools_detail);
  ADD ("/pool/search", test_search);
  g_test_add ("/pool/list-retried-once", Fixture, "no-relist", setup, test_list_retried, teardown);
  ADD ("/pool/generation/change", test_generation);
  ADD ("/pool/generation/late-start", test_generation_late_start);
  ADD ("/pool/flood-and-huge", test_flood_and_huge);
  ADD ("/pool/notification-flood", test_notification_flood);
  ADD ("/pool/generation/reload-from-file", test_reload_from_file);
  ADD ("/pool/shutdown", test_shutdown);
  return g_test_run ();
}
