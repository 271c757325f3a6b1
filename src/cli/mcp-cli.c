/* mcp-cli.c — what every `mcp-pool` subcommand shares.
 *
 * Sessions read their children on the main context, so a command cannot
 * block the main thread while it waits for a server: the blocking part runs
 * on a worker thread and the main thread runs the loop until it is done.
 */
#include "config.h"

#include "cli/mcp-cli.h"

#include <stdio.h>

#include <glib/gi18n-lib.h>
#include <jansson.h>

typedef struct {
  McpCliJob     job;
  gpointer      user_data;
  int           status;
  gboolean      done;          /* atomic */
  GMainContext *context;
} JobRun;

static gpointer
run_job_thread (gpointer data)
{
  JobRun *run = data;

  run->status = run->job (run->user_data);
  g_atomic_int_set (&run->done, TRUE);
  g_main_context_wakeup (run->context);
  return NULL;
}

int
mcp_cli_run_job (McpCliJob job,
                 gpointer  user_data)
{
  JobRun run = { job, user_data, 0, FALSE, g_main_context_default () };
  GThread *thread = g_thread_new ("mcp-cli-job", run_job_thread, &run);

  while (!g_atomic_int_get (&run.done))
    g_main_context_iteration (run.context, TRUE);
  g_thread_join (thread);
  return run.status;
}

int
mcp_cli_fail (const char *format,
              ...)
{
  va_list args;
  g_autofree char *message = NULL;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  g_printerr ("mcp-pool: %s\n", message);
  return 1;
}

GOptionContext *
mcp_cli_option_context_new (const char *parameters,
                            const char *summary)
{
  GOptionContext *context = g_option_context_new (parameters);

  g_option_context_set_translation_domain (context, GETTEXT_PACKAGE);
  g_option_context_set_summary (context, summary);
  return context;
}

gboolean
mcp_cli_parse (GOptionContext *context,
               int            *argc,
               char         ***argv)
{
  g_autoptr(GError) error = NULL;

  if (g_option_context_parse (context, argc, argv, &error))
    return TRUE;
  g_printerr ("mcp-pool: %s\n", error->message);
  g_printerr (_("Run “mcp-pool %s --help” to see the options.\n"), (*argv)[0]);
  return FALSE;
}
