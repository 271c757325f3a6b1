/* soak.c — `mcp-pool serve --expose proxy` under sustained load, over 4
 * fixture servers with 1 % of calls crashing their server and 1 % hanging
 * past the server's 2 s timeout, for SOAK_SECONDS (default 600) each:
 * - /soak/serve: 16 callers share one stdio connection;
 * - /soak/http: `serve --listen`, 64 HTTP sessions, one caller each, each
 *   with its own connection.
 * Afterwards every request must have had exactly one reply, mcp-pool's
 * fds and threads must be back to their level after warm-up (also half
 * way), RSS must not have grown over the second half, and nothing may be
 * left running.  Not part of `make check`: run by `make
 * soak` (and, for 60 s each, by .ci/run).
 *
 * Threads: over stdio the callers write whole lines under write_lock and
 * wait on cond for their reply; one reader thread reads mcp-pool's stdout
 * and hands each reply to its call by id.  Over HTTP each caller has a
 * SoupSession of its own, used by its thread alone, and a POST's answer
 * is its reply.
 */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

#include <gio/gunixinputstream.h>
#include <libsoup/soup.h>

#include "common/mcp-jsonrpc.h"
#include "test-procs.h"
#include "test-wait.h"

#define CALLERS          16
#define HTTP_SESSIONS    64
#define SERVERS          4
/* The servers' call timeout, in seconds, in the config: what ends a hang. */
#define SERVER_TIMEOUT_S 2
/* A reply that takes longer than this is counted as lost. */
#define REPLY_WAIT_US    (120 * G_USEC_PER_SEC)
/* Warm-up: a sixth of the soak, within these bounds. */
#define WARM_UP_MIN_S    10
#define WARM_UP_MAX_S    60
/* "Settled": fds and threads unchanged this long.  Longer than GLib keeps
 * an idle pooled thread (15 s in the global pool after 0.5 s in its own),
 * so the workers that the load started have all gone by then, and the
 * count compares like with like at both ends. */
#define SETTLE_STABLE_US (17 * G_USEC_PER_SEC)
#define SETTLE_MAX_US    (180 * G_USEC_PER_SEC)
#define SETTLE_POLL_US   (G_USEC_PER_SEC / 4)
/* The soak after its warm-up, in segments with a sample after each. */
#define SEGMENTS         4
/* RSS growth in one segment that is not taken for a leak: 2 MiB over
 * half the soak, as a rate. */
#define RSS_SLACK_KB     (2048 * 2 / SEGMENTS)
#define EXIT_WAIT_MS     (20 * 1000)

typedef enum {
  KIND_ECHO,
  KIND_SLEEP,
  KIND_CRASH,
  KIND_HANG,
  KIND_OTHER,       /* initialize, and the calls that settle */
  N_KINDS,
} CallKind;

typedef enum {
  REPLY_NONE,
  REPLY_OK,
  REPLY_TOOL_ERROR, /* a result with isError: a crash, a timeout */
  REPLY_RPC_ERROR,  /* a JSON-RPC error: busy, bad request */
  N_REPLIES,
} ReplyKind;

typedef struct {
  CallKind  kind;
  ReplyKind reply;     /* protected by Soak.lock */
  gboolean  timed_out; /* protected by Soak.lock; the error says "in time" */
} Call;

typedef struct {
  GSubprocess      *process;
  GPid              pid;           /* immutable */
  char             *url;           /* immutable; NULL over stdio */
  guint             n_callers;     /* immutable */

  GMutex            write_lock;
  GOutputStream    *input;         /* protected by write_lock */

  GMutex            lock;
  GCond             cond;          /* a reply came, or stdout closed */
  GHashTable       *calls;         /* protected by lock; id → Call */
  json_int_t        next_id;       /* protected by lock */
  guint64           duplicates;    /* protected by lock */
  guint64           unknown;       /* protected by lock; replies to no request */
  guint64           notifications; /* protected by lock */
  guint64           lost;          /* protected by lock; no reply in REPLY_WAIT_US */
  guint64           refused;       /* protected by lock; an HTTP status other than 200 */
  gboolean          closed;        /* protected by lock; stdout ended */

  gint              stop;          /* atomic: the callers finish */
} Soak;

typedef struct {
  guint   fds;
  guint   threads;
  guint64 rss_kb;
} Sample;

