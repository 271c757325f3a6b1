/* test-sandbox.c — code execution mode: run_python in a real bubblewrap
 * sandbox, calling fixture servers through the pool.  Every test checks
 * that no process is left; where bwrap cannot create namespaces the tests
 * skip with the reason, unless MCP_POOL_SANDBOX_MUST_WORK=1 (CI). */
#include "config.h"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "sandbox/mcp-code.h"
#include "sandbox/mcp-run-format.h"
#include "common/mcp-jsonrpc.h"
#include "sandbox/mcp-memory-watch.h"
#include "common/mcp-spawner.h"
#include "test-files.h"
#include "test-io-thread.h"
#include "test-procs.h"
#include "test-wait.h"

typedef struct {
  TestIoThread *io;
  McpPool      *pool;
  McpCode      *code;
  char         *state_dir;    /* the runs' persistent folder, removed after */
  const char   *client;       /* "session" fixtures: the client whose session runs use */
  guint         fds_before;
} Fixture;

/* Fixture data: a warm sandbox kept, or one session for the runs. */
#define WARM    "warm"
#define SESSION "session"

static gboolean sandbox_works;
static char *sandbox_problem;

static void
setup (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func ((GDestroyNotify) mcp_server_config_unref);
  McpCodeOptions options = { .keep_warm = g_strcmp0 (data, WARM) == 0,
                             .sessions = g_strcmp0 (data, SESSION) == 0 };
  McpServerConfig *secretive = test_fixture_config ("secretive", NULL);

  fixture->fds_before = test_count_open_fds ();
  fixture->state_dir = g_dir_make_tmp ("mcp-pool-state-XXXXXX", NULL);
  fixture->client = options.sessions ? "test-client" : NULL;
  options.state_dir = fixture->state_dir;
  fixture->io = test_io_thread_new ();
  fixture->pool = mcp_pool_new (test_io_thread_get_context (fixture->io), NULL, NULL);
  g_ptr_array_add (configs, test_fixture_config ("fx", NULL));
  g_ptr_array_add (configs, test_fixture_config ("other", NULL));
  g_strfreev (secretive->env);
  secretive->env = g_strsplit ("API_KEY=server-secret-42", "\n", -1);
  g_ptr_array_add (configs, secretive);
  mcp_pool_set_servers (fixture->pool, configs);
  fixture->code = mcp_code_new (fixture->pool, test_io_thread_get_context (fixture->io), &options);
}

static void
teardown (Fixture *fixture, gconstpointer data)
{
  g_clear_pointer (&fixture->code, mcp_code_free);
  mcp_pool_shutdown (fixture->pool, 200 * 1000, 200 * 1000);
  g_clear_pointer (&fixture->pool, mcp_pool_free);
  test_assert_no_children ();
  g_clear_pointer (&fixture->io, test_io_thread_free);
  test_remove_tree (fixture->state_dir);
  g_clear_pointer (&fixture->state_dir, g_free);
  test_assert_open_fds (fixture->fds_before);
}

static gboolean
require_sandbox (void)
{
  /* The runs are bounded in wall-clock time (the endless loop, the fork
   * bomb, 16 GiB), which valgrind's slowness of the host side breaks. */
  if (test_under_valgrind ())
    {
      g_test_skip ("The sandbox's wall-clock limits do not hold under valgrind");
      return FALSE;
    }
  if (sandbox_works)
    return TRUE;
  if (g_strcmp0 (g_getenv ("MCP_POOL_SANDBOX_MUST_WORK"), "1") == 0)
    g_error ("The sandbox does not work here: %s", sandbox_problem);
  g_test_skip (sandbox_problem);
  return FALSE;
}

/* Runs @source with the given servers (comma-separated) and timeout
 * (0: the default); the run's record (sandbox/mcp-run-format.h). */
static json_t *
run (Fixture *fixture, const char *source, const char *servers, double timeout_s)
{
  g_auto(GStrv) names = g_strsplit (servers ? servers : "", ",", -1);
  g_autoptr(json_t) arguments = json_pack ("{s:s, s:[]}", "code", source, "servers");

  for (char **name = names; *name != NULL; name++)
    if ((*name)[0] != '\0')
      json_array_append_new (json_object_get (arguments, "servers"), json_string (*name));
  /* Scaled like every bound of the tests: a run that must end by itself
   * does not meet its timeout on a slow host. */
  if (timeout_s > 0)
    json_object_set_new (arguments, "timeout", json_real (timeout_s * test_timeout_ms (1000) / 1000.0));
  return mcp_code_run (fixture->code, arguments, &(McpCallOptions) { .client = fixture->client });
}

/* What the tests read of a run: its record as it is. */
static json_t *
structured (json_t *result)
{
  return result;
}

static gboolean
failed (json_t *result)
{
  return g_strcmp0 (mcp_json_get_string (result, "status"), "success") != 0;
}

static const char *
stdout_of (json_t *result)
{
  return mcp_json_get_string (structured (result), "stdout");
}

static void
assert_success (json_t *result)
{
  if (failed (result))
    {
      g_autofree char *text = json_dumps (result, JSON_COMPACT);

      g_error ("The run failed: %s", text);
    }
}

/* Runs @source, asserts that it succeeded and returns its stdout, which
 * the test log shows. */
static char *
run_ok (Fixture *fixture, const char *source, const char *servers, double timeout_s)
{
  g_autoptr(json_t) result = run (fixture, source, servers, timeout_s);

  assert_success (result);
  g_test_message ("%s", stdout_of (result));
  return g_strdup (stdout_of (result));
}

/* The number that follows @label in @out, which must hold it. */
static gint64
count_after (const char *out, const char *label)
{
  const char *found = strstr (out, label);

  if (found == NULL)
    g_error ("No \"%s\" in the output: %s", label, out);
  return g_ascii_strtoll (found + strlen (label), NULL, 10);
}

/* After each attack: the pool still answers, through a sandbox too. */
static void
assert_pool_serves (Fixture *fixture)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) arguments = json_pack ("{s:s}", "message", "still here");
  g_autoptr(json_t) direct = mcp_pool_call_tool (fixture->pool, "fx", "echo", arguments, NULL, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (mcp_json_get_string (json_array_get (json_object_get (direct, "content"), 0), "text"),
                   ==, "Echo: still here");
}

