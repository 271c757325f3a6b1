/* mcp-bench.c — one repetition of one benchmark row of bench/run.
 *
 * `mcp-bench ROW [options]` measures a baseline and mcp-pool in the same
 * run and prints one JSON object per line on stdout: name, baseline and
 * pool values with their unit, the ratio the row is judged by, and a note.
 * bench/run repeats it, takes medians and spreads and prints the table.
 *
 * Threads: the main thread iterates the default GMainContext, which every
 * session and pool here reads on; the measurement runs on a job thread, as
 * a pool worker would.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "sandbox/mcp-code.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "common/mcp-raw-response.h"
#include "pool/mcp-pool.h"
#include "daemon/mcp-remote.h"
#include "pool/mcp-session.h"

typedef struct {
  char *example;      /* the fixture server, as the example server */
  char *mcp_pool;     /* src/mcp-pool */
  char *mcp_poold;    /* src/mcp-poold */
  char *interop;      /* tests/interop/node_modules, or NULL */
  char *peers;        /* bench/peers (peers.mjs, node_modules), or NULL */
  int   calls;        /* warm calls per measurement */
  int   cold;         /* cold starts per measurement */
} BenchSetup;

typedef int (*BenchRowFunc) (BenchSetup *setup);

static BenchSetup setup;

/* Output */

/* As emit_row(), with the members of @extra (NULL: none) in the line too,
 * for bench/run's plot. */
static void
emit_row_with (const char *name,
               double      baseline,
               double      pool,
               const char *unit,
               double      ratio,
               const char *note,
               json_t     *extra)
{
  g_autoptr(json_t) row = json_pack ("{s:s, s:f, s:f, s:s, s:f, s:s}",
                                     "name", name, "baseline", baseline, "pool", pool,
                                     "unit", unit, "ratio", ratio, "note", note ? note : "");
  g_autofree char *line = NULL;

  if (extra != NULL)
    json_object_update (row, extra);
  line = json_dumps (row, JSON_COMPACT);
  printf ("%s\n", line);
  fflush (stdout);
}

static void
emit_row (const char *name,
          double      baseline,
          double      pool,
          const char *unit,
          double      ratio,
          const char *note)
{
  emit_row_with (name, baseline, pool, unit, ratio, note, NULL);
}

static void
emit_not_measured (const char *name,
                   const char *reason)
{
  g_autoptr(json_t) row = json_pack ("{s:s, s:s}", "name", name, "not_measured", reason);
  g_autofree char *line = json_dumps (row, JSON_COMPACT);

  printf ("%s\n", line);
  fflush (stdout);
}

static int
fail (const char   *row,
      const GError *error)
{
  g_printerr ("mcp-bench %s: %s\n", row, error->message);
  return 1;
}

/* Timing helpers */

static int
compare_gint64 (gconstpointer a,
                gconstpointer b)
{
  gint64 x = *(const gint64 *) a, y = *(const gint64 *) b;

  return (x > y) - (x < y);
}

static int
compare_gint (gconstpointer a,
              gconstpointer b)
{
  int x = *(const int *) a, y = *(const int *) b;

  return (x > y) - (x < y);
}

static double
median_us (gint64 *samples,
           int     n)
{
  qsort (samples, n, sizeof (gint64), compare_gint64);
  return n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2.0;
}

/* utime + stime of @pid in seconds. */
static double
process_cpu_seconds (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *text = NULL;
  g_auto(GStrv) fields = NULL;
  const char *after_name;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (after_name = strrchr (text, ')')) == NULL)
    return 0;
  /* Fields after "(comm)": state is the 3rd of the line, utime the 14th. */
  fields = g_strsplit (after_name + 2, " ", 0);
  if (g_strv_length (fields) < 13)
    return 0;
  return (g_ascii_strtod (fields[11], NULL) + g_ascii_strtod (fields[12], NULL)) / sysconf (_SC_CLK_TCK);
}

/* The value in KiB of @field ("VmHWM:") in /proc/@pid/@file, 0 if the
 * process is gone or has no such field. */
static double
process_kib (GPid        pid,
             const char *file,
             const char *field)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/%s", pid, file);
  g_autofree char *text = NULL;
  const char *line;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (line = strstr (text, field)) == NULL)
    return 0;
  return g_ascii_strtod (line + strlen (field), NULL);
}

/* VmHWM of @pid in KiB: its own peak, children excluded. */
static double
process_peak_rss_kib (GPid pid)
{
  return process_kib (pid, "status", "VmHWM:");
}

/* Configs */

static McpServerConfig *
example_config (const char *name)
{
  return mcp_server_config_new (name, setup.example, (const char *[]) { NULL });
}

static char *
interop_script (const char *package)
{
  g_autofree char *path = NULL;

  if (setup.interop == NULL)
    return NULL;
  path = g_build_filename (setup.interop, "@modelcontextprotocol", package, "dist", "index.js", NULL);
  return g_file_test (path, G_FILE_TEST_EXISTS) ? g_steal_pointer (&path) : NULL;
}

/* Whether tests/interop holds the MCP TypeScript SDK (for bench/peers). */
static gboolean
interop_has_sdk (void)
{
  g_autofree char *path = NULL;

  if (setup.interop == NULL)
    return FALSE;
  path = g_build_filename (setup.interop, "@modelcontextprotocol", "sdk", "dist", "esm", "client", "index.js", NULL);
  return g_file_test (path, G_FILE_TEST_EXISTS);
}

/* A config file for `mcp-pool serve` with @configs in it. */
static char *
write_config_file (GPtrArray  *configs,
                   GError    **error)
{
  g_autoptr(json_t) servers = json_object ();
  g_autoptr(json_t) file = NULL;
  g_autofree char *path = NULL;
  int fd;

  for (guint i = 0; i < configs->len; i++)
    {
      McpServerConfig *config = configs->pdata[i];
      json_t *args = json_array ();

      json_t *env = json_object ();

      for (guint j = 0; config->args != NULL && config->args[j] != NULL; j++)
        json_array_append_new (args, json_string (config->args[j]));
      for (guint j = 0; config->env != NULL && config->env[j] != NULL; j++)
        {
          g_auto(GStrv) pair = g_strsplit (config->env[j], "=", 2);

          json_object_set_new (env, pair[0], json_string (pair[1] ? pair[1] : ""));
        }
      json_object_set_new (servers, config->name,
                           json_pack ("{s:s, s:o, s:o, s:i}", "command", config->command, "args", args,
                                      "env", env, "maxConcurrency", (int) config->max_concurrency));
    }
  file = json_pack ("{s:O}", "mcpServers", servers);
  fd = g_file_open_tmp ("mcp-bench-XXXXXX.json", &path, error);
  if (fd < 0)
    return NULL;
  close (fd);
  if (json_dump_file (file, path, JSON_COMPACT) != 0)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "could not write %s", path);
      return NULL;
    }
  return g_steal_pointer (&path);
}

/* A session to `mcp-pool serve --config @config_path --expose @expose`. */
/* A serve and a session to it, of the stateless revision when @stateless
 * (the session's server/discover probe finds serve speaks it), else of the
 * handshake, as the direct clients of the example server speak. */
static McpSession *
start_serve_speaking (const char  *config_path,
                      const char  *expose,
                      gboolean     stateless,
                      GError     **error)
{
  g_autoptr(McpServerConfig) config =
    mcp_server_config_new ("mcp-pool serve", setup.mcp_pool,
                           (const char *[]) { "serve", "--config", config_path, "--expose", expose, NULL });
  McpSessionCallbacks handshake = { .skip_probe = TRUE };

  /* A client's serve, not a server of a pool: with MCP_POOL_PARENT it would
   * take itself for a nested pool and start no servers. */
  config->client_environment = TRUE;
  return mcp_session_start (config, NULL, stateless ? NULL : &handshake, NULL, error);
}

static McpSession *
start_serve (const char  *config_path,
             const char  *expose,
             GError     **error)
{
  return start_serve_speaking (config_path, expose, FALSE, error);
}

static void
stop_session (McpSession *session)
{
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
}

/* A tools/call whose isError result is an error too. */
static json_t *
call_tool (McpSession  *session,
           const char  *tool,
           json_t      *arguments,
           GError     **error)
{
  g_autoptr(json_t) params = json_pack ("{s:s, s:O}", "name", tool, "arguments", arguments);
  json_t *result = mcp_session_call (session, "tools/call", params, 0, error);

  if (result != NULL && json_is_true (json_object_get (result, "isError")))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s: %s", tool,
                   mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text"));
      g_clear_pointer (&result, json_decref);
    }
  return result;
}

static gboolean
echo (McpSession  *session,
      const char  *tool,
      GError     **error)
{
  g_autoptr(json_t) arguments = json_pack ("{s:s}", "message", "hello");
  g_autoptr(json_t) result = call_tool (session, tool, arguments, error);

  return result != NULL;
}

/* Row 1: cold-vs-warm */

static int
row_cold_vs_warm (BenchSetup *s)
{
  g_autofree char *script = interop_script ("server-everything");
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(McpPool) pool = NULL;
  g_autoptr(GPtrArray) configs = g_ptr_array_new ();
  g_autoptr(GError) error = NULL;
  g_autofree gint64 *cold = g_new (gint64, s->cold);
  g_autofree gint64 *warm = g_new (gint64, s->calls);
  g_autoptr(json_t) arguments = json_pack ("{s:s}", "message", "hello");
  g_autofree char *note = NULL;
  double cold_us, warm_us;

  if (script == NULL)
    {
      emit_not_measured ("cold-vs-warm", "server-everything is not installed: cd tests/interop && npm ci");
      return 0;
    }
  config = mcp_server_config_new ("everything", "node", (const char *[]) { script, "stdio", NULL });

  /* What a spawn-per-call client does for every call. */
  for (int i = 0; i < s->cold; i++)
    {
      gint64 start = g_get_monotonic_time ();
      g_autoptr(McpSession) session = mcp_session_start (config, NULL, NULL, NULL, &error);
      g_autoptr(json_t) params = json_pack ("{s:s, s:O}", "name", "echo", "arguments", arguments);
      g_autoptr(json_t) result = NULL;

      if (session == NULL)
        return fail ("cold-vs-warm", error);
      result = mcp_session_call (session, "tools/call", params, 0, &error);
      mcp_session_shutdown (session, 0, MCP_SESSION_TERM_GRACE);
      cold[i] = g_get_monotonic_time () - start;
      if (result == NULL)
        return fail ("cold-vs-warm", error);
    }

  pool = mcp_pool_new (NULL, NULL, NULL);
  g_ptr_array_add (configs, config);
  mcp_pool_set_servers (pool, configs);
  for (int i = -1; i < s->calls; i++)
    {
      gint64 start = g_get_monotonic_time ();
      g_autoptr(json_t) result = mcp_pool_call_tool (pool, "everything", "echo", arguments, NULL, &error);

      if (result == NULL)
        return fail ("cold-vs-warm", error);
      if (i >= 0)   /* the first call starts the server */
        warm[i] = g_get_monotonic_time () - start;
    }
  mcp_pool_shutdown (pool, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);

  cold_us = median_us (cold, s->cold);
  warm_us = median_us (warm, s->calls);
  note = g_strdup_printf ("server-everything echo; median of %d spawn-per-call and %d warm pooled calls",
                          s->cold, s->calls);
  emit_row ("cold-vs-warm", cold_us, warm_us, "µs", cold_us / warm_us, note);
  return 0;
}

/* Row 2: pool-overhead */

typedef struct {
  int from_parent;
  int to_parent;
  int rounds;
  int cpu;              /* to run on; -1: anywhere */
} PipeEcho;

/* Pins the calling thread to @cpu (nothing if -1); FALSE if it cannot.
 * Async-signal-safe, for the child of a fork too. */
static gboolean
pin_thread (int cpu)
{
  cpu_set_t set;

  if (cpu < 0)
    return TRUE;
  CPU_ZERO (&set);
  CPU_SET (cpu, &set);
  return sched_setaffinity (0, sizeof set, &set) == 0;
}

/* The echo end: pinned, echoes each byte back.  Async-signal-safe. */
static gpointer
pipe_echo (gpointer data)
{
  PipeEcho *pipes = data;
  char byte;

  if (!pin_thread (pipes->cpu))
    return NULL;
  for (int i = 0; i < pipes->rounds; i++)
    if (read (pipes->from_parent, &byte, 1) != 1 || write (pipes->to_parent, &byte, 1) != 1)
      break;
  return NULL;
}

/* The median round trip of one byte through a pair of pipes and an echo,
 * the timing end on CPU @here and the echo on @there_cpu: the floor of any
 * hop.  The echo is a thread, or with @between_processes a forked process,
 * as between a client, serve and a server: a switch of address space costs
 * more than one between threads, most of all on a virtual machine.  On
 * this kind of virtual machine a wakeup across CPUs also costs several
 * times one on the same CPU, and unpinned the scheduler picks either, run
 * to run. */
