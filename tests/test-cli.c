/* test-cli.c — the `mcp-pool` program as a user runs it. */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <glib-unix.h>
#include <unistd.h>

#include "common/mcp-jsonrpc.h"
#include "test-client.h"
#include "test-procs.h"
#include "test-wait.h"

typedef struct {
  int   status;
  char *out;
  char *err;
} RunResult;

static void
run_result_clear (RunResult *result)
{
  g_free (result->out);
  g_free (result->err);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (RunResult, run_result_clear)

static char *scratch_home;

/* A home and a working folder of its own: the user's real config files
 * must not leak into the tests, and discovery reads both.  @environment
 * holds KEY=VALUE pairs to set on top of this process's environment. */
static GSubprocessLauncher *
scratch_launcher (GSubprocessFlags    flags,
                  const char * const *environment)
{
  GSubprocessLauncher *launcher = g_subprocess_launcher_new (flags);

  g_subprocess_launcher_setenv (launcher, "HOME", scratch_home, TRUE);
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_CONFIG");
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_PARENT");
  g_subprocess_launcher_set_cwd (launcher, scratch_home);
  for (const char * const *pair = environment; pair != NULL && *pair != NULL; pair++)
    {
      g_autofree char *key = g_strndup (*pair, strcspn (*pair, "="));

      g_subprocess_launcher_setenv (launcher, key, *pair + strlen (key) + 1, TRUE);
    }
  return launcher;
}

/* Runs mcp-pool with @argv (NULL-terminated, without the program) to its
 * end; its stdin is at end of file from the start. */
static void
run_argv (RunResult          *result,
          const char * const *environment,
          const char * const *arguments)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;

  g_ptr_array_add (argv, (gpointer) test_mcp_pool_path ());
  for (const char * const *arg = arguments; *arg != NULL; arg++)
    g_ptr_array_add (argv, (gpointer) *arg);
  g_ptr_array_add (argv, NULL);

  launcher = scratch_launcher (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                               G_SUBPROCESS_FLAGS_STDERR_PIPE, environment);
  process = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (process, "", NULL, &result->out, &result->err, &error);
  g_assert_no_error (error);
  result->status = g_subprocess_get_if_exited (process) ? g_subprocess_get_exit_status (process) : -1;
}

static void
run (RunResult   *result,
     const char  *first_arg,
     ...)
{
  g_autoptr(GPtrArray) arguments = g_ptr_array_new ();
  const char *arg;
  va_list args;

  va_start (args, first_arg);
  for (arg = first_arg; arg != NULL; arg = va_arg (args, const char *))
    g_ptr_array_add (arguments, (gpointer) arg);
  va_end (args);
  g_ptr_array_add (arguments, NULL);
  run_argv (result, NULL, (const char * const *) arguments->pdata);
}

/* A config file naming the fixture with the given flags. */
static char *
write_config (const char *name,
              const char *flags_json)
{
  g_autofree char *text = g_strdup_printf ("{\n  \"mcpServers\": {\n    \"%s\": {\"command\": \"%s\", \"args\": %s}\n  }\n}\n",
                                           name, test_fixture_path (), flags_json);
  g_autofree char *path = NULL;
  g_autoptr(GError) error = NULL;
  int fd = g_file_open_tmp ("mcp-pool-test-XXXXXX.json", &path, &error);

  g_assert_no_error (error);
  close (fd);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return g_steal_pointer (&path);
}

static void
test_version (void)
{
  g_auto(RunResult) result = { 0 };

  run (&result, "--version", NULL);
  g_assert_cmpint (result.status, ==, 0);
  g_assert_cmpstr (result.out, ==, "mcp-pool " PACKAGE_VERSION "\n");
}

static void
test_help (void)
{
  g_auto(RunResult) result = { 0 };
  g_auto(RunResult) call_help = { 0 };
  g_auto(RunResult) unknown = { 0 };

  run (&result, "--help", NULL);
  g_assert_cmpint (result.status, ==, 0);
  g_assert_nonnull (strstr (result.out, "demo"));
  g_assert_nonnull (strstr (result.out, "call"));

  run (&call_help, "call", "--help", NULL);
  g_assert_cmpint (call_help.status, ==, 0);
  g_assert_nonnull (strstr (call_help.out, "--config"));

  run (&unknown, "frobnicate", NULL);
  g_assert_cmpint (unknown.status, ==, 2);
  g_assert_nonnull (strstr (unknown.err, "frobnicate"));
}

static void
test_demo (void)
{
  g_auto(RunResult) result = { 0 };

  run (&result, "demo", "--calls", "200", NULL);
  g_assert_cmpint (result.status, ==, 0);
  g_assert_nonnull (strstr (result.out, "First call"));
  g_assert_nonnull (strstr (result.out, "200 warm calls"));
  test_assert_no_children ();
}

static void
test_call (void)
{
  g_autofree char *config = write_config ("fixture", "[]");
  g_auto(RunResult) json_args = { 0 };
  g_auto(RunResult) pairs = { 0 };
  g_auto(RunResult) as_json = { 0 };

  run (&json_args, "call", "--config", config, "fixture", "echo", "{\"message\": \"one\"}", NULL);
  g_assert_cmpint (json_args.status, ==, 0);
  g_assert_cmpstr (json_args.out, ==, "Echo: one\n");

  run (&pairs, "call", "--config", config, "fixture", "sleep", "ms=5", NULL);
  g_assert_cmpint (pairs.status, ==, 0);
  g_assert_cmpstr (pairs.out, ==, "slept 5\n");

  run (&as_json, "call", "--config", config, "--json", "fixture", "stats", NULL);
  g_assert_cmpint (as_json.status, ==, 0);
  g_assert_nonnull (strstr (as_json.out, "\"structuredContent\""));
  g_unlink (config);
}

#define NO_DEFAULT_SCHEMA \
  "{\"schema\": {\"type\": \"object\", \"properties\": {" \
  "\"name\": {\"type\": \"string\", \"default\": \"Ada\"}, " \
  "\"email\": {\"type\": \"string\", \"format\": \"email\"}}, " \
  "\"required\": [\"name\", \"email\"]}}"

