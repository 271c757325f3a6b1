/* mcp-serve.c — `mcp-pool serve`: the MCP server on stdin/stdout.
 *
 * See mcp-serve.h for the threads.  serve->lock guards the requests in
 * flight (for notifications/cancelled) and the ending flag; it is never
 * held across a call into the pool.  Every line out goes through one
 * McpOutputQueue on stdout, drained on the main context, so lines never
 * interleave.
 */
#include "config.h"

#include "serve/mcp-serve.h"

#include <unistd.h>

#include <glib-unix.h>
#include <glib/gi18n-lib.h>

#include "pool/mcp-config-watcher.h"
#include "common/mcp-framing.h"
#include "common/mcp-jsonrpc.h"
#include "common/mcp-output-queue.h"
#include "common/mcp-protocol.h"
#include "daemon/mcp-remote.h"
#include "mcp/mcp-upstream.h"
#include "mcp/mcp-client-requests.h"
#include "mcp/mcp-modern.h"
#include "mcp/mcp-parked-calls.h"

#define WORKERS_DEFAULT        32
/* The one upstream client of a stdio serve, as code mode keys sessions. */
#define STDIO_CLIENT           "stdio"
/* While ending, a client that stops reading gets this long for a line. */
#define WRITE_TIMEOUT_ENDING   (G_USEC_PER_SEC / 2)
/* Progress is dropped, never replies, when this many messages wait. */
#define OUTPUT_QUEUE_SOFT_MAX  1000
/* Replies are never dropped: stdin stops being read while this many
 * messages wait for a client that does not read them, and is read again
 * once the queue is down to the low mark (the output queue's marks).
 * Requests that go to the workers are bounded by max_pending; these marks
 * bound what the main context answers by itself (pings, refusals, parse
 * errors). */
#define OUTPUT_QUEUE_PAUSE     2048
#define OUTPUT_QUEUE_RESUME    256

struct _McpServe {
  McpServeOptions   options;         /* immutable */
  GMainContext     *context;         /* immutable */
  GMainLoop        *loop;
  McpPool          *pool;            /* NULL in shared mode */
  McpExpose        *expose;          /* NULL in shared mode */
  McpCode          *code;            /* NULL without code mode */
  McpRemote        *remote;          /* shared mode: the daemon; immutable */
  char             *shared_expose;   /* shared mode: the exposure the daemon names in our
                                      * notifications ("" for one server); immutable */
  McpConfigWatcher *watcher;         /* main context only */
  McpHttpFront     *http;            /* serve --listen; set by new, main context */
  GSource          *input;           /* main context only; NULL with http */
  gboolean          input_paused;    /* main context only */
  GSource          *signals[2];      /* main context only */
  /* Immutable; any thread pushes, the main context drains it. */
  McpOutputQueue   *output;
  GThreadPool      *workers;

  GMutex            lock;
  GHashTable       *in_flight;       /* protected by lock; id key → GCancellable */
  GHashTable       *cancelled_by_client; /* protected by lock; id keys: no reply */
  gboolean          initialized;     /* protected by lock */
  gint              log_level;       /* protected by lock: the rank the client asked for
                                      * (mcp_log_level_rank()), -1 until it asks */
  /* Protected by lock: the 2026-07-28 requests in flight that asked for
   * log messages (_meta logLevel), by id key → 1 + the rank, and how many
   * asked for each rank; the lowest rank the servers were asked for, -1
   * until one asks. */
  GHashTable       *log_asking;
  guint             log_asking_by_rank[8];
  gint              stateless_log_level;
  McpClientRequests *client_requests; /* immutable: the servers' requests, relayed to the client */
  /* Immutable; NULL with http or in shared mode: the client's 2026-07-28
   * calls, whose servers' requests it answers by retrying them. */
  McpParkedCalls   *parked;
  json_t           *stateless_declared; /* protected by lock: what the client's 2026-07-28 requests
                                         * said it can answer */
  McpRawMetaCache   raw_meta;        /* main context only: the _meta of the last call read raw */
  McpRawMetaFacts   raw_facts;       /* main context only: what calls with that _meta share */
  gboolean          ending;          /* protected by lock */
  gboolean          ended;           /* protected by lock; the pool is shut down */
};

/* Writing */

/* Any thread: queues @line (stolen), an encoded message with its '\n'.
 * A worker's reply is pushed from the worker itself rather than handed to
 * the main context: it costs no thread hop, the queue's lock keeps lines
 * whole, and a request's progress, pushed before its reply, stays before
 * it.  Once stdout is broken the line is dropped. */
static void
queue_line (McpServe *serve,
            GBytes   *line)
{
  mcp_output_queue_push (serve->output, line);
}

/* Any thread: queues @message (stolen), encoded once on the calling
 * thread.  The one entry point for messages out.  Droppable messages
 * (progress, announcements) are dropped when the client lags far. */
static void
queue_message (McpServe *serve,
               json_t   *message,
               gboolean  droppable)
{
  g_autoptr(json_t) owned = message;
  GBytes *line;

  if (droppable && mcp_output_queue_length (serve->output) > OUTPUT_QUEUE_SOFT_MAX)
    return;
  if ((line = mcp_jsonrpc_encode_line (owned)) == NULL)
    {
      g_warning ("A message to the client could not be encoded as JSON; it is not sent");
      return;
    }
  queue_line (serve, line);
}