static double
pipe_round_trip_us (int      rounds,
                    int      here,
                    int      there_cpu,
                    gboolean between_processes)
{
  int there[2], back[2];
  PipeEcho pipes;
  GThread *thread = NULL;
  pid_t pid = -1;
  g_autofree gint64 *samples = g_new (gint64, rounds);
  char byte = 'x';
  cpu_set_t saved;

  if (!g_unix_open_pipe (there, FD_CLOEXEC, NULL) || !g_unix_open_pipe (back, FD_CLOEXEC, NULL))
    g_error ("pipe failed");
  if (sched_getaffinity (0, sizeof saved, &saved) != 0)
    g_error ("sched_getaffinity failed: %s", g_strerror (errno));
  pipes = (PipeEcho) { there[0], back[1], rounds, there_cpu };
  if (between_processes && (pid = fork ()) == 0)
    {
      /* Without the parent's ends, the echo sees end of file if it dies. */
      close (there[1]);
      close (back[0]);
      pipe_echo (&pipes);
      _exit (0);
    }
  if (between_processes && pid < 0)
    g_error ("fork failed: %s", g_strerror (errno));
  if (!between_processes)
    thread = g_thread_new ("pipe-echo", pipe_echo, &pipes);
  if (!pin_thread (here))
    g_error ("sched_setaffinity failed: %s", g_strerror (errno));
  for (int i = 0; i < rounds; i++)
    {
      gint64 start = g_get_monotonic_time ();

      if (write (there[1], &byte, 1) != 1 || read (back[0], &byte, 1) != 1)
        g_error ("pipe round trip failed");
      samples[i] = g_get_monotonic_time () - start;
    }
  if (thread != NULL)
    g_thread_join (thread);
  while (pid > 0 && waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  sched_setaffinity (0, sizeof saved, &saved);
  close (there[0]), close (there[1]), close (back[0]), close (back[1]);
  return median_us (samples, rounds);
}

/* The first two CPUs this process may run on, in @cpus; FALSE if it may
 * run on one only. */
static gboolean
two_cpus (int cpus[2])
{
  cpu_set_t set;
  int found = 0;

  if (sched_getaffinity (0, sizeof set, &set) != 0)
    return FALSE;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; cpu++)
    if (CPU_ISSET (cpu, &set))
      cpus[found++] = cpu;
  return found == 2;
}

/* Alternates echo calls on @n sessions (@sessions[i]'s tool @tools[i]) so
 * that all see the same load of a shared machine; the median of each in
 * @medians. */
static gboolean
time_echo_calls (McpSession **sessions,
                 const char **tools,
                 guint        n,
                 int          calls,
                 double      *medians,
                 GError     **error)
{
  g_autofree gint64 *samples = g_new (gint64, (gsize) calls * n);

  /* Warms every path up (the first call through serve starts the server). */
  for (guint j = 0; j < n; j++)
    if (!echo (sessions[j], tools[j], error))
      return FALSE;
  for (int i = 0; i < calls; i++)
    for (guint j = 0; j < n; j++)
      {
        gint64 start = g_get_monotonic_time ();

        if (!echo (sessions[j], tools[j], error))
          return FALSE;
        samples[(gsize) j * calls + i] = g_get_monotonic_time () - start;
      }
  for (guint j = 0; j < n; j++)
    medians[j] = median_us (samples + (gsize) j * calls, calls);
  return TRUE;
}

/* `mcp-bench --relay PROGRAM`: the floor of any process put between a
 * client and a server.  PROGRAM runs on pipes, and bytes are copied both
 * ways as they come, with poll, read and write and nothing parsed: the
 * syscalls serve makes per call, without its work.  Ends when either side
 * closes, and waits for PROGRAM. */
static gboolean
write_all (int         fd,
           const char *data,
           gssize      length)
{
  while (length > 0)
    {
      gssize written = write (fd, data, length);

      if (written < 0 && errno == EINTR)
        continue;
      if (written <= 0)
        return FALSE;
      data += written;
      length -= written;
    }
  return TRUE;
}

static int
run_relay (const char *program)
{
  int to_child[2], from_child[2];
  static char buffer[65536];
  struct pollfd fds[2];
  int outputs[2];
  pid_t pid;
  int status;

  if (pipe2 (to_child, O_CLOEXEC) != 0 || pipe2 (from_child, O_CLOEXEC) != 0)
    return 1;
  pid = fork ();
  if (pid == 0)
    {
      dup2 (to_child[0], STDIN_FILENO);
      dup2 (from_child[1], STDOUT_FILENO);
      execl (program, program, (char *) NULL);
      _exit (127);
    }
  close (to_child[0]);
  close (from_child[1]);
  fds[0] = (struct pollfd) { STDIN_FILENO, POLLIN, 0 };
  fds[1] = (struct pollfd) { from_child[0], POLLIN, 0 };
  outputs[0] = to_child[1];
  outputs[1] = STDOUT_FILENO;
  while (pid > 0 && poll (fds, 2, -1) >= 0)
    {
      gboolean open = TRUE;

      for (int i = 0; i < 2 && open; i++)
        if (fds[i].revents != 0)
          {
            gssize length = read (fds[i].fd, buffer, sizeof buffer);

            open = length > 0 && write_all (outputs[i], buffer, length);
          }
      if (!open)
        break;
    }
  close (to_child[1]);
  close (from_child[0]);
  while (pid > 0 && waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  return 0;
}

static int
row_pool_overhead (BenchSetup *s)
{
  g_autoptr(McpServerConfig) config = example_config ("example");
  g_autoptr(McpServerConfig) relay_config = NULL;
  g_autoptr(GPtrArray) configs = g_ptr_array_new ();
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  McpSession *sessions[3] = { NULL, NULL, NULL };   /* direct, through the relay, through serve */
  const char *tools[3] = { "echo", "echo", "example__echo" };
  double medians[3] = { 0, 0, 0 };
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autofree char *note = NULL;
  g_autofree char *relay_note = NULL;
  double pipe_us, process_us, across_us, added, relay_added;
  int cpus[2] = { -1, -1 };
  gboolean have_two = two_cpus (cpus);
  gboolean timed;

  g_ptr_array_add (configs, config);
  path = write_config_file (configs, &error);
  if (path == NULL)
    return fail ("pool-overhead", error);
  relay_config = mcp_server_config_new ("relay", self, (const char *[]) { "--relay", setup.example, NULL });

  sessions[0] = mcp_session_start (config, NULL, NULL, NULL, &error);
  if (sessions[0] != NULL)
    sessions[1] = mcp_session_start (relay_config, NULL, NULL, NULL, &error);
  if (sessions[1] != NULL)
    sessions[2] = start_serve (path, "proxy", &error);
  timed = sessions[2] != NULL && time_echo_calls (sessions, tools, 3, s->calls * 2, medians, &error);
  for (guint i = 0; i < 3; i++)
    g_clear_pointer (&sessions[i], stop_session);
  g_unlink (path);
  if (!timed)
    return fail ("pool-overhead", error);

  pipe_us = pipe_round_trip_us (s->calls * 5, cpus[0], cpus[0], FALSE);
  process_us = pipe_round_trip_us (s->calls * 5, cpus[0], cpus[0], TRUE);
  across_us = have_two ? pipe_round_trip_us (s->calls * 5, cpus[0], cpus[1], FALSE) : pipe_us;
  added = medians[2] - medians[0];
  relay_added = medians[1] - medians[0];
  note = g_strdup_printf ("+%.0f µs per call; pipe round trip %.1f µs between threads on one CPU, %.1f µs "
                          "between processes on one CPU (%.2f of those), %.1f µs between threads across two "
                          "(%.2f of those); a bare relay adds +%.0f µs (%.2f one-CPU thread round trips); "
                          "median of %d echo calls each, interleaved",
                          added, pipe_us, process_us, added / MAX (process_us, 0.1), across_us,
                          added / MAX (across_us, 0.1), relay_added, relay_added / MAX (pipe_us, 0.1), s->calls * 2);
  emit_row ("pool-overhead", medians[0], medians[2], "µs", added / MAX (pipe_us, 0.1), note);
  relay_note = g_strdup_printf ("a bare relay process (poll, read, write, nothing parsed) between the same "
                                "client and server adds +%.0f µs per call, mcp-pool serve +%.0f µs",
                                relay_added, added);
  emit_row ("pool-overhead-relay", medians[1], medians[2], "µs", added / MAX (relay_added, 0.1), relay_note);
  return 0;
}

/* Row 3: multiplex */

typedef struct {
  McpPool    *pool;
  const char *server;
  const char *tool;
  json_t     *arguments;
  int         calls;
  GError     *error;     /* the first failure */
} CallerJob;

static gpointer
caller_thread (gpointer data)
{
  CallerJob *job = data;

  for (int i = 0; i < job->calls && job->error == NULL; i++)
    {
      g_autoptr(json_t) result = mcp_pool_call_tool (job->pool, job->server, job->tool,
                                                     job->arguments, NULL, &job->error);
    }
  return NULL;
}

/* Wall-clock µs for @callers threads making @calls calls each on @server. */
static gint64
run_callers (McpPool     *pool,
             const char  *server,
             const char  *tool,
             json_t      *arguments,
             int          callers,
             int          calls,
             GError     **error)
{
  g_autofree CallerJob *jobs = g_new0 (CallerJob, callers);
  g_autofree GThread **threads = g_new (GThread *, callers);
  gint64 start = g_get_monotonic_time (), elapsed;

  for (int i = 0; i < callers; i++)
    {
      jobs[i] = (CallerJob) { pool, server, tool, arguments, calls, NULL };
      threads[i] = g_thread_new ("caller", caller_thread, &jobs[i]);
    }
  for (int i = 0; i < callers; i++)
    g_thread_join (threads[i]);
  elapsed = g_get_monotonic_time () - start;
  for (int i = 0; i < callers; i++)
    if (jobs[i].error != NULL)
      {
        if (error != NULL && *error == NULL)
          g_propagate_error (error, g_steal_pointer (&jobs[i].error));
        g_clear_error (&jobs[i].error);
      }
  return error != NULL && *error != NULL ? -1 : elapsed;
}

static int
row_multiplex (BenchSetup *s)
{
  g_autoptr(McpServerConfig) multi = example_config ("multiplexed");
  g_autoptr(McpServerConfig) serial = example_config ("serialised");
  g_autoptr(GPtrArray) configs = g_ptr_array_new ();
  g_autoptr(McpPool) pool = mcp_pool_new (NULL, NULL, NULL);
  g_autoptr(json_t) sleep_args = json_pack ("{s:i}", "ms", 200);
  g_autoptr(json_t) echo_args = json_pack ("{s:s}", "message", "warm-up");
  g_autoptr(GError) error = NULL;
  gint64 multi_us, serial_us;

  serial->max_concurrency = 1;
  g_ptr_array_add (configs, multi);
  g_ptr_array_add (configs, serial);
  mcp_pool_set_servers (pool, configs);
  if (run_callers (pool, "multiplexed", "echo", echo_args, 1, 1, &error) < 0
      || run_callers (pool, "serialised", "echo", echo_args, 1, 1, &error) < 0
      || (multi_us = run_callers (pool, "multiplexed", "sleep", sleep_args, 8, 1, &error)) < 0
      || (serial_us = run_callers (pool, "serialised", "sleep", sleep_args, 8, 1, &error)) < 0)
    {
      mcp_pool_shutdown (pool, 0, MCP_SESSION_TERM_GRACE);
      return fail ("multiplex", error);
    }
  mcp_pool_shutdown (pool, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  emit_row ("multiplex", serial_us / 1000.0, multi_us / 1000.0, "ms", (double) serial_us / multi_us,
            "8 concurrent 200 ms calls on one server; baseline: the same pool with maxConcurrency 1");
  (void) s;
  return 0;
}

/* Row 4: throughput */

typedef struct {
  McpSession *session;
  const char *tool;
  int         calls;
  GError     *error;
} SessionCaller;

static gpointer
session_caller_thread (gpointer data)
{
  SessionCaller *caller = data;

  for (int i = 0; i < caller->calls && caller->error == NULL; i++)
    echo (caller->session, caller->tool, &caller->error);
  return NULL;
}

/* 16 callers, caller i on @sessions[i % 4] with @tools[i % 4]; calls/s. */
static double
run_session_callers (McpSession  **sessions,
                     const char  **tools,
                     int           total,
                     GError      **error)
{
  SessionCaller callers[16];
  GThread *threads[16];
  gint64 start = g_get_monotonic_time (), elapsed;

  for (int i = 0; i < 16; i++)
    {
      callers[i] = (SessionCaller) { sessions[i % 4], tools[i % 4], total / 16, NULL };
      threads[i] = g_thread_new ("caller", session_caller_thread, &callers[i]);
    }
  for (int i = 0; i < 16; i++)
    g_thread_join (threads[i]);
  elapsed = g_get_monotonic_time () - start;
  for (int i = 0; i < 16; i++)
    if (callers[i].error != NULL)
      {
        if (*error == NULL)
          g_propagate_error (error, g_steal_pointer (&callers[i].error));
        g_clear_error (&callers[i].error);
      }
  return *error != NULL ? -1 : (total / 16) * 16 / (elapsed / (double) G_USEC_PER_SEC);
}

/* Rounds of the throughput row: the direct clients, the relays and serve
 * take turns, so that all see the same drift of a shared machine. */
#define THROUGHPUT_ROUNDS 5

/* One way of reaching the 4 servers in the throughput row: its sessions
 * and tools, the seconds its rounds took and, through serve, the CPU
 * seconds serve spent meanwhile. */
typedef struct {
  McpSession *sessions[4];
  const char *tools[4];
  double      seconds;
  double      serve_cpu;
} ThroughputPath;

static int
row_throughput (BenchSetup *s)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autoptr(GError) error = NULL;
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *path = NULL;
  g_autofree char *note = NULL;
  g_autofree char *relay_note = NULL;
  g_autofree char *stateless_note = NULL;
  ThroughputPath direct = { .tools = { "echo", "echo", "echo", "echo" } };
  ThroughputPath relayed = { .tools = { "echo", "echo", "echo", "echo" } };
  ThroughputPath served = { .tools = { "s0__echo", "s1__echo", "s2__echo", "s3__echo" } };
  ThroughputPath stateless = { .tools = { "s0__echo", "s1__echo", "s2__echo", "s3__echo" } };
  ThroughputPath *paths[4] = { &direct, &relayed, &served, &stateless };
  McpSession *serve = NULL, *stateless_serve = NULL;
  int total = MAX (s->calls * 4, 16), made = (total / 16) * 16;
  double lowest = G_MAXDOUBLE, highest = 0;

  for (int i = 0; i < 4; i++)
    g_ptr_array_add (configs, example_config ((const char *[]) { "s0", "s1", "s2", "s3" }[i]));
  path = write_config_file (configs, &error);
  for (int i = 0; path != NULL && i < 4 && error == NULL; i++)
    {
      g_autoptr(McpServerConfig) relay = mcp_server_config_new ("relay", self,
                                                                (const char *[]) { "--relay", setup.example, NULL });

      direct.sessions[i] = mcp_session_start (configs->pdata[i], NULL, NULL, NULL, &error);
      if (error == NULL)
        relayed.sessions[i] = mcp_session_start (relay, NULL, NULL, NULL, &error);
    }
  if (error == NULL)
    serve = start_serve (path, "proxy", &error);
  if (error == NULL)
    stateless_serve = start_serve_speaking (path, "proxy", TRUE, &error);
  for (int i = 0; i < 4; i++)
    {
      served.sessions[i] = serve;
      stateless.sessions[i] = stateless_serve;
    }
  /* Warm every server behind both serves before the clock starts. */
  for (int i = 0; error == NULL && i < 4; i++)
    {
      echo (serve, served.tools[i], &error);
      if (error == NULL)
        echo (stateless_serve, stateless.tools[i], &error);
    }
  for (int round = 0; round < THROUGHPUT_ROUNDS && error == NULL; round++)
    {
      double rates[4];

      for (guint p = 0; p < G_N_ELEMENTS (paths) && error == NULL; p++)
        {
          GPid pid = paths[p] == &served || paths[p] == &stateless ? mcp_session_get_pid (paths[p]->sessions[0]) : 0;
          double cpu_before = pid != 0 ? process_cpu_seconds (pid) : 0;

          rates[p] = run_session_callers (paths[p]->sessions, paths[p]->tools, total, &error);
          if (pid != 0)
            paths[p]->serve_cpu += process_cpu_seconds (pid) - cpu_before;
          paths[p]->seconds += made / rates[p];
        }
      lowest = MIN (lowest, rates[2] / rates[0]);
      highest = MAX (highest, rates[2] / rates[0]);
    }
  for (int i = 0; i < 4; i++)
    {
      g_clear_pointer (&direct.sessions[i], stop_session);
      g_clear_pointer (&relayed.sessions[i], stop_session);
    }
  g_clear_pointer (&serve, stop_session);
  g_clear_pointer (&stateless_serve, stop_session);
  if (path != NULL)
    g_unlink (path);
  if (error != NULL)
    return fail ("throughput", error);

  /* Rates over all rounds: calls made / seconds taken. */
  note = g_strdup_printf ("16 callers over 4 servers, %d rounds of %d calls each way, taking turns "
                          "(ratio %.2f–%.2f by round); mcp-pool CPU %.1f µs per call; "
                          "baseline: 4 direct persistent clients",
                          THROUGHPUT_ROUNDS, made, lowest, highest,
                          served.serve_cpu * G_USEC_PER_SEC / (THROUGHPUT_ROUNDS * made));
  emit_row ("throughput", THROUGHPUT_ROUNDS * made / direct.seconds, THROUGHPUT_ROUNDS * made / served.seconds,
            "calls/s", direct.seconds / served.seconds, note);
  relay_note = g_strdup_printf ("the same callers through a bare relay process in front of each server "
                                "(poll, read, write, nothing parsed), in the same rounds: %.2f× of direct; "
                                "mcp-pool serve %.2f×", direct.seconds / relayed.seconds,
                                direct.seconds / served.seconds);
  emit_row ("throughput-relay", THROUGHPUT_ROUNDS * made / relayed.seconds,
            THROUGHPUT_ROUNDS * made / served.seconds, "calls/s", relayed.seconds / served.seconds, relay_note);
  stateless_note = g_strdup_printf ("the same callers through a second serve, as a client of MCP %s "
                                    "(_meta on every call, no initialize), in the same rounds; "
                                    "serve CPU %.1f µs per call, %.1f µs for the handshake client",
                                    MCP_PROTOCOL_VERSION_STATELESS,
                                    stateless.serve_cpu * G_USEC_PER_SEC / (THROUGHPUT_ROUNDS * made),
                                    served.serve_cpu * G_USEC_PER_SEC / (THROUGHPUT_ROUNDS * made));
  emit_row ("throughput-stateless", THROUGHPUT_ROUNDS * made / served.seconds,
            THROUGHPUT_ROUNDS * made / stateless.seconds, "calls/s", served.seconds / stateless.seconds,
            stateless_note);
  return 0;
}

/* Row 5: memory */

static gboolean
peak_with_sessions (const char  *path,
                    int          sessions,
                    double      *idle_kib,
                    double      *peak_kib,
                    GError     **error)
{
  g_autoptr(McpSession) serve = start_serve (path, "gateway", error);

  if (serve == NULL)
    return FALSE;
  *idle_kib = process_peak_rss_kib (mcp_session_get_pid (serve));
  for (int i = 0; i < sessions; i++)
    {
      g_autofree char *server = g_strdup_printf ("s%d", i);
      g_autoptr(json_t) arguments = json_pack ("{s:s, s:s, s:{s:s}}", "server", server, "tool", "echo",
                                               "arguments", "message", "hello");
      g_autoptr(json_t) result = call_tool (serve, "call_tool", arguments, error);

      if (result == NULL)
        {
          stop_session (serve);
          return FALSE;
        }
    }
  *peak_kib = process_peak_rss_kib (mcp_session_get_pid (serve));
  stop_session (serve);
  return TRUE;
}

static int
row_memory (BenchSetup *s)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autofree char *note = NULL;
  const int counts[3] = { 1, 10, 50 };
  double idle = 0, peak[3] = { 0 };

  for (int i = 0; i < 50; i++)
    {
      g_autofree char *name = g_strdup_printf ("s%d", i);
      g_ptr_array_add (configs, example_config (name));
    }
  path = write_config_file (configs, &error);
  for (int i = 0; path != NULL && i < 3; i++)
    {
      double idle_here;

      if (!peak_with_sessions (path, counts[i], &idle_here, &peak[i], &error))
        break;
      idle = i == 0 ? idle_here : MIN (idle, idle_here);
    }
  if (path != NULL)
    g_unlink (path);
  if (error != NULL)
    return fail ("memory", error);

  note = g_strdup_printf ("peak RSS of mcp-pool serve, children excluded: 1 session %.1f MiB, "
                          "10 sessions %.1f MiB, 50 sessions %.1f MiB (%.0f KiB per session)",
                          peak[0] / 1024, peak[1] / 1024, peak[2] / 1024, (peak[2] - peak[0]) / 49);
  (void) s;
  emit_row ("memory", idle / 1024, peak[2] / 1024, "MiB", peak[2] / idle, note);
  return 0;
}

