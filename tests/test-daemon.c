/* test-daemon.c — mcp-poold on a private bus.
 *
 * Each test runs its own dbus-daemon whose service directory holds the
 * activation file made from data/io.github.mcppool.Pool.service.in with
 * Exec= pointing into the build tree, so the daemon is started the way a
 * session bus starts it: by activation, on the first call.  The servers
 * are the fixture's, from a config file named by MCP_POOL_CONFIG, which
 * the activated daemon inherits from the bus.
 *
 * This program never changes its own environment (setenv() races with
 * every thread that reads it, and GLib's threads do): the bus and each
 * child get theirs from an envp.  That is why the bus is not a GTestDBus,
 * which sets DBUS_SESSION_BUS_ADDRESS.
 *
 * Its own children are no GSubprocesses (the MCP clients of test-client
 * aside): GLib's worker thread reaps those and completes their waits by
 * attaching sources to the default context while this thread iterates
 * it, under a lock that ThreadSanitizer cannot see.  A Child is spawned,
 * read and reaped on this thread alone.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gunixfdlist.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <libsoup/soup.h>

#include "daemon/mcp-remote.h"
#include "test-client.h"
#include "test-files.h"
#include "test-procs.h"
#include "test-sdk-client.h"
#include "test-wait.h"

/* Every wait for the daemon or a process to act is bounded by this,
 * scaled by test_timeout_ms(). */
#define WAIT_MS (15 * 1000)
/* The uid a test plays a foreign user with. */
#define NOBODY  65534

/* A child process of the test, never reaped by GLib. */
typedef struct {
  GPid     pid;
  int      out_fd;              /* its stdout, or -1 */
  int      err_fd;              /* its stderr, or -1 */
  int      wait_status;         /* once reaped */
  gboolean reaped;
} Child;

typedef struct {
  char            *dir;
  char            *runtime_dir; /* dir/user/UID: the bus listens at its "bus", as a user bus does */
  Child           *bus;
  char            *address;
  GStrv            envp;        /* for children: ours, with the bus and the config */
  GDBusConnection *connection;
  GPtrArray       *signals;     /* "Member server [state]" strings, in arrival order */
} Fixture;

typedef struct {
  const char *daemon_args;      /* appended to Exec= */
  const char *server_args;      /* the fixture server's, as JSON array items */
  gboolean    listen;           /* and --listen unix:DIR/http.sock */
  gboolean    two_servers;      /* and "fix2", the same server */
} Setup;

static const Setup plain = { "--idle-timeout=600", "" };
static const Setup quick_idle = { "--idle-timeout=1", "" };
static const Setup with_grandchild = { "--idle-timeout=600", "\"--grandchild\"" };
static const Setup with_prompts = { "--idle-timeout=600", "\"--prompts\", \"--resources\", \"fix\"" };
static const Setup with_logging = { "--idle-timeout=600", "\"--logging\", \"--resources\", \"fix\"" };
static const Setup listening = { "--idle-timeout=600 --server fix", "", TRUE };
static const Setup two_servers = { "--idle-timeout=600", "", FALSE, TRUE };

static const char *
poold_path (void)
{
  const char *path = g_getenv ("MCP_POOL_POOLD");

  g_assert_nonnull (path);
  return path;
}

/* The activation file, made from the one that gets installed. */
static void
write_service_file (const char  *services,
                    const Setup *setup)
{
  g_autofree char *template_path = g_test_build_filename (G_TEST_DIST, "..", "data",
                                                          "io.github.mcppool.Pool.service.in", NULL);
  g_autofree char *template = NULL;
  g_autofree char *dir = g_path_get_dirname (services);
  g_autofree char *listen = setup->listen ? g_strdup_printf (" --listen unix:%s/http.sock", dir) : g_strdup ("");
  g_autofree char *command_line = g_strdup_printf ("%s %s%s", poold_path (), setup->daemon_args, listen);
  g_autofree char *exec = test_wrap_command_line (command_line);
  g_autofree char *path = g_build_filename (services, "io.github.mcppool.Pool.service", NULL);
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) parts = NULL;
  g_autofree char *text = NULL;

  g_file_get_contents (template_path, &template, NULL, &error);
  g_assert_no_error (error);
  parts = g_strsplit (template, "@libexecdir@/mcp-poold", -1);
  g_assert_cmpuint (g_strv_length (parts), ==, 2);
  text = g_strjoinv (exec, parts);
  g_file_set_contents (path, text, -1, &error);
  g_assert_no_error (error);
}

static GDBusConnection *
connect_to_bus (Fixture *fixture)
{
  g_autoptr(GError) error = NULL;
  GDBusConnection *connection =
    g_dbus_connection_new_for_address_sync (fixture->address,
                                            G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                            G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                            NULL, NULL, &error);

  g_assert_no_error (error);
  return connection;
}

/* An activated daemon is reparented to this process, a subreaper, so
 * whatever it leaves is reaped here before looking. */
static void
reap_exited (void)
{
  while (waitpid (-1, NULL, WNOHANG) > 0)
    ;
}

static gboolean
process_gone (gpointer pid)
{
  reap_exited ();
  return test_process_gone (GPOINTER_TO_INT (pid));
}

static gboolean
group_gone (gpointer pgid)
{
  reap_exited ();
  return test_process_group_gone (GPOINTER_TO_INT (pgid));
}

/* Children */

/* A child's stdout and stderr: pipes to the test, /dev/null, or (without
 * a flag) the test's own. */
typedef enum {
  CHILD_OUT_PIPE = 1 << 0,
  CHILD_ERR_PIPE = 1 << 1,
  CHILD_OUT_NULL = 1 << 2,
} ChildFlags;

/* Spawns @argv (looked up in PATH) with @envp, stdin from /dev/null and
 * @setup run in the child before exec. */
static Child *
child_spawn (const char * const   *argv,
             const char * const   *envp,
             ChildFlags            flags,
             GSpawnChildSetupFunc  setup)
{
  Child *child = g_new0 (Child, 1);
  GSpawnFlags spawn_flags = G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH | G_SPAWN_STDIN_FROM_DEV_NULL;
  g_autoptr(GError) error = NULL;

  if (flags & CHILD_OUT_NULL)
    spawn_flags |= G_SPAWN_STDOUT_TO_DEV_NULL;
  child->out_fd = child->err_fd = -1;
  g_spawn_async_with_pipes_and_fds (NULL, argv, envp, spawn_flags, setup, NULL, -1, -1, -1, NULL, NULL, 0,
                                    &child->pid, NULL, (flags & CHILD_OUT_PIPE) ? &child->out_fd : NULL,
                                    (flags & CHILD_ERR_PIPE) ? &child->err_fd : NULL, &error);
  g_assert_no_error (error);
  return child;
}

static gboolean
child_reap (gpointer data)
{
  Child *child = data;
  pid_t pid;

  if (child->reaped)
    return TRUE;
  pid = waitpid (child->pid, &child->wait_status, WNOHANG);
  /* Nothing else reaps it: reap_exited() runs only once the children
   * that a test still waits for cannot have exited. */
  g_assert_cmpint (pid, !=, -1);
  child->reaped = pid == child->pid;
  return child->reaped;
}

/* Waits (bounded) for @child to exit and reaps it. */
static void
child_wait (Child *child)
{
  g_assert_true (test_wait_for (child_reap, child, WAIT_MS));
}

/* Reads what @fd has now into @buffer; FALSE at end of file. */
static gboolean
read_available (int      fd,
                GString *buffer)
{
  char chunk[4096];
  ssize_t n;

  do
    n = read (fd, chunk, sizeof chunk);
  while (n < 0 && errno == EINTR);
  g_assert_cmpint (n, >=, 0);
  g_string_append_len (buffer, chunk, n);
  return n > 0;
}

/* Reads @child's pipes (bounded) until the condition: end of both, or,
 * with @until_newline, a line on stdout. */
static void
child_read (Child   *child,
            GString *out,
            GString *err,
            gboolean until_newline)
{
  gint64 deadline = g_get_monotonic_time () + test_timeout_ms (WAIT_MS) * G_TIME_SPAN_MILLISECOND;
  struct pollfd fds[2] = { { child->out_fd, POLLIN, 0 }, { child->err_fd, POLLIN, 0 } };
  GString *buffers[2] = { out, err };

  while ((fds[0].fd >= 0 || fds[1].fd >= 0) && !(until_newline && strchr (out->str, '\n') != NULL))
    {
      gint64 left = deadline - g_get_monotonic_time ();
      int ready;

      g_assert_cmpint (left, >, 0);
      /* A signal (SIGCHLD of another child) may cut the wait short. */
      ready = poll (fds, G_N_ELEMENTS (fds), (int) (left / G_TIME_SPAN_MILLISECOND) + 1);
      if (ready < 0 && errno == EINTR)
        continue;
      g_assert_cmpint (ready, >=, 0);
      for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
        if (fds[i].fd >= 0 && fds[i].revents != 0 && !read_available (fds[i].fd, buffers[i]))
          fds[i].fd = -1;
    }
}

static void
child_close_pipes (Child *child)
{
  if (child->out_fd >= 0)
    g_close (child->out_fd, NULL);
  if (child->err_fd >= 0)
    g_close (child->err_fd, NULL);
  child->out_fd = child->err_fd = -1;
}

/* Collects what @child writes to its pipes until it exits; @out and @err
 * may be NULL. */
static void
child_communicate (Child  *child,
                   char  **out,
                   char  **err)
{
  g_autoptr(GString) out_text = g_string_new (NULL);
  g_autoptr(GString) err_text = g_string_new (NULL);

  child_read (child, out_text, err_text, FALSE);
  child_close_pipes (child);
  child_wait (child);
  if (out != NULL)
    *out = g_string_free (g_steal_pointer (&out_text), FALSE);
  if (err != NULL)
    *err = g_string_free (g_steal_pointer (&err_text), FALSE);
}

static gboolean
child_exited_with (Child *child,
                   int    code)
{
  g_assert_true (child->reaped);
  return WIFEXITED (child->wait_status) && WEXITSTATUS (child->wait_status) == code;
}

/* Frees @child, which has been reaped. */
static void
child_free (Child *child)
{
  g_assert_true (child->reaped);
  child_close_pipes (child);
  g_free (child);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Child, child_free)

/* Waiting on the default context, for GDBus. */
static void
on_async_done (GObject      *source,
               GAsyncResult *result,
               gpointer      user_data)
{
  *(GAsyncResult **) user_data = g_object_ref (result);
}

static GAsyncResult *
wait_for_result (GAsyncResult **result)
{
  while (*result == NULL)
    g_main_context_iteration (NULL, TRUE);
  return *result;
}

/* Closes @connection, waiting on the default context (see above). */
static void
close_connection (GDBusConnection *connection)
{
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;

  g_dbus_connection_close (connection, NULL, on_async_done, &result);
  g_dbus_connection_close_finish (connection, wait_for_result (&result), &error);
  g_assert_no_error (error);
}

/* A session bus of the test's own, listening at @listen, with @services
 * for activation, and @envp (NULL: ours) for the daemons it starts.
 * It admits every uid, for test_foreign_uid(); its address goes to
 * @address. */
static Child *
start_bus (const char         *dir,
           const char         *listen,
           const char         *services,
           const char * const *envp,
           char              **address)
{
  g_autofree char *config = g_build_filename (dir, "bus.conf", NULL);
  g_autofree char *config_text =
    g_strdup_printf ("<busconfig><type>session</type><listen>%s</listen><servicedir>%s</servicedir>"
                     "<policy context=\"default\"><allow user=\"*\"/>"
                     "<allow send_destination=\"*\" eavesdrop=\"true\"/>"
                     "<allow eavesdrop=\"true\"/><allow own=\"*\"/></policy></busconfig>",
                     listen, services);
  g_autofree char *config_arg = g_strconcat ("--config-file=", config, NULL);
  const char *argv[] = { "dbus-daemon", config_arg, "--nofork", "--print-address=1", NULL };
  g_auto(GStrv) own_envp = g_get_environ ();
  g_autoptr(GString) out = g_string_new (NULL);
  g_autoptr(GString) err = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  Child *bus;

  g_file_set_contents (config, config_text, -1, &error);
  g_assert_no_error (error);
  bus = child_spawn (argv, envp != NULL ? envp : (const char * const *) own_envp, CHILD_OUT_PIPE,
                     test_die_with_parent);
  child_read (bus, out, err, TRUE);
  /* It prints nothing more. */
  child_close_pipes (bus);
  g_assert_nonnull (strchr (out->str, '\n'));
  *address = g_strndup (out->str, strchr (out->str, '\n') - out->str);
  return bus;
}

