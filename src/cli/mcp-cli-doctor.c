/* mcp-cli-doctor.c — `mcp-pool doctor`: checks everything mcp-pool depends
 * on and says, for each thing that fails, why. */
#include "config.h"

#include <stdio.h>

#include <glib/gi18n-lib.h>

#include "cli/mcp-cli.h"
#include "sandbox/mcp-sandbox.h"
#include "common/mcp-spawner.h"

#define CHECK_TIMEOUT_US (10 * G_USEC_PER_SEC)

typedef struct {
  McpCliCommon *common;
  int           failures;
} DoctorJob;

static void
report (DoctorJob  *job,
        gboolean    ok,
        const char *what,
        const char *detail)
{
  printf ("%s %s%s%s\n", ok ? "[ ok ]" : "[FAIL]", what, detail ? ": " : "", detail ? detail : "");
  if (!ok)
    job->failures++;
}

/* Runs a command; on failure returns FALSE with what it printed.  Through
 * the spawner, so that whatever it leaves behind (bwrap's sandbox) is
 * reaped with its process group. */
static gboolean
run_check (const char * const  *argv,
           char               **output)
{
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr(GError) error = NULL;
  int status = 0;

  if (!mcp_spawner_run_sync (argv, CHECK_TIMEOUT_US, &out, &err, &status, &error))
    {
      *output = g_strdup (error->message);
      return FALSE;
    }
  *output = g_strstrip (g_strdup (g_spawn_check_wait_status (status, NULL) ? out : err));
  return g_spawn_check_wait_status (status, NULL);
}

/* Starts a real sandbox, with every option run_python uses, so that what
 * doctor approves is what runs. */
static void
check_sandbox_tools (DoctorJob *job)
{
  const char * const python_argv[] = { PYTHON3_PATH, "--version", NULL };
  McpSandboxLimits limits = { 0 };
  g_autoptr(GError) error = NULL;
  g_autofree char *python_output = NULL;
  McpSandbox *sandbox = mcp_sandbox_start (&limits, NULL, &error);
  gboolean python_ok;

  report (job, sandbox != NULL, _("bubblewrap sandbox"),
          sandbox != NULL ? _("starts, with namespaces, seccomp and the Python runtime") : error->message);
  mcp_sandbox_free (sandbox);

  python_ok = run_check (python_argv, &python_output);
  report (job, python_ok, PYTHON3_PATH, python_output);
}

static void
check_sources (DoctorJob    *job,
               McpDiscovery *discovery)
{
  for (guint i = 0; i < discovery->sources->len; i++)
    {
      McpConfigSource *source = g_ptr_array_index (discovery->sources, i);
      g_autofree char *what = g_strdup_printf ("%s (%s)", source->path, source->label);
      g_autofree char *detail = NULL;

      switch (source->status)
        {
        case MCP_SOURCE_LOADED:
          detail = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%u server", "%u servers",
                                                 source->n_servers), source->n_servers);
          report (job, TRUE, what, detail);
          break;
        case MCP_SOURCE_MISSING:
          printf ("[ -- ] %s: %s\n", what, _("not present"));
          break;
        case MCP_SOURCE_FAILED:
        default:
          report (job, FALSE, what, source->error);
          break;
        }
    }
  for (guint i = 0; i < discovery->skipped->len; i++)
    {
      McpSkippedServer *skipped = g_ptr_array_index (discovery->skipped, i);

      printf ("[skip] %s: %s\n", skipped->name, skipped->reason);
    }
  /* Not failures: the server may start all the same, but likely not as meant. */
  for (guint i = 0; i < discovery->servers->len; i++)
    {
      McpServerConfig *config = g_ptr_array_index (discovery->servers, i);

      for (char **warning = config->warnings; warning != NULL && *warning != NULL; warning++)
        printf ("[warn] %s\n", *warning);
    }
}

