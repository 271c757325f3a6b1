/* test-util.c — what the test programs share. */
#include "config.h"

#include "test-util.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include <gio/gio.h>

struct _TestIoThread {
  GMainContext *context;
  GThread      *thread;
  gboolean      stop;     /* atomic */
};

static gpointer
io_thread_main (gpointer data)
{
  TestIoThread *io = data;

  g_main_context_push_thread_default (io->context);
  while (!g_atomic_int_get (&io->stop))
    g_main_context_iteration (io->context, TRUE);
  g_main_context_pop_thread_default (io->context);
  return NULL;
}

TestIoThread *
test_io_thread_new (void)
{
  TestIoThread *io = g_new0 (TestIoThread, 1);

  io->context = g_main_context_new ();
  io->thread = g_thread_new ("test-io", io_thread_main, io);
  return io;
}

GMainContext *
test_io_thread_get_context (TestIoThread *io)
{
  return io->context;
}

void
test_io_thread_free (TestIoThread *io)
{
  g_atomic_int_set (&io->stop, TRUE);
  g_main_context_wakeup (io->context);
  g_thread_join (io->thread);
  /* Let sources destroyed from other threads be finalised. */
  while (g_main_context_iteration (io->context, FALSE))
    ;
  g_main_context_unref (io->context);
  g_free (io);
}

const char *
test_fixture_path (void)
{
  static char *path;

  if (path == NULL)
    path = g_test_build_filename (G_TEST_BUILT, "mcp-fixture-server", NULL);
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

void
test_assert_no_children (void)
{
  siginfo_t info;
  int result = waitid (P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);

  g_assert_cmpint (result, ==, -1);
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

gboolean
test_wait_for (gboolean (*check) (gpointer),
               gpointer  data,
               guint     timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + timeout_ms * G_TIME_SPAN_MILLISECOND;

  while (!check (data))
    {
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (2000);
    }
  return TRUE;
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