/* Without a terminal (the test's pipes), the option answers. */
static void
test_call_elicitation (void)
{
  g_autofree char *config = write_config ("fixture", "[]");
  g_auto(RunResult) defaults = { 0 };
  g_auto(RunResult) declined = { 0 };
  g_auto(RunResult) explicit_decline = { 0 };
  g_auto(RunResult) missing = { 0 };
  g_auto(RunResult) bad_mode = { 0 };
  g_autoptr(json_t) answer = NULL;

  run (&defaults, "call", "--config", config, "--elicitation", "accept-defaults",
       "fixture", "elicit", NULL);
  g_assert_cmpint (defaults.status, ==, 0);
  answer = json_loads (defaults.out, 0, NULL);
  g_assert_cmpstr (mcp_json_get_string (answer, "action"), ==, "accept");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (answer, "content"), "name"), ==, "Ada");
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (answer, "content"), "age")), ==, 36);
  g_assert_true (json_is_true (json_object_get (json_object_get (answer, "content"), "subscribe")));
  g_assert_cmpstr (mcp_json_get_string (json_object_get (answer, "content"), "color"), ==, "green");
  g_assert_cmpfloat (json_number_value (json_object_get (json_object_get (answer, "content"), "ratio")), ==, 0.5);
  g_assert_cmpstr (defaults.err, ==, "");

  /* Declining is the default, and says how to accept. */
  run (&declined, "call", "--config", config, "fixture", "elicit", NULL);
  g_assert_cmpint (declined.status, ==, 0);
  g_assert_cmpstr (declined.out, ==, "{\"action\":\"decline\"}\n");
  g_assert_nonnull (strstr (declined.err, "declined the request of server “fixture”"));
  g_assert_nonnull (strstr (declined.err, "Who are you?"));
  g_assert_nonnull (strstr (declined.err, "--elicitation accept-defaults"));

  run (&explicit_decline, "call", "--config", config, "--elicitation", "decline",
       "fixture", "elicit", NULL);
  g_assert_cmpstr (explicit_decline.out, ==, "{\"action\":\"decline\"}\n");

  /* A required field without a default cannot be accepted blindly. */
  run (&missing, "call", "--config", config, "--elicitation", "accept-defaults",
       "fixture", "elicit", NO_DEFAULT_SCHEMA, NULL);
  g_assert_cmpint (missing.status, ==, 0);
  g_assert_cmpstr (missing.out, ==, "{\"action\":\"decline\"}\n");
  g_assert_nonnull (strstr (missing.err, "“email” is required and has no default"));

  run (&bad_mode, "call", "--config", config, "--elicitation", "maybe", "fixture", "elicit", NULL);
  g_assert_cmpint (bad_mode.status, ==, 2);
  g_assert_nonnull (strstr (bad_mode.err, "--elicitation must be accept-defaults or decline, not “maybe”"));

  g_unlink (config);
  test_assert_no_children ();
}

/* On a terminal (a pty as stdin and stderr) each field is asked and
 * checked: wrong answers are asked again, an empty one takes the default. */
static void
test_call_elicitation_terminal (void)
{
  g_autofree char *config = write_config ("fixture", "[]");
  const char *argv[] = { test_mcp_pool_path (), "call", "--config", config, "fixture", "elicit", NULL };
  const char answers[] = "Grace\nold\n200\n40\n\nno\npurple\nblue\na\n";
  g_autoptr(GSubprocessLauncher) launcher = scratch_launcher (G_SUBPROCESS_FLAGS_STDOUT_PIPE, NULL);
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GString) terminal = g_string_new (NULL);
  g_autofree char *out = NULL;
  g_autoptr(json_t) answer = NULL;
  char buffer[4096];
  ssize_t n;
  int master = posix_openpt (O_RDWR | O_NOCTTY);
  int slave;

  g_assert_cmpint (master, >=, 0);
  g_assert_cmpint (grantpt (master), ==, 0);
  g_assert_cmpint (unlockpt (master), ==, 0);
  slave = open (ptsname (master), O_RDWR | O_NOCTTY);
  g_assert_cmpint (slave, >=, 0);
  /* Typed ahead: the terminal keeps the lines until they are read. */
  g_assert_cmpint (write (master, answers, sizeof answers - 1), ==, sizeof answers - 1);
  g_subprocess_launcher_take_stdin_fd (launcher, slave);
  g_subprocess_launcher_take_stderr_fd (launcher, dup (slave));
  process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  g_clear_object (&launcher);
  g_subprocess_communicate_utf8 (process, NULL, NULL, &out, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (process));
  g_assert_cmpint (g_subprocess_get_exit_status (process), ==, 0);

  answer = json_loads (out, 0, NULL);
  g_assert_cmpstr (mcp_json_get_string (answer, "action"), ==, "accept");
  g_assert_cmpstr (mcp_json_get_string (json_object_get (answer, "content"), "name"), ==, "Grace");
  g_assert_cmpint (json_integer_value (json_object_get (json_object_get (answer, "content"), "age")), ==, 40);
  g_assert_cmpfloat (json_number_value (json_object_get (json_object_get (answer, "content"), "ratio")), ==, 0.5);
  g_assert_true (json_is_false (json_object_get (json_object_get (answer, "content"), "subscribe")));
  g_assert_cmpstr (mcp_json_get_string (json_object_get (answer, "content"), "color"), ==, "blue");

  /* Every writer of the pty is gone: what it showed can be read to the end. */
  g_unix_set_fd_nonblocking (master, TRUE, NULL);
  while ((n = read (master, buffer, sizeof buffer)) > 0)
    g_string_append_len (terminal, buffer, n);
  close (master);
  g_assert_nonnull (strstr (terminal->str, "Server “fixture” asks: Who are you?"));
  g_assert_nonnull (strstr (terminal->str, "name (string, required) — Your name [Ada]: "));
  g_assert_nonnull (strstr (terminal->str, "“age” must be a whole number"));
  g_assert_nonnull (strstr (terminal->str, "“age” must be between 0 and 150"));
  g_assert_nonnull (strstr (terminal->str, "“color” must be one of red, green, blue"));
  g_unlink (config);
  test_assert_no_children ();
}