/* Main context, after each input message: a client that does not read its
 * answers stops being read, until on_output_drained. */
static void
push_back_input (McpServe *serve)
{
  if (serve->input_paused || !mcp_output_queue_is_full (serve->output))
    return;
  g_debug ("The client does not read its answers (%u waiting); reading no more of its requests until it does",
           mcp_output_queue_length (serve->output));
  serve->input_paused = TRUE;
  mcp_line_reader_set_paused (serve->input, TRUE);
}

/* Main context: the client has read most of what waited. */
static void
on_output_drained (gpointer user_data)
{
  McpServe *serve = user_data;

  if (!serve->input_paused)
    return;
  serve->input_paused = FALSE;
  mcp_line_reader_set_paused (serve->input, FALSE);
}

/* Requests, on the workers */

/* Any thread: a server's progress, already under the client's token. */
static void
queue_progress (json_t   *params,
                gpointer  user_data)
{
  queue_message (user_data, mcp_jsonrpc_notification_new ("notifications/progress", params), TRUE);
}

static GCancellable *
lookup_cancellable (McpServe *serve,
                    json_t   *id)
{
  g_autofree char *key = mcp_jsonrpc_id_key (id);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&serve->lock);
  GCancellable *cancellable = g_hash_table_lookup (serve->in_flight, key);

  return cancellable != NULL ? g_object_ref (cancellable) : NULL;
}

/* On a worker: the reply to @request from the pool of this process. */
static json_t *
handle_request (McpServe *serve,
                json_t   *request)
{
  g_autoptr(GCancellable) cancellable = lookup_cancellable (serve, json_object_get (request, "id"));

  return mcp_upstream_handle_request (serve->expose, request, STDIO_CLIENT, 0, cancellable, queue_progress, serve);
}

static gboolean on_ended (gpointer user_data);
static void     forget_log_level_locked (McpServe *serve, const char *key);

/* Any thread: the end of a request, answered with @reply (taken) or the
 * encoded @line (borrowed).  A request the client cancelled gets no
 * answer, as the specification asks; any other answer goes out behind the
 * progress this request caused. */
static void
finish_request (McpServe *serve,
                json_t   *id,
                json_t   *reply,
                GBytes   *line)
{
  g_autofree char *key = mcp_jsonrpc_id_key (id);
  gboolean cancelled, last;

  g_mutex_lock (&serve->lock);
  cancelled = g_hash_table_remove (serve->cancelled_by_client, key);
  g_hash_table_remove (serve->in_flight, key);
  forget_log_level_locked (serve, key);
  last = serve->ended && g_hash_table_size (serve->in_flight) == 0;
  g_mutex_unlock (&serve->lock);

  if (serve->parked != NULL &&
      mcp_parked_calls_end (serve->parked, id, cancelled ? NULL : reply, cancelled ? NULL : line))
    json_decref (reply);
  else if (line != NULL && !cancelled)
    queue_line (serve, g_bytes_ref (line));
  else if (reply != NULL && !cancelled)
    queue_message (serve, reply, FALSE);
  else
    json_decref (reply);
  if (last)
    g_main_context_invoke (serve->context, on_ended, serve);
}

static void
run_request_job (gpointer data,
                 gpointer user_data)
{
  McpServe *serve = user_data;
  g_autoptr(json_t) request = data;

  finish_request (serve, json_object_get (request, "id"), handle_request (serve, request), NULL);
}

/* The warm path's reply, on the main context. */
static void
on_warm_reply (json_t   *id,
               json_t   *reply,
               GBytes   *line,
               gpointer  user_data)
{
  finish_request (user_data, id, reply, line);
}

/* Shared mode: the daemon's answer, on the main context. */
typedef struct {
  McpServe *serve;
  json_t   *id;
  json_t   *log_level_request;  /* a logging/setLevel, else NULL */
} SharedRequest;

/* The servers' log messages are passed on from the level the client
 * asked for (logging/setLevel) up. */
static void
note_log_level (McpServe *serve,
                json_t   *request)
{
  g_mutex_lock (&serve->lock);
  serve->log_level = mcp_log_level_rank (mcp_json_get_string (json_object_get (request, "params"), "level"));
  g_mutex_unlock (&serve->lock);
}

static void
on_shared_reply (json_t       *reply,
                 const GError *error,
                 gpointer      user_data)
{
  SharedRequest *shared = user_data;

  if (reply == NULL)
    reply = mcp_upstream_error_reply (shared->id, MCP_JSONRPC_INTERNAL_ERROR, "%s", error->message);
  else if (shared->log_level_request != NULL && json_object_get (reply, "result") != NULL)
    note_log_level (shared->serve, shared->log_level_request);
  finish_request (shared->serve, shared->id, reply, NULL);
  json_decref (shared->log_level_request);
  json_decref (shared->id);
  g_free (shared);
}

/* Input, on the main context */