/* Row 6: sandbox */

static gboolean
run_python (McpCode     *code,
            const char  *source,
            gint64      *elapsed,
            char       **output,
            GError     **error)
{
  g_autoptr(json_t) arguments = json_pack ("{s:s, s:[s]}", "code", source, "servers", "example");
  gint64 start = g_get_monotonic_time ();
  g_autoptr(json_t) run = mcp_code_run (code, arguments, NULL);

  *elapsed = g_get_monotonic_time () - start;
  if (g_strcmp0 (mcp_json_get_string (run, "status"), "success") != 0)
    {
      g_autofree char *text = json_dumps (run, JSON_COMPACT);

      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "run_python failed: %s", text);
      return FALSE;
    }
  if (output != NULL)
    *output = g_strdup (mcp_json_get_string (run, "stdout"));
  return TRUE;
}

/* A run_python of print(1) through @serve, timed end to end. */
static gboolean
serve_print_one (McpSession  *serve,
                 gboolean     fresh,
                 gint64      *elapsed,
                 GError     **error)
{
  g_autoptr(json_t) arguments = json_pack ("{s:s, s:b}", "code", "print(1)\n", "fresh", fresh);
  gint64 start = g_get_monotonic_time ();
  g_autoptr(json_t) result = call_tool (serve, "run_python", arguments, error);

  *elapsed = g_get_monotonic_time () - start;
  return result != NULL;
}

/* Through `serve --expose code`, warm: @fresh_us, a call in a fresh warm
 * sandbox (each given the time the next takes to start), and @session_us,
 * a call in the client's persistent session; medians of @n. */
static gboolean
time_serve_runs (GPtrArray  *configs,
                 int         n,
                 gint64      spacing_us,
                 double     *fresh_us,
                 double     *session_us,
                 GError    **error)
{
  g_autofree char *path = write_config_file (configs, error);
  g_autofree gint64 *fresh = g_new (gint64, n);
  g_autofree gint64 *session = g_new (gint64, n);
  McpSession *serve;
  gboolean ok = TRUE;
  gint64 first;

  if (path == NULL || (serve = start_serve (path, "code", error)) == NULL)
    return FALSE;
  for (int i = 0; ok && i < n; i++)
    {
      g_usleep (spacing_us);
      ok = serve_print_one (serve, TRUE, &fresh[i], error);
    }
  /* The first call makes the session. */
  ok = ok && serve_print_one (serve, FALSE, &first, error);
  for (int i = 0; ok && i < n; i++)
    ok = serve_print_one (serve, FALSE, &session[i], error);
  stop_session (serve);
  g_unlink (path);
  if (ok)
    {
      *fresh_us = median_us (fresh, n);
      *session_us = median_us (session, n);
    }
  return ok;
}

/* The seconds that @source prints as its last line. */
static gboolean
timed_in_sandbox (McpCode     *code,
                  const char  *source,
                  double      *seconds,
                  GError     **error)
{
  g_autofree char *output = NULL;
  gint64 elapsed;

  if (!run_python (code, source, &elapsed, &output, error))
    return FALSE;
  *seconds = g_ascii_strtod (output ? output : "0", NULL);
  return TRUE;
}

