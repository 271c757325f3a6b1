/* mcp-protocol.c — the MCP revisions this project speaks: the handshake
 * era (every revision that starts with `initialize`) and the stateless
 * revision. */
#include "config.h"

#include "common/mcp-protocol.h"

#include <string.h>

const char * const mcp_protocol_versions[] = {
  MCP_PROTOCOL_VERSION_NEWEST,
  "2025-06-18",
  "2025-03-26",
  "2024-11-05",
  NULL,
};

const char * const mcp_protocol_versions_all[] = {
  MCP_PROTOCOL_VERSION_STATELESS,
  MCP_PROTOCOL_VERSION_NEWEST,
  "2025-06-18",
  "2025-03-26",
  "2024-11-05",
  NULL,
};

gboolean
mcp_protocol_version_is_known (const char *version)
{
  return version != NULL && g_strv_contains (mcp_protocol_versions, version);
}

json_t *
mcp_protocol_passed_meta (json_t *meta)
{
  static const char * const keys[] = { "traceparent", "tracestate", "baggage", MCP_META_CLIENT_CAPABILITIES };
  json_t *context = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (keys); i++)
    {
      json_t *value = json_object_get (meta, keys[i]);

      if (g_str_equal (keys[i], MCP_META_CLIENT_CAPABILITIES) ? !json_is_object (value) : !json_is_string (value))
        continue;
      if (context == NULL)
        context = json_object ();
      json_object_set (context, keys[i], value);
    }
  return context;
}

json_t *
mcp_protocol_input_retry (json_t *params)
{
  static const char * const keys[] = { "inputResponses", "requestState" };
  json_t *retry = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (keys); i++)
    {
      json_t *value = json_object_get (params, keys[i]);

      if (value == NULL)
        continue;
      if (retry == NULL)
        retry = json_object ();
      json_object_set (retry, keys[i], value);
    }
  return retry;
}

gboolean
mcp_protocol_version_is_supported (const char *version)
{
  return version != NULL && g_strv_contains (mcp_protocol_versions_all, version);
}

char *
mcp_protocol_versions_joined (void)
{
  return g_strjoinv (", ", (char **) mcp_protocol_versions);
}

const char *
mcp_protocol_named_field (const char *method)
{
  static const struct { const char *method, *field; } named[] = {
    { "tools/call", "name" }, { "prompts/get", "name" }, { "resources/read", "uri" },
    /* The tasks extension's (io.modelcontextprotocol/tasks). */
    { "tasks/get", "taskId" }, { "tasks/update", "taskId" }, { "tasks/cancel", "taskId" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (named); i++)
    if (g_strcmp0 (method, named[i].method) == 0)
      return named[i].field;
  return NULL;
}

char *
mcp_protocol_header_value (const char *value)
{
  gsize length = strlen (value);
  gboolean plain = length > 0 && value[0] != ' ' && value[length - 1] != ' ' &&
                   !g_str_has_prefix (value, MCP_HEADER_BASE64_PREFIX);
  g_autofree char *encoded = NULL;

  for (const char *p = value; plain && *p != '\0'; p++)
    plain = g_ascii_isprint (*p);
  if (plain)
    return g_strdup (value);
  encoded = g_base64_encode ((const guchar *) value, length);
  return g_strconcat (MCP_HEADER_BASE64_PREFIX, encoded, MCP_HEADER_BASE64_SUFFIX, NULL);
}

/* Whether @text (@length bytes) is strict Base64. */
static gboolean
is_strict_base64 (const char *text,
                  gsize       length)
{
  gsize padding = 0;

  if (length == 0 || length % 4 != 0)
    return FALSE;
  for (gsize i = 0; i < length; i++)
    {
      char c = text[i];

      if (c == '=')
        padding++;
      else if (padding > 0 || !(g_ascii_isalnum (c) || c == '+' || c == '/'))
        return FALSE;
    }
  return padding <= 2;
}

char *
mcp_protocol_header_decode (const char *value)
{
  gsize length = strlen (value), inner_length, decoded_length;
  const gsize prefix = strlen (MCP_HEADER_BASE64_PREFIX), suffix = strlen (MCP_HEADER_BASE64_SUFFIX);
  g_autofree char *inner = NULL;
  g_autofree guchar *decoded = NULL;

  if (length < prefix + suffix || !g_str_has_prefix (value, MCP_HEADER_BASE64_PREFIX) ||
      !g_str_has_suffix (value, MCP_HEADER_BASE64_SUFFIX))
    return g_strdup (value);
  inner_length = length - prefix - suffix;
  inner = g_strndup (value + prefix, inner_length);
  if (!is_strict_base64 (inner, inner_length))
    return NULL;
  decoded = g_base64_decode (inner, &decoded_length);
  if (!g_utf8_validate ((const char *) decoded, decoded_length, NULL) ||
      memchr (decoded, '\0', decoded_length) != NULL)
    return NULL;
  return g_strndup ((const char *) decoded, decoded_length);
}
