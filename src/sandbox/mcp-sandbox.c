/* mcp-sandbox.c — one bubblewrap sandbox that runs one piece of Python.
 *
 * Locking: sandbox->lock guards the captured output, the handler of the
 * run and the RPC requests in flight; write_lock serialises replies on the
 * RPC socket.  The child is touched only by the thread that runs or frees
 * the sandbox.
 *
 * At most MCP_SANDBOX_RPC_IN_FLIGHT_MAX requests are handed to the workers
 * at once: past that, or past MCP_SANDBOX_RPC_BYTES_IN_FLIGHT_MAX bytes of
 * requests read and not answered, the RPC socket is not read until replies
 * went out, so code that floods requests is pushed back through the socket
 * instead of queueing without bound in the host.
 */
#include "config.h"

#include "sandbox/mcp-sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#include <glib-unix.h>
#include <glib/gi18n-lib.h>
#include <glib/gstdio.h>

#include "common/mcp-framing.h"
#include "common/mcp-jsonrpc.h"
#include "sandbox/mcp-memory-watch.h"
#include "sandbox/mcp-seccomp.h"
#include "common/mcp-spawner.h"

G_DEFINE_QUARK (mcp-sandbox-error-quark, mcp_sandbox_error)

/* Fd numbers inside the sandbox. */
#define SANDBOX_RPC_FD      3
#define SANDBOX_SECCOMP_FD  10
#define SANDBOX_INFO_FD     11
#define SANDBOX_RUNTIME_FD  12
#define SANDBOX_STATE_FD    13
/* The persistent folder inside, where the seed bridge has it. */
#define SANDBOX_STATE_DIR   "/projects"
/* Where the runtime is, read-only. */
#define SANDBOX_RUNTIME_DIR "/run/mcp-pool"
#define RUNTIME_FILENAME    "mcp_runtime.py"

#define MEMORY_DEFAULT      (512 * 1024 * 1024ull)
/* A process's address space, in memory limits: thread stacks and the
 * allocator's reservations are address space, not memory, and ordinary
 * threaded code needs a great deal of them; what memory the run holds,
 * the memory watch counts.  The cap still stops one allocation far
 * beyond the limit at once, with a MemoryError. */
#define ADDRESS_SPACE_FACTOR 4
#define FILE_DEFAULT        (64 * 1024 * 1024ull)
#define SCRATCH_DEFAULT     (64 * 1024 * 1024ull)
#define CPU_DEFAULT         130
#define OUTPUT_CAP_DEFAULT  (1024 * 1024)
/* Processes the sandbox may add to those of the user it runs as. */
#define PROCESSES_DEFAULT   128
/* Open files of each process: this bounds what pipes, socket buffers and
 * fds in flight on sockets can hold. */
#define OPEN_FILES          256
#define N_RLIMITS           7
/* The host ids of a root pool's sandboxes: root's would let the code past
 * every check the kernel makes against host ids (sysctls, RLIMIT_NPROC).
 * Each sandbox gets a uid and gid of its own, so that runs can neither
 * signal nor ptrace each other or any service, and RLIMIT_NPROC, which
 * counts a uid's processes, is a limit per run: one run's fork bomb does
 * not take another's processes.  They come from a range far above every
 * account, DynamicUser and subordinate-id range in use: a block of
 * SANDBOX_UIDS_PER_POOL per pool, chosen by its pid so that two pools on
 * one host do not share them, and reused in turn within the block. */
#define SANDBOX_UID_BASE       2000000000u
#define SANDBOX_UIDS_PER_POOL  256u
#define SANDBOX_POOL_BLOCKS    (4u * 1024 * 1024)   /* the kernel's largest pid_max */
#define START_TIMEOUT_US    (10 * G_USEC_PER_SEC)
#define DRAIN_TIMEOUT_US    (2 * G_USEC_PER_SEC)
/* How long the sandbox's init may take to follow bwrap before it is killed. */
#define INNER_GRACE_US      (G_USEC_PER_SEC / 10)
#define INNER_EXIT_TIMEOUT_US (20 * G_USEC_PER_SEC)
#define RPC_WRITE_TIMEOUT   (10 * G_USEC_PER_SEC)
#define RPC_THREADS         16
/* The longest RPC request line; the runtime is told, and refuses longer
 * ones itself. */
#define RPC_LINE_MAX        MCP_LINE_MAX_DEFAULT

struct _McpSandbox {
  gatomicrefcount    ref_count;      /* the owner's and one per reader and RPC job */
  McpSandboxLimits   limits;         /* immutable */
  GMainContext      *context;        /* immutable */
  McpChild          *child;          /* bwrap; the running/freeing thread only */
  GPid               inner_pid;      /* the sandbox's init, reaped by us */
  int                rpc_fd;         /* our end of the socket; writes under write_lock */
  GSource           *rpc_source;     /* protected by lock; the sources hold references */
  GSource           *stdout_source;  /* the owner's thread */
  GSource           *stderr_source;
  GThreadPool       *rpc_workers;    /* protected by lock; NULL once freed */

  GMutex             write_lock;

  GMutex             lock;
  GCond              cond;           /* output closed */
  GString           *out;            /* protected by lock */
  GString           *err;            /* protected by lock */
  gsize              out_cut;        /* protected by lock */
  gsize              err_cut;        /* protected by lock */
  guint              open_streams;   /* protected by lock */
  McpSandboxRpcFunc  handler;        /* protected by lock */
  gpointer           handler_data;   /* protected by lock */
  guint              rpc_in_flight;  /* protected by lock: handed to the workers, not answered */
  guint              rpc_peak;       /* protected by lock: the most in flight at once */
  gsize              rpc_bytes;      /* protected by lock: of the requests read, not answered */
  gsize              rpc_bytes_peak; /* protected by lock: the most rpc_bytes at once */
  GQueue             rpc_backlog;    /* protected by lock: read past the bound, not handed over */
  gboolean           rpc_paused;     /* protected by lock: rpc_source does not read */
  GSource           *rpc_resume;     /* protected by lock: the idle that resumes it */
  guint              handler_users;  /* protected by lock: RPC jobs in the handler now */
  gboolean           running;        /* protected by lock: a run waits for its end */
  gboolean           run_done;       /* protected by lock: the kept run said "done" */
  int                run_status;     /* protected by lock: with the status it gave */
  guint              drains_asked;   /* protected by lock: reads of a done run's output asked */
  guint              drains_done;    /* protected by lock: and made */
  int                done_fd;        /* eventfd, written once the kept run is done */
};

static McpSandbox *
sandbox_ref (McpSandbox *sandbox)
{
  g_atomic_ref_count_inc (&sandbox->ref_count);
  return sandbox;
}

