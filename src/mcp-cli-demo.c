/* mcp-cli-demo.c — `mcp-pool demo`: a newcomer's first run.
 *
 * Starts the project's example server once, makes one cold call (spawn,
 * handshake, tool list, call: what a spawn-per-call client pays every time)
 * and then many warm calls on the same session, and prints both timings.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <gio/gio.h>
#include <glib/gi18n-lib.h>

#include "mcp-cli.h"
#include "mcp-jsonrpc.h"
#include "mcp-session.h"

#define EXAMPLE_SERVER_NAME "mcp-pool-example-server"

typedef struct {
  int calls;
} DemoJob;

/* The example server: $MCP_POOL_EXAMPLE_SERVER, else beside this program
 * (a build tree), else where `make install` put it. */
static char *
find_example_server (void)
{
  const char *from_env = g_getenv ("MCP_POOL_EXAMPLE_SERVER");
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *beside = NULL;

  if (from_env != NULL && from_env[0] != '\0')
    return g_strdup (from_env);
  if (self != NULL)
    {
      g_autofree char *dir = g_path_get_dirname (self);
      beside = g_build_filename (dir, EXAMPLE_SERVER_NAME, NULL);
      if (g_file_test (beside, G_FILE_TEST_IS_EXECUTABLE))
        return g_steal_pointer (&beside);
    }
  return g_build_filename (PKGLIBEXECDIR, EXAMPLE_SERVER_NAME, NULL);
}

static json_t *
echo_call (McpSession  *session,
           int          index,
           GError     **error)
{
  g_autofree char *text = g_strdup_printf ("hello %d", index);
  g_autoptr(json_t) params = json_pack ("{s:s, s:{s:s}}", "name", "echo",
                                        "arguments", "message", text);

  return mcp_session_call (session, "tools/call", params, 0, error);
}

static int
compare_gint64 (gconstpointer a,
                gconstpointer b)
{
  gint64 x = *(const gint64 *) a, y = *(const gint64 *) b;

  return (x > y) - (x < y);
}

static int
run_demo (gpointer data)
{
  DemoJob *job = data;
  g_autofree char *server = find_example_server ();
  const char * const args[] = { NULL };
  g_autoptr(McpServerConfig) config = mcp_server_config_new ("example", server, args);
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) first = NULL;
  g_autoptr(json_t) tools = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gint64 *warm = g_new (gint64, job->calls);
  gint64 start, cold, total = 0;

  printf (_("Example server: %s\n"), server);

  start = g_get_monotonic_time ();
  session = mcp_session_start (config, NULL, NULL, NULL, &error);
  if (session != NULL)
    first = echo_call (session, 0, &error);
  cold = g_get_monotonic_time () - start;
  if (first == NULL)
    {
      if (session != NULL)
        mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
      return mcp_cli_fail (_("%s\nIs mcp-pool installed (make install), or set MCP_POOL_EXAMPLE_SERVER?"),
                           error->message);
    }

  tools = mcp_session_dup_tools (session);
  printf (_("Cold call (spawn, initialize, tools/list of %zu tools, echo): %.1f ms\n"),
          json_array_size (tools), cold / 1000.0);

  for (int i = 0; i < job->calls; i++)
    {
      g_autoptr(json_t) result = NULL;

      start = g_get_monotonic_time ();
      result = echo_call (session, i + 1, &error);
      warm[i] = g_get_monotonic_time () - start;
      if (result == NULL)
        {
          mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
          return mcp_cli_fail ("%s", error->message);
        }
      total += warm[i];
    }

  qsort (warm, job->calls, sizeof (gint64), compare_gint64);
  printf (_("Warm calls on the same session: %d calls in %.1f ms; "
            "median %.0f µs, 99th percentile %.0f µs\n"),
          job->calls, total / 1000.0, (double) warm[job->calls / 2],
          (double) warm[job->calls * 99 / 100]);
  printf (_("A warm call is %.0f× faster than a cold one. Spawning per call, "
            "these %d calls would have taken about %.1f s.\n"),
          (double) cold / MAX (warm[job->calls / 2], 1), job->calls,
          cold * (double) job->calls / G_USEC_PER_SEC);

  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  return 0;
}

int
mcp_cli_demo (int    argc,
              char **argv)
{
  int calls = 1000;
  GOptionEntry entries[] = {
    { "calls", 'n', 0, G_OPTION_ARG_INT, &calls, N_("Number of warm calls (default 1000)"), N_("N") },
    { NULL }
  };
  g_autoptr(GOptionContext) context =
    mcp_cli_option_context_new (NULL, _("Starts the example server once and compares a cold call with warm calls."));
  DemoJob job;

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!mcp_cli_parse (context, &argc, &argv))
    return 2;
  if (calls < 1)
    return mcp_cli_fail (_("--calls must be at least 1"));

  job.calls = calls;
  return mcp_cli_run_job (run_demo, &job);
}
