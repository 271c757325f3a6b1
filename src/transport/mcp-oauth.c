/* mcp-oauth.c — OAuth login and token refresh for remote MCP servers (see
 * mcp-oauth.h).
 *
 * A login or a refresh is one Flow: a chain of steps on the caller's main
 * context, each an HTTP exchange through libsoup or a keyring job on a
 * worker, with one step pending at a time.  The Flow is the data of the
 * GTask that returns the result; every pending step holds a reference to
 * that task.
 */
#include "config.h"

#include <string.h>
#include <sys/random.h>

#include <glib/gi18n-lib.h>
#include <libsoup/soup.h>

#include "common/mcp-jsonrpc.h"
#include "transport/mcp-oauth.h"
#include "transport/mcp-oauth-redirect.h"

G_DEFINE_QUARK (mcp-oauth-error-quark, mcp_oauth_error)

#define HTTP_TIMEOUT_S 30

typedef struct _Flow Flow;
typedef void (*FlowReply) (Flow *flow, SoupMessage *msg, GBytes *body, GError *error);
typedef void (*FlowFound) (Flow *flow, json_t *document);
typedef gboolean (*FlowJob) (Flow *flow, GError **error);
typedef void (*FlowDone) (Flow *flow, GError *error);

struct _Flow {
  GTask            *task;            /* borrowed: the task owns the flow */
  McpServerConfig  *config;
  SoupSession      *session;
  McpOAuthLoginOptions options;
  json_t           *record;          /* the stored record, updated as tokens arrive */
  McpTokenStoreKind store;
  McpOAuthLoginOutcome outcome;
  /* the step pending */
  SoupMessage      *msg;
  FlowReply         reply;
  FlowJob           job;
  FlowDone          job_done;
  GPtrArray        *candidates;      /* metadata URLs still to try, in order */
  guint             candidate;
  FlowFound         found;
  /* discovery */
  char             *resource;        /* RFC 8707 resource: the server's canonical URL */
  char             *challenge_scope; /* scope= of the last WWW-Authenticate */
  char             *metadata_url;    /* resource_metadata= of the 401 */
  json_t           *prm;             /* RFC 9728 document, or NULL (2025-03-26 fallback) */
  json_t           *as;              /* RFC 8414 / OIDC document, or the default endpoints */
  char             *issuer;
  /* the authorization */
  McpOAuthRedirect *redirect;
  char             *verifier;
  char             *state;
  char             *scope;
  guint             step_ups;
};

static void
flow_free (Flow *flow)
{
  g_clear_pointer (&flow->config, mcp_server_config_unref);
  g_clear_object (&flow->session);
  g_clear_pointer (&flow->record, json_decref);
  g_clear_object (&flow->msg);
  g_clear_pointer (&flow->candidates, g_ptr_array_unref);
  g_free (flow->resource);
  g_free (flow->challenge_scope);
  g_free (flow->metadata_url);
  g_clear_pointer (&flow->prm, json_decref);
  g_clear_pointer (&flow->as, json_decref);
  g_free (flow->issuer);
  g_clear_pointer (&flow->redirect, mcp_oauth_redirect_free);
  g_free (flow->verifier);
  g_free (flow->state);
  g_free (flow->scope);
  g_free (flow);
}

/* g_set_str() is newer than the GLib the build pins. */
static void
replace_str (char      **slot,
             const char *value)
{
  char *copy = g_strdup (value);

  g_free (*slot);
  *slot = copy;
}

static const char *
record_string (json_t     *record,
               const char *key)
{
  return record ? json_string_value (json_object_get (record, key)) : NULL;
}

static void
record_set (json_t     *record,
            const char *key,
            const char *value)
{
  if (value != NULL)
    json_object_set_new (record, key, json_string (value));
  else
    json_object_del (record, key);
}

/* --- the steps' plumbing ------------------------------------------------ */

static void
flow_fail (Flow   *flow,
           GError *error)
{
  g_task_return_error (flow->task, error);
}

static GError *
login_required (Flow       *flow,
                const char *why)
{
  return g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_LOGIN_REQUIRED,
                      _("Server “%s” needs a login (%s); run “mcp-pool auth %s”"),
                      flow->config->name, why, flow->config->name);
}

/* Plain http only to loopback, unless the entry allows it: a token or a
 * code must not cross a network in clear. */
static gboolean
flow_check_url (Flow       *flow,
                const char *url,
                GError    **error)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  const char *host = uri ? g_uri_get_host (uri) : NULL;

  if (uri == NULL || host == NULL)
    {
      g_set_error (error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                   _("Server “%s”: “%s” is not a URL"), flow->config->name, url);
      return FALSE;
    }
  if (g_ascii_strcasecmp (g_uri_get_scheme (uri), "https") == 0)
    return TRUE;
  if (g_ascii_strcasecmp (g_uri_get_scheme (uri), "http") == 0 &&
      (flow->config->allow_insecure_http || strcmp (host, "127.0.0.1") == 0 ||
       strcmp (host, "::1") == 0 || g_ascii_strcasecmp (host, "localhost") == 0))
    return TRUE;
  g_set_error (error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_INSECURE,
               _("Server “%s”: %s is not https; set \"allowInsecureHttp\": true in %s only if "
                 "the network is trusted"), flow->config->name, url,
               flow->config->source ? flow->config->source : _("the config"));
  return FALSE;
}

