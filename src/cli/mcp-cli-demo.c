/* mcp-pool demo — a newcomer's first run.
 *
 * Runs `mcp-pool serve` as an MCP client would, with the project's example
 * server behind it; times the first call (which starts the server: what a
 * spawn-per-call client pays every time) and many warm calls after it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <unistd.h>

#include <gio/gio.h>
#include <glib/gi18n-lib.h>
#include <glib/gstdio.h>

#include "cli/mcp-cli.h"
#include "common/mcp-jsonrpc.h"
#include "pool/mcp-session.h"

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

/* A config file with the example server, for the serve under test. */
static char *
write_demo_config (const char  *server,
                   GError     **error)
{
  g_autoptr(json_t) config = json_pack ("{s:{s:{s:s, s:s}}}", "mcpServers", "example",
                                        "command", server,
                                        "description", "mcp-pool's example server");
  g_autofree char *path = NULL;
  int fd = g_file_open_tmp ("mcp-pool-demo-XXXXXX.json", &path, error);

  if (fd < 0)
    return NULL;
  close (fd);
  if (json_dump_file (config, path, JSON_INDENT (2)) != 0)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED, _("Could not write %s"), path);
      return NULL;
    }
  return g_steal_pointer (&path);
}

static json_t *
echo_call (McpSession  *session,
           int          index,
           GError     **error)
{
  g_autofree char *text = g_strdup_printf ("hello %d", index);
  g_autoptr(json_t) params = json_pack ("{s:s, s:{s:s, s:s, s:{s:s}}}", "name", "call_tool",
                                        "arguments", "server", "example", "tool", "echo",
                                        "arguments", "message", text);
  json_t *result = mcp_session_call (session, "tools/call", params, 0, error);

  if (result != NULL && json_is_true (json_object_get (result, "isError")))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s",
                   mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text"));
      g_clear_pointer (&result, json_decref);
    }
  return result;
}

static int
compare_gint64 (gconstpointer a,
                gconstpointer b)
{
  gint64 x = *(const gint64 *) a, y = *(const gint64 *) b;

  return (x > y) - (x < y);
}

/* Code execution mode: one run_python whose code makes five tool calls at
 * once from inside the sandbox. */
static void
show_code_mode (McpSession *session)
{
  static const char code[] =
    "import asyncio\n"
    "replies = await asyncio.gather(*(mcp_example.echo(message=f'call {i}') for i in range(5)))\n"
    "print(len(replies), 'tool calls from inside the sandbox, e.g.', replies[0]['content'][0]['text'])\n";
  g_autoptr(json_t) params = json_pack ("{s:s, s:{s:s, s:[s]}}", "name", "run_python",
                                        "arguments", "code", code, "servers", "example");
  g_autoptr(GError) error = NULL;
  g_autoptr(json_t) result = NULL;
  gint64 start = g_get_monotonic_time ();

  result = mcp_session_call (session, "tools/call", params, 0, &error);
  if (result == NULL || json_is_true (json_object_get (result, "isError")))
    {
      printf (_("\nrun_python is not available here: %s\n"),
              result ? mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text")
                     : error->message);
      return;
    }
  printf (_("\nrun_python, code in a bubblewrap sandbox (%.1f ms):\n  %s"),
          (g_get_monotonic_time () - start) / 1000.0,
          mcp_json_get_string (json_array_get (json_object_get (result, "content"), 0), "text"));
  putchar ('\n');
}

/* Drives `mcp-pool serve` over its stdio exactly as an MCP client does,
 * with McpSession as the client. */
static int
run_demo (gpointer data)
{
  DemoJob *job = data;
  g_autofree char *server = find_example_server ();
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *config_path = NULL;
  g_autoptr(McpServerConfig) config = NULL;
  g_autoptr(McpSession) session = NULL;
  g_autoptr(json_t) first = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree gint64 *warm = g_new (gint64, job->calls);
  gint64 start, handshake, cold, total = 0;

  config_path = write_demo_config (server, &error);
  if (config_path == NULL)
    return mcp_cli_fail ("%s", error->message);
  config = mcp_server_config_new ("mcp-pool serve", self,
                                  (const char *[]) { "serve", "--expose", "gateway,code",
                                                     "--config", config_path, NULL });
  /* The demo is serve's client, as a terminal user would be: not a pool. */
  config->client_environment = TRUE;

  printf (_("A client starts “mcp-pool serve --expose gateway,code” and talks MCP to it over stdio,\n"
            "as Claude Desktop or an IDE would. Behind it: the example server %s.\n\n"), server);

  start = g_get_monotonic_time ();
  session = mcp_session_start (config, NULL, NULL, NULL, &error);
  handshake = g_get_monotonic_time () - start;
  if (session != NULL)
    {
      start = g_get_monotonic_time ();
      first = echo_call (session, 0, &error);
      cold = g_get_monotonic_time () - start;
    }
  if (first == NULL)
    {
      if (session != NULL)
        mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
      g_unlink (config_path);
      return mcp_cli_fail (_("%s\nIs mcp-pool installed (make install), or set MCP_POOL_EXAMPLE_SERVER?"),
                           error->message);
    }

  printf (_("mcp-pool serve ready (spawn, initialize, tools/list):  %8.1f ms\n"), handshake / 1000.0);
  printf (_("First call — mcp-pool starts the example server:      %8.1f ms\n"), cold / 1000.0);

  for (int i = 0; i < job->calls; i++)
    {
      g_autoptr(json_t) result = NULL;

      start = g_get_monotonic_time ();
      result = echo_call (session, i + 1, &error);
      warm[i] = g_get_monotonic_time () - start;
      if (result == NULL)
        {
          mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
          g_unlink (config_path);
          return mcp_cli_fail ("%s", error->message);
        }
      total += warm[i];
    }

  qsort (warm, job->calls, sizeof (gint64), compare_gint64);
  printf (_("%d warm calls on the same server:  median %.0f µs, 99th percentile %.0f µs, %.1f ms in all\n"),
          job->calls, (double) warm[job->calls / 2], (double) warm[job->calls * 99 / 100], total / 1000.0);
  printf (_("\nA warm call is %.0f× faster than the first. A client that spawns the server for every\n"
            "call would have spent about %.1f s on these %d calls.\n"),
          (double) cold / MAX (warm[job->calls / 2], 1),
          cold * (double) job->calls / G_USEC_PER_SEC, job->calls);

  show_code_mode (session);
  mcp_session_shutdown (session, MCP_SESSION_STDIN_GRACE, MCP_SESSION_TERM_GRACE);
  g_unlink (config_path);
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
    mcp_cli_option_context_new (NULL, _("Runs mcp-pool serve as an MCP client would and compares the first call "
                                          "(which starts the example server) with warm calls."));
  DemoJob job;

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!mcp_cli_parse (context, &argc, &argv))
    return 2;
  if (calls < 1)
    return mcp_cli_fail (_("--calls must be at least 1"));

  job.calls = calls;
  return mcp_cli_run_job (run_demo, &job);
}