static void
handle_notification (McpServe *serve,
                     json_t   *message)
{
  const char *method = mcp_json_get_string (message, "method");
  json_t *params = json_object_get (message, "params");

  if (g_strcmp0 (method, "notifications/cancelled") == 0)
    {
      g_autofree char *key = mcp_jsonrpc_id_key (json_object_get (params, "requestId"));
      GCancellable *cancellable = NULL;

      /* Marked in the same breath as it is found, so that a request that
       * just finished cannot leave its id marked for a later one. */
      g_mutex_lock (&serve->lock);
      if (key != NULL && (cancellable = g_hash_table_lookup (serve->in_flight, key)) != NULL)
        {
          g_object_ref (cancellable);
          g_hash_table_add (serve->cancelled_by_client, g_steal_pointer (&key));
        }
      g_mutex_unlock (&serve->lock);

      /* Cancels the downstream request too: the session tells the server. */
      if (cancellable != NULL)
        {
          g_cancellable_cancel (cancellable);
          g_object_unref (cancellable);
        }
    }
  else if (g_strcmp0 (method, "notifications/roots/list_changed") == 0)
    {
      if (serve->pool != NULL)
        mcp_pool_notify_servers (serve->pool, method, params);
      else
        mcp_remote_roots_changed (serve->remote);
    }
  else if (g_strcmp0 (method, "notifications/initialized") == 0)
    {
      g_mutex_lock (&serve->lock);
      serve->initialized = TRUE;
      g_mutex_unlock (&serve->lock);
    }
}

/* Registers a request by its @id, so that notifications/cancelled can
 * find it: the cancellable it is to be made with, which lives while it is
 * in flight; or NULL, with the refusal queued. */
static GCancellable *
register_request (McpServe *serve,
                  json_t   *id)
{
  g_autofree char *key = mcp_jsonrpc_id_key (id);
  guint max_pending = serve->options.max_pending > 0 ? serve->options.max_pending
                                                     : MCP_SERVE_MAX_PENDING_DEFAULT;
  guint pending;
  json_t *refusal = NULL;
  GCancellable *cancellable = NULL;

  g_mutex_lock (&serve->lock);
  pending = g_hash_table_size (serve->in_flight);
  if (serve->ending)
    refusal = mcp_upstream_error_reply (id, MCP_JSONRPC_INTERNAL_ERROR, _("mcp-pool is shutting down"));
  else if (g_hash_table_contains (serve->in_flight, key))
    refusal = mcp_upstream_error_reply (id, MCP_JSONRPC_INVALID_REQUEST,
                                        _("The id %s is already used by a request in flight"), key + 2);
  else if (pending >= max_pending)
    {
      /* Refused at once rather than queued: the worker queue and the
       * in-flight table stay bounded, and the client learns why. */
      g_autoptr(json_t) data = json_pack ("{s:i, s:i}", "pending", (int) pending,
                                          "maxPending", (int) max_pending);
      g_autofree char *text =
        g_strdup_printf (_("mcp-pool is busy: %u requests are already waiting for an answer "
                           "(the limit is %u, set by --max-pending or MCP_POOL_MAX_PENDING). "
                           "Retry later, or send fewer requests at once"),
                         pending, max_pending);

      refusal = mcp_jsonrpc_error_new (id, MCP_JSONRPC_SERVER_BUSY, text, data);
    }
  else
    {
      cancellable = g_cancellable_new ();
      g_hash_table_insert (serve->in_flight, g_steal_pointer (&key), cancellable);
    }
  g_mutex_unlock (&serve->lock);

  if (refusal != NULL)
    queue_message (serve, refusal, FALSE);
  return cancellable;
}

/* Undoes register_request() for a request that was not started. */
static void
unregister_request (McpServe *serve,
                    json_t   *id)
{
  g_autofree char *key = mcp_jsonrpc_id_key (id);

  g_mutex_lock (&serve->lock);
  g_hash_table_remove (serve->in_flight, key);
  forget_log_level_locked (serve, key);
  g_mutex_unlock (&serve->lock);
}

/* Called with serve->lock: the request of @key (a 2026-07-28 one, with
 * @meta) asks for log messages while it is in flight, if its _meta says
 * so; TRUE if the servers must now be asked for a lower level. */
static gboolean
note_log_level_locked (McpServe   *serve,
                       const char *key,
                       json_t     *meta)
{
  gint rank = mcp_log_level_rank (mcp_json_get_string (meta, MCP_META_LOG_LEVEL));

  if (rank < 0 || rank >= (gint) G_N_ELEMENTS (serve->log_asking_by_rank))
    return FALSE;
  g_hash_table_insert (serve->log_asking, g_strdup (key), GINT_TO_POINTER (rank + 1));
  serve->log_asking_by_rank[rank]++;
  if (serve->stateless_log_level >= 0 && rank >= serve->stateless_log_level)
    return FALSE;
  serve->stateless_log_level = rank;
  return TRUE;
}

/* Called with serve->lock: the request of @key is over. */
static void
forget_log_level_locked (McpServe   *serve,
                         const char *key)
{
  gint rank = GPOINTER_TO_INT (g_hash_table_lookup (serve->log_asking, key)) - 1;

  if (rank < 0)
    return;
  serve->log_asking_by_rank[rank]--;
  g_hash_table_remove (serve->log_asking, key);
}

/* Called with serve->lock: whether a 2026-07-28 request in flight asked
 * for log messages of @rank. */