static void
test_call_errors (void)
{
  g_autofree char *config = write_config ("fixture", "[]");
  g_autofree char *broken = write_config ("broken", "[\"--fail-start\"]");
  g_autofree char *malformed = NULL;
  g_auto(RunResult) unknown_server = { 0 };
  g_auto(RunResult) crash = { 0 };
  g_auto(RunResult) tool_error = { 0 };
  g_auto(RunResult) start_failure = { 0 };
  g_auto(RunResult) syntax = { 0 };
  g_auto(RunResult) bad_args = { 0 };
  int fd;

  run (&unknown_server, "call", "--config", config, "nosuch", "echo", NULL);
  g_assert_cmpint (unknown_server.status, ==, 1);
  g_assert_nonnull (strstr (unknown_server.err, "nosuch"));

  run (&crash, "call", "--config", config, "fixture", "crash", NULL);
  g_assert_cmpint (crash.status, ==, 1);
  g_assert_nonnull (strstr (crash.err, "fixture"));
  g_assert_nonnull (strstr (crash.err, "status 3"));

  run (&tool_error, "call", "--config", config, "fixture", "tool_error", NULL);
  g_assert_cmpint (tool_error.status, ==, 1);
  g_assert_nonnull (strstr (tool_error.out, "tool failed as asked"));

  run (&start_failure, "call", "--config", broken, "broken", "echo", NULL);
  g_assert_cmpint (start_failure.status, ==, 1);
  g_assert_nonnull (strstr (start_failure.err, "failing to start as asked"));

  fd = g_file_open_tmp ("mcp-pool-test-XXXXXX.json", &malformed, NULL);
  close (fd);
  g_assert_true (g_file_set_contents (malformed, "{\n  \"mcpServers\": {\n    \"x\": {\"command\": }\n  }\n}\n", -1, NULL));
  run (&syntax, "call", "--config", malformed, "x", "echo", NULL);
  g_assert_cmpint (syntax.status, ==, 1);
  g_assert_nonnull (strstr (syntax.err, ":3:"));

  run (&bad_args, "call", "--config", config, "fixture", "echo", "message", NULL);
  g_assert_cmpint (bad_args.status, ==, 2);
  g_assert_nonnull (strstr (bad_args.err, "key=value"));

  g_unlink (config);
  g_unlink (broken);
  g_unlink (malformed);
  test_assert_no_children ();
}

/* The first child of @pid, or 0 while it has none.  Children are listed
 * per thread, and mcp-pool forks from its spawner thread. */
static GPid
first_child_of (GPid pid)
{
  g_autofree char *tasks = g_strdup_printf ("/proc/%d/task", pid);
  g_autoptr(GDir) dir = g_dir_open (tasks, 0, NULL);
  const char *task;

  while (dir != NULL && (task = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *path = g_build_filename (tasks, task, "children", NULL);
      g_autofree char *text = NULL;

      if (g_file_get_contents (path, &text, NULL, NULL) && text[0] != '\0')
        return (GPid) g_ascii_strtoll (text, NULL, 10);
    }
  return 0;
}

/* A child that has exec'd the fixture: its parent-death signal is armed
 * (it is set between fork and exec). */
static gboolean
has_server_child (gpointer data)
{
  GPid child = first_child_of (*(GPid *) data);
  g_autofree char *path = g_strdup_printf ("/proc/%d/cmdline", child);
  g_autofree char *cmdline = NULL;

  return child != 0 && g_file_get_contents (path, &cmdline, NULL, NULL) &&
         strstr (cmdline, "mcp-fixture-server") != NULL;
}

static gboolean
process_gone (gpointer data)
{
  return test_process_gone (*(GPid *) data);
}

/* The pool is SIGKILLed in the middle of a call: its server must die with
 * it (PR_SET_PDEATHSIG), not linger as an orphan. */
static void
test_children_die_with_pool (void)
{
  /* It ignores stdin EOF, so only the parent-death signal can end it. */
  g_autofree char *config = write_config ("fixture", "[\"--ignore-eof\"]");
  g_autoptr(GSubprocess) pool = NULL;
  g_autoptr(GError) error = NULL;
  GPid pool_pid, server_pid;
  int status;

  pool = g_subprocess_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE, &error, test_mcp_pool_path (),
                           "call", "--config", config, "fixture", "sleep", "ms=60000", NULL);
  g_assert_no_error (error);
  pool_pid = atoi (g_subprocess_get_identifier (pool));

  g_assert_true (test_wait_for (has_server_child, &pool_pid, 10000));
  server_pid = first_child_of (pool_pid);
  g_subprocess_force_exit (pool);
  g_subprocess_wait (pool, NULL, &error);
  g_assert_no_error (error);

  /* The orphaned server is reparented to this test (a subreaper): reap it. */
  g_assert_cmpint (waitpid (server_pid, &status, 0), ==, server_pid);
  g_assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  g_assert_true (test_wait_for (process_gone, &server_pid, 10000));
  g_unlink (config);
  test_assert_no_children ();
}

/* A file under the scratch home. */
static char *
write_home_file (const char *relative,
                 const char *text)
{
  g_autofree char *path = g_build_filename (scratch_home, relative, NULL);
  g_autofree char *dir = g_path_get_dirname (path);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return g_steal_pointer (&path);
}

static char *
fixture_entry (const char *flags_json)
{
  return g_strdup_printf ("{\"command\": \"%s\", \"args\": %s}", test_fixture_path (), flags_json);
}

/* Servers found in the user's own files, shown with what is skipped. */
static void
test_servers (void)
{
  g_autofree char *good = fixture_entry ("[]");
  g_autofree char *text = g_strdup_printf ("{\"mcpServers\": {\"alpha\": %s, \"beta\": %s, "
                                           "\"remote\": {\"url\": \"https://example.invalid/mcp\"}, "
                                           "\"off\": {\"command\": \"x\", \"disabled\": true}}}",
                                           good, good);
  g_autofree char *path = write_home_file (".claude.json", text);
  g_auto(RunResult) table = { 0 };
  g_auto(RunResult) json = { 0 };
  g_autoptr(json_t) parsed = NULL;

  run (&table, "servers", NULL);
  g_assert_cmpint (table.status, ==, 0);
  g_assert_true (g_str_has_prefix (table.out, "NAME"));
  g_assert_nonnull (strstr (table.out, "alpha"));
  g_assert_nonnull (strstr (table.out, "beta"));
  g_assert_nonnull (strstr (table.out, "~/.claude.json"));
  g_assert_nonnull (strstr (table.out, "idle"));
  g_assert_nonnull (strstr (table.out, "remote: remote: http https://example.invalid/mcp, auth: none, "
                                       "no login stored (if it asks for one: mcp-pool auth remote)\n"));
  g_assert_nonnull (strstr (table.out, "disabled"));

  run (&json, "servers", "--json", NULL);
  g_assert_cmpint (json.status, ==, 0);
  parsed = json_loads (json.out, 0, NULL);
  g_assert_cmpuint (json_array_size (parsed), ==, 4);
  /* A stdio server's listing has no remote fields. */
  g_assert_null (json_object_get (json_array_get (parsed, 0), "transport"));
  g_unlink (path);
}

