/* mcp-server-config.h — how to start one MCP server, and parsing one server
 * entry of the config formats that MCP clients write (`mcpServers`, VS
 * Code's `servers`, OpenCode's `mcp`).  Finding the files is
 * mcp-config-discovery.h's job.
 *
 * A McpServerConfig is immutable once built and refcounted, so it can be
 * shared between threads without a lock.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

#define MCP_CONFIG_ERROR (mcp_config_error_quark ())
GQuark mcp_config_error_quark (void);

typedef enum {
  MCP_CONFIG_ERROR_READ,       /* the file cannot be read */
  MCP_CONFIG_ERROR_SYNTAX,     /* not JSON; the message has line and column */
  MCP_CONFIG_ERROR_INVALID,    /* JSON, but a field has the wrong type */
  MCP_CONFIG_ERROR_DISABLED,   /* a valid entry, switched off ("disabled": true) */
  MCP_CONFIG_ERROR_REMOTE,     /* unused: remote entries are servers now; kept for the codes' values */
} McpConfigError;

#define MCP_START_TIMEOUT_DEFAULT_MS (60 * 1000)
#define MCP_CALL_TIMEOUT_DEFAULT_MS  (30 * 1000)
#define MCP_CALL_TIMEOUT_MAX_MS      (120 * 1000)
#define MCP_IDLE_TIMEOUT_DEFAULT_MS  (10 * 60 * 1000)

/* Set in the environment of every server: an mcp-pool that finds them
 * runs below another one, and starts no servers (mcp-config-discovery.h). */
#define MCP_POOL_PARENT_ENV        "MCP_POOL_PARENT"          /* the pid of the pool */
#define MCP_POOL_PARENT_SERVER_ENV "MCP_POOL_PARENT_SERVER"   /* the server's name */
/* NAME,NAME,PREFIX*: more variables of the pool's environment that every
 * server gets, beyond the allow-list. */
#define MCP_POOL_ENV_PASSTHROUGH_ENV "MCP_POOL_ENV_PASSTHROUGH"

/* How the pool reaches a server (DESIGN.md §10). */
typedef enum {
  MCP_TRANSPORT_STDIO,        /* a child process: command, args, env, cwd */
  MCP_TRANSPORT_HTTP,         /* Streamable HTTP at url, falling back to HTTP+SSE
                               * when the server refuses the first POST */
  MCP_TRANSPORT_SSE,          /* the 2024-11-05 HTTP+SSE transport only */
} McpTransportKind;

/* "oauth": {"grant"}: how the pool gets a token for a remote server. */
typedef enum {
  MCP_OAUTH_GRANT_AUTHORIZATION_CODE, /* the user logs in through the browser (`mcp-pool auth`) */
  MCP_OAUTH_GRANT_CLIENT_CREDENTIALS, /* "client_credentials": the client's own identity, a
                                       * secret or a signed assertion, no user (RFC 6749 §4.4) */
  MCP_OAUTH_GRANT_ENTERPRISE,         /* "enterprise": the user's ID token from the company's
                                       * identity provider, exchanged there for an ID-JAG
                                       * (RFC 8693), which the server's authorization server
                                       * takes as a JWT bearer grant (RFC 7523) */
} McpOAuthGrant;

typedef struct {
  gatomicrefcount ref_count;
  char   *name;
  char   *source;             /* the file it came from, for messages */
  McpTransportKind transport;
  /* Remote servers (transport HTTP or SSE); NULL or FALSE for stdio. */
  char   *url;                /* the endpoint, ${VAR} expanded */
  GStrv   headers;            /* "Name: value" lines sent with every request, expanded;
                               * like oauth_client_secret, never shown or logged */
  char   *ca_file;            /* "caFile": trust only this CA bundle; NULL: the system's */
  gboolean allow_insecure_http; /* "allowInsecureHttp": plain http:// beyond loopback */
  char   *oauth_client_id;    /* "oauth": {"clientId"}: pre-registered, or an https://
                               * Client ID Metadata Document URL; NULL: register */
  char   *oauth_client_secret; /* "oauth": {"clientSecret"}; NULL: a public client */
  char   *oauth_scopes;       /* "oauth": {"scopes"}, space-separated; NULL: the server's */
  McpOAuthGrant oauth_grant;  /* "oauth": {"grant"}; the two without a user get tokens
                               * in the pool itself, whenever the server wants one */
  char   *oauth_private_key_file; /* "oauth": {"privateKeyFile"}: the PEM key that signs
                               * the client's assertions (private_key_jwt) instead of a
                               * secret; read at each grant, never copied */
  char   *oauth_idp_token_endpoint; /* "oauth": {"idp": {"tokenEndpoint"}}: grant enterprise */
  char   *oauth_idp_client_id;      /* "idp": {"clientId"}: the pool at the identity provider */
  char   *oauth_idp_client_secret;  /* "idp": {"clientSecret"}; NULL: a public client there */
  char   *oauth_id_token;           /* "idp": {"idToken"}: the user's ID token, or NULL */
  char   *oauth_id_token_file;      /* "idp": {"idTokenFile"}: a file that holds it, read at
                                     * each grant (single sign-on tools rewrite it) */
  /* Local servers (transport STDIO). */
  char   *command;
  GStrv   args;
  GStrv   env;                /* KEY=VALUE pairs added to the environment */
  GStrv   env_passthrough;    /* "envPassthrough": names (NAME, or PREFIX*) of the pool's
                               * environment passed on beyond the allow-list */
  gboolean client_environment; /* the whole environment and no MCP_POOL_PARENT: for a
                               * program that starts `mcp-pool serve` as its client */
  GStrv   warnings;           /* translated sentences, each naming the server and file:
                               * unset ${VAR}, VS Code ${input:…} left as written */
  char   *cwd;                /* NULL: the pool's working directory */
  char   *description;
  gint64  start_timeout_ms;
  gint64  call_timeout_ms;
  gint64  idle_timeout_ms;    /* a session unused this long is shut down; 0: never */
  guint   max_concurrency;    /* requests in flight at once; 0: no limit */
  gsize   max_line;           /* longest message accepted from the server ("maxMessageBytes") */
  gsize   stderr_capacity;    /* bytes of stderr kept for error messages */
} McpServerConfig;