static void
on_sent (GObject      *source,
         GAsyncResult *result,
         gpointer      user_data)
{
  g_autoptr(GTask) task = user_data;
  Flow *flow = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autoptr(GBytes) body = soup_session_send_and_read_finish (SOUP_SESSION (source), result,
                                                              &error);
  g_autoptr(SoupMessage) msg = g_steal_pointer (&flow->msg);

  flow->reply (flow, msg, body, error);
}

static void
flow_send (Flow        *flow,
           SoupMessage *msg,
           FlowReply    reply)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *url = g_uri_to_string (soup_message_get_uri (msg));

  if (!flow_check_url (flow, url, &error))
    {
      g_object_unref (msg);
      reply (flow, NULL, NULL, error);
      return;
    }
  flow->msg = msg;
  flow->reply = reply;
  soup_session_send_and_read_async (flow->session, msg, G_PRIORITY_DEFAULT,
                                    g_task_get_cancellable (flow->task), on_sent,
                                    g_object_ref (flow->task));
}

static void
job_thread (GTask        *job,
            gpointer      source,
            gpointer      task_data,
            GCancellable *cancellable)
{
  Flow *flow = task_data;
  GError *error = NULL;

  if (flow->job (flow, &error))
    g_task_return_boolean (job, TRUE);
  else
    g_task_return_error (job, error);
}

static void
on_job_done (GObject      *source,
             GAsyncResult *result,
             gpointer      user_data)
{
  g_autoptr(GTask) task = user_data;
  Flow *flow = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;

  g_task_propagate_boolean (G_TASK (result), &error);
  flow->job_done (flow, error);
}

/* The keyring blocks: it runs on a worker while the context waits. */
static void
flow_run_job (Flow    *flow,
              FlowJob  job,
              FlowDone done)
{
  g_autoptr(GTask) worker = g_task_new (NULL, NULL, on_job_done, g_object_ref (flow->task));

  flow->job = job;
  flow->job_done = done;
  g_task_set_task_data (worker, flow, NULL);
  g_task_run_in_thread (worker, job_thread);
}

static gboolean
job_load (Flow    *flow,
          GError **error)
{
  g_autoptr(GError) local_error = NULL;

  flow->record = mcp_token_store_load (flow->config->url, &flow->store, &local_error);
  if (flow->record != NULL ||
      g_error_matches (local_error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_NOT_FOUND))
    return TRUE;
  g_propagate_error (error, g_steal_pointer (&local_error));
  return FALSE;
}

static gboolean
job_save (Flow    *flow,
          GError **error)
{
  return mcp_token_store_save (flow->config->url, flow->record, &flow->store, error);
}

static json_t *
body_json (GBytes *body)
{
  json_t *json;

  if (body == NULL)
    return NULL;
  json = json_loadb (g_bytes_get_data (body, NULL), g_bytes_get_size (body), 0, NULL);
  if (json != NULL && !json_is_object (json))
    g_clear_pointer (&json, json_decref);
  return json;
}

static GError *
http_error (Flow        *flow,
            SoupMessage *msg,
            const char  *what)
{
  g_autofree char *url = g_uri_to_string (soup_message_get_uri (msg));

  return g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_HTTP,
                      _("Server “%s”: %s at %s answered %u %s"), flow->config->name, what, url,
                      soup_message_get_status (msg), soup_message_get_reason_phrase (msg));
}

/* --- metadata documents: the first of the candidates that answers --------- */

static void try_candidate (Flow *flow);

static void
on_candidate (Flow        *flow,
              SoupMessage *msg,
              GBytes      *body,
              GError      *error)
{
  g_autoptr(json_t) document = NULL;

  if (error != NULL && error->domain == MCP_OAUTH_ERROR)
    {
      flow_fail (flow, g_error_copy (error));
      return;
    }
  if (error == NULL && soup_message_get_status (msg) == SOUP_STATUS_OK)
    document = body_json (body);
  if (document != NULL)
    {
      flow->found (flow, document);
      return;
    }
  g_debug ("%s: no metadata at %s", flow->config->name,
           (char *) g_ptr_array_index (flow->candidates, flow->candidate));
  flow->candidate++;
  try_candidate (flow);
}

static void
try_candidate (Flow *flow)
{
  SoupMessage *msg;

  if (flow->candidate >= flow->candidates->len)
    {
      flow->found (flow, NULL);
      return;
    }
  msg = soup_message_new ("GET", g_ptr_array_index (flow->candidates, flow->candidate));
  if (msg == NULL)
    {
      flow->candidate++;
      try_candidate (flow);
      return;
    }
  soup_message_headers_append (soup_message_get_request_headers (msg), "Accept",
                               "application/json");
  flow_send (flow, msg, on_candidate);
}

static void
flow_fetch_first (Flow      *flow,
                  GPtrArray *candidates,
                  FlowFound  found)
{
  g_clear_pointer (&flow->candidates, g_ptr_array_unref);
  flow->candidates = candidates;
  flow->candidate = 0;
  flow->found = found;
  try_candidate (flow);
}

