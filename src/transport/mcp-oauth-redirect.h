/* mcp-oauth-redirect.h — the loopback listener a browser is sent back to
 * after an OAuth login (RFC 8252 §7.3): a one-shot SoupServer on
 * 127.0.0.1 and a random port, serving /callback.
 *
 * It answers the browser with a short page, and hands the authorization
 * code to the one waiter once the `state` matched.  Main context of the
 * thread that made it only; nothing blocks.
 */
#pragma once

#include <gio/gio.h>

G_BEGIN_DECLS

typedef struct _McpOAuthRedirect McpOAuthRedirect;

/* Listens on 127.0.0.1 only, on a port the kernel picks. */
McpOAuthRedirect *mcp_oauth_redirect_new         (GError            **error);
/* http://127.0.0.1:PORT/callback */
const char       *mcp_oauth_redirect_get_uri     (McpOAuthRedirect   *redirect);
/* Waits for the browser's visit with @state, at most @timeout_ms.  The
 * first visit to /callback decides: a wrong state, an `error=` answer or
 * no code fail with MCP_OAUTH_ERROR_REDIRECT (mcp-oauth.h), naming
 * @server; so does an `iss` other than @issuer, compared as strings, and
 * no `iss` when @iss_required (the authorization server says it sends
 * one: RFC 9207).  No visit in time fails with MCP_OAUTH_ERROR_TIMEOUT. */
void              mcp_oauth_redirect_wait_async  (McpOAuthRedirect   *redirect,
                                                  const char         *server,
                                                  const char         *state,
                                                  const char         *issuer,
                                                  gboolean            iss_required,
                                                  guint               timeout_ms,
                                                  GAsyncReadyCallback callback,
                                                  gpointer            user_data);
/* The authorization code. */
char             *mcp_oauth_redirect_wait_finish (McpOAuthRedirect   *redirect,
                                                  GAsyncResult       *result,
                                                  GError            **error);
/* Stops listening; a pending wait fails with G_IO_ERROR_CANCELLED. */
void              mcp_oauth_redirect_free        (McpOAuthRedirect   *redirect);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpOAuthRedirect, mcp_oauth_redirect_free)

G_END_DECLS
