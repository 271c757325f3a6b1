/* mcp-parked-calls.c — 2026-07-28 calls waiting for their client's input
 * (see mcp-parked-calls.h).
 *
 * Each tracked call is in `calls` by its id from its start until its end;
 * one that asked its client is also in `states` by its requestState
 * until its client retries for the last time or it is abandoned.  Where
 * the call's end goes is `reply_id`: the call's own id until it is
 * answered with an InputRequiredResult, then NULL until a retry comes,
 * then that retry's id.
 *
 * Nothing that calls out of this set runs under its lock: answering a
 * server's request may send a 2026-07-28 server's retry or fail a call,
 * whose end comes back here on the same thread, and cancelling a call may
 * run its handlers.  What a change under the lock leaves to do is kept in
 * an Aftermath and done by after_unlock().
 */
#include "config.h"

#include "mcp/mcp-parked-calls.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "mcp/mcp-input-requests.h"
#include "mcp/mcp-modern.h"

typedef struct {
  McpParkedCalls   *calls;
  char             *key;          /* the call's id as a key in calls; immutable */
  json_t           *request;      /* immutable */
  GCancellable     *cancellable;  /* immutable */
  json_t           *reply_id;     /* protected by calls->lock; see the header comment */
  char             *state;        /* protected by calls->lock; NULL until it asks */
  McpInputRequests *inputs;       /* protected by calls->lock; NULL until it asks */
  json_t           *reply;        /* protected by calls->lock: its end, while no retry waits */
  gboolean          ended;        /* protected by calls->lock; the call has ended */
  gboolean          abandoned;    /* protected by calls->lock; its end is dropped */
  GSource          *asking;       /* protected by calls->lock: the idle that asks */
  GSource          *expiry;       /* protected by calls->lock: while no retry waits */
} ParkedCall;

struct _McpParkedCalls {
  GMainContext      *context;     /* immutable */
  guint              max;         /* immutable */
  guint              timeout_s;   /* immutable */
  McpParkedSendFunc  send;        /* immutable */
  gpointer           send_data;   /* immutable */
  GMutex             lock;
  GHashTable        *calls;       /* protected by lock: id key → ParkedCall (owned) */
  GHashTable        *states;      /* protected by lock: requestState → ParkedCall (borrowed) */
};

/* What is done once the lock is released, in this order: the servers'
 * requests are answered, the calls are cancelled, the client is sent its
 * message.  Each part is NULL until needed, as most calls need none. */
typedef struct {
  GPtrArray *replies;     /* mcp_input_replies_new() */
  GPtrArray *cancelled;   /* of GCancellable (owned) */
  json_t    *message;     /* for the client */
} Aftermath;

static GPtrArray *
replies_of (Aftermath *after)
{
  if (after->replies == NULL)
    after->replies = mcp_input_replies_new ();
  return after->replies;
}

/* Releases @calls' lock, then does what @after holds. */
static void
after_unlock (McpParkedCalls *calls,
              Aftermath      *after)
{
  g_mutex_unlock (&calls->lock);
  g_clear_pointer (&after->replies, g_ptr_array_unref);
  for (guint i = 0; after->cancelled != NULL && i < after->cancelled->len; i++)
    g_cancellable_cancel (g_ptr_array_index (after->cancelled, i));
  g_clear_pointer (&after->cancelled, g_ptr_array_unref);
  if (after->message != NULL)
    calls->send (g_steal_pointer (&after->message), calls->send_data);
}

static void
destroy_source (GSource **source)
{
  if (*source == NULL)
    return;
  g_source_destroy (*source);
  g_clear_pointer (source, g_source_unref);
}

/* Under the lock, a call's questions are taken first (forget_locked());
 * only the set's own end frees one that still has them. */
static void
parked_call_free (ParkedCall *call)
{
  destroy_source (&call->asking);
  destroy_source (&call->expiry);
  mcp_input_requests_free (call->inputs, _("The call ended before its client answered"), NULL);
  g_free (call->key);
  json_decref (call->request);
  g_object_unref (call->cancellable);
  json_decref (call->reply_id);
  g_free (call->state);
  json_decref (call->reply);
  g_free (call);
}

