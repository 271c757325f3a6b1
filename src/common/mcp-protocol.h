/* mcp-protocol.h — the MCP revisions this project speaks. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Newest first: the first entry is what mcp-pool asks for and offers. */
#define MCP_PROTOCOL_VERSION_NEWEST "2025-11-25"

extern const char * const mcp_protocol_versions[];

gboolean mcp_protocol_version_is_known (const char *version);
char    *mcp_protocol_versions_joined  (void);

G_END_DECLS
