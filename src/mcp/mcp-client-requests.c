/* mcp-client-requests.c — the servers' requests to the client, relayed to
 * serve's own client. */
#include "config.h"

#include "mcp/mcp-client-requests.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"

#define CLIENT_REQUESTS_MAX 64

/* A relayed request, until the client answers it or the server gives up
 * on it (its responder's cancellable: a cancel, a timeout, the end of the
 * session). */
typedef struct {
  McpClientAnswerFunc  answer;
  gpointer             answer_data;
  GCancellable        *cancellable;   /* a reference */
  gulong               handler;       /* on cancellable; 0 until connected */
} Waiting;

struct _McpClientRequests {
  McpClientSendFunc  send;         /* immutable */
  gpointer           user_data;    /* immutable */
  GMutex             lock;
  json_t            *declared;     /* protected by lock; the relayable part of the client's */
  GHashTable        *waiting;      /* protected by lock; our id key → Waiting */
  guint64            next_id;      /* protected by lock */
};

/* What the cancel handler of one relayed request needs. */
typedef struct {
  McpClientRequests *requests;
  char              *id;           /* ours, as sent to the client */
} CancelData;

static void
cancel_data_free (gpointer data)
{
  CancelData *cancel = data;

  g_free (cancel->id);
  g_free (cancel);
}

static Waiting *
steal_waiting (McpClientRequests *requests,
               json_t            *id)
{
  g_autofree char *key = mcp_jsonrpc_id_key (id);
  gpointer stolen_key = NULL;
  Waiting *waiting = NULL;

  g_mutex_lock (&requests->lock);
  if (key != NULL)
    g_hash_table_steal_extended (requests->waiting, key, &stolen_key, (gpointer *) &waiting);
  g_mutex_unlock (&requests->lock);
  g_free (stolen_key);
  return waiting;
}

/* Answers and frees @waiting; @disconnect: not from its own handler,
 * which must not disconnect itself. */
static void
waiting_finish (Waiting    *waiting,
                gboolean    disconnect,
                int         code,
                const char *message,
                json_t     *result)
{
  if (disconnect && waiting->handler != 0)
    g_cancellable_disconnect (waiting->cancellable, waiting->handler);
  waiting->answer (result, code, message, waiting->answer_data);
  g_clear_object (&waiting->cancellable);
  g_free (waiting);
}

/* The server gave up: the client is told, and the server answered. */
static void
on_cancelled (GCancellable *cancellable,
              gpointer      data)
{
  CancelData *cancel = data;
  g_autoptr(json_t) id = json_string (cancel->id);
  Waiting *waiting = steal_waiting (cancel->requests, id);
  g_autoptr(json_t) notification = NULL;

  if (waiting == NULL)
    return;
  notification = json_pack ("{s:s, s:s, s:{s:O, s:s}}", "jsonrpc", "2.0", "method", "notifications/cancelled",
                            "params", "requestId", id, "reason", "the server no longer waits for it");
  cancel->requests->send (notification, cancel->requests->user_data);
  waiting_finish (waiting, FALSE, MCP_JSONRPC_INTERNAL_ERROR, _("The request was cancelled"), NULL);
}

McpClientRequests *
mcp_client_requests_new (McpClientSendFunc send,
                         gpointer          user_data)
{
  McpClientRequests *requests = g_new0 (McpClientRequests, 1);

  requests->send = send;
  requests->user_data = user_data;
  g_mutex_init (&requests->lock);
  requests->declared = json_object ();
  requests->waiting = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return requests;
}

void
mcp_client_requests_free (McpClientRequests *requests)
{
  GHashTableIter iter;
  gpointer waiting;

  if (requests == NULL)
    return;
  /* Disconnecting waits for a handler running on another thread, which
   * takes the lock: none is held. */
  g_hash_table_iter_init (&iter, requests->waiting);
  while (g_hash_table_iter_next (&iter, NULL, &waiting))
    {
      g_hash_table_iter_steal (&iter);
      waiting_finish (waiting, TRUE, MCP_JSONRPC_INTERNAL_ERROR,
                      _("mcp-pool's client went away before it answered"), NULL);
    }
  g_hash_table_unref (requests->waiting);
  json_decref (requests->declared);
  g_mutex_clear (&requests->lock);
  g_free (requests);
}

void
mcp_client_requests_set_client (McpClientRequests *requests,
                                json_t            *capabilities)
{
  json_t *declared = mcp_client_capabilities_answering (capabilities);

  g_mutex_lock (&requests->lock);
  json_decref (requests->declared);
  requests->declared = declared;
  g_mutex_unlock (&requests->lock);
}

