/* test-procs.h — the programs the tests start, and checks that they leave
 * nothing behind: no process, no open fd.
 */
#pragma once

#include <gio/gio.h>

#include "common/mcp-server-config.h"

G_BEGIN_DECLS

/* The fixture server started with the given flags (NULL-terminated). */
McpServerConfig *test_fixture_config     (const char         *name,
                                          ...) G_GNUC_NULL_TERMINATED;
const char      *test_fixture_path       (void);
/* The built mcp-pool program, as an absolute path. */
const char      *test_mcp_pool_path      (void);
/* @argv behind the words of MCP_POOL_TEST_WRAPPER, for the mcp-pool and
 * mcp-poold a test starts: `make check-valgrind` runs them under valgrind
 * too. */
GStrv            test_wrap_argv          (const char * const *argv);
/* The same as one command line, for an Exec= line. */
char            *test_wrap_command_line  (const char         *command_line);

/* A child setup (GSpawnChildSetupFunc) for the helpers a test starts (a
 * bus, a keyring, an HTTP server): the child is killed when the test
 * ends, however it ends, so an assertion leaves no orphan behind. */
void             test_die_with_parent    (gpointer            unused);

/* Waits for @process to exit, at most @timeout_ms (scaled by
 * test_timeout_ms()); TRUE if it did. */
gboolean         test_subprocess_wait    (GSubprocess        *process,
                                          guint               timeout_ms);
/* TRUE if no process of group @pgid exists any more (zombies included). */
gboolean         test_process_group_gone (GPid                pgid);
gboolean         test_process_gone       (GPid                pid);
/* Asserts that this process has no child left, running or zombie.  A
 * keeper of an mcp-pool that has ended may be: it is waited for (5 s at
 * most) and reaped. */
void             test_assert_no_children (void);
guint            test_count_open_fds     (void);
/* The resident memory (VmRSS) of the running process @pid, in KiB. */
guint64          test_process_rss_kib    (const char         *pid);
/* The URL that `serve --listen` (or mcp-poold) says in its stderr file
 * @log ("MCP over HTTP at URL"), waiting up to @timeout_ms (scaled); NULL
 * if it said none by then. */
char            *test_wait_for_http_url  (const char         *log,
                                          guint               timeout_ms);
/* Asserts that the process has no more than @count open fds again (no
 * fd leaked), waiting for that with the usual bound: a session's fds go
 * with its last reference, which a worker may hold a moment after the
 * test's call returned (the thread that wrote a reply to the server's
 * request).  Fewer is no leak: an fd open when @count was taken may have
 * been on its way out (a process of an earlier test being reaped; seen
 * under valgrind, where pidfd_open is missing and GLib falls back). */
void             test_assert_open_fds    (guint               count);

/* The context switches of the threads of a process over a stretch of a
 * test, from /proc/PID/task/TID/status (voluntary and not).  Each thread
 * is counted under its name (comm), "main" for the thread whose id is the
 * pid; "others" sums every thread but the main one.  _end() logs them all
 * with g_test_message(). */
typedef struct _TestThreadSwitches TestThreadSwitches;

TestThreadSwitches *test_thread_switches_begin (GPid                pid);
void                test_thread_switches_end   (TestThreadSwitches *switches);
/* After _end(): the switches of the threads whose names start with
 * @prefix, or of "main" or "others". */
guint64             test_thread_switches_of    (TestThreadSwitches *switches,
                                                const char         *prefix);
void                test_thread_switches_free  (TestThreadSwitches *switches);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TestThreadSwitches, test_thread_switches_free)

G_END_DECLS
