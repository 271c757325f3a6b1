/* mcp-daemon-inputs.c — mcp-poold's 2026-07-28 calls that wait for
 * their client's input (see mcp-daemon-inputs.h).
 *
 * A client's McpParkedCalls sends JSON-RPC messages by id; `owed` finds
 * the HandleRequest each one answers: a tracked call's own, until it is
 * answered or ends, and each retry's, until the set answers it.
 */
#include "config.h"

#include "daemon/mcp-daemon-inputs.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "mcp/mcp-parked-calls.h"

typedef struct {
  char            *client;   /* immutable */
  McpParkedCalls  *parked;   /* immutable */
  /* id key → GDBusMethodInvocation (a reference, used by its answer) */
  GHashTable      *owed;
  guint            tracked;  /* calls tracked that have not ended */
  gboolean         gone;     /* the client left */
} ClientSet;

struct _McpDaemonInputs {
  GMainContext *context;     /* immutable */
  guint         max;         /* immutable */
  GHashTable   *clients;     /* unique name → ClientSet (owned) */
};

/* McpParkedSendFunc, on the main context: @message answers the
 * HandleRequest of its id; dropped if none waits (the client left). */
static void
send_to_client (json_t   *message,
                gpointer  user_data)
{
  ClientSet *set = user_data;
  g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (message, "id"));
  g_autofree char *text = NULL;
  gpointer owed_key = NULL, invocation = NULL;

  if (key != NULL && g_hash_table_steal_extended (set->owed, key, &owed_key, &invocation))
    {
      g_free (owed_key);
      text = json_dumps (message, JSON_COMPACT);
      g_dbus_method_invocation_return_value (invocation, g_variant_new ("(s)", text != NULL ? text : "{}"));
    }
  json_decref (message);
}

static void
client_set_free (ClientSet *set)
{
  GHashTableIter iter;
  gpointer key, invocation;

  mcp_parked_calls_free (set->parked);
  /* Retries of calls that were abandoned, whose ends were dropped. */
  g_hash_table_iter_init (&iter, set->owed);
  while (g_hash_table_iter_next (&iter, &key, &invocation))
    {
      g_hash_table_iter_steal (&iter);
      g_free (key);
      g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR, G_DBUS_ERROR_FAILED,
                                                     _("The call this retry was for was abandoned: mcp-pool is "
                                                       "shutting down or its client left"));
    }
  g_hash_table_unref (set->owed);
  g_free (set->client);
  g_free (set);
}

McpDaemonInputs *
mcp_daemon_inputs_new (GMainContext *context,
                       guint         max_per_client)
{
  McpDaemonInputs *inputs = g_new0 (McpDaemonInputs, 1);

  inputs->context = g_main_context_ref (context);
  inputs->max = max_per_client;
  inputs->clients = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) client_set_free);
  return inputs;
}

void
mcp_daemon_inputs_free (McpDaemonInputs *inputs)
{
  g_hash_table_unref (inputs->clients);
  g_main_context_unref (inputs->context);
  g_free (inputs);
}

static ClientSet *
set_of (McpDaemonInputs       *inputs,
        GDBusMethodInvocation *invocation,
        gboolean               create)
{
  const char *client = g_dbus_method_invocation_get_sender (invocation);
  ClientSet *set;

  client = client != NULL ? client : "";
  set = g_hash_table_lookup (inputs->clients, client);
  if (set != NULL || !create)
    return set;
  set = g_new0 (ClientSet, 1);
  set->client = g_strdup (client);
  set->parked = mcp_parked_calls_new (inputs->context, inputs->max, 0, send_to_client, set);
  set->owed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  g_hash_table_insert (inputs->clients, set->client, set);
  return set;
}

gboolean
mcp_daemon_inputs_track (McpDaemonInputs       *inputs,
                         GDBusMethodInvocation *invocation,
                         json_t                *request,
                         GCancellable          *cancellable)
{
  ClientSet *set = set_of (inputs, invocation, TRUE);
  char *key = mcp_jsonrpc_id_key (json_object_get (request, "id"));

  if (key == NULL || g_hash_table_contains (set->owed, key))
    {
      g_free (key);
      return FALSE;
    }
  set->tracked++;
  g_hash_table_insert (set->owed, key, g_object_ref (invocation));
  mcp_parked_calls_track (set->parked, request, cancellable);
  return TRUE;
}

gboolean
mcp_daemon_inputs_end (McpDaemonInputs       *inputs,
                       GDBusMethodInvocation *invocation,
                       json_t                *request,
                       GVariant              *reply)
{
  ClientSet *set = set_of (inputs, invocation, FALSE);
  json_t *id = json_object_get (request, "id");
  g_autofree char *key = mcp_jsonrpc_id_key (id);
  g_autoptr(GBytes) line = NULL;
  const char *text;
  gboolean taken;

  if (set == NULL || key == NULL)
    return FALSE;
  if (reply != NULL)
    {
      g_variant_get (reply, "(&s)", &text);
      line = g_bytes_new_static (text, strlen (text));
    }
  taken = mcp_parked_calls_end (set->parked, id, NULL, line);
  if (taken)
    /* Answered by the set (or its end dropped): the reference that the
     * caller's answer would have used goes. */
    g_object_unref (invocation);
  else
    g_hash_table_remove (set->owed, key);
  if (--set->tracked == 0 && set->gone)
    g_hash_table_remove (inputs->clients, set->client);
  return taken;
}

gboolean
mcp_daemon_inputs_ask (McpDaemonInputs     *inputs,
                       const char          *client,
                       McpSessionResponder *responder)
{
  ClientSet *set = g_hash_table_lookup (inputs->clients, client);

  return set != NULL && !set->gone && mcp_parked_calls_ask (set->parked, responder);
}

gboolean
mcp_daemon_inputs_retry (McpDaemonInputs       *inputs,
                         GDBusMethodInvocation *invocation,
                         json_t                *request)
{
  const char *state = mcp_json_get_string (json_object_get (request, "params"), "requestState");
  char *key = mcp_jsonrpc_id_key (json_object_get (request, "id"));
  ClientSet *set;

  if (state == NULL || !g_str_has_prefix (state, MCP_PARKED_STATE_PREFIX) || key == NULL)
    {
      g_free (key);
      return FALSE;
    }
  set = set_of (inputs, invocation, TRUE);
  if (g_hash_table_contains (set->owed, key))
    {
      g_free (key);
      g_dbus_method_invocation_return_error_literal (invocation, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS,
                                                     _("A request with this id is still in flight; give the "
                                                       "retry an id of its own"));
      return TRUE;
    }
  /* The handler's reference, which the answer uses. */
  g_hash_table_insert (set->owed, key, invocation);
  mcp_parked_calls_retry (set->parked, request);
  return TRUE;
}

void
mcp_daemon_inputs_forget (McpDaemonInputs *inputs,
                          const char      *client)
{
  ClientSet *set = g_hash_table_lookup (inputs->clients, client);

  if (set == NULL)
    return;
  set->gone = TRUE;
  mcp_parked_calls_abandon_all (set->parked);
  if (set->tracked == 0)
    g_hash_table_remove (inputs->clients, client);
}

void
mcp_daemon_inputs_abandon_all (McpDaemonInputs *inputs)
{
  GHashTableIter iter;
  ClientSet *set;

  g_hash_table_iter_init (&iter, inputs->clients);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &set))
    mcp_parked_calls_abandon_all (set->parked);
}