/* One caller; over HTTP with its session, used by one thread at a time. */
typedef struct {
  Soak        *soak;
  SoupSession *http;         /* NULL over stdio */
  char        *session_id;   /* once initialized */
} Caller;

static char *scratch_home;

/* Reading */

static ReplyKind
classify (json_t   *message,
          gboolean *timed_out)
{
  json_t *result = json_object_get (message, "result");
  const char *text;

  if (json_object_get (message, "error") != NULL)
    return REPLY_RPC_ERROR;
  if (!json_is_true (json_object_get (result, "isError")))
    return REPLY_OK;
  text = mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text");
  *timed_out = text != NULL && strstr (text, "in time") != NULL;
  return REPLY_TOOL_ERROR;
}

static gpointer
read_replies (gpointer data)
{
  Soak *soak = data;
  g_autoptr(GDataInputStream) output =
    g_data_input_stream_new (g_subprocess_get_stdout_pipe (soak->process));
  char *line;

  /* Replies can be long; the default buffer would only grow by steps. */
  g_buffered_input_stream_set_buffer_size (G_BUFFERED_INPUT_STREAM (output), 64 * 1024);
  while ((line = g_data_input_stream_read_line (output, NULL, NULL, NULL)) != NULL)
    {
      g_autoptr(json_t) message = json_loads (line, 0, NULL);
      json_t *id = json_object_get (message, "id");
      gboolean timed_out = FALSE;
      Call *call;

      g_free (line);
      g_assert_nonnull (message);
      g_mutex_lock (&soak->lock);
      if (id == NULL)
        soak->notifications++;
      else if (!json_is_integer (id) ||
               (call = g_hash_table_lookup (soak->calls, &(json_int_t) { json_integer_value (id) })) == NULL)
        soak->unknown++;
      else if (call->reply != REPLY_NONE)
        soak->duplicates++;
      else
        {
          call->reply = classify (message, &timed_out);
          call->timed_out = timed_out;
          g_cond_broadcast (&soak->cond);
        }
      g_mutex_unlock (&soak->lock);
    }

  g_mutex_lock (&soak->lock);
  soak->closed = TRUE;
  g_cond_broadcast (&soak->cond);
  g_mutex_unlock (&soak->lock);
  return NULL;
}

/* Writing */

/* A new call of @kind, in the table; its id. */
static json_int_t
register_call (Soak     *soak,
               CallKind  kind)
{
  json_int_t *key = g_new (json_int_t, 1);
  Call *call = g_new0 (Call, 1);

  call->kind = kind;
  g_mutex_lock (&soak->lock);
  *key = soak->next_id++;
  g_hash_table_insert (soak->calls, key, call);
  g_mutex_unlock (&soak->lock);
  return *key;
}

/* Writes @line and waits for the reply to @id from the reader. */
static ReplyKind
stdio_exchange (Soak       *soak,
                json_int_t  id,
                const char *line)
{
  g_autoptr(GError) error = NULL;
  gint64 deadline;
  Call *call;
  ReplyKind reply;

  g_mutex_lock (&soak->write_lock);
  if (g_output_stream_write_all (soak->input, line, strlen (line), NULL, NULL, &error))
    g_output_stream_write_all (soak->input, "\n", 1, NULL, NULL, &error);
  g_mutex_unlock (&soak->write_lock);
  g_assert_no_error (error);

  deadline = g_get_monotonic_time () + REPLY_WAIT_US;
  g_mutex_lock (&soak->lock);
  call = g_hash_table_lookup (soak->calls, &id);
  while (call->reply == REPLY_NONE && !soak->closed)
    if (!g_cond_wait_until (&soak->cond, &soak->lock, deadline))
      break;
  if (call->reply == REPLY_NONE && !soak->closed)
    soak->lost++;
  reply = call->reply;
  g_mutex_unlock (&soak->lock);
  if (soak->closed && reply == REPLY_NONE)
    g_error ("mcp-pool closed its stdout during the soak");
  return reply;
}

/* POSTs @body in @caller's session; the status, and the answer's body in
 * @answer when there is one. */
