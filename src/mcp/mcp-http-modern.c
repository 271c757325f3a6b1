/* mcp-http-modern.c — Streamable HTTP of MCP 2026-07-28: the headers
 * checked against the body (see mcp-http-modern.h). */
#include "config.h"

#include "mcp/mcp-http-modern.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "mcp/mcp-modern.h"
#include "mcp/mcp-upstream.h"

gboolean
mcp_http_modern_is_modern (SoupMessageHeaders *headers,
                           json_t             *body)
{
  const char *header = soup_message_headers_get_one (headers, "MCP-Protocol-Version");

  return (header != NULL && !mcp_protocol_version_is_known (header)) || mcp_modern_version_of (body) != NULL;
}

/* -32020, the reply to @body whose headers say otherwise. */
#define mismatch(body, ...) \
  mcp_upstream_error_reply (json_object_get ((body), "id"), MCP_JSONRPC_HEADER_MISMATCH, __VA_ARGS__)

/* -32020 when Mcp-Name is missing or names another than the body. */
static json_t *
check_name (SoupMessageHeaders *headers,
            json_t             *body)
{
  const char *method = mcp_json_get_string (body, "method");
  const char *header = soup_message_headers_get_one (headers, "Mcp-Name");
  const char *field = mcp_protocol_named_field (method);
  const char *value;
  g_autofree char *decoded = NULL;

  if (field == NULL)
    return NULL;
  value = mcp_json_get_string (json_object_get (body, "params"), field);
  if (header == NULL)
    return mismatch (body, _("Header mismatch: a %s request needs an Mcp-Name header with its params.%s"),
                     method, field);
  decoded = mcp_protocol_header_decode (header);
  if (decoded == NULL)
    return mismatch (body, _("Header mismatch: Mcp-Name “%s” is not valid Base64 of UTF-8 text"), header);
  if (g_strcmp0 (decoded, value) != 0)
    return mismatch (body, _("Header mismatch: Mcp-Name header value “%s” does not match body value “%s”"),
                     decoded, value != NULL ? value : "");
  return NULL;
}

json_t *
mcp_http_modern_refusal (SoupMessageHeaders *headers,
                         json_t             *body)
{
  const char *header = soup_message_headers_get_one (headers, "MCP-Protocol-Version");
  json_t *meta = json_object_get (json_object_get (body, "params"), "_meta");
  const char *version = mcp_json_get_string (meta, MCP_META_PROTOCOL_VERSION);
  const char *method_header = soup_message_headers_get_one (headers, "Mcp-Method");
  const char *method = mcp_json_get_string (body, "method");

  if (header == NULL)
    return mismatch (body, _("Header mismatch: a request of MCP %s needs an MCP-Protocol-Version header "
                             "that says the revision of its _meta"), version);
  /* A revision mcp-pool does not speak is said as such, whatever else. */
  if (!mcp_protocol_version_is_supported (header))
    return mcp_modern_unsupported_version (json_object_get (body, "id"), header);
  if (version == NULL)
    return mcp_jsonrpc_error_new (json_object_get (body, "id"), MCP_JSONRPC_INVALID_PARAMS,
                                  _("A request of MCP " MCP_PROTOCOL_VERSION_STATELESS " names its revision in "
                                    "_meta “" MCP_META_PROTOCOL_VERSION "”, as its MCP-Protocol-Version "
                                    "header does"), NULL);
  if (!g_str_equal (header, version))
    return mismatch (body, _("Header mismatch: MCP-Protocol-Version header value “%s” does not match "
                             "body value “%s” (_meta “" MCP_META_PROTOCOL_VERSION "”)"), header, version);
  if (method_header == NULL)
    return mismatch (body, _("Header mismatch: a request of MCP %s needs an Mcp-Method header with its method"),
                     header);
  if (g_strcmp0 (method_header, method) != 0)
    return mismatch (body, _("Header mismatch: Mcp-Method header value “%s” does not match body value “%s”"),
                     method_header, method);
  return check_name (headers, body) ?: mcp_modern_refusal (body);
}

guint
mcp_http_modern_status (json_t *reply)
{
  json_t *error = json_object_get (reply, "error");

  switch (json_integer_value (json_object_get (error, "code")))
    {
    case MCP_JSONRPC_METHOD_NOT_FOUND:
      return SOUP_STATUS_NOT_FOUND;
    case MCP_JSONRPC_HEADER_MISMATCH:
    case MCP_JSONRPC_MISSING_CAPABILITY:
    case MCP_JSONRPC_UNSUPPORTED_VERSION:
      return SOUP_STATUS_BAD_REQUEST;
    default:
      return SOUP_STATUS_OK;
    }
}
