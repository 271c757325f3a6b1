/* mcp-tool-search.h — ranking tools against a free-text query.
 *
 * Pure functions on Jansson values; any thread.  A tool scores by how well
 * the query's words match its name (most), its server's name, and its
 * description, with a bonus for each distinct word matched, so that a tool
 * matching every word outranks one that matches a single word strongly.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

/* @tools: an array of tool objects, each with "name", "description" and
 * "server".  Returns a new array of the matching tools (the same objects,
 * referenced), best first, at most @limit (0: no limit).  An empty query
 * matches every tool. */
json_t *mcp_tool_search_rank  (json_t     *tools,
                               const char *query,
                               guint       limit);

int     mcp_tool_search_score (json_t     *tool,
                               char      **query_words);
char  **mcp_tool_search_words (const char *text);

G_END_DECLS