/* Nothing of the host, the pool or the servers is visible inside. */
static void
test_isolation (Fixture *fixture, gconstpointer data)
{
  g_autofree char *host_dir = NULL;
  g_autofree char *host_file = NULL;
  g_autofree char *canary = NULL;
  g_autofree char *source = NULL;
  g_autoptr(json_t) result = NULL;
  g_autoptr(GSocket) listener = NULL;
  g_autoptr(GSocketAddress) loopback = NULL;
  g_autoptr(GSocketAddress) bound = NULL;
  guint port;
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  /* A folder of this run's own: test-sandbox-as-user.sh may run beside. */
  host_dir = g_dir_make_tmp ("mcp-pool-host-XXXXXX", NULL);
  host_file = g_build_filename (host_dir, "mcp-pool-host-file", NULL);
  g_assert_true (g_file_set_contents (host_file, "host secret", -1, NULL));
  canary = g_build_filename (g_get_home_dir (), ".mcp-pool-test-canary", NULL);
  g_assert_true (g_file_set_contents (canary, "canary", -1, NULL));
  listener = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  loopback = g_inet_socket_address_new_from_string ("127.0.0.1", 0);
  g_assert_true (g_socket_bind (listener, loopback, TRUE, NULL) && g_socket_listen (listener, NULL));
  g_socket_set_blocking (listener, FALSE);
  bound = g_socket_get_local_address (listener, NULL);
  port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));

  source = g_strdup_printf (
    "import glob, os, socket\n"
    "print('uid', os.getuid(), os.getgid())\n"
    "print('env', sorted(os.environ))\n"
    "print('values', ' '.join(os.environ.values()))\n"
    "for path in glob.glob('/proc/*/environ'):\n"
    "    try:\n"
    "        print('environ', open(path, 'rb').read().replace(b'\\0', b' ').decode())\n"
    "    except OSError:\n"
    "        pass\n"
    "for path in ['%s', '%s', '/etc/passwd', '/root', '/home']:\n"
    "    print(path, os.path.exists(path))\n"
    "for path in ['/usr/x', '/etc/x', '/x', '%s/x']:\n"
    "    try:\n"
    "        open(path, 'w').write('x')\n"
    "        print('wrote', path)\n"
    "    except OSError as e:\n"
    "        print('write refused', e.errno)\n"
    "print('pids', len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
    "for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK):\n"
    "    try:\n"
    "        s = socket.socket(family)\n"
    "        s.connect(('127.0.0.1', %u))\n"
    "        print('socket opened', family)\n"
    "    except OSError as e:\n"
    "        print('socket refused', e.errno)\n"
    "open('/work/scratch', 'w').write('ok')\n"
    "print('scratch', open('/work/scratch').read())\n"
    "open('/workspace/seed', 'w').write('written')\n"
    "print('workspace', open('/work/seed').read())\n",
    host_file, canary, g_get_home_dir (), port);

  out = run_ok (fixture, source, "secretive", 0);
  g_assert_null (strstr (out, "wrote"));
  g_assert_null (strstr (out, "canary True"));
  /* Nothing reached the test's port. */
  g_assert_null (g_socket_accept (listener, NULL, NULL));
  g_assert_nonnull (strstr (out, "uid 65534 65534"));
  g_assert_null (strstr (out, "pool-secret-17"));
  g_assert_null (strstr (out, "server-secret-42"));
  g_assert_null (strstr (out, "MCP_POOL_TEST_SECRET"));
  g_assert_nonnull (strstr (out, " False"));
  g_assert_null (strstr (out, " True"));
  g_assert_null (strstr (out, "socket opened"));
  /* The seed bridge's folder is the scratch folder too. */
  g_assert_nonnull (strstr (out, "workspace written"));
  g_assert_nonnull (strstr (out, "scratch ok"));
  /* The sandbox's own init and python, nothing of the host. */
  g_assert_nonnull (strstr (out, "pids 2"));
  g_unlink (host_file);
  g_rmdir (host_dir);
  g_unlink (canary);
  assert_pool_serves (fixture);
}

/* Runs @source as @client (NULL: a run of its own) with @fresh; the record. */
static json_t *
run_as (Fixture    *fixture,
        const char *client,
        const char *source,
        gboolean    fresh)
{
  g_autoptr(json_t) arguments = json_pack ("{s:s, s:b}", "code", source, "fresh", fresh);

  return mcp_code_run (fixture->code, arguments, &(McpCallOptions) { .client = client });
}

static void
assert_prints (json_t *result, const char *expected)
{
  assert_success (result);
  g_assert_cmpstr (stdout_of (result), ==, expected);
}

static void
assert_name_error (json_t *result)
{
  g_assert_cmpstr (mcp_json_get_string (result, "status"), ==, "error");
  g_assert_nonnull (strstr (mcp_json_get_string (result, "stderr"), "NameError"));
}

static gboolean
no_sessions (gpointer data)
{
  return mcp_code_count_sessions (data) == 0;
}

/* A client's runs share its session; a fresh run, another client and a
 * client whose session was ended see none of it. */
static void
test_session_state (Fixture *fixture, gconstpointer data)
{
  json_t *result;

  if (!require_sandbox ())
    return;
  assert_prints ((result = run_as (fixture, "one", "import statistics\nx = 42\nprint('set')", FALSE)), "set\n");
  json_decref (result);
  assert_prints ((result = run_as (fixture, "one", "print(x, statistics.mean([1, 3]))", FALSE)), "42 2\n");
  json_decref (result);
  assert_name_error ((result = run_as (fixture, "one", "print(x)", TRUE)));
  json_decref (result);
  assert_name_error ((result = run_as (fixture, "two", "print(x)", FALSE)));
  json_decref (result);
  assert_name_error ((result = run_as (fixture, NULL, "print(x)", FALSE)));
  json_decref (result);
  g_assert_cmpuint (mcp_code_count_sessions (fixture->code), ==, 2);
  /* An exception leaves the session as it was. */
  result = run_as (fixture, "one", "x += 1\nraise ValueError('kept')", FALSE);
  g_assert_cmpstr (mcp_json_get_string (result, "status"), ==, "error");
  g_assert_null (json_object_get (result, "session_ended"));
  json_decref (result);
  assert_prints ((result = run_as (fixture, "one", "print(x)", FALSE)), "43\n");
  json_decref (result);

  mcp_code_end_session (fixture->code, "one");
  assert_name_error ((result = run_as (fixture, "one", "print(x)", FALSE)));
  json_decref (result);
  mcp_code_end_session (fixture->code, "one");
  mcp_code_end_session (fixture->code, "two");
  g_assert_true (test_wait_for (no_sessions, fixture->code, 10000));
  assert_pool_serves (fixture);
}

/* A timeout ends the session and says so; the next run has a new one. */
static void
test_session_timeout (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) set = NULL;
  g_autoptr(json_t) spin = NULL;
  g_autoptr(json_t) after = NULL;
  g_autoptr(json_t) spin_arguments = json_pack ("{s:s, s:i}", "code", "while True:\n    pass\n", "timeout", 1);
  g_autoptr(json_t) shown = NULL;
  const McpCallOptions as_one = { .client = "one" };

  if (!require_sandbox ())
    return;
  assert_prints ((set = run_as (fixture, "one", "x = 1\nprint(x)", FALSE)), "1\n");
  spin = mcp_code_run (fixture->code, spin_arguments, &as_one);
  g_assert_cmpstr (mcp_json_get_string (spin, "status"), ==, "timeout");
  g_assert_true (json_is_true (json_object_get (spin, "session_ended")));
  shown = mcp_run_format_result (spin, MCP_RUN_FORMAT_COMPACT);
  g_assert_nonnull (strstr (json_string_value (json_object_get (json_array_get (json_object_get (shown, "content"), 0), "text")),
                            "Execution timed out after 1s; the Python session ended with it"));
  assert_name_error ((after = run_as (fixture, "one", "print(x)", FALSE)));
  assert_pool_serves (fixture);
}

/* Whether a child of this process named @data has exited and waits to be
 * reaped. */
static gboolean
child_exited (gpointer data)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  g_autofree char *wanted = g_strdup_printf ("(%s) Z %d ", (const char *) data, (int) getpid ());
  const char *name;

  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *path = g_build_filename ("/proc", name, "stat", NULL);
      g_autofree char *stat = NULL;

      if (g_ascii_isdigit (name[0]) && g_file_get_contents (path, &stat, NULL, NULL) &&
          strstr (stat, wanted) != NULL)
        return TRUE;
    }
  return FALSE;
}

/* A session whose interpreter is gone between runs is replaced, and
 * the run says so. */
static void
test_session_restarted (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) set = NULL;
  g_autoptr(json_t) killed = NULL;
  g_autoptr(json_t) after = NULL;

  if (!require_sandbox ())
    return;
  assert_prints ((set = run_as (fixture, "one", "x = 1\nprint(x)", FALSE)), "1\n");
  /* Exits after its run said it was done. */
  killed = run_as (fixture, "one",
                   "import os, threading, time\n"
                   "threading.Thread(target=lambda: (time.sleep(0.2), os._exit(9))).start()\n"
                   "print('later')\n", FALSE);
  assert_prints (killed, "later\n");
  g_assert_true (test_wait_for (child_exited, "bwrap", 10000));
  after = run_as (fixture, "one", "print('new')", FALSE);
  assert_prints (after, "new\n");
  g_assert_nonnull (strstr (mcp_json_get_string (after, "stderr"), "the Python session had ended"));
}

/* An McpCode of its own, with @options, for the tests that need options
 * the fixture does not give: its pool, context and state dir. */
typedef struct {
  TestIoThread *io;
  McpPool      *pool;
  McpCode      *code;
  char         *state;
} OwnCode;

static void
own_code_start (OwnCode        *own,
                McpCodeOptions *options)
{
  own->state = g_dir_make_tmp ("mcp-pool-state-XXXXXX", NULL);
  options->state_dir = own->state;
  own->io = test_io_thread_new ();
  own->pool = mcp_pool_new (test_io_thread_get_context (own->io), NULL, NULL);
  own->code = mcp_code_new (own->pool, test_io_thread_get_context (own->io), options);
}