static void
stop_bus (Child *bus)
{
  g_assert_cmpint (kill (bus->pid, SIGTERM), ==, 0);
  child_wait (bus);
  child_free (bus);
}

static void
fixture_set_up (Fixture       *fixture,
                gconstpointer  data)
{
  const Setup *setup = data;
  g_autofree char *services = NULL;
  g_autofree char *config = NULL;
  g_autofree char *config_text = NULL;
  g_autofree char *uid = g_strdup_printf ("%u", (guint) geteuid ());
  g_autofree char *listen = NULL;
  g_autofree char *escaped = NULL;
  g_auto(GStrv) bus_envp = NULL;
  g_autoptr(GError) error = NULL;

  fixture->dir = g_dir_make_tmp ("mcp-poold-test-XXXXXX", &error);
  g_assert_no_error (error);
  services = g_build_filename (fixture->dir, "services", NULL);
  g_assert_cmpint (g_mkdir (services, 0700), ==, 0);
  write_service_file (services, setup);

  config = g_build_filename (fixture->dir, "servers.json", NULL);
  config_text = g_strdup_printf ("{\"mcpServers\": {\"fix\": {\"command\": \"%s\", \"args\": [%s]}%s%s%s}}",
                                 test_fixture_path (), setup->server_args,
                                 setup->two_servers ? ", \"fix2\": {\"command\": \"" : "",
                                 setup->two_servers ? test_fixture_path () : "", setup->two_servers ? "\"}" : "");
  g_file_set_contents (config, config_text, -1, &error);
  g_assert_no_error (error);

  fixture->runtime_dir = g_build_filename (fixture->dir, "user", uid, NULL);
  g_assert_cmpint (g_mkdir_with_parents (fixture->runtime_dir, 0700), ==, 0);
  escaped = g_dbus_address_escape_value (fixture->runtime_dir);
  listen = g_strdup_printf ("unix:path=%s/bus", escaped);
  /* The bus, and so the daemon it starts, has this environment. */
  bus_envp = g_environ_setenv (g_get_environ (), "MCP_POOL_CONFIG", config, TRUE);
  fixture->bus = start_bus (fixture->dir, listen, services, (const char * const *) bus_envp, &fixture->address);
  fixture->envp = g_environ_setenv (g_strdupv (bus_envp), "DBUS_SESSION_BUS_ADDRESS", fixture->address, TRUE);
  fixture->connection = connect_to_bus (fixture);
  fixture->signals = g_ptr_array_new_with_free_func (g_free);
}

/* Reaps what has exited; TRUE once no child is left. */
static gboolean
reap_and_check_no_children (gpointer unused)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;
  gboolean none = TRUE;

  reap_exited ();
  while ((name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *stat_path = g_build_filename ("/proc", name, "stat", NULL);
      g_autofree char *stat = NULL;
      const char *after_name;
      int ppid = 0;

      if (!g_ascii_isdigit (name[0]) || !g_file_get_contents (stat_path, &stat, NULL, NULL) ||
          (after_name = strrchr (stat, ')')) == NULL || sscanf (after_name, ") %*c %d", &ppid) != 1)
        continue;
      if (ppid == getpid ())
        none = FALSE;
    }
  return none;
}

static void
fixture_tear_down (Fixture       *fixture,
                   gconstpointer  data)
{
  /* The daemon loses its bus, shuts its servers down and exits; being a
   * child subreaper, this process inherits and reaps what is left.  The
   * connection ends with the bus: g_dbus_connection_close_sync() would
   * run a private GMainContext that GDBus's thread may free last, an
   * order that ThreadSanitizer does not see. */
  stop_bus (g_steal_pointer (&fixture->bus));
  g_clear_object (&fixture->connection);
  g_assert_true (test_wait_for (reap_and_check_no_children, NULL, WAIT_MS));
  g_ptr_array_unref (fixture->signals);
  test_remove_tree (fixture->dir);
  g_free (fixture->dir);
  g_free (fixture->runtime_dir);
  g_free (fixture->address);
  g_strfreev (fixture->envp);
}

/* Calling the daemon */

static GVariant *
call_daemon (GDBusConnection *connection,
             const char      *method,
             GVariant        *parameters,
             const char      *reply_type,
             GError         **error)
{
  return g_dbus_connection_call_sync (connection, MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH,
                                      MCP_DAEMON_INTERFACE, method, parameters,
                                      reply_type ? G_VARIANT_TYPE (reply_type) : NULL,
                                      G_DBUS_CALL_FLAGS_NONE, (int) test_timeout_ms (WAIT_MS), NULL, error);
}

static json_t *
call_for_json (Fixture    *fixture,
               const char *method,
               GVariant   *parameters)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = call_daemon (fixture->connection, method, parameters, "(s)", &error);
  const char *text;
  json_t *value;

  g_assert_no_error (error);
  g_variant_get (reply, "(&s)", &text);
  value = json_loads (text, JSON_DECODE_ANY, NULL);
  g_assert_nonnull (value);
  return value;
}

static json_t *
call_tool (Fixture    *fixture,
           const char *tool,
           const char *arguments)
{
  return call_for_json (fixture, "CallTool", g_variant_new ("(sssu)", "fix", tool, arguments, 0));
}

/* GetStats, the a{sv} of counters. */
static GVariant *
daemon_stats (GDBusConnection *connection)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GVariant) reply = call_daemon (connection, "GetStats", NULL, "(a{sv})", &error);

  g_assert_no_error (error);
  return g_variant_get_child_value (reply, 0);
}

static GPid
daemon_pid (GDBusConnection *connection)
{
  g_autoptr(GVariant) stats = daemon_stats (connection);
  guint32 pid = 0;

  g_assert_true (g_variant_lookup (stats, "pid", "u", &pid));
  return (GPid) pid;
}

static gboolean
daemon_is_running (GDBusConnection *connection)
{
  g_autoptr(GVariant) reply =
    g_dbus_connection_call_sync (connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                 "org.freedesktop.DBus", "NameHasOwner",
                                 g_variant_new ("(s)", MCP_DAEMON_BUS_NAME), G_VARIANT_TYPE ("(b)"),
                                 G_DBUS_CALL_FLAGS_NONE, (int) test_timeout_ms (WAIT_MS), NULL, NULL);
  gboolean running = FALSE;

  g_assert_nonnull (reply);
  g_variant_get (reply, "(b)", &running);
  return running;
}

/* The fixture server's entry in ListServers. */
static json_t *
server_entry (Fixture *fixture)
{
  g_autoptr(json_t) servers = call_for_json (fixture, "ListServers", NULL);

  g_assert_cmpuint (json_array_size (servers), ==, 1);
  g_assert_cmpstr (mcp_json_get_string (json_array_get (servers, 0), "name"), ==, "fix");
  return json_incref (json_array_get (servers, 0));
}

/* Signals */

static void
on_signal (GDBusConnection *connection,
           const char      *sender,
           const char      *path,
           const char      *interface,
           const char      *member,
           GVariant        *parameters,
           gpointer         user_data)
{
  Fixture *fixture = user_data;
  g_autofree char *text = g_variant_print (parameters, FALSE);

  /* Progress as "Progress SERIAL STEP", the rest as printed. */
  if (g_str_equal (member, "Progress"))
    {
      g_autoptr(json_t) params = NULL;
      const char *json_text;
      guint32 serial;

      g_variant_get (parameters, "(u&s)", &serial, &json_text);
      params = json_loads (json_text, 0, NULL);
      g_assert_nonnull (params);
      g_ptr_array_add (fixture->signals,
                       g_strdup_printf ("Progress %u %" JSON_INTEGER_FORMAT, serial,
                                        json_integer_value (json_object_get (params, "progress"))));
      return;
    }
  g_ptr_array_add (fixture->signals, g_strdup_printf ("%s %s", member, text));
}

static gboolean
on_wait_timeout (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Dispatches signals until @expected arrives; then forgets the ones seen. */
static void
wait_for_signal (Fixture    *fixture,
                 const char *expected)
{
  gboolean timed_out = FALSE;
  guint timeout = g_timeout_add (test_timeout_ms (WAIT_MS), on_wait_timeout, &timed_out);

  for (;;)
    {
      for (guint i = 0; i < fixture->signals->len; i++)
        if (g_str_equal (g_ptr_array_index (fixture->signals, i), expected))
          {
            g_ptr_array_set_size (fixture->signals, 0);
            g_source_remove (timeout);
            return;
          }
      if (timed_out)
        g_error ("No signal “%s” within %u ms", expected, test_timeout_ms (WAIT_MS));
      g_main_context_iteration (NULL, TRUE);
    }
}

/* Tests */

static void
test_activation (Fixture       *fixture,
                 gconstpointer  data)
{
  g_autoptr(json_t) server = NULL;
  g_autoptr(json_t) result = NULL;
  GPid pid;

  g_assert_false (daemon_is_running (fixture->connection));
  server = server_entry (fixture);
  g_assert_true (daemon_is_running (fixture->connection));
  g_assert_cmpstr (mcp_json_get_string (server, "state"), ==, "idle");

  pid = daemon_pid (fixture->connection);
  g_assert_cmpint (pid, >, 0);
  g_assert_cmpint (pid, !=, getpid ());

  result = call_tool (fixture, "echo", "{\"message\": \"warm\"}");
  g_assert_cmpstr (test_result_text (result),
                   ==, "Echo: warm");
}

static void
write_config (Fixture    *fixture,
              const char *names)
{
  g_auto(GStrv) list = g_strsplit (names, " ", -1);
  g_autoptr(GString) text = g_string_new ("{\"mcpServers\": {");
  g_autofree char *path = g_build_filename (fixture->dir, "servers.json", NULL);
  g_autoptr(GError) error = NULL;

  for (guint i = 0; list[i] != NULL; i++)
    g_string_append_printf (text, "%s\"%s\": {\"command\": \"%s\"}", i ? ", " : "", list[i],
                            test_fixture_path ());
  g_string_append (text, "}}");
  g_file_set_contents (path, text->str, -1, &error);
  g_assert_no_error (error);
}

static guint
count_servers (Fixture *fixture)
{
  g_autoptr(json_t) servers = call_for_json (fixture, "ListServers", NULL);

  return json_array_size (servers);
}

static gboolean
has_two_servers (gpointer fixture)
{
  return count_servers (fixture) == 2;
}

/* The daemon follows its config files, and reloads them when told. */
static void
test_config_changes (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autofree char *out = NULL;
  g_autoptr(GError) error = NULL;
  const char *argv[] = { test_mcp_pool_path (), "reload", NULL };
  int status;

  g_assert_cmpuint (count_servers (fixture), ==, 1);
  write_config (fixture, "fix two");
  g_assert_true (test_wait_for (has_two_servers, fixture, WAIT_MS));

  /* After `mcp-pool reload` returns, the change is in place. */
  write_config (fixture, "fix two three");
  g_spawn_sync (NULL, (char **) argv, fixture->envp, G_SPAWN_DEFAULT, NULL, NULL, &out, NULL, &status, &error);
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_assert_nonnull (strstr (out, "read the config files again"));
  g_assert_cmpuint (count_servers (fixture), ==, 3);
}

/* `serve @option @value` with @envp, as an MCP client starts it, which
 * declares @capabilities (stolen; NULL: none); it answers initialize as
 * @server_name. */
static TestClient *
launch_client (const char * const *envp,
               gboolean            shared,
               const char         *option,
               const char         *value,
               const char         *server_name,
               json_t             *capabilities)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  const char *argv[] = { test_mcp_pool_path (), "serve", option, value, shared ? "--shared" : NULL, NULL };
  g_auto(GStrv) wrapped = test_wrap_argv (argv);
  TestClient *client = NULL;
  g_autoptr(json_t) result = NULL;

  g_subprocess_launcher_set_environ (launcher, (char **) envp);
  client = test_client_new (launcher, (const char * const *) wrapped);
  result =
    test_client_result (client, "initialize",
                        json_pack ("{s:s, s:o, s:{s:s, s:s}}", "protocolVersion", "2025-06-18",
                                   "capabilities", capabilities != NULL ? capabilities : json_object (),
                                   "clientInfo", "name", "test-daemon", "version", "1"));

  g_assert_cmpstr (mcp_json_get_string (json_object_get (result, "serverInfo"), "name"), ==, server_name);
  test_client_notify (client, "notifications/initialized", NULL);
  return client;
}