static int
row_sandbox (BenchSetup *s)
{
  static const char gathered[] =
    "import asyncio, time\n"
    "t = time.monotonic()\n"
    "await asyncio.gather(*(mcp_example.sleep(ms=100) for i in range(10)))\n"
    "print(time.monotonic() - t)\n";
  static const char serial[] =
    "import time\n"
    "t = time.monotonic()\n"
    "for i in range(10):\n"
    "    await mcp_example.sleep(ms=100)\n"
    "print(time.monotonic() - t)\n";
  g_autoptr(McpServerConfig) config = example_config ("example");
  g_autoptr(GPtrArray) configs = g_ptr_array_new ();
  g_autoptr(McpPool) pool = mcp_pool_new (NULL, NULL, NULL);
  McpCodeOptions cold_options = { .keep_warm = FALSE };
  McpCodeOptions warm_options = { .keep_warm = TRUE };
  g_autoptr(McpCode) cold_code = NULL;
  g_autoptr(McpCode) warm_code = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gint64 *cold = g_new (gint64, s->cold);
  g_autofree gint64 *warm = g_new (gint64, s->cold);
  g_autofree char *note = NULL;
  double cold_us, warm_us, fresh_serve_us = 0, session_serve_us = 0, gathered_s = 0, serial_s = 0;
  gboolean ok = TRUE;

  g_ptr_array_add (configs, config);
  mcp_pool_set_servers (pool, configs);
  cold_code = mcp_code_new (pool, NULL, &cold_options);
  for (int i = 0; ok && i < s->cold; i++)
    ok = run_python (cold_code, "print(1)\n", &cold[i], NULL, &error);
  if (!ok)
    {
      g_autofree char *reason = g_strdup_printf ("not measured: %s", error->message);

      g_clear_pointer (&cold_code, mcp_code_free);
      mcp_pool_shutdown (pool, 0, MCP_SESSION_TERM_GRACE);
      emit_not_measured ("sandbox", reason);
      emit_not_measured ("sandbox-gather", reason);
      return 0;
    }
  cold_us = median_us (cold, s->cold);

  warm_code = mcp_code_new (pool, NULL, &warm_options);
  for (int i = 0; ok && i < s->cold; i++)
    {
      /* Leave the next warm sandbox the time it takes to start. */
      g_usleep (MAX (2 * cold_us, 200000));
      ok = run_python (warm_code, "print(1)\n", &warm[i], NULL, &error);
    }
  if (ok)
    ok = timed_in_sandbox (warm_code, serial, &serial_s, &error)
         && timed_in_sandbox (warm_code, gathered, &gathered_s, &error);
  g_clear_pointer (&cold_code, mcp_code_free);
  g_clear_pointer (&warm_code, mcp_code_free);
  mcp_pool_shutdown (pool, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  if (ok)
    ok = time_serve_runs (configs, s->cold, MAX (2 * cold_us, 200000), &fresh_serve_us, &session_serve_us, &error);
  if (!ok)
    return fail ("sandbox", error);

  warm_us = median_us (warm, s->cold);
  note = g_strdup_printf ("run_python print(1), median of %d: cold sandbox against the warm one", s->cold);
  emit_row ("sandbox", cold_us / 1000, warm_us / 1000, "ms", cold_us / warm_us, note);
  g_free (note);
  note = g_strdup_printf ("run_python print(1) through serve, end to end, median of %d: a warm "
                          "fresh sandbox (fresh=true) against the client's persistent session", s->cold);
  emit_row ("sandbox-session", fresh_serve_us / 1000, session_serve_us / 1000, "ms",
            fresh_serve_us / session_serve_us, note);
  emit_row ("sandbox-gather", serial_s * 1000, gathered_s * 1000, "ms", serial_s / gathered_s,
            "10 tool calls of 100 ms from one run_python: one after another against asyncio.gather");
  return 0;
}

/* Row 7: shared */

/* What a set of process trees holds: every process under the roots, the
 * roots included. */
typedef struct {
  guint    processes;
  double   rss_kib;      /* sum of VmRSS: shared library pages once per process */
  double   pss_kib;      /* sum of Pss: shared pages split between their users */
  GString *pids;         /* "pid pid …", to see that the trees have settled */
  GString *names;        /* "mcp-pool ×3, …" */
} TreeUsage;

static void
tree_usage_clear (TreeUsage *usage)
{
  if (usage->pids != NULL)
    g_string_free (usage->pids, TRUE);
  if (usage->names != NULL)
    g_string_free (usage->names, TRUE);
  *usage = (TreeUsage) { 0 };
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (TreeUsage, tree_usage_clear)

/* The parent of process @name (a /proc entry), or 0. */
static GPid
process_parent (const char *name)
{
  g_autofree char *path = g_build_filename ("/proc", name, "stat", NULL);
  g_autofree char *text = NULL;
  const char *after_name;
  int ppid = 0;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (after_name = strrchr (text, ')')) == NULL
      || sscanf (after_name, ") %*c %d", &ppid) != 1)
    return 0;
  return ppid;
}

/* The program's name: its comm, or the longer name of the executable that
 * comm is cut from (comm keeps 15 bytes), so a keeper forked from mcp-pool
 * is still told apart by the name it gave itself. */
static char *
process_name (GPid pid)
{
  g_autofree char *comm_path = g_strdup_printf ("/proc/%d/comm", pid);
  g_autofree char *exe_path = g_strdup_printf ("/proc/%d/exe", pid);
  g_autofree char *comm = NULL;
  g_autofree char *exe = g_file_read_link (exe_path, NULL);
  g_autofree char *exe_name = exe ? g_path_get_basename (exe) : NULL;

  if (!g_file_get_contents (comm_path, &comm, NULL, NULL))
    return g_strdup ("?");
  g_strchomp (comm);
  if (exe_name != NULL && strlen (comm) == 15 && g_str_has_prefix (exe_name, comm))
    return g_steal_pointer (&exe_name);
  return g_steal_pointer (&comm);
}

/* Reads the trees under @roots from one pass over /proc. */
static void
measure_trees (const GPid *roots,
               guint       n_roots,
               TreeUsage  *usage)
{
  g_autoptr(GHashTable) children = g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) g_array_unref);
  g_autoptr(GHashTable) names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GArray) todo = g_array_new (FALSE, FALSE, sizeof (GPid));
  g_autoptr(GArray) seen = g_array_new (FALSE, FALSE, sizeof (GPid));
  g_autoptr(GList) sorted = NULL;
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *entry;

  tree_usage_clear (usage);
  usage->pids = g_string_new (NULL);
  usage->names = g_string_new (NULL);
  while (proc != NULL && (entry = g_dir_read_name (proc)) != NULL)
    {
      GPid parent;
      GArray *siblings;
      GPid pid;

      if (!g_ascii_isdigit (entry[0]) || (parent = process_parent (entry)) == 0)
        continue;
      pid = atoi (entry);
      siblings = g_hash_table_lookup (children, GINT_TO_POINTER (parent));
      if (siblings == NULL)
        {
          siblings = g_array_new (FALSE, FALSE, sizeof (GPid));
          g_hash_table_insert (children, GINT_TO_POINTER (parent), siblings);
        }
      g_array_append_val (siblings, pid);
    }

  g_array_append_vals (todo, roots, n_roots);
  while (todo->len > 0)
    {
      GPid pid = g_array_index (todo, GPid, todo->len - 1);
      GArray *below = g_hash_table_lookup (children, GINT_TO_POINTER (pid));
      g_autofree char *name = process_name (pid);

      g_array_remove_index (todo, todo->len - 1);
      g_array_append_val (seen, pid);
      usage->rss_kib += process_kib (pid, "status", "VmRSS:");
      usage->pss_kib += process_kib (pid, "smaps_rollup", "Pss:");
      g_hash_table_insert (names, g_strdup (name),
                           GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (names, name)) + 1));
      if (below != NULL)
        g_array_append_vals (todo, below->data, below->len);
    }
  usage->processes = seen->len;
  g_array_sort (seen, compare_gint);
  for (guint i = 0; i < seen->len; i++)
    g_string_append_printf (usage->pids, "%d ", g_array_index (seen, GPid, i));
  sorted = g_list_sort (g_hash_table_get_keys (names), (GCompareFunc) strcmp);
  for (GList *l = sorted; l != NULL; l = l->next)
    g_string_append_printf (usage->names, "%s%s ×%u", l == sorted ? "" : ", ", (char *) l->data,
                            GPOINTER_TO_UINT (g_hash_table_lookup (names, l->data)));
}

/* Measures the trees once they have settled: the same processes and
 * nearly the same RSS twice in a row, 250 ms apart.  A warm sandbox is
 * still starting for a moment after the call that asked for it. */
static void
measure_settled_trees (const GPid *roots,
                       guint       n_roots,
                       TreeUsage  *usage)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  g_auto(TreeUsage) before = { 0 };

  measure_trees (roots, n_roots, usage);
  do
    {
      tree_usage_clear (&before);
      before = *usage;
      *usage = (TreeUsage) { 0 };
      g_usleep (250 * 1000);
      measure_trees (roots, n_roots, usage);
    }
  while ((strcmp (before.pids->str, usage->pids->str) != 0
          || ABS (usage->rss_kib - before.rss_kib) > usage->rss_kib / 100)
         && g_get_monotonic_time () < deadline);
}

/* A client warmed up the way an agent starts: the handshake and tools/list
 * (mcp_session_start does both), then one call to each of the 5 servers. */
static McpSession *
start_warm_client (const char * const  *args,
                   const char          *bus_address,
                   GError             **error)
{
  g_autoptr(GStrvBuilder) argv = g_strv_builder_new ();
  g_auto(GStrv) command = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(McpSession) serve = NULL;
  g_autofree char *variable = NULL;

  /* A client's environment (as in start_serve()) has no room for "env", so
   * the bus address goes through env(1). */
  if (bus_address != NULL)
    {
      variable = g_strconcat ("DBUS_SESSION_BUS_ADDRESS=", bus_address, NULL);
      g_strv_builder_add_many (argv, variable, setup.mcp_pool, NULL);
    }
  g_strv_builder_addv (argv, (const char **) args);
  command = g_strv_builder_end (argv);
  config = mcp_server_config_new ("mcp-pool serve", bus_address != NULL ? "env" : setup.mcp_pool,
                                  (const char * const *) command);
  config->client_environment = TRUE;
  serve = mcp_session_start (config, NULL, NULL, NULL, error);
  for (int i = 0; serve != NULL && i < 5; i++)
    {
      g_autofree char *tool = g_strdup_printf ("s%d__echo", i);

      if (!echo (serve, tool, error))
        g_clear_pointer (&serve, stop_session);
    }
  return g_steal_pointer (&serve);
}

/* A private session bus whose activation file points at the built
 * mcp-poold, the way tests/test-daemon.c makes one. */
typedef struct {
  char        *dir;
  GSubprocess *bus;
  char        *address;
} PrivateBus;

static void
private_bus_free (PrivateBus *bus)
{
  g_autoptr(GDir) dir = NULL;
  const char *name;

  if (bus->bus != NULL)
    {
      g_subprocess_send_signal (bus->bus, SIGTERM);
      g_subprocess_wait (bus->bus, NULL, NULL);
      g_object_unref (bus->bus);
    }
  /* The activation file, the bus config and the bus's socket. */
  dir = bus->dir ? g_dir_open (bus->dir, 0, NULL) : NULL;
  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (bus->dir, name, NULL);

      g_unlink (path);
    }
  if (bus->dir != NULL)
    g_rmdir (bus->dir);
  g_free (bus->dir);
  g_free (bus->address);
  g_free (bus);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (PrivateBus, private_bus_free)

static PrivateBus *
private_bus_start (const char  *poold,
                   const char  *config_path,
                   GError     **error)
{
  g_autoptr(PrivateBus) bus = g_new0 (PrivateBus, 1);
  /* Its stderr says that it cannot raise its fd limit when not root. */
  g_autoptr(GSubprocessLauncher) launcher =
    g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_autoptr(GDataInputStream) output = NULL;
  g_autofree char *service = NULL, *service_path = NULL, *bus_config = NULL, *bus_config_path = NULL;
  g_autofree char *config_arg = NULL;

  bus->dir = g_dir_make_tmp ("mcp-bench-bus-XXXXXX", error);
  if (bus->dir == NULL)
    return NULL;
  service = g_strdup_printf ("[D-BUS Service]\nName=%s\nExec=%s\n", MCP_DAEMON_BUS_NAME, poold);
  service_path = g_build_filename (bus->dir, MCP_DAEMON_BUS_NAME ".service", NULL);
  bus_config = g_strdup_printf ("<busconfig><type>session</type><listen>unix:dir=%s</listen>"
                                "<servicedir>%s</servicedir>"
                                "<policy context=\"default\"><allow user=\"*\"/>"
                                "<allow send_destination=\"*\" eavesdrop=\"true\"/>"
                                "<allow eavesdrop=\"true\"/><allow own=\"*\"/></policy></busconfig>",
                                bus->dir, bus->dir);
  bus_config_path = g_build_filename (bus->dir, "bus.conf", NULL);
  if (!g_file_set_contents (service_path, service, -1, error)
      || !g_file_set_contents (bus_config_path, bus_config, -1, error))
    return NULL;

  /* The activated daemon inherits the bus's environment, and so the config. */
  g_subprocess_launcher_setenv (launcher, "MCP_POOL_CONFIG", config_path, TRUE);
  config_arg = g_strconcat ("--config-file=", bus_config_path, NULL);
  bus->bus = g_subprocess_launcher_spawn (launcher, error, "dbus-daemon", config_arg, "--nofork",
                                          "--print-address=1", NULL);
  if (bus->bus == NULL)
    return NULL;
  output = g_data_input_stream_new (g_subprocess_get_stdout_pipe (bus->bus));
  bus->address = g_data_input_stream_read_line (output, NULL, NULL, error);
  if (bus->address == NULL)
    {
      if (error != NULL && *error == NULL)
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "dbus-daemon printed no address");
      return NULL;
    }
  return g_steal_pointer (&bus);
}

/* The pid of the process that owns @name on the bus at @address. */
static GPid
bus_name_owner_pid (const char  *address,
                    const char  *name,
                    GError     **error)
{
  g_autoptr(GDBusConnection) connection =
    g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                     G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                            NULL, NULL, error);
  g_autoptr(GVariant) reply = NULL;
  guint32 pid = 0;

  if (connection == NULL)
    return 0;
  reply = g_dbus_connection_call_sync (connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "GetConnectionUnixProcessID",
                                       g_variant_new ("(s)", name), G_VARIANT_TYPE ("(u)"),
                                       G_DBUS_CALL_FLAGS_NONE, 10000, NULL, error);
  if (reply != NULL)
    g_variant_get (reply, "(u)", &pid);
  g_dbus_connection_close_sync (connection, NULL, NULL);
  return pid;
}

/* The children of @parent whose program is @name. */
static GArray *
children_named (GPid        parent,
                const char *name)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  GArray *found = g_array_new (FALSE, FALSE, sizeof (GPid));
  const char *entry;

  while (proc != NULL && (entry = g_dir_read_name (proc)) != NULL)
    {
      GPid pid = atoi (entry);
      g_autofree char *program = NULL;

      if (!g_ascii_isdigit (entry[0]) || process_parent (entry) != parent)
        continue;
      program = process_name (pid);
      if (strcmp (program, name) == 0)
        g_array_append_val (found, pid);
    }
  return found;
}

/* Reaps every child of this process, a subreaper, until none is left: the
 * serves' keepers and the activated daemon end a moment after what they
 * belong to.  Kills what is left after 15 s, and says so. */
static gboolean
reap_all_children (GError **error)
{
  gint64 deadline = g_get_monotonic_time () + 15 * G_USEC_PER_SEC;
  g_autoptr(GString) left = g_string_new (NULL);

  for (;;)
    {
      g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
      const char *entry;

      while (waitpid (-1, NULL, WNOHANG) > 0)
        ;
      g_string_truncate (left, 0);
      while (proc != NULL && (entry = g_dir_read_name (proc)) != NULL)
        if (g_ascii_isdigit (entry[0]) && process_parent (entry) == getpid ())
          g_string_append_printf (left, " %s", entry);
      if (left->len == 0)
        return TRUE;
      if (g_get_monotonic_time () >= deadline)
        break;
      g_usleep (50 * 1000);
    }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
               "processes still running 15 s after the bus and the clients ended:%s (killed now)", left->str);
  {
    g_auto(GStrv) pids = g_strsplit (g_strstrip (left->str), " ", -1);

    for (guint i = 0; pids[i] != NULL; i++)
      kill (atoi (pids[i]), SIGKILL);
  }
  while (waitpid (-1, NULL, 0) > 0)
    ;
  return FALSE;
}

static char *
mib (double kib)
{
  return g_strdup_printf ("%.1f MiB", kib / 1024);
}