static gboolean
log_asked_locked (McpServe *serve,
                  gint      rank)
{
  for (gint i = 0; i <= rank && i < (gint) G_N_ELEMENTS (serve->log_asking_by_rank); i++)
    if (serve->log_asking_by_rank[i] > 0)
      return TRUE;
  return FALSE;
}

/* A 2026-07-28 request of @id, registered: it asks for the log messages
 * its _meta names while it is in flight (the servers are asked for the
 * lowest level any such request named). */
static void
note_request_log_level (McpServe *serve,
                        json_t   *id,
                        json_t   *meta)
{
  g_autofree char *key = NULL;
  gboolean lower;

  if (json_object_get (meta, MCP_META_LOG_LEVEL) == NULL || serve->remote != NULL)
    return;
  key = mcp_jsonrpc_id_key (id);
  g_mutex_lock (&serve->lock);
  lower = note_log_level_locked (serve, key, meta);
  g_mutex_unlock (&serve->lock);
  if (lower)
    mcp_expose_set_log_level (serve->expose, mcp_json_get_string (meta, MCP_META_LOG_LEVEL), NULL);
}

/* What a 2026-07-28 client can answer is in each of its requests: the
 * servers started from now on are told of all it ever declared, with what
 * an initialize declared. */
static void
note_stateless_capabilities (McpServe *serve,
                             json_t   *request)
{
  json_t *meta = json_object_get (json_object_get (request, "params"), "_meta");
  g_autoptr(json_t) declared = NULL;

  /* Most requests declare what earlier ones did: nothing is copied. */
  g_mutex_lock (&serve->lock);
  if (mcp_client_capabilities_add (serve->stateless_declared, json_object_get (meta, MCP_META_CLIENT_CAPABILITIES)))
    {
      declared = mcp_client_requests_dup_declared (serve->client_requests);
      json_object_update_missing (declared, serve->stateless_declared);
    }
  g_mutex_unlock (&serve->lock);
  if (declared != NULL)
    mcp_pool_set_client_capabilities (serve->pool, declared);
}

/* A 2026-07-28 call, whose servers' requests become InputRequiredResults. */
static void
track_modern_call (McpServe     *serve,
                   json_t       *request,
                   GCancellable *cancellable)
{
  note_stateless_capabilities (serve, request);
  mcp_parked_calls_track (serve->parked, request, cancellable);
}

static void
start_request (McpServe *serve,
               json_t   *request)
{
  json_t *id = json_object_get (request, "id");
  GCancellable *cancellable = register_request (serve, id);

  if (cancellable == NULL)
    return;
  if (mcp_modern_version_of (request) != NULL)
    note_request_log_level (serve, id, json_object_get (json_object_get (request, "params"), "_meta"));
  if (serve->parked != NULL && mcp_modern_version_of (request) != NULL)
    track_modern_call (serve, request, cancellable);
  /* The shared daemon, and a call of a warm server, are answered from
   * the main context; the rest (starts, listings, run_python) waits on a
   * worker. */
  if (serve->remote != NULL)
    {
      SharedRequest *shared = g_new (SharedRequest, 1);

      *shared = (SharedRequest) {
        serve, json_incref (id),
        g_strcmp0 (mcp_json_get_string (request, "method"), "logging/setLevel") == 0 ? json_incref (request) : NULL,
      };
      mcp_remote_handle_request_async (serve->remote, serve->options.expose, serve->options.server,
                                       serve->options.call_timeout_ms,
                                       request, cancellable, queue_progress, serve, on_shared_reply, shared);
    }
  else if (!mcp_upstream_handle_request_warm (serve->expose, request, 0, cancellable, queue_progress, serve,
                                              on_warm_reply, serve))
    g_thread_pool_push (serve->workers, json_incref (request), NULL);
}

/* Whether the client sees what @server (NULL: any) offers and says: the
 * proxy shows every server, --server one. */
static gboolean
shows_server (McpServe   *serve,
              const char *server)
{
  if (serve->options.server != NULL)
    return server == NULL || g_strcmp0 (server, serve->options.server) == 0;
  return (serve->options.expose & MCP_EXPOSE_PROXY) != 0;
}

/* A line offered before it is parsed: a tools/call of the common shape
 * for a warm server goes out with its arguments unparsed (mcp-raw-call.h);
 * any other line is parsed and reaches on_input_message(). */
static gboolean
on_input_request_line (const char *line,
                       gsize       length,
                       gpointer    user_data)
{
  McpServe *serve = user_data;
  g_auto(McpRawCall) call = { 0 };
  g_autoptr(json_t) modern = NULL;
  GCancellable *cancellable;

  /* Only calls of a server's tool are worth a scan first; the shared
   * daemon is sent the request as it came. */
  if (serve->remote != NULL || !shows_server (serve, NULL) ||
      g_strstr_len (line, length, "\"tools/call\"") == NULL ||
      !mcp_raw_call_parse (line, length, &serve->raw_meta, &call))
    return FALSE;
  cancellable = register_request (serve, call.id);
  if (cancellable != NULL)
    {
      modern = mcp_upstream_raw_call_modern (&call, &serve->raw_facts);
      if (modern != NULL)
        note_request_log_level (serve, call.id, call.meta);
      if (serve->parked != NULL && modern != NULL)
        track_modern_call (serve, modern, cancellable);
      if (!mcp_upstream_call_raw_warm (serve->expose, &call, modern, &serve->raw_facts, 0, cancellable,
                                       on_warm_reply, serve))
        {
          unregister_request (serve, call.id);
          return FALSE;
        }
    }
  /* As after any other line: a client that does not read its answers
   * stops being read. */
  push_back_input (serve);
  return TRUE;
}

