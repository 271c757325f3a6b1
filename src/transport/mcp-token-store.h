/* mcp-token-store.h — where the OAuth tokens of a remote server are kept.
 *
 * One record per server URL: a JSON object with the tokens, the client
 * registration they were issued to, the endpoints to refresh them at, and
 * the server's last 403 insufficient_scope until a login meets it
 * (mcp-oauth.c writes and reads its fields).  The record lives in the
 * Secret Service (libsecret, schema MCP_TOKEN_STORE_SCHEMA, attribute
 * "url"), or, when no Secret Service answers on the session bus (headless,
 * CI), in a 0600 file under $XDG_STATE_HOME/mcp-pool/tokens/ (folders
 * 0700).  Nothing here logs a record or puts it in an error message.
 *
 * Every function blocks (D-Bus round trips, file I/O) and may be called
 * from any thread but the main one; it uses no main context of the
 * caller's.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

#define MCP_TOKEN_STORE_SCHEMA "io.github.mcppool.Token"

#define MCP_TOKEN_STORE_ERROR (mcp_token_store_error_quark ())
GQuark mcp_token_store_error_quark (void);

typedef enum {
  MCP_TOKEN_STORE_ERROR_NOT_FOUND,  /* no record for this URL */
  MCP_TOKEN_STORE_ERROR_FAILED,     /* the keyring or the file could not be used */
} McpTokenStoreError;

/* Where a record was found or put, for `mcp-pool auth` to tell the user. */
typedef enum {
  MCP_TOKEN_STORE_KEYRING,
  MCP_TOKEN_STORE_FILE,
} McpTokenStoreKind;

/* The record for @url, a new reference; MCP_TOKEN_STORE_ERROR_NOT_FOUND if
 * none is kept.  @kind (nullable) says where it was. */
json_t  *mcp_token_store_load   (const char          *url,
                                 McpTokenStoreKind   *kind,
                                 GError             **error);
/* Replaces the record for @url; @kind (nullable) says where it went. */
gboolean mcp_token_store_save   (const char          *url,
                                 json_t              *record,
                                 McpTokenStoreKind   *kind,
                                 GError             **error);
/* Removes the record for @url from the keyring and the file; TRUE if
 * nothing is kept any more (also when nothing was). */
gboolean mcp_token_store_forget (const char          *url,
                                 GError             **error);
/* The file a record for @url is kept in when no Secret Service runs. */
char    *mcp_token_store_file_path (const char       *url);

G_END_DECLS
