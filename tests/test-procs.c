/* test-procs.c — the programs under test, and what they leave behind. */
#include "config.h"

#include "test-procs.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-wait.h"

const char *
test_fixture_path (void)
{
  static char *path;

  if (path == NULL)
    path = g_test_build_filename (G_TEST_BUILT, "mcp-fixture-server", NULL);
  return path;
}

const char *
test_mcp_pool_path (void)
{
  static char *path;

  /* Absolute: tests run mcp-pool in folders of its own. */
  if (path == NULL && g_getenv ("MCP_POOL_MCP_POOL") != NULL)
    path = g_canonicalize_filename (g_getenv ("MCP_POOL_MCP_POOL"), NULL);
  if (path == NULL)
    {
      g_autofree char *built = g_test_build_filename (G_TEST_BUILT, "..", "src", "mcp-pool", NULL);

      path = g_canonicalize_filename (built, NULL);
    }
  return path;
}

McpServerConfig *
test_fixture_config (const char *name,
                     ...)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new ();
  McpServerConfig *config;
  const char *flag;
  va_list flags;

  va_start (flags, name);
  while ((flag = va_arg (flags, const char *)) != NULL)
    g_ptr_array_add (args, (gpointer) flag);
  va_end (flags);
  g_ptr_array_add (args, NULL);

  config = mcp_server_config_new (name, test_fixture_path (), (const char * const *) args->pdata);
  config->source = g_strdup ("test");
  /* The default bounds, scaled: under valgrind, a start or a 20 MiB reply
   * takes longer than they allow. */
  config->start_timeout_ms = test_timeout_ms (config->start_timeout_ms);
  config->call_timeout_ms = test_timeout_ms (config->call_timeout_ms);
  return config;
}

gboolean
test_process_group_gone (GPid pgid)
{
  return kill (-pgid, 0) != 0 && errno == ESRCH;
}

gboolean
test_process_gone (GPid pid)
{
  return kill (pid, 0) != 0 && errno == ESRCH;
}

/* What a pool's keeper (mcp_spawner_keep_groups()) is called in /proc. */
#define KEEPER_COMM "mcp-pool-keep"
/* The keeper exits as soon as its pool has; this only bounds a slow
 * machine's scheduling. */
#define KEEPER_EXIT_TIMEOUT_MS (5 * 1000)

/* The name of process @pid, a zombie's too, or NULL once it is reaped. */
static char *
process_comm (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/comm", pid);
  char *comm = NULL;

  if (!g_file_get_contents (path, &comm, NULL, NULL))
    return NULL;
  return g_strchomp (comm);
}

static pid_t
process_parent (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *stat = NULL;
  const char *fields;
  int parent = 0;

  /* The name in parentheses may hold spaces and parentheses itself. */
  if (!g_file_get_contents (path, &stat, NULL, NULL) || (fields = strrchr (stat, ')')) == NULL ||
      sscanf (fields + 1, " %*c %d", &parent) != 1)
    return 0;
  return parent;
}

/* A child of this process, running or zombie, or 0 if none is found.  One
 * that is not a keeper comes first, so that a failure names the leak. */
static pid_t
find_child (void)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  pid_t self = getpid (), keeper = 0;
  const char *name;

  g_assert_nonnull (proc);
  while ((name = g_dir_read_name (proc)) != NULL)
    {
      pid_t pid = (pid_t) g_ascii_strtoll (name, NULL, 10);
      g_autofree char *comm = NULL;

      if (pid <= 0 || process_parent (pid) != self)
        continue;
      comm = process_comm (pid);
      if (g_strcmp0 (comm, KEEPER_COMM) != 0)
        return pid;
      keeper = pid;
    }
  return keeper;
}

/* Waits until @deadline for child @pid to exit, and reaps it; FALSE if it
 * still runs. */
static gboolean
reap_child (pid_t  pid,
            gint64 deadline)
{
  int pidfd = pidfd_open (pid, 0);

  if (pidfd >= 0)
    {
      struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
      gint64 left;

      while ((left = deadline - g_get_monotonic_time ()) > 0 &&
             poll (&pfd, 1, (int) (left / 1000 + 1)) < 0 && errno == EINTR)
        ;
      close (pidfd);
    }
  else
    {
      /* No pidfd_open() (valgrind before 3.20): poll. */
      while (waitpid (pid, NULL, WNOHANG) == 0)
        {
          if (g_get_monotonic_time () > deadline)
            return FALSE;
          g_usleep (2000);
        }
      return TRUE;
    }
  return waitpid (pid, NULL, WNOHANG) != 0;
}

/* Fails on any child, running or zombie, except a keeper whose pool has
 * ended: orphaned to this subreaper, it exits right after its pool. */