/* scheme://host[:port] of @url and its path without the trailing slash. */
static char *
split_url (const char *url,
           char      **path)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  g_autofree char *trimmed = NULL;

  if (uri == NULL)
    return NULL;
  trimmed = g_strdup (g_uri_get_path (uri));
  while (*trimmed && trimmed[strlen (trimmed) - 1] == '/')
    trimmed[strlen (trimmed) - 1] = '\0';
  *path = g_steal_pointer (&trimmed);
  return g_uri_join (G_URI_FLAGS_NONE, g_uri_get_scheme (uri), NULL, g_uri_get_host (uri),
                     g_uri_get_port (uri), "", NULL, NULL);
}

static void
add_candidate (GPtrArray  *candidates,
               const char *origin,
               const char *middle,
               const char *path)
{
  g_ptr_array_add (candidates, g_strconcat (origin, middle, path, NULL));
}

/* --- the token endpoint ---------------------------------------------------- */

static void
form_add (GString    *form,
          const char *name,
          const char *value)
{
  g_autofree char *escaped = NULL;

  if (value == NULL)
    return;
  escaped = g_uri_escape_string (value, NULL, FALSE);
  g_string_append_printf (form, "%s%s=%s", form->len ? "&" : "", name, escaped);
}

/* The client's authentication as the record says (RFC 6749 §2.3.1): basic
 * puts it in a header, post in the form, none sends the id alone. */
static SoupMessage *
token_request (Flow    *flow,
               GString *form)
{
  const char *method = record_string (flow->record, "auth_method");
  const char *id = record_string (flow->record, "client_id");
  const char *secret = record_string (flow->record, "client_secret");
  SoupMessage *msg;

  if (g_strcmp0 (method, "client_secret_basic") == 0 && secret != NULL)
    {
      g_autofree char *id_escaped = g_uri_escape_string (id, NULL, FALSE);
      g_autofree char *secret_escaped = g_uri_escape_string (secret, NULL, FALSE);
      g_autofree char *pair = g_strconcat (id_escaped, ":", secret_escaped, NULL);
      g_autofree char *encoded = g_base64_encode ((const guchar *) pair, strlen (pair));
      g_autofree char *header = g_strconcat ("Basic ", encoded, NULL);

      msg = soup_message_new_from_encoded_form ("POST", record_string (flow->record, "token_endpoint"),
                                                g_string_free (form, FALSE));
      if (msg != NULL)
        soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization",
                                      header);
      return msg;
    }
  form_add (form, "client_id", id);
  if (g_strcmp0 (method, "client_secret_post") == 0)
    form_add (form, "client_secret", secret);
  return soup_message_new_from_encoded_form ("POST", record_string (flow->record, "token_endpoint"),
                                             g_string_free (form, FALSE));
}

/* Takes the tokens of a token endpoint's answer into the record. */
static gboolean
take_tokens (Flow        *flow,
             SoupMessage *msg,
             GBytes      *body,
             GError      *error,
             GError     **out_error)
{
  g_autoptr(json_t) reply = NULL;
  json_t *expires;

  if (error != NULL)
    {
      *out_error = g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                _("Server “%s”: the token endpoint cannot be reached: %s"),
                                flow->config->name, error->message);
      return FALSE;
    }
  reply = body_json (body);
  if (soup_message_get_status (msg) != SOUP_STATUS_OK || reply == NULL ||
      !json_is_string (json_object_get (reply, "access_token")))
    {
      const char *code = record_string (reply, "error");
      const char *description = record_string (reply, "error_description");
      g_autofree char *url = g_uri_to_string (soup_message_get_uri (msg));

      *out_error = g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                _("Server “%s”: the token endpoint %s refused (%u %s%s%s)"),
                                flow->config->name, url, soup_message_get_status (msg),
                                code ? code : soup_message_get_reason_phrase (msg),
                                description ? ": " : "", description ? description : "");
      return FALSE;
    }
  record_set (flow->record, "access_token", record_string (reply, "access_token"));
  /* A refresh answer may keep the old refresh token valid by omitting it. */
  if (record_string (reply, "refresh_token") != NULL)
    record_set (flow->record, "refresh_token", record_string (reply, "refresh_token"));
  if (record_string (reply, "scope") != NULL)
    record_set (flow->record, "scope", record_string (reply, "scope"));
  expires = json_object_get (reply, "expires_in");
  if (json_is_integer (expires))
    json_object_set_new (flow->record, "expires_at",
                         json_integer (g_get_real_time () / G_USEC_PER_SEC +
                                       json_integer_value (expires)));
  else
    json_object_del (flow->record, "expires_at");
  return TRUE;
}

static void
flow_refresh (Flow     *flow,
              FlowReply reply)
{
  GString *form = g_string_new (NULL);
  SoupMessage *msg;

  form_add (form, "grant_type", "refresh_token");
  form_add (form, "refresh_token", record_string (flow->record, "refresh_token"));
  form_add (form, "resource", record_string (flow->record, "resource"));
  msg = token_request (flow, form);
  if (msg == NULL)
    {
      g_autoptr(GError) error = g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                             _("Server “%s”: the stored token endpoint is not a URL"),
                                             flow->config->name);
      reply (flow, NULL, NULL, error);
      return;
    }
  flow_send (flow, msg, reply);
}

