/* mcp-tsan-glib.c — what ThreadSanitizer cannot see of GLib, told to it.
 *
 * Built only with --enable-tsan.  GLib is not instrumented, and on Linux
 * its GMutex and GCond are atomics and futex() calls rather than pthread
 * calls that TSan intercepts: every hand-over that a GMutex, a GCond, a
 * GAsyncQueue, a GThreadPool, a grefcount, a GMainLoop's quit or a source
 * attached to another thread's GMainContext orders would be reported as a
 * race.  The functions here take the place of GLib's for every caller
 * outside libglib (this program and libgio; libglib binds its own calls
 * directly), call the real one, and tell TSan about the acquire or release
 * it stands for.  Only g_source_attach() and g_source_destroy() take a
 * lock of their own.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sanitizer/tsan_interface.h>

#include <glib.h>

/* GLib's own function @name, looked up once.  Two threads may look it up
 * at once and store the same pointer; every access is atomic, so that the
 * one that reads it does not race with the other one's store. */
#define REAL(name)                                                        \
  ({                                                                      \
    static __typeof__ (name) *real_##name;                                \
    __typeof__ (name) *real = g_atomic_pointer_get (&real_##name);        \
    if (real == NULL)                                                     \
      {                                                                   \
        real = (__typeof__ (name) *) dlsym (RTLD_NEXT, #name);            \
        g_atomic_pointer_set (&real_##name, real);                        \
      }                                                                   \
    real;                                                                 \
  })

void
g_mutex_lock (GMutex *mutex)
{
  REAL (g_mutex_lock) (mutex);
  __tsan_acquire (mutex);
}

gboolean
g_mutex_trylock (GMutex *mutex)
{
  if (!REAL (g_mutex_trylock) (mutex))
    return FALSE;
  __tsan_acquire (mutex);
  return TRUE;
}

void
g_mutex_unlock (GMutex *mutex)
{
  __tsan_release (mutex);
  REAL (g_mutex_unlock) (mutex);
}

void
g_cond_wait (GCond  *cond,
             GMutex *mutex)
{
  __tsan_release (mutex);
  REAL (g_cond_wait) (cond, mutex);
  __tsan_acquire (mutex);
}

gboolean
g_cond_wait_until (GCond  *cond,
                   GMutex *mutex,
                   gint64  end_time)
{
  gboolean signalled;

  __tsan_release (mutex);
  signalled = REAL (g_cond_wait_until) (cond, mutex, end_time);
  __tsan_acquire (mutex);
  return signalled;
}

void
g_async_queue_push (GAsyncQueue *queue,
                    gpointer     data)
{
  __tsan_release (queue);
  REAL (g_async_queue_push) (queue, data);
}

gpointer
g_async_queue_pop (GAsyncQueue *queue)
{
  gpointer data = REAL (g_async_queue_pop) (queue);

  __tsan_acquire (queue);
  return data;
}

/* A pool's function and data, behind a trampoline that acquires what
 * g_thread_pool_push() released, and releases what the pool's end
 * acquires: the owner reads what the jobs wrote after waiting for them.
 * A pool may be freed by its last worker, so its PoolFunc is found in a
 * table rather than in the pool. */
typedef struct {
  GFunc    func;
  gpointer user_data;
} PoolFunc;

static pthread_mutex_t pool_funcs_lock = PTHREAD_MUTEX_INITIALIZER;
static GHashTable *pool_funcs;  /* protected by pool_funcs_lock; GThreadPool → PoolFunc */

static void
run_pool_job (gpointer data,
              gpointer user_data)
{
  PoolFunc *pool_func = user_data;

  __tsan_acquire (pool_func);
  pool_func->func (data, pool_func->user_data);
  __tsan_release (pool_func);
}

GThreadPool *
g_thread_pool_new (GFunc      func,
                   gpointer   user_data,
                   gint       max_threads,
                   gboolean   exclusive,
                   GError   **error)
{
  PoolFunc *pool_func = g_new (PoolFunc, 1);
  GThreadPool *pool;

  pool_func->func = func;
  pool_func->user_data = user_data;
  pool = REAL (g_thread_pool_new) (run_pool_job, pool_func, max_threads, exclusive, error);
  if (pool == NULL)
    {
      g_free (pool_func);
      return NULL;
    }
  pthread_mutex_lock (&pool_funcs_lock);
  if (pool_funcs == NULL)
    pool_funcs = g_hash_table_new (NULL, NULL);
  g_hash_table_insert (pool_funcs, pool, pool_func);
  pthread_mutex_unlock (&pool_funcs_lock);
  return pool;
}

gboolean
g_thread_pool_push (GThreadPool  *pool,
                    gpointer      data,
                    GError      **error)
{
  PoolFunc *pool_func;

  /* Not pool->user_data: a pool that ends is freed by its last worker. */
  pthread_mutex_lock (&pool_funcs_lock);
  pool_func = g_hash_table_lookup (pool_funcs, pool);
  pthread_mutex_unlock (&pool_funcs_lock);
  __tsan_release (pool_func);
  return REAL (g_thread_pool_push) (pool, data, error);
}

void
g_thread_pool_free (GThreadPool *pool,
                    gboolean     immediate,
                    gboolean     wait_)
{
  PoolFunc *pool_func;

  pthread_mutex_lock (&pool_funcs_lock);
  pool_func = g_hash_table_lookup (pool_funcs, pool);
  g_hash_table_remove (pool_funcs, pool);
  pthread_mutex_unlock (&pool_funcs_lock);

  REAL (g_thread_pool_free) (pool, immediate, wait_);
  __tsan_acquire (pool_func);
  /* Without waiting, a worker may still run a job with it: it is kept. */
  if (wait_)
    g_free (pool_func);
}

/* A source's callback, behind a trampoline that acquires what
 * g_source_attach() released: a source made and attached on one thread
 * runs on the context's, with the data the first thread filled in. */
typedef struct {
  GSourceFunc    func;
  gpointer       data;
  GDestroyNotify notify;
} SourceCallback;

static gboolean
run_source_callback (gpointer user_data)
{
  SourceCallback *callback = user_data;

  __tsan_acquire (g_main_current_source ());
  return callback->func (callback->data);
}

static void
free_source_callback (gpointer user_data)
{
  SourceCallback *callback = user_data;

  if (callback->notify != NULL)
    callback->notify (callback->data);
  g_free (callback);
}

void
g_source_set_callback (GSource        *source,
                       GSourceFunc     func,
                       gpointer        data,
                       GDestroyNotify  notify)
{
  SourceCallback *callback;

  /* Only the plain callbacks: a child watch's or an fd source's has another
   * signature, and GSourceFunc is cast to it. */
  if (source->source_funcs != &g_idle_funcs && source->source_funcs != &g_timeout_funcs)
    {
      REAL (g_source_set_callback) (source, func, data, notify);
      return;
    }
  callback = g_new (SourceCallback, 1);
  callback->func = func;
  callback->data = data;
  callback->notify = notify;
  REAL (g_source_set_callback) (source, run_source_callback, callback, free_source_callback);
}

/* Attaching and destroying reallocate the context's arrays under the
 * context's lock, which libglib takes directly; this lock, held around
 * them, is the one TSan sees.  GLib serialises the same calls anyway.  A
 * source is attached and destroyed from any thread: a request's timeout,
 * an output queue's watch, a completion queued by a worker. */
/* Recursive: destroying may finalise the source, whose destroy notify may
 * attach or destroy another. */
static pthread_mutex_t attach_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

guint
g_source_attach (GSource      *source,
                 GMainContext *context)
{
  guint id;

  __tsan_release (source);
  pthread_mutex_lock (&attach_lock);
  id = REAL (g_source_attach) (source, context);
  pthread_mutex_unlock (&attach_lock);
  return id;
}

void
g_source_destroy (GSource *source)
{
  pthread_mutex_lock (&attach_lock);
  REAL (g_source_destroy) (source);
  pthread_mutex_unlock (&attach_lock);
}

/* g_main_context_invoke_full() makes and attaches its idle source inside
 * libglib, where the g_source_attach() above does not see it: the source,
 * and whatever the caller filled in for the callback, would reach the
 * context's thread with no order TSan sees (seen as a race on the source's
 * memory when the receiving thread was busy, not woken by the context's
 * eventfd).  The same steps here, through the functions above.  The
 * direct cases hand nothing over and are left to GLib. */
void
g_main_context_invoke_full (GMainContext   *context,
                            gint            priority,
                            GSourceFunc     function,
                            gpointer        data,
                            GDestroyNotify  notify)
{
  GMainContext *thread_default = g_main_context_get_thread_default ();
  GSource *source;

  if (context == NULL)
    context = g_main_context_default ();
  if (thread_default == NULL)
    thread_default = g_main_context_default ();
  if (g_main_context_is_owner (context))
    {
      REAL (g_main_context_invoke_full) (context, priority, function, data, notify);
      return;
    }
  if (thread_default == context && g_main_context_acquire (context))
    {
      REAL (g_main_context_invoke_full) (context, priority, function, data, notify);
      g_main_context_release (context);
      return;
    }
  source = g_idle_source_new ();
  g_source_set_priority (source, priority);
  g_source_set_callback (source, function, data, notify);
  g_source_attach (source, context);
  g_source_unref (source);
}

void
g_main_context_invoke (GMainContext *context,
                       GSourceFunc   function,
                       gpointer      data)
{
  g_main_context_invoke_full (context, G_PRIORITY_DEFAULT, function, data, NULL);
}

gpointer
g_async_queue_timeout_pop (GAsyncQueue *queue,
                           guint64      timeout)
{
  gpointer data = REAL (g_async_queue_timeout_pop) (queue, timeout);

  __tsan_acquire (queue);
  return data;
}

gpointer
g_async_queue_try_pop (GAsyncQueue *queue)
{
  gpointer data = REAL (g_async_queue_try_pop) (queue);

  __tsan_acquire (queue);
  return data;
}

/* A reference count: each release is ordered before the last one's free. */
gboolean
g_atomic_ref_count_dec (gatomicrefcount *arc)
{
  __tsan_release (arc);
  if (!REAL (g_atomic_ref_count_dec) (arc))
    return FALSE;
  __tsan_acquire (arc);
  return TRUE;
}

/* g_main_loop_run() returns on its thread after g_main_loop_quit() on
 * another: what the quitting thread did before is done. */
void
g_main_loop_quit (GMainLoop *loop)
{
  __tsan_release (loop);
  REAL (g_main_loop_quit) (loop);
}

void
g_main_loop_run (GMainLoop *loop)
{
  REAL (g_main_loop_run) (loop);
  __tsan_acquire (loop);
}
