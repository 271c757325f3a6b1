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

static void
waiting_free (Waiting *waiting)
{
  g_free (waiting->key);
  g_free (waiting);
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
                         const char       *why)
{
  if (inputs == NULL)
    return;
  for (guint i = 0; i < inputs->waiting->len; i++)
    {
      Waiting *waiting = g_ptr_array_index (inputs->waiting, i);

      mcp_session_responder_return_error (waiting->responder, MCP_JSONRPC_INTERNAL_ERROR, why);
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
drop_cancelled (McpInputRequests *inputs)
{
  for (guint i = inputs->waiting->len; i > 0; i--)
    {
      Waiting *waiting = g_ptr_array_index (inputs->waiting, i - 1);

      if (!g_cancellable_is_cancelled (mcp_session_responder_get_cancellable (waiting->responder)))
        continue;
      mcp_session_responder_return_error (waiting->responder, MCP_JSONRPC_INTERNAL_ERROR,
                                          _("The server cancelled its request"));
      g_ptr_array_remove_index (inputs->waiting, i - 1);
    }
}

json_t *
mcp_input_requests_result (McpInputRequests *inputs,
                           const char       *state)
{
  json_t *requests;

  drop_cancelled (inputs);
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
  return json_pack ("{s:s, s:o, s:s}", "resultType", "input_required", "inputRequests", requests,
                    "requestState", state);
}

guint
mcp_input_requests_answer (McpInputRequests *inputs,
                           json_t           *responses)
{
  for (guint i = inputs->waiting->len; i > 0 && json_is_object (responses); i--)
    {
      Waiting *waiting = g_ptr_array_index (inputs->waiting, i - 1);
      json_t *response = json_object_get (responses, waiting->key);

      if (!json_is_object (response))
        continue;
      mcp_session_responder_return_result (waiting->responder, json_incref (response));
      g_ptr_array_remove_index (inputs->waiting, i - 1);
    }
  return inputs->waiting->len;
}
