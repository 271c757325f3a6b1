/* mcp-oauth.h — OAuth for remote MCP servers (MCP authorization spec
 * 2025-06-18 / 2025-11-25, PROTOCOL.md "Authorization").
 *
 * Owns the interactive login that `mcp-pool auth` runs (discovery of the
 * resource and authorization server metadata, the client's identity,
 * authorization code with PKCE S256 through a loopback redirect, step-up on
 * insufficient_scope), and the non-interactive part the HTTP transport
 * uses: the stored access token, its refresh, and the step-up challenge
 * kept with it for a login in another process.  Tokens are kept by
 * mcp-token-store.h, keyed by the server's URL; they never appear in a log
 * line or an error message.
 *
 * An entry whose "oauth" grant needs no user ("client_credentials",
 * "enterprise": the two official authorization extensions,
 * mcp-oauth-grants.c) gets its tokens the same way after discovery, with
 * no browser, and so also in the pool: where a refresh would be, the
 * grant is made again.
 *
 * The asynchronous functions run on the thread-default main context of
 * their caller (libsoup there, the keyring and key files on a worker) and
 * call back there; they never block it.  The pool never starts an
 * interactive login: when no token can be had, it fails with
 * MCP_OAUTH_ERROR_LOGIN_REQUIRED, whose message tells the user to run
 * `mcp-pool auth NAME`.
 */
#pragma once

#include <gio/gio.h>

#include "common/mcp-server-config.h"
#include "transport/mcp-token-store.h"

G_BEGIN_DECLS

#define MCP_OAUTH_ERROR (mcp_oauth_error_quark ())
GQuark mcp_oauth_error_quark (void);

typedef enum {
  MCP_OAUTH_ERROR_LOGIN_REQUIRED, /* no token, or none can be refreshed: run `mcp-pool auth NAME` */
  MCP_OAUTH_ERROR_DISCOVERY,      /* no usable resource or authorization server metadata */
  MCP_OAUTH_ERROR_UNSUPPORTED,    /* no PKCE S256, no way to identify the client */
  MCP_OAUTH_ERROR_INSECURE,       /* a plain http:// endpoint beyond loopback */
  MCP_OAUTH_ERROR_REDIRECT,       /* the browser came back with error=, a wrong state, no code */
  MCP_OAUTH_ERROR_TIMEOUT,        /* no answer from the browser in time */
  MCP_OAUTH_ERROR_TOKEN,          /* the token or registration endpoint refused */
  MCP_OAUTH_ERROR_HTTP,           /* the server could not be reached or answered oddly */
} McpOAuthError;

/* Step-ups on 403 insufficient_scope within one login. */
#define MCP_OAUTH_STEP_UP_MAX 2
/* How long `mcp-pool auth` waits for the browser by default. */
#define MCP_OAUTH_LOGIN_TIMEOUT_DEFAULT_MS (5 * 60 * 1000)

/* Called once with the authorization URL the user must visit; the
 * caller prints it and opens the browser. */
typedef void (*McpOAuthOpenUri) (const char *uri,
                                 gpointer    user_data);

typedef struct {
  McpOAuthOpenUri open_uri;
  gpointer        open_uri_data;
  guint           timeout_ms;     /* for the browser's answer; 0: the default */
  const char     *challenge;      /* the WWW-Authenticate of the refusal that calls for
                                   * this login (a 403 insufficient_scope names the scope
                                   * to step up to), or NULL: the last one the server
                                   * sent a transport of this process, else the one
                                   * kept with the stored tokens, if any */
} McpOAuthLoginOptions;

typedef enum {
  MCP_OAUTH_LOGIN_NOT_NEEDED,     /* the server answered without a token */
  MCP_OAUTH_LOGIN_REFRESHED,      /* the stored refresh token gave a new access token */
  MCP_OAUTH_LOGIN_AUTHORIZED,     /* the user logged in through the browser */
} McpOAuthLoginOutcome;

/* Logs in to the remote server of @config: a stored refresh token first,
 * else the browser flow.  The tokens are stored on success. */
void     mcp_oauth_login_async        (McpServerConfig            *config,
                                       const McpOAuthLoginOptions *options,
                                       GCancellable               *cancellable,
                                       GAsyncReadyCallback         callback,
                                       gpointer                    user_data);
/* @outcome and @store (nullable) say what happened and where the tokens
 * went. */
gboolean mcp_oauth_login_finish       (GAsyncResult               *result,
                                       McpOAuthLoginOutcome       *outcome,
                                       McpTokenStoreKind          *store,
                                       GError                    **error);

/* Whether @config's grant gets tokens without a user at a browser; any
 * thread.  Such a login takes options without open_uri. */
gboolean mcp_oauth_grant_is_unattended (const McpServerConfig    *config);

/* Blocking, from any thread: mcp_oauth_login_async() on a context of its
 * own, waited for.  @outcome and @store are nullable. */
gboolean mcp_oauth_login             (McpServerConfig            *config,
                                       const McpOAuthLoginOptions *options,
                                       McpOAuthLoginOutcome       *outcome,
                                       McpTokenStoreKind          *store,
                                       GError                    **error);

/* For the HTTP transport.  Blocking (the keyring): from a worker, never the
 * main thread.  The stored access token of @config, to send as
 * `Authorization: Bearer …`; NULL with MCP_OAUTH_ERROR_LOGIN_REQUIRED when
 * none is stored.  An expired token is returned too: the server's 401 leads
 * to mcp_oauth_refresh_async(). */
char    *mcp_oauth_load_access_token  (const McpServerConfig      *config,
                                       GError                    **error);
/* After a 401 with a token: trades the stored refresh token for a new
 * access token and stores it; for a grant without a user, after any 401,
 * makes the grant.  Fails with MCP_OAUTH_ERROR_LOGIN_REQUIRED
 * ("run `mcp-pool auth NAME`") when no refresh token is stored or the
 * authorization server refuses it. */
void     mcp_oauth_refresh_async      (McpServerConfig            *config,
                                       GCancellable               *cancellable,
                                       GAsyncReadyCallback         callback,
                                       gpointer                    user_data);
/* The new access token. */
char    *mcp_oauth_refresh_finish     (GAsyncResult               *result,
                                       GError                    **error);
/* The scope a WWW-Authenticate value of a 403 insufficient_scope asks
 * for, or NULL if @challenge (nullable) is no such refusal. */
char    *mcp_oauth_step_up_scope      (const char                 *challenge);
/* After a 403 insufficient_scope on the stored token: keeps @challenge
 * with the stored tokens, so that the next login, `mcp-pool auth NAME` in
 * whatever process, asks for the scope it names rather than the old one;
 * a login that succeeds drops it.  Without stored tokens nothing is kept.
 * The keyring runs on a worker; @callback runs on the caller's
 * thread-default context. */
void     mcp_oauth_keep_challenge_async  (McpServerConfig         *config,
                                          const char              *challenge,
                                          GAsyncReadyCallback      callback,
                                          gpointer                 user_data);
gboolean mcp_oauth_keep_challenge_finish (GAsyncResult            *result,
                                          GError                 **error);
/* Blocking: forgets the tokens and the registration of @config. */
gboolean mcp_oauth_logout             (const McpServerConfig      *config,
                                       GError                    **error);
/* Blocking: whether `mcp-pool auth` stored tokens for @config, "stored" or
 * "none"; NULL for a server that logs in by no OAuth (stdio, or headers
 * of its own), or when the keyring cannot tell. */
const char *mcp_oauth_login_state     (const McpServerConfig      *config);

G_END_DECLS