/* Remote servers in servers, servers --json and doctor: transport, URL
 * and auth, and none of the secrets their entries hold. */
static void
test_servers_remote (void)
{
  const char *text =
    "{\"mcpServers\": {"
    "\"web\": {\"type\": \"http\", \"url\": \"https://user:s3cret@api.example.invalid/mcp?key=s3cret\","
    " \"headers\": {\"Authorization\": \"Bearer ${SECRET_TOKEN}\"}},"
    "\"events\": {\"type\": \"sse\", \"url\": \"https://events.example.invalid/sse\","
    " \"oauth\": {\"clientId\": \"pool\", \"clientSecret\": \"s3cret\", \"scopes\": [\"read\"]}}}}";
  const char * const environment[] = { "SECRET_TOKEN=s3cret", NULL };
  const char * const servers_args[] = { "servers", NULL };
  const char * const json_args[] = { "servers", "--json", NULL };
  const char * const doctor_args[] = { "doctor", NULL };
  g_autofree char *path = write_home_file (".cursor/mcp.json", text);
  g_auto(RunResult) table = { 0 };
  g_auto(RunResult) json = { 0 };
  g_auto(RunResult) doctor = { 0 };
  const RunResult *results[] = { &table, &json, &doctor };
  g_autoptr(json_t) parsed = NULL;
  json_t *server;
  size_t index;

  run_argv (&table, environment, servers_args);
  g_assert_cmpint (table.status, ==, 0);
  g_assert_nonnull (strstr (table.out, "remote: web: http https://api.example.invalid/mcp, auth: headers\n"));
  g_assert_nonnull (strstr (table.out, "remote: events: sse https://events.example.invalid/sse, auth: oauth, "
                                       "no login stored (if it asks for one: mcp-pool auth events)\n"));

  run_argv (&json, environment, json_args);
  g_assert_cmpint (json.status, ==, 0);
  parsed = json_loads (json.out, 0, NULL);
  g_assert_cmpuint (json_array_size (parsed), ==, 2);
  json_array_foreach (parsed, index, server)
    {
      gboolean web = g_str_equal (mcp_json_get_string (server, "name"), "web");

      g_assert_cmpstr (mcp_json_get_string (server, "state"), ==, "idle");
      g_assert_cmpstr (mcp_json_get_string (server, "transport"), ==, web ? "http" : "sse");
      g_assert_cmpstr (mcp_json_get_string (server, "url"), ==,
                       web ? "https://api.example.invalid/mcp" : "https://events.example.invalid/sse");
      g_assert_cmpstr (mcp_json_get_string (server, "auth"), ==, web ? "headers" : "oauth");
      /* Whether tokens are stored, for a server that sends none itself. */
      g_assert_cmpstr (mcp_json_get_string (server, "login"), ==, web ? NULL : "none");
    }

  /* doctor names each with its transport, URL and kind of auth. */
  run_argv (&doctor, environment, doctor_args);
  g_assert_nonnull (strstr (doctor.out, "server “web” (http https://api.example.invalid/mcp, auth: headers)"));
  g_assert_nonnull (strstr (doctor.out, "server “events” (sse https://events.example.invalid/sse, auth: oauth)"));

  for (gsize i = 0; i < G_N_ELEMENTS (results); i++)
    {
      g_assert_null (strstr (results[i]->out, "s3cret"));
      g_assert_null (strstr (results[i]->err, "s3cret"));
    }
  g_unlink (path);
  test_assert_no_children ();
}

/* The options of a remote server given on the command line, each wrong
 * one refused before anything runs, with what to write instead. */