McpParkedCalls *
mcp_parked_calls_new (GMainContext      *context,
                      guint              max,
                      guint              timeout_s,
                      McpParkedSendFunc  send,
                      gpointer           user_data)
{
  McpParkedCalls *calls = g_new0 (McpParkedCalls, 1);

  calls->context = g_main_context_ref (context);
  calls->max = max;
  if (timeout_s == 0 && g_getenv ("MCP_POOL_INPUT_TIMEOUT") != NULL)
    timeout_s = CLAMP (g_ascii_strtoull (g_getenv ("MCP_POOL_INPUT_TIMEOUT"), NULL, 10), 1, 86400);
  calls->timeout_s = timeout_s > 0 ? timeout_s : MCP_PARKED_TIMEOUT_S;
  calls->send = send;
  calls->send_data = user_data;
  g_mutex_init (&calls->lock);
  calls->calls = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) parked_call_free);
  calls->states = g_hash_table_new (g_str_hash, g_str_equal);
  return calls;
}

void
mcp_parked_calls_free (McpParkedCalls *calls)
{
  mcp_parked_calls_abandon_all (calls);
  g_hash_table_unref (calls->states);
  g_hash_table_unref (calls->calls);
  g_mutex_clear (&calls->lock);
  g_main_context_unref (calls->context);
  g_free (calls);
}

void
mcp_parked_calls_track (McpParkedCalls *calls,
                        json_t         *request,
                        GCancellable   *cancellable)
{
  ParkedCall *call = g_new0 (ParkedCall, 1);

  call->calls = calls;
  call->key = mcp_jsonrpc_id_key (json_object_get (request, "id"));
  call->request = json_incref (request);
  call->cancellable = g_object_ref (cancellable);
  call->reply_id = json_incref (json_object_get (request, "id"));
  g_mutex_lock (&calls->lock);
  g_hash_table_replace (calls->calls, call->key, call);
  g_mutex_unlock (&calls->lock);
}

/* @call's requestState no longer finds it, and the questions it still
 * has are refused with @why after the lock.  Called with calls->lock. */
static void
drop_questions_locked (ParkedCall *call,
                       const char *why,
                       Aftermath  *after)
{
  if (call->state != NULL)
    g_hash_table_remove (call->calls->states, call->state);
  if (call->inputs != NULL)
    mcp_input_requests_free (g_steal_pointer (&call->inputs), why, replies_of (after));
}

/* @call leaves both tables and is freed; the questions it still has are
 * refused with @why after the lock.  Called with calls->lock. */
static void
forget_locked (ParkedCall *call,
               const char *why,
               Aftermath  *after)
{
  drop_questions_locked (call, why, after);
  g_hash_table_remove (call->calls->calls, call->key);
}

/* Its end and its questions go; its cancellable stops the call, after
 * the lock.  Called with calls->lock; the call stays in calls until it
 * ends. */
static void
abandon_locked (ParkedCall *call,
                const char *why,
                Aftermath  *after)
{
  drop_questions_locked (call, why, after);
  call->abandoned = TRUE;
  destroy_source (&call->asking);
  destroy_source (&call->expiry);
  g_clear_pointer (&call->reply, json_decref);
  if (after->cancelled == NULL)
    after->cancelled = g_ptr_array_new_with_free_func (g_object_unref);
  g_ptr_array_add (after->cancelled, g_object_ref (call->cancellable));
  if (call->ended)
    g_hash_table_remove (call->calls->calls, call->key);
}

/* What a source of a call's knows of it: the call may end on another
 * thread, so it is found again by its key, under the lock. */
typedef struct {
  McpParkedCalls *calls;
  char           *key;
} CallSource;

static void
call_source_free (CallSource *data)
{
  g_free (data->key);
  g_free (data);
}

static GSource *
attach_source (ParkedCall  *call,
               GSource     *source,
               GSourceFunc  func)
{
  CallSource *data = g_new (CallSource, 1);

  data->calls = call->calls;
  data->key = g_strdup (call->key);
  g_source_set_callback (source, func, data, (GDestroyNotify) call_source_free);
  g_source_attach (source, call->calls->context);
  return source;
}