static TestClient *
start_client_with (const char * const *envp,
                   gboolean            shared,
                   const char         *expose)
{
  return launch_client (envp, shared, "--expose", expose, "mcp-pool", NULL);
}

static TestClient *
start_client (Fixture    *fixture,
              gboolean    shared,
              const char *expose)
{
  return start_client_with ((const char * const *) fixture->envp, shared, expose);
}

static json_int_t
server_pid_seen_by (TestClient *client)
{
  g_autoptr(json_t) result = test_client_result (client, "tools/call",
                                                 json_pack ("{s:s, s:{}}", "name", "fix__stats", "arguments"));
  json_t *structured = json_object_get (result, "structuredContent");

  g_assert_nonnull (structured);
  return json_integer_value (json_object_get (structured, "pid"));
}

static void
end_client (TestClient *client)
{
  test_client_close_input (client);
  test_client_wait_exit (client);
  test_client_free (client);
}

static void
test_two_clients_one_server (Fixture       *fixture,
                             gconstpointer  data)
{
  TestClient *first = start_client (fixture, TRUE, "proxy");
  TestClient *second = start_client (fixture, TRUE, "proxy");
  g_autoptr(json_t) server = NULL;
  json_int_t pid_first, pid_second;

  pid_first = server_pid_seen_by (first);
  pid_second = server_pid_seen_by (second);
  g_assert_cmpint (pid_first, >, 0);
  g_assert_cmpint (pid_first, ==, pid_second);

  server = server_entry (fixture);
  g_assert_cmpint (json_integer_value (json_object_get (server, "pid")), ==, pid_first);
  g_assert_cmpint (json_integer_value (json_object_get (server, "starts")), ==, 1);

  end_client (first);
  end_client (second);
}

/* A counter of GetStats, whether it is a u or a t. */
static guint64
daemon_stat (GDBusConnection *connection,
             const char      *name)
{
  g_autoptr(GVariant) stats = daemon_stats (connection);
  g_autoptr(GVariant) value = g_variant_lookup_value (stats, name, NULL);

  g_assert_nonnull (value);
  if (g_variant_is_of_type (value, G_VARIANT_TYPE_UINT32))
    return g_variant_get_uint32 (value);
  g_assert_true (g_variant_is_of_type (value, G_VARIANT_TYPE_UINT64));
  return g_variant_get_uint64 (value);
}

/* A warm call is answered on the daemon's main context, without a
 * worker: a CallTool, and the tools/call of a `serve --shared`, which
 * uses no worker of its own either (GLib's pool threads, "pool-…"). */
static void
test_warm_no_worker (Fixture       *fixture,
                     gconstpointer  data)
{
  enum { CALLS = 100 };
  TestClient *client = start_client (fixture, TRUE, "proxy");
  GPid serve_pid = atoi (g_subprocess_get_identifier (client->process));
  g_autoptr(TestThreadSwitches) serve_switches = NULL;
  g_autoptr(json_t) first = NULL;
  guint64 worker_calls, warm_calls;

  /* Starts the server, on a worker. */
  worker_calls = daemon_stat (fixture->connection, "worker-calls");
  warm_calls = daemon_stat (fixture->connection, "warm-calls");
  first = call_tool (fixture, "echo", "{\"message\": \"start\"}");
  g_assert_cmpstr (test_result_text (first), ==, "Echo: start");
  g_assert_cmpuint (daemon_stat (fixture->connection, "worker-calls"), ==, ++worker_calls);

  for (guint i = 0; i < CALLS; i++)
    {
      g_autoptr(json_t) result = call_tool (fixture, "echo", "{\"message\": \"warm\"}");

      g_assert_cmpstr (test_result_text (result), ==, "Echo: warm");
    }
  g_assert_cmpuint (daemon_stat (fixture->connection, "worker-calls"), ==, worker_calls);
  g_assert_cmpuint (daemon_stat (fixture->connection, "warm-calls"), ==, warm_calls + CALLS);

  json_decref (test_client_result (client, "tools/list", NULL));
  worker_calls = daemon_stat (fixture->connection, "worker-calls");
  warm_calls = daemon_stat (fixture->connection, "warm-calls");
  serve_switches = test_thread_switches_begin (serve_pid);
  for (guint i = 0; i < CALLS; i++)
    {
      g_autoptr(json_t) result = test_client_result (client, "tools/call",
                                                     json_pack ("{s:s, s:{s:s}}", "name", "fix__echo",
                                                                "arguments", "message", "shared"));

      g_assert_cmpstr (test_result_text (result), ==, "Echo: shared");
    }
  test_thread_switches_end (serve_switches);
  g_assert_cmpuint (daemon_stat (fixture->connection, "worker-calls"), ==, worker_calls);
  g_assert_cmpuint (daemon_stat (fixture->connection, "warm-calls"), ==, warm_calls + CALLS);
  g_assert_cmpuint (test_thread_switches_of (serve_switches, "pool-"), <, CALLS / 10);
  end_client (client);
}

/* @local and @shared answer each of @requests alike. */
static void
assert_same_answers (TestClient         *local,
                     TestClient         *shared,
                     const char * const *requests,
                     gsize               n_requests)
{
  for (guint i = 0; i < n_requests; i++)
    {
      json_t *answers[2] = { NULL, NULL };
      TestClient *clients[] = { local, shared };

      for (guint c = 0; c < 2; c++)
        {
          json_t *request = json_loads (requests[i], JSON_ALLOW_NUL, NULL);
          json_int_t id;

          g_assert_nonnull (request);
          id = test_client_request (clients[c], mcp_json_get_string (request, "method"),
                                    json_incref (json_object_get (request, "params")));
          answers[c] = test_client_read_reply (clients[c], id);
          json_object_del (answers[c], "id");
          json_decref (request);
        }
      if (!json_equal (answers[0], answers[1]))
        {
          g_autofree char *one = json_dumps (answers[0], JSON_COMPACT);
          g_autofree char *other = json_dumps (answers[1], JSON_COMPACT);

          g_error ("%s\nserve:          %s\nserve --shared: %s", requests[i], one, other);
        }
      if (strstr (requests[i], "\\u0000") != NULL)
        {
          /* A NUL crosses the bus inside the JSON text, and comes back. */
          json_t *text = json_object_get (json_array_get (json_object_get (json_object_get (answers[1], "result"),
                                                                           "content"), 0), "text");

          g_assert_cmpmem (json_string_value (text), json_string_length (text), "Echo: a\0b", 9);
        }
      if (strstr (requests[i], "completion/complete") != NULL)
        {
          json_t *values = json_object_get (json_object_get (json_object_get (answers[1], "result"), "completion"),
                                            "values");

          g_assert_cmpstr (json_string_value (json_array_get (values, 0)), ==, "Grace");
        }
      if (strstr (requests[i], "fix://item/3") != NULL)
        {
          json_t *content = json_array_get (json_object_get (json_object_get (answers[1], "result"), "contents"), 0);

          g_assert_cmpstr (mcp_json_get_string (content, "text"), ==, "fix says fix://item/3");
        }
      if (strstr (requests[i], "prompts/get") != NULL && strstr (requests[i], "fix__greet") != NULL)
        {
          /* The prompt came from the server, through the daemon's proxy. */
          json_t *message = json_array_get (json_object_get (json_object_get (answers[1], "result"), "messages"), 0);

          g_assert_cmpstr (mcp_json_get_string (json_object_get (message, "content"), "text"), ==, "Hello, Ada");
        }
      json_decref (answers[0]);
      json_decref (answers[1]);
    }
}

/* Until @client has had a notification @method, seen already or not. */
static void
wait_for_notification (TestClient *client,
                       const char *method)
{
  while (test_client_count_notifications (client, method) == 0)
    test_client_wait_notification (client, method);
}

/* A server's notifications reach each `serve --shared` as its exposure
 * shows them: through the proxy, a log message (from the level its client
 * set up) under the server's name and an update under the URI the client
 * knows; to one server's exposure, unchanged. */
static void
test_shared_notifications (Fixture       *fixture,
                           gconstpointer  data)
{
  TestClient *proxy = start_client (fixture, TRUE, "proxy");
  static const char * const levels[] = { "info", "error" };
  TestClient *one = launch_client ((const char * const *) fixture->envp, TRUE, "--server", "fix",
                                   "mcp-pool-fixture", NULL);
  TestClient *quiet = start_client (fixture, TRUE, "proxy");
  g_autoptr(json_t) set = test_client_result (proxy, "logging/setLevel", json_pack ("{s:s}", "level", "info"));
  g_autoptr(json_t) quiet_set = NULL;
  g_autoptr(json_t) stats = NULL;
  g_autoptr(json_t) logged = test_client_result (proxy, "tools/call",
                                                 json_pack ("{s:s, s:{s:s}}", "name", "fix__log",
                                                            "arguments", "text", "shared"));
  g_autoptr(json_t) updated = NULL;
  json_t *message;

  g_assert_cmpstr (test_result_text (logged), ==, "logged");
  wait_for_notification (proxy, "notifications/message");
  message = test_client_last_notification (proxy, "notifications/message");
  g_assert_cmpstr (mcp_json_get_string (message, "logger"), ==, "fix/fixture");
  g_assert_cmpstr (mcp_json_get_string (message, "data"), ==, "shared");
  wait_for_notification (one, "notifications/message");
  message = test_client_last_notification (one, "notifications/message");
  g_assert_cmpstr (mcp_json_get_string (message, "logger"), ==, "fixture");

  /* Each client gets what it asked for; the server is asked for the
   * lowest of the levels. */
  quiet_set = test_client_result (quiet, "logging/setLevel", json_pack ("{s:s}", "level", "error"));
  stats = call_tool (fixture, "stats", "{}");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (stats, "structuredContent"), "log_level"), ==, "info");
  for (guint i = 0; i < G_N_ELEMENTS (levels); i++)
    json_decref (test_client_result (quiet, "tools/call",
                                     json_pack ("{s:s, s:{s:s, s:{s:s, s:s}}}", "name", "fix__notify", "arguments",
                                                "method", "notifications/message", "params",
                                                "level", levels[i], "data", levels[i])));
  wait_for_notification (quiet, "notifications/message");
  g_assert_cmpuint (test_client_count_notifications (quiet, "notifications/message"), ==, 1);
  g_assert_cmpstr (mcp_json_get_string (test_client_last_notification (quiet, "notifications/message"), "data"),
                   ==, "error");

  updated = test_client_result (one, "tools/call",
                                json_pack ("{s:s, s:{s:s, s:{s:s}}}", "name", "notify", "arguments",
                                           "method", "notifications/resources/updated", "params", "uri", "fix://own"));
  g_assert_cmpstr (test_result_text (updated), ==, "sent");
  wait_for_notification (proxy, "notifications/resources/updated");
  g_assert_cmpstr (mcp_json_get_string (test_client_last_notification (proxy, "notifications/resources/updated"),
                                        "uri"), ==, "fix://own");
  wait_for_notification (one, "notifications/resources/updated");
  end_client (proxy);
  end_client (one);
  end_client (quiet);
}

/* run_python's text of @code as @client runs it. */
static char *
run_python_text (TestClient *client,
                 const char *code)
{
  g_autoptr(json_t) result = test_client_result (client, "tools/call",
                                                 json_pack ("{s:s, s:{s:s}}", "name", "run_python",
                                                            "arguments", "code", code));

  return test_sandbox_skipped (result) ? NULL : g_strdup (test_result_text (result));
}

static gboolean
no_python_sessions (gpointer data)
{
  Fixture *fixture = data;

  return daemon_stat (fixture->connection, "python-sessions") == 0;
}

/* Each serve --shared client has a Python session of its own in the
 * daemon: one never sees the other's state, and a client's ends with it. */
