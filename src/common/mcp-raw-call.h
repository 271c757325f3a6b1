/* mcp-raw-call.h — a tools/call request read without parsing it whole.
 *
 * Most of what a client sends a warm pool is one shape of request:
 *
 *   {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
 *    "params": {"name": "server__tool", "arguments": {…}}}
 *
 * The pool routes it by id and name and hands the arguments to the server
 * unchanged, so parsing them into Jansson values and encoding them again
 * is work with no use: on a warm echo through `serve` it was 45 % of the
 * instructions.  mcp_raw_call_parse() validates the whole line in one scan
 * (mcp-json-scan.h), parses only the id and the name, and keeps the
 * arguments as a span of the line.
 *
 * Only that shape, and a _meta beside (which a request of MCP 2026-07-28
 * always has; it is small and parsed), are taken: params with anything
 * more (a _meta with a progress token, a task) or less (no name), and a
 * line with a carriage return in it, are declined, and the caller parses
 * the line as usual.
 * What is taken means what it would have meant parsed, but for how the
 * arguments are spelt, which is the client's: spaces and numbers as
 * written (1E2, not 100.0), and a member name given twice passed on
 * twice (the parsed path keeps the last; RFC 8259 leaves it open).
 *
 * Pure functions with no state; any thread.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

typedef struct {
  json_t     *id;                /* an integer or a string */
  char       *name;              /* the tool, decoded */
  json_t     *meta;              /* params._meta, parsed (without a progress token); NULL: none */
  const char *arguments;         /* the arguments object's text, inside the line; NULL: none given */
  gsize       arguments_length;
} McpRawCall;

/* The last _meta that a reader's calls carried, as text and parsed: a
 * client's calls repeat theirs byte for byte (a 2026-07-28 client's
 * revision, capabilities and name), and parsing it was most of what such
 * a call cost beyond a handshake client's.  The value is shared with
 * every call read with it, so no one may change a call's meta.  One per
 * reader, used by one thread at a time; zeroed to start, cleared with
 * mcp_raw_meta_cache_clear(). */
typedef struct {
  char   *text;
  gsize   length;
  json_t *meta;
} McpRawMetaCache;

/* TRUE and @call filled in (clear it with mcp_raw_call_clear()) if @line
 * is a tools/call of the shape above; FALSE, with @call untouched, for
 * any other line, valid or not.  @cache may be NULL. */
gboolean mcp_raw_call_parse       (const char      *line,
                                   gsize            length,
                                   McpRawMetaCache *cache,
                                   McpRawCall      *call);
void     mcp_raw_call_clear       (McpRawCall      *call);
void     mcp_raw_meta_cache_clear (McpRawMetaCache *cache);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (McpRawCall, mcp_raw_call_clear)

G_END_DECLS
