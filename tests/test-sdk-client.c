/* test-sdk-client.c — tests/interop/sdk-client.mjs, sdk-http-client.mjs
 * and sdk2-client.mjs run to their end. */
#include "config.h"

#include "test-sdk-client.h"

#include <gio/gio.h>
#include <jansson.h>

#include "test-client.h"
#include "test-files.h"
#include "test-procs.h"
#include "test-wait.h"

/* The script bounds itself to 90 s; this only catches a node that hangs. */
#define SDK_CLIENT_TIMEOUT_S 150

static void
store_result (GObject      *source,
              GAsyncResult *result,
              gpointer      user_data)
{
  *(GAsyncResult **) user_data = g_object_ref (result);
}

static gboolean
set_flag (gpointer user_data)
{
  *(gboolean *) user_data = TRUE;
  return G_SOURCE_REMOVE;
}

/* Runs `node @argv…` from @launcher to its end, which must be a success
 * within SDK_CLIENT_TIMEOUT_S; says what it printed.  @scratch is its
 * folder, kept when it fails. */
static void
finish_script (const char          *script_name,
               GSubprocessLauncher *launcher,
               const char          *scratch,
               const char * const  *argv)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GSubprocess) process = NULL;
  g_autoptr(GMainContext) context = NULL;
  g_autoptr(GSource) timeout = NULL;
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(GError) error = NULL;
  gboolean timed_out = FALSE;
  gint64 start;

  context = g_main_context_new ();
  g_main_context_push_thread_default (context);
  start = g_get_monotonic_time ();
  process = g_subprocess_launcher_spawnv (launcher, argv, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8_async (process, NULL, NULL, store_result, &result);
  timeout = g_timeout_source_new (test_timeout_ms (SDK_CLIENT_TIMEOUT_S * 1000));
  g_source_set_callback (timeout, set_flag, &timed_out, NULL);
  g_source_attach (timeout, context);
  while (result == NULL)
    {
      if (timed_out)
        {
          g_test_message ("%s still runs after %u s: killing it", script_name,
                          test_timeout_ms (SDK_CLIENT_TIMEOUT_S * 1000) / 1000);
          g_subprocess_force_exit (process);
          timed_out = FALSE;
        }
      g_main_context_iteration (context, TRUE);
    }
  g_source_destroy (timeout);
  g_subprocess_communicate_utf8_finish (process, result, &out, &err, &error);
  g_main_context_pop_thread_default (context);
  g_assert_no_error (error);

  g_test_message ("%s ran for %.1f s:\n%s", script_name, (g_get_monotonic_time () - start) / 1e6, out);
  if (!g_subprocess_get_successful (process))
    g_test_message ("%s failed (its scratch directory %s is kept); its stderr:\n%s",
                    script_name, scratch, err);
  g_assert_true (g_subprocess_get_if_exited (process));
  g_assert_cmpint (g_subprocess_get_exit_status (process), ==, 0);
  g_assert_true (test_remove_tree (scratch));
}

static void
run_sdk_script (const char         *script_name,
                const char         *config_path,
                gboolean            shared,
                const char * const *envp)
{
  g_autofree char *everything = NULL;
  g_autofree char *filesystem = NULL;
  g_autofree char *memory = NULL;
  g_autofree char *sdk = NULL;
  g_autofree char *scratch = NULL;
  g_autofree char *own_config = NULL;
  g_autofree char *memory_file = NULL;
  g_autoptr(json_t) config = NULL;
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GError) error = NULL;
  const char *script = g_test_get_filename (G_TEST_DIST, "interop", script_name, NULL);

  if ((everything = test_interop_file ("@modelcontextprotocol/server-everything/dist/index.js")) == NULL ||
      (filesystem = test_interop_file ("@modelcontextprotocol/server-filesystem/dist/index.js")) == NULL ||
      (memory = test_interop_file ("@modelcontextprotocol/server-memory/dist/index.js")) == NULL ||
      (sdk = test_interop_file ("@modelcontextprotocol/sdk/package.json")) == NULL)
    return;

  scratch = g_dir_make_tmp ("mcp-pool-sdk-client-XXXXXX", &error);
  g_assert_no_error (error);
  if (config_path == NULL)
    config_path = own_config = g_build_filename (scratch, "servers.json", NULL);
  memory_file = g_build_filename (scratch, "memory.jsonl", NULL);
  config = json_pack ("{s:{s:{s:s, s:[s, s]}, s:{s:s, s:[s, s]}, s:{s:s, s:[s], s:{s:s}}}}",
                      "mcpServers",
                      "everything", "command", "node", "args", everything, "stdio",
                      "files", "command", "node", "args", filesystem, scratch,
                      "memory", "command", "node", "args", memory, "env", "MEMORY_FILE_PATH", memory_file);
  g_assert_nonnull (config);
  g_assert_cmpint (json_dump_file (config, config_path, JSON_INDENT (2)), ==, 0);

  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  if (envp != NULL)
    g_subprocess_launcher_set_environ (launcher, (char **) envp);
  g_subprocess_launcher_setenv (launcher, "HOME", scratch, TRUE);
  if (shared)
    g_subprocess_launcher_setenv (launcher, "MCP_POOL_SDK_SHARED", "1", TRUE);
  g_subprocess_launcher_set_cwd (launcher, scratch);

  finish_script (script_name, launcher, scratch, (const char * const[]) {
    "node", script, test_mcp_pool_path (), config_path, scratch, NULL });
}

void
test_sdk_client_run (const char         *config_path,
                     gboolean            shared,
                     const char * const *envp)
{
  run_sdk_script ("sdk-client.mjs", config_path, shared, envp);
}

void
test_sdk_http_client_run (void)
{
  run_sdk_script ("sdk-http-client.mjs", NULL, FALSE, NULL);
}


void
test_sdk2_client_run (const char         *config_path,
                      gboolean            shared,
                      const char * const *envp)
{
  g_autofree char *client = test_interop_file ("@modelcontextprotocol/client/package.json");
  g_autofree char *server = client != NULL ? test_interop_file ("@modelcontextprotocol/server/package.json") : NULL;
  g_autofree char *scratch = NULL;
  g_autofree char *own_config = NULL;
  g_autoptr(GSubprocessLauncher) launcher = NULL;
  g_autoptr(GError) error = NULL;

  if (server == NULL)
    return;
  scratch = g_dir_make_tmp ("mcp-pool-sdk2-client-XXXXXX", &error);
  g_assert_no_error (error);
  if (config_path == NULL)
    config_path = own_config = g_build_filename (scratch, "servers.json", NULL);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  if (envp != NULL)
    g_subprocess_launcher_set_environ (launcher, (char **) envp);
  if (shared)
    g_subprocess_launcher_setenv (launcher, "MCP_POOL_SDK_SHARED", "1", TRUE);
  g_subprocess_launcher_set_cwd (launcher, scratch);
  finish_script ("sdk2-client.mjs", launcher, scratch, (const char * const[]) {
    "node", g_test_get_filename (G_TEST_DIST, "interop", "sdk2-client.mjs", NULL), test_mcp_pool_path (),
    test_fixture_path (), scratch, config_path, NULL });
}