McpServerConfig *mcp_server_config_new            (const char       *name,
                                                   const char       *command,
                                                   const char * const *args);
McpServerConfig *mcp_server_config_new_from_json  (const char       *name,
                                                   json_t           *entry,
                                                   const char       *source,
                                                   GError          **error);
/* Parsing and expansion: any thread, no I/O.
 *
 * @envp supplies the variables for ${VAR} and ${VAR:-default} in command,
 * args and env values, and in a remote entry's url, header values, OAuth
 * client and CA file; NULL means the process environment.  An unset
 * variable without a default expands to "", and a VS Code ${input:…} stays
 * as written; both are listed in the config's warnings.  A valid entry that must not
 * be started fails with MCP_CONFIG_ERROR_DISABLED, whose message is the
 * reason to show ("disabled in FILE").  A remote entry ("url", "httpUrl",
 * "serverUrl", "type": "http" | "sse" | "remote") gets its transport, url,
 * headers and OAuth fields, and no command. */
McpServerConfig *mcp_server_config_new_from_json_full (const char          *name,
                                                       json_t              *entry,
                                                       const char          *source,
                                                       const char * const  *envp,
                                                       GError             **error);
McpServerConfig *mcp_server_config_new_from_opencode  (const char          *name,
                                                       json_t              *entry,
                                                       const char          *source,
                                                       const char * const  *envp,
                                                       GError             **error);
/* Gemini CLI's dialect of `mcpServers`: a plain "url" is SSE there. */
McpServerConfig *mcp_server_config_new_from_gemini    (const char          *name,
                                                       json_t              *entry,
                                                       const char          *source,
                                                       const char * const  *envp,
                                                       GError             **error);
/* A remote server given on the command line, named after the URL's host;
 * @headers are "Name: value" lines.  Checked as an entry's fields are
 * (MCP_CONFIG_ERROR_INVALID); any thread, no I/O. */
McpServerConfig *mcp_server_config_new_remote         (const char          *url,
                                                       McpTransportKind     transport,
                                                       const char * const  *headers,
                                                       const char          *oauth_client_id,
                                                       const char          *oauth_client_secret,
                                                       gboolean             allow_insecure_http,
                                                       GError             **error);
/* Replaces the OAuth client of @config with @oauth, an entry's "oauth"
 * object (`--oauth JSON` of the command line), checked and expanded as in
 * a file. */
gboolean         mcp_server_config_set_oauth      (McpServerConfig    *config,
                                                   json_t             *oauth,
                                                   GError            **error);
char            *mcp_server_config_expand         (const char         *text,
                                                   const char * const *envp);
McpServerConfig *mcp_server_config_ref            (McpServerConfig  *config);
void             mcp_server_config_unref          (McpServerConfig  *config);
GStrv            mcp_server_config_build_argv     (const McpServerConfig *config);
/* The environment a server starts with (any thread, no I/O): the names of
 * the allow-list, "envPassthrough" and $MCP_POOL_ENV_PASSTHROUGH taken from
 * @parent_envp (NULL: the process environment), then the entry's "env",
 * then the MCP_POOL_PARENT marker, which no entry can unset; with
 * client_environment, @parent_envp whole. */
GStrv            mcp_server_config_build_envp     (const McpServerConfig *config);
GStrv            mcp_server_config_build_envp_from (const McpServerConfig *config,
                                                    const char * const    *parent_envp);
char            *mcp_server_config_fingerprint    (const McpServerConfig *config);

/* For listings (any thread): never a header value, a client secret, or the
 * userinfo and query of the URL, where keys are written too. */
const char      *mcp_server_config_transport_name (const McpServerConfig *config); /* "stdio", "http", "sse" */
char            *mcp_server_config_display_url    (const McpServerConfig *config); /* NULL for stdio */
const char      *mcp_server_config_auth_name      (const McpServerConfig *config); /* "oauth", "headers", "none" */
/* Sets "transport", "url" and "auth" in @object for a remote server; leaves
 * a stdio server's listing as it was. */
void             mcp_server_config_describe_remote (const McpServerConfig *config,
                                                    json_t                *object);
/* The same in words for a line of text: "http https://host/mcp, auth: oauth";
 * NULL for a stdio server.  _format_ takes the fields of a listing. */
char            *mcp_server_config_remote_summary (const McpServerConfig *config);
char            *mcp_server_config_format_remote  (const char            *transport,
                                                   const char            *url,
                                                   const char            *auth);

/* Any thread; these read files and block. */
json_t          *mcp_server_config_read_json      (const char       *path,
                                                   gboolean          allow_comments,
                                                   GError          **error);
McpServerConfig *mcp_server_config_find           (GPtrArray        *configs,
                                                   const char       *name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpServerConfig, mcp_server_config_unref)

G_END_DECLS