static void
on_input_message (json_t   *message,
                  gpointer  user_data)
{
  McpServe *serve = user_data;
  json_t *id = json_object_get (message, "id");

  switch (mcp_jsonrpc_classify (message))
    {
    case MCP_MESSAGE_REQUEST:
      if (serve->parked != NULL && mcp_parked_calls_retry (serve->parked, message))
        break;
      /* What the client can answer is what the servers started from now
       * on are told it can. */
      if (g_str_equal (mcp_json_get_string (message, "method"), "initialize"))
        {
          g_autoptr(json_t) declared = NULL;

          mcp_client_requests_set_client (serve->client_requests,
                                          json_object_get (json_object_get (message, "params"), "capabilities"));
          declared = mcp_client_requests_dup_declared (serve->client_requests);
          g_mutex_lock (&serve->lock);
          json_object_update_missing (declared, serve->stateless_declared);
          g_mutex_unlock (&serve->lock);
          /* The shared daemon reads them in the initialize it is sent. */
          if (serve->pool != NULL)
            mcp_pool_set_client_capabilities (serve->pool, declared);
        }
      /* In shared mode only a ping is answered without the daemon; the
       * stateless revision has none, and refuses it with the rest. */
      if (g_str_equal (mcp_json_get_string (message, "method"), "ping") && mcp_modern_version_of (message) == NULL)
        queue_message (serve, mcp_jsonrpc_result_new (id, json_object ()), FALSE);
      else if (serve->remote == NULL && mcp_upstream_is_quick (serve->expose, mcp_json_get_string (message, "method")))
        {
          json_t *reply = mcp_upstream_handle_request (serve->expose, message, STDIO_CLIENT, 0, NULL, NULL, NULL);

          if (g_str_equal (mcp_json_get_string (message, "method"), "logging/setLevel") &&
              json_object_get (reply, "result") != NULL)
            note_log_level (serve, message);
          queue_message (serve, reply, FALSE);
        }
      else
        start_request (serve, message);
      break;
    case MCP_MESSAGE_NOTIFICATION:
      handle_notification (serve, message);
      break;
    case MCP_MESSAGE_RESPONSE:
      /* An answer to a server's request; any other is dropped. */
      if (!mcp_client_requests_answer (serve->client_requests, message))
        g_debug ("A response from the client to no request of ours is dropped");
      break;
    case MCP_MESSAGE_INVALID:
    default:
      queue_message (serve,
                     mcp_upstream_error_reply (mcp_jsonrpc_id_is_valid (id) ? id : NULL, MCP_JSONRPC_INVALID_REQUEST,
                                               _("Invalid request: a JSON-RPC request needs a string “method” "
                                                 "and an integer or string “id”")),
                     FALSE);
      break;
    }
  push_back_input (serve);
}

static void
on_input_noise (const char *line,
                gsize       length,
                GError     *error,
                gpointer    user_data)
{
  json_t *reply;

  /* Valid JSON that cannot be held: a request still gets its answer for
   * its id, a notification or a response none, as they would. */
  if (g_error_matches (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_UNSUPPORTED))
    {
      g_autoptr(json_t) salvaged = mcp_jsonrpc_parse_salvaged (line, length);
      McpMessageKind kind = mcp_jsonrpc_classify (salvaged);

      if (kind == MCP_MESSAGE_NOTIFICATION || kind == MCP_MESSAGE_RESPONSE)
        {
          g_debug ("Dropping a message that mcp-pool cannot hold: %s", error->message);
          return;
        }
      reply = mcp_upstream_error_reply (kind == MCP_MESSAGE_REQUEST ? json_object_get (salvaged, "id") : NULL,
                                        MCP_JSONRPC_INVALID_REQUEST, _("Request refused: %s"), error->message);
    }
  else
    reply = mcp_upstream_error_reply (NULL, MCP_JSONRPC_PARSE_ERROR, _("Parse error: %s"), error->message);
  queue_message (user_data, reply, FALSE);
  push_back_input (user_data);
}

static void
on_input_too_long (GError   *error,
                   gpointer  user_data)
{
  queue_message (user_data,
                 mcp_upstream_error_reply (NULL, MCP_JSONRPC_INVALID_REQUEST, _("Request refused: %s"),
                                           error->message),
                 FALSE);
  push_back_input (user_data);
}

/* Ending */

typedef struct {
  McpServe *serve;
  gint64    stdin_grace;
  gint64    term_grace;
} Ending;

/* On the main context, once the pool is down, and again when the last
 * request in flight is answered: the loop ends when both are true.  The
 * warm calls of a pool that is shut down end on the main context, a moment
 * after the shutdown returns. */
