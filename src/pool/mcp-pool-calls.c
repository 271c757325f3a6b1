/* mcp-pool-calls.c — tool calls through the pool: the warm path, which
 * never blocks, and the blocking call that may start the server first.
 *
 * A warm call is a state read under the entry's lock (READY, alive, a
 * free slot, the tool known) and an asynchronous session call; its reply
 * does the bookkeeping on the pool's context.  Anything else (a start, a
 * wait for a slot or for a start under way, a backoff error) is for the
 * blocking call, on a worker.
 */
#include "config.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"
#include "pool/mcp-pool-private.h"

/* A server that crashed or hung usually said why on stderr. */
static void
append_stderr_tail (McpSession *session,
                    GError     *error)
{
  g_autofree char *tail = mcp_session_dup_stderr_tail (session, MCP_SESSION_STDERR_TAIL);
  char *message;

  if (tail[0] == '\0')
    return;
  message = g_strdup_printf (_("%s\nLast lines of its stderr:\n%s"), error->message, tail);
  g_free (error->message);
  error->message = message;
}

static json_t *
tools_call_params (const char *tool,
                   json_t     *arguments)
{
  return arguments != NULL
         ? json_pack ("{s:s, s:O}", "name", tool, "arguments", arguments)
         : json_pack ("{s:s, s:{}}", "name", tool, "arguments");
}

/* The same as JSON text, around arguments that are JSON text already.
 * A tool's name is mostly letters; one that needs escapes is encoded by
 * Jansson. */
static GString *
tools_call_params_text (const char *tool,
                        const char *arguments,
                        gsize       arguments_length)
{
  GString *text = g_string_sized_new (arguments_length + strlen (tool) + 32);
  gboolean plain = TRUE;

  for (const char *c = tool; *c != '\0' && plain; c++)
    plain = *c != '"' && *c != '\\' && (guchar) *c >= 0x20;
  g_string_append (text, "{\"name\":");
  if (plain)
    {
      g_string_append_c (text, '"');
      g_string_append (text, tool);
      g_string_append_c (text, '"');
    }
  else
    {
      g_autoptr(json_t) name = json_string (tool);
      g_autofree char *encoded = json_dumps (name, JSON_ENCODE_ANY);

      g_string_append (text, encoded);
    }
  g_string_append (text, ",\"arguments\":");
  g_string_append_len (text, arguments, arguments_length);
  g_string_append_c (text, '}');
  return text;
}

/* The timeout of a call to @entry's server: the caller's, or the server's
 * call timeout, capped.  entry->lock held: a reload may replace the config. */
static gint64
call_timeout_ms_locked (PoolEntry *entry,
                        gint64     asked_ms)
{
  gint64 timeout_ms = asked_ms > 0 ? asked_ms : entry->config->call_timeout_ms;

  return MIN (timeout_ms, MCP_CALL_TIMEOUT_MAX_MS);
}

json_t *
mcp_pool_call_tool (McpPool               *pool,
                    const char            *server,
                    const char            *tool,
                    json_t                *arguments,
                    const McpCallOptions  *options,
                    GError               **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);
  g_autoptr(json_t) params = NULL;
  g_autoptr(GError) failure = NULL;
  McpCallOptions call_options = { 0 };
  McpSession *session;
  json_t *result;

  if (entry == NULL)
    return NULL;

  session = mcp_pool_acquire_session (entry, TRUE, error);
  if (session == NULL)
    return NULL;

  /* Refuse a tool that a fresh list does not have, naming the real ones;
   * a stale list may be out of date, so then the server decides. */
  if (options != NULL)
    call_options = *options;

  g_mutex_lock (&entry->lock);
  if (entry->tools != NULL && !entry->tools_stale && mcp_pool_find_tool (entry->tools, tool) == NULL)
    {
      mcp_pool_set_unknown_tool_error (entry, tool, error);
      g_mutex_unlock (&entry->lock);
      mcp_pool_release_session (entry, session, TRUE, NULL);
      return NULL;
    }
  call_options.timeout_ms = call_timeout_ms_locked (entry, call_options.timeout_ms);
  g_mutex_unlock (&entry->lock);

  params = tools_call_params (tool, arguments);
  /* Never replayed: a crash mid-call may already have had effects. */
  result = mcp_session_call_full (session, "tools/call", params, &call_options, &failure);
  if (mcp_call_error_is_fatal (failure))
    append_stderr_tail (session, failure);
  mcp_pool_release_session (entry, session, TRUE, failure);
  if (failure != NULL)
    g_propagate_error (error, g_steal_pointer (&failure));
  return result;
}