/* Ends it all and checks that nothing is left. */
static void
own_code_stop (OwnCode *own)
{
  mcp_code_free (own->code);
  mcp_pool_shutdown (own->pool, 200 * 1000, 200 * 1000);
  mcp_pool_free (own->pool);
  test_io_thread_free (own->io);
  test_assert_no_children ();
  test_remove_tree (own->state);
  g_free (own->state);
}

static json_t *
own_code_run (OwnCode    *own,
              const char *client,
              const char *source)
{
  g_autoptr(json_t) arguments = json_pack ("{s:s}", "code", source);

  return mcp_code_run (own->code, arguments, &(McpCallOptions) { .client = client });
}

/* Past the most sessions at once, a client's call runs fresh, and says so. */
static void
test_sessions_full (void)
{
  McpCodeOptions options = { .sessions = TRUE, .sessions_max = 1 };
  g_autoptr(json_t) first = NULL;
  g_autoptr(json_t) second = NULL;
  OwnCode own;

  if (!require_sandbox ())
    return;
  own_code_start (&own, &options);
  first = own_code_run (&own, "one", "x = 1\nprint(x)");
  second = own_code_run (&own, "two", "x = 1\nprint(x)");
  assert_prints (first, "1\n");
  g_assert_cmpstr (mcp_json_get_string (first, "stderr"), ==, "");
  assert_prints (second, "1\n");
  g_assert_nonnull (strstr (mcp_json_get_string (second, "stderr"), "ran in a fresh sandbox"));
  g_assert_cmpuint (mcp_code_count_sessions (own.code), ==, 1);
  own_code_stop (&own);
}

/* The session ends after its idle time. */
static void
test_session_idle (void)
{
  McpCodeOptions options = { .sessions = TRUE, .session_idle_s = 1 };
  g_autoptr(json_t) result = NULL;
  OwnCode own;

  if (!require_sandbox ())
    return;
  own_code_start (&own, &options);
  result = own_code_run (&own, "idle", "print(1)");
  assert_prints (result, "1\n");
  g_assert_cmpuint (mcp_code_count_sessions (own.code), ==, 1);
  g_assert_true (test_wait_for (no_sessions, own.code, 20000));
  own_code_stop (&own);
}

/* The state dir is the runs' one persistent folder: what one run saves
 * (memory, tools) the next, in a sandbox of its own, finds. */
static void
test_state_dir (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) saved = NULL;
  g_autoptr(json_t) loaded = NULL;
  g_autofree char *memory = g_build_filename (fixture->state_dir, "memory", "plan.json", NULL);
  g_autofree char *tools = g_build_filename (fixture->state_dir, "user_tools.py", NULL);

  if (!require_sandbox ())
    return;
  saved = run_as (fixture, NULL,
                  "def twice(n):\n    return 2 * n\n"
                  "print(save_memory('plan', {'steps': [1, 2]}))\n"
                  "print(save_tool(twice).split(';')[0])\n", TRUE);
  assert_prints (saved, "Memory 'plan' saved.\nTool 'twice' saved to /projects/user_tools.py\n");
  g_assert_true (g_file_test (memory, G_FILE_TEST_IS_REGULAR));
  g_assert_true (g_file_test (tools, G_FILE_TEST_IS_REGULAR));
  loaded = run_as (fixture, NULL, "print(load_memory('plan')['steps'], twice(21), list_memories()[0]['key'])", TRUE);
  assert_prints (loaded, "[1, 2] 42 plan\n");
  assert_pool_serves (fixture);
}

/* The seccomp filter: no new namespaces, no mounts, no ptrace. */
static void
test_seccomp (Fixture *fixture, gconstpointer data)
{
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "import ctypes, os\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "for name, call in [('unshare', lambda: libc.unshare(0x10000000)),\n"
                "                   ('mount', lambda: libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)),\n"
                "                   ('ptrace', lambda: libc.ptrace(16, 1, None, None))]:\n"
                "    print(name, call(), ctypes.get_errno())\n", NULL, 0);
  g_assert_nonnull (strstr (out, "unshare -1 1"));
  g_assert_nonnull (strstr (out, "mount -1 1"));
  g_assert_nonnull (strstr (out, "ptrace -1 1"));
  assert_pool_serves (fixture);
}

static void
test_timeout (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;

  if (!require_sandbox ())
    return;
  /* What the code printed before the kill is kept.  The timeout leaves
   * room for the print on a host whose cores are all busy (2 s did not
   * always, beside a soak and a parallel make check). */
  result = run (fixture, "print('spinning', flush=True)\nwhile True:\n    pass\n", NULL,
                test_timeout_ms (5000) / 1000.0);
  g_assert_cmpstr (mcp_json_get_string (structured (result), "status"), ==, "timeout");
  g_assert_cmpint (json_integer_value (json_object_get (structured (result), "exit_code")), ==, -1);
  g_assert_true (failed (result));
  g_assert_nonnull (strstr (stdout_of (result), "spinning"));
  assert_pool_serves (fixture);
}

static void
test_output_cap (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;

  if (!require_sandbox ())
    return;
  result = run (fixture, "import sys\nfor i in range(50):\n    sys.stdout.write('x' * 1000000)\n", NULL, 0);
  assert_success (result);
  g_assert_cmpuint (strlen (stdout_of (result)), <, 1024 * 1024 + 200);
  g_assert_nonnull (strstr (stdout_of (result), "more bytes were cut"));
  assert_pool_serves (fixture);
}

static void
test_limits (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) memory = NULL;
  g_autoptr(json_t) failing = NULL;

  if (!require_sandbox ())
    return;
  memory = run (fixture, "block = bytearray(16 * 1024 * 1024 * 1024)\nprint('allocated')\n", NULL, 0);
  g_assert_cmpstr (mcp_json_get_string (structured (memory), "status"), ==, "error");
  g_assert_nonnull (strstr (mcp_json_get_string (structured (memory), "stderr"), "MemoryError"));

  failing = run (fixture, "def f():\n    raise ValueError('bad value')\nf()\n", NULL, 0);
  g_assert_cmpstr (mcp_json_get_string (structured (failing), "status"), ==, "error");
  g_assert_cmpint (json_integer_value (json_object_get (structured (failing), "exit_code")), ==, 1);
  g_assert_nonnull (strstr (mcp_json_get_string (structured (failing), "stderr"), "ValueError: bad value"));
  assert_pool_serves (fixture);
}

/* Ordinary threaded code runs: many threads' stacks are address space,
 * which the memory limit does not count. */
static void
test_threads (Fixture *fixture, gconstpointer data)
{
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "import threading\n"
                "barrier = threading.Barrier(64)\n"
                "done = []\n"
                "def work(i):\n"
                "    barrier.wait()\n"
                "    done.append(sum(range(i * 1000)))\n"
                "threads = [threading.Thread(target=work, args=(i,)) for i in range(64)]\n"
                "for t in threads:\n"
                "    t.start()\n"
                "for t in threads:\n"
                "    t.join()\n"
                "print('threads', len(done))\n",
                NULL, 0);
  g_assert_cmpstr (out, ==, "threads 64\n");
}

/* A fork bomb meets the process limit and dies with its sandbox. */
static void
test_fork_bomb (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;

  if (!require_sandbox ())
    return;
  result = run (fixture, "import os\nwhile True:\n    os.fork()\n", NULL, 5);
  g_assert_cmpstr (mcp_json_get_string (structured (result), "status"), !=, "success");
  g_assert_true (failed (result));
  assert_pool_serves (fixture);
}

/* Kernel settings cannot be opened for writing, whoever the pool runs as. */
static void
test_not_host_root (Fixture *fixture, gconstpointer data)
{
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "import os\n"
                "for name in ['vm/swappiness', 'kernel/core_pattern', 'vm/drop_caches', 'kernel/pid_max']:\n"
                "    try:\n"
                "        os.close(os.open('/proc/sys/' + name, os.O_WRONLY))\n"
                "        print('sysctl writable', name)\n"
                "    except OSError as e:\n"
                "        print('sysctl refused', name, e.errno)\n",
                NULL, 0);
  g_assert_null (strstr (out, "sysctl writable"));
  g_assert_nonnull (strstr (out, "sysctl refused kernel/pid_max"));
  assert_pool_serves (fixture);
}

