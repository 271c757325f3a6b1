/* mcp-session-input.c — a 2026-07-28 server's questions
 *
 * A 2026-07-28 server asks for input by answering a call with an
 * InputRequiredResult (multi round-trip requests).  A 2026-07-28 client
 * that made the call (its capabilities are in the call's _meta) gets that
 * result as it is, and retries the call itself.  For any other caller the
 * session is the client: it asks each question through on_request, as a
 * 2025 server's own request would be asked (the front relays it to its
 * client, or turns it into an InputRequiredResult of its own), and when
 * every one is answered retries the call with the answers.  The caller
 * sees only the final result, or the first question's failure.
 *
 * A round ends once, whoever is first: the retry's reply, an answer that
 * is an error, the call's deadline, or its cancellation; the questions
 * still open are then cancelled, and their late answers dropped.  While
 * it asks, the round counts as a request in flight, so that a retirement
 * waits for it.  A server that asks more than INPUT_ROUNDS_MAX times for
 * one call is taken as looping.
 *
 * Threads: a round's fields are guarded by its lock, as marked; its
 * callback runs once, on the session's context. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "common/mcp-protocol.h"
#include "pool/mcp-session-private.h"

#define INPUT_ROUNDS_MAX 8

struct _InputRound {
  gatomicrefcount  ref_count;
  McpSession      *session;        /* a reference; immutable */
  char            *method;         /* immutable */
  json_t          *params;         /* immutable: the call's params */
  McpCallOptions   options;        /* immutable: the call's progress, with a reference on the
                                    * cancellable and on meta */
  gint64           deadline;       /* immutable */
  McpReplyFunc     callback;       /* immutable; run once, on the context */
  gpointer         user_data;      /* immutable */
  gulong           cancel_handler; /* immutable after start */
  GSource         *timeout_source; /* immutable after start; owned */
  GMutex           lock;
  gboolean         done;           /* protected by lock; the callback is on its way */
  gboolean         asking;         /* protected by lock; counted in the session's in_flight */
  guint            asked;          /* protected by lock; rounds asked so far */
  guint            waiting;        /* protected by lock; questions of this round not answered */
  json_t          *responses;      /* protected by lock; this round's inputResponses */
  json_t          *state;          /* protected by lock; this round's requestState, or NULL */
  GPtrArray       *questions;      /* protected by lock; the cancellables of this round's questions */
};

gboolean
mcp_input_round_needed (McpSession           *session,
                        const char           *method,
                        const McpCallOptions *options)
{
  static const char * const methods[] = { "tools/call", "prompts/get", "resources/read", NULL };

  return session->modern_meta != NULL && g_strv_contains (methods, method) &&
         (options == NULL || json_object_get (options->meta, MCP_META_CLIENT_CAPABILITIES) == NULL);
}

static InputRound *
input_round_ref (InputRound *round)
{
  g_atomic_ref_count_inc (&round->ref_count);
  return round;
}

void
mcp_input_round_unref (InputRound *round)
{
  if (!g_atomic_ref_count_dec (&round->ref_count))
    return;
  g_clear_object (&round->options.cancellable);
  json_decref (round->options.meta);
  if (round->timeout_source != NULL)
    {
      g_source_destroy (round->timeout_source);
      g_source_unref (round->timeout_source);
    }
  json_decref (round->responses);
  json_decref (round->state);
  g_ptr_array_unref (round->questions);
  g_mutex_clear (&round->lock);
  json_decref (round->params);
  g_free (round->method);
  mcp_session_unref (round->session);
  g_free (round);
}

/* Stops counting the round in the session's in_flight.  Called with
 * round->lock. */
static void
input_round_stop_asking_locked (InputRound *round)
{
  McpSession *session = round->session;

  if (!round->asking)
    return;
  round->asking = FALSE;
  g_mutex_lock (&session->lock);
  if (--session->in_flight == 0 && session->idle_waiters > 0)
    g_cond_broadcast (&session->idle_cond);
  g_mutex_unlock (&session->lock);
}

typedef struct {
  InputRound *round;   /* a reference */
  json_t     *result;
  GError     *error;
} InputRoundEnd;

static gboolean
input_round_end_in_idle (gpointer data)
{
  InputRoundEnd *end = data;
  InputRound *round = end->round;

  /* Nothing else may end the round once the caller has its end. */
  if (round->cancel_handler != 0)
    g_cancellable_disconnect (round->options.cancellable, round->cancel_handler);
  round->cancel_handler = 0;
  g_source_destroy (round->timeout_source);
  round->callback (end->result, end->error, round->user_data);
  g_clear_error (&end->error);
  mcp_input_round_unref (round);
  g_free (end);
  return G_SOURCE_REMOVE;
}

/* Any thread: ends the round with @result (stolen) or @error (stolen),
 * unless something ended it first; FALSE then, and both are dropped. */