static guint
http_post (Caller      *caller,
           const char  *body,
           json_t     **answer)
{
  g_autoptr(SoupMessage) message = soup_message_new ("POST", caller->soak->url);
  SoupMessageHeaders *headers = soup_message_get_request_headers (message);
  g_autoptr(GBytes) sent = g_bytes_new (body, strlen (body));
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  const char *session_id;

  soup_message_headers_replace (headers, "Accept", "application/json, text/event-stream");
  if (caller->session_id != NULL)
    soup_message_headers_replace (headers, "Mcp-Session-Id", caller->session_id);
  soup_message_set_request_body_from_bytes (message, "application/json", sent);
  bytes = soup_session_send_and_read (caller->http, message, NULL, &error);
  if (bytes == NULL)
    {
      g_test_message ("A POST failed: %s", error->message);
      return 0;
    }
  session_id = soup_message_headers_get_one (soup_message_get_response_headers (message), "Mcp-Session-Id");
  if (caller->session_id == NULL && session_id != NULL)
    caller->session_id = g_strdup (session_id);
  *answer = json_loadb (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), 0, NULL);
  return soup_message_get_status (message);
}

/* POSTs @line in @caller's session; its answer is the reply to @id. */
static ReplyKind
http_exchange (Caller     *caller,
               json_int_t  id,
               const char *line)
{
  Soak *soak = caller->soak;
  g_autoptr(json_t) answer = NULL;
  guint status = http_post (caller, line, &answer);
  json_t *answer_id = json_object_get (answer, "id");
  gboolean timed_out = FALSE;
  ReplyKind reply = REPLY_NONE;
  Call *call;

  g_mutex_lock (&soak->lock);
  call = g_hash_table_lookup (soak->calls, &id);
  if (status != SOUP_STATUS_OK)
    {
      g_test_message ("HTTP %u for request %" JSON_INTEGER_FORMAT, status, id);
      soak->refused++;
    }
  else if (!json_is_integer (answer_id) || json_integer_value (answer_id) != id)
    soak->unknown++;
  else
    {
      reply = call->reply = classify (answer, &timed_out);
      call->timed_out = timed_out;
    }
  g_mutex_unlock (&soak->lock);
  return reply;
}

/* Sends a request and waits for its reply; takes @params.  Any thread,
 * @caller used by it alone. */
static ReplyKind
soak_request (Caller     *caller,
              CallKind    kind,
              const char *method,
              json_t     *params)
{
  json_int_t id = register_call (caller->soak, kind);
  g_autoptr(json_t) request = json_pack ("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", id, "method", method,
                                         "params", params);
  g_autofree char *line = json_dumps (request, JSON_COMPACT);

  if (caller->http != NULL)
    return http_exchange (caller, id, line);
  return stdio_exchange (caller->soak, id, line);
}

static ReplyKind
soak_call (Caller     *caller,
           CallKind    kind,
           guint       server,
           const char *tool,
           json_t     *arguments)
{
  g_autofree char *name = g_strdup_printf ("s%u__%s", server, tool);

  return soak_request (caller, kind, "tools/call", json_pack ("{s:s, s:o}", "name", name, "arguments", arguments));
}

/* initialize, and notifications/initialized: a session over HTTP, on
 * stdio the one client. */
static void
caller_initialize (Caller *caller)
{
  Soak *soak = caller->soak;
  const char *initialized = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
  g_autoptr(GError) error = NULL;

  g_assert_cmpint (soak_request (caller, KIND_OTHER, "initialize",
                                 json_pack ("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", "2025-11-25",
                                            "capabilities", "clientInfo", "name", "soak", "version", "1")),
                   ==, REPLY_OK);
  if (caller->http != NULL)
    {
      g_autoptr(json_t) none = NULL;

      g_assert_nonnull (caller->session_id);
      g_assert_cmpuint (http_post (caller, initialized, &none), ==, SOUP_STATUS_ACCEPTED);
      return;
    }
  g_mutex_lock (&soak->write_lock);
  if (g_output_stream_write_all (soak->input, initialized, strlen (initialized), NULL, NULL, &error))
    g_output_stream_write_all (soak->input, "\n", 1, NULL, NULL, &error);
  g_mutex_unlock (&soak->write_lock);
  g_assert_no_error (error);
}

/* A caller of @soak: over HTTP with a session of its own, which it
 * initializes; over stdio the one client, initialized once. */
