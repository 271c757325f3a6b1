/* mcp-input-requests.c — one call's requests for the client's input (see
 * mcp-input-requests.h). */
#include "config.h"

#include "mcp/mcp-input-requests.h"

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"

typedef struct {
  char                *key;        /* unique in the call: "<capability>-<n>" */
  McpSessionResponder *responder;  /* answered once, then NULL */
} Waiting;

struct _McpInputRequests {
  GPtrArray *waiting;   /* of Waiting, in the order the server asked */
  guint      next;      /* for the keys */
};

/* An answer not sent yet: @result, or an error with @error. */
typedef struct {
  McpSessionResponder *responder;
  json_t              *result;
  char                *error;
} Reply;

static void
waiting_free (Waiting *waiting)
{
  g_free (waiting->key);
  g_free (waiting);
}

static void
send_reply (McpSessionResponder *responder,
            json_t              *result,
            const char          *error)
{
  if (result != NULL)
    mcp_session_responder_return_result (responder, result);
  else
    mcp_session_responder_return_error (responder, MCP_JSONRPC_INTERNAL_ERROR, error);
}

static void
reply_send_and_free (Reply *reply)
{
  send_reply (reply->responder, reply->result, reply->error);
  g_free (reply->error);
  g_free (reply);
}

GPtrArray *
mcp_input_replies_new (void)
{
  return g_ptr_array_new_with_free_func ((GDestroyNotify) reply_send_and_free);
}

/* Answers @responder with @result (stolen) or else @error, now or when
 * @replies is freed. */
static void
reply (GPtrArray           *replies,
       McpSessionResponder *responder,
       json_t              *result,
       const char          *error)
{
  Reply *later;

  if (replies == NULL)
    {
      send_reply (responder, result, error);
      return;
    }
  later = g_new (Reply, 1);
  *later = (Reply) { responder, result, result == NULL ? g_strdup (error) : NULL };
  g_ptr_array_add (replies, later);
}

McpInputRequests *
mcp_input_requests_new (void)
{
  McpInputRequests *inputs = g_new0 (McpInputRequests, 1);

  inputs->waiting = g_ptr_array_new_with_free_func ((GDestroyNotify) waiting_free);
  return inputs;
}

void
mcp_input_requests_free (McpInputRequests *inputs,
                         const char       *why,
                         GPtrArray        *replies)
{
  if (inputs == NULL)
    return;
  for (guint i = 0; i < inputs->waiting->len; i++)
    {
      Waiting *waiting = g_ptr_array_index (inputs->waiting, i);

      reply (replies, waiting->responder, NULL, why);
    }
  g_ptr_array_unref (inputs->waiting);
  g_free (inputs);
}

void
mcp_input_requests_add (McpInputRequests    *inputs,
                        McpSessionResponder *responder)
{
  Waiting *waiting = g_new0 (Waiting, 1);
  const char *capability = mcp_client_capability_of (mcp_session_responder_get_method (responder));

  waiting->key = g_strdup_printf ("%s-%u", capability != NULL ? capability : "input", ++inputs->next);
  waiting->responder = responder;
  g_ptr_array_add (inputs->waiting, waiting);
}

/* The requests the server gave up are answered (it reads no answer) and
 * no longer asked for. */
static void
drop_cancelled (McpInputRequests *inputs,
                GPtrArray        *replies)
{
  for (guint i = inputs->waiting->len; i > 0; i--)
    {
      Waiting *waiting = g_ptr_array_index (inputs->waiting, i - 1);

      if (!g_cancellable_is_cancelled (mcp_session_responder_get_cancellable (waiting->responder)))
        continue;
      reply (replies, waiting->responder, NULL, _("The server cancelled its request"));
      g_ptr_array_remove_index (inputs->waiting, i - 1);
    }
}

json_t *
mcp_input_requests_dup_requests (McpInputRequests *inputs,
                                 GPtrArray        *replies)
{
  json_t *requests;

  drop_cancelled (inputs, replies);
  if (inputs->waiting->len == 0)
    return NULL;
  requests = json_object ();
  for (guint i = 0; i < inputs->waiting->len; i++)
    {
      Waiting *waiting = g_ptr_array_index (inputs->waiting, i);

      json_object_set_new (requests, waiting->key,
                           json_pack ("{s:s, s:O}", "method", mcp_session_responder_get_method (waiting->responder),
                                      "params", mcp_session_responder_get_params (waiting->responder)));
    }
  return requests;
}

json_t *
mcp_input_requests_result (McpInputRequests *inputs,
                           const char       *state,
                           GPtrArray        *replies)
{
  json_t *requests = mcp_input_requests_dup_requests (inputs, replies);

  if (requests == NULL)
    return NULL;
  return json_pack ("{s:s, s:o, s:s}", "resultType", "input_required", "inputRequests", requests,
                    "requestState", state);
}

guint
mcp_input_requests_answer (McpInputRequests *inputs,
                           json_t           *responses,
                           GPtrArray        *replies)
{
  for (guint i = inputs->waiting->len; i > 0 && json_is_object (responses); i--)
    {
      Waiting *waiting = g_ptr_array_index (inputs->waiting, i - 1);
      json_t *response = json_object_get (responses, waiting->key);

      if (!json_is_object (response))
        continue;
      reply (replies, waiting->responder, json_incref (response), NULL);
      g_ptr_array_remove_index (inputs->waiting, i - 1);
    }
  return inputs->waiting->len;
}