typedef struct {
  Fixture *fixture;
  json_t  *result;
} BackgroundRun;

/* The name the code gives its interpreter once it runs: the host sees it
 * in /proc/PID/comm, so the test knows that the code itself was taken. */
#define RUNNING_MARKER "mcp-code-runs"

static gpointer
run_until_killed (gpointer data)
{
  BackgroundRun *background = data;

  background->result = run (background->fixture,
                            "import ctypes, time\n"
                            "ctypes.CDLL(None).prctl(15, b'" RUNNING_MARKER "', 0, 0, 0)\n"
                            "time.sleep(600)\n", NULL, 0);
  return NULL;
}

/* The parent of @pid, or 0. */
static GPid
parent_of (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree char *stat = NULL;
  const char *end;

  if (!g_file_get_contents (path, &stat, NULL, NULL) || (end = strrchr (stat, ')')) == NULL)
    return 0;
  /* "pid (comm) state ppid ..." */
  return (GPid) g_ascii_strtoll (end + 4, NULL, 10);
}

/* Whether @pid is a process this test started, or one of theirs: other
 * programs run sandboxes at the same time (the suite runs test-sandbox as
 * root and as a user side by side), and a test must never count or kill
 * their processes. */
static gboolean
is_own_descendant (GPid pid)
{
  for (; pid > 1; pid = parent_of (pid))
    if (pid == getpid ())
      return TRUE;
  return FALSE;
}

/* The interpreter of one of this test's sandboxes, once it runs the code
 * (named RUNNING_MARKER). */
static gboolean
find_own_interpreter (gpointer data)
{
  GPid *found = data;
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;

  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *path = g_strdup_printf ("/proc/%s/comm", name);
      g_autofree char *comm = NULL;
      GPid pid;

      if (!g_ascii_isdigit (name[0]) || !g_file_get_contents (path, &comm, NULL, NULL) ||
          !g_str_equal (g_strchomp (comm), RUNNING_MARKER))
        continue;
      pid = (GPid) g_ascii_strtoll (name, NULL, 10);
      if (is_own_descendant (pid))
        {
          *found = pid;
          return TRUE;
        }
    }
  return FALSE;
}

/* The ids the host sees on a line of /proc/PID/status: none is root's. */
static void
assert_ids_not_root (const char *status, const char *field)
{
  g_autofree char *prefix = g_strdup_printf ("\n%s:", field);
  const char *line = strstr (status, prefix);
  g_autofree char *values = NULL;
  g_auto(GStrv) ids = NULL;

  g_assert_nonnull (line);
  line += strlen (prefix);
  values = g_strndup (line, strcspn (line, "\n"));
  ids = g_strsplit_set (values, " \t", -1);
  for (char **id = ids; *id != NULL; id++)
    if ((*id)[0] != '\0')
      g_assert_cmpstr (*id, !=, "0");
}

/* The uid, other than ours and root's, with the most processes among our
 * descendants, if it has at least *(guint *) data of them; its number
 * goes back in *data. */
static gboolean
find_crowded_uid (gpointer data)
{
  guint *wanted = data;
  g_autoptr(GHashTable) counts = g_hash_table_new (NULL, NULL);
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  GHashTableIter iter;
  gpointer uid, count;
  const char *name;

  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *path = g_build_filename ("/proc", name, NULL);
      GStatBuf info;

      if (g_ascii_isdigit (name[0]) && g_stat (path, &info) == 0 &&
          info.st_uid != 0 && info.st_uid != getuid () &&
          is_own_descendant ((GPid) g_ascii_strtoll (name, NULL, 10)))
        g_hash_table_insert (counts, GUINT_TO_POINTER (info.st_uid),
                             GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (counts,
                                                                                      GUINT_TO_POINTER (info.st_uid))) + 1));
    }
  g_hash_table_iter_init (&iter, counts);
  while (g_hash_table_iter_next (&iter, &uid, &count))
    if (GPOINTER_TO_UINT (count) >= *wanted)
      {
        *wanted = GPOINTER_TO_UINT (uid);
        return TRUE;
      }
  return FALSE;
}

/* Kills the processes of @uid among our descendants. */
static void
kill_processes_of (uid_t uid)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;

  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *path = g_build_filename ("/proc", name, NULL);
      GStatBuf info;
      GPid pid = (GPid) g_ascii_strtoll (name, NULL, 10);

      if (g_ascii_isdigit (name[0]) && g_stat (path, &info) == 0 && info.st_uid == uid &&
          is_own_descendant (pid))
        kill (pid, SIGKILL);
    }
}

static gpointer
run_filling_process_table (gpointer data)
{
  BackgroundRun *background = data;

  background->result = run (background->fixture,
                            "import os, signal\n"
                            "try:\n"
                            "    for _ in range(1000):\n"
                            "        if os.fork() == 0:\n"
                            "            signal.pause()\n"
                            "except BlockingIOError:\n"
                            "    pass\n"
                            "signal.pause()\n",
                            NULL, 120);
  return NULL;
}

/* As root, each run has host ids of its own, so the process limit is one
 * per run: a run that holds every process it may have leaves a run started
 * before it able to fork.  With one uid for all, the second run's limit
 * (what that uid ran when it started, plus the margin) is used up by the
 * first run's processes. */
static void
test_process_limit_per_run (Fixture *fixture, gconstpointer data)
{
  McpSandboxLimits limits = { 0 };
  McpRunResult result = { 0 };
  BackgroundRun filler = { fixture, NULL };
  g_autoptr(GThread) thread = NULL;
  g_autoptr(GError) error = NULL;
  McpSandbox *earlier;
  guint crowded = 120;

  if (!require_sandbox ())
    return;
  if (geteuid () != 0)
    {
      g_test_skip ("Only a root pool gives each run ids of its own; a user's runs share the user's processes");
      return;
    }
  earlier = mcp_sandbox_start (&limits, test_io_thread_get_context (fixture->io), &error);
  g_assert_no_error (error);
  thread = g_thread_new ("filler", run_filling_process_table, &filler);
  g_assert_true (test_wait_for (find_crowded_uid, &crowded, 20000));

  g_assert_true (mcp_sandbox_run (earlier,
                                  "import os\n"
                                  "for _ in range(20):\n"
                                  "    pid = os.fork()\n"
                                  "    if pid == 0:\n"
                                  "        os._exit(0)\n"
                                  "    os.waitpid(pid, 0)\n"
                                  "print('forked 20')\n",
                                  NULL, test_timeout_ms (20000), FALSE, NULL, NULL, NULL, &result, &error));
  g_assert_no_error (error);
  if (result.status != MCP_RUN_SUCCESS)
    g_error ("The earlier run could not fork: %s", result.stderr_text);
  g_assert_cmpstr (result.stdout_text, ==, "forked 20\n");

  kill_processes_of ((uid_t) crowded);
  g_thread_join (g_steal_pointer (&thread));
  /* Killed, or, on a host slow enough, ended by its timeout first. */
  g_assert_cmpstr (mcp_json_get_string (structured (filler.result), "status"), !=, "success");
  json_decref (filler.result);
  mcp_sandbox_free (earlier);
  mcp_run_result_clear (&result);
  assert_pool_serves (fixture);
}

/* As the host sees it, the sandbox's interpreter runs under no id of root. */
static void
test_host_ids (Fixture *fixture, gconstpointer data)
{
  BackgroundRun background = { fixture, NULL };
  g_autoptr(GThread) thread = NULL;
  g_autofree char *path = NULL;
  g_autofree char *status = NULL;
  GPid python = 0;

  if (!require_sandbox ())
    return;
  thread = g_thread_new ("run", run_until_killed, &background);
  g_assert_true (test_wait_for (find_own_interpreter, &python, 30 * 1000));
  path = g_strdup_printf ("/proc/%d/status", python);
  g_assert_true (g_file_get_contents (path, &status, NULL, NULL));
  assert_ids_not_root (status, "Uid");
  assert_ids_not_root (status, "Gid");
  assert_ids_not_root (status, "Groups");
  kill (python, SIGKILL);
  g_thread_join (g_steal_pointer (&thread));
  g_assert_cmpstr (mcp_json_get_string (structured (background.result), "status"), ==, "error");
  json_decref (background.result);
  assert_pool_serves (fixture);
}