static void
test_shared_python_sessions (Fixture       *fixture,
                             gconstpointer  data)
{
  TestClient *first = start_client (fixture, TRUE, "code");
  TestClient *second = start_client (fixture, TRUE, "code");
  g_autofree char *set = run_python_text (first, "x = 'first'\nprint('set')");
  g_autofree char *kept = NULL;
  g_autofree char *other = NULL;

  if (set != NULL)
    {
      g_assert_cmpstr (set, ==, "set");
      kept = run_python_text (first, "print(x)");
      g_assert_cmpstr (kept, ==, "first");
      other = run_python_text (second, "print(x)");
      g_assert_nonnull (strstr (other, "NameError: name 'x' is not defined"));
      g_assert_cmpuint (daemon_stat (fixture->connection, "python-sessions"), ==, 2);
    }
  end_client (first);
  end_client (second);
  g_assert_true (test_wait_for (no_python_sessions, fixture, WAIT_MS));
}

/* serve --shared answers as serve does: the same tools, results and
 * errors, request by request. */
static void
test_same_answers (Fixture       *fixture,
                   gconstpointer  data)
{
  static const char * const requests[] = {
    "{\"method\": \"tools/list\"}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"fix__echo\", \"arguments\": {\"message\": \"a\"}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"fix__echo\", \"arguments\": {\"message\": \"a\\u0000b\"}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"fix__tool_error\", \"arguments\": {}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"fix__fail\", \"arguments\": {}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"no_such_tool\", \"arguments\": {}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"call_tool\", \"arguments\": {\"server\": \"nope\", \"tool\": \"x\"}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"search_tools\", \"arguments\": {\"query\": \"echo message\"}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"fix__echo\", \"arguments\": [1]}}",
    "{\"method\": \"tools/call\", \"params\": {}}",
    "{\"method\": \"resources/list\"}",
    "{\"method\": \"resources/read\", \"params\": {\"uri\": \"mcp-pool://nothing\"}}",
    "{\"method\": \"resources/templates/list\"}",
    "{\"method\": \"resources/read\", \"params\": {\"uri\": \"fix://item/3\"}}",
    "{\"method\": \"prompts/list\"}",
    "{\"method\": \"prompts/get\", \"params\": {\"name\": \"fix__greet\", \"arguments\": {\"name\": \"Ada\"}}}",
    "{\"method\": \"prompts/get\", \"params\": {\"name\": \"fix__nope\"}}",
    "{\"method\": \"completion/complete\", \"params\": {\"ref\": {\"type\": \"ref/prompt\", \"name\": \"fix__greet\"}, "
    "\"argument\": {\"name\": \"name\", \"value\": \"G\"}}}",
    "{\"method\": \"no/such/method\"}",
  };
  TestClient *local = start_client (fixture, FALSE, "code,gateway,proxy");
  TestClient *shared = start_client (fixture, TRUE, "code,gateway,proxy");

  assert_same_answers (local, shared, requests, G_N_ELEMENTS (requests));
  end_client (local);
  end_client (shared);
}

/* serve --server --shared answers as serve --server does: the server's
 * own answers, its errors too, through the daemon. */
static void
test_same_answers_one_server (Fixture       *fixture,
                              gconstpointer  data)
{
  static const char * const requests[] = {
    "{\"method\": \"tools/list\"}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"echo\", \"arguments\": {\"message\": \"a\\u0000b\"}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"tool_error\", \"arguments\": {}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"fail\", \"arguments\": {}}}",
    "{\"method\": \"tools/call\", \"params\": {\"name\": \"no_such_tool\", \"arguments\": {}}}",
    "{\"method\": \"tools/call\", \"params\": {}}",
    "{\"method\": \"resources/list\"}",
    "{\"method\": \"resources/templates/list\"}",
    "{\"method\": \"resources/read\", \"params\": {\"uri\": \"fix://item/3\"}}",
    "{\"method\": \"resources/read\", \"params\": {\"uri\": \"mcp-pool://capabilities\"}}",
    "{\"method\": \"prompts/list\"}",
    "{\"method\": \"prompts/get\", \"params\": {\"name\": \"greet\", \"arguments\": {\"name\": \"Ada\"}}}",
    "{\"method\": \"completion/complete\", \"params\": {\"ref\": {\"type\": \"ref/prompt\", \"name\": \"greet\"}, "
    "\"argument\": {\"name\": \"name\", \"value\": \"G\"}}}",
    "{\"method\": \"no/such/method\"}",
  };
  TestClient *local = launch_client ((const char * const *) fixture->envp, FALSE, "--server", "fix",
                                     "mcp-pool-fixture", NULL);
  TestClient *shared = launch_client ((const char * const *) fixture->envp, TRUE, "--server", "fix",
                                      "mcp-pool-fixture", NULL);
  g_autoptr(json_t) failed = test_client_read_reply (shared, test_client_request (shared, "tools/call",
                                                                                  json_pack ("{s:s}", "name", "fail")));

  /* The server's own error, with its data, crossed the bus. */
  g_assert_cmpstr (mcp_json_get_string (json_object_get (json_object_get (failed, "error"), "data"), "asked"), ==,
                   "fail");
  assert_same_answers (local, shared, requests, G_N_ELEMENTS (requests));
  end_client (local);
  end_client (shared);
}

/* Progress reaches the caller before the reply, under the call's serial. */
typedef struct {
  Fixture      *fixture;
  GDBusMessage *reply;
  guint         progress_before_reply;
} ProgressCall;

static void
on_call_reply (GObject      *source,
               GAsyncResult *result,
               gpointer      user_data)
{
  ProgressCall *call = user_data;
  g_autoptr(GError) error = NULL;

  call->progress_before_reply = call->fixture->signals->len;
  call->reply = g_dbus_connection_send_message_with_reply_finish (G_DBUS_CONNECTION (source), result, &error);
  g_assert_no_error (error);
}

static void
test_signals (Fixture       *fixture,
              gconstpointer  data)
{
  const char *members[] = { "ServerStateChanged", "ToolsChanged", "Progress" };
  g_autoptr(GDBusMessage) message = NULL;
  g_autoptr(json_t) result = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *stdout_text = NULL;
  ProgressCall call = { fixture };
  guint32 serial = 0;
  int status;

  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    g_dbus_connection_signal_subscribe (fixture->connection, MCP_DAEMON_BUS_NAME, MCP_DAEMON_INTERFACE,
                                        members[i], MCP_DAEMON_OBJECT_PATH, NULL,
                                        G_DBUS_SIGNAL_FLAGS_NONE, on_signal, fixture, NULL);

  result = call_tool (fixture, "echo", "{\"message\": \"x\"}");
  wait_for_signal (fixture, "ServerStateChanged ('fix', 'ready')");

  /* Eviction from a terminal reaches the running daemon. */
  {
    const char *argv[] = { test_mcp_pool_path (), "evict", "fix", NULL };
    g_auto(GStrv) wrapped = test_wrap_argv (argv);

    g_spawn_sync (NULL, wrapped, fixture->envp, G_SPAWN_DEFAULT, NULL, NULL, &stdout_text, NULL, &status, &error);
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
    g_assert_nonnull (strstr (stdout_text, "Evicted"));
  }
  wait_for_signal (fixture, "ServerStateChanged ('fix', 'idle')");

  json_decref (result);
  result = call_tool (fixture, "notify_list_changed", "{}");
  wait_for_signal (fixture, "ToolsChanged ('fix',)");

  message = g_dbus_message_new_method_call (MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH,
                                            MCP_DAEMON_INTERFACE, "CallTool");
  g_dbus_message_set_body (message, g_variant_new ("(sssu)", "fix", "progress",
                                                   "{\"steps\": 3, \"delay_ms\": 20}", 0));
  g_ptr_array_set_size (fixture->signals, 0);
  g_dbus_connection_send_message_with_reply (fixture->connection, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                             (int) test_timeout_ms (WAIT_MS), &serial, NULL, on_call_reply, &call);
  while (call.reply == NULL)
    g_main_context_iteration (NULL, TRUE);
  g_assert_null (g_dbus_message_get_error_name (call.reply));
  g_assert_cmpuint (call.progress_before_reply, ==, 3);
  for (guint i = 0; i < 3; i++)
    {
      g_autofree char *expected = g_strdup_printf ("Progress %u %u", serial, i + 1);

      g_assert_cmpstr (g_ptr_array_index (fixture->signals, i), ==, expected);
    }
  g_object_unref (call.reply);
}

static void
test_idle_exit (Fixture       *fixture,
                gconstpointer  data)
{
  g_autoptr(json_t) result = call_tool (fixture, "echo", "{\"message\": \"x\"}");
  g_autoptr(json_t) server = server_entry (fixture);
  GPid first = daemon_pid (fixture->connection);
  GPid server_pid = json_integer_value (json_object_get (server, "pid"));
  g_autoptr(GDBusConnection) watcher = connect_to_bus (fixture);

  g_assert_cmpint (server_pid, >, 0);
  /* This connection is the daemon's one client; once it leaves, the daemon
   * waits its idle second and exits, ending its server. */
  close_connection (fixture->connection);
  g_object_unref (fixture->connection);
  fixture->connection = g_steal_pointer (&watcher);
  g_assert_true (test_wait_for (process_gone,
                                GINT_TO_POINTER (first), WAIT_MS));
  g_assert_false (daemon_is_running (fixture->connection));
  g_assert_true (test_wait_for (group_gone,
                                GINT_TO_POINTER (server_pid), WAIT_MS));

  /* The next call activates a new one. */
  g_assert_cmpint (daemon_pid (fixture->connection), !=, first);
}

/* @program and the arguments after it up to NULL, in the fixture's
 * environment; behind MCP_POOL_TEST_WRAPPER if @wrap. */
static Child *
spawn_in_fixture (Fixture    *fixture,
                  ChildFlags  flags,
                  gboolean    wrap,
                  const char *program,
                  const char *first_arg,
                  va_list     args)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_auto(GStrv) wrapped = NULL;

  g_ptr_array_add (argv, (char *) program);
  for (const char *arg = first_arg; arg != NULL; arg = va_arg (args, const char *))
    g_ptr_array_add (argv, (char *) arg);
  g_ptr_array_add (argv, NULL);
  if (wrap)
    wrapped = test_wrap_argv ((const char * const *) argv->pdata);
  /* One that outlives a failed test would hold its output open. */
  return child_spawn (wrap ? (const char * const *) wrapped : (const char * const *) argv->pdata,
                      (const char * const *) fixture->envp, flags, test_die_with_parent);
}

static Child *
spawn_daemon (Fixture    *fixture,
              const char *first_arg,
              ...)
{
  Child *child;
  va_list args;

  va_start (args, first_arg);
  child = spawn_in_fixture (fixture, CHILD_ERR_PIPE, FALSE, poold_path (), first_arg, args);
  va_end (args);
  return child;
}

typedef struct {
  GDBusConnection *connection;
  GPid             pid;
} OwnerWait;

static gboolean
daemon_has_pid (gpointer data)
{
  OwnerWait *wait = data;

  return daemon_pid (wait->connection) == wait->pid;
}

static void
test_replace (Fixture       *fixture,
              gconstpointer  data)
{
  GPid activated = daemon_pid (fixture->connection);
  g_autoptr(Child) refused = spawn_daemon (fixture, "--no-idle-exit", NULL);
  g_autoptr(Child) replacement = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *refusal = NULL;
  OwnerWait wait = { fixture->connection, 0 };

  /* Without --replace a second daemon leaves the first alone. */
  child_communicate (refused, NULL, &refusal);
  g_test_message ("The second daemon said: %s", refusal);
  g_assert_true (child_exited_with (refused, 1));
  g_assert_nonnull (strstr (refusal, "--replace"));
  g_assert_cmpint (daemon_pid (fixture->connection), ==, activated);

  replacement = spawn_daemon (fixture, "--replace", "--no-idle-exit", NULL);
  wait.pid = replacement->pid;
  g_assert_true (test_wait_for (daemon_has_pid, &wait, WAIT_MS));
  g_assert_true (test_wait_for (process_gone,
                                GINT_TO_POINTER (activated), WAIT_MS));

  g_assert_cmpint (kill (replacement->pid, SIGTERM), ==, 0);
  child_wait (replacement);
  g_assert_true (child_exited_with (replacement, 0));
}