static int
row_shared (BenchSetup *s)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autoptr(GError) error = NULL;
  g_autoptr(PrivateBus) bus = NULL;
  g_autofree char *path = NULL;
  g_autofree char *dbus_daemon = g_find_program_in_path ("dbus-daemon");
  g_autofree char *note = NULL;
  g_autofree char *base_pss = NULL, *shared_pss = NULL, *sandbox_rss = NULL, *without_sandbox = NULL;
  g_autofree char *bus_rss = NULL;
  g_auto(TreeUsage) baseline = { 0 };
  g_auto(TreeUsage) shared = { 0 };
  g_auto(TreeUsage) sandbox = { 0 };
  McpSession *clients[3] = { NULL };
  GPid roots[4] = { 0 };
  const char *in_process[] = { "serve", "--config", NULL, "--expose", "proxy", NULL };
  const char *shared_args[] = { "serve", "--shared", "--expose", "proxy", NULL };
  gboolean reaped;

  if (dbus_daemon == NULL)
    {
      emit_not_measured ("shared", "not measured: dbus-daemon is not installed");
      return 0;
    }
  /* The activated daemon and the serves' keepers outlive their parents for
   * a moment; they are reparented here to be waited for. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);

  for (int i = 0; i < 5; i++)
    {
      g_autofree char *name = g_strdup_printf ("s%d", i);
      g_ptr_array_add (configs, example_config (name));
    }
  path = write_config_file (configs, &error);
  in_process[2] = path;

  /* Baseline: 3 clients each with its own pool. */
  for (int i = 0; path != NULL && error == NULL && i < 3; i++)
    if ((clients[i] = start_warm_client (in_process, NULL, &error)) != NULL)
      roots[i] = mcp_session_get_pid (clients[i]);
  if (error == NULL)
    measure_settled_trees (roots, 3, &baseline);
  for (int i = 0; i < 3; i++)
    g_clear_pointer (&clients[i], stop_session);

  /* mcp-pool: 3 clients forwarding to one mcp-poold. */
  if (error == NULL)
    bus = private_bus_start (s->mcp_poold, path, &error);
  for (int i = 0; bus != NULL && error == NULL && i < 3; i++)
    if ((clients[i] = start_warm_client (shared_args, bus->address, &error)) != NULL)
      roots[i] = mcp_session_get_pid (clients[i]);
  if (error == NULL)
    roots[3] = bus_name_owner_pid (bus->address, MCP_DAEMON_BUS_NAME, &error);
  if (error == NULL)
    {
      g_autoptr(GArray) sandboxes = NULL;

      measure_settled_trees (roots, 4, &shared);
      sandboxes = children_named (roots[3], "bwrap");
      measure_trees ((GPid *) sandboxes->data, sandboxes->len, &sandbox);
      bus_rss = mib (process_kib (atoi (g_subprocess_get_identifier (bus->bus)), "status", "VmRSS:"));
    }
  for (int i = 0; i < 3; i++)
    g_clear_pointer (&clients[i], stop_session);
  /* Without its bus the daemon stops its servers and exits. */
  g_clear_pointer (&bus, private_bus_free);
  reaped = reap_all_children (error == NULL ? &error : NULL);
  if (path != NULL)
    g_unlink (path);
  if (error != NULL || !reaped)
    return fail ("shared", error);

  base_pss = mib (baseline.pss_kib);
  shared_pss = mib (shared.pss_kib);
  sandbox_rss = mib (sandbox.rss_kib);
  without_sandbox = mib (shared.rss_kib - sandbox.rss_kib);
  note = g_strdup_printf ("3 clients × 5 servers, each client warmed with tools/list and a call to every "
                          "server; baseline: 3 `serve` and everything under them, %u processes (%s); "
                          "mcp-pool: 3 `serve --shared`, mcp-poold and everything under it, %u processes (%s), "
                          "the daemon's warm Python sandbox %u of them and %s (without it %s, %.2f×); "
                          "PSS %s against %s; "
                          "the private bus's dbus-daemon (%s) not counted",
                          baseline.processes, baseline.names->str, shared.processes, shared.names->str,
                          sandbox.processes, sandbox_rss, without_sandbox,
                          baseline.rss_kib / (shared.rss_kib - sandbox.rss_kib),
                          base_pss, shared_pss, bus_rss);
  emit_row ("shared", baseline.rss_kib / 1024, shared.rss_kib / 1024, "MiB",
            baseline.rss_kib / shared.rss_kib, note);
  return 0;
}

/* Row 8: context */

static gsize
tools_list_chars (json_t *tools)
{
  g_autoptr(json_t) answer = json_pack ("{s:O}", "tools", tools);
  g_autofree char *text = json_dumps (answer, JSON_COMPACT);

  return g_utf8_strlen (text, -1);
}

static int
row_context (BenchSetup *s)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL;
  g_autofree char *note = NULL;
  g_autoptr(GString) names = g_string_new (NULL);
  const char *modes[3] = { "code", "gateway", "proxy" };
  const struct { const char *name, *package, *argument; } npm[] = {
    { "everything", "server-everything", "stdio" },
    { "filesystem", "server-filesystem", g_get_tmp_dir () },
    { "memory", "server-memory", NULL },
  };
  gsize downstream = 0, exposed[3] = { 0 };

  g_ptr_array_add (configs, example_config ("example"));
  for (guint i = 0; i < G_N_ELEMENTS (npm); i++)
    {
      g_autofree char *script = interop_script (npm[i].package);

      if (script != NULL)
        g_ptr_array_add (configs, mcp_server_config_new (npm[i].name, "node",
                                                         (const char *[]) { script, npm[i].argument, NULL }));
    }
  for (guint i = 0; i < configs->len; i++)
    {
      McpServerConfig *config = configs->pdata[i];
      g_autoptr(McpSession) session = mcp_session_start (config, NULL, NULL, NULL, &error);
      g_autoptr(json_t) tools = NULL;

      if (session == NULL)
        return fail ("context", error);
      tools = mcp_session_dup_tools (session);
      downstream += tools_list_chars (tools);
      g_string_append_printf (names, "%s%s (%zu tools)", i ? ", " : "", config->name, json_array_size (tools));
      stop_session (session);
    }
  path = write_config_file (configs, &error);
  for (int i = 0; path != NULL && i < 3; i++)
    {
      g_autoptr(McpSession) serve = start_serve (path, modes[i], &error);
      g_autoptr(json_t) tools = NULL;

      if (serve == NULL)
        break;
      tools = mcp_session_dup_tools (serve);
      exposed[i] = tools_list_chars (tools);
      stop_session (serve);
    }
  if (path != NULL)
    g_unlink (path);
  if (error != NULL)
    return fail ("context", error);

  note = g_strdup_printf ("tools/list in characters (tokens at 4 characters each): code %zu (%zu), "
                          "gateway %zu (%zu), proxy %zu (%zu); all downstream lists %zu (%zu): %s",
                          exposed[0], exposed[0] / 4, exposed[1], exposed[1] / 4, exposed[2], exposed[2] / 4,
                          downstream, downstream / 4, names->str);
  (void) s;
  emit_row ("context", downstream, exposed[0], "characters", (double) downstream / exposed[0], note);
  return 0;
}

/* Row 12: passthru */

/* A server's reply line to the upstream reply bytes, on one
 * thread's CPU clock.  Baseline: parse the whole line with Jansson, put
 * the result under the upstream id, encode it; mcp-pool: scan the line,
 * parse the id, splice the result's bytes.  The reply is shaped like
 * server-memory's read_graph (its graph as indented JSON text). */

static char *
graph_reply_line (int    entities,
                  gsize *length)
{
  g_autoptr(json_t) graph = json_pack ("{s:[], s:[]}", "entities", "relations");
  g_autoptr(json_t) id = json_integer (17);
  g_autoptr(json_t) reply = NULL;
  g_autofree char *text = NULL;

  for (int i = 0; i < entities; i++)
    {
      g_autofree char *name = g_strdup_printf ("entity-%d", i);

      json_array_append_new (json_object_get (graph, "entities"),
                             json_pack ("{s:s, s:s, s:[s,s]}", "name", name, "entityType", "person",
                                        "observations", "Works on the \"pool\" project",
                                        "Prefers tea over coffee"));
      json_array_append_new (json_object_get (graph, "relations"),
                             json_pack ("{s:s, s:s, s:s}", "from", name, "to", "entity-0",
                                        "relationType", "knows"));
    }
  text = json_dumps (graph, JSON_INDENT (2));
  reply = mcp_jsonrpc_result_new (id, json_pack ("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text));
  return mcp_jsonrpc_to_line (reply, length, NULL);
}

static double
thread_cpu_us (void)
{
  struct timespec now;

  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &now);
  return now.tv_sec * 1e6 + now.tv_nsec / 1e3;
}

/* CPU µs per reply, the full way and the raw way; FALSE if they differ. */
static gboolean
measure_passthru (const char *line,
                  gsize       length,
                  int         calls,
                  double     *full_us,
                  double     *raw_us)
{
  g_autoptr(json_t) upstream_id = json_string ("upstream-5");
  g_autofree char *full_line = NULL;
  g_autoptr(GBytes) raw_line = NULL;
  gsize full_length = 0;
  double start;

  start = thread_cpu_us ();
  for (int i = 0; i < calls; i++)
    {
      g_autoptr(json_t) message = mcp_jsonrpc_parse (line, length, NULL);
      g_autoptr(json_t) reply = mcp_jsonrpc_result_new (upstream_id, json_incref (json_object_get (message, "result")));

      g_free (full_line);
      full_line = mcp_jsonrpc_to_line (reply, &full_length, NULL);
    }
  *full_us = (thread_cpu_us () - start) / calls;

  start = thread_cpu_us ();
  for (int i = 0; i < calls; i++)
    {
      g_autoptr(McpRawResponse) response = mcp_raw_response_parse (line, length, NULL);
      const char *result;
      gsize result_length;

      result = mcp_raw_response_get_result (response, &result_length);
      g_clear_pointer (&raw_line, g_bytes_unref);
      raw_line = mcp_jsonrpc_splice_reply (upstream_id, result, result_length);
    }
  *raw_us = (thread_cpu_us () - start) / calls;

  /* The compact line in, the same bytes out. */
  return g_bytes_get_size (raw_line) == full_length &&
         memcmp (g_bytes_get_data (raw_line, NULL), full_line, full_length) == 0;
}

/* CPU µs of the raw parse, or of the Jansson parse, alone. */
static double
parse_us (const char *line,
          gsize       length,
          int         calls,
          gboolean    raw)
{
  double start = thread_cpu_us ();

  for (int i = 0; i < calls; i++)
    {
      if (raw)
        mcp_raw_response_unref (mcp_raw_response_parse (line, length, NULL));
      else
        json_decref (mcp_jsonrpc_parse (line, length, NULL));
    }
  return (thread_cpu_us () - start) / calls;
}

static int
row_passthru (BenchSetup *s)
{
  static const int small_entities[] = { 2, 12 };
  g_autoptr(GString) note = g_string_new (NULL);
  gsize length;
  g_autofree char *line = graph_reply_line (100, &length);
  double full_us, raw_us;

  if (!measure_passthru (line, length - 1, s->calls * 4, &full_us, &raw_us))
    {
      g_printerr ("mcp-bench passthru: the spliced reply differs from the encoded one\n");
      return 1;
    }
  g_string_printf (note, "CPU per reply of %.1f KB, parse + encode / scan + splice", length / 1000.0);
  for (gsize i = 0; i < G_N_ELEMENTS (small_entities); i++)
    {
      g_autofree char *small = graph_reply_line (small_entities[i], &length);
      double small_full, small_raw;

      measure_passthru (small, length - 1, s->calls * 20, &small_full, &small_raw);
      g_string_append_printf (note, "; %.1f KB: %.0f µs / %.1f µs", length / 1000.0, small_full, small_raw);
    }
  /* A line scanned, then declined and parsed, pays the scan on top. */
  g_string_append_printf (note, "; a declined line: +%.0f %% over a parse",
                          100.0 * parse_us (line, length - 1, s->calls * 4, TRUE) /
                          parse_us (line, length - 1, s->calls * 4, FALSE));
  emit_row ("passthru", full_us, raw_us, "µs", full_us / raw_us, note->str);
  return 0;
}

/* Row 9: shared-overhead */

/* The median round trip of org.freedesktop.DBus.Peer.Ping to @destination
 * on the bus at @address, @rounds times, or -1.  To the bus itself: half
 * the way of any call through mcp-poold; to mcp-poold (answered on its
 * GDBus thread): the round trip that `serve --shared` adds at the least. */
static double
dbus_ping_us (const char  *address,
              const char  *destination,
              int          rounds,
              GError     **error)
{
  g_autoptr(GDBusConnection) connection =
    g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                     G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                            NULL, NULL, error);
  g_autofree gint64 *samples = g_new (gint64, rounds);

  if (connection == NULL)
    return -1;
  for (int i = 0; i < rounds; i++)
    {
      gint64 start = g_get_monotonic_time ();
      g_autoptr(GVariant) reply =
        g_dbus_connection_call_sync (connection, destination, "/", "org.freedesktop.DBus.Peer", "Ping", NULL,
                                     G_VARIANT_TYPE_UNIT,
                                     G_DBUS_CALL_FLAGS_NONE, 10000, NULL, error);

      if (reply == NULL)
        return -1;
      samples[i] = g_get_monotonic_time () - start;
    }
  g_dbus_connection_close_sync (connection, NULL, NULL);
  return median_us (samples, rounds);
}