static gboolean
on_ended (gpointer user_data)
{
  McpServe *serve = user_data;
  gboolean done;

  g_mutex_lock (&serve->lock);
  serve->ended = TRUE;
  done = g_hash_table_size (serve->in_flight) == 0;
  g_mutex_unlock (&serve->lock);
  if (done)
    g_main_loop_quit (serve->loop);
  return G_SOURCE_REMOVE;
}

static gpointer
end_in_thread (gpointer data)
{
  Ending *ending = data;
  McpServe *serve = ending->serve;

  if (serve->pool != NULL)
    mcp_pool_shutdown (serve->pool, ending->stdin_grace, ending->term_grace);
  /* The requests in flight have failed or been cancelled by now. */
  g_thread_pool_free (g_steal_pointer (&serve->workers), FALSE, TRUE);
  if (serve->http != NULL)
    mcp_http_front_wait (serve->http);
  g_clear_pointer (&serve->code, mcp_code_free);
  /* Their answers go out, each in the time begin_ending() allows a client
   * that does not read; the main context still drains the queue too. */
  mcp_output_queue_flush (serve->output, -1);

  g_main_context_invoke (serve->context, on_ended, serve);
  g_free (ending);
  return NULL;
}

static void
cancel_request (gpointer key,
                gpointer cancellable,
                gpointer unused)
{
  g_cancellable_cancel (cancellable);
}

static void
begin_ending (McpServe *serve,
              gint64    stdin_grace,
              gint64    term_grace)
{
  Ending *ending;

  g_mutex_lock (&serve->lock);
  if (serve->ending)
    {
      g_mutex_unlock (&serve->lock);
      return;
    }
  serve->ending = TRUE;
  /* Sandboxes and calls in flight stop; their callers get errors. */
  g_hash_table_foreach (serve->in_flight, cancel_request, NULL);
  g_mutex_unlock (&serve->lock);

  if (serve->input != NULL)
    g_source_destroy (serve->input);
  /* The servers waiting for this client's input are answered, so that
   * their calls end. */
  if (serve->parked != NULL)
    mcp_parked_calls_abandon_all (serve->parked);
  if (serve->http != NULL)
    mcp_http_front_close (serve->http);
  g_clear_pointer (&serve->watcher, mcp_config_watcher_free);
  /* Lines are written whole however long a slow client takes, except
   * while mcp-pool ends: then one that takes nothing for this long ends
   * the writing, so that a client that does not read cannot hold us. */
  mcp_output_queue_set_stall_limit (serve->output, WRITE_TIMEOUT_ENDING);
  ending = g_new0 (Ending, 1);
  *ending = (Ending) { serve, stdin_grace, term_grace };
  g_thread_unref (g_thread_new ("mcp-serve-end", end_in_thread, ending));
}

/* Main context: the client no longer reads us (stdout closed, or it took
 * nothing while we ended): it is gone, so end as on stdin EOF.  A cut line
 * is never followed by another: the queue takes nothing more. */
static void
on_output_broken (const GError *error,
                  gpointer      user_data)
{
  g_debug ("The client stopped reading mcp-pool's output; writing no more: %s", error->message);
  begin_ending (user_data, MCP_POOL_SHUTDOWN_STDIN_GRACE, MCP_POOL_SHUTDOWN_TERM_GRACE);
}

static void
on_input_closed (GError   *error,
                 gpointer  user_data)
{
  /* The client closed our stdin: it gives us about two seconds before
   * SIGTERM, two more before SIGKILL. */
  begin_ending (user_data, MCP_POOL_SHUTDOWN_STDIN_GRACE, MCP_POOL_SHUTDOWN_TERM_GRACE);
}

static gboolean
on_terminate_signal (gpointer user_data)
{
  begin_ending (user_data, 0, G_USEC_PER_SEC / 2);
  return G_SOURCE_CONTINUE;
}

/* Pool events, on the main context */

static void
announce_tools_changed (const char *server,
                        gpointer    user_data)
{
  McpServe *serve = user_data;
  gboolean initialized;

  if (serve->http != NULL)
    {
      if (shows_server (serve, server))
        mcp_http_front_notify (serve->http, "notifications/tools/list_changed", NULL);
      return;
    }
  g_mutex_lock (&serve->lock);
  initialized = serve->initialized;
  g_mutex_unlock (&serve->lock);
  if (initialized && shows_server (serve, server))
    queue_message (serve, mcp_jsonrpc_notification_new ("notifications/tools/list_changed", NULL), TRUE);
}

static void
on_tools_changed (McpPool    *pool,
                  const char *server,
                  gpointer    user_data)
{
  announce_tools_changed (server, user_data);
}

static void
send_to_client (json_t   *message,
                gpointer  user_data)
{
  queue_message (user_data, json_incref (message), FALSE);
}

static void
send_parked (json_t   *message,
             gpointer  user_data)
{
  queue_message (user_data, message, FALSE);
}

static gboolean
on_server_request (McpPool             *pool,
                   const char          *server,
                   const char          *method,
                   json_t              *params,
                   McpSessionResponder *responder,
                   gpointer             user_data)
{
  McpServe *serve = user_data;

  if (serve->http != NULL)
    return mcp_http_front_relay (serve->http, server, method, params, responder);
  if (mcp_expose_take_task_request (serve->expose, responder))
    return TRUE;
  if (serve->parked != NULL && mcp_parked_calls_ask (serve->parked, responder))
    return TRUE;
  return mcp_client_requests_relay (serve->client_requests, server, method, params, responder);
}