/* Forks stop at the process limit, as root too (the kernel exempts root
 * from RLIMIT_NPROC).  The limit counts every process of the sandbox's
 * host user, which other programs (a parallel test run, the same tests
 * as nobody) start and end meanwhile: so the forks are checked against
 * the limit in force inside, not against a number of forks. */
static void
test_process_limit (Fixture *fixture, gconstpointer data)
{
  g_autofree char *out = NULL;
  gint64 limit;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "import os, resource\n"
                "soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]\n"
                "print('limit', -1 if soft == resource.RLIM_INFINITY else soft)\n"
                "r, w = os.pipe()\n"
                "forks = 0\n"
                "while forks < 100000:\n"
                "    try:\n"
                "        pid = os.fork()\n"
                "    except OSError as e:\n"
                "        print('fork refused', e.errno)\n"
                "        break\n"
                "    if pid == 0:\n"
                "        os.close(w)\n"
                "        os.read(r, 1)\n"
                "        os._exit(0)\n"
                "    forks += 1\n"
                "os.close(w)\n"
                "for _ in range(forks):\n"
                "    os.wait()\n"
                "print('forks', forks)\n",
                NULL, 60);
  g_assert_nonnull (strstr (out, "fork refused 11"));
  limit = count_after (out, "limit ");
  g_assert_cmpint (limit, >, 0);
  g_assert_cmpint (count_after (out, "forks "), <=, limit);
  assert_pool_serves (fixture);
}

/* Every way for code to hold memory outside its address space is refused
 * or bounded by the scratch size (64 MiB): memfds, /dev, /dev/shm, the
 * scratch dirs, SysV IPC, POSIX message queues. */
static void
test_memory_bypass (Fixture *fixture, gconstpointer data)
{
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "import ctypes, os\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "MiB = 1 << 20\n"
                "chunk = b'x' * MiB\n"
                "def fill(fd, mib):\n"
                "    for i in range(mib):\n"
                "        try:\n"
                "            os.write(fd, chunk)\n"
                "        except OSError:\n"
                "            return i\n"
                "    return mib\n"
                "held = 0\n"
                "try:\n"
                "    for _ in range(20):\n"
                "        held += fill(os.memfd_create('hold'), 32)\n"
                "except OSError as e:\n"
                "    print('memfd refused', e.errno)\n"
                "print('memfd held', held)\n"
                "for folder in ['/dev', '/dev/shm', '/tmp', '/work']:\n"
                "    held = 0\n"
                "    try:\n"
                "        for i in range(12):\n"
                "            fd = os.open('%s/hold%d' % (folder, i), os.O_WRONLY | os.O_CREAT, 0o600)\n"
                "            written = fill(fd, 16)\n"
                "            os.close(fd)\n"
                "            held += written\n"
                "            if written < 16:\n"
                "                break\n"
                "    except OSError as e:\n"
                "        print(folder, 'refused', e.errno)\n"
                "    print(folder, 'held', held)\n"
                "libc.shmget.restype = ctypes.c_int\n"
                "print('shmget', libc.shmget(0, ctypes.c_size_t(256 * MiB), 0o1600) >= 0)\n"
                "print('msgget', libc.msgget(0, 0o1600) >= 0)\n"
                "print('semget', libc.semget(0, 32000, 0o1600) >= 0)\n"
                "libc.mq_open.restype = ctypes.c_int\n"
                "print('mq_open', libc.mq_open(b'/hold', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0)\n",
                NULL, 60);
  g_assert_nonnull (strstr (out, "memfd held 0\n"));
  g_assert_nonnull (strstr (out, "/dev held 0\n"));
  for (const char * const *folder = (const char * const[]) { "/dev/shm", "/tmp", "/work", NULL }; *folder; folder++)
    {
      g_autofree char *label = g_strdup_printf ("\n%s held ", *folder);

      g_assert_cmpint (count_after (out, label), <=, 64);
    }
  g_assert_nonnull (strstr (out, "shmget False"));
  g_assert_nonnull (strstr (out, "msgget False"));
  g_assert_nonnull (strstr (out, "semget False"));
  g_assert_nonnull (strstr (out, "mq_open False"));
  assert_pool_serves (fixture);
}

/* Open files are bounded, which bounds pipe buffers and sockets too. */
static void
test_fd_limit (Fixture *fixture, gconstpointer data)
{
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "import os\n"
                "opened = []\n"
                "try:\n"
                "    while len(opened) < 10000:\n"
                "        opened.append(os.open('/dev/null', os.O_RDONLY))\n"
                "except OSError as e:\n"
                "    print('open refused', e.errno)\n"
                "for fd in opened:\n"
                "    os.close(fd)\n"
                "print('opened', len(opened))\n",
                NULL, 0);
  g_assert_nonnull (strstr (out, "open refused 24"));
  g_assert_cmpint (count_after (out, "opened "), <, 256);
  assert_pool_serves (fixture);
}

/* Forks do not multiply the memory limit: six children of 200 MiB each
 * are each within the 512 MiB of address space a process may have, but
 * together over the run's 512 MiB, so the run is killed.  They hold it
 * until then (without the bound, until the timeout). */
static void
test_memory_forks (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;
  const char *err;

  if (!require_sandbox ())
    return;
  result = run (fixture,
                "import os, time\n"
                "ready_r, ready_w = os.pipe()\n"
                "children = []\n"
                "for _ in range(6):\n"
                "    pid = os.fork()\n"
                "    if pid == 0:\n"
                "        block = bytearray(200 << 20)\n"
                "        for i in range(0, len(block), 4096):\n"
                "            block[i] = 1\n"
                "        os.write(ready_w, b'x')\n"
                "        time.sleep(600)\n"
                "        os._exit(0)\n"
                "    children.append(pid)\n"
                "for _ in children:\n"
                "    os.read(ready_r, 1)\n"
                "print('all held', flush=True)\n"
                "for pid in children:\n"
                "    os.waitpid(pid, 0)\n",
                NULL, 30);
  err = mcp_json_get_string (structured (result), "stderr");
  g_test_message ("stdout: %s\nstderr: %s", stdout_of (result), err);
  g_assert_cmpstr (mcp_json_get_string (structured (result), "status"), ==, "memory");
  g_assert_cmpint (json_integer_value (json_object_get (structured (result), "exit_code")), ==, -1);
  g_assert_true (failed (result));
  g_assert_nonnull (strstr (err, "more than 512 MiB of memory, the limit of a run"));
  assert_pool_serves (fixture);
}

/* A run that starts a few programs is not mistaken for one that holds
 * too much. */
static void
test_memory_small_forks (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;

  if (!require_sandbox ())
    return;
  result = run (fixture,
                "import subprocess, time\n"
                "for _ in range(3):\n"
                "    subprocess.run(['true'], check=True)\n"
                "    time.sleep(0.1)\n"
                "print('done')\n",
                NULL, 0);
  assert_success (result);
  g_assert_cmpstr (stdout_of (result), ==, "done\n");
  assert_pool_serves (fixture);
}

/* What forks share copy-on-write counts once: 300 MiB in a parent and its
 * four waiting children stay within the 512 MiB of a run.  The children
 * wait half a second, so the host measures them many times. */
static void
test_memory_shared (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;

  if (!require_sandbox ())
    return;
  result = run (fixture,
                "import os, time\n"
                "block = bytearray(300 << 20)\n"
                "for i in range(0, len(block), 4096):\n"
                "    block[i] = 1\n"
                "children = []\n"
                "for _ in range(4):\n"
                "    pid = os.fork()\n"
                "    if pid == 0:\n"
                "        time.sleep(0.5)\n"
                "        os._exit(block[4096])\n"
                "    children.append(pid)\n"
                "print('codes', [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children])\n",
                NULL, 60);
  assert_success (result);
  g_assert_cmpstr (stdout_of (result), ==, "codes [1, 1, 1, 1]\n");
  assert_pool_serves (fixture);
}

