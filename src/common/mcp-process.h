/* mcp-process.h — what both programs, mcp-pool and mcp-poold, set up
 * before anything else: translations, Jansson's hash seed, SIGPIPE, and
 * debug logging.
 *
 * Threads: main thread, before any other thread exists.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* First thing in main(): translations, Jansson's seed, SIGPIPE ignored. */
void mcp_process_init        (void);
/* Debug logging on when @verbose or $MCP_POOL_VERBOSE is 1. */
void mcp_process_set_verbose (gboolean verbose);

G_END_DECLS
