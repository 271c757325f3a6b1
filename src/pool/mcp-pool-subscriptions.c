/* mcp-pool-subscriptions.c — the resource subscriptions that the clients
 * of one pool share (mcp_pool_subscribe()).
 *
 * A server of the handshake era has one subscription per URI for its one
 * session, and every client of the pool shares that session.  So each
 * (server, URI) here is held by the clients that subscribed to it: the
 * server is asked resources/subscribe when the first one comes and
 * resources/unsubscribe when the last one goes (it unsubscribes, or its
 * front forgets it), and a new session of the server is subscribed again
 * to what is held.  A server with a subscription held is never idle.  One (server, URI) has one request to its server under
 * way at a time: a change that finds one waits for its end, on
 * subscriptions_cond, without holding anything across the request.
 */
#include "config.h"

#include "pool/mcp-pool-private.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"

typedef struct {
  char       *server;   /* immutable */
  char       *uri;      /* immutable */
  GHashTable *clients;  /* protected by subscriptions_lock: the names of its holders */
  gboolean    held;     /* protected by subscriptions_lock: the server has it */
  gboolean    busy;     /* protected by subscriptions_lock: a request to the server is under way */
} Subscription;

static void
subscription_free (Subscription *subscription)
{
  g_hash_table_unref (subscription->clients);
  g_free (subscription->server);
  g_free (subscription->uri);
  g_free (subscription);
}

void
mcp_pool_subscriptions_init (McpPool *pool)
{
  g_mutex_init (&pool->subscriptions_lock);
  g_cond_init (&pool->subscriptions_cond);
  pool->subscriptions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                               (GDestroyNotify) subscription_free);
}

void
mcp_pool_subscriptions_clear (McpPool *pool)
{
  g_hash_table_unref (pool->subscriptions);
  g_cond_clear (&pool->subscriptions_cond);
  g_mutex_clear (&pool->subscriptions_lock);
}

/* @key's subscription, made if there is none, once no request of its is
 * under way.  Called with subscriptions_lock, which the wait releases. */
static Subscription *
settled_subscription_locked (McpPool    *pool,
                             const char *key,
                             const char *server,
                             const char *uri)
{
  Subscription *subscription;

  /* Looked up again after each wait: the one waited for may be gone. */
  while ((subscription = g_hash_table_lookup (pool->subscriptions, key)) != NULL && subscription->busy)
    g_cond_wait (&pool->subscriptions_cond, &pool->subscriptions_lock);
  if (subscription == NULL)
    {
      subscription = g_new0 (Subscription, 1);
      subscription->server = g_strdup (server);
      subscription->uri = g_strdup (uri);
      subscription->clients = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_hash_table_insert (pool->subscriptions, g_strdup (key), subscription);
    }
  return subscription;
}

/* Asks the server, with subscriptions_lock released meanwhile; the others
 * wait for it.  Called with subscriptions_lock. */
static json_t *
ask_server_locked (McpPool              *pool,
                   Subscription         *subscription,
                   const char           *method,
                   const McpCallOptions *options,
                   GError              **error)
{
  g_autoptr(json_t) params = json_pack ("{s:s}", "uri", subscription->uri);
  json_t *result;

  subscription->busy = TRUE;
  g_mutex_unlock (&pool->subscriptions_lock);
  result = mcp_pool_request (pool, subscription->server, method, params, options, error);
  g_mutex_lock (&pool->subscriptions_lock);
  subscription->busy = FALSE;
  g_cond_broadcast (&pool->subscriptions_cond);
  return result;
}

/* Whether @server has a session now.  Asked before subscriptions_lock is
 * taken, since entry locks are never taken under it. */
static gboolean
server_runs (McpPool    *pool,
             const char *server)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, NULL);
  gboolean runs;

  if (entry == NULL)
    return FALSE;
  g_mutex_lock (&entry->lock);
  runs = entry->state == MCP_SERVER_READY && entry->session != NULL;
  g_mutex_unlock (&entry->lock);
  return runs;
}