/* The last reference goes after the readers' last dispatch and the last
 * RPC job, whichever thread those end on. */
static void
sandbox_unref (McpSandbox *sandbox)
{
  if (!g_atomic_ref_count_dec (&sandbox->ref_count))
    return;
  if (sandbox->rpc_fd >= 0)
    close (sandbox->rpc_fd);
  if (sandbox->done_fd >= 0)
    close (sandbox->done_fd);
  g_string_free (sandbox->out, TRUE);
  g_string_free (sandbox->err, TRUE);
  g_mutex_clear (&sandbox->lock);
  g_mutex_clear (&sandbox->write_lock);
  g_cond_clear (&sandbox->cond);
  g_main_context_unref (sandbox->context);
  g_free (sandbox);
}

void
mcp_run_result_clear (McpRunResult *result)
{
  g_clear_pointer (&result->stdout_text, g_free);
  g_clear_pointer (&result->stderr_text, g_free);
}

const char *
mcp_run_status_to_string (McpRunStatus status)
{
  switch (status)
    {
    case MCP_RUN_SUCCESS: return "success";
    case MCP_RUN_TIMEOUT: return "timeout";
    case MCP_RUN_MEMORY: return "memory";
    case MCP_RUN_ERROR:
    default: return "error";
    }
}

/* The RPC channel: requests read on the context, served on workers. */

typedef struct {
  McpSandbox *sandbox;
  json_t     *request;
  json_t     *reply;      /* NULL: the handler's reply to @request */
  gsize       bytes;      /* of @request, as it came */
} RpcJob;

static void
send_rpc_reply (McpSandbox *sandbox,
                json_t     *reply)
{
  g_autoptr(GError) error = NULL;

  g_mutex_lock (&sandbox->write_lock);
  if (!mcp_jsonrpc_write_line (sandbox->rpc_fd, reply, g_get_monotonic_time () + RPC_WRITE_TIMEOUT, &error))
    g_debug ("The sandbox stopped reading its RPC replies: %s", error->message);
  g_mutex_unlock (&sandbox->write_lock);
}

json_t *
mcp_sandbox_rpc_reply (json_t            *request,
                       McpSandboxRpcFunc  handler,
                       gpointer           handler_data)
{
  json_t *id = json_object_get (request, "id");
  const char *method = mcp_json_get_string (request, "method");
  json_t *params = json_object_get (request, "params");
  g_autoptr(GError) error = NULL;
  json_t *result = NULL;

  if (handler != NULL)
    result = handler (method, json_is_object (params) ? params : NULL, handler_data, &error);
  else
    g_set_error (&error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_RPC, _("No run is in progress"));

  if (result != NULL)
    return json_pack ("{s:O, s:o}", "id", id, "result", result);
  return json_pack ("{s:O, s:{s:s}}", "id", id, "error", "message", error->message);
}

static guint
rpc_queued_locked (McpSandbox *sandbox)
{
  return sandbox->rpc_in_flight + sandbox->rpc_backlog.length;
}

/* Whether the reader is to pause: either bound is reached. */
static gboolean
rpc_full_locked (McpSandbox *sandbox)
{
  return rpc_queued_locked (sandbox) >= MCP_SANDBOX_RPC_IN_FLIGHT_MAX ||
         sandbox->rpc_bytes >= MCP_SANDBOX_RPC_BYTES_IN_FLIGHT_MAX;
}

/* Whether a paused reader may resume: both are down to half their bound,
 * so that it does not wake for every reply. */
static gboolean
rpc_has_room_locked (McpSandbox *sandbox)
{
  return rpc_queued_locked (sandbox) <= MCP_SANDBOX_RPC_IN_FLIGHT_MAX / 2 &&
         sandbox->rpc_bytes <= MCP_SANDBOX_RPC_BYTES_IN_FLIGHT_MAX / 2;
}

static void
rpc_job_free (RpcJob *job)
{
  json_decref (job->request);
  json_decref (job->reply);
  sandbox_unref (job->sandbox);
  g_free (job);
}

/* Called with sandbox->lock held, on any thread. */
static void
push_rpc_job_locked (McpSandbox *sandbox,
                     RpcJob     *job)
{
  sandbox->rpc_in_flight++;
  sandbox->rpc_peak = MAX (sandbox->rpc_peak, sandbox->rpc_in_flight);
  g_thread_pool_push (sandbox->rpc_workers, job, NULL);
}

/* On the context: the workers have room again. */
static gboolean
resume_rpc_reader (gpointer data)
{
  McpSandbox *sandbox = data;

  g_mutex_lock (&sandbox->lock);
  g_clear_pointer (&sandbox->rpc_resume, g_source_unref);
  if (sandbox->rpc_source != NULL)
    mcp_line_reader_set_paused (sandbox->rpc_source, FALSE);
  sandbox->rpc_paused = FALSE;
  g_mutex_unlock (&sandbox->lock);
  return G_SOURCE_REMOVE;
}

/* A reply to a request of @bytes went out: the next request of the
 * backlog goes to the workers, and the reader resumes on its context once
 * there is room. */
static void
rpc_job_done (McpSandbox *sandbox,
              gsize       bytes)
{
  g_mutex_lock (&sandbox->lock);
  sandbox->rpc_in_flight--;
  sandbox->rpc_bytes -= bytes;
  if (sandbox->rpc_workers != NULL && !g_queue_is_empty (&sandbox->rpc_backlog))
    push_rpc_job_locked (sandbox, g_queue_pop_head (&sandbox->rpc_backlog));
  if (sandbox->rpc_paused && sandbox->rpc_resume == NULL && sandbox->rpc_source != NULL &&
      rpc_has_room_locked (sandbox))
    {
      sandbox->rpc_resume = g_idle_source_new ();
      g_source_set_callback (sandbox->rpc_resume, resume_rpc_reader, sandbox_ref (sandbox),
                             (GDestroyNotify) sandbox_unref);
      g_source_attach (sandbox->rpc_resume, sandbox->context);
    }
  g_mutex_unlock (&sandbox->lock);
}

static void
run_rpc_job (gpointer data,
             gpointer user_data)
{
  RpcJob *job = data;
  McpSandbox *sandbox = job->sandbox;
  g_autoptr(json_t) reply = g_steal_pointer (&job->reply);
  McpSandboxRpcFunc handler;
  gpointer handler_data;

  if (reply == NULL)
    {
      g_mutex_lock (&sandbox->lock);
      handler = sandbox->handler;
      handler_data = sandbox->handler_data;
      sandbox->handler_users++;
      g_mutex_unlock (&sandbox->lock);
      reply = mcp_sandbox_rpc_reply (job->request, handler, handler_data);
      g_mutex_lock (&sandbox->lock);
      sandbox->handler_users--;
      g_cond_broadcast (&sandbox->cond);
      g_mutex_unlock (&sandbox->lock);
    }
  send_rpc_reply (sandbox, reply);
  rpc_job_done (sandbox, job->bytes);
  rpc_job_free (job);
}

