/* mcp-spawner.c — starting and ending server processes.
 *
 * Exit is observed through a pidfd (poll()able from any thread, no SIGCHLD
 * handler, nothing that a GLib child watch could race with), or polled for
 * where pidfd_open() is missing (valgrind before 3.20).  Only
 * mcp_child_terminate() reaps, so a pid is never reused while anyone may
 * still signal it.
 *
 * It also owns the keeper (mcp_spawner_keep_groups()): a small forked
 * process that is told, over a pipe, which process groups the pool started
 * and which it has reaped, and SIGKILLs the ones left when the pipe reaches
 * end of file because the pool is gone.
 */
#include "config.h"

#include "common/mcp-spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-spawner-error-quark, mcp_spawner_error)

/* How often an orphaned process group is checked for emptiness; there is no
 * event for "the last member of a group is gone". */
#define GROUP_POLL_INTERVAL_US (5 * 1000)
/* What mcp_spawner_run_sync() keeps of each output stream. */
#define RUN_OUTPUT_CAP (64 * 1024)
/* The bound on waiting for a SIGKILLed process to vanish. */
#define KILL_WAIT_US (2 * G_USEC_PER_SEC)
/* How often an exit is checked for when there is no pidfd to poll(). */
#define EXIT_POLL_US (5 * 1000)

/* The keeper reads its pipe at this fd; every other fd but stderr is closed
 * there, so it holds no pipe of a server or of the pool's client open. */
#define KEEPER_FD 3
/* How many process groups the keeper remembers.  A static table, because the
 * keeper may not call malloc(); far more groups than a pool runs at once. */
#define KEEPER_MAX_GROUPS 4096

/* One message to the keeper.  8 bytes, less than PIPE_BUF, so a write() is
 * atomic and records of several threads never interleave. */
typedef struct {
  gint32 op;     /* KEEPER_ADD or KEEPER_REMOVE */
  gint32 pgid;
} KeeperRecord;

enum {
  KEEPER_ADD = '+',
  KEEPER_REMOVE = '-',
};

/* The write end of the keeper's pipe, or -1 when there is no keeper or it
 * died; atomic.  Never closed while the pool runs, so a thread that read it
 * cannot write to a recycled fd.  The keeper sees end of file when the
 * process exits. */
static int   keeper_fd = -1;
static GPid  keeper_pid;              /* set once before keeper_fd */
/* The groups the keeper remembers.  Only the keeper process uses it: a
 * static array, because the keeper lives in a fork of a threaded process. */
static gint32 keeper_groups[KEEPER_MAX_GROUPS];

struct _McpChild {
  GPid pid;       /* also the process group id */
  int  pidfd;
};

typedef struct {
  const McpSpawnRequest *request;
  int                   *stdin_fd, *stdout_fd, *stderr_fd;
  McpChild              *child;
  GError                *error;
  gboolean               done;      /* protected by spawner_lock */
} SpawnJob;

static GAsyncQueue *spawner_queue;  /* of SpawnJob; lives forever */
static GMutex       spawner_lock;
static GCond        spawner_cond;

typedef struct {
  pid_t                  parent;
  const McpSpawnRequest *request;
} ChildSetup;