static void
test_sigkill_leaves_no_server (Fixture       *fixture,
                               gconstpointer  data)
{
  g_autoptr(json_t) result = call_tool (fixture, "stats", "{}");
  json_t *stats = json_object_get (result, "structuredContent");
  GPid server = json_integer_value (json_object_get (stats, "pid"));
  GPid grandchild = json_integer_value (json_object_get (stats, "grandchild_pid"));

  g_assert_cmpint (server, >, 0);
  g_assert_cmpint (grandchild, >, 0);
  g_assert_false (test_process_gone (grandchild));

  g_assert_cmpint (kill (daemon_pid (fixture->connection), SIGKILL), ==, 0);
  g_assert_true (test_wait_for (group_gone, GINT_TO_POINTER (server), WAIT_MS));
  g_assert_true (test_process_gone (grandchild));
}

/* The environment an MCP client such as the Inspector gives a server:
 * HOME, PATH, SHELL and TERM, plus @name=@value, and what `make check`
 * and its sanitizers set for every program they run (G_DEBUG=gc-friendly
 * keeps the frames that tsan.supp names). */
static GStrv
client_environment (const char *name,
                    const char *value)
{
  static const char * const passed[] = {
    "HOME", "PATH", "G_DEBUG", "G_SLICE", "MALLOC_CHECK_",
    "TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS",
  };
  GStrv envp = g_new0 (char *, 1);

  for (guint i = 0; i < G_N_ELEMENTS (passed); i++)
    if (g_getenv (passed[i]) != NULL)
      envp = g_environ_setenv (envp, passed[i], g_getenv (passed[i]), TRUE);
  envp = g_environ_setenv (envp, "SHELL", "/bin/sh", TRUE);
  envp = g_environ_setenv (envp, "TERM", "xterm-256color", TRUE);
  return g_environ_setenv (envp, name, value, TRUE);
}

/* serve --shared in @envp reaches the fixture's daemon and its server. */
static void
assert_serve_shared_works (const char * const *envp)
{
  TestClient *client = start_client_with (envp, TRUE, "proxy");
  g_autoptr(json_t) result =
    test_client_result (client, "tools/call",
                        json_pack ("{s:s, s:{s:s}}", "name", "fix__echo", "arguments", "message", "bare"));

  g_assert_cmpstr (test_result_text (result),
                   ==, "Echo: bare");
  end_client (client);
}

/* With DBUS_SESSION_BUS_ADDRESS unset, the bus is found where the systemd
 * user bus lives: $XDG_RUNTIME_DIR/bus ... */
static void
test_bus_in_runtime_dir (Fixture       *fixture,
                         gconstpointer  data)
{
  g_auto(GStrv) envp = client_environment ("XDG_RUNTIME_DIR", fixture->runtime_dir);

  assert_serve_shared_works ((const char * const *) envp);
}

/* ... or, without XDG_RUNTIME_DIR, /run/user/UID/bus (here the fixture's
 * stand-in for /run/user). */
static void
test_bus_in_run_user (Fixture       *fixture,
                      gconstpointer  data)
{
  g_autofree char *run_user = g_path_get_dirname (fixture->runtime_dir);
  g_auto(GStrv) envp = client_environment ("MCP_POOL_RUN_USER_DIR", run_user);

  assert_serve_shared_works ((const char * const *) envp);
}

/* Killing the daemon */

/* Counts the calls of the pool's interface that pass the bus. */
static GDBusMessage *
count_pool_calls (GDBusConnection *connection,
                  GDBusMessage    *message,
                  gboolean         incoming,
                  gpointer         user_data)
{
  GDBusMessageType type = g_dbus_message_get_message_type (message);

  if (!incoming || type == G_DBUS_MESSAGE_TYPE_METHOD_RETURN || type == G_DBUS_MESSAGE_TYPE_ERROR)
    return message;
  if (type == G_DBUS_MESSAGE_TYPE_METHOD_CALL &&
      g_strcmp0 (g_dbus_message_get_interface (message), MCP_DAEMON_INTERFACE) == 0)
    g_atomic_int_inc ((gint *) user_data);
  /* A monitor must not answer what it sees. */
  g_object_unref (message);
  return NULL;
}

/* A connection that sees every call of the pool's interface on the bus
 * from now on, counting them in @count. */
static GDBusConnection *
monitor_pool_calls (Fixture *fixture,
                    gint    *count)
{
  GDBusConnection *monitor = connect_to_bus (fixture);
  const char *rules[] = { "type='method_call',interface='" MCP_DAEMON_INTERFACE "'", NULL };
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GError) error = NULL;

  g_dbus_connection_add_filter (monitor, count_pool_calls, count, NULL);
  reply = g_dbus_connection_call_sync (monitor, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus.Monitoring", "BecomeMonitor",
                                       g_variant_new ("(^asu)", rules, 0), NULL, G_DBUS_CALL_FLAGS_NONE,
                                       (int) test_timeout_ms (WAIT_MS), NULL, &error);
  g_assert_no_error (error);
  return monitor;
}

typedef struct {
  gint  *count;
  guint  expected;
} CountWait;

static gboolean
count_reached (gpointer data)
{
  CountWait *wait = data;

  return (guint) g_atomic_int_get (wait->count) >= wait->expected;
}

static gboolean
process_stopped (gpointer pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", GPOINTER_TO_INT (pid));
  g_autofree char *stat = NULL;
  const char *after_name;

  return g_file_get_contents (path, &stat, NULL, NULL) && (after_name = strrchr (stat, ')')) != NULL &&
         after_name[1] == ' ' && after_name[2] == 'T';
}

static Child *
spawn_mcp_pool (Fixture    *fixture,
                const char *first_arg,
                ...)
{
  Child *child;
  va_list args;

  va_start (args, first_arg);
  child = spawn_in_fixture (fixture, CHILD_OUT_PIPE | CHILD_ERR_PIPE, TRUE,
                            test_mcp_pool_path (), first_arg, args);
  va_end (args);
  return child;
}

#define CALLERS 3

/* Asserts that mcp-pool wrote nothing to @err but what valgrind, when
 * it runs under it (make check-valgrind), says of it: lines "==PID== …". */
static void
assert_said_nothing (const char *err)
{
  g_auto(GStrv) lines = g_strsplit (err, "\n", -1);

  for (char **line = lines; *line != NULL; line++)
    if (**line != '\0' && !g_str_has_prefix (*line, "=="))
      g_error ("mcp-pool wrote to stderr: %s", err);
}

/* Calls sent to a daemon that dies before it takes them are sent again,
 * and a fresh daemon answers them.  The daemon is stopped first and
 * killed once the bus has passed it every call, so that each one meets
 * the dead daemon, which a kill alone leaves to chance. */
static void
test_kill_replays_untaken_calls (Fixture       *fixture,
                                 gconstpointer  data)
{
  TestClient *serve = start_client (fixture, TRUE, "proxy");
  GPid daemon = daemon_pid (fixture->connection);
  Child *callers[CALLERS], *listers[2];
  g_autoptr(GDBusConnection) monitor = NULL;
  g_autoptr(json_t) reply = NULL;
  gint count = 0;
  CountWait wait = { &count, G_N_ELEMENTS (callers) + G_N_ELEMENTS (listers) + 1 };
  json_int_t id;

  g_assert_cmpint (kill (daemon, SIGSTOP), ==, 0);
  g_assert_true (test_wait_for (process_stopped, GINT_TO_POINTER (daemon), WAIT_MS));
  monitor = monitor_pool_calls (fixture, &count);

  for (guint i = 0; i < G_N_ELEMENTS (callers); i++)
    {
      g_autofree char *message = g_strdup_printf ("message=again-%u", i);

      callers[i] = spawn_mcp_pool (fixture, "call", "--shared", "fix", "echo", message, NULL);
    }
  for (guint i = 0; i < G_N_ELEMENTS (listers); i++)
    listers[i] = spawn_mcp_pool (fixture, "servers", "--shared", NULL);
  id = test_client_request (serve, "tools/call",
                            json_pack ("{s:s, s:{s:s}}", "name", "fix__echo", "arguments", "message", "again"));
  g_assert_true (test_wait_for (count_reached, &wait, WAIT_MS));
  g_assert_cmpint (kill (daemon, SIGKILL), ==, 0);

  for (guint i = 0; i < G_N_ELEMENTS (callers); i++)
    {
      g_autofree char *expected = g_strdup_printf ("Echo: again-%u\n", i);
      g_autofree char *out = NULL;
      g_autofree char *err = NULL;

      child_communicate (callers[i], &out, &err);
      assert_said_nothing (err);
      g_assert_cmpstr (out, ==, expected);
      g_assert_true (child_exited_with (callers[i], 0));
      child_free (callers[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (listers); i++)
    {
      g_autofree char *out = NULL;
      g_autofree char *err = NULL;

      child_communicate (listers[i], &out, &err);
      assert_said_nothing (err);
      g_assert_nonnull (strstr (out, "fix"));
      g_assert_true (child_exited_with (listers[i], 0));
      child_free (listers[i]);
    }
  reply = test_client_read_reply (serve, id);
  g_assert_null (json_object_get (reply, "error"));
  g_assert_cmpstr (test_result_text (json_object_get (reply, "result")),
                   ==, "Echo: again");
  end_client (serve);
  g_assert_cmpint (daemon_pid (fixture->connection), !=, daemon);
}

static gboolean
fixture_runs_two_calls (gpointer fixture)
{
  g_autoptr(json_t) result = call_tool (fixture, "stats", "{}");

  /* This one and the other. */
  return json_integer_value (json_object_get (json_object_get (result, "structuredContent"), "inflight")) >= 2;
}

static gboolean
one_question_waits (gpointer connection)
{
  return daemon_stat (connection, "questions-waiting") == 1;
}

/* The test's shared client's roots; nothing else is answered. */
static json_t *
answer_roots (const char *method,
              json_t     *params,
              gpointer    user_data)
{
  if (g_str_equal (method, "roots/list"))
    return json_pack ("{s:[{s:s}]}", "roots", "uri", "file:///shared-client");
  return NULL;
}

/* A server started before a client that answers roots came is started
 * again for it.  A server's request during a call of one `serve --shared`
 * reaches that serve's client, through the daemon, and its answer the
 * server; the client's roots/list_changed reaches the server.  With two
 * clients' calls in flight on the server, the daemon cannot tell whose
 * it is: the question waits until the other client's call ends with the
 * server's reply, and goes to the asking client then; when that call is
 * cancelled instead (it might have been the one that asked), the
 * question is refused, with why. */
static void
test_shared_client_requests (Fixture       *fixture,
                             gconstpointer  data)
{
  TestClient *other = start_client (fixture, TRUE, "proxy");
  /* Started for a client that answers nothing. */
  g_autoptr(json_t) before = call_tool (fixture, "stats", "{}");
  TestClient *asking = launch_client ((const char * const *) fixture->envp, TRUE, "--expose", "proxy", "mcp-pool",
                                      json_pack ("{s:{}}", "roots"));
  g_autoptr(json_t) roots = NULL;
  g_autoptr(json_t) refused = NULL;
  g_autoptr(json_t) stats = NULL;
  g_autoptr(json_t) changed = NULL;
  g_autoptr(json_t) opened = NULL;
  g_autoptr(json_t) passed = NULL;
  g_autoptr(json_t) waited = NULL;
  json_int_t hang, gated, asked;

  g_assert_null (json_object_get (json_object_get (json_object_get (before, "structuredContent"),
                                                   "client_capabilities"), "roots"));
  asking->on_request = answer_roots;
  roots = test_client_result (asking, "tools/call", json_pack ("{s:s, s:{s:s}}", "name", "fix__ask_client",
                                                               "arguments", "method", "roots/list"));
  g_assert_nonnull (strstr (test_result_text (roots), "file:///shared-client"));
  g_assert_cmpuint (asking->requests->len, ==, 1);
  /* The server started again for the client that can answer roots. */
  stats = call_tool (fixture, "stats", "{}");
  g_assert_nonnull (json_object_get (json_object_get (json_object_get (stats, "structuredContent"),
                                                      "client_capabilities"), "roots"));
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (stats, "structuredContent"), "pid")), !=,
                   json_integer_value (json_object_get (json_object_get (before, "structuredContent"), "pid")));

  /* The client's roots changed: the running server is told. */
  test_client_notify (asking, "notifications/roots/list_changed", NULL);
  changed = test_client_result (asking, "tools/call", json_pack ("{s:s, s:{}}", "name", "fix__stats", "arguments"));
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (changed, "structuredContent"),
                                                        "roots_changed")), ==, 1);

  /* The other client's call ends with the server's reply: asked then. */
  gated = test_client_request (other, "tools/call", json_pack ("{s:s, s:{}}", "name", "fix__gate", "arguments"));
  g_assert_true (test_wait_for (fixture_runs_two_calls, fixture, WAIT_MS));
  asked = test_client_request (asking, "tools/call", json_pack ("{s:s, s:{s:s}}", "name", "fix__ask_client",
                                                                "arguments", "method", "roots/list"));
  g_assert_true (test_wait_for (one_question_waits, fixture->connection, WAIT_MS));
  g_assert_cmpuint (asking->requests->len, ==, 1);
  opened = call_tool (fixture, "gate", "{\"open\": true}");
  passed = test_client_read_reply (other, gated);
  g_assert_cmpstr (test_result_text (json_object_get (passed, "result")), ==, "passed");
  waited = test_client_read_reply (asking, asked);
  g_assert_nonnull (strstr (test_result_text (json_object_get (waited, "result")), "file:///shared-client"));
  g_assert_cmpuint (asking->requests->len, ==, 2);
  g_assert_cmpuint (other->requests->len, ==, 0);

  /* It is cancelled: refused. */
  hang = test_client_request (other, "tools/call", json_pack ("{s:s, s:{}}", "name", "fix__hang", "arguments"));
  g_assert_true (test_wait_for (fixture_runs_two_calls, fixture, WAIT_MS));
  asked = test_client_request (asking, "tools/call", json_pack ("{s:s, s:{s:s}}", "name", "fix__ask_client",
                                                                "arguments", "method", "roots/list"));
  g_assert_true (test_wait_for (one_question_waits, fixture->connection, WAIT_MS));
  /* A cancelled request is not answered. */
  test_client_notify (other, "notifications/cancelled", json_pack ("{s:I}", "requestId", (json_int_t) hang));
  refused = test_client_read_reply (asking, asked);
  g_assert_nonnull (strstr (test_result_text (json_object_get (refused, "result")),
                            "one of the calls ended without the server's reply"));
  g_assert_cmpuint (asking->requests->len, ==, 2);
  g_assert_cmpuint (daemon_stat (fixture->connection, "questions-waiting"), ==, 0);
  end_client (asking);
  end_client (other);
}