/* A server's notification for the client, as the exposure shows it
 * (mcp_expose_client_notification()); log messages from the level the
 * client set (logging/setLevel) up, and through the proxy none before it
 * sets one.  Dropped, as progress is, if the client falls behind.
 * In-process, or from the shared daemon for this exposure. */
static void
pass_notification_on (McpServe   *serve,
                      const char *method,
                      json_t     *forwarded)
{
  gboolean initialized, is_log, asked;
  gint log_level, rank;

  if (serve->http != NULL)
    {
      mcp_http_front_notify (serve->http, method, forwarded);
      return;
    }
  g_mutex_lock (&serve->lock);
  initialized = serve->initialized;
  log_level = serve->log_level;
  is_log = g_str_equal (method, "notifications/message");
  rank = is_log ? mcp_log_level_rank (mcp_json_get_string (forwarded, "level")) : -1;
  asked = is_log && log_asked_locked (serve, rank);
  g_mutex_unlock (&serve->lock);
  /* A 2026-07-28 request that asked for log messages gets them while it
   * is in flight: stdio has no stream of its own for it. */
  if (asked)
    {
      queue_message (serve, mcp_jsonrpc_notification_new (method, forwarded), TRUE);
      return;
    }
  if (!initialized)
    return;
  /* The pool may ask the servers for more than this client did (another
   * client of the shared daemon asked for it). */
  if (is_log && (log_level >= 0 ? rank < log_level : serve->options.server == NULL))
    return;
  queue_message (serve, mcp_jsonrpc_notification_new (method, forwarded), TRUE);
}

static void
on_server_notification (McpPool    *pool,
                        const char *server,
                        const char *method,
                        json_t     *params,
                        gpointer    user_data)
{
  McpServe *serve = user_data;
  g_autoptr(json_t) forwarded = mcp_expose_client_notification (serve->expose, server, method, params);

  if (forwarded != NULL)
    pass_notification_on (serve, method, forwarded);
}

static gboolean
on_shared_server_request (const char          *server,
                          const char          *method,
                          json_t              *params,
                          GCancellable        *cancellable,
                          McpRemoteAnswerFunc  answer,
                          gpointer             answer_data,
                          gpointer             user_data)
{
  McpServe *serve = user_data;

  return mcp_client_requests_relay_full (serve->client_requests, server, method, params, cancellable, answer,
                                         answer_data);
}

static void
on_shared_notification (const char *expose,
                        const char *server,
                        const char *method,
                        json_t     *params,
                        gpointer    user_data)
{
  McpServe *serve = user_data;

  if (g_str_equal (server, serve->options.server != NULL ? serve->options.server : "") &&
      g_str_equal (expose, serve->shared_expose))
    pass_notification_on (serve, method, params);
}

static void
on_config_changed (McpDiscovery *discovery,
                   gpointer      user_data)
{
  McpServe *serve = user_data;

  mcp_pool_set_servers (serve->pool, discovery->servers);
  mcp_discovery_free (discovery);
}

/* Main thread: the in-process pool, with the servers of @discovery_options. */
static void
start_pool (McpServe                  *serve,
            const McpDiscoveryOptions *discovery_options,
            const McpPoolCallbacks    *callbacks)
{
  g_autoptr(McpDiscovery) discovery = NULL;

  serve->pool = mcp_pool_new (serve->context, NULL, callbacks);
  if (serve->options.expose & MCP_EXPOSE_CODE)
    {
      McpCodeOptions code_options = {
        .keep_warm = TRUE, .timeout_s = serve->options.code_timeout_s, .sessions = !serve->options.fresh_python,
      };

      serve->code = mcp_code_new (serve->pool, serve->context, &code_options);
    }
  if (serve->options.server != NULL)
    serve->expose = mcp_expose_new_server (serve->pool, serve->options.server, serve->options.call_timeout_ms);
  else
    serve->expose = mcp_expose_new (serve->pool, serve->options.expose, serve->options.call_timeout_ms,
                                    serve->code);
  /* Watch first, so that no change between discovery and watching is lost. */
  serve->watcher = mcp_config_watcher_new (discovery_options, serve->context, on_config_changed, serve);
  discovery = mcp_config_discover (discovery_options);
  mcp_pool_set_servers (serve->pool, discovery->servers);
}

