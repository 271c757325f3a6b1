/* test-io-thread.h — a GMainContext iterated by its own thread, standing
 * in for the main thread of mcp-pool while the test thread plays a
 * worker. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _TestIoThread TestIoThread;

TestIoThread *test_io_thread_new         (void);
GMainContext *test_io_thread_get_context (TestIoThread *io);
/* Stops the thread, then finalises what other threads destroyed. */
void          test_io_thread_free        (TestIoThread *io);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TestIoThread, test_io_thread_free)

G_END_DECLS
