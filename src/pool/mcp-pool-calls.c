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
#include "common/mcp-protocol.h"
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

/* The params of a tools/call; the session adds what of the client's
 * request goes on (McpCallOptions' meta and retry). */
static json_t *
tools_call_params (const char *tool,
                   json_t     *arguments)
{
  return arguments != NULL
         ? json_pack ("{s:s, s:O}", "name", tool, "arguments", arguments)
         : json_pack ("{s:s, s:{}}", "name", tool, "arguments");
}

/* The most pages a listing follows: a server whose cursor never ends is
 * wrong, not big. */
#define LIST_PAGES_MAX 100

/* The same as JSON text, around arguments that are JSON text already,
 * and with @meta (may be NULL) in it: a 2025 session sends the text as
 * it is.  A tool's name is mostly letters; one that needs escapes is
 * encoded by Jansson. */
static GString *
tools_call_params_text (const char *tool,
                        const char *arguments,
                        gsize       arguments_length,
                        json_t     *meta)
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
      g_autofree char *encoded = name != NULL ? json_dumps (name, JSON_ENCODE_ANY) : NULL;

      /* Names come from the server's own list, which Jansson read. */
      g_string_append (text, encoded != NULL ? encoded : "\"\"");
    }
  g_string_append (text, ",\"arguments\":");
  g_string_append_len (text, arguments, arguments_length);
  if (meta != NULL)
    {
      g_autofree char *encoded = json_dumps (meta, JSON_COMPACT);

      g_string_append (text, ",\"_meta\":");
      g_string_append (text, encoded != NULL ? encoded : "{}");
    }
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

/* Sends a request on @session, which was acquired with a slot, and gives
 * it back: the result, or NULL and @error.  Never replayed: a crash
 * mid-call may already have had effects. */
static json_t *
request_and_release (PoolEntry             *entry,
                     McpSession            *session,
                     const char            *method,
                     json_t                *params,
                     const McpCallOptions  *options,
                     GError               **error)
{
  g_autoptr(GError) failure = NULL;
  json_t *result = NULL;

  if (options != NULL && options->retry != NULL &&
      g_strcmp0 (mcp_session_get_protocol_version (session), MCP_PROTOCOL_VERSION_STATELESS) != 0)
    g_set_error (&failure, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 _("Invalid params: requestState names no call that waits for input; server “%s” speaks "
                   "MCP %s, which never asked for it. Send the request again without requestState"),
                 entry->name, mcp_session_get_protocol_version (session));
  else
    result = mcp_session_call_full (session, method, params, options, &failure);

  if (mcp_call_error_is_fatal (failure))
    append_stderr_tail (session, failure);
  mcp_pool_release_session (entry, session, TRUE, failure);
  if (failure != NULL)
    g_propagate_error (error, g_steal_pointer (&failure));
  return result;
}

/* A request of @server, started first if it is not, with the server's
 * call timeout.  With @tool, a tools/call that a fresh list says the
 * server lacks is refused at once, naming the real ones (a stale list
 * may be out of date, so then the server decides). */
static json_t *
request_of_server (McpPool               *pool,
                   const char            *server,
                   const char            *tool,
                   const char            *method,
                   json_t                *params,
                   const McpCallOptions  *options,
                   GError               **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);
  McpCallOptions call_options = { 0 };
  McpSession *session;

  if (entry == NULL || (session = mcp_pool_acquire_session (entry, TRUE, error)) == NULL)
    return NULL;
  if (options != NULL)
    call_options = *options;

  g_mutex_lock (&entry->lock);
  if (tool != NULL && entry->tools != NULL && !entry->tools_stale && mcp_pool_find_tool (entry->tools, tool) == NULL)
    {
      mcp_pool_set_unknown_tool_error (entry, tool, error);
      g_mutex_unlock (&entry->lock);
      mcp_pool_release_session (entry, session, TRUE, NULL);
      return NULL;
    }
  call_options.timeout_ms = call_timeout_ms_locked (entry, call_options.timeout_ms);
  g_mutex_unlock (&entry->lock);
  return request_and_release (entry, session, method, params, &call_options, error);
}

json_t *
mcp_pool_call_tool (McpPool               *pool,
                    const char            *server,
                    const char            *tool,
                    json_t                *arguments,
                    const McpCallOptions  *options,
                    GError               **error)
{
  g_autoptr(json_t) params = tools_call_params (tool, arguments);

  return request_of_server (pool, server, tool, "tools/call", params, options, error);
}

json_t *
mcp_pool_request (McpPool               *pool,
                  const char            *server,
                  const char            *method,
                  json_t                *params,
                  const McpCallOptions  *options,
                  GError               **error)
{
  return request_of_server (pool, server, NULL, method, params, options, error);
}

