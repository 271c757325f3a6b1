/* mcp-param-headers.h — the Mcp-Param-* headers of Streamable HTTP
 * (MCP 2026-07-28, SEP-2243): tool parameters that a server's
 * inputSchema marks with `x-mcp-header`, mirrored into headers so that
 * intermediaries can route on them without reading the body.
 *
 * An annotation is valid when its value is a non-empty HTTP token
 * (RFC 9110 tchar), unique among the schema's without regard to case, on
 * a property of type string, integer or boolean, reached from the root
 * through `properties` alone (not through items, composition, conditions
 * or $ref).  A client over HTTP leaves out a tool with an invalid one;
 * for a call it sends one header per annotated value present in the
 * arguments (strings as they are, integers in decimal, booleans as
 * true/false, in the Base64 sentinel when need be); a server checks each
 * against the body.
 *
 * Pure functions, any thread.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

#define MCP_PARAM_HEADER_PREFIX "Mcp-Param-"

/* NULL when @input_schema's annotations are valid (or there are none),
 * else a new string that says which one is not and why. */
char      *mcp_param_headers_problem  (json_t     *input_schema);

/* Whether @input_schema marks any parameter with x-mcp-header. */
gboolean   mcp_param_headers_marks    (json_t     *input_schema);

/* The headers of a call with @arguments of a tool with the valid
 * @input_schema: a new array of names ("Mcp-Param-Region") and values,
 * one after the other; empty when none applies. */
GPtrArray *mcp_param_headers_for_call (json_t     *input_schema,
                                       json_t     *arguments);

/* Reads the request's header @name (NULL: absent). */
typedef const char *(*McpHeaderLookup) (const char *name,
                                        gpointer    user_data);

/* A server's check of a call: NULL when every annotated value of
 * @arguments has its header and each header its value (after decoding),
 * else a new string naming the first that does not. */
char      *mcp_param_headers_mismatch (json_t         *input_schema,
                                       json_t         *arguments,
                                       McpHeaderLookup lookup,
                                       gpointer        user_data);

G_END_DECLS