/* On the context, for every request read (@request taken, @bytes long)
 * and every line refused (@reply taken, sent as it is): to the workers
 * while fewer than the bound are in flight, else to the backlog; at
 * either bound the reader pauses.  The lines of the chunk being read
 * still come after that, so the backlog holds at most one chunk's worth,
 * and the bytes pass their bound by at most one line. */
static void
queue_rpc_job (McpSandbox *sandbox,
               json_t     *request,
               gsize       bytes,
               json_t     *reply)
{
  RpcJob *job = g_new0 (RpcJob, 1);

  job->sandbox = sandbox_ref (sandbox);
  job->request = request;
  job->reply = reply;
  job->bytes = bytes;
  g_mutex_lock (&sandbox->lock);
  if (sandbox->rpc_workers != NULL)
    {
      sandbox->rpc_bytes += bytes;
      sandbox->rpc_bytes_peak = MAX (sandbox->rpc_bytes_peak, sandbox->rpc_bytes);
      if (sandbox->rpc_in_flight < MCP_SANDBOX_RPC_IN_FLIGHT_MAX)
        push_rpc_job_locked (sandbox, g_steal_pointer (&job));
      else
        g_queue_push_tail (&sandbox->rpc_backlog, g_steal_pointer (&job));
      if (!sandbox->rpc_paused && sandbox->rpc_source != NULL && rpc_full_locked (sandbox))
        {
          sandbox->rpc_paused = TRUE;
          mcp_line_reader_set_paused (sandbox->rpc_source, TRUE);
        }
    }
  g_mutex_unlock (&sandbox->lock);
  /* After the sandbox was freed, its last requests go unanswered. */
  if (job != NULL)
    rpc_job_free (job);
}

/* On the context: a kept run's code ended with @status.  Only while a
 * run waits (code that sends it itself ends no more than its own run). */
static void
on_run_done (McpSandbox *sandbox,
             json_int_t  status)
{
  g_mutex_lock (&sandbox->lock);
  if (sandbox->running && !sandbox->run_done)
    {
      sandbox->run_done = TRUE;
      sandbox->run_status = (int) status;
      eventfd_write (sandbox->done_fd, 1);
    }
  g_mutex_unlock (&sandbox->lock);
}

static void
on_rpc_message (json_t   *message,
                gpointer  user_data)
{
  McpSandbox *sandbox = user_data;

  if (mcp_jsonrpc_classify (message) == MCP_MESSAGE_NOTIFICATION &&
      g_strcmp0 (mcp_json_get_string (message, "method"), "done") == 0)
    {
      on_run_done (sandbox, json_integer_value (json_object_get (json_object_get (message, "params"), "status")));
      return;
    }
  if (mcp_jsonrpc_classify (message) != MCP_MESSAGE_REQUEST)
    {
      g_debug ("The sandbox sent something that is not an RPC request; ignored");
      return;
    }
  /* What the request holds in the host is about what its line had; the
   * reader dispatching this is the current source. */
  queue_rpc_job (sandbox, json_incref (message), mcp_line_reader_get_line_length (g_main_current_source ()), NULL);
}

/* The id of a refused line is gone with it: the error goes to id null,
 * which the runtime takes for every request it waits for.  Its own check
 * of the same limit means that only code writing on the socket itself
 * gets here. */
static void
on_rpc_too_long (GError *error, gpointer user_data)
{
  McpSandbox *sandbox = user_data;
  g_autofree char *message = g_strdup_printf (_("An RPC request of the code is longer than the limit "
                                                "of %zu bytes, so mcp-pool refused it; pass smaller "
                                                "arguments (split large data over several calls)"),
                                              (size_t) RPC_LINE_MAX);

  g_debug ("Sandbox RPC: %s", error->message);
  queue_rpc_job (sandbox, NULL, 0, json_pack ("{s:n, s:{s:s}}", "id", "error", "message", message));
}

static void
on_rpc_closed (GError *error, gpointer user_data)
{
}

/* Captured output */

static void
append_capped (McpSandbox *sandbox,
               GString    *buffer,
               gsize      *cut,
               const char *data,
               gsize       length)
{
  gsize room;

  g_mutex_lock (&sandbox->lock);
  room = sandbox->limits.output_cap > buffer->len ? sandbox->limits.output_cap - buffer->len : 0;
  g_string_append_len (buffer, data, MIN (room, length));
  *cut += length - MIN (room, length);
  g_mutex_unlock (&sandbox->lock);
}

static void
on_stdout_chunk (const char *data, gsize length, gpointer user_data)
{
  McpSandbox *sandbox = user_data;
  append_capped (sandbox, sandbox->out, &sandbox->out_cut, data, length);
}

static void
on_stderr_chunk (const char *data, gsize length, gpointer user_data)
{
  McpSandbox *sandbox = user_data;
  append_capped (sandbox, sandbox->err, &sandbox->err_cut, data, length);
}

static void
on_stream_closed (GError *error, gpointer user_data)
{
  McpSandbox *sandbox = user_data;

  g_mutex_lock (&sandbox->lock);
  sandbox->open_streams--;
  g_cond_broadcast (&sandbox->cond);
  g_mutex_unlock (&sandbox->lock);
}

static char *
take_output (GString *buffer,
             gsize    cut)
{
  if (cut > 0)
    g_string_append_printf (buffer, _("\n[mcp-pool: %zu more bytes were cut]\n"), (size_t) cut);
  return g_utf8_make_valid (buffer->str, buffer->len);
}

/* Starting */

static const char *
bwrap_path (const McpSandboxLimits *limits)
{
  if (limits->bwrap != NULL)
    return limits->bwrap;
  return g_getenv ("MCP_POOL_BWRAP") ? g_getenv ("MCP_POOL_BWRAP") : BWRAP_PATH;
}

static const char *
runtime_dir (const McpSandboxLimits *limits)
{
  if (limits->runtime_dir != NULL)
    return limits->runtime_dir;
  return g_getenv ("MCP_POOL_RUNTIME_DIR") ? g_getenv ("MCP_POOL_RUNTIME_DIR") : PKGDATADIR;
}

/* The runtime, opened by the host, for bwrap to copy into the sandbox
 * (--ro-bind-data); -1 with @error if it cannot be read. */
