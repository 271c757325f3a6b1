/* mcp-transport.c — the seam's functions, dispatched to the kind of
 * transport, and the choice of the kind for a config. */
#include "config.h"

#include "transport/mcp-transport.h"

#include "common/mcp-jsonrpc.h"

#include "transport/mcp-http-transport.h"
#include "transport/mcp-stdio-transport.h"

G_DEFINE_QUARK (mcp-transport-error-quark, mcp_transport_error)

McpTransport *
mcp_transport_new_for_config (McpServerConfig         *config,
                              GMainContext            *context,
                              const McpTransportFuncs *funcs,
                              gpointer                 user_data,
                              GError                 **error)
{
  if (config->transport == MCP_TRANSPORT_STDIO)
    return mcp_stdio_transport_new (config, context, funcs, user_data, error);
  return mcp_http_transport_new (config, context, funcs, user_data, error);
}

void
mcp_transport_init (McpTransport            *transport,
                    const McpTransportClass *klass,
                    const McpTransportFuncs *funcs,
                    gpointer                 user_data)
{
  transport->klass = klass;
  transport->funcs = *funcs;
  transport->user_data = user_data;
}

void
mcp_transport_report_end (McpTransport *transport,
                          gint          code,
                          const char   *format,
                          ...)
{
  va_list args;
  GError *reason;

  va_start (args, format);
  reason = g_error_new_valist (MCP_TRANSPORT_ERROR, code, format, args);
  va_end (args);
  g_debug ("%s", reason->message);

  if (g_atomic_int_compare_and_exchange (&transport->end_reported, FALSE, TRUE))
    transport->funcs.on_closed (reason, transport->user_data);
  else
    g_error_free (reason);
}

void
mcp_transport_silence_end (McpTransport *transport)
{
  g_atomic_int_set (&transport->end_reported, TRUE);
}

gboolean
mcp_transport_send (McpTransport  *transport,
                    json_t        *message,
                    GError       **error)
{
  return transport->klass->send (transport, message, error);
}

gboolean
mcp_transport_send_line (McpTransport  *transport,
                         GBytes        *line,
                         GError       **error)
{
  gsize length;
  const char *text = g_bytes_get_data (line, &length);
  g_autoptr(json_t) message = NULL;

  if (transport->klass->send_line != NULL)
    return transport->klass->send_line (transport, line, error);
  message = mcp_jsonrpc_parse (text, length, error);
  return message != NULL && transport->klass->send (transport, message, error);
}

GPid
mcp_transport_get_pid (McpTransport *transport)
{
  return transport->klass->get_pid (transport);
}

char *
mcp_transport_dup_log_tail (McpTransport *transport,
                            gsize         max_bytes)
{
  return transport->klass->dup_log_tail (transport, max_bytes);
}

char *
mcp_transport_describe_end (McpTransport *transport,
                            gint64        wait_us)
{
  return transport->klass->describe_end (transport, wait_us);
}

void
mcp_transport_wait_log_end (McpTransport *transport,
                            gint64        wait_us)
{
  transport->klass->wait_log_end (transport, wait_us);
}

void
mcp_transport_close (McpTransport *transport,
                     gint64        stdin_grace,
                     gint64        term_grace)
{
  transport->klass->close (transport, stdin_grace, term_grace);
}

void
mcp_transport_free (McpTransport *transport)
{
  if (transport != NULL)
    transport->klass->free (transport);
}