/* A `serve --shared` whose client speaks 2026-07-28 (it never sends
 * initialize). */
static TestClient *
launch_stateless (Fixture *fixture)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  const char *argv[] = { test_mcp_pool_path (), "serve", "--expose", "proxy", "--shared", NULL };
  g_auto(GStrv) wrapped = test_wrap_argv (argv);

  g_subprocess_launcher_set_environ (launcher, fixture->envp);
  return test_client_new (launcher, (const char * const *) wrapped);
}

/* The tools/call params of a 2026-07-28 client that answers elicitation:
 * @tool's call with @arguments (taken), and @retry's members (taken, NULL:
 * none), its requestState and inputResponses. */
static json_t *
stateless_call (const char *tool,
                json_t     *arguments,
                json_t     *retry)
{
  json_t *params = json_pack ("{s:s, s:o, s:{s:s, s:{s:{}}, s:{s:s, s:s}}}", "name", tool, "arguments", arguments,
                              "_meta", "io.modelcontextprotocol/protocolVersion", "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities", "elicitation",
                              "io.modelcontextprotocol/clientInfo", "name", "test-daemon", "version", "1");

  if (retry != NULL)
    json_object_update (params, retry);
  json_decref (retry);
  return params;
}

/* @client's call of @tool, which asks its client @message: the
 * InputRequiredResult, with its one question's key in @key. */
static json_t *
ask_stateless (TestClient  *client,
               const char  *tool,
               const char  *message,
               const char **key)
{
  json_t *asked = test_client_result (client, "tools/call",
                                      stateless_call (tool, json_pack ("{s:s, s:{s:s}}", "method",
                                                                       "elicitation/create", "params",
                                                                       "message", message), NULL));
  json_t *requests = json_object_get (asked, "inputRequests");
  json_t *question = NULL;

  g_assert_cmpstr (mcp_json_get_string (asked, "resultType"), ==, "input_required");
  g_assert_true (g_str_has_prefix (mcp_json_get_string (asked, "requestState"), "mcp-pool-input-"));
  g_assert_cmpuint (json_object_size (requests), ==, 1);
  json_object_foreach (requests, *key, question)
    break;
  g_assert_cmpstr (mcp_json_get_string (json_object_get (question, "params"), "message"), ==, message);
  return asked;
}

/* @client's retry of @tool's call with @state, answering @key with @name. */
static json_t *
answer_stateless (TestClient *client,
                  const char *tool,
                  const char *state,
                  const char *key,
                  const char *name)
{
  json_t *params = stateless_call (tool, json_pack ("{s:s}", "method", "elicitation/create"),
                                   json_pack ("{s:s, s:{s:{s:s, s:{s:s}}}}", "requestState", state,
                                              "inputResponses", key, "action", "accept", "content", "name", name));

  return test_client_read_reply (client, test_client_request (client, "tools/call", params));
}

/* The fixture's count of calls in flight, as @client sees it. */
static json_int_t
calls_in_flight (TestClient *client)
{
  g_autoptr(json_t) stats = test_client_result (client, "tools/call",
                                                stateless_call ("fix__stats", json_object (), NULL));

  return json_integer_value (json_object_get (json_object_get (stats, "structuredContent"), "inflight"));
}

static gboolean
only_stats_in_flight (gpointer client)
{
  return calls_in_flight (client) == 1;
}

/* Clients of `serve --shared` that speak 2026-07-28 are never asked over
 * the bus: a 2025 server's question during one's call is its own
 * InputRequiredResult, from the daemon, and its retry answers that
 * server's request, with two such calls waiting at once.  A requestState
 * is its client's alone; a client that leaves while its call waits has
 * the server answered and the call ended. */
static void
test_shared_stateless_input (Fixture       *fixture,
                             gconstpointer  data)
{
  TestClient *first = launch_stateless (fixture);
  TestClient *second = launch_stateless (fixture);
  TestClient *leaving = launch_stateless (fixture);
  const char *first_key = NULL, *second_key = NULL, *leaving_key = NULL;
  g_autoptr(json_t) first_asked = ask_stateless (first, "fix__ask_client", "Your name?", &first_key);
  g_autoptr(json_t) second_asked = ask_stateless (second, "fix2__ask_client", "Your quest?", &second_key);
  const char *first_state = mcp_json_get_string (first_asked, "requestState");
  const char *second_state = mcp_json_get_string (second_asked, "requestState");
  g_autoptr(json_t) stolen = answer_stateless (second, "fix__ask_client", first_state, first_key, "Eve");
  g_autoptr(json_t) second_answered = answer_stateless (second, "fix2__ask_client", second_state, second_key, "Bob");
  g_autoptr(json_t) first_answered = answer_stateless (first, "fix__ask_client", first_state, first_key, "Ada");
  g_autoptr(json_t) leaving_asked = NULL;

  g_assert_cmpstr (first_state, !=, second_state);
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (stolen, "error"), "code")), ==, -32602);
  g_assert_nonnull (strstr (test_result_text (json_object_get (second_answered, "result")), "Bob"));
  g_assert_nonnull (strstr (test_result_text (json_object_get (first_answered, "result")), "Ada"));
  /* Nothing came to the clients but their replies. */
  g_assert_cmpuint (first->requests->len + second->requests->len, ==, 0);

  leaving_asked = ask_stateless (leaving, "fix__ask_client", "Still there?", &leaving_key);
  end_client (leaving);
  g_assert_true (test_wait_for (only_stats_in_flight, first, WAIT_MS));
  end_client (first);
  end_client (second);
}

typedef struct {
  Fixture    *fixture;
  const char *expected;
} ChangesWait;

/* Whether the fixture's subscribes and unsubscribes ("+URI", "-URI", in
 * order) are those expected, joined by spaces. */
static gboolean
subscription_changes_are (gpointer data)
{
  ChangesWait *wait = data;
  g_autoptr(json_t) stats = call_tool (wait->fixture, "stats", "{}");
  json_t *changes = json_object_get (json_object_get (stats, "structuredContent"), "subscription_changes");
  g_autoptr(GString) joined = g_string_new (NULL);

  for (size_t i = 0; i < json_array_size (changes); i++)
    g_string_append_printf (joined, "%s%s", i > 0 ? " " : "", json_string_value (json_array_get (changes, i)));
  return g_str_equal (joined->str, wait->expected);
}

/* Two clients of the daemon that subscribe to one resource share the
 * server's subscription: it is made once, and ended once the last of them
 * has left. */
static void
test_shared_subscriptions (Fixture       *fixture,
                           gconstpointer  data)
{
  TestClient *first = start_client (fixture, TRUE, "proxy");
  TestClient *second = start_client (fixture, TRUE, "proxy");
  g_autoptr(json_t) one = test_client_result (first, "resources/subscribe", json_pack ("{s:s}", "uri", "fix://own"));
  g_autoptr(json_t) two = test_client_result (second, "resources/subscribe", json_pack ("{s:s}", "uri", "fix://own"));
  ChangesWait subscribed = { fixture, "+fix://own" };
  ChangesWait released = { fixture, "+fix://own -fix://own" };

  g_assert_true (subscription_changes_are (&subscribed));
  end_client (first);
  end_client (second);
  g_assert_true (test_wait_for (subscription_changes_are, &released, WAIT_MS));
}

/* A server that stops waiting for its request to a shared client (here
 * it dies) has that client told, through the daemon and its serve:
 * notifications/cancelled for the id serve gave the request. */
static void
test_shared_client_request_cancelled (Fixture       *fixture,
                                      gconstpointer  data)
{
  TestClient *asking = launch_client ((const char * const *) fixture->envp, TRUE, "--expose", "proxy", "mcp-pool",
                                      json_pack ("{s:{}}", "roots"));

  test_client_check_request_cancelled_by_crash (asking, "fix");
  end_client (asking);
}

/* Runs one of test-sdk-client.h's scripts with every serve --shared. */
static void
run_sdk_script_shared (Fixture *fixture,
                       void   (*run) (const char *config_path, gboolean shared, const char * const *envp))
{
  g_autofree char *config = g_build_filename (fixture->dir, "servers.json", NULL);

  /* The script's checks wait for real servers behind a daemon that
   * memcheck slows down tens of times; the in-process run and the TSan
   * run cover the code, this one the daemon's way through it. */
  if (test_under_valgrind ())
    {
      g_test_skip ("The SDK client's bounds do not fit a daemon under valgrind");
      return;
    }
  /* Read when the first serve activates the daemon. */
  run (config, TRUE, (const char * const *) fixture->envp);
}

/* Every check of the official SDK client holds through the daemon too:
 * each serve of sdk-client.mjs runs with --shared, and the daemon has the
 * three real servers. */
static void
test_sdk_client_shared (Fixture       *fixture,
                        gconstpointer  data)
{
  run_sdk_script_shared (fixture, test_sdk_client_run);
}

/* The SDK v2 client's checks over stdio hold through the daemon too, a
 * 2025 server's question included, which the daemon turns into the
 * client's InputRequiredResult. */
static void
test_sdk2_client_shared (Fixture       *fixture,
                         gconstpointer  data)
{
  run_sdk_script_shared (fixture, test_sdk2_client_run);
}

/* A call that the daemon had started when it died is not sent again: it
 * fails, saying so, and no daemon is activated for it. */
static void
test_kill_does_not_replay_started_call (Fixture       *fixture,
                                        gconstpointer  data)
{
  GPid daemon = daemon_pid (fixture->connection);
  g_autoptr(Child) caller = spawn_mcp_pool (fixture, "call", "--shared", "fix", "hang", NULL);
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;

  g_assert_true (test_wait_for (fixture_runs_two_calls, fixture, WAIT_MS));
  g_assert_cmpint (kill (daemon, SIGKILL), ==, 0);
  child_communicate (caller, &out, &err);
  g_assert_false (child_exited_with (caller, 0));
  g_assert_cmpstr (out, ==, "");
  g_assert_nonnull (strstr (err, "CallTool"));
  g_assert_nonnull (strstr (err, "not sent again"));
  g_assert_false (daemon_is_running (fixture->connection));
}

/* CallTool of fix's echo on the test's connection, whose serial goes
 * into @serials; its reply must be a success. */