static int
open_runtime (const char  *folder,
              GError     **error)
{
  g_autofree char *runtime = g_build_filename (folder, RUNTIME_FILENAME, NULL);
  int fd = open (runtime, O_RDONLY | O_CLOEXEC);
  int saved_errno = errno;
  struct stat info;

  if (fd >= 0 && fstat (fd, &info) == 0 && S_ISREG (info.st_mode))
    return fd;
  if (fd >= 0)
    {
      close (fd);
      saved_errno = EISDIR;
    }
  g_set_error (error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_UNAVAILABLE,
               _("The sandbox's Python runtime %s cannot be read (%s); install mcp-pool (make install) "
                 "or point MCP_POOL_RUNTIME_DIR at the folder that holds mcp_runtime.py"),
               runtime, g_strerror (saved_errno));
  return -1;
}

/* Who bwrap and the sandbox run as on the host: the pool's user, or, for
 * a root pool, ids of the sandbox's own (see SANDBOX_UID_BASE).  bwrap
 * then always creates its namespaces as an unprivileged user, so no
 * process in the sandbox is host root.  FALSE: the pool's own ids. */
static gboolean
sandbox_credentials (const McpSandboxLimits *limits,
                     McpCredentials         *credentials)
{
  static guint next_slot;     /* atomic */
  guint block = (guint) getpid () % SANDBOX_POOL_BLOCKS;
  guint slot = (guint) g_atomic_int_add (&next_slot, 1) % SANDBOX_UIDS_PER_POOL;

  if (geteuid () != 0)
    return FALSE;
  credentials->uid = SANDBOX_UID_BASE + block * SANDBOX_UIDS_PER_POOL + slot;
  credentials->gid = credentials->uid;
  credentials->group = limits->state_dir != NULL ? MCP_SANDBOX_STATE_GID : 0;
  return TRUE;
}

/* RLIMIT_NPROC counts every process of the real user, inside and outside
 * the sandbox; so the limit is what @uid runs now plus a run's @processes. */
static rlim_t
process_limit (uid_t uid,
               guint processes)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;
  rlim_t count = 0;

  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *path = g_build_filename ("/proc", name, NULL);
      GStatBuf info;

      if (g_ascii_isdigit (name[0]) && g_stat (path, &info) == 0 && info.st_uid == uid)
        count++;
    }
  return count + processes;
}

static GStrv
build_argv (const McpSandboxLimits *limits,
            gboolean                with_state)
{
  g_autoptr(GStrvBuilder) argv = g_strv_builder_new ();
  g_autofree char *scratch = g_strdup_printf ("%" G_GUINT64_FORMAT, limits->scratch_bytes);
  g_autofree char *rpc_fd = g_strdup_printf ("%d", SANDBOX_RPC_FD);
  g_autofree char *seccomp_fd = g_strdup_printf ("%d", SANDBOX_SECCOMP_FD);
  g_autofree char *info_fd = g_strdup_printf ("%d", SANDBOX_INFO_FD);
  g_autofree char *runtime_fd = g_strdup_printf ("%d", SANDBOX_RUNTIME_FD);
  g_autofree char *runtime = g_build_filename (SANDBOX_RUNTIME_DIR, RUNTIME_FILENAME, NULL);
  const char * const fixed[] = {
    "--unshare-all", "--die-with-parent", "--new-session",
    "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL",
    "--ro-bind", "/usr", "/usr",
    "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
    "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
    "--proc", "/proc", "--dev", "/dev",
    NULL,
  };
  /* What is written to a tmpfs is held in memory: /dev and bwrap's root
   * are unbounded ones, so they become read-only once everything is
   * mounted on them, and each writable one is scratch-sized.  A
   * read-only /proc keeps /proc/sys so, whoever the sandbox runs as. */
  const char * const read_only[] = {
    "--remount-ro", "/proc", "--remount-ro", "/dev", "--remount-ro", "/", NULL,
  };

  g_strv_builder_add (argv, bwrap_path (limits));
  g_strv_builder_addv (argv, (const char **) fixed);
  g_strv_builder_add_many (argv, "--size", scratch, "--tmpfs", "/dev/shm",
                           "--size", scratch, "--tmpfs", "/tmp",
                           "--size", scratch, "--tmpfs", "/work", "--chdir", "/work",
                           /* The seed bridge's code writes to /workspace. */
                           "--symlink", "work", "/workspace",
                           /* A copy of what the host read: a root pool's sandbox
                            * runs as a uid that need not reach the host's file. */
                           "--perms", "0444", "--ro-bind-data", runtime_fd, runtime, NULL);
  if (with_state)
    g_strv_builder_add_many (argv, "--bind-fd", G_STRINGIFY (SANDBOX_STATE_FD), SANDBOX_STATE_DIR, NULL);
  g_strv_builder_addv (argv, (const char **) read_only);
  g_strv_builder_add_many (argv, "--clearenv", "--setenv", "PATH", "/usr/bin",
                           "--setenv", "HOME", "/work", "--setenv", "LANG", "C.UTF-8",
                           "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
                           /* glibc reserves 64 MiB of address space per
                            * thread's arena otherwise. */
                           "--setenv", "MALLOC_ARENA_MAX", "2",
                           "--setenv", "MCP_POOL_RPC_FD", rpc_fd, NULL);
  if (with_state)
    g_strv_builder_add_many (argv, "--setenv", "MCP_POOL_STATE_DIR", SANDBOX_STATE_DIR, NULL);
  g_strv_builder_add_many (argv,
                           "--seccomp", seccomp_fd, "--info-fd", info_fd,
                           "--", limits->python ? limits->python : PYTHON3_PATH,
                           "-I", "-X", "utf8", runtime, NULL);
  return g_strv_builder_end (argv);
}

/* bwrap writes the sandbox's init pid to the info fd once it exists; EOF
 * without it means bwrap failed (its stderr says why). */
static GPid
read_inner_pid (int fd)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(json_t) info = NULL;
  gint64 deadline = g_get_monotonic_time () + START_TIMEOUT_US;

  for (;;)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      gint64 left = deadline - g_get_monotonic_time ();
      char chunk[1024];
      ssize_t n;

      if (left <= 0 || poll (&pfd, 1, (int) (left / 1000) + 1) <= 0)
        break;
      n = read (fd, chunk, sizeof chunk);
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (n <= 0)
        break;
      g_string_append_len (text, chunk, n);
      if ((info = json_loads (text->str, 0, NULL)) != NULL)
        break;
    }
  return info != NULL ? (GPid) json_integer_value (json_object_get (info, "child-pid")) : 0;
}

static GSource *
attach (McpSandbox *sandbox,
        GSource    *source)
{
  g_source_attach (source, sandbox->context);
  return source;
}

