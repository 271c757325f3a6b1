/* mcp-memory-watch.c — what all the processes of one sandbox hold.
 *
 * RLIMIT_AS bounds each process, so a run that forks could hold its
 * process limit times the memory limit.  Only a memory cgroup bounds a
 * group of processes in the kernel, and none is usable where mcp-pool
 * runs (cgroup v1, or a cgroup2 tree without delegated controllers, as on
 * CI), so the thread that waits for the run measures it instead: every
 * MEMORY_SAMPLE_US it finds the sandbox's processes, its init and every
 * descendant (orphans reparent to that init, so none escapes), in one
 * pass over /proc, and sums what they hold.  Over the run's memory limit,
 * the sandbox is killed as on a timeout.
 *
 * What counts is what the host cannot take back by dropping caches:
 * anonymous memory (heap, stacks, private copies), shared memory (shared
 * anonymous mappings, mapped tmpfs files) and both when swapped out.
 * /proc/PID/status has it cheaply (RssAnon, RssShmem, VmSwap), but counts
 * a page that forks share copy-on-write in every one of them; so a sum
 * over the limit is checked against smaps_rollup, whose proportional
 * figures split a shared page among its sharers, and which costs a walk
 * of the page tables.
 *
 * A sample reads the stat file of every host process, some 10 us each:
 * 1 ms on a host of a hundred processes.  So that it takes at most 1/20
 * of a core on a busy host too, the next one waits 20 times as long as
 * the last took, and at least MEMORY_SAMPLE_US.  The code can make
 * samples slow itself (a hundred forks sharing their pages copy-on-write
 * are over the cheap sum all the time, and each sample then walks their
 * page tables), so the wait never passes MEMORY_SAMPLE_MAX_US, and the
 * walk stops at the first process that takes the sum over the limit.
 *
 * Polling can overshoot: between two samples the code touches memory at
 * the speed of the host's cores (a few GiB/s each), so a run may pass its
 * limit by up to cores x speed x interval (some 100-200 MiB on two cores
 * at 20 ms, more while samples are slow) plus the time of a sample and of the kill, and never by more
 * than its process limit times RLIMIT_AS.
 *
 * Threads: a watch is used by the one thread that waits for its run;
 * it has no lock.
 */
#include "config.h"

#include "sandbox/mcp-memory-watch.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* How often the host measures the memory of a run: every 20 ms, or less
 * often where a sample takes more than 1/20 of that, but at least every
 * 100 ms, whatever the code does to make samples slow. */
#define MEMORY_SAMPLE_US     (20 * G_TIME_SPAN_MILLISECOND)
#define MEMORY_SAMPLE_MAX_US (100 * G_TIME_SPAN_MILLISECOND)
#define MEMORY_SAMPLE_SHARE  20


typedef struct {
  pid_t     pid;
  pid_t     parent;
  gboolean  member;   /* of the sandbox */
} ProcessLink;

/* Kept from one sample to the next, so that sampling allocates nothing
 * once the arrays have grown. */
struct _McpMemoryWatch {
  pid_t   init;       /* the sandbox's init */
  guint64 limit;      /* bytes */
  gint64  next;       /* monotonic: when the next sample is due */
  GArray *links;      /* ProcessLink: every process of the host */
  GArray *members;    /* pid_t: the sandbox's processes */
};

McpMemoryWatch *
mcp_memory_watch_new (pid_t   init,
                      guint64 limit)
{
  McpMemoryWatch *watch = g_new0 (McpMemoryWatch, 1);

  watch->init = init;
  watch->limit = limit;
  watch->next = g_get_monotonic_time () + MEMORY_SAMPLE_US;
  watch->links = g_array_new (FALSE, FALSE, sizeof (ProcessLink));
  watch->members = g_array_new (FALSE, FALSE, sizeof (pid_t));
  return watch;
}

void
mcp_memory_watch_free (McpMemoryWatch *watch)
{
  if (watch == NULL)
    return;
  g_array_unref (watch->links);
  g_array_unref (watch->members);
  g_free (watch);
}

gint64
mcp_memory_watch_next (McpMemoryWatch *watch)
{
  return watch->next;
}

/* /proc/@pid/@name into @buffer, NUL-terminated; FALSE with errno set.
 * One read: /proc makes the whole of these small files at once. */
