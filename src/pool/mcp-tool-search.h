/* mcp-tool-search.h — ranking tools against a free-text query, and the
 * arguments of a search or a description as clients send them.
 *
 * Pure functions on Jansson values; any thread.  A tool scores by how well
 * the query's words match its name (most), its server's name, and its
 * description, with a bonus for each distinct word matched, so that a tool
 * matching every word outranks one that matches a single word strongly.
 *
 * The gateway's search_tools/describe_tool and the sandbox's
 * search_tool_docs/query_tool_docs read their arguments here, so that both
 * have one limit and one wording for each mistake.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pool/mcp-pool.h"

G_BEGIN_DECLS

/* How many tools a search returns without a "limit", and at most. */
#define MCP_TOOL_SEARCH_LIMIT_DEFAULT 10
#define MCP_TOOL_SEARCH_LIMIT_MAX     50

#define MCP_TOOL_SEARCH_ERROR (mcp_tool_search_error_quark ())
GQuark mcp_tool_search_error_quark (void);

typedef enum {
  MCP_TOOL_SEARCH_ERROR_INVALID_ARGUMENT,  /* the message names the argument and what it takes */
} McpToolSearchError;

/* A search's arguments; the strings belong to the arguments read. */
typedef struct {
  const char    *query;
  guint          limit;
  McpToolDetail  detail;
} McpToolSearchRequest;

/* A description's arguments; @tool is NULL where it may be left out and
 * was.  The strings belong to the arguments read. */
typedef struct {
  const char    *server;
  const char    *tool;
  McpToolDetail  detail;
} McpToolDescribeRequest;

/* {query, limit?, detail?}: a non-empty query, a limit from 1 (past the
 * maximum, the maximum), detail "summary" or "full".  A missing or null
 * optional argument takes its default.  @arguments may be NULL. */
gboolean mcp_tool_search_read_request   (json_t                  *arguments,
                                         McpToolSearchRequest    *request,
                                         GError                 **error);
/* {server, tool, detail?}; with @tool_required FALSE the tool may be left
 * out (the caller then describes every tool of the server). */
gboolean mcp_tool_describe_read_request (json_t                  *arguments,
                                         gboolean                 tool_required,
                                         McpToolDescribeRequest  *request,
                                         GError                 **error);

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