static gboolean
set_channels_error (GError **error)
{
  g_set_error (error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_FAILED,
               _("Could not create the sandbox's channels: %s"), g_strerror (errno));
  return FALSE;
}

/* The fds a start opens for bwrap.  One cleanup closes whichever are
 * still open: those bwrap inherits once it is spawned, and all of them
 * when a step fails.  The ends that stay with the host are stolen. */
typedef struct {
  int rpc[2];      /* [0] the host's end, [1] the sandbox's */
  int info[2];     /* [0] read by the host, [1] bwrap's --info-fd */
  int seccomp;
  int runtime;
  int state;       /* the state dir (O_PATH), or -1 */
} StartFds;

#define START_FDS_INIT { { -1, -1 }, { -1, -1 }, -1, -1, -1 }

static void
close_if_open (int fd)
{
  if (fd >= 0)
    close (fd);
}

static void
start_fds_clear (StartFds *fds)
{
  close_if_open (fds->rpc[0]);
  close_if_open (fds->rpc[1]);
  close_if_open (fds->info[0]);
  close_if_open (fds->info[1]);
  close_if_open (fds->seccomp);
  close_if_open (fds->runtime);
  close_if_open (fds->state);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (StartFds, start_fds_clear)

static gboolean
open_start_fds (const McpSandboxLimits  *limits,
                StartFds                *fds,
                GError                 **error)
{
  int rpc[2], info[2];

  fds->runtime = open_runtime (runtime_dir (limits), error);
  if (fds->runtime < 0)
    return FALSE;
  fds->seccomp = mcp_seccomp_filter_fd (error);
  if (fds->seccomp < 0)
    return FALSE;
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rpc) != 0)
    return set_channels_error (error);
  fds->rpc[0] = rpc[0];
  fds->rpc[1] = rpc[1];
  if (!g_unix_open_pipe (info, FD_CLOEXEC, NULL))
    return set_channels_error (error);
  fds->info[0] = info[0];
  fds->info[1] = info[1];
  /* A state dir that cannot be opened leaves the run without one: the
   * runtime's memory API then says that there is none. */
  if (limits->state_dir != NULL &&
      (fds->state = open (limits->state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    g_warning ("The code's state dir %s cannot be opened (%s); runs go without it",
               limits->state_dir, g_strerror (errno));
  return TRUE;
}

/* What a run may use; @credentials: who it runs as (NULL: the pool's
 * user), whose processes the process limit counts. */
static void
set_rlimits (const McpSandboxLimits *limits,
             const McpCredentials   *credentials,
             McpRlimit               rlimits[N_RLIMITS])
{
  rlimits[0] = (McpRlimit) { RLIMIT_AS, limits->memory_bytes * ADDRESS_SPACE_FACTOR };
  rlimits[1] = (McpRlimit) { RLIMIT_FSIZE, limits->file_bytes };
  rlimits[2] = (McpRlimit) { RLIMIT_CPU, limits->cpu_seconds };
  rlimits[3] = (McpRlimit) { RLIMIT_NPROC, process_limit (credentials ? credentials->uid : getuid (),
                                                          limits->processes) };
  rlimits[4] = (McpRlimit) { RLIMIT_NOFILE, OPEN_FILES };
  /* POSIX message queues and locked pages hold memory outside the
   * address space limit. */
  rlimits[5] = (McpRlimit) { RLIMIT_MSGQUEUE, 0 };
  rlimits[6] = (McpRlimit) { RLIMIT_MEMLOCK, 0 };
}

/* Spawns bwrap for @sandbox with its fds and rlimits in place; sets
 * sandbox->child and rpc_fd and returns bwrap's stdout and stderr and the
 * read end of its info pipe, or FALSE with @error. */
static gboolean
spawn_bwrap (McpSandbox  *sandbox,
             int         *stdout_fd,
             int         *stderr_fd,
             int         *info_fd,
             GError     **error)
{
  g_auto(StartFds) fds = START_FDS_INIT;
  g_auto(GStrv) argv = NULL;
  McpCredentials own_ids;
  const McpCredentials *credentials = sandbox_credentials (&sandbox->limits, &own_ids) ? &own_ids : NULL;
  McpRlimit rlimits[N_RLIMITS];
  int source_fds[5], target_fds[5] = {
    SANDBOX_RPC_FD, SANDBOX_SECCOMP_FD, SANDBOX_INFO_FD, SANDBOX_RUNTIME_FD, SANDBOX_STATE_FD,
  };
  McpSpawnRequest request;
  int stdin_fd;

  if (!open_start_fds (&sandbox->limits, &fds, error))
    return FALSE;
  argv = build_argv (&sandbox->limits, fds.state >= 0);
  set_rlimits (&sandbox->limits, credentials, rlimits);
  source_fds[0] = fds.rpc[1];
  source_fds[1] = fds.seccomp;
  source_fds[2] = fds.info[1];
  source_fds[3] = fds.runtime;
  source_fds[4] = fds.state;
  request = (McpSpawnRequest) {
    .argv = (const char * const *) argv, .envp = (const char * const[]) { NULL },
    .source_fds = source_fds, .target_fds = target_fds,
    .n_fds = G_N_ELEMENTS (source_fds) - (fds.state < 0),
    .rlimits = rlimits, .n_rlimits = N_RLIMITS, .credentials = credentials,
    .cpus = sandbox->limits.cpus,
  };
  sandbox->child = mcp_spawner_spawn (&request, &stdin_fd, stdout_fd, stderr_fd, error);
  if (sandbox->child == NULL)
    return FALSE;
  close (stdin_fd);
  sandbox->rpc_fd = g_steal_fd (&fds.rpc[0]);
  g_unix_set_fd_nonblocking (sandbox->rpc_fd, TRUE, NULL);
  *info_fd = g_steal_fd (&fds.info[0]);
  return TRUE;
}

/* bwrap ended before the sandbox's init existed: ends it, and sets
 * @error from what it said on stderr. */
static void
diagnose_failed_start (McpSandbox  *sandbox,
                       GError     **error)
{
  g_autofree char *why = NULL;

  mcp_child_terminate (g_steal_pointer (&sandbox->child), G_USEC_PER_SEC, G_USEC_PER_SEC / 2);
  g_mutex_lock (&sandbox->lock);
  while (sandbox->open_streams > 0 &&
         g_cond_wait_until (&sandbox->cond, &sandbox->lock, g_get_monotonic_time () + DRAIN_TIMEOUT_US))
    ;
  why = g_strstrip (g_strdup (sandbox->err->str));
  g_mutex_unlock (&sandbox->lock);
  /* Only a namespace failure gets the namespace advice. */
  if (why[0] == '\0' || strstr (why, "namespace") != NULL || strstr (why, "Operation not permitted") != NULL)
    g_set_error (error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_UNAVAILABLE,
                 _("The sandbox could not be created: %s. bubblewrap needs unprivileged user "
                   "namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
                   "user.max_user_namespaces > 0)"),
                 why[0] ? why : _("bwrap said nothing"));
  else
    g_set_error (error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_UNAVAILABLE,
                 _("The sandbox could not be created: %s"), why);
}

/* A sandbox not started yet: @limits with their defaults filled in. */
static McpSandbox *
sandbox_new (const McpSandboxLimits *limits,
             GMainContext           *context)
{
  McpSandbox *sandbox = g_new0 (McpSandbox, 1);

  g_atomic_ref_count_init (&sandbox->ref_count);
  sandbox->limits = *limits;
  if (sandbox->limits.memory_bytes == 0) sandbox->limits.memory_bytes = MEMORY_DEFAULT;
  if (sandbox->limits.file_bytes == 0) sandbox->limits.file_bytes = FILE_DEFAULT;
  if (sandbox->limits.scratch_bytes == 0) sandbox->limits.scratch_bytes = SCRATCH_DEFAULT;
  if (sandbox->limits.cpu_seconds == 0) sandbox->limits.cpu_seconds = CPU_DEFAULT;
  if (sandbox->limits.processes == 0) sandbox->limits.processes = PROCESSES_DEFAULT;
  if (sandbox->limits.output_cap == 0) sandbox->limits.output_cap = OUTPUT_CAP_DEFAULT;
  sandbox->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  sandbox->rpc_fd = -1;
  sandbox->done_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  g_mutex_init (&sandbox->lock);
  g_mutex_init (&sandbox->write_lock);
  g_cond_init (&sandbox->cond);
  sandbox->out = g_string_new (NULL);
  sandbox->err = g_string_new (NULL);
  return sandbox;
}

/* Reads bwrap's stdout and stderr (taken) and the RPC channel on the
 * sandbox's context; each reader holds a reference. */
static void
attach_readers (McpSandbox *sandbox,
                int         stdout_fd,
                int         stderr_fd)
{
  static const McpLineReaderFuncs rpc_funcs = {
    .on_message = on_rpc_message, .on_too_long = on_rpc_too_long, .on_closed = on_rpc_closed,
  };

  sandbox->open_streams = 2;
  sandbox->stdout_source = attach (sandbox, mcp_chunk_reader_new (stdout_fd, on_stdout_chunk, on_stream_closed,
                                                                  sandbox_ref (sandbox),
                                                                  (GDestroyNotify) sandbox_unref));
  sandbox->stderr_source = attach (sandbox, mcp_chunk_reader_new (stderr_fd, on_stderr_chunk, on_stream_closed,
                                                                  sandbox_ref (sandbox),
                                                                  (GDestroyNotify) sandbox_unref));
  /* Set before it is attached: its callbacks read it. */
  sandbox->rpc_source = mcp_line_reader_new (dup (sandbox->rpc_fd), RPC_LINE_MAX, &rpc_funcs,
                                             sandbox_ref (sandbox), (GDestroyNotify) sandbox_unref);
  attach (sandbox, sandbox->rpc_source);
}

McpSandbox *
mcp_sandbox_start (const McpSandboxLimits  *limits,
                   GMainContext            *context,
                   GError                 **error)
{
  g_autoptr(McpSandbox) sandbox = sandbox_new (limits, context);
  int stdout_fd, stderr_fd, info_fd;

  if (!spawn_bwrap (sandbox, &stdout_fd, &stderr_fd, &info_fd, error))
    return NULL;
  sandbox->rpc_workers = g_thread_pool_new (run_rpc_job, NULL, RPC_THREADS, FALSE, NULL);
  attach_readers (sandbox, stdout_fd, stderr_fd);

  sandbox->inner_pid = read_inner_pid (info_fd);
  close (info_fd);
  if (sandbox->inner_pid <= 0)
    {
      diagnose_failed_start (sandbox, error);
      return NULL;
    }
  return g_steal_pointer (&sandbox);
}

/* Running */

typedef enum {
  RUN_ENDED,
  RUN_DONE,         /* a kept run's code ended; the sandbox goes on */
  RUN_TIMED_OUT,
  RUN_OVER_MEMORY,
  RUN_CANCELLED,
} RunEnd;

/* Polls @fds (bwrap's pidfd, the kept run's done_fd, the cancellable's)
 * and samples the memory of the run in between, until one of them ends it. */
static RunEnd
watch_run (McpSandbox    *sandbox,
           struct pollfd *fds,
           gint64         deadline,
           GCancellable  *cancellable)
{
  g_autoptr(McpMemoryWatch) watch = mcp_memory_watch_new (sandbox->inner_pid, sandbox->limits.memory_bytes);

  while (!g_cancellable_is_cancelled (cancellable))
    {
      gint64 now = g_get_monotonic_time ();
      gint64 next_sample = mcp_memory_watch_next (watch);

      if (now >= deadline)
        return RUN_TIMED_OUT;
      if (now >= next_sample)
        {
          if (mcp_memory_watch_sample (watch))
            return RUN_OVER_MEMORY;
          continue;
        }
      if (poll (fds, 3, (int) ((MIN (deadline, next_sample) - now) / 1000 + 1)) > 0)
        {
          if (fds[0].revents != 0)
            return RUN_ENDED;
          if (fds[1].revents != 0)
            return RUN_DONE;
        }
    }
  return RUN_CANCELLED;
}

/* Waits for bwrap to end, a kept run's "done", the deadline, the run's
 * memory passing its limit, or the cancellable. */
static RunEnd
wait_for_end (McpSandbox   *sandbox,
              gint64        deadline,
              GCancellable *cancellable)
{
  GPollFD cancel_fd = { -1, 0, 0 };
  struct pollfd fds[3] = {
    { .fd = mcp_child_get_pidfd (sandbox->child), .events = POLLIN },
    { .fd = sandbox->done_fd, .events = POLLIN },
    { .fd = -1, .events = POLLIN },
  };
  RunEnd end;

  if (cancellable != NULL && g_cancellable_make_pollfd (cancellable, &cancel_fd))
    fds[2].fd = cancel_fd.fd;
  end = watch_run (sandbox, fds, deadline, cancellable);
  if (cancel_fd.fd >= 0)
    g_cancellable_release_fd (cancellable);
  return end;
}

/* The sandbox's init was bwrap's child; once bwrap is gone it is ours (the
 * pool is a subreaper) and must be reaped, or it stays a zombie.  It
 * normally dies with bwrap (--die-with-parent), but not if bwrap died
 * while still setting it up: then it is killed here.  It is our unreaped
 * child, so its pid cannot have been reused. */
static void
reap_inner (McpSandbox *sandbox)
{
  gint64 start = g_get_monotonic_time ();
  gboolean killed = FALSE;

  while (sandbox->inner_pid > 0)
    {
      pid_t reaped = waitpid (sandbox->inner_pid, NULL, WNOHANG);

      if (reaped == sandbox->inner_pid || (reaped < 0 && errno != EINTR))
        break;
      if (!killed && g_get_monotonic_time () - start > INNER_GRACE_US)
        {
          kill (sandbox->inner_pid, SIGKILL);
          killed = TRUE;
        }
      /* Killing a pid namespace's init waits for every process in it. */
      if (g_get_monotonic_time () - start > INNER_EXIT_TIMEOUT_US)
        {
          g_warning ("The sandbox's process %d did not go away", sandbox->inner_pid);
          break;
        }
      g_usleep (2000);
    }
  sandbox->inner_pid = 0;
}

static void
end_sandbox (McpSandbox *sandbox,
             int        *wait_status)
{
  int status;

  if (sandbox->child == NULL)
    return;
  /* Killing bwrap's group ends the sandbox: its init has --die-with-parent,
   * and the kernel ends a pid namespace with its init. */
  status = mcp_child_terminate (g_steal_pointer (&sandbox->child), 0, G_USEC_PER_SEC / 2);
  if (wait_status != NULL)
    *wait_status = status;
  reap_inner (sandbox);
}

/* On the context, after a kept run's "done": what the code wrote before
 * it is in the pipes, and is read now, before the run thread takes it. */
static gboolean
drain_kept_output (gpointer data)
{
  McpSandbox *sandbox = data;

  if (sandbox->stdout_source != NULL)
    mcp_chunk_reader_drain (sandbox->stdout_source, sandbox->limits.output_cap + 1);
  if (sandbox->stderr_source != NULL)
    mcp_chunk_reader_drain (sandbox->stderr_source, sandbox->limits.output_cap + 1);
  g_mutex_lock (&sandbox->lock);
  sandbox->drains_done++;
  g_cond_broadcast (&sandbox->cond);
  g_mutex_unlock (&sandbox->lock);
  return G_SOURCE_REMOVE;
}

/* A kept run is done: its status, once its output is read; the sandbox
 * is ready for the next run. */
static void
collect_kept_output (McpSandbox *sandbox,
                     int        *status)
{
  GSource *drain = g_idle_source_new ();
  eventfd_t count;

  eventfd_read (sandbox->done_fd, &count);
  g_source_set_priority (drain, G_PRIORITY_HIGH);
  g_source_set_callback (drain, drain_kept_output, sandbox_ref (sandbox), (GDestroyNotify) sandbox_unref);
  g_mutex_lock (&sandbox->lock);
  sandbox->drains_asked++;
  g_mutex_unlock (&sandbox->lock);
  g_source_attach (drain, sandbox->context);
  g_source_unref (drain);
  /* Counted, not flagged: a read that came too late for an earlier run
   * does not stand in for this one's. */
  g_mutex_lock (&sandbox->lock);
  while (sandbox->drains_done != sandbox->drains_asked &&
         g_cond_wait_until (&sandbox->cond, &sandbox->lock, g_get_monotonic_time () + DRAIN_TIMEOUT_US))
    ;
  *status = sandbox->run_status;
  sandbox->run_done = FALSE;
  g_mutex_unlock (&sandbox->lock);
}

/* Whether the uid of a root pool's sandbox may pass every folder above
 * @path: bwrap, already that uid, resolves the path of the fd it binds. */
static gboolean
reachable_by_others (const char *path,
                     char      **blocking)
{
  g_autofree char *dir = g_path_get_dirname (path);

  while (TRUE)
    {
      GStatBuf info;
      g_autofree char *parent = NULL;

      if (g_stat (dir, &info) == 0 && (info.st_mode & S_IXOTH) == 0)
        {
          *blocking = g_steal_pointer (&dir);
          return FALSE;
        }
      parent = g_path_get_dirname (dir);
      if (g_str_equal (parent, dir))
        return TRUE;
      g_free (dir);
      dir = g_steal_pointer (&parent);
    }
}

gboolean
mcp_sandbox_prepare_state_dir (const char  *path,
                               GError     **error)
{
  gboolean root = geteuid () == 0;
  g_autofree char *parent = g_path_get_dirname (path);
  g_autofree char *blocking = NULL;

  /* Folders made above it may be passed (a root pool's sandboxes must);
   * the state dir itself is the pool's alone. */
  if (g_mkdir_with_parents (parent, 0755) != 0 ||
      (g_mkdir (path, 0700) != 0 && errno != EEXIST) ||
      (root && (chown (path, 0, MCP_SANDBOX_STATE_GID) != 0 || chmod (path, 02770) != 0)))
    {
      int saved_errno = errno;

      g_set_error (error, G_IO_ERROR, g_io_error_from_errno (saved_errno),
                   _("The code's state dir %s cannot be made ready: %s (set MCP_BRIDGE_STATE_DIR "
                     "to a folder mcp-pool may write)"), path, g_strerror (saved_errno));
      return FALSE;
    }
  if (root && !reachable_by_others (path, &blocking))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
                   _("The code's state dir %s is inside %s, which a root pool's sandboxes may not "
                     "pass; set MCP_BRIDGE_STATE_DIR to a folder outside it (the default for root "
                     "is %s)"), path, blocking, MCP_SANDBOX_ROOT_STATE_DIR);
      return FALSE;
    }
  return TRUE;
}