static void
call_echo_told (Fixture *fixture,
                GArray  *serials)
{
  g_autoptr(GDBusMessage) message =
    g_dbus_message_new_method_call (MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH, MCP_DAEMON_INTERFACE, "CallTool");
  g_autoptr(GDBusMessage) reply = NULL;
  g_autoptr(GError) error = NULL;
  guint32 serial = 0;

  g_dbus_message_set_body (message, g_variant_new ("(sssu)", "fix", "echo", "{\"message\": \"told\"}", 0));
  reply = g_dbus_connection_send_message_with_reply_sync (fixture->connection, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE,
                                                          (int) test_timeout_ms (WAIT_MS), &serial, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_dbus_message_get_message_type (reply), ==, G_DBUS_MESSAGE_TYPE_METHOD_RETURN);
  g_array_append_val (serials, serial);
}

static void
open_accept_channel (Fixture *fixture,
                     int      fd,
                     GError **error)
{
  g_autoptr(GUnixFDList) fds = g_unix_fd_list_new_from_array (&fd, 1);
  g_autoptr(GVariant) reply =
    g_dbus_connection_call_with_unix_fd_list_sync (fixture->connection, MCP_DAEMON_BUS_NAME, MCP_DAEMON_OBJECT_PATH,
                                                   MCP_DAEMON_INTERFACE, "OpenAcceptChannel",
                                                   g_variant_new ("(h)", 0), NULL, G_DBUS_CALL_FLAGS_NONE,
                                                   (int) test_timeout_ms (WAIT_MS), fds, NULL, NULL, error);
}

/* The serials on the test's end of an accept channel, in order. */
static GArray *
read_records (int fd)
{
  GArray *records = g_array_new (FALSE, FALSE, sizeof (guint32));
  guint32 serial;

  while (recv (fd, &serial, sizeof serial, MSG_DONTWAIT) == (ssize_t) sizeof serial)
    g_array_append_val (records, serial);
  return records;
}

/* Pool1.OpenAcceptChannel: the daemon writes the serial of each call it
 * starts there; a channel that is full leaves the calls to Accepted and
 * takes records again once read; one the client closed goes; anything
 * but a SEQPACKET socket is refused. */
static void
test_accept_channel (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autoptr(GArray) serials = g_array_new (FALSE, FALSE, sizeof (guint32));
  g_autoptr(GArray) records = NULL;
  g_autoptr(GArray) more = NULL;
  g_autoptr(GError) error = NULL;
  int pipe_fds[2], pair[2], tiny = 1;
  guint64 before, told;

  g_assert_cmpint (pipe (pipe_fds), ==, 0);
  close (pipe_fds[0]);
  open_accept_channel (fixture, pipe_fds[1], &error);
  g_assert_error (error, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS);
  g_assert_nonnull (strstr (error->message, "SOCK_SEQPACKET"));
  g_clear_error (&error);
  g_assert_cmpuint (daemon_stat (fixture->connection, "accept-channels"), ==, 0);

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), ==, 0);
  /* The kernel's least send buffer: a few records fill it. */
  g_assert_cmpint (setsockopt (pair[1], SOL_SOCKET, SO_SNDBUF, &tiny, sizeof tiny), ==, 0);
  open_accept_channel (fixture, pair[1], &error);
  g_assert_no_error (error);
  g_assert_cmpuint (daemon_stat (fixture->connection, "accept-channels"), ==, 1);

  before = daemon_stat (fixture->connection, "channel-accepts");
  for (guint i = 0; i < 64; i++)
    call_echo_told (fixture, serials);
  told = daemon_stat (fixture->connection, "channel-accepts") - before;
  /* Full before the end, and every call answered all the same. */
  g_assert_cmpuint (told, >=, 1);
  g_assert_cmpuint (told, <, serials->len);
  records = read_records (pair[0]);
  g_assert_cmpuint (records->len, ==, told);
  for (guint i = 0; i < records->len; i++)
    g_assert_cmpuint (g_array_index (records, guint32, i), ==, g_array_index (serials, guint32, i));

  /* Read, it takes records again. */
  g_array_set_size (serials, 0);
  call_echo_told (fixture, serials);
  more = read_records (pair[0]);
  g_assert_cmpuint (more->len, ==, 1);
  g_assert_cmpuint (g_array_index (more, guint32, 0), ==, g_array_index (serials, guint32, 0));

  /* Closed by the client: the next call is answered, and the channel goes. */
  close (pair[0]);
  call_echo_told (fixture, serials);
  g_assert_cmpuint (daemon_stat (fixture->connection, "accept-channels"), ==, 0);
}

static gboolean
accept_channel_open (gpointer fixture)
{
  return daemon_stat (((Fixture *) fixture)->connection, "accept-channels") >= 1;
}

/* A call of `serve --shared` that the daemon told on serve's accept
 * channel, not with Accepted, is not sent again either. */
static void
test_kill_does_not_replay_channel_accepted_call (Fixture       *fixture,
                                                 gconstpointer  data)
{
  TestClient *serve = start_client (fixture, TRUE, "proxy");
  GPid daemon = daemon_pid (fixture->connection);
  g_autoptr(json_t) reply = NULL;
  g_autofree char *text = NULL;
  guint64 before;
  json_int_t id;

  g_assert_true (test_wait_for (accept_channel_open, fixture, WAIT_MS));
  before = daemon_stat (fixture->connection, "channel-accepts");
  id = test_client_request (serve, "tools/call", json_pack ("{s:s, s:{}}", "name", "fix__hang", "arguments"));
  g_assert_true (test_wait_for (fixture_runs_two_calls, fixture, WAIT_MS));
  g_assert_cmpuint (daemon_stat (fixture->connection, "channel-accepts"), ==, before + 1);
  g_assert_cmpint (kill (daemon, SIGKILL), ==, 0);

  reply = test_client_read_reply (serve, id);
  text = json_dumps (reply, JSON_COMPACT);
  g_assert_nonnull (strstr (text, "not sent again"));
  g_assert_false (daemon_is_running (fixture->connection));
  end_client (serve);
}

/* Root can play another user: a bus that admits everyone, and a client
 * process that drops to nobody. */
static void
drop_to_nobody (gpointer unused)
{
  if (setgroups (0, NULL) != 0 || setgid (NOBODY) != 0 || setuid (NOBODY) != 0)
    _exit (99);
}

static void
test_foreign_uid (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *services = NULL;
  g_autofree char *listen = NULL;
  g_autofree char *address = NULL;
  g_autofree char *foreign_err = NULL;
  Child *bus = NULL;
  g_auto(GStrv) foreign_envp = NULL;
  g_autoptr(Child) foreign = NULL;
  g_autoptr(GDBusConnection) own = NULL;
  g_autoptr(GVariant) reply = NULL;
  g_autoptr(GError) error = NULL;
  const Setup *setup = &plain;

  if (getuid () != 0)
    {
      g_test_skip ("Playing another user needs root (to run a client as uid 65534)");
      return;
    }
  if (!g_file_test ("/usr/bin/gdbus", G_FILE_TEST_IS_EXECUTABLE))
    {
      g_test_skip ("/usr/bin/gdbus (libglib2.0-bin) is needed as the foreign client");
      return;
    }

  dir = g_dir_make_tmp ("mcp-poold-uid-XXXXXX", &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_chmod (dir, 0755), ==, 0);
  services = g_build_filename (dir, "services", NULL);
  g_assert_cmpint (g_mkdir (services, 0755), ==, 0);
  write_service_file (services, setup);
  listen = g_strconcat ("unix:dir=", dir, NULL);
  bus = start_bus (dir, listen, services, NULL, &address);

  foreign_envp = g_environ_setenv (g_get_environ (), "DBUS_SESSION_BUS_ADDRESS", address, TRUE);
  {
    const char *argv[] = { "/usr/bin/gdbus", "call", "--session", "--dest", MCP_DAEMON_BUS_NAME,
                           "--object-path", MCP_DAEMON_OBJECT_PATH,
                           "--method", MCP_DAEMON_INTERFACE ".ListServers", NULL };

    foreign = child_spawn (argv, (const char * const *) foreign_envp, CHILD_OUT_NULL | CHILD_ERR_PIPE,
                           drop_to_nobody);
  }
  child_communicate (foreign, NULL, &foreign_err);
  g_assert_false (child_exited_with (foreign, 0));
  g_assert_nonnull (strstr (foreign_err, "AccessDenied"));

  /* The daemon's own user is served on the same bus. */
  own = g_dbus_connection_new_for_address_sync (address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                         G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                NULL, NULL, &error);
  g_assert_no_error (error);
  reply = call_daemon (own, "ListServers", NULL, "(s)", &error);
  g_assert_no_error (error);

  close_connection (own);
  stop_bus (bus);
  g_assert_true (test_wait_for (reap_and_check_no_children, NULL, WAIT_MS));
  test_remove_tree (dir);
}

/* Without a session bus, --shared says what is wrong and what to do. */
static void
test_no_session_bus (void)
{
  g_autofree char *empty = g_dir_make_tmp ("mcp-poold-nobus-XXXXXX", NULL);
  g_autofree char *runtime_bus = g_build_filename (empty, "bus", NULL);
  g_autofree char *uid = g_strdup_printf ("%u", (guint) geteuid ());
  g_autofree char *run_user_bus = g_build_filename (empty, uid, "bus", NULL);
  const char *argv[] = { test_mcp_pool_path (), "serve", "--shared", NULL };
  g_auto(GStrv) wrapped = test_wrap_argv (argv);
  g_auto(GStrv) envp = g_get_environ ();
  g_autoptr(Child) serve = NULL;
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;

  envp = g_environ_unsetenv (envp, "DBUS_SESSION_BUS_ADDRESS");
  envp = g_environ_unsetenv (envp, "DISPLAY");
  envp = g_environ_setenv (envp, "XDG_RUNTIME_DIR", empty, TRUE);
  /* Not the real /run/user, where this user may have a bus. */
  envp = g_environ_setenv (envp, "MCP_POOL_RUN_USER_DIR", empty, TRUE);
  /* Its stdin is at end of file at once. */
  serve = child_spawn ((const char * const *) wrapped, (const char * const *) envp,
                       CHILD_OUT_PIPE | CHILD_ERR_PIPE, NULL);
  child_communicate (serve, &out, &err);
  g_assert_true (child_exited_with (serve, 1));
  g_assert_cmpstr (out, ==, "");
  g_assert_nonnull (strstr (err, "session bus"));
  g_assert_nonnull (strstr (err, "--shared"));
  /* It says where it looked. */
  g_assert_nonnull (strstr (err, "DBUS_SESSION_BUS_ADDRESS"));
  g_assert_nonnull (strstr (err, runtime_bus));
  g_assert_nonnull (strstr (err, run_user_bus));
  g_rmdir (empty);
  g_assert_true (reap_and_check_no_children (NULL));
}

/* Over HTTP */

/* An MCP client over HTTP: a session of the daemon's HTTP front. */
typedef struct {
  SoupSession *http;
  char        *url;
  char        *session_id;   /* once initialized */
} HttpClient;

static void
http_client_init (HttpClient *client,
                  const char *url)
{
  if (g_str_has_prefix (url, "unix:"))
    {
      g_autoptr(GSocketAddress) address = g_unix_socket_address_new (url + strlen ("unix:"));

      client->http = soup_session_new_with_options ("remote-connectable", address, NULL);
      client->url = g_strdup ("http://localhost/mcp");
    }
  else
    {
      client->http = soup_session_new ();
      client->url = g_strdup (url);
    }
  soup_session_set_proxy_resolver (client->http, NULL);
  soup_session_set_timeout (client->http, test_timeout_ms (WAIT_MS) / 1000);
}

static void
http_client_clear (HttpClient *client)
{
  g_clear_object (&client->http);
  g_clear_pointer (&client->url, g_free);
  g_clear_pointer (&client->session_id, g_free);
}

/* Sends @method with @body (NULL: none) and the session's id; the HTTP
 * status, and the JSON answer in @answer (NULL: not wanted). */