/* A root pool's sandbox runs as nobody, yet a runtime that only root can
 * read (a build tree under /root, say) works: the host reads it. */
static void
test_runtime_private (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *folder = NULL;
  g_autofree char *original = NULL;
  g_autofree char *copy = NULL;
  g_autofree char *contents = NULL;
  g_autoptr(json_t) arguments = json_pack ("{s:s}", "code", "print('ran')\n");
  g_autoptr(json_t) result = NULL;
  McpCodeOptions options = { 0 };
  McpCode *code;
  gsize length;
  GStatBuf info;

  if (!require_sandbox ())
    return;
  if (geteuid () != 0)
    {
      g_test_skip ("Only a root pool runs its sandbox as another user");
      return;
    }
  folder = g_dir_make_tmp ("mcp-pool-runtime-XXXXXX", &error);
  g_assert_no_error (error);
  g_assert_cmpint (g_stat (folder, &info), ==, 0);
  g_assert_cmpint (info.st_mode & 0777, ==, 0700);
  original = g_build_filename (g_getenv ("MCP_POOL_RUNTIME_DIR"), "mcp_runtime.py", NULL);
  g_assert_true (g_file_get_contents (original, &contents, &length, NULL));
  copy = g_build_filename (folder, "mcp_runtime.py", NULL);
  g_assert_true (g_file_set_contents (copy, contents, length, NULL));

  options.limits.runtime_dir = folder;
  code = mcp_code_new (fixture->pool, test_io_thread_get_context (fixture->io), &options);
  result = mcp_code_run (code, arguments, NULL);
  mcp_code_free (code);
  g_unlink (copy);
  g_rmdir (folder);
  assert_success (result);
  g_assert_cmpstr (stdout_of (result), ==, "ran\n");
}

/* Tools through the RPC channel, served concurrently: the fixture's own
 * count shows the five calls overlapping. */
static void
test_tools (Fixture *fixture, gconstpointer data)
{
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "import asyncio\n"
                "print(await mcp_fx.echo(message='through the sandbox'))\n"
                "print(await mcp_servers['fx'].echo(message='by name'))\n"
                "from mcp.servers.fx import echo\n"
                "print(await echo(message='imported'))\n"
                "await asyncio.gather(*(mcp_fx.sleep(ms=500) for _ in range(5)))\n"
                "stats = await mcp_fx.stats(unwrap=True)\n"
                "print('overlap', stats['max_inflight'] >= 5)\n"
                "try:\n"
                "    await mcp_fx.echo('positional')\n"
                "except TypeError as e:\n"
                "    print('TypeError', e)\n",
                "fx", 0);
  g_assert_nonnull (strstr (out, "Echo: through the sandbox"));
  g_assert_nonnull (strstr (out, "Echo: by name"));
  g_assert_nonnull (strstr (out, "Echo: imported"));
  g_assert_nonnull (strstr (out, "overlap True"));
  g_assert_nonnull (strstr (out, "TypeError"));
  g_assert_nonnull (strstr (out, "message"));
}

/* Discovery sees every server from the cache without starting it; only
 * the servers named may be called. */
static void
test_allow_list (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;
  g_autoptr(GPtrArray) servers = NULL;
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "servers = await discovered_servers()\n"
                "print('servers', sorted(s['name'] if isinstance(s, dict) else s for s in servers))\n"
                "try:\n"
                "    await call_tool('other', 'echo', message='x')\n"
                "except Exception as e:\n"
                "    print('refused', e)\n",
                "fx", 0);
  g_assert_nonnull (strstr (out, "'fx', 'other', 'secretive'"));
  g_assert_nonnull (strstr (out, "refused"));
  g_assert_nonnull (strstr (out, "servers"));
  assert_pool_serves (fixture);

  servers = mcp_pool_list_servers (fixture->pool);
  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      if (!g_str_equal (info->name, "fx"))
        g_assert_cmpuint (info->starts, ==, 0);
    }
}

/* With a warm sandbox, runs follow each other. */
static void
test_warm (Fixture *fixture, gconstpointer data)
{
  if (!require_sandbox ())
    return;
  for (int i = 0; i < 3; i++)
    {
      g_autoptr(json_t) result = run (fixture, "print(1)\n", NULL, 0);
      assert_success (result);
      g_assert_cmpstr (stdout_of (result), ==, "1\n");
    }
}

typedef struct {
  Fixture     *fixture;
  GAsyncQueue *results;
} ConcurrentRun;

static gpointer
run_print (gpointer data)
{
  ConcurrentRun *concurrent = data;

  g_async_queue_push (concurrent->results, run (concurrent->fixture, "print(1)\n", NULL, 0));
  return NULL;
}

/* Runs that start together each get a sandbox, the warm one included,
 * while the warmer refills: none waits on another, round after round.
 * The results are awaited with a bound, so a deadlock fails the test. */
static void
test_warm_concurrent (Fixture *fixture, gconstpointer data)
{
  g_autoptr(GAsyncQueue) results = g_async_queue_new ();
  ConcurrentRun concurrent = { fixture, results };
  GThread *threads[8];

  if (!require_sandbox ())
    return;
  for (int round = 0; round < 3; round++)
    {
      for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
        threads[i] = g_thread_new ("test-run", run_print, &concurrent);
      for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
        {
          g_autoptr(json_t) result = g_async_queue_timeout_pop (results, test_timeout_ms (30 * 1000) * 1000ull);

          if (result == NULL)
            g_error ("Only %u of %u concurrent runs ended", i, (guint) G_N_ELEMENTS (threads));
          assert_success (result);
          g_assert_cmpstr (stdout_of (result), ==, "1\n");
        }
      for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
        g_thread_join (threads[i]);
    }
}

/* A handler that holds every request until the test lets them go, so
 * that none is answered while the code floods. */
typedef struct {
  GMutex   lock;
  GCond    released_cond;
  gboolean released;
} HeldRequests;

static json_t *
hold_request (const char  *method,
              json_t      *params,
              gpointer     user_data,
              GError     **error)
{
  HeldRequests *held = user_data;
  gint64 deadline = g_get_monotonic_time () + test_timeout_ms (60 * 1000) * G_TIME_SPAN_MILLISECOND;

  g_mutex_lock (&held->lock);
  while (!held->released && g_cond_wait_until (&held->released_cond, &held->lock, deadline))
    ;
  g_mutex_unlock (&held->lock);
  return json_object ();
}

/* A flood's run, on a thread of its own so that the test can watch the
 * host's reader meanwhile. */
typedef struct {
  McpSandbox   *sandbox;
  const char   *source;
  HeldRequests *held;
  GCancellable *cancellable;
  gboolean      ran;
  GError       *error;
} FloodRun;

static gpointer
run_flood_thread (gpointer data)
{
  FloodRun *flood = data;
  McpRunResult result = { 0 };

  flood->ran = mcp_sandbox_run (flood->sandbox, flood->source, NULL, test_timeout_ms (120 * 1000), FALSE,
                                hold_request, flood->held, flood->cancellable, &result, &flood->error);
  mcp_run_result_clear (&result);
  return NULL;
}

static gboolean
rpc_paused (gpointer sandbox)
{
  return mcp_sandbox_rpc_is_paused (sandbox);
}

/* Runs @source, which writes requests on the RPC socket without end
 * while none is answered, until the host stops reading it (a bound was
 * reached: nothing more is handed on until a request is answered), then
 * cancels the run; the host's peaks of requests and of request bytes in
 * flight are returned. */