static Flow *
flow_new (McpServerConfig *config,
          GCancellable    *cancellable,
          GAsyncReadyCallback callback,
          gpointer         user_data,
          gpointer         source_tag)
{
  Flow *flow = g_new0 (Flow, 1);
  g_autoptr(GTask) task = g_task_new (NULL, cancellable, callback, user_data);

  g_task_set_source_tag (task, source_tag);
  g_task_set_task_data (task, flow, (GDestroyNotify) flow_free);
  flow->task = task;
  flow->config = mcp_server_config_ref (config);
  flow->session = soup_session_new_with_options ("timeout", HTTP_TIMEOUT_S,
                                                 "user-agent", "mcp-pool/" PACKAGE_VERSION, NULL);
  if (config->ca_file != NULL)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(GTlsDatabase) database = g_tls_file_database_new (config->ca_file, &error);

      if (database != NULL)
        soup_session_set_tls_database (flow->session, database);
      else
        g_warning (_("Server “%s”: the CA file %s cannot be used: %s"), config->name,
                   config->ca_file, error->message);
    }
  /* The caller's reference: it ends when the last step returns. */
  g_steal_pointer (&task);
  return flow;
}

/* --- the transport's API -------------------------------------------------- */

char *
mcp_oauth_load_access_token (const McpServerConfig *config,
                             GError               **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(json_t) record = mcp_token_store_load (config->url, NULL, &local_error);
  const char *token = record_string (record, "access_token");

  if (token != NULL)
    return g_strdup (token);
  if (local_error != NULL &&
      !g_error_matches (local_error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_NOT_FOUND))
    g_set_error (error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_LOGIN_REQUIRED,
                 _("Server “%s” needs a login (%s); run “mcp-pool auth %s”"),
                 config->name, local_error->message, config->name);
  else
    g_set_error (error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_LOGIN_REQUIRED,
                 _("Server “%s” needs a login (no token is stored); run “mcp-pool auth %s”"),
                 config->name, config->name);
  return NULL;
}

static void
on_api_saved (Flow   *flow,
              GError *error)
{
  if (error != NULL)
    flow_fail (flow, g_error_copy (error));
  else
    g_task_return_pointer (flow->task, g_strdup (record_string (flow->record, "access_token")),
                           g_free);
}

static void
on_api_refreshed (Flow        *flow,
                  SoupMessage *msg,
                  GBytes      *body,
                  GError      *error)
{
  g_autoptr(GError) refused = NULL;

  if (!take_tokens (flow, msg, body, error, &refused))
    {
      /* The reason names the endpoint and the AS's error code, no token. */
      flow_fail (flow, login_required (flow, refused->message));
      return;
    }
  flow_run_job (flow, job_save, on_api_saved);
}

static void
on_api_loaded (Flow   *flow,
               GError *error)
{
  if (error != NULL)
    flow_fail (flow, login_required (flow, error->message));
  else if (record_string (flow->record, "refresh_token") == NULL ||
           record_string (flow->record, "token_endpoint") == NULL)
    flow_fail (flow, login_required (flow, _("no refresh token is stored")));
  else
    flow_refresh (flow, on_api_refreshed);
}

void
mcp_oauth_refresh_async (McpServerConfig    *config,
                         GCancellable       *cancellable,
                         GAsyncReadyCallback callback,
                         gpointer            user_data)
{
  Flow *flow = flow_new (config, cancellable, callback, user_data, mcp_oauth_refresh_async);

  flow_run_job (flow, job_load, on_api_loaded);
  g_object_unref (flow->task);
}