static guint
http_send (HttpClient  *client,
           const char  *method,
           const char  *body,
           json_t     **answer)
{
  g_autoptr(SoupMessage) message = soup_message_new (method, client->url);
  SoupMessageHeaders *headers = soup_message_get_request_headers (message);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  const char *session_id;

  soup_message_headers_replace (headers, "Accept", "application/json, text/event-stream");
  if (client->session_id != NULL)
    soup_message_headers_replace (headers, "Mcp-Session-Id", client->session_id);
  if (body != NULL)
    {
      g_autoptr(GBytes) sent = g_bytes_new (body, strlen (body));

      soup_message_set_request_body_from_bytes (message, "application/json", sent);
    }
  bytes = soup_session_send_and_read (client->http, message, NULL, &error);
  g_assert_no_error (error);
  session_id = soup_message_headers_get_one (soup_message_get_response_headers (message), "Mcp-Session-Id");
  if (session_id != NULL && client->session_id == NULL)
    client->session_id = g_strdup (session_id);
  if (answer != NULL)
    {
      *answer = json_loadb (g_bytes_get_data (bytes, NULL), g_bytes_get_size (bytes), 0, NULL);
      g_assert_nonnull (*answer);
    }
  return soup_message_get_status (message);
}

/* initialize and notifications/initialized. */
static void
http_initialize (HttpClient *client)
{
  g_autoptr(json_t) answer = NULL;

  g_assert_cmpuint (http_send (client, "POST",
                               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                               "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                               "\"clientInfo\":{\"name\":\"test-daemon\",\"version\":\"1\"}}}", &answer),
                    ==, SOUP_STATUS_OK);
  g_assert_nonnull (json_object_get (answer, "result"));
  g_assert_nonnull (client->session_id);
  g_assert_cmpuint (http_send (client, "POST", "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
                               NULL), ==, SOUP_STATUS_ACCEPTED);
}

/* The pid of the fixture server that answers the stats tool over HTTP. */
static json_int_t
http_server_pid (HttpClient *client)
{
  g_autoptr(json_t) answer = NULL;
  json_t *stats;

  g_assert_cmpuint (http_send (client, "POST",
                               "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                               "\"params\":{\"name\":\"stats\",\"arguments\":{}}}", &answer),
                    ==, SOUP_STATUS_OK);
  stats = json_object_get (json_object_get (answer, "result"), "structuredContent");
  g_assert_nonnull (stats);
  return json_integer_value (json_object_get (stats, "pid"));
}

static json_int_t
dbus_server_pid (Fixture *fixture)
{
  g_autoptr(json_t) result = call_tool (fixture, "stats", "{}");

  return json_integer_value (json_object_get (json_object_get (result, "structuredContent"), "pid"));
}

/* mcp-poold --listen, started by D-Bus activation: an HTTP client and a
 * D-Bus client share the one warm server, over a socket only this user
 * may connect to; DELETE ends the session. */
static void
test_http_with_dbus (Fixture       *fixture,
                     gconstpointer  data)
{
  g_autofree char *socket_path = g_build_filename (fixture->dir, "http.sock", NULL);
  g_autofree char *url = g_strconcat ("unix:", socket_path, NULL);
  g_autoptr(json_t) server = NULL;
  HttpClient client = { 0 };
  json_int_t pid = dbus_server_pid (fixture);
  struct stat info;

  g_assert_cmpint (pid, >, 0);
  /* Only this user may connect. */
  g_assert_cmpint (g_stat (socket_path, &info), ==, 0);
  g_assert_cmpint (info.st_mode & 0777, ==, 0600);

  http_client_init (&client, url);
  http_initialize (&client);
  g_assert_cmpint (http_server_pid (&client), ==, pid);
  server = server_entry (fixture);
  g_assert_cmpint (json_integer_value (json_object_get (server, "starts")), ==, 1);

  g_assert_cmpuint (http_send (&client, "DELETE", NULL, NULL), ==, SOUP_STATUS_OK);
  g_assert_cmpuint (http_send (&client, "POST", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}", NULL),
                    ==, SOUP_STATUS_NOT_FOUND);
  http_client_clear (&client);
}

/* Spawns mcp-poold as systemd does for a socket unit: @socket's fd as 3,
 * $LISTEN_FDS=1 and $LISTEN_PID its own pid (set by the shell it execs
 * from, which keeps the pid). */
static Child *
spawn_socket_activated (Fixture    *fixture,
                        GSocket    *socket,
                        const char *extra_arg)
{
  const char *argv[] = { "/bin/sh", "-c", "LISTEN_PID=$$ exec \"$@\"", "sh", poold_path (), "--no-idle-exit",
                         "--server", "fix", extra_arg, NULL };
  g_auto(GStrv) envp = g_environ_setenv (g_strdupv (fixture->envp), "LISTEN_FDS", "1", TRUE);
  int source_fds[] = { g_socket_get_fd (socket) };
  int target_fds[] = { 3 };
  Child *child = g_new0 (Child, 1);
  g_autoptr(GError) error = NULL;

  child->out_fd = -1;
  g_spawn_async_with_pipes_and_fds (NULL, argv, (const char * const *) envp,
                                    G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDIN_FROM_DEV_NULL,
                                    test_die_with_parent, NULL,
                                    -1, -1, -1, source_fds, target_fds, 1, &child->pid, NULL, NULL,
                                    &child->err_fd, &error);
  g_assert_no_error (error);
  return child;
}

static gboolean
bus_has_daemon (gpointer connection)
{
  return daemon_is_running (connection);
}

/* Socket activation: a listening socket handed over as fd 3 is served;
 * the daemon also takes the bus name, so HTTP and D-Bus clients share it. */
static void
test_http_socket_activation (Fixture       *fixture,
                             gconstpointer  data)
{
  g_autoptr(GInetAddress) loopback = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr(GSocketAddress) address = g_inet_socket_address_new (loopback, 0);
  g_autoptr(GSocketAddress) bound = NULL;
  g_autoptr(GSocket) socket = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr(Child) daemon = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *url = NULL;
  g_autofree char *said = NULL;
  HttpClient client = { 0 };
  json_int_t pid;

  g_assert_true (g_socket_bind (socket, address, TRUE, &error));
  g_assert_true (g_socket_listen (socket, &error));
  bound = g_socket_get_local_address (socket, &error);
  g_assert_no_error (error);
  url = g_strdup_printf ("http://127.0.0.1:%u/mcp", g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));

  daemon = spawn_socket_activated (fixture, socket, NULL);
  /* The socket is the daemon's now: connections queue until it serves. */
  g_clear_object (&socket);
  http_client_init (&client, url);
  http_initialize (&client);
  pid = http_server_pid (&client);
  g_assert_cmpint (pid, >, 0);

  g_assert_true (test_wait_for (bus_has_daemon, fixture->connection, WAIT_MS));
  g_assert_cmpint (daemon_pid (fixture->connection), ==, daemon->pid);
  g_assert_cmpint (dbus_server_pid (fixture), ==, pid);

  http_client_clear (&client);
  g_assert_cmpint (kill (daemon->pid, SIGTERM), ==, 0);
  child_communicate (daemon, NULL, &said);
  g_test_message ("The daemon said: %s", said);
  g_assert_true (child_exited_with (daemon, 0));
  g_assert_nonnull (strstr (said, url));
}

/* What mcp-poold refuses to listen with, each with a message that says
 * what to do. */
static void
test_http_refused (Fixture       *fixture,
                   gconstpointer  data)
{
  static const struct {
    const char *args[3];
    const char *said;
  } cases[] = {
    { { "--listen", "192.0.2.1:8931", NULL }, "--allow-remote" },
    { { "--server", "fix", NULL }, "give --listen" },
    { { "--listen", "127.0.0.1:0", "--path=mcp" }, "must start with /" },
    { { "--listen=127.0.0.1:0", "--expose=code", "--server=fix" }, "use one of them" },
    { { "--listen", "127.0.0.1:0", "--server=nosuch" }, "nosuch" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(Child) refused = spawn_daemon (fixture, "--no-idle-exit", cases[i].args[0], cases[i].args[1],
                                               cases[i].args[2], NULL);
      g_autofree char *said = NULL;

      child_communicate (refused, NULL, &said);
      g_test_message ("mcp-poold %s %s: %s", cases[i].args[0], cases[i].args[1], said);
      g_assert_false (child_exited_with (refused, 0));
      g_assert_nonnull (strstr (said, cases[i].said));
    }
  /* None of them took the name or left anything. */
  g_assert_false (daemon_is_running (fixture->connection));
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* What a killed daemon leaves behind is reparented here and reaped. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);

  g_test_add ("/daemon/activation", Fixture, &plain, fixture_set_up, test_activation, fixture_tear_down);
  g_test_add ("/daemon/two-clients-one-server", Fixture, &plain, fixture_set_up,
              test_two_clients_one_server, fixture_tear_down);
  g_test_add ("/daemon/shared-python-sessions", Fixture, &plain, fixture_set_up,
              test_shared_python_sessions, fixture_tear_down);
  g_test_add ("/daemon/config-changes", Fixture, &plain, fixture_set_up, test_config_changes, fixture_tear_down);
  g_test_add ("/daemon/same-answers", Fixture, &with_prompts, fixture_set_up, test_same_answers, fixture_tear_down);
  g_test_add ("/daemon/same-answers-one-server", Fixture, &with_prompts, fixture_set_up,
              test_same_answers_one_server, fixture_tear_down);
  g_test_add ("/daemon/shared-notifications", Fixture, &with_logging, fixture_set_up,
              test_shared_notifications, fixture_tear_down);
  g_test_add ("/daemon/shared-client-requests", Fixture, &plain, fixture_set_up,
              test_shared_client_requests, fixture_tear_down);
  g_test_add ("/daemon/shared-stateless-input", Fixture, &two_servers, fixture_set_up,
              test_shared_stateless_input, fixture_tear_down);
  g_test_add ("/daemon/shared-subscriptions", Fixture, &with_prompts, fixture_set_up, test_shared_subscriptions,
              fixture_tear_down);
  g_test_add ("/daemon/shared-client-request-cancelled", Fixture, &plain, fixture_set_up,
              test_shared_client_request_cancelled, fixture_tear_down);
  g_test_add ("/daemon/sdk-client", Fixture, &plain, fixture_set_up, test_sdk_client_shared, fixture_tear_down);
  g_test_add ("/daemon/sdk2-client", Fixture, &plain, fixture_set_up, test_sdk2_client_shared, fixture_tear_down);
  g_test_add ("/daemon/signals", Fixture, &plain, fixture_set_up, test_signals, fixture_tear_down);
  g_test_add ("/daemon/warm-no-worker", Fixture, &plain, fixture_set_up, test_warm_no_worker,
              fixture_tear_down);
  g_test_add ("/daemon/idle-exit", Fixture, &quick_idle, fixture_set_up, test_idle_exit, fixture_tear_down);
  g_test_add ("/daemon/replace", Fixture, &plain, fixture_set_up, test_replace, fixture_tear_down);
  g_test_add ("/daemon/http/with-dbus", Fixture, &listening, fixture_set_up, test_http_with_dbus,
              fixture_tear_down);
  g_test_add ("/daemon/http/socket-activation", Fixture, &plain, fixture_set_up, test_http_socket_activation,
              fixture_tear_down);
  g_test_add ("/daemon/http/refused", Fixture, &plain, fixture_set_up, test_http_refused, fixture_tear_down);
  g_test_add ("/daemon/sigkill-leaves-no-server", Fixture, &with_grandchild, fixture_set_up,
              test_sigkill_leaves_no_server, fixture_tear_down);
  g_test_add ("/daemon/bus/runtime-dir", Fixture, &plain, fixture_set_up, test_bus_in_runtime_dir,
              fixture_tear_down);
  g_test_add ("/daemon/bus/run-user", Fixture, &plain, fixture_set_up, test_bus_in_run_user, fixture_tear_down);
  g_test_add ("/daemon/kill/replays-untaken-calls", Fixture, &plain, fixture_set_up,
              test_kill_replays_untaken_calls, fixture_tear_down);
  g_test_add ("/daemon/kill/does-not-replay-started-call", Fixture, &plain, fixture_set_up,
              test_kill_does_not_replay_started_call, fixture_tear_down);
  g_test_add ("/daemon/kill/does-not-replay-channel-accepted-call", Fixture, &plain, fixture_set_up,
              test_kill_does_not_replay_channel_accepted_call, fixture_tear_down);
  g_test_add ("/daemon/accept-channel", Fixture, &plain, fixture_set_up, test_accept_channel, fixture_tear_down);
  g_test_add_func ("/daemon/foreign-uid", test_foreign_uid);
  g_test_add_func ("/daemon/no-session-bus", test_no_session_bus);
  return g_test_run ();
}
