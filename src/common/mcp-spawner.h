/* mcp-spawner.h — starting and ending server processes.
 *
 * A child must die with the pool even when the pool is SIGKILLed, so every
 * child gets PR_SET_PDEATHSIG.  That signal fires when the *thread* that
 * forked exits, so all forks happen on one dedicated spawner thread that
 * lives as long as the process, never on a pool worker that may retire.
 *
 * Each child leads a new process group, so that npx/uvx-style launchers and
 * their grandchildren can be signalled together.  The process becomes a
 * child subreaper, so a grandchild orphaned by its launcher is reparented to
 * the pool and reaped here instead of lingering as a zombie.
 *
 * PR_SET_PDEATHSIG reaches only the direct children, though: when the pool
 * is SIGKILLed, a launcher dies but its grandchildren live on as orphans.
 * Programs therefore start a keeper (mcp_spawner_keep_groups()), a forked
 * process named mcp-pool-keep that remembers every process group the pool
 * starts and has not yet reaped, and SIGKILLs them all when the pool is gone.
 * It learns that from end of file on a pipe whose only write end the pool
 * holds, which comes however the pool ends.  Library users and tests that do
 * not call it get no keeper and no extra child.
 */
#pragma once

#include <glib.h>
#include <sys/resource.h>
#include <sys/types.h>

G_BEGIN_DECLS

#define MCP_SPAWNER_ERROR (mcp_spawner_error_quark ())
GQuark mcp_spawner_error_quark (void);

typedef enum {
  MCP_SPAWNER_ERROR_FAILED,
} McpSpawnerError;

typedef struct _McpChild McpChild;

/* What to start.  Extra fds are passed to the child at the given numbers;
 * the source fds stay owned by the caller. */
/* A resource limit set in the child before exec. */
typedef struct {
  int     resource;    /* RLIMIT_AS, RLIMIT_CPU, … */
  rlim_t  limit;       /* soft and hard */
} McpRlimit;

/* The host ids a child takes on before exec; the supplementary groups
 * are dropped but for @group.  Only a root pool can do that. */
typedef struct {
  uid_t   uid;
  gid_t   gid;
  gid_t   group;          /* one supplementary group to keep; 0: none */
} McpCredentials;

typedef struct {
  const char * const *argv;
  const char * const *envp;       /* NULL: inherit the pool's environment */
  const char         *cwd;        /* NULL: the pool's working directory */
  const int          *source_fds;
  const int          *target_fds;
  gsize               n_fds;
  const McpRlimit    *rlimits;
  gsize               n_rlimits;
  const McpCredentials *credentials; /* NULL: the pool's */
  guint               cpus;       /* run on at most this many of the pool's CPUs; 0: all */
} McpSpawnRequest;

/* Any thread; blocks until the spawner thread has forked.  The child's pipes
 * are returned non-blocking and owned by the caller. */
McpChild *mcp_spawner_spawn          (const McpSpawnRequest *request,
                                      int                   *stdin_fd,
                                      int                   *stdout_fd,
                                      int                   *stderr_fd,
                                      GError               **error);

/* Any thread; idempotent; returns at once.  Forks the keeper described
 * above, once per process, so that process groups started by later
 * mcp_spawner_spawn() calls are SIGKILLed when this process dies, even by
 * SIGKILL; groups started before are not tracked, so call it first thing.
 * The keeper leads its own process group, ignores SIGINT, SIGTERM, SIGHUP
 * and SIGPIPE, keeps only stderr open, and exits once it has killed what was
 * left; it is a child of this process, so a subreaper above the pool sees it
 * for a moment after the pool ends.  It remembers up to 4096 groups; beyond
 * that it says so once on stderr and new groups are only killed through
 * their leader's PR_SET_PDEATHSIG.  If the keeper dies, the next spawn or
 * termination logs a warning and the pool goes on without it.  Failing to
 * start it is a warning, not an error. */
void      mcp_spawner_keep_groups    (void);

GPid      mcp_child_get_pid          (McpChild *child);
int       mcp_child_get_pidfd        (McpChild *child);
gboolean  mcp_child_has_exited       (McpChild *child,
                                      int      *wait_status);
gboolean  mcp_child_wait_exit        (McpChild *child,
                                      gint64    deadline);
gboolean  mcp_child_group_is_empty   (McpChild *child);
char     *mcp_child_describe_status  (int       wait_status);

/* Any thread but the main context's; blocks at most about
 * @stdin_grace + 2 × @term_grace (µs).  Waits for the child to leave on its
 * own (its stdin is closed by the caller beforehand), then SIGTERMs the
 * group, then SIGKILLs it, reaps the leader and every orphan of the group,
 * tells the keeper (if any) to forget the group, and frees @child.  Returns
 * the leader's wait status.  Call once per child. */
int       mcp_child_terminate        (McpChild *child,
                                      gint64    stdin_grace,
                                      gint64    term_grace);

/* Any thread; blocks.  Runs a short command like mcp_spawner_spawn() does
 * (its own process group, reaped whole), with no input, collecting what it
 * prints (64 KiB of each stream at most) until it ends or @timeout µs pass,
 * when it is killed.  FALSE only if it could not be started. */
gboolean  mcp_spawner_run_sync       (const char * const  *argv,
                                      gint64               timeout,
                                      char               **standard_output,
                                      char               **standard_error,
                                      int                 *wait_status,
                                      GError             **error);

G_END_DECLS