static gboolean
read_proc_file (pid_t       pid,
                const char *name,
                char       *buffer,
                gsize       size)
{
  char path[64];
  ssize_t length;
  int fd, saved_errno;

  g_snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, name);
  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
    return FALSE;
  length = read (fd, buffer, size - 1);
  saved_errno = errno;
  close (fd);
  errno = saved_errno;
  if (length < 0)
    return FALSE;
  buffer[length] = '\0';
  return TRUE;
}

static gboolean
is_member (GArray *members,
           pid_t   pid)
{
  for (guint i = 0; i < members->len; i++)
    if (g_array_index (members, pid_t, i) == pid)
      return TRUE;
  return FALSE;
}

/* Fills @watch->members with @init and its descendants. */
static void
find_members (McpMemoryWatch *watch,
              pid_t           init)
{
  g_autoptr(GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;
  gboolean grew = TRUE;

  g_array_set_size (watch->links, 0);
  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      /* "pid (comm) state ppid ...": comm is short, so the start will do. */
      char stat[128];
      const char *end;
      ProcessLink link = { 0 };

      if (!g_ascii_isdigit (name[0]))
        continue;
      link.pid = (pid_t) g_ascii_strtoll (name, NULL, 10);
      if (!read_proc_file (link.pid, "stat", stat, sizeof stat) || (end = strrchr (stat, ')')) == NULL)
        continue;
      link.parent = (pid_t) g_ascii_strtoll (end + 4, NULL, 10);
      g_array_append_val (watch->links, link);
    }

  g_array_set_size (watch->members, 0);
  g_array_append_val (watch->members, init);
  /* Parents mostly come before their children in /proc, so this is
   * usually one pass and one that finds nothing new. */
  while (grew)
    {
      grew = FALSE;
      for (guint i = 0; i < watch->links->len; i++)
        {
          ProcessLink *link = &g_array_index (watch->links, ProcessLink, i);

          if (!link->member && link->pid != init && is_member (watch->members, link->parent))
            {
              link->member = grew = TRUE;
              g_array_append_val (watch->members, link->pid);
            }
        }
    }
}

/* The figure of "@field:   N kB" in @text, in kB; 0 if absent. */
static guint64
field_kib (const char *text,
           const char *field)
{
  gsize length = strlen (field);

  for (const char *line = text; line != NULL; line = strchr (line, '\n'))
    {
      if (*line == '\n')
        line++;
      if (strncmp (line, field, length) == 0 && line[length] == ':')
        return g_ascii_strtoull (line + length + 1, NULL, 10);
    }
  return 0;
}

/* The sum of @fields of /proc/PID/@file over the sandbox's processes, in
 * bytes, up to the first process that takes it over the limit (the rest
 * cannot bring it back); FALSE if a file could not be read for another
 * reason than its process having ended. */
static gboolean
sum_members (McpMemoryWatch     *watch,
             const char         *file,
             const char * const *fields,
             guint64            *bytes)
{
  char text[4096];

  *bytes = 0;
  for (guint i = 0; i < watch->members->len && *bytes <= watch->limit; i++)
    {
      if (!read_proc_file (g_array_index (watch->members, pid_t, i), file, text, sizeof text))
        {
          if (errno == ENOENT || errno == ESRCH)
            continue;
          return FALSE;
        }
      for (const char * const *field = fields; *field != NULL; field++)
        *bytes += field_kib (text, *field) * 1024;
    }
  return TRUE;
}

gint64
mcp_memory_watch_interval (gint64 took)
{
  return CLAMP (MEMORY_SAMPLE_SHARE * took, MEMORY_SAMPLE_US, MEMORY_SAMPLE_MAX_US);
}

/* Whether the sandbox's processes hold more than the limit. */
static gboolean
over_limit (McpMemoryWatch *watch)
{
  static const char * const resident[] = { "RssAnon", "RssShmem", "VmSwap", NULL };
  static const char * const proportional[] = { "Pss_Anon", "Pss_Shmem", "SwapPss", NULL };
  guint64 bytes;

  find_members (watch, watch->init);
  if (!sum_members (watch, "status", resident, &bytes) || bytes <= watch->limit)
    return FALSE;
  /* Unreadable, the cheap figure stands. */
  return !sum_members (watch, "smaps_rollup", proportional, &bytes) || bytes > watch->limit;
}

gboolean
mcp_memory_watch_sample (McpMemoryWatch *watch)
{
  gint64 start = g_get_monotonic_time ();
  gboolean over = over_limit (watch);
  gint64 took = g_get_monotonic_time () - start;

  watch->next = start + took + mcp_memory_watch_interval (took);
  return over;
}