static void
test_url_errors (void)
{
  const struct {
    const char *args[8];
    const char *message;
  } cases[] = {
    { { "tools", "--url", NULL }, "Missing argument for --url" },
    { { "tools", "--url", "", NULL }, "--url needs the server's address" },
    { { "tools", "--url", "ftp://example.invalid/mcp", NULL }, "“--url” must be an http:// or https:// URL" },
    { { "call", "--url", "example.invalid/mcp", "tool", NULL }, "“--url” must be an http:// or https:// URL" },
    { { "tools", "--url", "http://example.invalid/mcp", NULL }, "plain http:// to example.invalid" },
    { { "call", "--url", "https:///mcp", "tool", NULL }, "with a host name" },
    { { "tools", "--url", "https://example.invalid/mcp", "--header", "Bearer s3cret", NULL },
      "--header needs the form “Name: value”" },
    { { "call", "--url", "https://example.invalid/mcp", "-H", "Bad Name: s3cret", "tool", NULL },
      "“Bad Name” is not a header name" },
    { { "tools", "--header", "Authorization: Bearer s3cret", NULL }, "are for a server given with --url URL" },
    { { "tools", "--url", "https://example.invalid/mcp", "--transport", "ws", NULL }, "--transport must be http or sse" },
    { { "tools", "--url", "https://example.invalid/mcp", "--shared", NULL }, "drop --shared" },
    { { "tools", "--url", "https://example.invalid/mcp", "some-server", NULL }, "give no SERVER with it" },
    { { "call", "--url", "https://example.invalid/mcp", NULL }, "mcp-pool call: give a tool" },
    { { "tools", "--url", "https://example.invalid/mcp", "--oauth", "{'s3cret'", NULL }, "--oauth is not JSON" },
    { { "tools", "--url", "https://example.invalid/mcp", "--oauth", "[\"s3cret\"]", NULL },
      "“--oauth” must be a JSON object" },
    { { "tools", "--url", "https://example.invalid/mcp", "--oauth",
        "{\"grant\": \"client_credentials\", \"clientId\": \"bot\"}", NULL },
      "“oauth.grant” \"client_credentials\" needs “oauth.clientSecret\" or \"oauth.privateKeyFile”" },
    { { "tools", "--url", "https://example.invalid/mcp", "--oauth", "{}", "--oauth-client-id", "bot", NULL },
      "--oauth holds the whole client" },
    { { "tools", "--oauth", "{}", NULL }, "are for a server given with --url URL" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto(RunResult) result = { 0 };

      run_argv (&result, NULL, cases[i].args);
      g_assert_cmpint (result.status, ==, 2);
      if (strstr (result.err, cases[i].message) == NULL)
        g_error ("%s: “%s” lacks “%s”", cases[i].args[0], result.err, cases[i].message);
      g_assert_null (strstr (result.err, "s3cret"));
      g_assert_cmpstr (result.out, ==, "");
    }
}

/* A valid --url reaches the pool, which names the server after the host;
 * nothing listens on port 9, so the start fails there, naming it, and the
 * header's secret is not in the error. */
static void
test_url_runs (void)
{
  const char * const tools_args[] = { "tools", "--url", "http://127.0.0.1:9/mcp", "--json", NULL };
  const char * const call_args[] = {
    "call", "--url", "https://localhost:9/mcp", "--header", "X-Key: s3cret", "echo", "message=x", NULL
  };
  g_auto(RunResult) tools = { 0 };
  g_auto(RunResult) call = { 0 };

  run_argv (&tools, NULL, tools_args);
  g_assert_cmpint (tools.status, ==, 1);
  g_assert_nonnull (strstr (tools.err, "Server “127.0.0.1”"));
  run_argv (&call, NULL, call_args);
  g_assert_cmpint (call.status, ==, 1);
  g_assert_nonnull (strstr (call.err, "Server “localhost”"));
  g_assert_null (strstr (call.err, "s3cret"));
  test_assert_no_children ();
}

static void
test_tools (void)
{
  g_autofree char *config = write_config ("fixture", "[\"--extra-tools\", \"2\"]");
  g_auto(RunResult) text = { 0 };
  g_auto(RunResult) json = { 0 };
  g_auto(RunResult) unknown = { 0 };
  g_autoptr(json_t) parsed = NULL;

  run (&text, "tools", "--config", config, NULL);
  g_assert_cmpint (text.status, ==, 0);
  g_assert_nonnull (strstr (text.out, "fixture ("));
  g_assert_nonnull (strstr (text.out, "echo"));
  g_assert_nonnull (strstr (text.out, "dummy_1"));

  run (&json, "tools", "--config", config, "--json", "fixture", NULL);
  g_assert_cmpint (json.status, ==, 0);
  parsed = json_loads (json.out, 0, NULL);
  g_assert_true (json_is_object (json_object_get (json_array_get (parsed, 0), "inputSchema")));

  run (&unknown, "tools", "--config", config, "nosuch", NULL);
  g_assert_cmpint (unknown.status, ==, 1);
  g_assert_nonnull (strstr (unknown.err, "nosuch"));
  g_assert_nonnull (strstr (unknown.err, "fixture"));
  g_unlink (config);
  test_assert_no_children ();
}

static void
test_doctor (void)
{
  g_autofree char *good = fixture_entry ("[]");
  g_autofree char *bad = fixture_entry ("[\"--fail-start\"]");
  g_autofree char *text = g_strdup_printf ("{\"mcpServers\": {\"good\": %s, \"bad\": %s}}", good, bad);
  g_autofree char *config = write_home_file ("doctor.json", text);
  g_auto(RunResult) result = { 0 };

  run (&result, "doctor", "--config", config, NULL);
  g_assert_cmpint (result.status, ==, 1);
  g_assert_nonnull (strstr (result.out, "[ ok ] bubblewrap sandbox"));
  g_assert_nonnull (strstr (result.out, "python3"));
  g_assert_nonnull (strstr (result.out, "[ ok ] server “good”"));
  g_assert_nonnull (strstr (result.out, "[FAIL] server “bad”"));
  g_assert_nonnull (strstr (result.out, "failing to start as asked"));
  g_unlink (config);
  test_assert_no_children ();
}

static void
test_evict (void)
{
  g_autofree char *config = write_config ("fixture", "[]");
  g_auto(RunResult) known = { 0 };
  g_auto(RunResult) unknown = { 0 };

  run (&known, "evict", "--config", config, "fixture", NULL);
  g_assert_cmpint (known.status, ==, 0);
  run (&unknown, "evict", "--config", config, "nosuch", NULL);
  g_assert_cmpint (unknown.status, ==, 1);
  g_assert_nonnull (strstr (unknown.err, "nosuch"));
  g_unlink (config);
}

/* Code from a file and from stdin, with the exit status of the code. */
static void
test_run (void)
{
  g_autofree char *config = write_config ("fixture", "[]");
  g_autofree char *script = write_home_file ("script.py",
                                             "print((await mcp_fixture.echo(message='from a file'))['content'][0]['text'])\n"
                                             "raise SystemExit(3)\n");
  g_auto(RunResult) from_file = { 0 };
  g_auto(RunResult) not_allowed = { 0 };

  run (&from_file, "run", "--config", config, "--servers", "fixture", script, NULL);
  if (from_file.status != 3 && strstr (from_file.err, "user namespaces") != NULL &&
      g_strcmp0 (g_getenv ("MCP_POOL_SANDBOX_MUST_WORK"), "1") != 0)
    {
      g_test_skip (from_file.err);
      return;
    }
  g_assert_cmpint (from_file.status, ==, 3);
  g_assert_cmpstr (from_file.out, ==, "Echo: from a file\n");

  /* Without --servers the code may not call the server. */
  run (&not_allowed, "run", "--config", config, script, NULL);
  g_assert_cmpint (not_allowed.status, ==, 1);
  g_assert_nonnull (strstr (not_allowed.err, "fixture"));
  g_unlink (config);
  test_assert_no_children ();
}

/* Code that holds more than a run's memory, in forked children that each
 * stay under the per-process limit, is stopped with a status of its own. */
static void
test_run_memory (void)
{
  g_autofree char *script = write_home_file ("hog.py",
                                             "import os, signal\n"
                                             "for _ in range(6):\n"
                                             "    if os.fork() == 0:\n"
                                             "        block = bytearray(200 << 20)\n"
                                             "        for i in range(0, len(block), 4096):\n"
                                             "            block[i] = 1\n"
                                             "        signal.pause()\n"
                                             "signal.pause()\n");
  g_autofree char *config = write_config ("fixture", "[]");
  g_auto(RunResult) result = { 0 };

  run (&result, "run", "--config", config, script, NULL);
  if (strstr (result.err, "user namespaces") != NULL &&
      g_strcmp0 (g_getenv ("MCP_POOL_SANDBOX_MUST_WORK"), "1") != 0)
    {
      g_test_skip (result.err);
      return;
    }
  g_assert_cmpint (result.status, ==, 137);
  g_assert_nonnull (strstr (result.err, "memory"));
  g_unlink (config);
  test_assert_no_children ();
}

/* The seed bridge's knobs: MCP_BRIDGE_CPUS is the run's affinity,
 * MCP_BRIDGE_PIDS its processes, MCP_BRIDGE_MEMORY its memory (300 MiB
 * touched under 200m: the run is stopped, which 512 MiB would not do). */
static void
test_run_bridge_knobs (void)
{
  g_autofree char *script = write_home_file ("knobs.py",
                                             "import os, time\n"
                                             "print('cpus', len(os.sched_getaffinity(0)))\n"
                                             "forked = 0\n"
                                             "try:\n"
                                             "    for _ in range(200):\n"
                                             "        if os.fork() == 0:\n"
                                             "            time.sleep(30)\n"
                                             "            os._exit(0)\n"
                                             "        forked += 1\n"
                                             "except OSError:\n"
                                             "    pass\n"
                                             "print('forks', 0 < forked < 100, flush=True)\n"
                                             "block = bytearray(300 << 20)\n"
                                             "for i in range(0, len(block), 4096):\n"
                                             "    block[i] = 1\n"
                                             "time.sleep(30)\n");
  g_autofree char *config = write_config ("fixture", "[]");
  const char * const environment[] = { "MCP_BRIDGE_CPUS=0.5", "MCP_BRIDGE_MEMORY=200m", "MCP_BRIDGE_PIDS=16", NULL };
  const char * const arguments[] = { "run", "--config", config, script, NULL };
  g_auto(RunResult) result = { 0 };

  run_argv (&result, environment, arguments);
  g_unlink (config);
  if (strstr (result.err, "user namespaces") != NULL &&
      g_strcmp0 (g_getenv ("MCP_POOL_SANDBOX_MUST_WORK"), "1") != 0)
    {
      g_test_skip (result.err);
      return;
    }
  /* 16 processes more than the user has; 128 without the knob. */
  g_assert_cmpstr (result.out, ==, "cpus 1\nforks True\n");
  g_assert_cmpint (result.status, ==, 137);
  test_assert_no_children ();
}

/* How many processes below @ancestor run mcp-pool itself (a keeper,
 * forked without exec, is named mcp-pool-keep and not counted). */
static guint
count_pool_descendants (GPid ancestor)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *entry;
  guint count = 0;

  while ((entry = g_dir_read_name (proc)) != NULL)
    {
      GPid pid = (GPid) g_ascii_strtoll (entry, NULL, 10);
      g_autofree char *comm_path = g_strdup_printf ("/proc/%d/comm", pid);
      g_autofree char *comm = NULL;
      GPid up = pid;

      if (pid <= 0 || !g_file_get_contents (comm_path, &comm, NULL, NULL) ||
          !g_str_equal (g_strchomp (comm), "mcp-pool"))
        continue;
      /* Walk up the parents: is @ancestor among them? */
      while (up > 1 && up != ancestor)
        {
          g_autofree char *stat_path = g_strdup_printf ("/proc/%d/stat", up);
          g_autofree char *stat = NULL;
          const char *after_name;

          if (!g_file_get_contents (stat_path, &stat, NULL, NULL) ||
              (after_name = strrchr (stat, ')')) == NULL)
            break;
          /* ") S PPID ..." */
          up = (GPid) g_ascii_strtoll (after_name + 4, NULL, 10);
        }
      if (up == ancestor && pid != ancestor)
        count++;
    }
  return count;
}