static Caller *
caller_new (Soak *soak)
{
  Caller *caller = g_new0 (Caller, 1);

  caller->soak = soak;
  if (soak->url != NULL)
    {
      caller->http = soup_session_new_with_options ("timeout", (guint) (REPLY_WAIT_US / G_USEC_PER_SEC), NULL);
      soup_session_set_proxy_resolver (caller->http, NULL);
      caller_initialize (caller);
    }
  return caller;
}

/* Ends the caller's session (DELETE) and closes its connection. */
static void
caller_free (Caller *caller)
{
  if (caller->http != NULL)
    {
      g_autoptr(SoupMessage) message = soup_message_new ("DELETE", caller->soak->url);
      g_autoptr(GBytes) bytes = NULL;

      soup_message_headers_replace (soup_message_get_request_headers (message), "Mcp-Session-Id",
                                    caller->session_id);
      bytes = soup_session_send_and_read (caller->http, message, NULL, NULL);
      g_assert_cmpuint (soup_message_get_status (message), ==, SOUP_STATUS_OK);
      g_object_unref (caller->http);
    }
  g_free (caller->session_id);
  g_free (caller);
}

/* One caller: calls one after the other until told to stop, so that
 * CALLERS requests are in flight most of the time. */
static gpointer
run_caller (gpointer data)
{
  Caller *caller = data;
  Soak *soak = caller->soak;
  g_autoptr(GRand) rand = g_rand_new ();

  while (!g_atomic_int_get (&soak->stop))
    {
      guint server = g_rand_int_range (rand, 0, SERVERS);
      gint32 dice = g_rand_int_range (rand, 0, 100);

      if (dice == 0)
        soak_call (caller, KIND_CRASH, server, "crash", json_object ());
      else if (dice == 1)
        soak_call (caller, KIND_HANG, server, "hang", json_object ());
      else if (dice < 50)
        soak_call (caller, KIND_ECHO, server, "echo", json_pack ("{s:s}", "message", "soak"));
      else
        soak_call (caller, KIND_SLEEP, server, "sleep", json_pack ("{s:i}", "ms", g_rand_int_range (rand, 1, 20)));
    }
  return NULL;
}

/* The load: n_callers callers, over HTTP each in a session of its own
 * that ends (DELETE) with the load. */
static void
run_callers (Soak  *soak,
             guint  seconds)
{
  g_autofree Caller **callers = g_new0 (Caller *, soak->n_callers);
  g_autofree GThread **threads = g_new0 (GThread *, soak->n_callers);
  gint64 end;

  for (guint i = 0; i < soak->n_callers; i++)
    callers[i] = caller_new (soak);
  end = g_get_monotonic_time () + seconds * G_USEC_PER_SEC;
  g_atomic_int_set (&soak->stop, FALSE);
  for (guint i = 0; i < soak->n_callers; i++)
    threads[i] = g_thread_new ("soak-caller", run_caller, callers[i]);
  /* The load runs for this long: the duration is the test's input, not
   * something it waits for. */
  while (g_get_monotonic_time () < end)
    g_usleep (MIN (G_USEC_PER_SEC, end - g_get_monotonic_time ()));
  g_atomic_int_set (&soak->stop, TRUE);
  for (guint i = 0; i < soak->n_callers; i++)
    {
      g_thread_join (threads[i]);
      caller_free (callers[i]);
    }
}

/* Measuring mcp-pool */

static Sample
sample (Soak *soak)
{
  g_autofree char *fd_path = g_strdup_printf ("/proc/%d/fd", soak->pid);
  g_autofree char *status_path = g_strdup_printf ("/proc/%d/status", soak->pid);
  g_autofree char *status = NULL;
  g_autoptr(GDir) dir = g_dir_open (fd_path, 0, NULL);
  Sample s = { 0 };
  const char *field;

  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    s.fds++;
  g_assert_true (g_file_get_contents (status_path, &status, NULL, NULL));
  field = strstr (status, "\nThreads:");
  g_assert_nonnull (field);
  s.threads = (guint) g_ascii_strtoull (field + strlen ("\nThreads:"), NULL, 10);
  field = strstr (status, "\nVmRSS:");
  g_assert_nonnull (field);
  s.rss_kb = g_ascii_strtoull (field + strlen ("\nVmRSS:"), NULL, 10);
  return s;
}

