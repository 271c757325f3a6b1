/* mcp-code.h — code execution mode: the `run_python` tool.
 *
 * The model writes Python; it runs in a bubblewrap sandbox (see
 * mcp-sandbox.h) and reaches the pool's tools over the sandbox's RPC
 * channel, only those of the servers it names.  One sandbox is kept
 * started and waiting ("warm"), so a run does not pay the interpreter's
 * start-up.
 *
 * Sessions: with `sessions` on, the runs of one upstream client
 * (McpCallOptions.client) share a persistent Python session, a sandbox of
 * that client's alone: its variables and imports stay from one call to
 * the next, one run at a time.  It ends when the client goes
 * (mcp_code_end_session()), after session_idle_s without a run, or with
 * a run that times out, passes the memory limit, is cancelled or kills
 * the interpreter; the run's result says so.  A run with `"fresh": true`,
 * or of no client, gets a sandbox of its own, as every run does with
 * sessions off; but a 2026-07-28 client without a session (no client
 * name, the revision's capabilities in the call's _meta) gets a session
 * by a handle: its run makes one and names it in the record ("session"),
 * and a run with `"session": HANDLE` continues it, from any client.  The state dir (MCP_BRIDGE_STATE_DIR) is the one thing
 * every run shares, sessions or not.
 *
 * Threads: mcp_code_run() and mcp_code_run_python() block and run on
 * workers, several at once; the sandboxes' I/O runs on the pool's context.
 * One keeper thread starts the warm sandboxes and ends idle sessions.
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

#include "pool/mcp-pool.h"
#include "sandbox/mcp-sandbox.h"

G_BEGIN_DECLS

#define MCP_CODE_TIMEOUT_DEFAULT_S 30
#define MCP_CODE_TIMEOUT_MAX_S     120

typedef struct {
  McpSandboxLimits limits;
  gint64           timeout_s;       /* 0: $MCP_BRIDGE_TIMEOUT, else 30 */
  gint64           max_timeout_s;   /* 0: $MCP_BRIDGE_MAX_TIMEOUT, else 120 */
  gboolean         keep_warm;
  gboolean         warm_after_first_run;  /* with keep_warm: no sandbox until code has run once */
  gboolean         sessions;        /* a client's runs share a session; off with $MCP_POOL_PYTHON_SESSIONS=0 */
  gint64           session_idle_s;  /* 0: 600 */
  guint            sessions_max;    /* sessions at once, each a sandbox; 0: 32 (a client past them runs fresh) */
  const char      *state_dir;       /* NULL: $MCP_BRIDGE_STATE_DIR, else $XDG_STATE_HOME/mcp-pool/code */
} McpCodeOptions;

typedef struct _McpCode McpCode;

McpCode *mcp_code_new         (McpPool               *pool,
                               GMainContext          *context,
                               const McpCodeOptions  *options);
/* The tool entry for tools/list. */
json_t  *mcp_code_tool        (McpCode               *code);
/* Runs run_python's @arguments (code, servers, timeout in whole seconds,
 * fresh, session) and returns the run's record (mcp-run-format.h): what the code
 * wrote and how it ended, or why it did not run ("validation_error" for
 * bad arguments, "error" for an unknown server or a sandbox that failed);
 * "session_ended" when the run ended its session.
 * @options (may be NULL): its cancellable ends the run; with its progress
 * set, the progress of the tools the code calls reaches it, on the pool's
 * context, as progress of the run (a count, and a message naming the
 * tool). */
json_t  *mcp_code_run         (McpCode               *code,
                               json_t                *arguments,
                               const McpCallOptions  *options);
/* The same run as a tools/call result, in the format that
 * MCP_BRIDGE_OUTPUT_MODE names; isError unless the code succeeded. */
json_t  *mcp_code_run_python  (McpCode               *code,
                               json_t                *arguments,
                               const McpCallOptions  *options);
/* Exposed for tests and fuzzing: the reply to one RPC request of a run
 * that may call @servers, as mcp_code_run_python()'s sandbox would send
 * it.  Blocking, like the tool calls it may make. */
json_t  *mcp_code_reply_rpc   (McpCode               *code,
                               const char * const    *servers,
                               json_t                *request);
/* Any thread, does not block: ends @client's session (its sandbox goes
 * on the keeper thread, or once its run is over). */
void     mcp_code_end_session (McpCode               *code,
                               const char            *client);
/* The sessions that exist now, for tests. */
guint    mcp_code_count_sessions (McpCode            *code);
/* Blocking: ends the warm sandbox and every session. */
void     mcp_code_free        (McpCode               *code);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpCode, mcp_code_free)

G_END_DECLS