typedef struct {
  McpPool    *pool;
  const char *server;
  gint64      elapsed;
  GError     *error;
} StartCheck;

static gpointer
start_one (gpointer data)
{
  StartCheck *check = data;
  gint64 start = g_get_monotonic_time ();

  mcp_pool_start_server (check->pool, check->server, &check->error);
  check->elapsed = g_get_monotonic_time () - start;
  return NULL;
}

/* Every server at once, as a pool would; each with its own verdict. */
static void
check_servers (DoctorJob  *job,
               McpCliPool *cli)
{
  g_autoptr(GPtrArray) servers = mcp_pool_list_servers (cli->pool);
  g_autofree StartCheck *checks = g_new0 (StartCheck, servers->len);
  g_autoptr(GPtrArray) threads = g_ptr_array_new ();

  for (guint i = 0; i < servers->len; i++)
    {
      checks[i] = (StartCheck) { cli->pool, ((McpServerInfo *) g_ptr_array_index (servers, i))->name };
      g_ptr_array_add (threads, g_thread_new ("mcp-doctor", start_one, &checks[i]));
    }
  for (guint i = 0; i < threads->len; i++)
    g_thread_join (g_ptr_array_index (threads, i));

  g_clear_pointer (&servers, g_ptr_array_unref);
  servers = mcp_pool_list_servers (cli->pool);
  for (guint i = 0; i < servers->len; i++)
    {
      McpServerInfo *info = g_ptr_array_index (servers, i);
      StartCheck *check = &checks[i];
      g_autoptr(McpServerConfig) config = mcp_pool_dup_config (cli->pool, info->name, NULL);
      g_autofree char *remote = mcp_server_config_remote_summary (config);
      g_autofree char *what = remote != NULL ? g_strdup_printf (_("server “%s” (%s)"), info->name, remote)
                                             : g_strdup_printf (_("server “%s”"), info->name);
      g_autofree char *detail = NULL;

      if (check->error == NULL)
        detail = g_strdup_printf (_("started in %.0f ms, %d tools"), check->elapsed / 1000.0, info->n_tools);
      report (job, check->error == NULL, what, check->error ? check->error->message : detail);
      g_clear_error (&check->error);
    }
  if (servers->len == 0)
    printf ("[ -- ] %s\n", _("no server is configured"));
}

/* The last line of the report; the exit status. */
static int
report_verdict (DoctorJob *job)
{
  if (job->failures > 0)
    {
      printf ("\n%s\n", g_dngettext (GETTEXT_PACKAGE, "One check failed.", "Some checks failed.",
                                     job->failures));
      return 1;
    }
  printf ("\n%s\n", _("Everything works."));
  return 0;
}

static int
run_doctor (gpointer data)
{
  DoctorJob *job = data;
  g_autoptr(McpDiscovery) discovery = NULL;
  McpCliPool *cli;
  int status;

  printf ("%s\n", _("Code execution sandbox:"));
  check_sandbox_tools (job);
  printf ("\n%s\n", _("Config sources, in the order they are read:"));
  discovery = mcp_cli_discover (job->common);
  check_sources (job, discovery);
  printf ("\n%s\n", _("Servers:"));
  cli = mcp_cli_pool_new (discovery);
  check_servers (job, cli);
  /* The whole report is out before the servers are ended. */
  status = report_verdict (job);
  mcp_cli_pool_free (cli);
  return status;
}

int
mcp_cli_doctor (int    argc,
                char **argv)
{
  g_auto(McpCliCommon) common = { 0 };
  g_autoptr(GOptionContext) context =
    mcp_cli_option_context_new (NULL, _("Checks bubblewrap, python3, every config source and "
                                        "every server's start, with the reason when one fails."));
  DoctorJob job = { &common, 0 };

  mcp_cli_add_common_options (context, &common);
  if (!mcp_cli_parse (context, &argc, &argv))
    return 2;
  return mcp_cli_run_job (run_doctor, &job);
}
