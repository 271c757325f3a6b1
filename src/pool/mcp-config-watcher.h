/* mcp-config-watcher.h — runs discovery again when a config file changes.
 *
 * The watcher monitors every watch path of the last discovery (the nearest
 * existing folder when a path does not exist yet, so that a file or folder
 * that appears is seen), waits until the files have been quiet for 200 ms,
 * then runs mcp_config_discover() and hands the result to on_change.
 *
 * Threads: a watcher belongs to the thread that runs its GMainContext.
 * Create it, and free it, on that thread (or before anyone runs the
 * context); every callback runs there.  Discovery reads a few small files,
 * which is short enough to do on the main context.
 *
 * No change is lost if the watcher is created before the caller's first
 * mcp_config_discover() call.
 */
#pragma once

#include <glib.h>

#include "pool/mcp-config-discovery.h"

G_BEGIN_DECLS

/* @discovery is transfer full: the callee owns it and frees it with
 * mcp_discovery_free().  The callback may free the watcher. */
typedef void (*McpDiscoveryFunc) (McpDiscovery *discovery,
                                  gpointer      user_data);

typedef struct _McpConfigWatcher McpConfigWatcher;

#define MCP_CONFIG_WATCHER_DEBOUNCE_MS 200

McpConfigWatcher *mcp_config_watcher_new   (const McpDiscoveryOptions *options,
                                            GMainContext              *context,
                                            McpDiscoveryFunc           on_change,
                                            gpointer                   user_data);
void              mcp_config_watcher_free  (McpConfigWatcher          *watcher);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpConfigWatcher, mcp_config_watcher_free)

G_END_DECLS
