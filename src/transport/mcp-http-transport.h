/* mcp-http-transport.h — a remote MCP server over HTTP: Streamable HTTP
 * (2025-03-26 … 2025-11-25), and the HTTP+SSE transport of 2024-11-05,
 * which it falls back to when the first POST is refused (400, 404, 405)
 * or which the config asks for (MCP_TRANSPORT_SSE).
 *
 * All HTTP runs on the context given, through one libsoup session per
 * transport (asynchronous; libsoup is not thread-safe): sends from other
 * threads hop there.  Replies come as JSON or as event streams, which are
 * resumed with Last-Event-ID after the server's `retry:`.  Failures of one
 * request (a 5xx, a stream cut before its answer) come back as a JSON-RPC
 * error reply for that request; failures of the whole connection (the
 * server unreachable, a login needed, the session gone) close the
 * transport.  Header values are never logged: they may hold tokens.
 */
#pragma once

#include "common/mcp-server-config.h"
#include "transport/mcp-transport.h"

G_BEGIN_DECLS

/* Any thread but @context's; checks the config (the URL's scheme, plain
 * http:// only to loopback unless allow_insecure_http, the headers, the
 * CA file) and reads the OAuth token that `mcp-pool auth` stored, which
 * may block on the keyring; nothing goes to the server yet.  The
 * callbacks run on @context.  A 401 on a stored token is answered by one
 * refresh (mcp-oauth.h) and the refused requests are sent again; without
 * a token, or when the refresh fails, the transport closes with
 * MCP_TRANSPORT_ERROR_AUTH ("run `mcp-pool auth NAME`").  A 403
 * insufficient_scope on the token closes it so too, naming the scope,
 * once the challenge is kept with the stored tokens for that login. */
McpTransport *mcp_http_transport_new (McpServerConfig          *config,
                                      GMainContext             *context,
                                      const McpTransportFuncs  *funcs,
                                      gpointer                  user_data,
                                      GError                  **error);

/* Any thread: the WWW-Authenticate value of the last 401 or 403 that the
 * server at @url sent to any transport of this process, or NULL: for the
 * login that a command makes after a refusal (it may name the scope to
 * step up to and the resource metadata). */
char         *mcp_http_dup_challenge (const char *url);

/* Any thread: TRUE if @host names this machine (localhost, 127.0.0.0/8,
 * ::1), where plain http:// is allowed. */
gboolean      mcp_http_host_is_loopback (const char *host);

G_END_DECLS