/* Brings mcp-pool to a state that is the same whatever the load did: every
 * server running (one may have crashed on the last call), every retired
 * session gone, every idle worker thread gone; then measures it. */
static Sample
settle (Soak   *soak,
        Caller *caller)
{
  gint64 start = g_get_monotonic_time (), stable_since = start;
  Sample last;

  for (guint server = 0; server < SERVERS; server++)
    {
      guint tries = 0;

      /* A call right after a crash may still meet the dying session. */
      while (soak_call (caller, KIND_OTHER, server, "echo", json_pack ("{s:s}", "message", "settle")) != REPLY_OK)
        g_assert_cmpuint (++tries, <, 10);
    }

  last = sample (soak);
  while (g_get_monotonic_time () - stable_since < SETTLE_STABLE_US)
    {
      Sample now;

      if (g_get_monotonic_time () - start > SETTLE_MAX_US)
        {
          g_test_message ("mcp-pool did not settle within %d s", (int) (SETTLE_MAX_US / G_USEC_PER_SEC));
          break;
        }
      g_usleep (SETTLE_POLL_US);
      now = sample (soak);
      if (now.fds != last.fds || now.threads != last.threads)
        stable_since = g_get_monotonic_time ();
      last = now;
    }
  return last;
}

/* The soak */

static char *
write_config (void)
{
  g_autoptr(json_t) servers = json_object ();
  g_autoptr(json_t) config = json_pack ("{s:O}", "mcpServers", servers);
  g_autofree char *path = g_build_filename (scratch_home, "servers.json", NULL);
  g_autofree char *fixture = g_canonicalize_filename (test_fixture_path (), NULL);

  /* Kept forever when idle, so that only the load changes what runs. */
  for (guint i = 0; i < SERVERS; i++)
    {
      g_autofree char *name = g_strdup_printf ("s%u", i);

      json_object_set_new (servers, name,
                           json_pack ("{s:s, s:[], s:i, s:i}", "command", fixture, "args",
                                      "timeout", SERVER_TIMEOUT_S, "idleTimeout", 0));
    }
  g_assert_cmpint (json_dump_file (config, path, JSON_INDENT (2)), ==, 0);
  return g_steal_pointer (&path);
}

static void
count_calls (Soak    *soak,
             guint64  by_kind[N_KINDS][N_REPLIES],
             guint64 *timeouts)
{
  GHashTableIter iter;
  Call *call;

  g_mutex_lock (&soak->lock);
  g_hash_table_iter_init (&iter, soak->calls);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &call))
    {
      by_kind[call->kind][call->reply]++;
      *timeouts += call->timed_out;
    }
  g_mutex_unlock (&soak->lock);
}

static void
report_sample (const char   *when,
               const Sample *s)
{
  g_test_message ("%-22s fds %u, threads %u, RSS %" G_GUINT64_FORMAT " kB", when, s->fds, s->threads, s->rss_kb);
}

static void
on_exited (GObject      *process,
           GAsyncResult *result,
           gpointer      user_data)
{
  g_subprocess_wait_finish (G_SUBPROCESS (process), result, NULL);
  *(gboolean *) user_data = TRUE;
}

