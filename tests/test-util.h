/* test-util.h — what the test programs share: the fixture server, a thread
 * that runs the I/O context, and checks that nothing is left behind. */
#pragma once

#include <glib.h>

#include "mcp-server-config.h"

G_BEGIN_DECLS

/* A GMainContext iterated by its own thread, standing in for the main
 * thread of mcp-pool while the test thread plays a worker. */
typedef struct _TestIoThread TestIoThread;

TestIoThread    *test_io_thread_new          (void);
GMainContext    *test_io_thread_get_context  (TestIoThread *io);
void             test_io_thread_free         (TestIoThread *io);

/* The fixture server started with the given flags (NULL-terminated). */
McpServerConfig *test_fixture_config         (const char   *name,
                                              ...) G_GNUC_NULL_TERMINATED;
const char      *test_fixture_path           (void);

/* TRUE if no process of group @pgid exists any more (zombies included). */
gboolean         test_process_group_gone     (GPid          pgid);
gboolean         test_process_gone           (GPid          pid);
/* Asserts that this process has no child left, running or zombie. */
void             test_assert_no_children     (void);
guint            test_count_open_fds         (void);

/* Polls @check every few milliseconds until it is TRUE or @timeout_ms
 * passes; for states that have no event to wait for (a process vanishing). */
gboolean         test_wait_for               (gboolean    (*check) (gpointer),
                                              gpointer      data,
                                              guint         timeout_ms);

/* The path of an installed npm package's file under tests/interop, or NULL
 * after skipping the test with the reason (or failing it when
 * MCP_POOL_INTEROP_MUST_WORK=1, as in CI). */
char            *test_interop_file           (const char   *relative_path);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TestIoThread, test_io_thread_free)

G_END_DECLS