static int
row_shared_overhead (BenchSetup *s)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autoptr(GError) error = NULL;
  g_autoptr(PrivateBus) bus = NULL;
  g_autofree char *path = NULL;
  g_autofree char *dbus_daemon = g_find_program_in_path ("dbus-daemon");
  g_autofree char *note = NULL;
  McpSession *in_process = NULL, *shared = NULL;
  const char *in_process_args[] = { "serve", "--config", NULL, "--expose", "proxy", NULL };
  const char *shared_args[] = { "serve", "--shared", "--expose", "proxy", NULL };
  double medians[2] = { 0, 0 };   /* in-process, shared */
  double in_process_us, shared_us, ping_us = -1, daemon_ping_us = -1, added;
  gboolean reaped;

  if (dbus_daemon == NULL)
    {
      emit_not_measured ("shared-overhead", "not measured: dbus-daemon is not installed");
      return 0;
    }
  prctl (PR_SET_CHILD_SUBREAPER, 1);

  /* start_warm_client() calls s0 … s4 once each. */
  for (int i = 0; i < 5; i++)
    {
      g_autofree char *name = g_strdup_printf ("s%d", i);
      g_ptr_array_add (configs, example_config (name));
    }
  path = write_config_file (configs, &error);
  in_process_args[2] = path;
  if (path != NULL)
    bus = private_bus_start (s->mcp_poold, path, &error);
  if (bus != NULL)
    in_process = start_warm_client (in_process_args, NULL, &error);
  if (in_process != NULL)
    shared = start_warm_client (shared_args, bus->address, &error);
  if (shared != NULL
      && time_echo_calls ((McpSession *[]) { in_process, shared }, (const char *[]) { "s0__echo", "s0__echo" },
                          2, s->calls * 2, medians, &error))
    {
      ping_us = dbus_ping_us (bus->address, "org.freedesktop.DBus", s->calls * 5, &error);
      if (ping_us >= 0)
        daemon_ping_us = dbus_ping_us (bus->address, MCP_DAEMON_BUS_NAME, s->calls * 5, &error);
    }
  g_clear_pointer (&in_process, stop_session);
  g_clear_pointer (&shared, stop_session);
  g_clear_pointer (&bus, private_bus_free);
  reaped = reap_all_children (error == NULL ? &error : NULL);
  if (path != NULL)
    g_unlink (path);
  if (error != NULL || !reaped)
    return fail ("shared-overhead", error);

  in_process_us = medians[0];
  shared_us = medians[1];
  added = shared_us - in_process_us;
  note = g_strdup_printf ("+%.0f µs per call, %.2f× the in-process call; D-Bus round trip to mcp-poold "
                          "(Peer.Ping, answered on its GDBus thread) %.1f µs, to the private bus itself %.1f µs "
                          "(the added µs are %.2f× that); median of %d echo calls each through `serve --shared` "
                          "and in-process `serve`, interleaved",
                          added, shared_us / in_process_us, daemon_ping_us, ping_us, added / MAX (ping_us, 0.1),
                          s->calls * 2);
  emit_row ("shared-overhead", in_process_us, shared_us, "µs", added / MAX (daemon_ping_us, 0.1), note);
  return 0;
}

/* Row 10: large-reply */

/* The first process below @root (at any depth) whose program is @name, or 0. */
static GPid
descendant_named (GPid        root,
                  const char *name)
{
  g_autoptr(GArray) level = g_array_new (FALSE, FALSE, sizeof (GPid));

  g_array_append_val (level, root);
  while (level->len > 0)
    {
      g_autoptr(GArray) below = g_array_new (FALSE, FALSE, sizeof (GPid));
      g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
      const char *entry;

      while (proc != NULL && (entry = g_dir_read_name (proc)) != NULL)
        {
          GPid pid = atoi (entry), parent;
          g_autofree char *program = NULL;
          gboolean under = FALSE;

          if (!g_ascii_isdigit (entry[0]) || (parent = process_parent (entry)) == 0)
            continue;
          for (guint i = 0; i < level->len && !under; i++)
            under = g_array_index (level, GPid, i) == parent;
          if (!under)
            continue;
          program = process_name (pid);
          if (strcmp (program, name) == 0)
            return pid;
          g_array_append_val (below, pid);
        }
      g_array_set_size (level, 0);
      g_array_append_vals (level, below->data, below->len);
    }
  return 0;
}

/* Adds entities to server-memory's graph through @serve until read_graph
 * answers with at least @chars characters; the answer's size. */
static gsize
fill_graph (McpSession  *serve,
            gsize        chars,
            GError     **error)
{
  gsize size = 0;

  for (int batch = 0; batch < 250; batch++)
    {
      g_autoptr(json_t) empty = json_object ();
      g_autoptr(json_t) graph = call_tool (serve, "memory__read_graph", empty, error);
      g_autofree char *text = graph ? json_dumps (graph, JSON_COMPACT) : NULL;
      g_autoptr(json_t) entities = json_array ();
      g_autoptr(json_t) arguments = NULL;
      g_autoptr(json_t) created = NULL;

      if (graph == NULL)
        return 0;
      size = strlen (text);
      if (size >= chars)
        return size;
      for (int i = 0; i < 4; i++)
        {
          g_autofree char *entity = g_strdup_printf ("entity-%03d", batch * 4 + i);

          json_array_append_new (entities,
                                 json_pack ("{s:s, s:s, s:[s, s]}", "name", entity, "entityType", "bench",
                                            "observations",
                                            "an observation that makes the graph larger, one of two",
                                            "another observation that makes the graph larger"));
        }
      arguments = json_pack ("{s:O}", "entities", entities);
      created = call_tool (serve, "memory__create_entities", arguments, error);
      if (created == NULL)
        return 0;
    }
  return size;
}

static int
row_large_reply (BenchSetup *s)
{
  g_autofree char *script = interop_script ("server-memory");
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autoptr(GError) error = NULL;
  g_autoptr(McpSession) serve = NULL;
  g_autoptr(json_t) empty = json_object ();
  g_autofree char *path = NULL, *scratch = NULL, *memory_file = NULL, *variable = NULL, *note = NULL;
  McpServerConfig *config;
  GPid serve_pid = 0, server_pid = 0;
  double serve_cpu = 0, server_cpu = 0;
  gsize reply = 0;
  int calls = MAX (s->calls / 2, 10);

  if (script == NULL)
    {
      emit_not_measured ("large-reply", "not measured: server-memory is not installed: cd tests/interop && npm ci");
      return 0;
    }
  scratch = g_dir_make_tmp ("mcp-bench-memory-XXXXXX", &error);
  if (scratch == NULL)
    return fail ("large-reply", error);
  memory_file = g_build_filename (scratch, "memory.jsonl", NULL);
  variable = g_strconcat ("MEMORY_FILE_PATH=", memory_file, NULL);
  config = mcp_server_config_new ("memory", "node", (const char *[]) { script, NULL });
  config->env = g_strdupv ((char *[]) { variable, NULL });
  g_ptr_array_add (configs, config);
  path = write_config_file (configs, &error);
  if (path != NULL)
    serve = start_serve (path, "proxy", &error);
  if (serve != NULL && (reply = fill_graph (serve, 28 * 1024, &error)) > 0)
    {
      serve_pid = mcp_session_get_pid (serve);
      server_pid = descendant_named (serve_pid, "node");
    }
  /* Warm-up: node compiles the paths read_graph takes. */
  for (int i = 0; server_pid != 0 && error == NULL && i < 20; i++)
    json_decref (call_tool (serve, "memory__read_graph", empty, &error));
  if (server_pid != 0 && error == NULL)
    {
      double serve_before = process_cpu_seconds (serve_pid), server_before = process_cpu_seconds (server_pid);

      for (int i = 0; i < calls && error == NULL; i++)
        json_decref (call_tool (serve, "memory__read_graph", empty, &error));
      serve_cpu = process_cpu_seconds (serve_pid) - serve_before;
      server_cpu = process_cpu_seconds (server_pid) - server_before;
    }
  if (serve != NULL && error == NULL && server_pid == 0)
    g_set_error (&error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "no node process below serve (pid %d)", serve_pid);
  g_clear_pointer (&serve, stop_session);
  g_unlink (memory_file);
  g_rmdir (scratch);
  if (path != NULL)
    g_unlink (path);
  if (error != NULL)
    return fail ("large-reply", error);

  note = g_strdup_printf ("server-memory read_graph, %zu-byte result, %d calls through `serve --expose proxy`; "
                          "utime+stime of the serve process against that of the node server, per call",
                          reply, calls);
  emit_row ("large-reply", server_cpu * 1e6 / calls, serve_cpu * 1e6 / calls, "µs",
            serve_cpu / MAX (server_cpu, 1e-6), note);
  return 0;
}

/* Row 11: peers */

/* The JSON lines that bench/peers/peers.mjs prints, by their "target" or
 * "cli" member. */
static gboolean
run_peers_script (const char  *bus_address,
                  json_t      *targets,
                  json_t      *clis,
                  GError     **error)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autoptr(GSubprocess) node = NULL;
  g_autofree char *script = g_build_filename (setup.peers, "peers.mjs", NULL);
  g_autofree char *calls = g_strdup_printf ("%d", MAX (setup.calls / 5, 20));
  g_autofree char *cli_calls = g_strdup_printf ("%d", setup.cold);
  g_autofree char *output = NULL;
  g_auto(GStrv) lines = NULL;

  g_subprocess_launcher_setenv (launcher, "DBUS_SESSION_BUS_ADDRESS", bus_address, TRUE);
  node = g_subprocess_launcher_spawn (launcher, error, "node", script, setup.interop, setup.example,
                                      setup.mcp_pool, calls, cli_calls, NULL);
  if (node == NULL || !g_subprocess_communicate_utf8 (node, NULL, NULL, &output, NULL, error))
    return FALSE;
  if (!g_subprocess_get_if_exited (node) || g_subprocess_get_exit_status (node) != 0)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s failed (its reason is above)", script);
      return FALSE;
    }
  lines = g_strsplit (output, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_autoptr(json_t) line = *lines[i] ? json_loads (lines[i], 0, NULL) : NULL;

      if (mcp_json_get_string (line, "target") != NULL)
        json_object_set (targets, mcp_json_get_string (line, "target"), line);
      else if (mcp_json_get_string (line, "cli") != NULL)
        json_object_set (clis, mcp_json_get_string (line, "cli"), line);
    }
  return TRUE;
}

static double
peer_value (json_t     *targets,
            const char *target,
            const char *key)
{
  return json_number_value (json_object_get (json_object_get (targets, target), key));
}

static char *
peer_summary (json_t     *targets,
              const char *target)
{
  json_t *peer = json_object_get (targets, target);

  return g_strdup_printf ("%s: warm call %.0f µs, 16 callers %.0f calls/s, %.1f MiB RSS (%s)", target,
                          peer_value (targets, target, "latency_us"), peer_value (targets, target, "calls_per_s"),
                          peer_value (targets, target, "rss_kib") / 1024,
                          mcp_json_get_string (peer, "processes"));
}

static int
row_peers (BenchSetup *s)
{
  static const char *const peers[] = { "mcporter", "supergateway", "mcp-hub" };
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  g_autoptr(GError) error = NULL;
  g_autoptr(PrivateBus) bus = NULL;
  g_autoptr(json_t) targets = json_object ();
  g_autoptr(json_t) clis = json_object ();
  g_autofree char *path = NULL, *dbus_daemon = g_find_program_in_path ("dbus-daemon");
  g_autofree char *peers_modules = s->peers ? g_build_filename (s->peers, "node_modules", NULL) : NULL;
  g_autofree char *direct = NULL, *pool = NULL, *note = NULL;
  g_autoptr(json_t) plot = NULL;
  gboolean reaped;

  if (peers_modules == NULL || !g_file_test (peers_modules, G_FILE_TEST_IS_DIR) || !interop_has_sdk ())
    {
      emit_not_measured ("peers", "not measured: the peers are not installed: bench/install (and cd tests/interop && npm ci)");
      return 0;
    }
  if (dbus_daemon == NULL)
    {
      emit_not_measured ("peers", "not measured: dbus-daemon is not installed");
      return 0;
    }
  /* mcporter's daemon and mcp-poold leave their parents; they end here. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  g_ptr_array_add (configs, example_config ("example"));
  path = write_config_file (configs, &error);
  if (path != NULL)
    bus = private_bus_start (s->mcp_poold, path, &error);
  if (bus != NULL)
    run_peers_script (bus->address, targets, clis, &error);
  g_clear_pointer (&bus, private_bus_free);
  reaped = reap_all_children (error == NULL ? &error : NULL);
  if (path != NULL)
    g_unlink (path);
  if (error != NULL || !reaped)
    return fail ("peers", error);

  direct = peer_summary (targets, "direct");
  pool = peer_summary (targets, "mcp-pool");
  note = g_strdup_printf ("every client the MCP SDK's (node); %s; %s", direct, pool);
  plot = json_pack ("{s:O}", "targets", targets);
  emit_row_with ("peers", peer_value (targets, "direct", "latency_us"), peer_value (targets, "mcp-pool", "latency_us"),
                 "µs", peer_value (targets, "mcp-pool", "latency_us") / peer_value (targets, "direct", "latency_us"),
                 note, plot);
  for (guint i = 0; i < G_N_ELEMENTS (peers); i++)
    {
      g_autofree char *name = g_strconcat ("peers-", peers[i], NULL);
      g_autofree char *summary = peer_summary (targets, peers[i]);
      g_autofree char *peer_note = NULL;
      double peer_us = peer_value (targets, peers[i], "latency_us");
      double pool_us = peer_value (targets, "mcp-pool", "latency_us");

      peer_note = g_strdup_printf ("%s; throughput mcp-pool / peer %.2f×, RSS peer / mcp-pool %.1f×", summary,
                                   peer_value (targets, "mcp-pool", "calls_per_s")
                                   / peer_value (targets, peers[i], "calls_per_s"),
                                   peer_value (targets, peers[i], "rss_kib")
                                   / peer_value (targets, "mcp-pool", "rss_kib"));
      emit_row (name, peer_us, pool_us, "µs", peer_us / pool_us, peer_note);
    }
  /* Over HTTP, as the HTTP gateways are reached. */
  {
    double pool_us = peer_value (targets, "mcp-pool-http", "latency_us");
    double gateway_us = MIN (peer_value (targets, "supergateway", "latency_us"),
                             peer_value (targets, "mcp-hub", "latency_us"));
    g_autofree char *summary = peer_summary (targets, "mcp-pool-http");
    g_autofree char *http_note = g_strdup_printf ("%s; the quicker of supergateway and mcp-hub against "
                                                  "serve --listen, the same SDK client over HTTP", summary);

    emit_row ("peers-http", gateway_us, pool_us, "µs", gateway_us / pool_us, http_note);
  }
  {
    double mcporter_ms = json_number_value (json_object_get (json_object_get (clis, "mcporter"), "median_ms"));
    double pool_ms = json_number_value (json_object_get (json_object_get (clis, "mcp-pool"), "median_ms"));
    g_autofree char *cli_note =
      g_strdup_printf ("one-shot CLI echo, median of %d after one warm-up: `mcporter call` with its keep-alive "
                       "daemon against `mcp-pool call --shared` on mcp-poold", s->cold);

    emit_row ("peers-cli", mcporter_ms, pool_ms, "ms", mcporter_ms / pool_ms, cli_note);
  }
  return 0;
}