char *
mcp_oauth_refresh_finish (GAsyncResult *result,
                          GError      **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

gboolean
mcp_oauth_logout (const McpServerConfig *config,
                  GError               **error)
{
  return mcp_token_store_forget (config->url, error);
}

/* --- the interactive login --------------------------------------------------- */

static void login_probe (Flow *flow);
static void login_authorize (Flow *flow);

static char *
random_token (gsize bytes)
{
  guchar buffer[64];
  g_autofree char *encoded = NULL;

  g_assert (bytes <= sizeof buffer);
  if (getrandom (buffer, bytes, 0) != (gssize) bytes)
    g_error ("getrandom failed");
  encoded = g_base64_encode (buffer, bytes);
  /* base64url without padding (RFC 7636 §4.1) */
  g_strdelimit (encoded, "+", '-');
  g_strdelimit (encoded, "/", '_');
  encoded[strcspn (encoded, "=")] = '\0';
  return g_steal_pointer (&encoded);
}

static char *
pkce_challenge (const char *verifier)
{
  guint8 digest[32];
  gsize length = sizeof digest;
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autofree char *encoded = NULL;

  g_checksum_update (checksum, (const guchar *) verifier, strlen (verifier));
  g_checksum_get_digest (checksum, digest, &length);
  encoded = g_base64_encode (digest, length);
  g_strdelimit (encoded, "+", '-');
  g_strdelimit (encoded, "/", '_');
  encoded[strcspn (encoded, "=")] = '\0';
  return g_steal_pointer (&encoded);
}

static void
set_json_body (SoupMessage *msg,
               char        *text)
{
  gsize length = strlen (text);
  g_autoptr(GBytes) bytes = g_bytes_new_take (text, length);

  soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
}

/* The Bearer challenge's parameters, or NULL without one. */
static GHashTable *
bearer_challenge (SoupMessage *msg)
{
  const char *header = soup_message_headers_get_one (soup_message_get_response_headers (msg),
                                                     "WWW-Authenticate");

  if (header == NULL || g_ascii_strncasecmp (header, "Bearer", 6) != 0)
    return NULL;
  return soup_header_parse_param_list (header + 6);
}

/* An initialize request, with the access token or without: the way to
 * meet the server's 401 (or 403 insufficient_scope) that starts it all. */
static SoupMessage *
initialize_request (Flow       *flow,
                    const char *token)
{
  g_autofree char *body = g_strdup_printf (
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
      "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
      "\"clientInfo\":{\"name\":\"mcp-pool\",\"version\":\"%s\"}}}", PACKAGE_VERSION);
  SoupMessage *msg = soup_message_new ("POST", flow->config->url);
  SoupMessageHeaders *headers;

  if (msg == NULL)
    return NULL;
  headers = soup_message_get_request_headers (msg);
  soup_message_headers_append (headers, "Accept", "application/json, text/event-stream");
  for (guint i = 0; flow->config->headers && flow->config->headers[i]; i++)
    {
      g_auto(GStrv) pair = g_strsplit (flow->config->headers[i], ":", 2);

      if (pair[0] != NULL && pair[1] != NULL)
        soup_message_headers_replace (headers, g_strstrip (pair[0]), g_strstrip (pair[1]));
    }
  if (token != NULL)
    {
      g_autofree char *bearer = g_strconcat ("Bearer ", token, NULL);

      soup_message_headers_replace (headers, "Authorization", bearer);
    }
  set_json_body (msg, g_steal_pointer (&body));
  return msg;
}

static void
take_challenge (Flow       *flow,
                GHashTable *challenge)
{
  const char *scope = challenge ? g_hash_table_lookup (challenge, "scope") : NULL;
  const char *metadata = challenge ? g_hash_table_lookup (challenge, "resource_metadata") : NULL;

  if (scope != NULL)
    replace_str (&flow->challenge_scope, scope);
  if (metadata != NULL)
    replace_str (&flow->metadata_url, metadata);
}

static void
on_login_saved (Flow   *flow,
                GError *error)
{
  if (error != NULL)
    flow_fail (flow, g_error_copy (error));
  else
    g_task_return_boolean (flow->task, TRUE);
}

static void
on_verified (Flow        *flow,
             SoupMessage *msg,
             GBytes      *body,
             GError      *error)
{
  g_autoptr(GHashTable) challenge = NULL;
  guint status;

  if (error != NULL)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_HTTP,
                                    _("Server “%s” cannot be reached at %s: %s"),
                                    flow->config->name, flow->config->url, error->message));
      return;
    }
  status = soup_message_get_status (msg);
  challenge = bearer_challenge (msg);
  if (status == SOUP_STATUS_FORBIDDEN && challenge != NULL &&
      g_strcmp0 (g_hash_table_lookup (challenge, "error"), "insufficient_scope") == 0)
    {
      if (flow->step_ups >= MCP_OAUTH_STEP_UP_MAX)
        {
          flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                        _("Server “%s” still wants more scope after %u step-ups; "
                                          "set \"oauth\": {\"scopes\"} for it in %s"),
                                        flow->config->name, flow->step_ups,
                                        flow->config->source ? flow->config->source : _("the config")));
          return;
        }
      flow->step_ups++;
      take_challenge (flow, challenge);
      replace_str (&flow->scope, flow->challenge_scope);
      login_authorize (flow);
      return;
    }
  if (status == SOUP_STATUS_UNAUTHORIZED || status == SOUP_STATUS_FORBIDDEN)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                    _("Server “%s” refused the token it just issued (%u %s)"),
                                    flow->config->name, status,
                                    soup_message_get_reason_phrase (msg)));
      return;
    }
  flow_run_job (flow, job_save, on_login_saved);
}

static void
login_verify (Flow *flow)
{
  SoupMessage *msg = initialize_request (flow, record_string (flow->record, "access_token"));

  flow_send (flow, msg, on_verified);
}

static void
on_code_exchanged (Flow        *flow,
                   SoupMessage *msg,
                   GBytes      *body,
                   GError      *error)
{
  GError *refused = NULL;

  if (!take_tokens (flow, msg, body, error, &refused))
    {
      flow_fail (flow, refused);
      return;
    }
  flow->outcome = MCP_OAUTH_LOGIN_AUTHORIZED;
  login_verify (flow);
}

static void
on_redirected (GObject      *source,
               GAsyncResult *result,
               gpointer      user_data)
{
  g_autoptr(GTask) task = user_data;
  Flow *flow = g_task_get_task_data (task);
  GError *error = NULL;
  g_autofree char *code = mcp_oauth_redirect_wait_finish (flow->redirect, result, &error);
  GString *form;
  SoupMessage *msg;

  if (code == NULL)
    {
      flow_fail (flow, error);
      return;
    }
  form = g_string_new (NULL);
  form_add (form, "grant_type", "authorization_code");
  form_add (form, "code", code);
  form_add (form, "redirect_uri", mcp_oauth_redirect_get_uri (flow->redirect));
  form_add (form, "code_verifier", flow->verifier);
  form_add (form, "resource", flow->resource);
  msg = token_request (flow, form);
  if (msg == NULL)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                    _("Server “%s”: the token endpoint is not a URL"),
                                    flow->config->name));
      return;
    }
  flow_send (flow, msg, on_code_exchanged);
}

