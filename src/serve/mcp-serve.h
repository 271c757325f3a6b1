/* mcp-serve.h — `mcp-pool serve`: the MCP server on stdin/stdout that
 * clients (Claude Desktop, Claude Code, IDEs) launch.
 *
 * Threads: the main context reads stdin and handles notifications, and
 * answers a tools/call of a warm server itself, from the read to the
 * write, with no thread hop (see pool/mcp-pool.h, the warm path); a
 * request that may block (a start, a listing, run_python) is a job on a
 * worker pool.  Every message out (replies,
 * progress, list_changed) goes through one output queue on stdout (see
 * common/mcp-output-queue.h): the thread that has the message writes it at
 * once when nothing waits, and the main context writes what waits as the
 * client reads, so the order holds, lines stay whole, and no thread blocks
 * on a slow client.  There is no writer thread.
 *
 * Bounds: at most options.max_pending requests are in flight; more are
 * answered at once with a "busy" error.  Replies are never dropped, so a
 * client that sends requests faster than it reads the answers is pushed
 * back instead: reading stdin pauses while too many lines wait in the
 * output queue, and resumes once the client has read most of them.
 *
 * Shared mode (`serve --shared`): the requests go to mcp-poold over the
 * session bus, asynchronously from the main context and with no worker,
 * and mcp-poold answers them from the pool that every client of the user
 * shares; only a ping is answered here.
 *
 * HTTP (`serve --listen`): instead of stdin and stdout, the Streamable
 * HTTP transport (mcp-http-front.h), one upstream client per HTTP session,
 * which gets the servers' notifications and requests as stdio's client
 * does; only a signal ends it.
 *
 * Ending: stdin EOF, SIGTERM or SIGINT stop the reading, shut every server
 * down in parallel within the budget MCP clients allow (EOF: stdin closed,
 * SIGTERM after 1 s, SIGKILL after 2 s; SIGTERM to mcp-pool: SIGTERM at
 * once, SIGKILL after 0.5 s), let the requests in flight answer, and quit.
 */
#pragma once

#include <glib.h>

#include "pool/mcp-config-discovery.h"
#include "mcp/mcp-expose.h"
#include "mcp/mcp-http-front.h"

G_BEGIN_DECLS

typedef struct _McpServe McpServe;

/* Requests in flight (running or waiting for a worker) beyond which a new
 * one is refused at once with MCP_JSONRPC_SERVER_BUSY, so that a client
 * that sends faster than the servers answer meets a bound, not a queue
 * that grows with its impatience. */
#define MCP_SERVE_MAX_PENDING_DEFAULT 1024
#define MCP_SERVE_MAX_PENDING_LIMIT   (1024 * 1024)

typedef struct {
  McpExposeFlags expose;            /* unless @server is set */
  const char    *server;            /* --server: this server as it is (mcp_expose_new_server()) */
  gint64         call_timeout_ms;   /* 0: the servers' own */
  gint64         code_timeout_s;    /* run_python's default; 0: see mcp-code.h */
  gsize          max_line;          /* 0: MCP_LINE_MAX_DEFAULT */
  guint          workers;           /* 0: a default */
  guint          max_pending;       /* 0: MCP_SERVE_MAX_PENDING_DEFAULT */
  gboolean       shared;            /* forward to mcp-poold instead of a pool of our own */
  gboolean       fresh_python;      /* no Python session: each run_python in a sandbox of its own */
  McpHttpFrontOptions http;         /* with http.listen: serve HTTP there, not stdio (not with shared) */
} McpServeOptions;

/* Main thread.  Finds the servers with @discovery and keeps following
 * their config files; reads @in_fd, writes @out_fd.  In shared mode the
 * daemon does the finding and answers the requests, and @discovery is not
 * used; NULL with @error when the session bus cannot be reached. */
McpServe *mcp_serve_new   (const McpDiscoveryOptions *discovery,
                           GMainContext          *context,
                           int                    in_fd,
                           int                    out_fd,
                           const McpServeOptions *options,
                           GError               **error);
/* With options.http.listen: the URL clients use. */
const char *mcp_serve_get_url (McpServe          *serve);
/* Main thread: runs until the client leaves or a signal ends it. */
int       mcp_serve_run   (McpServe              *serve);
void      mcp_serve_free  (McpServe              *serve);

G_END_DECLS