/* Row 12: remote */

static int
row_remote (BenchSetup *s)
{
  g_autoptr(GSubprocess) node = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  g_autofree char *script = s->peers ? g_build_filename (s->peers, "remote.mjs", NULL) : NULL;
  g_autofree char *everything = interop_script ("server-everything");
  g_autofree char *calls = g_strdup_printf ("%d", MAX (s->calls / 5, 20));
  g_autofree char *output = NULL, *note = NULL;
  double direct_us, pool_us;

  if (script == NULL || everything == NULL || !interop_has_sdk ())
    {
      emit_not_measured ("remote", "not measured: server-everything and the SDK are not installed: "
                                   "cd tests/interop && npm ci");
      return 0;
    }
  node = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE, &error, "node", script, s->interop,
                           s->mcp_pool, calls, NULL);
  if (node == NULL || !g_subprocess_communicate_utf8 (node, NULL, NULL, &output, NULL, &error))
    return fail ("remote", error);
  result = g_subprocess_get_if_exited (node) && g_subprocess_get_exit_status (node) == 0
           ? json_loads (output, 0, NULL) : NULL;
  if (!json_is_object (result))
    {
      g_set_error (&error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s failed (its reason is above)", script);
      return fail ("remote", error);
    }
  direct_us = json_number_value (json_object_get (result, "direct_us"));
  pool_us = json_number_value (json_object_get (result, "pool_us"));
  note = g_strdup_printf ("server-everything echo over Streamable HTTP on loopback, median of %s interleaved "
                          "calls: the SDK client on it directly against the same client on `mcp-pool serve "
                          "--expose proxy` reaching it by URL; %+.0f µs per call", calls, pool_us - direct_us);
  emit_row ("remote", direct_us, pool_us, "µs", pool_us / direct_us, note);
  return 0;
}

/* Row: http */

/* `mcp-pool serve --listen 127.0.0.1:0` of the config at @path; the URL
 * it says in @url. */
static GSubprocess *
start_http_serve (const char  *path,
                  char       **url,
                  GError     **error)
{
  g_autoptr(GSubprocess) serve = g_subprocess_new (G_SUBPROCESS_FLAGS_STDERR_PIPE, error, setup.mcp_pool, "serve",
                                                   "--config", path, "--expose", "proxy", "--listen",
                                                   "127.0.0.1:0", NULL);
  g_autoptr(GDataInputStream) errors = NULL;
  char *line;

  if (serve == NULL)
    return NULL;
  errors = g_data_input_stream_new (g_subprocess_get_stderr_pipe (serve));
  while ((line = g_data_input_stream_read_line (errors, NULL, NULL, error)) != NULL)
    {
      const char *at = strstr (line, "MCP over HTTP at ");

      if (at != NULL)
        *url = g_strdup (at + strlen ("MCP over HTTP at "));
      g_free (line);
      if (*url != NULL)
        return g_steal_pointer (&serve);
    }
  if (error != NULL && *error == NULL)
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "serve --listen said no URL");
  return NULL;
}

/* The HTTP gateways a user would put in front of stdio servers instead,
 * pinned in bench/peers: each runs the example server and is reached with
 * mcp-pool's own client, so that the client costs the same for all and
 * what differs is the gateway. */
typedef enum {
  HTTP_PEER_SUPERGATEWAY,   /* `--stateful`, Streamable HTTP */
  HTTP_PEER_MCP_HUB,        /* SSE at /mcp */
  N_HTTP_PEERS
} HttpPeer;

static const struct {
  const char      *name;
  const char      *script;     /* under bench/peers/node_modules */
  McpTransportKind transport;
  const char      *tool;
} http_peers[N_HTTP_PEERS] = {
  { "supergateway", "supergateway/dist/index.js", MCP_TRANSPORT_HTTP, "echo" },
  { "mcp-hub",      "mcp-hub/dist/cli.js",        MCP_TRANSPORT_SSE,  "example__echo" },
};

/* A port of 127.0.0.1 that was free a moment ago, for a gateway that
 * takes a port number and says nothing of it. */
static guint16
free_loopback_port (GError **error)
{
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP,
                                            error);
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) any_port = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;

  if (socket == NULL || !g_socket_bind (socket, any_port, FALSE, error) ||
      (bound = g_socket_get_local_address (socket, error)) == NULL)
    return 0;
  return g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
}

/* Where @peer's output goes, in its scratch HOME. */
static char *
http_peer_log (HttpPeer    peer,
               const char *home)
{
  return g_strconcat (home, "/", http_peers[peer].name, ".log", NULL);
}

/* @peer serving the config at @config_path, with @home as its HOME; the
 * URL it serves in @url. */
static GSubprocess *
start_http_peer (HttpPeer     peer,
                 const char  *config_path,
                 const char  *home,
                 char       **url,
                 GError     **error)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDERR_MERGE);
  g_autofree char *script = g_build_filename (setup.peers, "node_modules", http_peers[peer].script, NULL);
  g_autofree char *log = http_peer_log (peer, home);
  g_autofree char *port = NULL;
  static const char *const homes[] = { "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME",
                                       "XDG_CACHE_HOME" };
  guint16 number = free_loopback_port (error);

  if (number == 0)
    return NULL;
  port = g_strdup_printf ("%u", number);
  *url = g_strdup_printf ("http://127.0.0.1:%u/mcp", number);
  g_subprocess_launcher_set_stdout_file_path (launcher, log);
  for (guint i = 0; i < G_N_ELEMENTS (homes); i++)
    g_subprocess_launcher_setenv (launcher, homes[i], home, TRUE);
  if (peer == HTTP_PEER_SUPERGATEWAY)
    return g_subprocess_launcher_spawn (launcher, error, "node", script, "--stdio", setup.example,
                                        "--outputTransport", "streamableHttp", "--stateful", "--port", port,
                                        "--logLevel", "none", NULL);
  return g_subprocess_launcher_spawn (launcher, error, "node", script, "--port", port, "--config", config_path,
                                      NULL);
}

/* A session of mcp-pool's own client to @peer at @url, tried again until
 * its echo answers or 60 s pass: a gateway listens a moment after it
 * starts, and mcp-hub lists its servers' tools once they have started. */
static McpSession *
connect_http_peer (HttpPeer     peer,
                   const char  *url,
                   const char  *home,
                   GError     **error)
{
  g_autoptr(McpServerConfig) config = mcp_server_config_new_remote (url, http_peers[peer].transport, NULL, NULL,
                                                                    NULL, FALSE, error);
  gint64 deadline = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;

  while (config != NULL)
    {
      g_autoptr(GError) last = NULL;
      McpSession *session = mcp_session_start (config, NULL, NULL, NULL, &last);

      if (session != NULL && echo (session, http_peers[peer].tool, &last))
        return session;
      g_clear_pointer (&session, stop_session);
      if (g_get_monotonic_time () >= deadline)
        {
          g_autofree char *log_path = http_peer_log (peer, home);
          g_autofree char *log = NULL;

          g_file_get_contents (log_path, &log, NULL, NULL);
          g_set_error (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "%s at %s did not answer within 60 s (%s); its log: %s",
                       http_peers[peer].name, url, last->message, log != NULL ? log : "(none)");
          return NULL;
        }
      g_usleep (200 * 1000);
    }
  return NULL;
}

/* Whether bench/install has put the HTTP gateways in bench/peers. */
static gboolean
http_peers_installed (void)
{
  for (guint i = 0; i < N_HTTP_PEERS; i++)
    {
      g_autofree char *script = setup.peers != NULL
                                ? g_build_filename (setup.peers, "node_modules", http_peers[i].script, NULL)
                                : NULL;

      if (script == NULL || !g_file_test (script, G_FILE_TEST_EXISTS))
        return FALSE;
    }
  return TRUE;
}

static int
row_http (BenchSetup *s)
{
  enum { STDIO_SERVE, HTTP_SERVE, FIRST_PEER, N_TARGETS = FIRST_PEER + N_HTTP_PEERS };
  g_autoptr(McpServerConfig) config = example_config ("example");
  g_autoptr(McpServerConfig) remote = NULL;
  g_autoptr(GPtrArray) configs = g_ptr_array_new ();
  g_autoptr(GSubprocess) http_serve = NULL;
  GSubprocess *gateways[N_HTTP_PEERS] = { NULL };
  McpSession *sessions[N_TARGETS] = { NULL };
  const char *tools[N_TARGETS] = { "example__echo", "example__echo" };
  double medians[N_TARGETS] = { 0 };
  GPid pids[N_TARGETS] = { 0 };
  double cpu_us[N_TARGETS] = { 0 };   /* per call */
  double rates[N_TARGETS] = { 0 };    /* calls/s with 16 callers */
  guint n = HTTP_SERVE + 1;
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL, *url = NULL, *home = NULL;
  g_autofree char *note = NULL;
  gboolean timed = FALSE, reaped = TRUE;

  g_ptr_array_add (configs, config);
  path = write_config_file (configs, &error);
  if (path == NULL || (http_serve = start_http_serve (path, &url, &error)) == NULL ||
      (remote = mcp_server_config_new_remote (url, MCP_TRANSPORT_HTTP, NULL, NULL, NULL, FALSE, &error)) == NULL)
    {
      if (http_serve != NULL)
        g_subprocess_force_exit (http_serve);
      return fail ("http", error);
    }
  sessions[STDIO_SERVE] = start_serve (path, "proxy", &error);
  if (sessions[STDIO_SERVE] != NULL)
    sessions[HTTP_SERVE] = mcp_session_start (remote, NULL, NULL, NULL, &error);
  if (sessions[HTTP_SERVE] != NULL && http_peers_installed ())
    {
      /* The gateways' own children (the example server) end with them. */
      prctl (PR_SET_CHILD_SUBREAPER, 1);
      home = g_dir_make_tmp ("mcp-bench-http-XXXXXX", &error);
      for (HttpPeer peer = 0; home != NULL && peer < N_HTTP_PEERS && error == NULL; peer++)
        {
          g_autofree char *peer_url = NULL;

          gateways[peer] = start_http_peer (peer, path, home, &peer_url, &error);
          if (gateways[peer] != NULL)
            sessions[FIRST_PEER + peer] = connect_http_peer (peer, peer_url, home, &error);
          tools[FIRST_PEER + peer] = http_peers[peer].tool;
        }
      if (error == NULL)
        n = N_TARGETS;
    }
  /* The CPU each HTTP server spends on the calls, whatever the client
   * costs: serve --listen's, and each gateway's own process (the example
   * server below it is the same for all). */
  pids[HTTP_SERVE] = atoi (g_subprocess_get_identifier (http_serve));
  for (HttpPeer peer = 0; n == N_TARGETS && peer < N_HTTP_PEERS; peer++)
    pids[FIRST_PEER + peer] = atoi (g_subprocess_get_identifier (gateways[peer]));
  for (guint i = HTTP_SERVE; i < n; i++)
    cpu_us[i] = process_cpu_seconds (pids[i]);
  timed = error == NULL && time_echo_calls (sessions, tools, n, s->calls * 2, medians, &error);
  for (guint i = HTTP_SERVE; timed && i < n; i++)
    cpu_us[i] = (process_cpu_seconds (pids[i]) - cpu_us[i]) * 1e6 / (s->calls * 2 + 1);
  /* 16 callers on the one session of each HTTP server. */
  for (guint i = HTTP_SERVE; timed && i < n; i++)
    {
      McpSession *same[4] = { sessions[i], sessions[i], sessions[i], sessions[i] };
      const char *same_tool[4] = { tools[i], tools[i], tools[i], tools[i] };

      timed = (rates[i] = run_session_callers (same, same_tool, s->calls * 4, &error)) > 0;
    }
  for (guint i = 0; i < N_TARGETS; i++)
    g_clear_pointer (&sessions[i], stop_session);
  g_subprocess_send_signal (http_serve, SIGTERM);
  g_subprocess_wait (http_serve, NULL, NULL);
  for (guint i = 0; i < N_HTTP_PEERS; i++)
    if (gateways[i] != NULL)
      {
        g_subprocess_send_signal (gateways[i], SIGTERM);
        g_subprocess_wait (gateways[i], NULL, NULL);
        g_clear_object (&gateways[i]);
      }
  if (home != NULL)
    {
      reaped = reap_all_children (error == NULL ? &error : NULL);
      g_spawn_sync (NULL, (char *[]) { "rm", "-rf", home, NULL }, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL,
                    NULL, NULL, NULL);
    }
  g_unlink (path);
  if (!timed || !reaped)
    return fail ("http", error);
  note = g_strdup_printf ("a warm echo of the example server through serve --listen (Streamable HTTP, "
                          "mcp-pool's own HTTP client, a connection per request) against stdio serve; median of %d "
                          "calls each, interleaved; serve --listen's CPU %.0f µs per call, 16 callers %.0f calls/s",
                          s->calls * 2, cpu_us[HTTP_SERVE], rates[HTTP_SERVE]);
  emit_row ("http", medians[STDIO_SERVE], medians[HTTP_SERVE], "µs", medians[HTTP_SERVE] / medians[STDIO_SERVE],
            note);
  for (HttpPeer peer = 0; peer < N_HTTP_PEERS; peer++)
    {
      g_autofree char *name = g_strconcat ("http-", http_peers[peer].name, NULL);
      g_autofree char *peer_note = NULL;
      double peer_us = medians[FIRST_PEER + peer];

      if (n < N_TARGETS)
        {
          emit_not_measured (name, "not measured: the gateways are not installed: bench/install");
          continue;
        }
      peer_note = g_strdup_printf ("the same warm echo through %s (%s, the example server behind it), with the "
                                   "same client, interleaved with the row above: %s / serve --listen; CPU per "
                                   "call %.0f µs against serve --listen's %.0f µs (%.1f×); 16 callers %.0f calls/s against "
                                   "%.0f (%.1f×)",
                                   http_peers[peer].name,
                                   http_peers[peer].transport == MCP_TRANSPORT_SSE ? "HTTP+SSE" : "Streamable HTTP",
                                   http_peers[peer].name, cpu_us[FIRST_PEER + peer], cpu_us[HTTP_SERVE],
                                   cpu_us[FIRST_PEER + peer] / MAX (cpu_us[HTTP_SERVE], 1),
                                   rates[FIRST_PEER + peer], rates[HTTP_SERVE],
                                   rates[HTTP_SERVE] / rates[FIRST_PEER + peer]);
      emit_row (name, peer_us, medians[HTTP_SERVE], "µs", peer_us / medians[HTTP_SERVE], peer_note);
    }
  return 0;
}

