/* test-util.c — what the test programs share. */
#include "config.h"

#include "test-util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gunixinputstream.h>

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

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

json_t *
test_find_tool (json_t     *tools,
                const char *name)
{
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    if (g_strcmp0 (json_string_value (json_object_get (tool, "name")), name) == 0)
      return tool;
  return NULL;
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
open_fds_are (gpointer count)
{
  return test_count_open_fds () == GPOINTER_TO_UINT (count);
}

void
test_assert_open_fds (guint count)
{
  if (!test_wait_for (open_fds_are, GUINT_TO_POINTER (count), 5000))
    g_assert_cmpuint (test_count_open_fds (), ==, count);
}

guint
test_timeout_ms (guint timeout_ms)
{
  static guint slowdown;

  if (slowdown == 0)
    {
      const char *value = g_getenv ("MCP_POOL_TEST_SLOWDOWN");
      guint64 parsed = 1;

      if (value != NULL && *value != '\0' &&
          !g_ascii_string_to_unsigned (value, 10, 1, 1000, &parsed, NULL))
        g_error ("MCP_POOL_TEST_SLOWDOWN=%s is not a whole number from 1 to 1000", value);
      g_atomic_int_set (&slowdown, (guint) parsed);
    }
  return timeout_ms * g_atomic_int_get (&slowdown);
}

gboolean
test_under_valgrind (void)
{
#ifdef HAVE_VALGRIND_VALGRIND_H
  return RUNNING_ON_VALGRIND;
#else
  return FALSE;
#endif
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

gboolean
test_wait_for (gboolean (*check) (gpointer),
               gpointer  data,
               guint     timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + test_timeout_ms (timeout_ms) * G_TIME_SPAN_MILLISECOND;

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

/* A raw MCP client */

TestClient *
test_client_new (GSubprocessLauncher *launcher,
                 const char * const  *argv)
{
  g_autoptr(GError) error = NULL;
  TestClient *client = g_new0 (TestClient, 1);
  GInputStream *output;

  g_subprocess_launcher_set_flags (launcher, G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  client->process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  client->input = g_object_ref (g_subprocess_get_stdin_pipe (client->process));
  output = g_subprocess_get_stdout_pipe (client->process);
  client->output_fd = g_unix_input_stream_get_fd (G_UNIX_INPUT_STREAM (output));
  client->pending = g_string_new (NULL);
  client->stash = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  client->notifications = g_ptr_array_new_with_free_func ((GDestroyNotify) json_decref);
  client->next_id = 1;
  return client;
}

void
test_client_free (TestClient *client)
{
  g_clear_object (&client->input);
  g_clear_object (&client->process);
  g_string_free (client->pending, TRUE);
  g_ptr_array_unref (client->stash);
  g_ptr_array_unref (client->notifications);
  g_free (client);
}

void
test_client_send_line (TestClient *client,
                       const char *line)
{
  g_autoptr(GError) error = NULL;

  if (g_output_stream_write_all (client->input, line, strlen (line), NULL, NULL, &error))
    g_output_stream_write_all (client->input, "\n", 1, NULL, NULL, &error);
  g_assert_no_error (error);
}

/* Takes @message. */
void
test_client_send (TestClient *client,
                  json_t     *message)
{
  g_autoptr(json_t) owned = message;
  g_autofree char *line = json_dumps (owned, JSON_COMPACT);

  test_client_send_line (client, line);
}

/* The next line without its newline, or NULL at end of file (an
 * unterminated last line is dropped, as a client drops it). */
char *
test_client_read_line (TestClient *client)
{
  gint64 deadline = g_get_monotonic_time () + TEST_CLIENT_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;

  for (;;)
    {
      char *newline = memchr (client->pending->str, '\n', client->pending->len);
      struct pollfd pfd = { .fd = client->output_fd, .events = POLLIN };
      char chunk[16384];
      gint64 left;
      ssize_t n;

      if (newline != NULL)
        {
          char *line = g_strndup (client->pending->str, newline - client->pending->str);

          g_string_erase (client->pending, 0, newline - client->pending->str + 1);
          return line;
        }
      left = deadline - g_get_monotonic_time ();
      if (left <= 0)
        g_error ("The MCP server wrote nothing for %d s", TEST_CLIENT_TIMEOUT_MS / 1000);
      if (poll (&pfd, 1, left / 1000 + 1) <= 0)
        continue;
      n = read (client->output_fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR)
        continue;
      g_assert_cmpint (n, >=, 0);
      if (n == 0)
        return NULL;
      g_string_append_len (client->pending, chunk, n);
    }
}

/* The next message, or NULL at end of file. */
json_t *
test_client_read_message (TestClient *client)
{
  g_autofree char *line = test_client_read_line (client);
  json_error_t error;
  json_t *message;

  if (line == NULL)
    return NULL;
  /* Replies may carry "\u0000", as the requests may. */
  message = json_loads (line, JSON_ALLOW_NUL, &error);
  if (!json_is_object (message))
    g_error ("The MCP server wrote a line that is not a JSON object (%s): %.200s", error.text, line);
  return message;
}

gboolean
test_message_has_id (json_t     *message,
                     json_int_t  id)
{
  json_t *value = json_object_get (message, "id");

  if (json_object_get (message, "method") != NULL)
    return FALSE;
  if (id == TEST_CLIENT_NULL_ID)
    return json_is_null (value);
  return json_is_integer (value) && json_integer_value (value) == id;
}

/* Files a message that is not the one awaited.  The servers under test
 * send their client no requests. */
static void
client_keep (TestClient *client,
             json_t     *message)
{
  if (json_object_get (message, "method") != NULL)
    {
      g_assert_null (json_object_get (message, "id"));
      g_ptr_array_add (client->notifications, message);
    }
  else
    g_ptr_array_add (client->stash, message);
}

/* The reply with @id, in whatever order replies come. */
json_t *
test_client_read_reply (TestClient *client,
                        json_int_t  id)
{
  json_t *message;

  for (guint i = 0; i < client->stash->len; i++)
    if (test_message_has_id (g_ptr_array_index (client->stash, i), id))
      return g_ptr_array_steal_index (client->stash, i);

  while ((message = test_client_read_message (client)) != NULL)
    {
      if (test_message_has_id (message, id))
        return message;
      client_keep (client, message);
    }
  g_error ("The MCP server closed its stdout before the reply to request %" JSON_INTEGER_FORMAT, id);
}

/* Sends a request with a new id; takes @params (may be NULL). */
json_int_t
test_client_request (TestClient *client,
                     const char *method,
                     json_t     *params)
{
  json_int_t id = client->next_id++;

  test_client_send (client, json_pack ("{s:s, s:I, s:s, s:o*}", "jsonrpc", "2.0", "id", id,
                                       "method", method, "params", params));
  return id;
}

/* The result of a request that must succeed; takes @params. */
json_t *
test_client_result (TestClient *client,
                    const char *method,
                    json_t     *params)
{
  g_autoptr(json_t) reply = test_client_read_reply (client, test_client_request (client, method, params));
  json_t *result = json_object_get (reply, "result");

  if (result == NULL)
    {
      g_autofree char *text = json_dumps (reply, JSON_COMPACT);

      g_error ("%s failed: %s", method, text);
    }
  return json_incref (result);
}

/* Takes @params (may be NULL). */
void
test_client_notify (TestClient *client,
                    const char *method,
                    json_t     *params)
{
  test_client_send (client, json_pack ("{s:s, s:s, s:o*}", "jsonrpc", "2.0", "method", method,
                                       "params", params));
}

guint
test_client_count_notifications (TestClient *client,
                                 const char *method)
{
  guint count = 0;

  for (guint i = 0; i < client->notifications->len; i++)
    count += g_strcmp0 (json_string_value (json_object_get (g_ptr_array_index (client->notifications, i),
                                                            "method")), method) == 0;
  return count;
}

/* Waits for one more notification @method than seen so far. */
void
test_client_wait_notification (TestClient *client,
                               const char *method)
{
  guint seen = test_client_count_notifications (client, method);

  while (test_client_count_notifications (client, method) == seen)
    {
      json_t *message = test_client_read_message (client);

      if (message == NULL)
        g_error ("The MCP server closed its stdout before sending %s", method);
      client_keep (client, message);
    }
}

/* What MCP clients do first to end a server. */
void
test_client_close_input (TestClient *client)
{
  g_autoptr(GError) error = NULL;

  g_output_stream_close (client->input, NULL, &error);
  g_assert_no_error (error);
  g_clear_object (&client->input);
}

/* Stops reading: the server's next write fails. */
void
test_client_close_output (TestClient *client)
{
  g_autoptr(GError) error = NULL;

  g_input_stream_close (g_subprocess_get_stdout_pipe (client->process), NULL, &error);
  g_assert_no_error (error);
  client->output_fd = -1;
}

static void
on_exited (GObject      *source,
           GAsyncResult *result,
           gpointer      user_data)
{
  *(gboolean *) user_data = TRUE;
}

/* Files every message up to end of file, then waits (bounded) for the
 * process to exit. */
void
test_client_wait_exit (TestClient *client)
{
  json_t *message;

  while (client->output_fd >= 0 && (message = test_client_read_message (client)) != NULL)
    client_keep (client, message);
  test_client_wait_process (client);
}

/* Waits (bounded) for the process to exit, reading nothing of its output. */
void
test_client_wait_process (TestClient *client)
{
  if (!test_subprocess_wait (client->process, TEST_CLIENT_WAIT_MS))
    g_error ("The MCP server did not exit within %d s", TEST_CLIENT_TIMEOUT_MS / 1000);
  client->exited = TRUE;
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