json_t *
mcp_pool_subscribe (McpPool              *pool,
                    const char           *server,
                    const char           *method,
                    const char           *uri,
                    const McpCallOptions *options,
                    GError              **error)
{
  const char *client = options != NULL && options->client != NULL ? options->client : "";
  gboolean subscribe = g_str_equal (method, "resources/subscribe");
  g_autofree char *key = g_strconcat (server, "\n", uri, NULL);
  /* A server that is not running has no subscription to end. */
  gboolean runs = subscribe || server_runs (pool, server);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&pool->subscriptions_lock);
  Subscription *subscription = settled_subscription_locked (pool, key, server, uri);
  json_t *result = NULL;

  if (subscribe && !subscription->held && g_hash_table_size (pool->subscriptions) > MCP_POOL_SUBSCRIPTIONS_MAX)
    g_set_error (error, MCP_POOL_ERROR, MCP_POOL_ERROR_TOO_MANY_SUBSCRIPTIONS,
                 _("mcp-pool holds subscriptions to %u resources for its clients, as many as it allows; "
                   "unsubscribe from some first"), MCP_POOL_SUBSCRIPTIONS_MAX);
  else if (subscribe && !subscription->held)
    {
      if ((result = ask_server_locked (pool, subscription, method, options, error)) != NULL)
        subscription->held = TRUE;
    }
  else if (!subscribe && subscription->held &&
           g_hash_table_remove (subscription->clients, client) &&
           g_hash_table_size (subscription->clients) == 0)
    {
      /* Whatever the server says, it is asked no more. */
      result = runs ? ask_server_locked (pool, subscription, method, options, error) : json_object ();
      subscription->held = FALSE;
    }
  else if (!subscribe && !subscription->held)
    /* Held by nobody: the server answers as it would. */
    result = ask_server_locked (pool, subscription, method, options, error);
  else
    result = json_object ();

  if (subscribe && subscription->held)
    g_hash_table_add (subscription->clients, g_strdup (client));
  if (!subscription->held && !subscription->busy)
    g_hash_table_remove (pool->subscriptions, key);
  return result;
}

void
mcp_pool_run_unsubscribe (McpPool    *pool,
                          const char *client)
{
  McpCallOptions options = { .client = client };
  g_autoptr(GPtrArray) held = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter iter;
  Subscription *subscription;

  g_mutex_lock (&pool->subscriptions_lock);
  g_hash_table_iter_init (&iter, pool->subscriptions);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &subscription))
    if (g_hash_table_contains (subscription->clients, client))
      {
        g_ptr_array_add (held, g_strdup (subscription->server));
        g_ptr_array_add (held, g_strdup (subscription->uri));
      }
  g_mutex_unlock (&pool->subscriptions_lock);

  for (guint i = 0; i + 1 < held->len; i += 2)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(json_t) result = mcp_pool_subscribe (pool, held->pdata[i], "resources/unsubscribe",
                                                     held->pdata[i + 1], &options, &error);

      if (result == NULL)
        g_debug ("Unsubscribing “%s” of server “%s” for a client that left: %s", (char *) held->pdata[i + 1],
                 (char *) held->pdata[i], error->message);
    }
}

void
mcp_pool_forget_subscriber (McpPool    *pool,
                            const char *client)
{
  BackgroundJob *job;
  gboolean holds = FALSE;
  GHashTableIter iter;
  Subscription *subscription;

  g_mutex_lock (&pool->subscriptions_lock);
  g_hash_table_iter_init (&iter, pool->subscriptions);
  while (!holds && g_hash_table_iter_next (&iter, NULL, (gpointer *) &subscription))
    holds = g_hash_table_contains (subscription->clients, client);
  g_mutex_unlock (&pool->subscriptions_lock);
  if (!holds)
    return;
  job = g_new0 (BackgroundJob, 1);
  job->kind = JOB_UNSUBSCRIBE;
  job->client = g_strdup (client);
  if (!mcp_pool_push_background_job (pool, job))
    mcp_pool_background_job_free (job);
}

gboolean
mcp_pool_is_subscribed_locked (PoolEntry *entry)
{
  McpPool *pool = entry->pool;
  gboolean subscribed = FALSE;
  GHashTableIter iter;
  Subscription *subscription;

  g_mutex_lock (&pool->subscriptions_lock);
  g_hash_table_iter_init (&iter, pool->subscriptions);
  while (!subscribed && g_hash_table_iter_next (&iter, NULL, (gpointer *) &subscription))
    subscribed = subscription->held && g_str_equal (subscription->server, entry->name);
  g_mutex_unlock (&pool->subscriptions_lock);
  return subscribed;
}

static void
on_resubscribed (json_t       *result,
                 const GError *error,
                 gpointer      user_data)
{
  g_autofree char *uri = user_data;

  if (error != NULL)
    g_message (_("A restarted server did not take the subscription to “%s” again: %s"), uri, error->message);
  json_decref (result);
}

void
mcp_pool_resubscribe_locked (PoolEntry *entry)
{
  McpPool *pool = entry->pool;
  GHashTableIter iter;
  Subscription *subscription;

  g_mutex_lock (&pool->subscriptions_lock);
  g_hash_table_iter_init (&iter, pool->subscriptions);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &subscription))
    if (subscription->held && g_str_equal (subscription->server, entry->name))
      {
        g_autoptr(json_t) params = json_pack ("{s:s}", "uri", subscription->uri);

        mcp_session_call_async (entry->session, "resources/subscribe", params, NULL, on_resubscribed,
                                g_strdup (subscription->uri));
      }
  g_mutex_unlock (&pool->subscriptions_lock);
}