void
test_assert_no_children (void)
{
  gint64 deadline = g_get_monotonic_time () + test_timeout_ms (KEEPER_EXIT_TIMEOUT_MS) * G_TIME_SPAN_MILLISECOND;
  siginfo_t info;

  while (waitid (P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0)
    {
      pid_t pid = find_child ();
      g_autofree char *comm = pid > 0 ? process_comm (pid) : NULL;

      /* None found: one was reaped meanwhile, by GLib for a GSubprocess. */
      if (pid == 0 && g_get_monotonic_time () < deadline)
        continue;
      if (pid == 0)
        g_error ("waitid() reports a child of the test, but /proc shows none");
      if (g_strcmp0 (comm, KEEPER_COMM) != 0)
        g_error ("Process %d (%s) is left behind as a child of the test", pid, comm ? comm : "gone");
      if (!reap_child (pid, deadline))
        g_error ("Process %d (" KEEPER_COMM ") still runs %u s after its mcp-pool ended",
                 pid, test_timeout_ms (KEEPER_EXIT_TIMEOUT_MS) / 1000);
    }
  g_assert_cmpint (errno, ==, ECHILD);
}

/* GLib keeps some fds for the whole process once they are first used: the
 * default context's eventfd, the worker thread's, the inotify fd behind
 * file monitors.  They are created here, before anyone counts. */
static void
create_process_wide_fds (void)
{
  static gsize done;

  if (g_once_init_enter (&done))
    {
      g_autoptr(GFile) dir = g_file_new_for_path (g_get_tmp_dir ());
      g_autoptr(GFileMonitor) monitor = g_file_monitor_directory (dir, G_FILE_MONITOR_NONE, NULL, NULL);

      g_main_context_default ();
      g_once_init_leave (&done, 1);
    }
}

guint
test_count_open_fds (void)
{
  g_autoptr(GDir) dir = NULL;
  guint count = 0;

  create_process_wide_fds ();
  dir = g_dir_open ("/proc/self/fd", 0, NULL);
  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    count++;
  return count;
}

static gboolean
open_fds_at_most (gpointer count)
{
  return test_count_open_fds () <= GPOINTER_TO_UINT (count);
}

guint64
test_process_rss_kib (const char *pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%s/status", pid);
  g_autofree char *status = NULL;
  const char *line;

  g_assert_true (g_file_get_contents (path, &status, NULL, NULL));
  line = strstr (status, "VmRSS:");
  g_assert_nonnull (line);
  return g_ascii_strtoull (line + strlen ("VmRSS:"), NULL, 10);
}

/* What each open fd is, for a failure to name the one left open. */
static void
report_open_fds (void)
{
  g_autoptr(GDir) dir = g_dir_open ("/proc/self/fd", 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename ("/proc/self/fd", name, NULL);
      g_autofree char *target = g_file_read_link (path, NULL);

      g_test_message ("fd %s: %s", name, target != NULL ? target : "?");
    }
}

void
test_assert_open_fds (guint count)
{
  if (test_wait_for (open_fds_at_most, GUINT_TO_POINTER (count), 5000))
    return;
  report_open_fds ();
  g_assert_cmpuint (test_count_open_fds (), <=, count);
}

static GStrv
wrapper_words (void)
{
  const char *wrapper = g_getenv ("MCP_POOL_TEST_WRAPPER");
  g_autoptr(GError) error = NULL;
  char **words = NULL;

  if (wrapper == NULL || *wrapper == '\0')
    return g_new0 (char *, 1);
  if (!g_shell_parse_argv (wrapper, NULL, &words, &error))
    g_error ("MCP_POOL_TEST_WRAPPER=%s: %s", wrapper, error->message);
  return words;
}

GStrv
test_wrap_argv (const char * const *argv)
{
  g_auto(GStrv) words = wrapper_words ();
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();

  g_strv_builder_addv (builder, (const char **) words);
  g_strv_builder_addv (builder, (const char **) argv);
  return g_strv_builder_end (builder);
}

char *
test_wrap_command_line (const char *command_line)
{
  const char *wrapper = g_getenv ("MCP_POOL_TEST_WRAPPER");

  if (wrapper == NULL || *wrapper == '\0')
    return g_strdup (command_line);
  return g_strdup_printf ("%s %s", wrapper, command_line);
}

static void
on_exited (GObject      *source,
           GAsyncResult *result,
           gpointer      user_data)
{
  *(gboolean *) user_data = TRUE;
}

/* GLib's worker thread watches every GSubprocess's child; once it has
 * reaped it, the identifier is gone. */
static gboolean
subprocess_reaped (gpointer process)
{
  return g_subprocess_get_identifier (process) == NULL;
}

/* A wait started before GLib's worker thread has reaped the child is
 * completed by that thread, which attaches its result to the default
 * context while this thread iterates it: GLib's context lock orders the
 * two, but libglib takes it where ThreadSanitizer cannot see.  So the
 * wait starts only after the reaping, and completes on this thread. */
void
test_die_with_parent (gpointer unused)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

gboolean
test_subprocess_wait (GSubprocess *process,
                      guint        timeout_ms)
{
  gboolean exited = FALSE;

  if (!test_wait_for (subprocess_reaped, process, timeout_ms))
    return FALSE;
  g_subprocess_wait_async (process, NULL, on_exited, &exited);
  while (!exited)
    g_main_context_iteration (NULL, TRUE);
  return TRUE;
}

/* Thread switches */

struct _TestThreadSwitches {
  GPid        pid;
  GHashTable *before;    /* tid → count */
  GHashTable *deltas;    /* tid → count, after _end() */
  GHashTable *names;     /* tid → comm */
};

/* tid → the switches of that thread so far; names into @names. */
static GHashTable *
read_thread_switches (GPid        pid,
                      GHashTable *names)
{
  g_autofree char *tasks = g_strdup_printf ("/proc/%d/task", (int) pid);
  g_autoptr(GDir) dir = g_dir_open (tasks, 0, NULL);
  GHashTable *switches = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  const char *tid;

  g_assert_nonnull (dir);
  while ((tid = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *status_path = g_build_filename (tasks, tid, "status", NULL);
      g_autofree char *comm_path = g_build_filename (tasks, tid, "comm", NULL);
      g_autofree char *status = NULL;
      g_autofree char *comm = NULL;
      g_auto(GStrv) lines = NULL;
      guint64 count = 0;

      /* A thread may end between the listing and the read. */
      if (!g_file_get_contents (status_path, &status, NULL, NULL))
        continue;
      lines = g_strsplit (status, "\n", -1);
      for (guint j = 0; lines[j] != NULL; j++)
        if (g_str_has_prefix (lines[j], "voluntary_ctxt_switches:") ||
            g_str_has_prefix (lines[j], "nonvoluntary_ctxt_switches:"))
          count += g_ascii_strtoull (strchr (lines[j], ':') + 1, NULL, 10);
      g_hash_table_insert (switches, g_strdup (tid), GSIZE_TO_POINTER ((gsize) count));
      if (g_file_get_contents (comm_path, &comm, NULL, NULL))
        g_hash_table_insert (names, g_strdup (tid), g_strdup (g_strstrip (comm)));
    }
  return switches;
}

TestThreadSwitches *
test_thread_switches_begin (GPid pid)
{
  TestThreadSwitches *switches = g_new0 (TestThreadSwitches, 1);

  switches->pid = pid;
  switches->names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  switches->before = read_thread_switches (pid, switches->names);
  return switches;
}

void
test_thread_switches_end (TestThreadSwitches *switches)
{
  g_autoptr(GHashTable) after = read_thread_switches (switches->pid, switches->names);
  g_autoptr(GString) report = g_string_new (NULL);
  GHashTableIter iter;
  gpointer tid, count;

  switches->deltas = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_hash_table_iter_init (&iter, after);
  while (g_hash_table_iter_next (&iter, &tid, &count))
    {
      gsize delta = GPOINTER_TO_SIZE (count) - GPOINTER_TO_SIZE (g_hash_table_lookup (switches->before, tid));

      g_hash_table_insert (switches->deltas, g_strdup (tid), GSIZE_TO_POINTER (delta));
      g_string_append_printf (report, " %s (%s): %" G_GSIZE_FORMAT, (char *) tid,
                              (char *) g_hash_table_lookup (switches->names, tid), delta);
    }
  g_test_message ("context switches per thread:%s", report->str);
}

guint64
test_thread_switches_of (TestThreadSwitches *switches,
                         const char         *prefix)
{
  g_autofree char *main_tid = g_strdup_printf ("%d", (int) switches->pid);
  GHashTableIter iter;
  gpointer tid, delta;
  guint64 sum = 0;

  g_assert_nonnull (switches->deltas);
  g_hash_table_iter_init (&iter, switches->deltas);
  while (g_hash_table_iter_next (&iter, &tid, &delta))
    {
      gboolean is_main = g_str_equal (tid, main_tid);
      const char *name = g_hash_table_lookup (switches->names, tid);

      if (g_str_equal (prefix, "main") ? is_main
          : g_str_equal (prefix, "others") ? !is_main
          : (name != NULL && g_str_has_prefix (name, prefix)))
        sum += GPOINTER_TO_SIZE (delta);
    }
  return sum;
}

void
test_thread_switches_free (TestThreadSwitches *switches)
{
  g_hash_table_unref (switches->before);
  g_clear_pointer (&switches->deltas, g_hash_table_unref);
  g_hash_table_unref (switches->names);
  g_free (switches);
}

typedef struct {
  const char *log;
  char       *url;
} SaidUrl;

static gboolean
said_url (gpointer data)
{
  SaidUrl *said = data;
  g_autofree char *log = NULL;
  const char *at;

  if (!g_file_get_contents (said->log, &log, NULL, NULL) || (at = strstr (log, "MCP over HTTP at ")) == NULL ||
      strchr (at, '\n') == NULL)
    return FALSE;
  at += strlen ("MCP over HTTP at ");
  said->url = g_strndup (at, strchr (at, '\n') - at);
  return TRUE;
}

char *
test_wait_for_http_url (const char *log,
                        guint       timeout_ms)
{
  SaidUrl said = { log, NULL };

  test_wait_for (said_url, &said, timeout_ms);
  return said.url;
}