/* Row: stateless */

#define STATELESS_META \
  ",\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"," \
  "\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* A tools/call of the example echo with @id, of the stateless revision
 * when @stateless; one line. */
static char *
echo_line (int      id,
           gboolean stateless)
{
  return g_strdup_printf ("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
                          "\"example__echo\",\"arguments\":{\"message\":\"hi\"}%s}}", id,
                          stateless ? STATELESS_META : "");
}

/* Sends @line on @in and reads @out up to the reply to @id, which must be
 * a result. */
static gboolean
stdio_exchange (GOutputStream    *in,
                GDataInputStream *out,
                const char       *line,
                int               id,
                GError          **error)
{
  g_autofree char *wanted = g_strdup_printf ("\"id\":%d,", id);

  if (!g_output_stream_write_all (in, line, strlen (line), NULL, NULL, error) ||
      !g_output_stream_write_all (in, "\n", 1, NULL, NULL, error))
    return FALSE;
  while (TRUE)
    {
      g_autofree char *reply = g_data_input_stream_read_line (out, NULL, NULL, error);

      if (reply == NULL)
        {
          if (error != NULL && *error == NULL)
            g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "serve ended before the reply to %d", id);
          return FALSE;
        }
      if (strstr (reply, wanted) != NULL)
        {
          if (strstr (reply, "\"result\"") == NULL)
            g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "serve answered %s", reply);
          return strstr (reply, "\"result\"") != NULL;
        }
    }
}

/* POSTs @body to @url (with @session_id, if any, or the stateless
 * revision's headers), and reads the answer, which must be a result. */
static gboolean
http_exchange (SoupSession  *http,
               const char   *url,
               const char   *session_id,
               const char   *body,
               char        **new_session,
               GError      **error)
{
  g_autoptr(SoupMessage) message = soup_message_new ("POST", url);
  SoupMessageHeaders *headers = soup_message_get_request_headers (message);
  g_autoptr(GBytes) sent = g_bytes_new (body, strlen (body));
  g_autoptr(GBytes) answer = NULL;

  soup_message_headers_replace (headers, "Accept", "application/json, text/event-stream");
  if (session_id != NULL)
    soup_message_headers_replace (headers, "Mcp-Session-Id", session_id);
  else if (strstr (body, "2026-07-28") != NULL)
    {
      soup_message_headers_replace (headers, "MCP-Protocol-Version", "2026-07-28");
      soup_message_headers_replace (headers, "Mcp-Method", "tools/call");
      soup_message_headers_replace (headers, "Mcp-Name", "example__echo");
    }
  soup_message_set_request_body_from_bytes (message, "application/json", sent);
  if ((answer = soup_session_send_and_read (http, message, NULL, error)) == NULL)
    return FALSE;
  if (new_session != NULL)
    *new_session = g_strdup (soup_message_headers_get_one (soup_message_get_response_headers (message),
                                                           "Mcp-Session-Id"));
  if (soup_message_get_status (message) != SOUP_STATUS_OK ||
      g_strstr_len (g_bytes_get_data (answer, NULL), g_bytes_get_size (answer), "\"result\"") == NULL)
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "serve --listen answered HTTP %u: %.*s",
                   soup_message_get_status (message), (int) g_bytes_get_size (answer),
                   (const char *) g_bytes_get_data (answer, NULL));
      return FALSE;
    }
  return TRUE;
}

#define INITIALIZE_LINE \
  "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"," \
  "\"capabilities\":{},\"clientInfo\":{\"name\":\"mcp-bench\",\"version\":\"1\"}}}"

typedef struct {
  GOutputStream    *in;
  GDataInputStream *out;
  SoupSession      *http;
  const char       *url;
  const char       *session_id;   /* the handshake client's, over HTTP */
} StatelessTarget;

/* One warm echo over @target, of the stateless revision or not. */
static gboolean
stateless_echo (StatelessTarget *target,
                int              id,
                gboolean         stateless,
                GError         **error)
{
  g_autofree char *line = echo_line (id, stateless);

  if (target->http != NULL)
    return http_exchange (target->http, target->url, stateless ? NULL : target->session_id, line, NULL, error);
  return stdio_exchange (target->in, target->out, line, id, error);
}

/* The medians of @calls warm echoes each way over @target, interleaved:
 * [0] with the handshake, [1] stateless. */
static gboolean
time_stateless (StatelessTarget *target,
                int              calls,
                double           medians[2],
                GError         **error)
{
  g_autofree gint64 *samples = g_new (gint64, (gsize) calls * 2);
  int id = 1;

  for (int way = 0; way < 2; way++)
    if (!stateless_echo (target, id++, way, error))
      return FALSE;
  for (int i = 0; i < calls; i++)
    for (int way = 0; way < 2; way++)
      {
        gint64 start = g_get_monotonic_time ();

        if (!stateless_echo (target, id++, way, error))
          return FALSE;
        samples[(gsize) way * calls + i] = g_get_monotonic_time () - start;
      }
  for (int way = 0; way < 2; way++)
    medians[way] = median_us (samples + (gsize) way * calls, calls);
  return TRUE;
}

/* The same warm echo of the example server from a client of MCP
 * 2026-07-28 (no handshake; the revision and capabilities in each
 * request's _meta, the result finished with resultType and serverInfo)
 * and from a handshake client: on one stdio serve, interleaved on its one
 * connection, and on one serve --listen, a session against none. */
static int
row_stateless (BenchSetup *s)
{
  g_autoptr(McpServerConfig) config = example_config ("example");
  g_autoptr(GPtrArray) configs = g_ptr_array_new ();
  g_autoptr(GSubprocess) serve = NULL;
  g_autoptr(GSubprocess) http_serve = NULL;
  g_autoptr(GDataInputStream) out = NULL;
  g_autoptr(SoupSession) http = soup_session_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *path = NULL, *url = NULL, *session_id = NULL, *note = NULL;
  StatelessTarget stdio_target = { 0 }, http_target = { 0 };
  double stdio_us[2] = { 0 }, http_us[2] = { 0 };
  gboolean timed;

  g_ptr_array_add (configs, config);
  soup_session_set_proxy_resolver (http, NULL);
  if ((path = write_config_file (configs, &error)) == NULL ||
      (serve = g_subprocess_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE, &error,
                                 s->mcp_pool, "serve", "--config", path, "--expose", "proxy", NULL)) == NULL)
    return fail ("stateless", error);
  out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (serve));
  stdio_target = (StatelessTarget) { g_subprocess_get_stdin_pipe (serve), out };
  timed = stdio_exchange (stdio_target.in, out, INITIALIZE_LINE, 0, &error) &&
          g_output_stream_write_all (stdio_target.in, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
                                     55, NULL, NULL, &error) &&
          time_stateless (&stdio_target, s->calls, stdio_us, &error);
  if (timed && (http_serve = start_http_serve (path, &url, &error)) != NULL &&
      http_exchange (http, url, NULL, INITIALIZE_LINE, &session_id, &error))
    {
      http_target = (StatelessTarget) { NULL, NULL, http, url, session_id };
      timed = time_stateless (&http_target, s->calls, http_us, &error);
    }
  else
    timed = FALSE;
  g_output_stream_close (g_subprocess_get_stdin_pipe (serve), NULL, NULL);
  g_subprocess_wait (serve, NULL, NULL);
  if (http_serve != NULL)
    {
      g_subprocess_send_signal (http_serve, SIGTERM);
      g_subprocess_wait (http_serve, NULL, NULL);
    }
  g_unlink (path);
  if (!timed)
    return fail ("stateless", error);
  note = g_strdup_printf ("a warm echo of the example server from a stateless client (MCP 2026-07-28: _meta in each "
                          "request, no handshake) against a handshake client, median of %d interleaved calls each: "
                          "on one stdio serve; over serve --listen %.0f µs against %.0f µs in a session (%.2f×)",
                          s->calls, http_us[1], http_us[0], http_us[1] / http_us[0]);
  emit_row ("stateless", stdio_us[0], stdio_us[1], "µs", stdio_us[1] / stdio_us[0], note);
  emit_row ("stateless-http", http_us[0], http_us[1], "µs", http_us[1] / http_us[0],
            "the same over serve --listen: stateless requests against requests of one session");
  return 0;
}

/* Main */

static const struct {
  const char   *name;
  BenchRowFunc  func;
} rows[] = {
  { "cold-vs-warm",  row_cold_vs_warm },
  { "pool-overhead", row_pool_overhead },
  { "multiplex",     row_multiplex },
  { "throughput",    row_throughput },
  { "memory",        row_memory },
  { "sandbox",       row_sandbox },
  { "shared",        row_shared },
  { "context",       row_context },
  { "passthru",      row_passthru },
  { "shared-overhead", row_shared_overhead },
  { "large-reply",   row_large_reply },
  { "peers",         row_peers },
  { "remote",        row_remote },
  { "http",          row_http },
  { "stateless",     row_stateless },
};

typedef struct {
  BenchRowFunc func;
  int          status;
  gboolean     done;     /* atomic */
} BenchJob;

static gpointer
bench_job_thread (gpointer data)
{
  BenchJob *job = data;

  job->status = job->func (&setup);
  g_atomic_int_set (&job->done, TRUE);
  g_main_context_wakeup (NULL);
  return NULL;
}

static char *
beside_self (const char *relative)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self ? g_path_get_dirname (self) : g_strdup (".");

  return g_build_filename (dir, relative, NULL);
}

int
main (int    argc,
      char **argv)
{
  g_autofree char *example = NULL, *mcp_pool = NULL, *mcp_poold = NULL, *interop = NULL;
  g_autofree char *peers = NULL;
  int calls = 500, cold = 5;
  GOptionEntry entries[] = {
    { "example-server", 0, 0, G_OPTION_ARG_FILENAME, &example, "The fixture server", "PATH" },
    { "mcp-pool", 0, 0, G_OPTION_ARG_FILENAME, &mcp_pool, "The mcp-pool program", "PATH" },
    { "mcp-poold", 0, 0, G_OPTION_ARG_FILENAME, &mcp_poold, "The mcp-poold program", "PATH" },
    { "interop", 0, 0, G_OPTION_ARG_FILENAME, &interop, "tests/interop/node_modules", "DIR" },
    { "peers", 0, 0, G_OPTION_ARG_FILENAME, &peers, "bench/peers, with its node_modules", "DIR" },
    { "calls", 'n', 0, G_OPTION_ARG_INT, &calls, "Warm calls per measurement (default 500)", "N" },
    { "cold", 0, 0, G_OPTION_ARG_INT, &cold, "Cold starts per measurement (default 5)", "N" },
    { NULL }
  };
  g_autoptr(GOptionContext) context = g_option_context_new ("ROW — one repetition of one bench/run row");
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) usage = g_string_new ("Rows:");
  BenchJob job = { NULL, 0, FALSE };
  GThread *thread;

  if (argc == 3 && strcmp (argv[1], "--relay") == 0)
    return run_relay (argv[2]);
  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    g_string_append_printf (usage, " %s", rows[i].name);
  g_option_context_add_main_entries (context, entries, NULL);
  g_option_context_set_description (context, usage->str);
  if (!g_option_context_parse (context, &argc, &argv, &error) || argc != 2 || calls < 1 || cold < 1)
    {
      g_printerr ("mcp-bench: %s\n%s\n", error ? error->message : "give one row", usage->str);
      return 2;
    }
  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    if (strcmp (argv[1], rows[i].name) == 0)
      job.func = rows[i].func;
  if (job.func == NULL)
    {
      g_printerr ("mcp-bench: unknown row %s\n%s\n", argv[1], usage->str);
      return 2;
    }

  json_object_seed (0);
  setup.example = example ? g_steal_pointer (&example) : beside_self ("../src/mcp-pool-example-server");
  setup.mcp_pool = mcp_pool ? g_steal_pointer (&mcp_pool) : beside_self ("../src/mcp-pool");
  setup.mcp_poold = mcp_poold ? g_steal_pointer (&mcp_poold) : beside_self ("../src/mcp-poold");
  setup.interop = g_steal_pointer (&interop);
  setup.peers = g_steal_pointer (&peers);
  setup.calls = calls;
  setup.cold = cold;

  thread = g_thread_new ("bench", bench_job_thread, &job);
  while (!g_atomic_int_get (&job.done))
    g_main_context_iteration (NULL, TRUE);
  g_thread_join (thread);
  return job.status;
}
