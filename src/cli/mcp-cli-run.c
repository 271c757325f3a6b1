/* mcp-cli-run.c — `mcp-pool run [FILE | -] [--servers a,b]`: code
 * execution mode from a terminal, the same sandbox as run_python. */
#include "config.h"

#include <stdio.h>

#include <glib/gi18n-lib.h>

#include "cli/mcp-cli.h"
#include "sandbox/mcp-code.h"
#include "common/mcp-jsonrpc.h"

/* The exit status of a run that hit its time limit, as timeout(1) uses. */
#define EXIT_TIMEOUT 124
/* ... and of one stopped for its memory: what a shell reports for a
 * process the kernel's OOM killer ended (128 + SIGKILL). */
#define EXIT_MEMORY  137

typedef struct {
  McpCliCommon *common;
  char         *source;
  char         *servers;
  double        timeout_s;
} RunJob;

/* Prints what the code printed (@run, a record of mcp-run-format.h); the
 * exit status of the run. */
static int
report_run (json_t *run)
{
  const char *status = mcp_json_get_string (run, "status");

  if (mcp_json_get_string (run, "stdout") == NULL)
    return mcp_cli_fail ("%s", mcp_json_get_string (run, "error") ?: _("the run failed"));
  fputs (mcp_json_get_string (run, "stdout"), stdout);
  fputs (mcp_json_get_string (run, "stderr"), stderr);
  if (g_strcmp0 (status, "timeout") == 0)
    {
      g_printerr (_("mcp-pool run: the code ran out of time and was stopped\n"));
      return EXIT_TIMEOUT;
    }
  if (g_strcmp0 (status, "memory") == 0)
    {
      g_printerr (_("mcp-pool run: the code used more memory than a run may hold and was stopped\n"));
      return EXIT_MEMORY;
    }
  return (int) json_integer_value (json_object_get (run, "exit_code"));
}

static int
run_code (gpointer data)
{
  RunJob *job = data;
  g_auto(GStrv) names = g_strsplit (job->servers ? job->servers : "", ",", -1);
  g_autoptr(json_t) arguments = json_pack ("{s:s, s:[]}", "code", job->source, "servers");
  g_autoptr(json_t) result = NULL;

  for (char **name = names; *name != NULL; name++)
    if (g_strstrip (*name)[0] != '\0')
      json_array_append_new (json_object_get (arguments, "servers"), json_string (*name));
  /* run_python takes whole seconds: a part of one is a second more. */
  if (job->timeout_s > 0)
    json_object_set_new (arguments, "timeout",
                         json_integer ((json_int_t) job->timeout_s + (job->timeout_s > (json_int_t) job->timeout_s)));

  if (job->common->shared)
    {
      g_autoptr(McpRemote) remote = mcp_cli_remote_new (job->common);
      g_autoptr(GError) error = NULL;

      if (remote == NULL)
        return 1;
      result = mcp_remote_run_python (remote, arguments, NULL, &error);
      if (result == NULL)
        return mcp_cli_fail ("%s", error->message);
      return report_run (result);
    }
  else
    {
      g_autoptr(McpDiscovery) discovery = mcp_cli_discover (job->common);
      McpCliPool *cli = mcp_cli_pool_new (discovery);
      McpCodeOptions options = { .keep_warm = FALSE };
      McpCode *code = mcp_code_new (cli->pool, NULL, &options);
      int exit_status;

      /* What the code printed is out before the servers are ended. */
      result = mcp_code_run (code, arguments, NULL);
      exit_status = report_run (result);
      mcp_code_free (code);
      mcp_cli_pool_free (cli);
      return exit_status;
    }
}

int
mcp_cli_run (int    argc,
             char **argv)
{
  g_auto(McpCliCommon) common = { 0 };
  g_autofree char *servers = NULL;
  g_auto(GStrv) rest = NULL;
  g_autoptr(GError) error = NULL;
  double timeout_s = 0;
  GOptionEntry entries[] = {
    { "servers", 's', 0, G_OPTION_ARG_STRING, &servers,
      N_("Servers the code may call, comma-separated"), N_("LIST") },
    { "run-timeout", 0, 0, G_OPTION_ARG_DOUBLE, &timeout_s,
      N_("Seconds before the sandbox is killed (default 30, at most 120)"), N_("S") },
    { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &rest, NULL, NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) context =
    mcp_cli_option_context_new (_("[FILE | -]"), _("Runs Python in the code sandbox, as run_python "
                                                   "does; the code calls tools with "
                                                   "await mcp_<server>.<tool>(…)."));
  RunJob job = { &common };
  const char *file;

  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  mcp_cli_add_common_options (context, &common);
  mcp_cli_add_shared_option (context, &common);
  if (!mcp_cli_parse (context, &argc, &argv))
    return 2;
  file = rest != NULL && rest[0] != NULL ? rest[0] : "-";

  if (g_str_equal (file, "-"))
    {
      g_autoptr(GIOChannel) input = g_io_channel_unix_new (0);
      gsize length;

      if (g_io_channel_read_to_end (input, &job.source, &length, &error) != G_IO_STATUS_NORMAL)
        return mcp_cli_fail (_("Could not read the code from stdin: %s"), error->message);
    }
  else if (!g_file_get_contents (file, &job.source, NULL, &error))
    return mcp_cli_fail ("%s", error->message);

  job.servers = servers;
  job.timeout_s = timeout_s;
  {
    int status = mcp_cli_run_job (run_code, &job);
    g_free (job.source);
    return status;
  }
}