typedef struct {
  PoolEntry       *entry;
  McpSession      *session;     /* the slot's reference */
  McpReplyFunc     callback;
  McpRawReplyFunc  raw_reply;
  gpointer         user_data;
} WarmCall;

static void
warm_call_free (WarmCall *call)
{
  mcp_pool_entry_unref (call->entry);
  g_free (call);
}

static void
on_warm_reply (json_t       *result,
               const GError *error,
               gpointer      data)
{
  WarmCall *call = data;
  g_autoptr(GError) failure = error != NULL ? g_error_copy (error) : NULL;

  if (mcp_call_error_is_fatal (failure))
    append_stderr_tail (call->session, failure);
  mcp_pool_release_session (call->entry, call->session, TRUE, failure);
  call->callback (result, failure, call->user_data);
  warm_call_free (call);
}

static void
on_warm_raw_reply (McpRawResponse *response,
                   gpointer        data)
{
  WarmCall *call = data;

  mcp_pool_release_session (call->entry, call->session, TRUE, NULL);
  call->raw_reply (response, call->user_data);
  warm_call_free (call);
}

gboolean
mcp_pool_call_tool_warm (McpPool               *pool,
                         const char            *server,
                         const char            *tool,
                         json_t                *arguments,
                         const McpCallOptions  *options,
                         McpReplyFunc           callback,
                         gpointer               user_data)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, NULL);
  g_autoptr(json_t) params = NULL;
  McpCallOptions call_options = { 0 };
  McpSession *session = NULL;
  WarmCall *call;
  guint limit;

  if (entry == NULL)
    return FALSE;
  if (options != NULL)
    call_options = *options;

  g_mutex_lock (&entry->lock);
  limit = entry->config->max_concurrency;
  /* A tool a fresh list does not have gets its error from the blocking
   * call, which names the real ones. */
  if (!entry->removed && entry->state == MCP_SERVER_READY && mcp_session_is_alive (entry->session) &&
      (limit == 0 || entry->active < limit) &&
      (entry->tools == NULL || entry->tools_stale || mcp_pool_find_tool (entry->tools, tool) != NULL))
    {
      entry->active++;
      entry->last_used = g_get_monotonic_time ();
      session = mcp_session_ref (entry->session);
      call_options.timeout_ms = call_timeout_ms_locked (entry, call_options.timeout_ms);
    }
  g_mutex_unlock (&entry->lock);
  if (session == NULL)
    return FALSE;

  call = g_new0 (WarmCall, 1);
  call->entry = g_steal_pointer (&entry);
  call->session = session;
  call->callback = callback;
  call->raw_reply = call_options.raw_reply;
  call->user_data = user_data;
  if (call->raw_reply != NULL)
    call_options.raw_reply = on_warm_raw_reply;
  /* Never replayed: a crash mid-call may already have had effects. */
  if (call_options.arguments_text != NULL)
    {
      g_autoptr(GString) text = tools_call_params_text (tool, call_options.arguments_text,
                                                        call_options.arguments_length);

      mcp_session_call_raw_async (session, "tools/call", text->str, text->len, &call_options, on_warm_reply, call);
      return TRUE;
    }
  params = tools_call_params (tool, arguments);
  mcp_session_call_async (session, "tools/call", params, &call_options, on_warm_reply, call);
  return TRUE;
}