static gboolean
input_round_end (InputRound *round,
                 json_t     *result,
                 GError     *error)
{
  g_autoptr(GPtrArray) questions = NULL;
  InputRoundEnd *end;
  GSource *source;

  g_mutex_lock (&round->lock);
  if (round->done)
    {
      g_mutex_unlock (&round->lock);
      json_decref (result);
      g_clear_error (&error);
      return FALSE;
    }
  round->done = TRUE;
  input_round_stop_asking_locked (round);
  questions = g_steal_pointer (&round->questions);
  round->questions = g_ptr_array_new_with_free_func (g_object_unref);
  g_mutex_unlock (&round->lock);

  for (guint i = 0; i < questions->len; i++)
    g_cancellable_cancel (g_ptr_array_index (questions, i));
  end = g_new0 (InputRoundEnd, 1);
  end->round = input_round_ref (round);
  end->result = result;
  end->error = error;
  source = g_idle_source_new ();
  g_source_set_priority (source, G_PRIORITY_DEFAULT);
  g_source_set_callback (source, input_round_end_in_idle, end, NULL);
  g_source_attach (source, round->session->context);
  g_source_unref (source);
  return TRUE;
}

static void input_round_on_reply (json_t       *result,
                                  const GError *error,
                                  gpointer      data);

/* Any thread, with every question of the round answered: the retry. */
static void
input_round_retry (InputRound *round)
{
  g_autoptr(json_t) params = json_copy (round->params);

  g_mutex_lock (&round->lock);
  json_object_set (params, "inputResponses", round->responses);
  if (round->state != NULL)
    json_object_set (params, "requestState", round->state);
  input_round_stop_asking_locked (round);
  g_mutex_unlock (&round->lock);
  mcp_session_send_request (round->session, round->method, params, round->deadline, &round->options,
                            input_round_on_reply, input_round_ref (round));
}

/* Any thread: the answer to one question, a JSON-RPC reply (borrowed). */
void
mcp_input_round_answer (McpSessionResponder *responder,
                    json_t              *reply)
{
  InputRound *round = responder->round;
  json_t *remote = json_object_get (reply, "error");
  gboolean complete;

  g_mutex_lock (&round->lock);
  if (round->done || responder->asked != round->asked)
    {
      g_mutex_unlock (&round->lock);
      return;
    }
  if (remote == NULL)
    json_object_set (round->responses, responder->key, json_object_get (reply, "result"));
  complete = remote == NULL && --round->waiting == 0;
  g_mutex_unlock (&round->lock);

  if (remote != NULL)
    {
      GError *error = g_error_new (MCP_SESSION_ERROR, MCP_SESSION_ERROR_REMOTE,
                                   _("Server “%s” asked for %s, which the client could not give: %s"),
                                   round->session->config->name, responder->method,
                                   mcp_json_get_string (remote, "message") ?: _("(no message)"));

      mcp_session_error_set_remote (error, remote);
      input_round_end (round, NULL, error);
    }
  else if (complete)
    input_round_retry (round);
}

/* The cancellables of the calls a question may serve, as for a server's
 * own request without a related one: the round's, or every call's. */
static void
input_round_add_in_flight (InputRound          *round,
                           McpSessionResponder *responder)
{
  McpSession *session = round->session;
  GHashTableIter iter;
  PendingRequest *request;

  if (round->options.cancellable != NULL)
    {
      g_ptr_array_add (responder->in_flight, g_object_ref (round->options.cancellable));
      return;
    }
  g_mutex_lock (&session->lock);
  g_hash_table_iter_init (&iter, session->pending);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &request))
    if (request->cancellable != NULL)
      g_ptr_array_add (responder->in_flight, g_object_ref (request->cancellable));
  g_mutex_unlock (&session->lock);
}

