/* mcp-protocol.h — the MCP revisions this project speaks.
 *
 * Two eras: the handshake revisions, where a client starts with
 * `initialize` and the answer holds for the connection, and the stateless
 * one (2026-07-28), where every request names its revision and the
 * client's capabilities in its `_meta`. */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

/* Newest first: the first entry is what mcp-pool asks for and offers in
 * a handshake. */
#define MCP_PROTOCOL_VERSION_NEWEST "2025-11-25"
/* The stateless revision. */
#define MCP_PROTOCOL_VERSION_STATELESS "2026-07-28"

/* The `_meta` keys of a stateless request and its result. */
#define MCP_META_PROTOCOL_VERSION    "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CLIENT_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_CLIENT_INFO         "io.modelcontextprotocol/clientInfo"
#define MCP_META_LOG_LEVEL           "io.modelcontextprotocol/logLevel"
#define MCP_META_SERVER_INFO         "io.modelcontextprotocol/serverInfo"
#define MCP_META_SUBSCRIPTION_ID     "io.modelcontextprotocol/subscriptionId"

extern const char * const mcp_protocol_versions[];
/* Every revision, the stateless one first. */
extern const char * const mcp_protocol_versions_all[];

/* A handshake revision. */
gboolean mcp_protocol_version_is_known     (const char *version);
/* A revision of either era. */
gboolean mcp_protocol_version_is_supported (const char *version);
/* What of a request's @meta a front passes on to the server it calls:
 * the OpenTelemetry trace context (traceparent, tracestate, baggage) and
 * a 2026-07-28 client's capabilities, which a 2026-07-28 server asks for
 * input by (the pool passes its InputRequiredResults back to that
 * client).  A new object, or NULL when @meta has none of them. */
json_t  *mcp_protocol_passed_meta          (json_t     *meta);
/* A new object of the multi round-trip retry members of @params
 * (inputResponses, requestState), as they came; NULL if it has none. */
json_t  *mcp_protocol_input_retry          (json_t     *params);
/* Streamable HTTP of 2026-07-28: the params field that a request of
 * @method carries in its Mcp-Name header ("name" for tools/call and
 * prompts/get, "uri" for resources/read, "taskId" for the tasks
 * extension's tasks/get, tasks/update and tasks/cancel), NULL for any
 * other method. */
const char *mcp_protocol_named_field       (const char *method);
/* @value as a header value: itself when it is printable ASCII without
 * leading or trailing spaces, else in the Base64 sentinel
 * (MCP_HEADER_BASE64_PREFIX … MCP_HEADER_BASE64_SUFFIX).  A new string. */
#define MCP_HEADER_BASE64_PREFIX "=?base64?"
#define MCP_HEADER_BASE64_SUFFIX "?="
char       *mcp_protocol_header_value      (const char *value);
/* A header value as it was meant: the Base64 sentinel decoded, any other
 * value as it is (a new string).  NULL when the sentinel holds no strict
 * Base64 (RFC 4648: whole quads, padding only at the end) of UTF-8 text
 * without NUL. */
char       *mcp_protocol_header_decode     (const char *value);
/* The handshake revisions, for a message. */
char    *mcp_protocol_versions_joined      (void);

G_END_DECLS