gboolean
mcp_sandbox_is_alive (McpSandbox *sandbox)
{
  struct pollfd exited = { .events = POLLIN };

  if (sandbox->child == NULL)
    return FALSE;
  exited.fd = mcp_child_get_pidfd (sandbox->child);
  return poll (&exited, 1, 0) == 0;
}

void
mcp_sandbox_end_run (McpSandbox *sandbox)
{
  g_mutex_lock (&sandbox->lock);
  while (sandbox->handler_users > 0)
    g_cond_wait (&sandbox->cond, &sandbox->lock);
  g_mutex_unlock (&sandbox->lock);
}

gboolean
mcp_sandbox_run (McpSandbox          *sandbox,
                 const char          *code,
                 const char * const  *servers,
                 gint64               timeout_ms,
                 gboolean             keep,
                 McpSandboxRpcFunc    handler,
                 gpointer             handler_data,
                 GCancellable        *cancellable,
                 McpRunResult        *result,
                 GError             **error)
{
  g_autoptr(json_t) message = NULL;
  g_autoptr(json_t) server_list = json_array ();
  g_autoptr(GError) write_error = NULL;
  gint64 deadline = g_get_monotonic_time () + timeout_ms * G_TIME_SPAN_MILLISECOND;
  RunEnd end;
  int status = 0;

  g_return_val_if_fail (sandbox->child != NULL, FALSE);

  g_mutex_lock (&sandbox->lock);
  sandbox->handler = handler;
  sandbox->handler_data = handler_data;
  sandbox->running = TRUE;
  g_mutex_unlock (&sandbox->lock);

  for (const char * const *server = servers; server != NULL && *server != NULL; server++)
    json_array_append_new (server_list, json_string (*server));
  message = json_pack ("{s:s, s:{s:s, s:O, s:I, s:b}}", "method", "run", "params", "code", code,
                       "servers", server_list, "max_request_bytes", (json_int_t) RPC_LINE_MAX,
                       "keep", keep);
  g_mutex_lock (&sandbox->write_lock);
  mcp_jsonrpc_write_line (sandbox->rpc_fd, message, deadline, &write_error);
  g_mutex_unlock (&sandbox->write_lock);
  if (write_error != NULL)
    {
      /* The interpreter is not taking its code: no point in waiting. */
      end_sandbox (sandbox, NULL);
      g_set_error (error, MCP_SANDBOX_ERROR, MCP_SANDBOX_ERROR_FAILED,
                   _("The sandbox did not take the code: %s"), write_error->message);
      return FALSE;
    }

  end = wait_for_end (sandbox, deadline, cancellable);
  if (end == RUN_DONE)
    collect_kept_output (sandbox, &status);
  else
    {
      end_sandbox (sandbox, &status);
      /* Let the last output arrive; the streams close once the sandbox is gone. */
      g_mutex_lock (&sandbox->lock);
      while (sandbox->open_streams > 0 &&
             g_cond_wait_until (&sandbox->cond, &sandbox->lock, g_get_monotonic_time () + DRAIN_TIMEOUT_US))
        ;
      g_mutex_unlock (&sandbox->lock);
    }

  g_mutex_lock (&sandbox->lock);
  sandbox->handler = NULL;
  sandbox->running = FALSE;
  if (end == RUN_OVER_MEMORY)
    g_string_append_printf (sandbox->err,
                            _("\n[mcp-pool: the code used more than %u MiB of memory, the limit of a run "
                              "(all its processes together), and was stopped. Hold less at once: "
                              "process the data in parts, or start fewer processes]\n"),
                            (guint) (sandbox->limits.memory_bytes / (1024 * 1024)));
  result->stdout_text = take_output (sandbox->out, sandbox->out_cut);
  result->stderr_text = take_output (sandbox->err, sandbox->err_cut);
  /* A session's next run starts with what comes after. */
  g_string_truncate (sandbox->out, 0);
  g_string_truncate (sandbox->err, 0);
  sandbox->out_cut = sandbox->err_cut = 0;
  g_mutex_unlock (&sandbox->lock);

  if (g_cancellable_set_error_if_cancelled (cancellable, error))
    {
      mcp_run_result_clear (result);
      return FALSE;
    }
  if (end == RUN_TIMED_OUT || end == RUN_OVER_MEMORY)
    {
      result->status = end == RUN_TIMED_OUT ? MCP_RUN_TIMEOUT : MCP_RUN_MEMORY;
      result->exit_code = -1;
    }
  else if (end == RUN_DONE)
    {
      result->exit_code = status;
      result->status = status == 0 ? MCP_RUN_SUCCESS : MCP_RUN_ERROR;
    }
  else if (WIFEXITED (status))
    {
      result->exit_code = WEXITSTATUS (status);
      result->status = result->exit_code == 0 ? MCP_RUN_SUCCESS : MCP_RUN_ERROR;
    }
  else
    {
      result->exit_code = -1;
      result->status = MCP_RUN_ERROR;
    }
  return TRUE;
}

