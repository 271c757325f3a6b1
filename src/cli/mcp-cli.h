/* mcp-cli.h — what every `mcp-pool` subcommand shares: running blocking
 * work off the main thread while the main context does the I/O, and
 * reporting errors. */
#pragma once

#include <glib.h>

#include "pool/mcp-config-discovery.h"
#include "pool/mcp-pool.h"
#include "daemon/mcp-remote.h"

G_BEGIN_DECLS

/* A subcommand: parses its own options from @argv (argv[0] is the
 * subcommand's name) and returns the process exit status. */
typedef int (*McpCliCommand) (int argc, char **argv);

/* Blocking work that returns an exit status. */
typedef int (*McpCliJob) (gpointer user_data);

/* Main thread only: runs @job on a worker thread and iterates the default
 * main context until it returns; returns the job's status. */
int   mcp_cli_run_job         (McpCliJob     job,
                               gpointer      user_data);
int   mcp_cli_fail            (const char   *format,
                               ...) G_GNUC_PRINTF (1, 2);
GOptionContext *mcp_cli_option_context_new (const char *parameters,
                                            const char *summary);
gboolean mcp_cli_parse        (GOptionContext *context,
                               int            *argc,
                               char         ***argv);

/* Options shared by every command that uses servers. */
typedef struct {
  char   **config_files;
  double   timeout_s;
  gboolean verbose;
  gboolean shared;       /* use mcp-poold instead of a pool of the command's own */
  McpServerConfig *url_server; /* --url: the only server, instead of the config files */
} McpCliCommon;

void          mcp_cli_common_clear       (McpCliCommon   *common);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (McpCliCommon, mcp_cli_common_clear)

void          mcp_cli_add_common_options (GOptionContext *context,
                                          McpCliCommon   *common);
/* --shared, for the commands that can use the daemon. */
void          mcp_cli_add_shared_option  (GOptionContext *context,
                                          McpCliCommon   *common);
gint64        mcp_cli_timeout_ms         (McpCliCommon   *common);

/* --url URL, --header, --oauth-client-id/-secret, --oauth, --allow-insecure-http,
 * --transport: a remote server given on the command line (tools, call). */
typedef struct {
  char  *url;
  char **headers;
  char  *oauth_client_id;
  char  *oauth_client_secret;
  char  *oauth;               /* an entry's "oauth" object, as JSON */
  gboolean allow_insecure_http;
  char  *transport;
} McpCliUrl;

void          mcp_cli_url_clear          (McpCliUrl      *url);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (McpCliUrl, mcp_cli_url_clear)
void          mcp_cli_add_url_options    (GOptionContext *context,
                                          McpCliUrl      *url);
/* After parsing: sets @common->url_server when --url is given, so that
 * mcp_cli_discover() finds that server only; FALSE after printing why the
 * options do not fit (exit status 2). */
gboolean      mcp_cli_url_resolve        (McpCliUrl      *url,
                                          const char     *command,
                                          McpCliCommon   *common);
void          mcp_cli_discovery_options  (McpCliCommon        *common,
                                          McpDiscoveryOptions *options,
                                          GStrv               *storage);
/* Blocking (file reads); reports unreadable config files on stderr. */
McpDiscovery *mcp_cli_discover           (McpCliCommon   *common);

/* Blocking: the shared daemon, for --shared; NULL after reporting on
 * stderr why it cannot be reached. */
McpRemote    *mcp_cli_remote_new         (McpCliCommon   *common);

/* An in-process pool on the default main context, with a progress line on
 * a terminal while a server is slow to start.  Print everything before
 * mcp_cli_pool_free(): it flushes the output, then ends the servers. */
typedef struct {
  McpPool *pool;
  GSource *progress;
} McpCliPool;

McpCliPool   *mcp_cli_pool_new           (McpDiscovery   *discovery);
/* The same with @callbacks for the pool (may be NULL). */
McpCliPool   *mcp_cli_pool_new_full      (McpDiscovery           *discovery,
                                          const McpPoolCallbacks *callbacks);
void          mcp_cli_pool_free          (McpCliPool     *cli);

/* A server's elicitation/create during a command (mcp-cli-elicit.c).
 * UNSET (no --elicitation): asked on the terminal when stdin and stderr
 * are one, else declined with a line on stderr. */
typedef enum {
  MCP_CLI_ELICIT_UNSET,
  MCP_CLI_ELICIT_ACCEPT_DEFAULTS,
  MCP_CLI_ELICIT_DECLINE,
} McpCliElicitMode;

typedef struct _McpCliElicitation McpCliElicitation;

gboolean      mcp_cli_elicit_mode_parse  (const char        *text,
                                          McpCliElicitMode  *mode,
                                          GError           **error);
/* Any thread. */
McpCliElicitation *mcp_cli_elicitation_new (McpCliElicitMode   mode);
/* Sets the pool's on_server_request and user_data to answer elicitation
 * (nothing else). */
void          mcp_cli_elicitation_fill_callbacks (McpCliElicitation *elicitation,
                                                  McpPoolCallbacks  *callbacks);
/* What the pool declares for it: `{"elicitation": {}}` (form mode). */
json_t       *mcp_cli_elicitation_capabilities   (void);
/* After the pool is freed. */
void          mcp_cli_elicitation_free   (McpCliElicitation *elicitation);

/* Any thread (a job's), blocking: the login of `mcp-pool auth` to the
 * remote server of @config, on a context of its own, for a command that
 * met MCP_SESSION_ERROR_LOGIN.  The URL to visit goes to stderr, apart
 * from the command's output. */
gboolean      mcp_cli_login              (McpServerConfig   *config,
                                          GError           **error);
/* Whether @error says that the remote server needs a login. */
gboolean      mcp_cli_error_needs_login  (const GError      *error);

int   mcp_cli_demo            (int argc, char **argv);
int   mcp_cli_call            (int argc, char **argv);
int   mcp_cli_servers         (int argc, char **argv);
int   mcp_cli_tools           (int argc, char **argv);
int   mcp_cli_evict           (int argc, char **argv);
int   mcp_cli_reload          (int argc, char **argv);
int   mcp_cli_doctor          (int argc, char **argv);
int   mcp_cli_serve           (int argc, char **argv);
int   mcp_cli_run             (int argc, char **argv);
int   mcp_cli_auth            (int argc, char **argv);

G_END_DECLS
