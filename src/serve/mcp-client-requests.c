/* mcp-client-requests.c — the servers' requests to the client, relayed to
 * serve's own client. */
#include "config.h"

#include "serve/mcp-client-requests.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"

#define CLIENT_REQUESTS_MAX 64

/* Each method a server may ask, and the capability a client declares for
 * it. */
static const struct {
  const char *method;
  const char *capability;
} relayed[] = {
  { "roots/list", "roots" },
  { "sampling/createMessage", "sampling" },
  { "elicitation/create", "elicitation" },
};

struct _McpClientRequests {
  McpClientSendFunc  send;         /* immutable */
  gpointer           user_data;    /* immutable */
  GMutex             lock;
  json_t            *declared;     /* protected by lock; the relayable part of the client's */
  GHashTable        *waiting;      /* protected by lock; our id key → McpSessionResponder */
  guint64            next_id;      /* protected by lock */
};

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
  gpointer responder;

  if (requests == NULL)
    return;
  g_hash_table_iter_init (&iter, requests->waiting);
  while (g_hash_table_iter_next (&iter, NULL, &responder))
    mcp_session_responder_return_error (responder, MCP_JSONRPC_INTERNAL_ERROR,
                                        _("mcp-pool's client went away before it answered"));
  g_hash_table_unref (requests->waiting);
  json_decref (requests->declared);
  g_mutex_clear (&requests->lock);
  g_free (requests);
}

void
mcp_client_requests_set_client (McpClientRequests *requests,
                                json_t            *capabilities)
{
  json_t *declared = json_object ();

  for (gsize i = 0; i < G_N_ELEMENTS (relayed); i++)
    {
      json_t *capability = json_object_get (capabilities, relayed[i].capability);

      if (json_is_object (capability))
        json_object_set_new (declared, relayed[i].capability, json_deep_copy (capability));
    }
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
mcp_client_requests_relay (McpClientRequests   *requests,
                           const char          *server,
                           const char          *method,
                           json_t              *params,
                           McpSessionResponder *responder)
{
  const char *capability = NULL;
  g_autoptr(json_t) message = NULL;
  g_autofree char *id = NULL;
  gboolean full;

  for (gsize i = 0; i < G_N_ELEMENTS (relayed); i++)
    if (g_strcmp0 (method, relayed[i].method) == 0)
      capability = relayed[i].capability;

  g_mutex_lock (&requests->lock);
  if (capability == NULL || json_object_get (requests->declared, capability) == NULL)
    {
      g_mutex_unlock (&requests->lock);
      return FALSE;
    }
  full = g_hash_table_size (requests->waiting) >= CLIENT_REQUESTS_MAX;
  if (!full)
    {
      json_t *id_value;

      id = g_strdup_printf ("mcp-pool-%" G_GUINT64_FORMAT, ++requests->next_id);
      id_value = json_string (id);
      g_hash_table_insert (requests->waiting, mcp_jsonrpc_id_key (id_value), responder);
      message = json_pack ("{s:s, s:o, s:s, s:O}", "jsonrpc", "2.0", "id", id_value, "method", method,
                           "params", params != NULL ? params : json_object ());
    }
  g_mutex_unlock (&requests->lock);

  if (full)
    mcp_session_responder_return_error (responder, MCP_JSONRPC_INTERNAL_ERROR,
                                        _("mcp-pool's client has too many requests of the servers to "
                                          "answer already; ask again later"));
  else
    {
      g_debug ("Asking the client %s for server “%s”", method, server);
      requests->send (message, requests->user_data);
    }
  return TRUE;
}

gboolean
mcp_client_requests_answer (McpClientRequests *requests,
                            json_t            *response)
{
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (response, "id"));
  McpSessionResponder *responder = NULL;
  gpointer stolen_key = NULL;
  json_t *error, *code;

  g_mutex_lock (&requests->lock);
  if (key != NULL)
    g_hash_table_steal_extended (requests->waiting, key, &stolen_key, (gpointer *) &responder);
  g_mutex_unlock (&requests->lock);
  g_free (stolen_key);
  if (responder == NULL)
    return FALSE;

  error = json_object_get (response, "error");
  code = json_object_get (error, "code");
  if (error != NULL)
    mcp_session_responder_return_error (responder,
                                        json_is_integer (code) ? (int) json_integer_value (code)
                                                               : MCP_JSONRPC_INTERNAL_ERROR,
                                        mcp_json_get_string (error, "message") ?: _("(no message)"));
  else
    mcp_session_responder_return_result (responder, json_incref (json_object_get (response, "result")));
  return TRUE;
}