/* On the context: asks each question of @result, an InputRequiredResult. */
static void
input_round_ask (InputRound *round,
                 json_t     *result)
{
  McpSession *session = round->session;
  json_t *requests = json_object_get (result, "inputRequests");
  g_autoptr(GPtrArray) responders = g_ptr_array_new ();
  const char *key;
  json_t *question;

  if (!json_is_object (requests) || json_object_size (requests) == 0)
    {
      input_round_end (round, NULL,
                       g_error_new (MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL,
                                    _("Server “%s” answered %s with an InputRequiredResult that asks for nothing"),
                                    session->config->name, round->method));
      return;
    }
  json_object_foreach (requests, key, question)
    {
      g_autoptr(json_t) id = json_string (key);
      McpSessionResponder *responder =
        mcp_session_responder_new (session, id, mcp_json_get_string (question, "method") ?: "",
                                   json_object_get (question, "params"));

      g_free (responder->key);
      responder->key = g_strdup (key);
      responder->round = input_round_ref (round);
      input_round_add_in_flight (round, responder);
      g_ptr_array_add (responders, responder);
    }

  g_mutex_lock (&round->lock);
  round->asked++;
  round->waiting = responders->len;
  json_decref (round->responses);
  round->responses = json_object ();
  json_decref (round->state);
  round->state = json_incref (json_object_get (result, "requestState"));
  g_ptr_array_set_size (round->questions, 0);
  if (!round->asking)
    {
      round->asking = TRUE;
      g_mutex_lock (&session->lock);
      session->in_flight++;
      g_mutex_unlock (&session->lock);
    }
  for (guint i = 0; i < responders->len; i++)
    {
      McpSessionResponder *asked = g_ptr_array_index (responders, i);

      asked->asked = round->asked;
      g_ptr_array_add (round->questions, g_object_ref (asked->cancellable));
    }
  g_mutex_unlock (&round->lock);

  for (guint i = 0; i < responders->len; i++)
    {
      McpSessionResponder *asked = g_ptr_array_index (responders, i);

      if (asked->method[0] == '\0' || session->callbacks.on_request == NULL ||
          !session->callbacks.on_request (session, asked->method, asked->params, asked,
                                          session->callbacks.user_data))
        mcp_session_responder_refuse (asked);
    }
}

/* On the context: the reply to the call or to a retry of it. */
static void
input_round_on_reply (json_t       *result,
                      const GError *error,
                      gpointer      data)
{
  InputRound *round = data;
  g_autoptr(json_t) reply = result;
  gboolean ended;
  guint asked;

  g_mutex_lock (&round->lock);
  ended = round->done;
  asked = round->asked;
  g_mutex_unlock (&round->lock);
  if (ended)
    ;
  else if (error != NULL || g_strcmp0 (mcp_json_get_string (result, "resultType"), "input_required") != 0)
    input_round_end (round, g_steal_pointer (&reply), error != NULL ? g_error_copy (error) : NULL);
  else if (asked >= INPUT_ROUNDS_MAX)
    input_round_end (round, NULL,
                     g_error_new (MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL,
                                  _("Server “%s” asked for input %u times for one %s call; mcp-pool stopped "
                                    "answering"), round->session->config->name, asked, round->method));
  else
    input_round_ask (round, result);
  mcp_input_round_unref (round);
}

static gboolean
input_round_on_timeout (gpointer data)
{
  InputRound *round = data;

  input_round_end (round, NULL,
                   g_error_new (MCP_SESSION_ERROR, MCP_SESSION_ERROR_TIMEOUT,
                                _("Server “%s” did not answer %s in time; the request was cancelled"),
                                round->session->config->name, round->method));
  return G_SOURCE_REMOVE;
}

static void
input_round_on_cancelled (GCancellable *cancellable,
                          gpointer      data)
{
  InputRound *round = data;

  input_round_end (round, NULL,
                   g_error_new (MCP_SESSION_ERROR, MCP_SESSION_ERROR_CANCELLED,
                                _("The %s request to server “%s” was cancelled"),
                                round->method, round->session->config->name));
}

void
mcp_input_round_start (McpSession           *session,
                   const char           *method,
                   json_t               *params,
                   gint64                deadline,
                   const McpCallOptions *options,
                   McpReplyFunc          callback,
                   gpointer              user_data)
{
  InputRound *round = g_new0 (InputRound, 1);
  gint64 timeout_ms = MAX (0, (deadline - g_get_monotonic_time ()) / G_TIME_SPAN_MILLISECOND);

  g_atomic_ref_count_init (&round->ref_count);
  round->session = mcp_session_ref (session);
  round->method = g_strdup (method);
  round->params = params != NULL ? json_incref (params) : json_object ();
  if (options != NULL)
    {
      round->options.progress = options->progress;
      round->options.progress_data = options->progress_data;
      round->options.cancellable = options->cancellable != NULL ? g_object_ref (options->cancellable) : NULL;
      round->options.meta = json_incref (options->meta);
    }
  round->deadline = deadline;
  round->callback = callback;
  round->user_data = user_data;
  g_mutex_init (&round->lock);
  round->questions = g_ptr_array_new_with_free_func (g_object_unref);

  /* The timeout and the cancellation hold no reference: until the
   * callback's idle (which holds one) has torn them down, the request in
   * flight or the open questions hold one. */
  round->timeout_source = g_timeout_source_new ((guint) MIN (timeout_ms, G_MAXUINT));
  g_source_set_callback (round->timeout_source, input_round_on_timeout, round, NULL);
  g_source_attach (round->timeout_source, session->context);
  if (round->options.cancellable != NULL)
    round->cancel_handler = g_cancellable_connect (round->options.cancellable,
                                                   G_CALLBACK (input_round_on_cancelled), round, NULL);
  mcp_session_send_request (session, method, round->params, deadline, &round->options, input_round_on_reply, round);
}