static void
login_authorize (Flow *flow)
{
  const char *endpoint = record_string (flow->as, "authorization_endpoint");
  g_autofree char *challenge = NULL;
  g_autofree char *uri = NULL;
  GString *query = g_string_new (NULL);
  g_autoptr(GError) error = NULL;

  g_free (flow->verifier);
  flow->verifier = random_token (32);
  g_free (flow->state);
  flow->state = random_token (16);
  challenge = pkce_challenge (flow->verifier);
  form_add (query, "response_type", "code");
  form_add (query, "client_id", record_string (flow->record, "client_id"));
  form_add (query, "redirect_uri", mcp_oauth_redirect_get_uri (flow->redirect));
  form_add (query, "state", flow->state);
  form_add (query, "code_challenge", challenge);
  form_add (query, "code_challenge_method", "S256");
  form_add (query, "resource", flow->resource);
  form_add (query, "scope", flow->scope);
  uri = g_strconcat (endpoint, strchr (endpoint, '?') ? "&" : "?", query->str, NULL);
  g_string_free (query, TRUE);
  if (!flow_check_url (flow, uri, &error))
    {
      flow_fail (flow, g_steal_pointer (&error));
      return;
    }
  mcp_oauth_redirect_wait_async (flow->redirect, flow->config->name, flow->state,
                                 flow->options.timeout_ms ? flow->options.timeout_ms
                                                          : MCP_OAUTH_LOGIN_TIMEOUT_DEFAULT_MS,
                                 on_redirected, g_object_ref (flow->task));
  flow->options.open_uri (uri, flow->options.open_uri_data);
}

/* RFC 8414 says client_secret_basic when the list is absent. */
static const char *
choose_auth_method (json_t     *as,
                    const char *secret)
{
  json_t *methods = json_object_get (as, "token_endpoint_auth_methods_supported");
  gboolean basic = !json_is_array (methods), post = FALSE;
  gsize i;
  json_t *method;

  if (secret == NULL)
    return "none";
  json_array_foreach (methods, i, method)
    {
      basic = basic || g_strcmp0 (json_string_value (method), "client_secret_basic") == 0;
      post = post || g_strcmp0 (json_string_value (method), "client_secret_post") == 0;
    }
  return basic || !post ? "client_secret_basic" : "client_secret_post";
}

static void
set_client (Flow       *flow,
            const char *id,
            const char *secret,
            const char *method)
{
  record_set (flow->record, "client_id", id);
  record_set (flow->record, "client_secret", secret);
  record_set (flow->record, "auth_method", method ? method : choose_auth_method (flow->as, secret));
}

static void
on_registered (Flow        *flow,
               SoupMessage *msg,
               GBytes      *body,
               GError      *error)
{
  g_autoptr(json_t) reply = NULL;
  guint status;

  if (error != NULL)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                    _("Server “%s”: client registration failed: %s"),
                                    flow->config->name, error->message));
      return;
    }
  status = soup_message_get_status (msg);
  reply = body_json (body);
  if ((status != SOUP_STATUS_OK && status != SOUP_STATUS_CREATED) ||
      record_string (reply, "client_id") == NULL)
    {
      const char *description = record_string (reply, "error_description");

      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                    _("Server “%s”: the authorization server refused to register "
                                      "mcp-pool (%u %s); set \"oauth\": {\"clientId\"} for it in %s"),
                                    flow->config->name, status,
                                    description ? description : soup_message_get_reason_phrase (msg),
                                    flow->config->source ? flow->config->source : _("the config")));
      return;
    }
  set_client (flow, record_string (reply, "client_id"), record_string (reply, "client_secret"),
              record_string (reply, "token_endpoint_auth_method"));
  login_authorize (flow);
}

static void
login_register (Flow *flow)
{
  const char *endpoint = record_string (flow->as, "registration_endpoint");
  g_autoptr(json_t) request = NULL;
  SoupMessage *msg;

  if (endpoint == NULL || (msg = soup_message_new ("POST", endpoint)) == NULL)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_UNSUPPORTED,
                                    _("Server “%s”: its authorization server %s offers no client "
                                      "registration; set \"oauth\": {\"clientId\"} for it in %s"),
                                    flow->config->name, flow->issuer,
                                    flow->config->source ? flow->config->source : _("the config")));
      return;
    }
  request = json_pack ("{s:s, s:[s], s:[s,s], s:[s], s:s}",
                       "client_name", "mcp-pool",
                       "redirect_uris", mcp_oauth_redirect_get_uri (flow->redirect),
                       "grant_types", "authorization_code", "refresh_token",
                       "response_types", "code",
                       "token_endpoint_auth_method", "none");
  set_json_body (msg, json_dumps (request, JSON_COMPACT));
  flow_send (flow, msg, on_registered);
}

/* Pre-registered first; a Client ID Metadata Document where the server
 * takes one; the registration kept from an earlier login with the same
 * server; else a new registration (RFC 7591). */
static void
login_identify (Flow *flow)
{
  const char *id = flow->config->oauth_client_id;
  gboolean cimd_supported = json_is_true (json_object_get (flow->as,
                                                           "client_id_metadata_document_supported"));
  g_autoptr(GError) error = NULL;

  flow->redirect = mcp_oauth_redirect_new (&error);
  if (flow->redirect == NULL)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_REDIRECT,
                                    _("Server “%s”: cannot listen for the browser on 127.0.0.1: %s"),
                                    flow->config->name, error->message));
      return;
    }
  record_set (flow->record, "token_endpoint", record_string (flow->as, "token_endpoint"));
  if (id != NULL && !g_str_has_prefix (id, "https://"))
    set_client (flow, id, flow->config->oauth_client_secret, NULL);
  else if (id != NULL && cimd_supported)
    set_client (flow, id, NULL, "none");
  else if (record_string (flow->record, "client_id") != NULL &&
           g_strcmp0 (record_string (flow->record, "issuer"), flow->issuer) == 0)
    g_debug ("%s: the registration of the last login is used again", flow->config->name);
  else
    {
      record_set (flow->record, "issuer", flow->issuer);
      login_register (flow);
      return;
    }
  record_set (flow->record, "issuer", flow->issuer);
  login_authorize (flow);
}