json_t *
mcp_pool_list_all (McpPool               *pool,
                   const char            *server,
                   const char            *method,
                   const char            *key,
                   const McpCallOptions  *options,
                   GError               **error)
{
  g_autoptr(json_t) all = json_array ();
  g_autofree char *cursor = NULL;

  for (guint page = 0; page < LIST_PAGES_MAX; page++)
    {
      g_autoptr(json_t) params = cursor != NULL ? json_pack ("{s:s}", "cursor", cursor) : NULL;
      g_autoptr(json_t) result = mcp_pool_request (pool, server, method, params, options, error);
      json_t *items = json_object_get (result, key);
      const char *next;

      if (result == NULL)
        return NULL;
      if (!json_is_array (items))
        {
          g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL,
                       _("Server “%s” answered %s without a list of “%s”"), server, method, key);
          return NULL;
        }
      json_array_extend (all, items);
      next = mcp_json_get_string (result, "nextCursor");
      if (next == NULL || g_strcmp0 (next, cursor) == 0)
        return g_steal_pointer (&all);
      g_free (cursor);
      cursor = g_strdup (next);
    }
  g_set_error (error, MCP_SESSION_ERROR, MCP_SESSION_ERROR_PROTOCOL,
               _("Server “%s” answered %s with more than %u pages"), server, method, LIST_PAGES_MAX);
  return NULL;
}

json_t *
mcp_pool_list_offered (McpPool               *pool,
                       const char            *server,
                       const char            *capability,
                       const char            *method,
                       const char            *key,
                       const McpCallOptions  *options,
                       GError               **error)
{
  g_autoptr(json_t) capabilities = mcp_pool_dup_capabilities (pool, server, error);

  if (capabilities == NULL)
    return NULL;
  if (json_object_get (capabilities, capability) == NULL)
    return json_array ();
  return mcp_pool_list_all (pool, server, method, key, options, error);
}

void
mcp_pool_notify_servers (McpPool    *pool,
                         const char *method,
                         json_t     *params)
{
  g_autoptr(GPtrArray) entries = mcp_pool_snapshot_entries (pool);

  for (guint i = 0; i < entries->len; i++)
    {
      PoolEntry *entry = g_ptr_array_index (entries, i);
      g_autoptr(McpSession) session = NULL;

      g_mutex_lock (&entry->lock);
      if (entry->state == MCP_SERVER_READY && entry->session != NULL)
        session = mcp_session_ref (entry->session);
      g_mutex_unlock (&entry->lock);
      if (session != NULL)
        mcp_session_notify (session, method, params, NULL);
    }
}

json_t *
mcp_pool_dup_capabilities (McpPool     *pool,
                           const char  *server,
                           GError     **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);
  McpSession *session;
  json_t *capabilities;

  if (entry == NULL || (session = mcp_pool_acquire_session (entry, FALSE, error)) == NULL)
    return NULL;
  capabilities = json_deep_copy (mcp_session_get_server_capabilities (session));
  mcp_pool_release_session (entry, session, FALSE, NULL);
  return capabilities;
}

json_t *
mcp_pool_dup_initialize_result (McpPool     *pool,
                                const char  *server,
                                GError     **error)
{
  g_autoptr(PoolEntry) entry = mcp_pool_lookup_entry (pool, server, error);
  McpSession *session;
  g_autoptr(json_t) server_info = NULL;
  json_t *result;
  const char *instructions;

  if (entry == NULL || (session = mcp_pool_acquire_session (entry, FALSE, error)) == NULL)
    return NULL;
  result = json_pack ("{s:s, s:o}", "protocolVersion", mcp_session_get_protocol_version (session),
                      "capabilities", json_deep_copy (mcp_session_get_server_capabilities (session)));
  server_info = mcp_session_dup_server_info (session);
  if (json_is_object (server_info))
    json_object_set_new (result, "serverInfo", json_deep_copy (server_info));
  if ((instructions = mcp_session_get_instructions (session)) != NULL)
    json_object_set_new (result, "instructions", json_string (instructions));
  mcp_pool_release_session (entry, session, FALSE, NULL);
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

/* Whether the server of @tool's declaration never runs it as a task. */
static gboolean
never_a_task (json_t *tool)
{
  const char *support = mcp_json_get_string (json_object_get (tool, "execution"), "taskSupport");

  return support == NULL || g_str_equal (support, "forbidden");
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
  gboolean fresh;
  json_t *declared;
  guint limit;

  if (entry == NULL)
    return FALSE;
  if (options != NULL)
    call_options = *options;

  g_mutex_lock (&entry->lock);
  limit = entry->config->max_concurrency;
  fresh = entry->tools != NULL && !entry->tools_stale;
  declared = fresh ? mcp_pool_find_tool (entry->tools, tool) : NULL;
  /* A tool a fresh list does not have gets its error from the blocking
   * call, which names the real ones. */
  if (!entry->removed && entry->state == MCP_SERVER_READY && mcp_session_is_alive (entry->session) &&
      (limit == 0 || entry->active < limit) && (!fresh || declared != NULL) &&
      (!call_options.decline_tasks || (fresh && never_a_task (declared))) &&
      /* A retry that a 2025 server cannot take gets its error from the
       * blocking call. */
      (call_options.retry == NULL ||
       g_strcmp0 (mcp_session_get_protocol_version (entry->session), MCP_PROTOCOL_VERSION_STATELESS) == 0))
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
      g_autoptr(json_t) passed = mcp_session_dup_passed_meta (session, call_options.meta);
      g_autoptr(GString) text = tools_call_params_text (tool, call_options.arguments_text,
                                                        call_options.arguments_length, passed);

      mcp_session_call_raw_async (session, "tools/call", text->str, text->len, &call_options, on_warm_reply, call);
      return TRUE;
    }
  params = tools_call_params (tool, arguments);
  mcp_session_call_async (session, "tools/call", params, &call_options, on_warm_reply, call);
  return TRUE;
}