McpServe *
mcp_serve_new (const McpDiscoveryOptions *discovery_options,
               GMainContext              *context,
               int                        in_fd,
               int                        out_fd,
               const McpServeOptions     *options,
               GError                   **error)
{
  static const McpLineReaderFuncs input_funcs = {
    .on_message = on_input_message, .on_noise = on_input_noise, .on_too_long = on_input_too_long,
    .on_closed = on_input_closed, .on_request_line = on_input_request_line,
  };
  static const McpOutputQueueFuncs output_funcs = { on_output_drained, on_output_broken };
  McpServe *serve;
  McpPoolCallbacks callbacks = {
    .on_tools_changed = on_tools_changed, .on_server_notification = on_server_notification,
    .on_server_request = on_server_request,
  };
  McpRemoteCallbacks remote_callbacks = {
    .on_tools_changed = announce_tools_changed, .on_notification = on_shared_notification,
    .on_server_request = on_shared_server_request,
  };
  g_autoptr(McpRemote) remote = NULL;
  int signals[] = { SIGTERM, SIGINT };

  if (options->shared && (remote = mcp_remote_new (error)) == NULL)
    return NULL;
  serve = g_new0 (McpServe, 1);
  callbacks.user_data = remote_callbacks.user_data = serve;

  serve->options = *options;
  serve->context = g_main_context_ref (context != NULL ? context : g_main_context_default ());
  serve->loop = g_main_loop_new (serve->context, FALSE);
  serve->output = mcp_output_queue_new (out_fd, serve->context, OUTPUT_QUEUE_PAUSE, OUTPUT_QUEUE_RESUME, 0,
                                       &output_funcs, serve);
  g_mutex_init (&serve->lock);
  serve->in_flight = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  serve->log_asking = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  serve->stateless_log_level = -1;
  serve->cancelled_by_client = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  serve->log_level = -1;
  serve->client_requests = mcp_client_requests_new (send_to_client, serve);
  serve->stateless_declared = json_object ();
  if (remote == NULL && options->http.listen == NULL)
    serve->parked = mcp_parked_calls_new (serve->context,
                                          options->max_pending > 0 ? options->max_pending
                                                                   : MCP_SERVE_MAX_PENDING_DEFAULT,
                                          0, send_parked, serve);

  if (remote != NULL)
    {
      /* The daemon finds and follows the servers itself. */
      serve->remote = g_steal_pointer (&remote);
      serve->shared_expose = options->server != NULL ? g_strdup ("") : mcp_expose_flags_to_string (options->expose);
      g_main_context_push_thread_default (serve->context);
      mcp_remote_watch (serve->remote, &remote_callbacks);
      g_main_context_pop_thread_default (serve->context);
    }
  else
    start_pool (serve, discovery_options, &callbacks);

  serve->workers = g_thread_pool_new (run_request_job, serve,
                                      options->workers > 0 ? (int) options->workers : WORKERS_DEFAULT,
                                      FALSE, NULL);

  if (options->http.listen != NULL)
    {
      g_main_context_push_thread_default (serve->context);
      serve->http = mcp_http_front_new (serve->expose, serve->code, serve->context, &options->http, error);
      g_main_context_pop_thread_default (serve->context);
      if (serve->http == NULL)
        {
          if (serve->pool != NULL)
            mcp_pool_shutdown (serve->pool, 0, 0);
          mcp_serve_free (serve);
          return NULL;
        }
    }
  else
    {
      serve->input = mcp_line_reader_new (dup (in_fd), options->max_line, &input_funcs, serve, NULL);
      g_source_attach (serve->input, serve->context);
    }
  for (guint i = 0; i < G_N_ELEMENTS (signals); i++)
    {
      serve->signals[i] = g_unix_signal_source_new (signals[i]);
      g_source_set_callback (serve->signals[i], on_terminate_signal, serve, NULL);
      g_source_attach (serve->signals[i], serve->context);
    }
  return serve;
}

const char *
mcp_serve_get_url (McpServe *serve)
{
  return serve->http != NULL ? mcp_http_front_get_url (serve->http) : NULL;
}

int
mcp_serve_run (McpServe *serve)
{
  g_main_loop_run (serve->loop);
  return 0;
}

void
mcp_serve_free (McpServe *serve)
{
  if (serve == NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (serve->signals); i++)
    if (serve->signals[i] != NULL)
      {
        g_source_destroy (serve->signals[i]);
        g_source_unref (serve->signals[i]);
      }
  if (serve->input != NULL)
    {
      g_source_destroy (serve->input);
      g_source_unref (serve->input);
    }
  g_clear_pointer (&serve->watcher, mcp_config_watcher_free);
  g_clear_pointer (&serve->http, mcp_http_front_free);
  if (serve->workers != NULL)
    g_thread_pool_free (g_steal_pointer (&serve->workers), FALSE, TRUE);
  mcp_expose_free (serve->expose);
  mcp_code_free (serve->code);
  g_clear_pointer (&serve->pool, mcp_pool_free);
  /* After the pool and the workers: no call ends any more. */
  g_clear_pointer (&serve->parked, mcp_parked_calls_free);
  json_decref (serve->stateless_declared);
  mcp_raw_meta_cache_clear (&serve->raw_meta);
  mcp_raw_meta_facts_clear (&serve->raw_facts);
  mcp_remote_free (serve->remote);
  g_free (serve->shared_expose);
  /* After the pool: answers no server can get any more are dropped. */
  mcp_client_requests_free (serve->client_requests);
  /* Last: what the pool or the daemon's proxy said while going was queued. */
  mcp_output_queue_free (serve->output);
  g_hash_table_unref (serve->in_flight);
  g_hash_table_unref (serve->log_asking);
  g_hash_table_unref (serve->cancelled_by_client);
  g_mutex_clear (&serve->lock);
  g_main_loop_unref (serve->loop);
  g_main_context_unref (serve->context);
  g_free (serve);
}