static gboolean
has_s256 (json_t *as)
{
  json_t *methods = json_object_get (as, "code_challenge_methods_supported");
  gsize i;
  json_t *method;

  if (!json_is_array (methods))
    return TRUE;   /* not said: tried, and the server refuses it if it must */
  json_array_foreach (methods, i, method)
    if (g_strcmp0 (json_string_value (method), "S256") == 0)
      return TRUE;
  return FALSE;
}

/* The 2025-03-26 fallback: without any metadata, the server's origin is
 * the authorization server, at its default paths. */
static json_t *
default_endpoints (const char *origin)
{
  g_autofree char *authorize = g_strconcat (origin, "/authorize", NULL);
  g_autofree char *token = g_strconcat (origin, "/token", NULL);
  g_autofree char *registration = g_strconcat (origin, "/register", NULL);

  return json_pack ("{s:s, s:s, s:s, s:s}", "issuer", origin, "authorization_endpoint", authorize,
                    "token_endpoint", token, "registration_endpoint", registration);
}

static void
on_as_metadata (Flow   *flow,
                json_t *document)
{
  if (document == NULL && flow->prm != NULL)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                    _("Server “%s”: its authorization server %s publishes no "
                                      "metadata (RFC 8414 or OpenID discovery)"),
                                    flow->config->name, flow->issuer));
      return;
    }
  flow->as = document ? json_incref (document) : default_endpoints (flow->issuer);
  if (!has_s256 (flow->as))
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_UNSUPPORTED,
                                    _("Server “%s”: its authorization server %s does not support "
                                      "PKCE with S256, which mcp-pool requires; it cannot be used"),
                                    flow->config->name, flow->issuer));
      return;
    }
  if (record_string (flow->as, "authorization_endpoint") == NULL ||
      record_string (flow->as, "token_endpoint") == NULL)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                    _("Server “%s”: the metadata of %s names no authorization or "
                                      "token endpoint"), flow->config->name, flow->issuer));
      return;
    }
  login_identify (flow);
}

/* The order of the MCP authorization spec (2025-11-25): with a path,
 * RFC 8414 and OpenID with the well-known part inserted, then OpenID with
 * it appended; without, the two at the root. */
static GPtrArray *
as_metadata_candidates (const char *issuer)
{
  GPtrArray *candidates = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *path = NULL;
  g_autofree char *origin = split_url (issuer, &path);

  if (origin == NULL)
    return candidates;
  add_candidate (candidates, origin, "/.well-known/oauth-authorization-server", path);
  add_candidate (candidates, origin, "/.well-known/openid-configuration", path);
  if (*path)
    {
      g_autofree char *base = g_strconcat (origin, path, NULL);

      add_candidate (candidates, base, "/.well-known/openid-configuration", "");
    }
  return candidates;
}

static void
take_prm_scopes (Flow *flow)
{
  json_t *scopes = json_object_get (flow->prm, "scopes_supported");
  g_autoptr(GPtrArray) words = g_ptr_array_new ();
  gsize i;
  json_t *scope;

  json_array_foreach (scopes, i, scope)
    if (json_is_string (scope))
      g_ptr_array_add (words, (char *) json_string_value (scope));
  if (words->len == 0)
    return;
  g_ptr_array_add (words, NULL);
  g_free (flow->scope);
  flow->scope = g_strjoinv (" ", (char **) words->pdata);
}

static void
on_resource_metadata (Flow   *flow,
                      json_t *document)
{
  const char *resource = record_string (document, "resource");
  json_t *servers = json_object_get (document, "authorization_servers");
  g_autofree char *path = NULL;

  if (document == NULL || !json_is_string (json_array_get (servers, 0)))
    {
      g_debug ("%s: no resource metadata; the server is its own authorization server",
               flow->config->name);
      g_free (flow->issuer);
      flow->issuer = split_url (flow->config->url, &path);
    }
  else
    {
      /* RFC 9728 §3.3: metadata for another resource must not be used. */
      if (resource != NULL && !g_str_has_prefix (flow->resource, resource))
        {
          flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                        _("Server “%s”: its resource metadata is for %s, not for "
                                          "%s"), flow->config->name, resource, flow->resource));
          return;
        }
      if (resource != NULL)
        replace_str (&flow->resource, resource);
      flow->prm = json_incref (document);
      replace_str (&flow->issuer, json_string_value (json_array_get (servers, 0)));
    }
  record_set (flow->record, "resource", flow->resource);
  if (flow->config->oauth_scopes != NULL)
    replace_str (&flow->scope, flow->config->oauth_scopes);
  else if (flow->challenge_scope != NULL)
    replace_str (&flow->scope, flow->challenge_scope);
  else
    take_prm_scopes (flow);
  flow_fetch_first (flow, as_metadata_candidates (flow->issuer), on_as_metadata);
}