static char *
write_self_entries_config (void)
{
  g_autofree char *fixture = fixture_entry ("[]");
  g_autofree char *script_text = g_strdup_printf ("#!/bin/sh\nexec '%s' serve --expose proxy\n",
                                                  test_mcp_pool_path ());
  g_autofree char *script = write_home_file ("start-pool.sh", script_text);
  g_autofree char *text = NULL;

  g_assert_cmpint (g_chmod (script, 0755), ==, 0);
  text = g_strdup_printf ("{\"mcpServers\": {\"fixture\": %s,"
                          " \"env-self\": {\"command\": \"env\", \"args\": [\"MCP_POOL_EXPOSE=proxy\", \"%s\", \"serve\"]},"
                          " \"sh-self\": {\"command\": \"sh\", \"args\": [\"-c\", \"exec %s serve --expose proxy\"]},"
                          " \"script-self\": {\"command\": \"%s\"}}}",
                          fixture, test_mcp_pool_path (), test_mcp_pool_path (), script);
  return write_home_file (".claude.json", text);
}

/* Entries that launch mcp-pool, wrapped in env, sh -c or a script: one
 * tools/list in proxy mode starts a bounded number of mcp-pool processes
 * (one nested serve for the script, which no static check sees through,
 * and which starts nothing), and servers and doctor say what was skipped. */
