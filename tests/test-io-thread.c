/* test-io-thread.c — a context on a thread of its own, for the tests. */
#include "config.h"

#include "test-io-thread.h"

struct _TestIoThread {
  GMainContext *context;
  GThread      *thread;
  gboolean      stop;     /* atomic */
};

static gpointer
io_thread_main (gpointer data)
{
  TestIoThread *io = data;

  g_main_context_push_thread_default (io->context);
  while (!g_atomic_int_get (&io->stop))
    g_main_context_iteration (io->context, TRUE);
  g_main_context_pop_thread_default (io->context);
  return NULL;
}

TestIoThread *
test_io_thread_new (void)
{
  TestIoThread *io = g_new0 (TestIoThread, 1);

  io->context = g_main_context_new ();
  io->thread = g_thread_new ("test-io", io_thread_main, io);
  return io;
}

GMainContext *
test_io_thread_get_context (TestIoThread *io)
{
  return io->context;
}

void
test_io_thread_free (TestIoThread *io)
{
  g_atomic_int_set (&io->stop, TRUE);
  g_main_context_wakeup (io->context);
  g_thread_join (io->thread);
  /* Let sources destroyed from other threads be finalised. */
  while (g_main_context_iteration (io->context, FALSE))
    ;
  g_main_context_unref (io->context);
  g_free (io);
}
