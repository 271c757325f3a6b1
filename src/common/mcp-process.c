/* mcp-process.c — the process-wide setup of mcp-pool and mcp-poold. */
#include "config.h"

#include "common/mcp-process.h"

#include <locale.h>
#include <signal.h>

#include <glib/gi18n-lib.h>
#include <jansson.h>

void
mcp_process_init (void)
{
  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  /* Once, before any thread exists (Jansson's hash seed is global). */
  json_object_seed (0);
  /* A peer that goes away (a server, the client) makes writes fail with
   * EPIPE; it must never kill mcp-pool. */
  signal (SIGPIPE, SIG_IGN);
}

void
mcp_process_set_verbose (gboolean verbose)
{
  /* MCP_BRIDGE_LOG_LEVEL=DEBUG is the seed bridge's way to ask. */
  if (verbose || g_strcmp0 (g_getenv ("MCP_POOL_VERBOSE"), "1") == 0 ||
      g_ascii_strcasecmp (g_getenv ("MCP_BRIDGE_LOG_LEVEL") ?: "", "debug") == 0)
    g_log_set_debug_enabled (TRUE);
}