static void
test_self_entries (void)
{
  g_autofree char *config = write_self_entries_config ();
  const char * const serve_argv[] = { test_mcp_pool_path (), "serve", "--expose", "proxy", NULL };
  const char * const nested_env[] = { "MCP_POOL_PARENT=4242", "MCP_POOL_PARENT_SERVER=outer", NULL };
  g_autoptr(GSubprocessLauncher) launcher = scratch_launcher (G_SUBPROCESS_FLAGS_NONE, NULL);
  g_autoptr(TestClient) client = NULL;
  g_autoptr(json_t) listed = NULL;
  g_auto(RunResult) servers = { 0 };
  g_auto(RunResult) doctor = { 0 };
  g_auto(RunResult) nested = { 0 };
  json_t *tool;
  size_t index;
  GPid pool_pid;

  client = test_client_new (launcher, serve_argv);
  pool_pid = atoi (g_subprocess_get_identifier (client->process));
  json_decref (test_client_result (client, "initialize",
                                   json_pack ("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", "2025-06-18",
                                              "capabilities", "clientInfo", "name", "test", "version", "1")));
  test_client_notify (client, "notifications/initialized", NULL);
  listed = test_client_result (client, "tools/list", NULL);
  g_assert_nonnull (test_find_tool (json_object_get (listed, "tools"), "fixture__echo"));
  json_array_foreach (json_object_get (listed, "tools"), index, tool)
    g_assert_false (g_str_has_prefix (mcp_json_get_string (tool, "name"), "script-self__"));
  /* Every server has started by now: only the script's nested serve runs. */
  g_assert_cmpuint (count_pool_descendants (pool_pid), ==, 1);
  test_client_close_input (client);
  test_client_wait_exit (client);

  run (&servers, "servers", NULL);
  g_assert_cmpint (servers.status, ==, 0);
  g_assert_nonnull (strstr (servers.out, "launches mcp-pool itself"));
  g_assert_nonnull (strstr (servers.out, "env-self"));
  g_assert_nonnull (strstr (servers.out, "sh-self"));

  run (&doctor, "doctor", NULL);
  g_assert_nonnull (strstr (doctor.out, "[skip] env-self: launches mcp-pool itself"));
  g_assert_nonnull (strstr (doctor.out, "[skip] sh-self: launches mcp-pool itself"));
  g_assert_nonnull (strstr (doctor.out, "[ ok ] server “script-self”"));

  /* What the nested one says, as servers shows it. */
  run_argv (&nested, nested_env, (const char * const []) { "servers", NULL });
  g_assert_cmpint (nested.status, ==, 0);
  g_assert_nonnull (strstr (nested.out, "fixture"));
  g_assert_nonnull (strstr (nested.out, "MCP_POOL_PARENT"));
  g_assert_nonnull (strstr (nested.out, "4242"));
  g_unlink (config);
  test_assert_no_children ();
}

/* A server sees the allow-list, its entry's env and the names passed on
 * for it or for all, and nothing else of mcp-pool's environment. */
static void
test_server_environment (void)
{
  g_autofree char *dump = g_build_filename (scratch_home, "server-env.txt", NULL);
  g_autofree char *text = g_strdup_printf (
    "{\"mcpServers\": {\"envdump\": {\"command\": \"sh\", \"args\": [\"-c\", \"env > %s; exec %s\"],"
    " \"env\": {\"FROM_ENTRY\": \"entry-value\"}, \"envPassthrough\": [\"PER_SERVER_VAR\", \"PREFIXED_*\"]}}}",
    dump, test_fixture_path ());
  g_autofree char *config = write_home_file ("env.json", text);
  const char * const environment[] = {
    "MCP_POOL_TEST_SECRET=secret-99", "PER_SERVER_VAR=per-server-value", "PREFIXED_ONE=prefixed-value",
    "GLOBAL_VAR=global-value", "MCP_POOL_ENV_PASSTHROUGH=GLOBAL_VAR, OTHER", "LC_TIME=C.UTF-8",
    "FROM_ENTRY=overridden", NULL
  };
  g_auto(RunResult) result = { 0 };
  g_autofree char *contents = NULL;
  g_autofree char *seen = NULL;

  run_argv (&result, environment, (const char * const []) {
    "call", "--config", config, "envdump", "echo", "message=x", NULL });
  g_assert_cmpstr (result.err, ==, "");
  g_assert_cmpint (result.status, ==, 0);
  g_assert_true (g_file_get_contents (dump, &contents, NULL, NULL));
  /* Every line starts after a newline. */
  seen = g_strconcat ("\n", contents, NULL);

  g_assert_null (strstr (seen, "secret-99"));
  g_assert_null (strstr (seen, "MCP_POOL_TEST_SECRET"));
  g_assert_null (strstr (seen, "overridden"));
  g_assert_nonnull (strstr (seen, "\nFROM_ENTRY=entry-value\n"));
  g_assert_nonnull (strstr (seen, "\nPER_SERVER_VAR=per-server-value\n"));
  g_assert_nonnull (strstr (seen, "\nPREFIXED_ONE=prefixed-value\n"));
  g_assert_nonnull (strstr (seen, "\nGLOBAL_VAR=global-value\n"));
  g_assert_nonnull (strstr (seen, "\nLC_TIME=C.UTF-8\n"));
  g_assert_nonnull (strstr (seen, "\nHOME="));
  g_assert_nonnull (strstr (seen, "\nPATH="));
  g_assert_nonnull (strstr (seen, "\nMCP_POOL_PARENT="));
  g_assert_nonnull (strstr (seen, "\nMCP_POOL_PARENT_SERVER=envdump\n"));
  g_unlink (dump);
  g_unlink (config);
  test_assert_no_children ();
}

/* An unset ${VAR} and a VS Code ${input:…} are reported, naming the
 * file, the server and the variable: in servers, doctor and serve's log. */
static void
test_unset_variables (void)
{
  g_autofree char *text = g_strdup_printf (
    "{\"mcpServers\": {\"needs-token\": {\"command\": \"%s\", \"args\": [\"--tag=${MCP_POOL_TEST_UNSET}\"],"
    " \"env\": {\"API_KEY\": \"${input:api-key}\", \"MODE\": \"${MCP_POOL_TEST_UNSET_TOO:-fast}\"}}}}",
    test_fixture_path ());
  g_autofree char *config = write_home_file ("vars.json", text);
  g_auto(RunResult) servers = { 0 };
  g_auto(RunResult) doctor = { 0 };
  g_auto(RunResult) serve = { 0 };
  const char *outputs[3];

  run (&servers, "servers", "--config", config, NULL);
  g_assert_cmpint (servers.status, ==, 0);
  run (&doctor, "doctor", "--config", config, NULL);
  run (&serve, "serve", "--config", config, NULL);
  g_assert_cmpint (serve.status, ==, 0);
  outputs[0] = servers.out;
  outputs[1] = doctor.out;
  outputs[2] = serve.err;
  for (gsize i = 0; i < G_N_ELEMENTS (outputs); i++)
    {
      g_assert_nonnull (strstr (outputs[i], "${MCP_POOL_TEST_UNSET}"));
      g_assert_nonnull (strstr (outputs[i], "${input:api-key}"));
      g_assert_nonnull (strstr (outputs[i], config));
      g_assert_nonnull (strstr (outputs[i], "needs-token"));
      g_assert_null (strstr (outputs[i], "MCP_POOL_TEST_UNSET_TOO"));
    }
  g_unlink (config);
  test_assert_no_children ();
}

/* Runs a one-shot command against a server that ends neither on stdin EOF
 * nor on SIGTERM, with the command's stdout appended to the file where the
 * server notes those events: the file shows what came first.  Returns the
 * file's text once the command has exited. */