json_t *
mcp_client_requests_dup_declared (McpClientRequests *requests)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&requests->lock);

  return json_deep_copy (requests->declared);
}

gboolean
mcp_client_requests_relay_full (McpClientRequests   *requests,
                                const char          *server,
                                const char          *method,
                                json_t              *params,
                                GCancellable        *server_cancellable,
                                McpClientAnswerFunc  answer,
                                gpointer             answer_data)
{
  const char *capability = mcp_client_capability_of (method);
  g_autoptr(json_t) message = NULL;
  Waiting *waiting = NULL;
  CancelData *cancel;
  g_autofree char *id = NULL;
  g_autofree char *key = NULL;
  g_autoptr(GCancellable) cancellable = NULL;
  gulong handler;

  g_mutex_lock (&requests->lock);
  if (capability == NULL || json_object_get (requests->declared, capability) == NULL)
    {
      g_mutex_unlock (&requests->lock);
      return FALSE;
    }
  if (g_hash_table_size (requests->waiting) < CLIENT_REQUESTS_MAX)
    {
      g_autoptr(json_t) id_value = NULL;

      id = g_strdup_printf ("mcp-pool-%" G_GUINT64_FORMAT, ++requests->next_id);
      id_value = json_string (id);
      waiting = g_new0 (Waiting, 1);
      waiting->answer = answer;
      waiting->answer_data = answer_data;
      waiting->cancellable = g_object_ref (server_cancellable);
      cancellable = g_object_ref (waiting->cancellable);
      key = mcp_jsonrpc_id_key (id_value);
      g_hash_table_insert (requests->waiting, g_strdup (key), waiting);
      message = json_pack ("{s:s, s:O, s:s, s:o}", "jsonrpc", "2.0", "id", id_value, "method", method,
                           "params", params != NULL ? json_incref (params) : json_object ());
    }
  g_mutex_unlock (&requests->lock);

  if (waiting == NULL)
    {
      answer (NULL, MCP_JSONRPC_INTERNAL_ERROR,
              _("mcp-pool's client has too many requests of the servers to answer already; ask again later"),
              answer_data);
      return TRUE;
    }
  g_debug ("Asking the client %s for server “%s”", method, server);
  requests->send (message, requests->user_data);
  /* Connected last and without the lock: for a server that gave up
   * already, the handler runs at once and takes the entry away, so the
   * handler's id is kept only if the entry is still there. */
  cancel = g_new0 (CancelData, 1);
  cancel->requests = requests;
  cancel->id = g_strdup (id);
  handler = g_cancellable_connect (cancellable, G_CALLBACK (on_cancelled), cancel, cancel_data_free);
  g_mutex_lock (&requests->lock);
  waiting = g_hash_table_lookup (requests->waiting, key);
  if (waiting != NULL)
    waiting->handler = handler;
  g_mutex_unlock (&requests->lock);
  return TRUE;
}

/* The McpClientAnswerFunc of a session's request. */
static void
answer_responder (json_t     *result,
                  int         code,
                  const char *message,
                  gpointer    data)
{
  if (message != NULL)
    mcp_session_responder_return_error (data, code, message);
  else
    mcp_session_responder_return_result (data, result);
}

gboolean
mcp_client_requests_relay (McpClientRequests   *requests,
                           const char          *server,
                           const char          *method,
                           json_t              *params,
                           McpSessionResponder *responder)
{
  return mcp_client_requests_relay_full (requests, server, method, params,
                                         mcp_session_responder_get_cancellable (responder),
                                         answer_responder, responder);
}

gboolean
mcp_client_requests_answer (McpClientRequests *requests,
                            json_t            *response)
{
  Waiting *waiting = steal_waiting (requests, json_object_get (response, "id"));
  json_t *error, *code;

  if (waiting == NULL)
    return FALSE;
  error = json_object_get (response, "error");
  code = json_object_get (error, "code");
  if (error != NULL)
    waiting_finish (waiting, TRUE, json_is_integer (code) ? (int) json_integer_value (code)
                                                          : MCP_JSONRPC_INTERNAL_ERROR,
                    mcp_json_get_string (error, "message") ?: _("(no message)"), NULL);
  else
    waiting_finish (waiting, TRUE, 0, NULL, json_incref (json_object_get (response, "result")));
  return TRUE;
}
