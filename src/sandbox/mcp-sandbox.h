/* mcp-sandbox.h — one bubblewrap sandbox that runs one piece of Python.
 *
 * A sandbox is started ahead of its run ("warm"): bwrap with every
 * namespace unshared, a read-only /usr, private read-only /proc and /dev,
 * small tmpfs /tmp, /work and /dev/shm, a cleared environment, no
 * capabilities, uid 65534 (on the host, a uid of its own when the pool is
 * root), a seccomp filter and rlimits, running python3 on the in-sandbox
 * runtime, which waits for its code on the RPC socket.  mcp_sandbox_run() sends the
 * code and waits for the end, the wall-clock timeout or the memory of all
 * the run's processes passing its limit (either kills the whole sandbox),
 * or the caller's cancellation.  A sandbox serves one run, or, run with
 * @keep, one session's runs one after the other: the interpreter and its
 * state stay between them (mcp_runtime.py's "done").  A timeout, the
 * memory limit or a cancellation ends a session's sandbox as well.
 *
 * The state dir, when set, is the one persistent folder: mounted
 * read-write at /projects (the seed bridge's path) for the memory store
 * and saved tools.  A root pool's sandboxes reach it through a group of
 * their own (MCP_SANDBOX_STATE_GID).
 *
 * The code's RPC requests (tool calls, tool docs) are read on the given
 * GMainContext and served concurrently on worker threads through the
 * handler, at most MCP_SANDBOX_RPC_IN_FLIGHT_MAX at once and
 * MCP_SANDBOX_RPC_BYTES_IN_FLIGHT_MAX bytes of requests (plus the one
 * being read): past either the socket is not read until replies went out.  Threads: mcp_sandbox_start()
 * and mcp_sandbox_run() block and must not run on that context's thread.
 */
#pragma once

#include <gio/gio.h>
#include <jansson.h>

G_BEGIN_DECLS

/* RPC requests of one run handed to the handler and not yet answered. */
#define MCP_SANDBOX_RPC_IN_FLIGHT_MAX 64
/* What those requests may hold together: a request may have up to 32 MiB
 * (the line limit), so the count alone would let a run keep 2 GiB in the
 * host, outside its memory limit. */
#define MCP_SANDBOX_RPC_BYTES_IN_FLIGHT_MAX (64 * 1024 * 1024)

#define MCP_SANDBOX_ERROR (mcp_sandbox_error_quark ())
GQuark mcp_sandbox_error_quark (void);

typedef enum {
  MCP_SANDBOX_ERROR_UNAVAILABLE,  /* bwrap missing or cannot create namespaces */
  MCP_SANDBOX_ERROR_FAILED,       /* the sandbox broke before the code ran */
  MCP_SANDBOX_ERROR_RPC,          /* an RPC request the host refuses */
} McpSandboxError;

typedef struct {
  const char *bwrap;            /* NULL: $MCP_POOL_BWRAP, else the configured path */
  const char *python;           /* NULL: the configured python3 */
  const char *runtime_dir;      /* NULL: $MCP_POOL_RUNTIME_DIR, else pkgdatadir */
  guint64     memory_bytes;     /* what all the processes of a run hold together
                                 * (a process's address space may be 4 times
                                 * that); 0: 512 MiB */
  guint64     file_bytes;       /* largest file written; 0: 64 MiB */
  guint64     scratch_bytes;    /* each of /tmp, /work and /dev/shm; 0: 64 MiB */
  guint       cpu_seconds;      /* 0: 130 */
  guint       processes;        /* a run's processes at once; 0: 128 */
  guint       cpus;             /* CPUs a run may use (its affinity); 0: all */
  gsize       output_cap;       /* of stdout and of stderr; 0: 1 MiB */
  const char *state_dir;        /* read-write at /projects; NULL: none */
} McpSandboxLimits;

/* The group a root pool's sandboxes share for the state dir, below their
 * uids' range. */
#define MCP_SANDBOX_STATE_GID 1999999999u
/* A root pool's default state dir: its sandboxes cannot pass /root. */
#define MCP_SANDBOX_ROOT_STATE_DIR "/var/lib/mcp-pool/code"

typedef enum {
  MCP_RUN_SUCCESS,
  MCP_RUN_ERROR,
  MCP_RUN_TIMEOUT,
  MCP_RUN_MEMORY,               /* killed: its processes held more than memory_bytes */
} McpRunStatus;

typedef struct {
  McpRunStatus  status;
  int           exit_code;      /* -1 when killed */
  char         *stdout_text;
  char         *stderr_text;
} McpRunResult;

void        mcp_run_result_clear      (McpRunResult *result);
const char *mcp_run_status_to_string  (McpRunStatus  status);

/* Serves one RPC request of the code; returns the result or NULL with
 * @error.  Worker threads, several at once. */
typedef json_t *(*McpSandboxRpcFunc) (const char   *method,
                                      json_t       *params,
                                      gpointer      user_data,
                                      GError      **error);

typedef struct _McpSandbox McpSandbox;

McpSandbox *mcp_sandbox_start  (const McpSandboxLimits  *limits,
                                GMainContext            *context,
                                GError                 **error);
/* Creates @path if need be, for the pool's user alone, or for a root
 * pool with MCP_SANDBOX_STATE_GID, set-group-id so that what one
 * sandbox writes the others may change. */
gboolean    mcp_sandbox_prepare_state_dir (const char   *path,
                                           GError      **error);
/* @servers is what the code may call; the handler enforces it.  With
 * @keep the sandbox stays for the next run if the code ended by itself
 * (mcp_sandbox_is_alive() tells); call mcp_sandbox_end_run() after. */
gboolean    mcp_sandbox_run    (McpSandbox              *sandbox,
                                const char              *code,
                                const char * const      *servers,
                                gint64                   timeout_ms,
                                gboolean                 keep,
                                McpSandboxRpcFunc        handler,
                                gpointer                 handler_data,
                                GCancellable            *cancellable,
                                McpRunResult            *result,
                                GError                 **error);
/* The reply to one RPC request of the code (a valid JSON-RPC request),
 * as it goes back over the channel: @handler's result, or its error; a
 * NULL @handler means no run is in progress.  Any thread; blocks as long
 * as @handler does.  Public so that the parsing can be fuzzed without a
 * sandbox. */
json_t     *mcp_sandbox_rpc_reply (json_t                 *request,
                                   McpSandboxRpcFunc       handler,
                                   gpointer                handler_data);
/* Whether the sandbox still runs: after a kept run, whether its session
 * goes on. */
gboolean    mcp_sandbox_is_alive  (McpSandbox            *sandbox);
/* After a run that kept the sandbox: waits until no RPC request of that
 * run is still in its handler (cancel what they wait for first); later
 * requests are answered "No run is in progress". */
void        mcp_sandbox_end_run   (McpSandbox            *sandbox);
/* For tests: the most RPC requests that were in flight at once, and the
 * most bytes of requests. */
guint       mcp_sandbox_get_rpc_peak (McpSandbox          *sandbox);
gsize       mcp_sandbox_get_rpc_bytes_peak (McpSandbox    *sandbox);
gboolean    mcp_sandbox_rpc_is_paused (McpSandbox         *sandbox);
/* Ends the sandbox (run or not) and frees it; blocking. */
void        mcp_sandbox_free   (McpSandbox              *sandbox);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpSandbox, mcp_sandbox_free)

G_END_DECLS