static void
run_flood (Fixture *fixture, const char *source, guint *peak, gsize *bytes_peak)
{
  McpSandboxLimits limits = { 0 };
  HeldRequests held = { 0 };
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  g_autoptr(GError) error = NULL;
  FloodRun flood = { NULL, source, &held, cancellable, FALSE, NULL };
  GThread *thread;

  g_mutex_init (&held.lock);
  g_cond_init (&held.released_cond);
  flood.sandbox = mcp_sandbox_start (&limits, test_io_thread_get_context (fixture->io), &error);
  g_assert_no_error (error);
  thread = g_thread_new ("flood", run_flood_thread, &flood);
  g_assert_true (test_wait_for (rpc_paused, flood.sandbox, 30 * 1000));
  *peak = mcp_sandbox_get_rpc_peak (flood.sandbox);
  *bytes_peak = mcp_sandbox_get_rpc_bytes_peak (flood.sandbox);
  g_cancellable_cancel (cancellable);
  g_thread_join (thread);
  g_assert_false (flood.ran);
  g_assert_error (flood.error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
  g_clear_error (&flood.error);

  g_mutex_lock (&held.lock);
  held.released = TRUE;
  g_cond_broadcast (&held.released_cond);
  g_mutex_unlock (&held.lock);
  mcp_sandbox_free (flood.sandbox);
  g_cond_clear (&held.released_cond);
  g_mutex_clear (&held.lock);
}

#define FLOOD_SOCKET \
  "import os, socket\n" \
  "raw = socket.socket(fileno=os.dup(int(os.environ['MCP_POOL_RPC_FD'])))\n"

/* Code that floods small requests: the host stops reading at the bound
 * of requests in flight instead of queueing them all.  (That a flood
 * does not delay the run's timeout, /serve/code/rpc-flood shows.) */
static void
test_rpc_flood (Fixture *fixture, gconstpointer data)
{
  guint peak;
  gsize bytes_peak;

  if (!require_sandbox ())
    return;
  run_flood (fixture,
             FLOOD_SOCKET
             "line = b'{\"id\":0,\"method\":\"list_servers\",\"params\":{}}\\n'\n"
             "print('flooding', flush=True)\n"
             "while True:\n"
             "    raw.sendall(line * 1000)\n",
             &peak, &bytes_peak);
  g_assert_cmpuint (peak, ==, MCP_SANDBOX_RPC_IN_FLIGHT_MAX);
}

/* Code that floods requests of 8 MiB each: well under the bound of
 * requests, the host stops reading at its bound of request bytes, past
 * which it holds at most the line it was reading. */
static void
test_rpc_flood_bytes (Fixture *fixture, gconstpointer data)
{
  const gsize line = (8 << 20) + 64;
  guint peak;
  gsize bytes_peak;

  if (!require_sandbox ())
    return;
  run_flood (fixture,
             FLOOD_SOCKET
             "line = b'{\"id\":0,\"method\":\"list_servers\",\"params\":{\"pad\":\"'\n"
             "line += b'x' * (8 << 20) + b'\"}}\\n'\n"
             "print('flooding', flush=True)\n"
             "while True:\n"
             "    raw.sendall(line)\n",
             &peak, &bytes_peak);
  g_test_message ("peak: %u requests, %zu bytes", peak, bytes_peak);
  g_assert_cmpuint (bytes_peak, >=, MCP_SANDBOX_RPC_BYTES_IN_FLIGHT_MAX);
  g_assert_cmpuint (bytes_peak, <=, MCP_SANDBOX_RPC_BYTES_IN_FLIGHT_MAX + line);
  g_assert_cmpuint (peak, <, MCP_SANDBOX_RPC_IN_FLIGHT_MAX);
}

/* A call whose request is over the RPC line limit fails at once, with
 * the limit in its error, instead of waiting for the run's timeout. */
static void
test_rpc_too_long (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;
  const char *err;

  if (!require_sandbox ())
    return;
  result = run (fixture, "await mcp_fx.echo(message='x' * (50 << 20))\n", "fx", 20);
  g_assert_cmpstr (mcp_json_get_string (structured (result), "status"), ==, "error");
  err = mcp_json_get_string (structured (result), "stderr");
  g_assert_nonnull (strstr (err, "McpRpcError"));
  g_assert_nonnull (strstr (err, "limit of 33554432 bytes"));
  g_assert_nonnull (strstr (err, "pass smaller arguments"));
  assert_pool_serves (fixture);
}

/* A line over the limit written on the socket itself, past the runtime's
 * check: the host answers it, and the call that waits learns why. */
static void
test_rpc_too_long_raw (Fixture *fixture, gconstpointer data)
{
  g_autoptr(json_t) result = NULL;

  if (!require_sandbox ())
    return;
  result = run (fixture,
                "import asyncio, os, socket\n"
                "waiting = asyncio.ensure_future(mcp_fx.sleep(ms=60000))\n"
                "await asyncio.sleep(0)\n"
                "raw = socket.socket(fileno=os.dup(int(os.environ['MCP_POOL_RPC_FD'])))\n"
                "raw.sendall(b'{\"id\":0,\"method\":\"list_servers\",\"params\":{\"pad\":\"'\n"
                "            + b'x' * (33 << 20) + b'\"}}\\n')\n"
                "try:\n"
                "    await waiting\n"
                "except McpRpcError as error:\n"
                "    print('refused:', error)\n"
                "print(await mcp_fx.echo(message='after'))\n",
                "fx", 20);
  assert_success (result);
  g_assert_nonnull (strstr (stdout_of (result), "refused: An RPC request of the code is longer than "
                                                "the limit of 33554432 bytes"));
  g_assert_nonnull (strstr (stdout_of (result), "Echo: after"));
}

/* The code's search_tool_docs clamps its limit to 1..20 and takes any
 * other detail as "summary", as the seed bridge does; what is left to
 * refuse, the host refuses as the gateway's search_tools and
 * describe_tool do (test-serve's /serve/gateway/bad-arguments), word for
 * word. */
static void
test_tool_search_arguments (Fixture *fixture, gconstpointer data)
{
  g_autofree char *out = NULL;

  if (!require_sandbox ())
    return;
  out = run_ok (fixture,
                "print(len(await search_tool_docs('echo', limit=0)))\n"
                "print('inputSchema' in (await search_tool_docs('echo', detail='everything'))[0])\n"
                "for call in (lambda: search_tool_docs(5), lambda: query_tool_docs(None)):\n"
                "    try:\n"
                "        await call()\n"
                "        print('accepted')\n"
                "    except McpRpcError as error:\n"
                "        print(error)\n"
                "print(len((await search_tool_docs('echo', limit=1, detail='full'))[0]['inputSchema']) > 0)\n",
                "fx", 0);
  g_assert_cmpstr (out, ==,
                   "1\n"
                   "False\n"
                   "The argument “query” is required and must be a non-empty string\n"
                   "The argument “server” is required and must be a non-empty string\n"
                   "True\n");
}

/* Code that makes the memory samples slow (a hundred forks sharing
 * pages, so that each sample walks all their page tables) does not
 * stretch the time between two samples past 100 ms. */
static void
test_memory_interval (void)
{
  g_assert_cmpint (mcp_memory_watch_interval (0), ==, 20 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpint (mcp_memory_watch_interval (2 * G_TIME_SPAN_MILLISECOND), ==, 40 * G_TIME_SPAN_MILLISECOND);
  g_assert_cmpint (mcp_memory_watch_interval (G_USEC_PER_SEC), ==, 100 * G_TIME_SPAN_MILLISECOND);
}

static void
test_tool_entry (void)
{
  g_autoptr(McpPool) pool = mcp_pool_new (NULL, NULL, NULL);
  g_autofree char *state = g_dir_make_tmp ("mcp-pool-state-XXXXXX", NULL);

  /* Within 1,000 characters, with the seed's schema fields, teaching
   * discovery, and saying whether state persists, both ways. */
  for (int sessions = 0; sessions <= 1; sessions++)
    {
      McpCodeOptions options = { .sessions = sessions, .state_dir = state };
      g_autoptr(McpCode) code = mcp_code_new (pool, NULL, &options);
      g_autoptr(json_t) tool = mcp_code_tool (code);
      g_autofree char *text = json_dumps (tool, JSON_COMPACT);
      json_t *properties = json_object_get (json_object_get (tool, "inputSchema"), "properties");
      json_t *timeout = json_object_get (properties, "timeout");
      const char *description = mcp_json_get_string (tool, "description");

      g_assert_cmpstr (mcp_json_get_string (tool, "name"), ==, "run_python");
      g_assert_cmpuint (strlen (text), <=, 1000);
      g_assert_cmpstr (mcp_json_get_string (timeout, "type"), ==, "integer");
      g_assert_cmpint (json_integer_value (json_object_get (timeout, "minimum")), ==, 1);
      g_assert_cmpint (json_integer_value (json_object_get (timeout, "maximum")), ==, MCP_CODE_TIMEOUT_MAX_S);
      g_assert_cmpint (json_integer_value (json_object_get (timeout, "default")), ==, MCP_CODE_TIMEOUT_DEFAULT_S);
      g_assert_nonnull (strstr (description, "runtime.discovered_servers()"));
      g_assert_nonnull (strstr (description, "search_tool_docs"));
      g_assert_nonnull (strstr (description, "capability_summary()"));
      g_assert_cmpint (json_object_get (properties, "fresh") != NULL, ==, sessions);
      g_assert_cmpint (strstr (description, "persist") != NULL, ==, sessions);
    }
  mcp_pool_shutdown (pool, 0, 0);
  test_remove_tree (state);
}

/* Where bwrap cannot work, the error says why and what to do. */
static void
test_unavailable (void)
{
  g_autoptr(McpPool) pool = mcp_pool_new (NULL, NULL, NULL);
  McpCodeOptions options = { .limits.bwrap = "/bin/false" };
  g_autoptr(McpCode) code = mcp_code_new (pool, NULL, &options);
  g_autoptr(json_t) arguments = json_pack ("{s:s}", "code", "print(1)");
  g_autoptr(json_t) result = mcp_code_run_python (code, arguments, NULL);
  const char *text = mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text");

  g_assert_true (json_is_true (json_object_get (result, "isError")));
  g_assert_nonnull (strstr (text, "user namespaces"));
  g_clear_pointer (&code, mcp_code_free);
  mcp_pool_shutdown (pool, 0, 0);
  test_assert_no_children ();
}

/* Each way a start can fail before the code runs (no runtime, no bwrap
 * to execute, bwrap ending at once) says why, and leaves no fd open and
 * no process behind: the fixture's teardown checks both. */
/* A run whose sandbox cannot start fails with an error naming why. */
static void
assert_start_fails (Fixture    *fixture,
                    const char *bwrap,
                    const char *runtime_dir,
                    const char *needle)
{
  McpCodeOptions options = { .limits.bwrap = bwrap, .limits.runtime_dir = runtime_dir };
  g_autoptr(McpCode) code = mcp_code_new (fixture->pool, test_io_thread_get_context (fixture->io), &options);
  g_autoptr(json_t) arguments = json_pack ("{s:s}", "code", "print(1)");
  g_autoptr(json_t) result = mcp_code_run_python (code, arguments, NULL);
  const char *text = mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text");

  g_assert_true (json_is_true (json_object_get (result, "isError")));
  if (strstr (text, needle) == NULL)
    g_error ("“%s” is not in the error “%s”", needle, text);
}

static void
test_start_failures (Fixture *fixture, gconstpointer data)
{
  assert_start_fails (fixture, NULL, "/nonexistent/runtime", "/nonexistent/runtime/mcp_runtime.py cannot be read");
  assert_start_fails (fixture, "/bin/false", NULL, "user namespaces");
  /* glibc's posix_spawn reports a failed exec through memory it shares
   * with its vfork()ed child; valgrind runs that child as a fork, so the
   * parent sees a program that started and exited at once. */
  if (test_under_valgrind ())
    g_test_message ("a missing bwrap is not checked under valgrind: it looks like one that exited at once");
  else
    assert_start_fails (fixture, "/nonexistent/bwrap", NULL, "/nonexistent/bwrap");
}

/* Whether bwrap can create namespaces here, and if not why.  Through the
 * spawner, which reaps what bwrap leaves in its process group. */
static void
probe_sandbox (void)
{
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  const char * const argv[] = { BWRAP_PATH, "--unshare-all", "--ro-bind", "/", "/", "true", NULL };
  int status = 0;

  if (!mcp_spawner_run_sync (argv, 10 * G_USEC_PER_SEC, NULL, &err, &status, &error))
    sandbox_problem = g_strdup_printf ("bwrap cannot run: %s", error->message);
  else if (!g_spawn_check_wait_status (status, NULL))
    sandbox_problem = g_strdup_printf ("bwrap cannot create namespaces here: %s", err);
  else
    sandbox_works = TRUE;
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  json_object_seed (0);
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  /* A secret in the pool's environment, before any thread exists. */
  g_setenv ("MCP_POOL_TEST_SECRET", "pool-secret-17", TRUE);
  probe_sandbox ();

#define ADD(path, warm, func) g_test_add (path, Fixture, warm, setup, func, teardown)
  ADD ("/sandbox/isolation", NULL, test_isolation);
  ADD ("/sandbox/seccomp", NULL, test_seccomp);
  ADD ("/sandbox/timeout", NULL, test_timeout);
  ADD ("/sandbox/output-cap", NULL, test_output_cap);
  ADD ("/sandbox/limits", NULL, test_limits);
  ADD ("/sandbox/threads", NULL, test_threads);
  ADD ("/sandbox/fork-bomb", NULL, test_fork_bomb);
  ADD ("/sandbox/not-host-root", NULL, test_not_host_root);
  ADD ("/sandbox/host-ids", NULL, test_host_ids);
  ADD ("/sandbox/process-limit-per-run", NULL, test_process_limit_per_run);
  ADD ("/sandbox/process-limit", NULL, test_process_limit);
  ADD ("/sandbox/memory-bypass", NULL, test_memory_bypass);
  ADD ("/sandbox/fd-limit", NULL, test_fd_limit);
  ADD ("/sandbox/memory-forks", NULL, test_memory_forks);
  ADD ("/sandbox/memory-small-forks", NULL, test_memory_small_forks);
  ADD ("/sandbox/memory-shared", NULL, test_memory_shared);
  ADD ("/sandbox/runtime-private", NULL, test_runtime_private);
  ADD ("/sandbox/tools", NULL, test_tools);
  ADD ("/sandbox/allow-list", NULL, test_allow_list);
  ADD ("/sandbox/tool-search-arguments", NULL, test_tool_search_arguments);
  ADD ("/sandbox/warm", WARM, test_warm);
  ADD ("/sandbox/warm-concurrent", WARM, test_warm_concurrent);
  ADD ("/sandbox/rpc/flood", NULL, test_rpc_flood);
  ADD ("/sandbox/rpc/flood-bytes", NULL, test_rpc_flood_bytes);
  ADD ("/sandbox/rpc/too-long", NULL, test_rpc_too_long);
  ADD ("/sandbox/rpc/too-long-raw", NULL, test_rpc_too_long_raw);
  ADD ("/sandbox/state-dir", NULL, test_state_dir);
  ADD ("/sandbox/session/state", SESSION, test_session_state);
  ADD ("/sandbox/session/timeout", SESSION, test_session_timeout);
  ADD ("/sandbox/session/restarted", SESSION, test_session_restarted);
  g_test_add_func ("/sandbox/session/idle", test_session_idle);
  g_test_add_func ("/sandbox/session/full", test_sessions_full);
  /* The attacks again, from a persistent session. */
  ADD ("/sandbox/session/isolation", SESSION, test_isolation);
  ADD ("/sandbox/session/seccomp", SESSION, test_seccomp);
  ADD ("/sandbox/session/timeout-kills", SESSION, test_timeout);
  ADD ("/sandbox/session/output-cap", SESSION, test_output_cap);
  ADD ("/sandbox/session/limits", SESSION, test_limits);
  ADD ("/sandbox/session/fork-bomb", SESSION, test_fork_bomb);
  ADD ("/sandbox/session/not-host-root", SESSION, test_not_host_root);
  ADD ("/sandbox/session/memory-bypass", SESSION, test_memory_bypass);
  ADD ("/sandbox/session/fd-limit", SESSION, test_fd_limit);
  ADD ("/sandbox/session/allow-list", SESSION, test_allow_list);
  g_test_add_func ("/sandbox/memory-interval", test_memory_interval);
  g_test_add_func ("/sandbox/tool-entry", test_tool_entry);
  g_test_add_func ("/sandbox/unavailable", test_unavailable);
  ADD ("/sandbox/start-failures", NULL, test_start_failures);
  return g_test_run ();
}
