/* main.c — `mcp-pool`: the command-line front of the pool.
 *
 * Picks the subcommand; each subcommand parses its own options.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <glib/gi18n-lib.h>

#include "cli/mcp-cli.h"
#include "common/mcp-process.h"

typedef struct {
  const char    *name;
  McpCliCommand  run;
  const char    *summary;
} Subcommand;

static const Subcommand subcommands[] = {
  { "serve",   mcp_cli_serve,   N_("Serve MCP on stdin/stdout with every server kept warm") },
  { "servers", mcp_cli_servers, N_("List the configured servers and their state") },
  { "tools",   mcp_cli_tools,   N_("List the tools of every server, or of one") },
  { "call",    mcp_cli_call,    N_("Call one tool of a configured server") },
  { "run",     mcp_cli_run,     N_("Run Python in the code sandbox, with tools of the servers") },
  { "evict",   mcp_cli_evict,   N_("Retire a server's session so the next call starts it afresh") },
  { "reload",  mcp_cli_reload,  N_("Make the shared daemon read the config files again") },
  { "auth",    mcp_cli_auth,    N_("Log in to a remote server through the browser, or --logout") },
  { "doctor",  mcp_cli_doctor,  N_("Check bwrap, python3, the config files and every server") },
  { "demo",    mcp_cli_demo,    N_("Show a cold start against warm calls on the example server") },
};

static void
print_usage (FILE *out)
{
  fprintf (out, "%s\n\n", _("Usage: mcp-pool [--version] COMMAND [OPTIONS…]"));
  fprintf (out, "%s\n\n", _("Keeps MCP servers warm: each server starts once and serves every later call."));
  fprintf (out, "%s\n", _("Commands:"));
  for (gsize i = 0; i < G_N_ELEMENTS (subcommands); i++)
    fprintf (out, "  %-8s %s\n", subcommands[i].name, _(subcommands[i].summary));
  fprintf (out, "\n%s\n", _("Run “mcp-pool COMMAND --help” for the options of a command."));
}

int
main (int    argc,
      char **argv)
{
  mcp_process_init ();

  if (argc < 2 || strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0 ||
      strcmp (argv[1], "help") == 0)
    {
      print_usage (argc < 2 ? stderr : stdout);
      return argc < 2 ? 2 : 0;
    }
  if (strcmp (argv[1], "--version") == 0)
    {
      printf ("mcp-pool %s\n", PACKAGE_VERSION);
      return 0;
    }

  for (gsize i = 0; i < G_N_ELEMENTS (subcommands); i++)
    if (strcmp (argv[1], subcommands[i].name) == 0)
      {
        /* So that a command's --help says "mcp-pool serve", not "serve". */
        g_autofree char *name = g_strdup_printf ("mcp-pool %s", argv[1]);

        g_set_prgname (name);
        return subcommands[i].run (argc - 1, argv + 1);
      }

  g_printerr (_("mcp-pool: unknown command “%s”\n\n"), argv[1]);
  print_usage (stderr);
  return 2;
}
