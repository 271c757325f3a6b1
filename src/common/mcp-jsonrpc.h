/* mcp-jsonrpc.h — JSON-RPC 2.0 messages on Jansson: classify, build, write.
 *
 * Pure helpers with no state of their own; every function may be called from
 * any thread.  Values passed in are only read (Jansson values are shared
 * read-only between threads in this project).
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC (json_t, json_decref)

/* Standard JSON-RPC and MCP error codes. */
#define MCP_JSONRPC_PARSE_ERROR        (-32700)
#define MCP_JSONRPC_INVALID_REQUEST    (-32600)
#define MCP_JSONRPC_METHOD_NOT_FOUND   (-32601)
#define MCP_JSONRPC_INVALID_PARAMS     (-32602)
#define MCP_JSONRPC_INTERNAL_ERROR     (-32603)
#define MCP_JSONRPC_RESOURCE_NOT_FOUND (-32002)
/* In the implementation-defined range: too many requests in flight, retry
 * later (mcp-pool serve's --max-pending). */
#define MCP_JSONRPC_SERVER_BUSY        (-32000)
/* The errors that MCP 2026-07-28 reserves (-32020 to -32099). */
#define MCP_JSONRPC_HEADER_MISMATCH    (-32020)
#define MCP_JSONRPC_MISSING_CAPABILITY (-32021)
#define MCP_JSONRPC_UNSUPPORTED_VERSION (-32022)

typedef enum {
  MCP_MESSAGE_INVALID,
  MCP_MESSAGE_REQUEST,
  MCP_MESSAGE_NOTIFICATION,
  MCP_MESSAGE_RESPONSE,
} McpMessageKind;

#define MCP_JSONRPC_ERROR (mcp_jsonrpc_error_quark ())
GQuark mcp_jsonrpc_error_quark (void);

typedef enum {
  MCP_JSONRPC_ERROR_PARSE,        /* the line is not a JSON object */
  MCP_JSONRPC_ERROR_WRITE,        /* the peer's pipe failed */
  MCP_JSONRPC_ERROR_WRITE_TIMEOUT,/* the peer did not read in time */
  MCP_JSONRPC_ERROR_ENCODE,       /* the value cannot be serialised */
  MCP_JSONRPC_ERROR_UNSUPPORTED,  /* valid JSON that Jansson cannot hold: NUL in a name */
} McpJsonrpcError;

McpMessageKind mcp_jsonrpc_classify      (json_t       *message);
gboolean       mcp_jsonrpc_id_is_valid   (json_t       *id);
char          *mcp_jsonrpc_id_key        (json_t       *id);
char          *mcp_jsonrpc_integer_id_key (json_int_t   id);

json_t        *mcp_jsonrpc_parse         (const char   *line,
                                          gsize         length,
                                          GError      **error);
/* Only for the id and the shape of a message mcp_jsonrpc_parse() refused
 * as MCP_JSONRPC_ERROR_UNSUPPORTED, so that its sender still gets an
 * answer: its strings are not what was sent. */
json_t        *mcp_jsonrpc_parse_salvaged (const char  *line,
                                           gsize        length);

json_t        *mcp_jsonrpc_request_new      (json_int_t    id,
                                             const char   *method,
                                             json_t       *params);
json_t        *mcp_jsonrpc_notification_new (const char   *method,
                                             json_t       *params);
json_t        *mcp_jsonrpc_result_new       (json_t       *id,
                                             json_t       *result);
json_t        *mcp_jsonrpc_error_new        (json_t       *id,
                                             int           code,
                                             const char   *message,
                                             json_t       *data);

/* One message as one stdio line (compact JSON and '\n'), encoded once. */
GBytes        *mcp_jsonrpc_encode_line   (json_t       *message);
char          *mcp_jsonrpc_to_line       (json_t       *message,
                                          gsize        *length,
                                          GError      **error);
gboolean       mcp_jsonrpc_write_all     (int           fd,
                                          const char   *data,
                                          gsize         length,
                                          gint64        deadline,
                                          GError      **error);
gboolean       mcp_jsonrpc_write_line    (int           fd,
                                          json_t       *message,
                                          gint64        deadline,
                                          GError      **error);

GBytes        *mcp_jsonrpc_splice_reply  (json_t       *id,
                                          const char   *raw_result,
                                          gsize         length);
GBytes        *mcp_jsonrpc_splice_request (json_int_t   id,
                                           const char  *method,
                                           const char  *raw_params,
                                           gsize        length);

const char    *mcp_json_get_string       (json_t       *object,
                                          const char   *key);

G_END_DECLS