static char *
run_noted (const char *first_arg,
           ...)
{
  g_autofree char *notes = g_build_filename (scratch_home, "notes.txt", NULL);
  g_autofree char *flags = g_strdup_printf ("[\"--ignore-eof\", \"--ignore-sigterm\", \"--note-file\", \"%s\"]",
                                            notes);
  g_autofree char *config = write_config ("stubborn", flags);
  g_autoptr(GPtrArray) argv = g_ptr_array_new ();
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GError) error = NULL;
  gint64 start = g_get_monotonic_time ();
  char *text = NULL;
  const char *arg;
  va_list args;
  int fd;

  g_ptr_array_add (argv, (gpointer) test_mcp_pool_path ());
  va_start (args, first_arg);
  for (arg = first_arg; arg != NULL; arg = va_arg (args, const char *))
    g_ptr_array_add (argv, g_str_equal (arg, "CONFIG") ? config : (gpointer) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);

  g_unlink (notes);
  fd = open (notes, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  g_assert_cmpint (fd, >=, 0);
  g_subprocess_launcher_take_stdout_fd (launcher, fd);
  g_subprocess_launcher_setenv (launcher, "HOME", scratch_home, TRUE);
  g_subprocess_launcher_unsetenv (launcher, "MCP_POOL_CONFIG");
  g_subprocess_launcher_set_cwd (launcher, scratch_home);
  process = g_subprocess_launcher_spawnv (launcher, (const char * const *) argv->pdata, &error);
  g_assert_no_error (error);
  g_assert_true (test_subprocess_wait (process, 20 * 1000));
  g_test_message ("%s took %.1f s with a server that needs SIGKILL", first_arg,
                  (g_get_monotonic_time () - start) / (double) G_USEC_PER_SEC);
  g_assert_cmpint (g_subprocess_get_exit_status (process), ==, 0);

  g_assert_true (g_file_get_contents (notes, &text, NULL, NULL));
  g_unlink (notes);
  g_unlink (config);
  test_assert_no_children ();
  return text;
}

/* A one-shot command prints and flushes what it has to say before it ends
 * its servers, and then ends them as a pool does: stdin closed, SIGTERM,
 * SIGKILL.  The output comes before the server hears of the end. */
static void
test_output_before_shutdown (void)
{
  g_autofree char *called = run_noted ("call", "--config", "CONFIG", "stubborn", "echo", "message=answer", NULL);
  g_autofree char *listed = run_noted ("tools", "--config", "CONFIG", "stubborn", NULL);

  g_assert_cmpstr (called, ==, "call echo\nEcho: answer\neof\nsigterm\n");
  g_assert_true (g_str_has_prefix (listed, "stubborn ("));
  g_assert_true (g_str_has_suffix (listed, "\neof\nsigterm\n"));
  g_assert_null (strstr (listed, "eof\nsigterm\n  "));
}

/* serve's options are read before anything starts: each mistake exits 2
 * and says which option, and the range where there is one. */
static void
test_serve_options (void)
{
  static const struct {
    const char *environment[2];
    const char *arguments[6];
    const char *message;
  } cases[] = {
    { { NULL }, { "serve", "extra", NULL }, "unexpected argument “extra”" },
    { { NULL }, { "serve", "--expose", "nonsense", NULL }, "nonsense" },
    { { "MCP_POOL_EXPOSE=nonsense", NULL }, { "serve", NULL }, "nonsense" },
    { { NULL }, { "serve", "--max-message-bytes", "10", NULL }, "--max-message-bytes must be from 1024 to 1073741824" },
    { { "MCP_POOL_MAX_MESSAGE_BYTES=10", NULL }, { "serve", NULL }, "--max-message-bytes must be from 1024" },
    { { NULL }, { "serve", "--max-pending", "-1", NULL }, "--max-pending must be from 1 to" },
    { { "MCP_POOL_MAX_PENDING=0", NULL }, { "serve", NULL }, "--max-pending must be from 1 to" },
    { { NULL }, { "serve", "--shared", "--config", "/nonexistent.json", NULL }, "--config does not go with --shared" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_auto(RunResult) result = { 0 };

      run_argv (&result, cases[i].environment, cases[i].arguments);
      g_assert_cmpint (result.status, ==, 2);
      g_assert_cmpstr (result.out, ==, "");
      if (strstr (result.err, cases[i].message) == NULL)
        g_error ("“%s” is not in serve's stderr “%s”", cases[i].message, result.err);
    }
  test_assert_no_children ();
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  /* Orphans of mcp-pool come to this process, so a leak shows as a child. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  g_test_add_func ("/cli/version", test_version);
  g_test_add_func ("/cli/help", test_help);
  g_test_add_func ("/cli/demo", test_demo);
  g_test_add_func ("/cli/call", test_call);
  g_test_add_func ("/cli/call-errors", test_call_errors);
  g_test_add_func ("/cli/call/elicitation", test_call_elicitation);
  g_test_add_func ("/cli/call/elicitation-terminal", test_call_elicitation_terminal);
  g_test_add_func ("/cli/children-die-with-pool", test_children_die_with_pool);
  g_test_add_func ("/cli/servers", test_servers);
  g_test_add_func ("/cli/servers/remote", test_servers_remote);
  g_test_add_func ("/cli/url/errors", test_url_errors);
  g_test_add_func ("/cli/url/runs", test_url_runs);
  g_test_add_func ("/cli/tools", test_tools);
  g_test_add_func ("/cli/serve-options", test_serve_options);
  g_test_add_func ("/cli/doctor", test_doctor);
  g_test_add_func ("/cli/evict", test_evict);
  g_test_add_func ("/cli/run", test_run);
  g_test_add_func ("/cli/run/memory", test_run_memory);
  g_test_add_func ("/cli/run/bridge-knobs", test_run_bridge_knobs);
  g_test_add_func ("/cli/self-entries", test_self_entries);
  g_test_add_func ("/cli/server-environment", test_server_environment);
  g_test_add_func ("/cli/unset-variables", test_unset_variables);
  g_test_add_func ("/cli/output-before-shutdown", test_output_before_shutdown);

  scratch_home = g_dir_make_tmp ("mcp-pool-home-XXXXXX", NULL);
  status = g_test_run ();
  {
    g_autofree char *command = g_strdup_printf ("rm -rf '%s'", scratch_home);
    g_spawn_command_line_sync (command, NULL, NULL, NULL, NULL);
  }
  return status;
}