/* Runs in the child between fork and exec: async-signal-safe calls only. */
static void
child_setup (gpointer user_data)
{
  const ChildSetup *setup = user_data;
  pid_t parent = setup->parent;
  const McpCredentials *credentials = setup->request->credentials;
  cpu_set_t allowed, kept;
  sigset_t none;

  for (gsize i = 0; i < setup->request->n_rlimits; i++)
    {
      struct rlimit limit = { setup->request->rlimits[i].limit, setup->request->rlimits[i].limit };

      if (setrlimit (setup->request->rlimits[i].resource, &limit) != 0)
        _exit (126);
    }
  /* The CPUs kept start at one chosen by the child's pid, so that runs
   * side by side do not all share the first.  A host with more CPUs than a
   * cpu_set_t holds keeps them all. */
  if (setup->request->cpus > 0 && sched_getaffinity (0, sizeof allowed, &allowed) == 0 &&
      (guint) CPU_COUNT (&allowed) > setup->request->cpus)
    {
      int n_allowed = CPU_COUNT (&allowed), skip = getpid () % n_allowed, seen = 0;
      guint kept_n = 0;

      CPU_ZERO (&kept);
      for (int i = 0; i < 2 * CPU_SETSIZE && kept_n < setup->request->cpus; i++)
        {
          int cpu = i % CPU_SETSIZE;

          if (!CPU_ISSET (cpu, &allowed) || seen++ < skip)
            continue;
          CPU_SET (cpu, &kept);
          kept_n++;
        }
      if (sched_setaffinity (0, sizeof kept, &kept) != 0)
        _exit (126);
    }
  /* Before PR_SET_PDEATHSIG: the kernel clears it when the ids change. */
  if (credentials != NULL &&
      (setgroups (credentials->group != 0 ? 1 : 0, &credentials->group) != 0 ||
       setresgid (credentials->gid, credentials->gid, credentials->gid) != 0 ||
       setresuid (credentials->uid, credentials->uid, credentials->uid) != 0))
    _exit (126);
  setpgid (0, 0);
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  /* The parent may have died before the line above took effect. */
  if (getppid () != parent)
    _exit (127);
  /* The pool ignores SIGPIPE; servers should get the default back. */
  signal (SIGPIPE, SIG_DFL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
}

/* Tells the keeper, if there is one, about group @pgid.  Any thread; blocks
 * only if the keeper has stopped reading and the pipe is full. */
static void
keeper_send (gint32 op,
             GPid   pgid)
{
  KeeperRecord record = { op, pgid };
  int fd = g_atomic_int_get (&keeper_fd);
  ssize_t written;

  if (fd < 0)
    return;
  do
    written = write (fd, &record, sizeof record);
  while (written < 0 && errno == EINTR);
  if (written == sizeof record)
    return;

  /* EPIPE: the keeper is gone (SIGPIPE is ignored here).  Only the thread
   * that wins the exchange warns and reaps it; the fd stays open, as other
   * threads may hold its number. */
  if (g_atomic_int_compare_and_exchange (&keeper_fd, fd, -1))
    {
      g_warning ("The process-group keeper (pid %d) is gone (%s): servers will no longer "
                 "be killed with their children if mcp-pool itself is killed",
                 keeper_pid, written < 0 ? g_strerror (errno) : "short write");
      /* It closed the pipe's read end while exiting, so this does not hang. */
      while (waitpid (keeper_pid, NULL, 0) < 0 && errno == EINTR)
        ;
    }
}

static void
run_spawn_job (SpawnJob *job)
{
  const McpSpawnRequest *request = job->request;
  ChildSetup setup = { getpid (), request };
  GPid pid = 0;
  int pipes[3] = { -1, -1, -1 };

  if (!g_spawn_async_with_pipes_and_fds (request->cwd, request->argv, request->envp,
                                         G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
                                         child_setup, &setup,
                                         -1, -1, -1,
                                         request->source_fds, request->target_fds,
                                         request->n_fds,
                                         &pid, &pipes[0], &pipes[1], &pipes[2],
                                         &job->error))
    return;

  job->child = g_new0 (McpChild, 1);
  job->child->pid = pid;
  /* The pid cannot be reused before we reap it, so this cannot miss. */
  job->child->pidfd = pidfd_open (pid, 0);
  /* ENOSYS: Linux before 5.3, or valgrind before 3.20; the exit is polled
   * for instead (mcp_child_wait_exit(), the session's exit watch). */
  if (job->child->pidfd < 0 && errno != ENOSYS)
    g_warning ("pidfd_open (%d) failed: %s", pid, g_strerror (errno));

  for (int i = 0; i < 3; i++)
    g_unix_set_fd_nonblocking (pipes[i], TRUE, NULL);
  *job->stdin_fd = pipes[0];
  *job->stdout_fd = pipes[1];
  *job->stderr_fd = pipes[2];
  keeper_send (KEEPER_ADD, pid);
}

static gpointer
spawner_thread (gpointer unused)
{
  for (;;)
    {
      SpawnJob *job = g_async_queue_pop (spawner_queue);

      run_spawn_job (job);
      g_mutex_lock (&spawner_lock);
      job->done = TRUE;
      g_cond_broadcast (&spawner_cond);
      g_mutex_unlock (&spawner_lock);
    }
  return NULL;
}

static gpointer
start_spawner (gpointer unused)
{
  /* Writing to a server that died must be an error, not death by SIGPIPE. */
  signal (SIGPIPE, SIG_IGN);
  if (prctl (PR_SET_CHILD_SUBREAPER, 1) != 0)
    g_warning ("Could not become a child subreaper: %s", g_strerror (errno));

  spawner_queue = g_async_queue_new ();
  g_thread_unref (g_thread_new ("mcp-spawner", spawner_thread, NULL));
  return NULL;
}

McpChild *
mcp_spawner_spawn (const McpSpawnRequest *request,
                   int                   *stdin_fd,
                   int                   *stdout_fd,
                   int                   *stderr_fd,
                   GError               **error)
{
  static GOnce once = G_ONCE_INIT;
  SpawnJob job = {
    .request = request,
    .stdin_fd = stdin_fd, .stdout_fd = stdout_fd, .stderr_fd = stderr_fd,
  };

  /* A config without a command (a server reached by URL) is not for
   * spawning; say so rather than let exec fail on nothing. */
  if (request->argv == NULL || request->argv[0] == NULL)
    {
      g_set_error_literal (error, MCP_SPAWNER_ERROR, MCP_SPAWNER_ERROR_FAILED,
                           _("there is no command to start"));
      return NULL;
    }

  g_once (&once, start_spawner, NULL);

  g_async_queue_push (spawner_queue, &job);
  g_mutex_lock (&spawner_lock);
  while (!job.done)
    g_cond_wait (&spawner_cond, &spawner_lock);
  g_mutex_unlock (&spawner_lock);

  if (job.child == NULL)
    {
      g_set_error (error, MCP_SPAWNER_ERROR, MCP_SPAWNER_ERROR_FAILED,
                   _("Could not start “%s”: %s"), request->argv[0], job.error->message);
      g_error_free (job.error);
    }
  return job.child;
}

GPid
mcp_child_get_pid (McpChild *child)
{
  return child->pid;
}

int
mcp_child_get_pidfd (McpChild *child)
{
  return child->pidfd;
}

/* Looks without reaping, so that only mcp_child_terminate() ever reaps. */
gboolean
mcp_child_has_exited (McpChild *child,
                      int      *wait_status)
{
  siginfo_t info = { 0 };

  if (waitid (P_PID, child->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid == 0)
    return FALSE;

  /* Rebuild the status word that waitpid() would have given. */
  if (wait_status != NULL)
    *wait_status = info.si_code == CLD_EXITED
                   ? (info.si_status & 0xff) << 8
                   : (info.si_status & 0x7f);
  return TRUE;
}

/* Waits for the leader to exit until @deadline (monotonic µs). */
gboolean
mcp_child_wait_exit (McpChild *child,
                     gint64    deadline)
{
  for (;;)
    {
      struct pollfd pfd = { .fd = child->pidfd, .events = POLLIN };
      gint64 left = deadline - g_get_monotonic_time ();
      int ready;

      if (child->pidfd < 0)
        {
          if (mcp_child_has_exited (child, NULL))
            return TRUE;
          if (left <= 0)
            return FALSE;
          g_usleep (MIN (left, EXIT_POLL_US));
          continue;
        }

      ready = poll (&pfd, 1, left > 0 ? (int) MIN ((left + 999) / 1000, G_MAXINT) : 0);
      if (ready > 0)
        return TRUE;
      if (ready == 0)
        return FALSE;
      if (errno != EINTR)
        return mcp_child_has_exited (child, NULL);
    }
}

/* Reaps members of the group that were orphaned to us; TRUE once none is
 * left (zombies count as members until reaped). */
gboolean
mcp_child_group_is_empty (McpChild *child)
{
  for (;;)
    {
      siginfo_t info = { 0 };

      if (waitid (P_PGID, child->pid, &info, WEXITED | WNOHANG) != 0 || info.si_pid == 0)
        break;
    }
  return kill (-child->pid, 0) != 0 && errno == ESRCH;
}

static gboolean
wait_group_empty (McpChild *child,
                  gint64    deadline)
{
  while (!mcp_child_group_is_empty (child))
    {
      if (g_get_monotonic_time () >= deadline)
        return FALSE;
      g_usleep (GROUP_POLL_INTERVAL_US);
    }
  return TRUE;
}

char *
mcp_child_describe_status (int wait_status)
{
  if (WIFEXITED (wait_status))
    return g_strdup_printf (_("exited with status %d"), WEXITSTATUS (wait_status));
  if (WIFSIGNALED (wait_status))
    return g_strdup_printf (_("was killed by signal %d (%s)"),
                            WTERMSIG (wait_status), g_strsignal (WTERMSIG (wait_status)));
  return g_strdup (_("ended"));
}

int
mcp_child_terminate (McpChild *child,
                     gint64    stdin_grace,
                     gint64    term_grace)
{
  int status = 0;

  if (!mcp_child_wait_exit (child, g_get_monotonic_time () + stdin_grace))
    {
      kill (-child->pid, SIGTERM);
      if (!mcp_child_wait_exit (child, g_get_monotonic_time () + term_grace))
        {
          kill (-child->pid, SIGKILL);
          mcp_child_wait_exit (child, g_get_monotonic_time () + KILL_WAIT_US);
        }
    }

  while (waitpid (child->pid, &status, 0) < 0 && errno == EINTR)
    ;

  /* Grandchildren (an npx launcher's real server) may outlive the leader. */
  if (!wait_group_empty (child, g_get_monotonic_time ()))
    {
      kill (-child->pid, SIGTERM);
      if (!wait_group_empty (child, g_get_monotonic_time () + term_grace))
        {
          kill (-child->pid, SIGKILL);
          if (!wait_group_empty (child, g_get_monotonic_time () + KILL_WAIT_US))
            g_warning ("Process group %d still has members after SIGKILL", child->pid);
        }
    }
  /* Even if members resisted SIGKILL: once the group empties, its id may be
   * reused by a stranger's group, which the keeper must never kill. */
  keeper_send (KEEPER_REMOVE, child->pid);

  if (child->pidfd >= 0)
    close (child->pidfd);
  g_free (child);
  return status;
}

/* The keeper */

/* Writes @message to stderr from the keeper, where printf() is not safe. */
#define KEEPER_SAY(message) \
  (void) !write (STDERR_FILENO, "mcp-pool-keep: " message "\n", sizeof "mcp-pool-keep: " message)

/* Closes every fd above KEEPER_FD. */
static void
keeper_close_fds (void)
{
  struct rlimit limit;

  if (close_range (KEEPER_FD + 1, ~0U, 0) == 0)
    return;
  /* Kernels before 5.9 have no close_range(). */
  if (getrlimit (RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    limit.rlim_cur = 65536;
  for (rlim_t fd = KEEPER_FD + 1; fd < limit.rlim_cur; fd++)
    close ((int) fd);
}

static void
keeper_remember (gint32 pgid,
                 guint *n_groups)
{
  static gboolean told_full;

  if (*n_groups < KEEPER_MAX_GROUPS)
    {
      keeper_groups[(*n_groups)++] = pgid;
      return;
    }
  /* The group's leader still dies by PR_SET_PDEATHSIG; only an orphan of
   * it may survive the pool.  Said once: the keeper has no log. */
  if (!told_full)
    KEEPER_SAY ("too many process groups; new ones are not killed if mcp-pool dies");
  told_full = TRUE;
}

static void
keeper_forget (gint32 pgid,
               guint *n_groups)
{
  for (guint i = 0; i < *n_groups; i++)
    if (keeper_groups[i] == pgid)
      {
        keeper_groups[i] = keeper_groups[--*n_groups];
        return;
      }
}

/* The keeper process, forked from a threaded one: from here to _exit() only
 * async-signal-safe calls, no malloc(), no GLib. */
static void G_GNUC_NORETURN
keeper_main (int read_fd)
{
  static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
  struct sigaction ignore = { .sa_handler = SIG_IGN };
  guint n_groups = 0;

  /* Out of the pool's group: Ctrl-C or a kill of that group must leave the
   * keeper running to clean up after the pool. */
  setpgid (0, 0);
  prctl (PR_SET_NAME, "mcp-pool-keep");
  /* It may outlive the pool for a moment; it must not keep a folder busy. */
  if (chdir ("/") != 0)
    KEEPER_SAY ("cannot change to /");
  for (gsize i = 0; i < G_N_ELEMENTS (ignored); i++)
    sigaction (ignored[i], &ignore, NULL);

  /* Keep only stderr and the pipe: holding the client's stdout or a
   * server's pipe open would hide their end of file. */
  if (read_fd != KEEPER_FD && dup2 (read_fd, KEEPER_FD) < 0)
    _exit (1);
  close (STDIN_FILENO);
  close (STDOUT_FILENO);
  keeper_close_fds ();

  for (;;)
    {
      KeeperRecord record;
      ssize_t n = read (KEEPER_FD, &record, sizeof record);

      if (n < 0 && errno == EINTR)
        continue;
      /* End of file or an error: the pool is gone. */
      if (n != sizeof record)
        break;
      if (record.op == KEEPER_ADD && record.pgid > 0)
        keeper_remember (record.pgid, &n_groups);
      else if (record.op == KEEPER_REMOVE)
        keeper_forget (record.pgid, &n_groups);
    }

  for (guint i = 0; i < n_groups; i++)
    kill (-keeper_groups[i], SIGKILL);
  _exit (0);
}

static gpointer
start_keeper (gpointer unused)
{
  int fds[2];
  pid_t pid;

  /* O_CLOEXEC: a server must never inherit the write end, or the keeper
   * would not see end of file while that server lives. */
  if (pipe2 (fds, O_CLOEXEC) != 0)
    {
      g_warning ("Could not start the process-group keeper: pipe: %s", g_strerror (errno));
      return NULL;
    }
  pid = fork ();
  if (pid == 0)
    keeper_main (fds[0]);
  close (fds[0]);
  if (pid < 0)
    {
      g_warning ("Could not start the process-group keeper: fork: %s", g_strerror (errno));
      close (fds[1]);
      return NULL;
    }
  keeper_pid = pid;
  g_atomic_int_set (&keeper_fd, fds[1]);
  return NULL;
}

void
mcp_spawner_keep_groups (void)
{
  static GOnce once = G_ONCE_INIT;

  g_once (&once, start_keeper, NULL);
}

/* Appends what is readable on @fd to @buffer, up to @cap bytes; FALSE at
 * EOF or on an error. */
static gboolean
drain (int      fd,
       GString *buffer,
       gsize    cap)
{
  char chunk[4096];
  ssize_t n = read (fd, chunk, sizeof chunk);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return TRUE;
  if (n <= 0)
    return FALSE;
  if (buffer->len < cap)
    g_string_append_len (buffer, chunk, MIN ((gsize) n, cap - buffer->len));
  return TRUE;
}

gboolean
mcp_spawner_run_sync (const char * const  *argv,
                      gint64               timeout,
                      char               **standard_output,
                      char               **standard_error,
                      int                 *wait_status,
                      GError             **error)
{
  McpSpawnRequest request = { .argv = argv };
  g_autoptr(GString) out = g_string_new (NULL);
  g_autoptr(GString) err = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + timeout;
  int fds[3];
  struct pollfd pfds[2];
  McpChild *child = mcp_spawner_spawn (&request, &fds[0], &fds[1], &fds[2], error);
  int status;

  if (child == NULL)
    return FALSE;
  close (fds[0]);
  pfds[0] = (struct pollfd) { .fd = fds[1], .events = POLLIN };
  pfds[1] = (struct pollfd) { .fd = fds[2], .events = POLLIN };

  while ((pfds[0].fd >= 0 || pfds[1].fd >= 0) && g_get_monotonic_time () < deadline)
    {
      gint64 left = deadline - g_get_monotonic_time ();

      if (poll (pfds, 2, (int) MAX (1, left / 1000)) < 0 && errno != EINTR)
        break;
      for (int i = 0; i < 2; i++)
        if (pfds[i].fd >= 0 && pfds[i].revents != 0 &&
            !drain (pfds[i].fd, i == 0 ? out : err, RUN_OUTPUT_CAP))
          {
            close (pfds[i].fd);
            pfds[i].fd = -1;
          }
    }
  for (int i = 0; i < 2; i++)
    if (pfds[i].fd >= 0)
      close (pfds[i].fd);

  status = mcp_child_terminate (child, MAX (0, deadline - g_get_monotonic_time ()),
                                G_USEC_PER_SEC / 10);
  if (standard_output != NULL)
    *standard_output = g_utf8_make_valid (out->str, out->len);
  if (standard_error != NULL)
    *standard_error = g_utf8_make_valid (err->str, err->len);
  if (wait_status != NULL)
    *wait_status = status;
  return TRUE;
}
