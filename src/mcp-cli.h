/* mcp-cli.h — what every `mcp-pool` subcommand shares: running blocking
 * work off the main thread while the main context does the I/O, and
 * reporting errors. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* A subcommand: parses its own options from @argv (argv[0] is the
 * subcommand's name) and returns the process exit status. */
typedef int (*McpCliCommand) (int argc, char **argv);

/* Blocking work that returns an exit status. */
typedef int (*McpCliJob) (gpointer user_data);

/* Main thread only: runs @job on a worker thread and iterates the default
 * main context until it returns; returns the job's status. */
int   mcp_cli_run_job         (McpCliJob     job,
                               gpointer      user_data);
int   mcp_cli_fail            (const char   *format,
                               ...) G_GNUC_PRINTF (1, 2);
GOptionContext *mcp_cli_option_context_new (const char *parameters,
                                            const char *summary);
gboolean mcp_cli_parse        (GOptionContext *context,
                               int            *argc,
                               char         ***argv);

int   mcp_cli_demo            (int argc, char **argv);
int   mcp_cli_call            (int argc, char **argv);

G_END_DECLS