static gboolean
on_exit_timeout (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

static void
wait_exit (Soak *soak)
{
  g_autoptr(GSource) timeout = g_timeout_source_new (EXIT_WAIT_MS);
  gboolean exited = FALSE, timed_out = FALSE;

  g_source_set_callback (timeout, on_exit_timeout, &timed_out, NULL);
  g_source_attach (timeout, NULL);
  g_subprocess_wait_async (soak->process, NULL, on_exited, &exited);
  while (!exited && !timed_out)
    g_main_context_iteration (NULL, TRUE);
  g_source_destroy (timeout);
  if (!exited)
    g_error ("mcp-pool did not exit within %d s of its stdin closing", EXIT_WAIT_MS / 1000);
}

/* Starts serve --expose proxy over the soak's servers: on stdio, or with
 * --listen over HTTP, where it also takes one session more than the
 * callers' (the one that settles). */
static void
soak_start (Soak     *soak,
            gboolean  http)
{
  g_autofree char *config = write_config ();
  g_autofree char *log = g_build_filename (scratch_home, "serve.log", NULL);
  g_autofree char *max_sessions = g_strdup_printf ("%d", HTTP_SESSIONS + 1);
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (http ? G_SUBPROCESS_FLAGS_NONE
                                    : G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  const char *argv[] = { test_mcp_pool_path (), "serve", "--config", config, "--expose", "proxy",
                         http ? "--listen" : NULL, "127.0.0.1:0", "--max-sessions", max_sessions, NULL };
  g_autoptr(GError) error = NULL;

  g_subprocess_launcher_setenv (launcher, "HOME", scratch_home, TRUE);
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_CONFIG");
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_EXPOSE");
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_TIMEOUT");
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_LISTEN");
  g_subprocess_launcher_set_cwd (launcher, scratch_home);
  /* Over HTTP nothing else ends it when the soak fails. */
  g_subprocess_launcher_set_child_setup (launcher, test_die_with_parent, NULL, NULL);
  if (http)
    g_subprocess_launcher_set_stderr_file_path (launcher, log);
  soak->process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  soak->pid = (GPid) g_ascii_strtoll (g_subprocess_get_identifier (soak->process), NULL, 10);
  g_mutex_init (&soak->write_lock);
  g_mutex_init (&soak->lock);
  g_cond_init (&soak->cond);
  soak->calls = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
  soak->n_callers = http ? HTTP_SESSIONS : CALLERS;
  if (http)
    {
      soak->url = test_wait_for_http_url (log, EXIT_WAIT_MS);
      g_assert_nonnull (soak->url);
    }
  else
    soak->input = g_object_ref (g_subprocess_get_stdin_pipe (soak->process));
}

/* Ends serve as its client would, SIGTERM over HTTP or stdin closed over
 * stdio: it exits with 0, leaving nothing behind. */
static void
soak_stop (Soak *soak)
{
  if (soak->url != NULL)
    g_subprocess_send_signal (soak->process, SIGTERM);
  else
    {
      g_mutex_lock (&soak->write_lock);
      g_output_stream_close (soak->input, NULL, NULL);
      g_mutex_unlock (&soak->write_lock);
    }
  wait_exit (soak);
  g_assert_true (g_subprocess_get_if_exited (soak->process));
  g_assert_cmpint (g_subprocess_get_exit_status (soak->process), ==, 0);
  test_assert_no_children ();

  g_hash_table_unref (soak->calls);
  g_cond_clear (&soak->cond);
  g_mutex_clear (&soak->lock);
  g_mutex_clear (&soak->write_lock);
  g_clear_object (&soak->input);
  g_object_unref (soak->process);
  g_free (soak->url);
}

/* The load after a warm-up, and its checks. */
static void
soak_run (Soak   *soak,
          Caller *settler)
{
  static const char * const kind_names[N_KINDS] = { "echo", "sleep", "crash", "hang", "other" };
  const char *seconds_env = g_getenv ("SOAK_SECONDS");
  guint seconds = seconds_env != NULL ? (guint) g_ascii_strtoull (seconds_env, NULL, 10) : 600;
  guint warm_up = CLAMP (seconds / 6, WARM_UP_MIN_S, WARM_UP_MAX_S);
  guint64 by_kind[N_KINDS][N_REPLIES] = { { 0 } }, timeouts = 0, total = 0;
  Sample samples[SEGMENTS + 1];
  guint leaky_segments = 0;

  g_assert_cmpuint (seconds, >=, SEGMENTS);
  g_test_message ("Warm-up: %u s, then %u s of %u callers over %d servers%s", warm_up, seconds, soak->n_callers,
                  SERVERS, soak->url != NULL ? ", each in an HTTP session of its own" : "");
  /* RSS keeps the high-water mark of the load (the allocator returns
   * little), and the mark rises whenever the live set reaches a new peak:
   * under crashes and hangs, the sessions started again and the hung ones
   * retired while their calls time out come and go (massif: serve's heap
   * in use is the same after the soak as after the warm-up, while RSS
   * rose).  Such a peak is rarer the higher it is, so it raises RSS in a
   * segment or two; a leak raises it in every one. */
  run_callers (soak, warm_up);
  samples[0] = settle (soak, settler);
  for (guint segment = 1; segment <= SEGMENTS; segment++)
    {
      run_callers (soak, seconds * segment / SEGMENTS - seconds * (segment - 1) / SEGMENTS);
      samples[segment] = settle (soak, settler);
    }

  count_calls (soak, by_kind, &timeouts);
  for (guint kind = 0; kind < N_KINDS; kind++)
    {
      guint64 calls = 0;

      for (guint reply = 0; reply < N_REPLIES; reply++)
        calls += by_kind[kind][reply];
      total += calls;
      g_test_message ("%-6s %8" G_GUINT64_FORMAT " calls: %" G_GUINT64_FORMAT " ok, %" G_GUINT64_FORMAT
                      " tool errors, %" G_GUINT64_FORMAT " JSON-RPC errors, %" G_GUINT64_FORMAT " without reply",
                      kind_names[kind], calls, by_kind[kind][REPLY_OK], by_kind[kind][REPLY_TOOL_ERROR],
                      by_kind[kind][REPLY_RPC_ERROR], by_kind[kind][REPLY_NONE]);
    }
  g_test_message ("%" G_GUINT64_FORMAT " requests, %" G_GUINT64_FORMAT " timeouts, %" G_GUINT64_FORMAT
                  " duplicate replies, %" G_GUINT64_FORMAT " replies to no request, %" G_GUINT64_FORMAT
                  " lost, %" G_GUINT64_FORMAT " refused, %" G_GUINT64_FORMAT " notifications",
                  total, timeouts, soak->duplicates, soak->unknown, soak->lost, soak->refused, soak->notifications);
  report_sample ("after warm-up:", &samples[0]);
  for (guint segment = 1; segment <= SEGMENTS; segment++)
    {
      g_autofree char *when = g_strdup_printf ("after segment %u of %d:", segment, SEGMENTS);

      report_sample (when, &samples[segment]);
    }

  /* Exactly one reply to every request. */
  for (guint kind = 0; kind < N_KINDS; kind++)
    g_assert_cmpuint (by_kind[kind][REPLY_NONE], ==, 0);
  g_assert_cmpuint (soak->duplicates, ==, 0);
  g_assert_cmpuint (soak->unknown, ==, 0);
  g_assert_cmpuint (soak->lost, ==, 0);
  g_assert_cmpuint (soak->refused, ==, 0);
  /* A crash or a hang is never reported as a success. */
  g_assert_cmpuint (by_kind[KIND_CRASH][REPLY_OK], ==, 0);
  g_assert_cmpuint (by_kind[KIND_HANG][REPLY_OK], ==, 0);
  /* Nothing kept from the load. */
  for (guint segment = 1; segment <= SEGMENTS; segment++)
    {
      g_assert_cmpuint (samples[segment].fds, ==, samples[0].fds);
      g_assert_cmpuint (samples[segment].threads, ==, samples[0].threads);
      if (samples[segment].rss_kb > samples[segment - 1].rss_kb + RSS_SLACK_KB)
        leaky_segments++;
    }
  g_assert_cmpuint (leaky_segments, <, SEGMENTS);
}

static void
test_soak_stdio (void)
{
  Soak soak = { 0 };
  Caller *client;
  GThread *reader;

  soak_start (&soak, FALSE);
  reader = g_thread_new ("soak-reader", read_replies, &soak);
  client = caller_new (&soak);
  caller_initialize (client);
  soak_run (&soak, client);
  caller_free (client);
  soak_stop (&soak);
  g_thread_join (reader);
}

static void
test_soak_http (void)
{
  Soak soak = { 0 };
  Caller *settler;

  soak_start (&soak, TRUE);
  settler = caller_new (&soak);
  soak_run (&soak, settler);
  caller_free (settler);
  soak_stop (&soak);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  /* Orphans of mcp-pool come to this process, so a leak shows as a child. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  signal (SIGPIPE, SIG_IGN);
  g_test_add_func ("/soak/serve", test_soak_stdio);
  g_test_add_func ("/soak/http", test_soak_http);

  scratch_home = g_dir_make_tmp ("mcp-pool-soak-XXXXXX", NULL);
  status = g_test_run ();
  {
    g_autofree char *command = g_strdup_printf ("rm -rf '%s'", scratch_home);
    g_spawn_command_line_sync (command, NULL, NULL, NULL, NULL);
  }
  return status;
}