/* The call whose @field is the running source, or NULL if that source
 * was destroyed meanwhile.  Called with calls->lock. */
static ParkedCall *
call_of_source_locked (CallSource *data,
                       gsize       field)
{
  ParkedCall *call = g_hash_table_lookup (data->calls->calls, data->key);

  if (call == NULL || G_STRUCT_MEMBER (GSource *, call, field) != g_main_current_source ())
    return NULL;
  return call;
}

static gboolean
on_expired (gpointer user_data)
{
  CallSource *data = user_data;
  Aftermath after = { 0 };
  ParkedCall *call;

  g_mutex_lock (&data->calls->lock);
  if ((call = call_of_source_locked (data, G_STRUCT_OFFSET (ParkedCall, expiry))) != NULL)
    abandon_locked (call, _("The client did not retry the call with its input in time"), &after);
  after_unlock (data->calls, &after);
  return G_SOURCE_REMOVE;
}

/* @call's InputRequiredResult under its reply_id, which is taken, for
 * the client; none if no question waits any more (the server cancelled
 * them).  Called with calls->lock. */
static void
ask_locked (ParkedCall *call,
            Aftermath  *after)
{
  g_autoptr(json_t) result = mcp_input_requests_result (call->inputs, call->state, replies_of (after));

  if (result == NULL || call->reply_id == NULL)
    return;
  after->message = mcp_jsonrpc_result_new (call->reply_id, g_steal_pointer (&result));
  g_clear_pointer (&call->reply_id, json_decref);
  destroy_source (&call->expiry);
  call->expiry = attach_source (call, g_timeout_source_new_seconds (call->calls->timeout_s), on_expired);
}

/* On the context, once the server's requests of this turn are in. */
static gboolean
on_asking (gpointer user_data)
{
  CallSource *data = user_data;
  Aftermath after = { 0 };
  ParkedCall *call;

  g_mutex_lock (&data->calls->lock);
  if ((call = call_of_source_locked (data, G_STRUCT_OFFSET (ParkedCall, asking))) != NULL)
    {
      g_clear_pointer (&call->asking, g_source_unref);
      ask_locked (call, &after);
    }
  after_unlock (data->calls, &after);
  return G_SOURCE_REMOVE;
}

/* The tracked call @responder's request is for: one made with a
 * cancellable the server's request names.  Called with calls->lock. */
static ParkedCall *
call_of_locked (McpParkedCalls      *calls,
                McpSessionResponder *responder)
{
  GPtrArray *in_flight = mcp_session_responder_get_in_flight (responder);
  GHashTableIter iter;
  ParkedCall *call;

  g_hash_table_iter_init (&iter, calls->calls);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &call))
    for (guint i = 0; in_flight != NULL && i < in_flight->len; i++)
      if (in_flight->pdata[i] == call->cancellable)
        return call;
  return NULL;
}

gboolean
mcp_parked_calls_ask (McpParkedCalls      *calls,
                      McpSessionResponder *responder)
{
  const char *capability = mcp_client_capability_of (mcp_session_responder_get_method (responder));
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&calls->lock);
  ParkedCall *call = call_of_locked (calls, responder);
  json_t *meta;

  if (call == NULL || capability == NULL || call->ended || call->abandoned)
    return FALSE;
  meta = json_object_get (json_object_get (call->request, "params"), "_meta");
  if (json_object_get (json_object_get (meta, MCP_META_CLIENT_CAPABILITIES), capability) == NULL)
    return FALSE;
  if (call->inputs == NULL)
    {
      g_autofree char *random = g_uuid_string_random ();

      if (g_hash_table_size (calls->states) >= calls->max)
        return FALSE;
      call->inputs = mcp_input_requests_new ();
      call->state = g_strconcat (MCP_PARKED_STATE_PREFIX, random, NULL);
      g_hash_table_insert (calls->states, call->state, call);
    }
  mcp_input_requests_add (call->inputs, responder);
  if (call->asking == NULL && call->reply_id != NULL)
    call->asking = attach_source (call, g_idle_source_new (), on_asking);
  return TRUE;
}