/* From resource_metadata= if the 401 named it, else the well-known paths
 * of RFC 9728: with the server's path, then at the root. */
static void
login_discover (Flow *flow)
{
  GPtrArray *candidates = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *path = NULL;
  g_autofree char *origin = split_url (flow->config->url, &path);

  if (flow->metadata_url != NULL)
    g_ptr_array_add (candidates, g_strdup (flow->metadata_url));
  if (origin != NULL && *path)
    add_candidate (candidates, origin, "/.well-known/oauth-protected-resource", path);
  if (origin != NULL)
    add_candidate (candidates, origin, "/.well-known/oauth-protected-resource", "");
  flow_fetch_first (flow, candidates, on_resource_metadata);
}

static void
on_probed (Flow        *flow,
           SoupMessage *msg,
           GBytes      *body,
           GError      *error)
{
  g_autoptr(GHashTable) challenge = NULL;
  const char *session;

  if (error != NULL)
    {
      flow_fail (flow, error->domain == MCP_OAUTH_ERROR ? g_error_copy (error)
                 : g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_HTTP,
                                _("Server “%s” cannot be reached at %s: %s"),
                                flow->config->name, flow->config->url, error->message));
      return;
    }
  if (soup_message_get_status (msg) != SOUP_STATUS_UNAUTHORIZED)
    {
      if (SOUP_STATUS_IS_SUCCESSFUL (soup_message_get_status (msg)))
        {
          /* A session may have been opened; it is the server's to expire. */
          session = soup_message_headers_get_one (soup_message_get_response_headers (msg),
                                                  "Mcp-Session-Id");
          g_debug ("%s: no login needed%s", flow->config->name, session ? " (session left)" : "");
          flow->outcome = MCP_OAUTH_LOGIN_NOT_NEEDED;
          g_task_return_boolean (flow->task, TRUE);
        }
      else
        flow_fail (flow, http_error (flow, msg, _("the MCP endpoint")));
      return;
    }
  challenge = bearer_challenge (msg);
  take_challenge (flow, challenge);
  login_discover (flow);
}

static void
login_probe (Flow *flow)
{
  SoupMessage *msg = initialize_request (flow, NULL);

  if (msg == NULL)
    {
      flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                    _("Server “%s”: “%s” is not a URL"), flow->config->name,
                                    flow->config->url));
      return;
    }
  flow_send (flow, msg, on_probed);
}

static void
on_login_refreshed (Flow        *flow,
                    SoupMessage *msg,
                    GBytes      *body,
                    GError      *error)
{
  g_autoptr(GError) refused = NULL;

  if (take_tokens (flow, msg, body, error, &refused))
    {
      flow->outcome = MCP_OAUTH_LOGIN_REFRESHED;
      flow_run_job (flow, job_save, on_login_saved);
      return;
    }
  g_debug ("%s: the refresh token was not taken (%s); logging in", flow->config->name,
           refused->message);
  json_object_del (flow->record, "refresh_token");
  json_object_del (flow->record, "access_token");
  login_probe (flow);
}

static void
on_login_loaded (Flow   *flow,
                 GError *error)
{
  if (error != NULL)
    {
      flow_fail (flow, g_error_copy (error));
      return;
    }
  if (flow->record == NULL)
    flow->record = json_object ();
  if (record_string (flow->record, "refresh_token") != NULL &&
      record_string (flow->record, "token_endpoint") != NULL)
    flow_refresh (flow, on_login_refreshed);
  else
    login_probe (flow);
}

static char *
canonical_resource (const char *url)
{
  g_autoptr(GUri) uri = g_uri_parse (url, G_URI_FLAGS_NONE, NULL);
  g_autofree char *scheme = NULL;
  g_autofree char *host = NULL;

  if (uri == NULL)
    return g_strdup (url);
  /* RFC 8707 §2: no fragment; scheme and host compare without case. */
  scheme = g_ascii_strdown (g_uri_get_scheme (uri), -1);
  host = g_ascii_strdown (g_uri_get_host (uri) ? g_uri_get_host (uri) : "", -1);
  return g_uri_join (G_URI_FLAGS_NONE, scheme, NULL, host, g_uri_get_port (uri),
                     g_uri_get_path (uri), g_uri_get_query (uri), NULL);
}

void
mcp_oauth_login_async (McpServerConfig            *config,
                       const McpOAuthLoginOptions *options,
                       GCancellable               *cancellable,
                       GAsyncReadyCallback         callback,
                       gpointer                    user_data)
{
  Flow *flow;

  g_return_if_fail (options != NULL && options->open_uri != NULL);
  flow = flow_new (config, cancellable, callback, user_data, mcp_oauth_login_async);
  flow->options = *options;
  flow->resource = canonical_resource (config->url);
  flow_run_job (flow, job_load, on_login_loaded);
  g_object_unref (flow->task);
}

gboolean
mcp_oauth_login_finish (GAsyncResult         *result,
                        McpOAuthLoginOutcome *outcome,
                        McpTokenStoreKind    *store,
                        GError              **error)
{
  Flow *flow = g_task_get_task_data (G_TASK (result));

  if (!g_task_propagate_boolean (G_TASK (result), error))
    return FALSE;
  if (outcome != NULL)
    *outcome = flow->outcome;
  if (store != NULL)
    *store = flow->store;
  return TRUE;
}