/* Ends the sandbox, stops its I/O and drops the owner's reference; the
 * memory goes when the last reader dispatch or RPC job is done. */
void
mcp_sandbox_free (McpSandbox *sandbox)
{
  GSource *sources[4];
  GThreadPool *workers;
  GQueue backlog = G_QUEUE_INIT;

  if (sandbox == NULL)
    return;
  end_sandbox (sandbox, NULL);
  g_mutex_lock (&sandbox->lock);
  sources[0] = g_steal_pointer (&sandbox->rpc_source);
  sources[1] = g_steal_pointer (&sandbox->rpc_resume);
  g_mutex_unlock (&sandbox->lock);
  sources[2] = g_steal_pointer (&sandbox->stdout_source);
  sources[3] = g_steal_pointer (&sandbox->stderr_source);
  for (gsize i = 0; i < G_N_ELEMENTS (sources); i++)
    if (sources[i] != NULL)
      {
        g_source_destroy (sources[i]);
        g_source_unref (sources[i]);
      }
  g_mutex_lock (&sandbox->lock);
  workers = g_steal_pointer (&sandbox->rpc_workers);
  g_mutex_unlock (&sandbox->lock);
  /* Waits for requests being served: they use the run's handler data. */
  if (workers != NULL)
    g_thread_pool_free (workers, FALSE, TRUE);
  /* Nothing hands the backlog over any more: it goes unanswered. */
  g_mutex_lock (&sandbox->lock);
  backlog = sandbox->rpc_backlog;
  sandbox->rpc_backlog = (GQueue) G_QUEUE_INIT;
  g_mutex_unlock (&sandbox->lock);
  g_queue_clear_full (&backlog, (GDestroyNotify) rpc_job_free);
  sandbox_unref (sandbox);
}

guint
mcp_sandbox_get_rpc_peak (McpSandbox *sandbox)
{
  guint peak;

  g_mutex_lock (&sandbox->lock);
  peak = sandbox->rpc_peak;
  g_mutex_unlock (&sandbox->lock);
  return peak;
}

gsize
mcp_sandbox_get_rpc_bytes_peak (McpSandbox *sandbox)
{
  gsize peak;

  g_mutex_lock (&sandbox->lock);
  peak = sandbox->rpc_bytes_peak;
  g_mutex_unlock (&sandbox->lock);
  return peak;
}

/* Whether the RPC socket is not read now, a bound being reached. */
gboolean
mcp_sandbox_rpc_is_paused (McpSandbox *sandbox)
{
  gboolean paused;

  g_mutex_lock (&sandbox->lock);
  paused = sandbox->rpc_paused;
  g_mutex_unlock (&sandbox->lock);
  return paused;
}