/* @reply (borrowed) as the answer to @id. */
static json_t *
reply_as (json_t *reply,
          json_t *id)
{
  json_t *copy = json_copy (reply);

  json_object_set (copy, "id", id);
  return copy;
}

gboolean
mcp_parked_calls_end (McpParkedCalls *calls,
                      json_t         *id,
                      json_t         *reply,
                      GBytes         *line)
{
  g_autofree char *key = NULL;
  g_autoptr(json_t) parsed = NULL;
  Aftermath after = { 0 };
  gboolean taken = TRUE;
  ParkedCall *call;

  /* The warm path's replies pass here: nothing is computed for them
   * while no 2026-07-28 call is in flight. */
  g_mutex_lock (&calls->lock);
  if (g_hash_table_size (calls->calls) == 0 || (key = mcp_jsonrpc_id_key (id)) == NULL ||
      (call = g_hash_table_lookup (calls->calls, key)) == NULL)
    {
      g_mutex_unlock (&calls->lock);
      return FALSE;
    }
  /* Only a call that asked needs its end as a value. */
  if (reply == NULL && line != NULL && call->state != NULL && !call->abandoned)
    reply = parsed = json_loadb (g_bytes_get_data (line, NULL), g_bytes_get_size (line), 0, NULL);
  if (call->state == NULL || call->abandoned || reply == NULL)
    {
      /* Never asked: the front answers it as usual. */
      taken = call->state != NULL;
      if (call->state != NULL && !call->abandoned)
        abandon_locked (call, _("The call ended before its client answered"), &after);
      g_hash_table_remove (calls->calls, key);
    }
  else if (call->reply_id != NULL)
    {
      after.message = reply_as (reply, call->reply_id);
      forget_locked (call, _("The call ended before its client answered"), &after);
    }
  else
    {
      /* Kept for the retry to come, until the call expires. */
      call->ended = TRUE;
      call->reply = json_incref (reply);
    }
  after_unlock (calls, &after);
  return taken;
}

gboolean
mcp_parked_calls_retry (McpParkedCalls *calls,
                        json_t         *request)
{
  json_t *params = json_object_get (request, "params");
  json_t *id = json_object_get (request, "id");
  const char *state = mcp_json_get_string (params, "requestState");
  Aftermath after = { 0 };
  ParkedCall *call;

  if (state == NULL || !g_str_has_prefix (state, MCP_PARKED_STATE_PREFIX))
    return FALSE;

  g_mutex_lock (&calls->lock);
  call = g_hash_table_lookup (calls->states, state);
  if (call == NULL || !mcp_modern_same_call (call->request, request))
    after.message = mcp_jsonrpc_error_new (id, MCP_JSONRPC_INVALID_PARAMS,
                                     _("Invalid params: requestState names no call that waits for this client's "
                                       "input (it was answered, it timed out, or it was for another request); "
                                       "send the request again without it"), NULL);
  else if (call->reply_id != NULL)
    after.message = mcp_jsonrpc_error_new (id, MCP_JSONRPC_INVALID_REQUEST,
                                     _("A retry with this requestState is already waiting for the answer"), NULL);
  else
    {
      call->reply_id = json_incref (id);
      destroy_source (&call->expiry);
      mcp_input_requests_answer (call->inputs, json_object_get (params, "inputResponses"), replies_of (&after));
      if (call->ended)
        {
          after.message = reply_as (call->reply, id);
          forget_locked (call, _("The call ended before its client answered"), &after);
        }
      else
        ask_locked (call, &after);
    }
  after_unlock (calls, &after);
  return TRUE;
}

void
mcp_parked_calls_abandon_all (McpParkedCalls *calls)
{
  g_autoptr(GPtrArray) waiting = g_ptr_array_new ();
  Aftermath after = { 0 };
  GHashTableIter iter;
  ParkedCall *call;

  g_mutex_lock (&calls->lock);
  g_hash_table_iter_init (&iter, calls->states);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &call))
    g_ptr_array_add (waiting, call);
  for (guint i = 0; i < waiting->len; i++)
    abandon_locked (g_ptr_array_index (waiting, i), _("mcp-pool is shutting down"), &after);
  after_unlock (calls, &after);
}
