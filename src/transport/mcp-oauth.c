/* mcp-oauth.c — OAuth login and token refresh for remote MCP servers (see
 * mcp-oauth.h).
 *
 * This half is the non-interactive part and the plumbing both halves use
 * (mcp-oauth-private.h); the login is mcp-oauth-login.c.  A login or a
 * refresh is one Flow: a chain of steps on the caller's main
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
#include "transport/mcp-http-transport.h"
#include "transport/mcp-jwt.h"
#include "transport/mcp-oauth-private.h"

G_DEFINE_QUARK (mcp-oauth-error-quark, mcp_oauth_error)

#define HTTP_TIMEOUT_S 30

static void
flow_free (Flow *flow)
{
  g_clear_pointer (&flow->config, mcp_server_config_unref);
  g_clear_object (&flow->session);
  g_clear_pointer (&flow->record, json_decref);
  g_clear_object (&flow->msg);
  g_clear_pointer (&flow->candidates, g_ptr_array_unref);
  g_free (flow->display_url);
  g_free (flow->challenge);
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
  g_free (flow->client_assertion);
  g_free (flow->subject_token);
  g_free (flow);
}

char *
mcp_oauth_random_token (gsize bytes)
{
  guchar buffer[64];

  g_assert (bytes <= sizeof buffer);
  if (getrandom (buffer, bytes, 0) != (gssize) bytes)
    g_error ("getrandom failed");
  return mcp_jwt_base64url (buffer, bytes);
}

/* g_set_str() is newer than the GLib the build pins. */
void
mcp_oauth_replace_str (char      **slot,
             const char *value)
{
  char *copy = g_strdup (value);

  g_free (*slot);
  *slot = copy;
}

const char *
mcp_oauth_record_string (json_t     *record,
               const char *key)
{
  return record ? json_string_value (json_object_get (record, key)) : NULL;
}

void
mcp_oauth_record_set (json_t     *record,
            const char *key,
            const char *value)
{
  if (value != NULL)
    json_object_set_new (record, key, json_string (value));
  else
    json_object_del (record, key);
}

/* --- the steps' plumbing ------------------------------------------------ */

void
mcp_oauth_flow_fail (Flow   *flow,
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
gboolean
mcp_oauth_flow_check_url (Flow       *flow,
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

void
mcp_oauth_flow_send (Flow        *flow,
           SoupMessage *msg,
           FlowReply    reply)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *url = g_uri_to_string (soup_message_get_uri (msg));

  if (!mcp_oauth_flow_check_url (flow, url, &error))
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
void
mcp_oauth_flow_run_job (Flow    *flow,
              FlowJob  job,
              FlowDone done)
{
  g_autoptr(GTask) worker = g_task_new (NULL, NULL, on_job_done, g_object_ref (flow->task));

  flow->job = job;
  flow->job_done = done;
  g_task_set_task_data (worker, flow, NULL);
  g_task_run_in_thread (worker, job_thread);
}

gboolean
mcp_oauth_job_load (Flow    *flow,
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

gboolean
mcp_oauth_job_save (Flow    *flow,
          GError **error)
{
  return mcp_token_store_save (flow->config->url, flow->record, &flow->store, error);
}

json_t *
mcp_oauth_body_json (GBytes *body)
{
  json_t *json;

  if (body == NULL)
    return NULL;
  json = json_loadb (g_bytes_get_data (body, NULL), g_bytes_get_size (body), 0, NULL);
  if (json != NULL && !json_is_object (json))
    g_clear_pointer (&json, json_decref);
  return json;
}

GError *
mcp_oauth_http_error (Flow        *flow,
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
      mcp_oauth_flow_fail (flow, g_error_copy (error));
      return;
    }
  if (error == NULL && soup_message_get_status (msg) == SOUP_STATUS_OK)
    document = mcp_oauth_body_json (body);
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
  mcp_oauth_flow_send (flow, msg, on_candidate);
}

void
mcp_oauth_flow_fetch_first (Flow      *flow,
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
char *
mcp_oauth_split_url (const char *url,
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

void
mcp_oauth_add_candidate (GPtrArray  *candidates,
               const char *origin,
               const char *middle,
               const char *path)
{
  g_ptr_array_add (candidates, g_strconcat (origin, middle, path, NULL));
}

/* --- the token endpoint ---------------------------------------------------- */

void
mcp_oauth_form_add (GString    *form,
          const char *name,
          const char *value)
{
  g_autofree char *escaped = NULL;

  if (value == NULL)
    return;
  escaped = g_uri_escape_string (value, NULL, FALSE);
  g_string_append_printf (form, "%s%s=%s", form->len ? "&" : "", name, escaped);
}

void
mcp_oauth_set_basic_auth (SoupMessage *msg,
                          const char  *id,
                          const char  *secret)
{
  g_autofree char *id_escaped = g_uri_escape_string (id, NULL, FALSE);
  g_autofree char *secret_escaped = g_uri_escape_string (secret, NULL, FALSE);
  g_autofree char *pair = g_strconcat (id_escaped, ":", secret_escaped, NULL);
  g_autofree char *encoded = g_base64_encode ((const guchar *) pair, strlen (pair));
  g_autofree char *header = g_strconcat ("Basic ", encoded, NULL);

  soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization", header);
}

/* The client's authentication as the record says (RFC 6749 §2.3.1): basic
 * puts it in a header, post in the form, none sends the id alone. */
SoupMessage *
mcp_oauth_token_request (Flow    *flow,
               GString *form)
{
  const char *method = mcp_oauth_record_string (flow->record, "auth_method");
  const char *id = mcp_oauth_record_string (flow->record, "client_id");
  const char *secret = mcp_oauth_record_string (flow->record, "client_secret");
  SoupMessage *msg;

  if (g_strcmp0 (method, "client_secret_basic") == 0 && secret != NULL)
    {
      msg = soup_message_new_from_encoded_form ("POST", mcp_oauth_record_string (flow->record, "token_endpoint"),
                                                g_string_free (form, FALSE));
      if (msg != NULL)
        mcp_oauth_set_basic_auth (msg, id, secret);
      return msg;
    }
  mcp_oauth_form_add (form, "client_id", id);
  if (g_strcmp0 (method, "client_secret_post") == 0)
    mcp_oauth_form_add (form, "client_secret", secret);
  return soup_message_new_from_encoded_form ("POST", mcp_oauth_record_string (flow->record, "token_endpoint"),
                                             g_string_free (form, FALSE));
}

/* Takes the tokens of a token endpoint's answer into the record. */
gboolean
mcp_oauth_take_tokens (Flow        *flow,
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
  reply = mcp_oauth_body_json (body);
  if (soup_message_get_status (msg) != SOUP_STATUS_OK || reply == NULL ||
      !json_is_string (json_object_get (reply, "access_token")))
    {
      const char *code = mcp_oauth_record_string (reply, "error");
      const char *description = mcp_oauth_record_string (reply, "error_description");
      g_autofree char *url = g_uri_to_string (soup_message_get_uri (msg));

      *out_error = g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                _("Server “%s”: the token endpoint %s refused (%u %s%s%s)"),
                                flow->config->name, url, soup_message_get_status (msg),
                                code ? code : soup_message_get_reason_phrase (msg),
                                description ? ": " : "", description ? description : "");
      return FALSE;
    }
  mcp_oauth_record_set (flow->record, "access_token", mcp_oauth_record_string (reply, "access_token"));
  /* A refresh answer may keep the old refresh token valid by omitting it. */
  if (mcp_oauth_record_string (reply, "refresh_token") != NULL)
    mcp_oauth_record_set (flow->record, "refresh_token", mcp_oauth_record_string (reply, "refresh_token"));
  if (mcp_oauth_record_string (reply, "scope") != NULL)
    mcp_oauth_record_set (flow->record, "scope", mcp_oauth_record_string (reply, "scope"));
  expires = json_object_get (reply, "expires_in");
  if (json_is_integer (expires))
    json_object_set_new (flow->record, "expires_at",
                         json_integer (g_get_real_time () / G_USEC_PER_SEC +
                                       json_integer_value (expires)));
  else
    json_object_del (flow->record, "expires_at");
  return TRUE;
}

void
mcp_oauth_flow_refresh (Flow     *flow,
              FlowReply reply)
{
  GString *form = g_string_new (NULL);
  SoupMessage *msg;

  mcp_oauth_form_add (form, "grant_type", "refresh_token");
  mcp_oauth_form_add (form, "refresh_token", mcp_oauth_record_string (flow->record, "refresh_token"));
  mcp_oauth_form_add (form, "resource", mcp_oauth_record_string (flow->record, "resource"));
  msg = mcp_oauth_token_request (flow, form);
  if (msg == NULL)
    {
      g_autoptr(GError) error = g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                             _("Server “%s”: the stored token endpoint is not a URL"),
                                             flow->config->name);
      reply (flow, NULL, NULL, error);
      return;
    }
  mcp_oauth_flow_send (flow, msg, reply);
}

Flow *
mcp_oauth_flow_new (McpServerConfig *config,
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
  flow->display_url = mcp_server_config_display_url (config);
  if (flow->display_url == NULL)
    flow->display_url = g_strdup (_("(an address that is not a URL)"));
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
  const char *token = mcp_oauth_record_string (record, "access_token");

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
    mcp_oauth_flow_fail (flow, g_error_copy (error));
  else
    mcp_oauth_flow_succeed (flow);
}

static void
on_api_refreshed (Flow        *flow,
                  SoupMessage *msg,
                  GBytes      *body,
                  GError      *error)
{
  g_autoptr(GError) refused = NULL;

  if (!mcp_oauth_take_tokens (flow, msg, body, error, &refused))
    {
      /* The reason names the endpoint and the AS's error code, no token. */
      mcp_oauth_flow_fail (flow, login_required (flow, refused->message));
      return;
    }
  mcp_oauth_flow_run_job (flow, mcp_oauth_job_save, on_api_saved);
}

static void
on_api_loaded (Flow   *flow,
               GError *error)
{
  if (error != NULL)
    mcp_oauth_flow_fail (flow, login_required (flow, error->message));
  else if (mcp_oauth_record_string (flow->record, "refresh_token") == NULL ||
           mcp_oauth_record_string (flow->record, "token_endpoint") == NULL)
    mcp_oauth_flow_fail (flow, login_required (flow, _("no refresh token is stored")));
  else
    mcp_oauth_flow_refresh (flow, on_api_refreshed);
}

void
mcp_oauth_refresh_async (McpServerConfig    *config,
                         GCancellable       *cancellable,
                         GAsyncReadyCallback callback,
                         gpointer            user_data)
{
  Flow *flow = mcp_oauth_flow_new (config, cancellable, callback, user_data, mcp_oauth_refresh_async);

  /* No user is needed: the grant is made again, as a login would. */
  if (mcp_oauth_grant_is_unattended (config))
    {
      flow->challenge = mcp_http_dup_challenge (config->url);
      mcp_oauth_login_start (flow);
    }
  else
    mcp_oauth_flow_run_job (flow, mcp_oauth_job_load, on_api_loaded);
  g_object_unref (flow->task);
}

void
mcp_oauth_flow_succeed (Flow *flow)
{
  const char *token = mcp_oauth_record_string (flow->record, "access_token");

  if (g_task_get_source_tag (flow->task) != mcp_oauth_refresh_async)
    g_task_return_boolean (flow->task, TRUE);
  else if (token != NULL)
    g_task_return_pointer (flow->task, g_strdup (token), g_free);
  else
    mcp_oauth_flow_fail (flow, login_required (flow, _("the server answered without a token")));
}

char *
mcp_oauth_refresh_finish (GAsyncResult *result,
                          GError      **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}

GHashTable *
mcp_oauth_parse_bearer_challenge (const char *header)
{
  if (header == NULL || g_ascii_strncasecmp (header, "Bearer", 6) != 0 ||
      (header[6] != '\0' && !g_ascii_isspace (header[6])))
    return NULL;
  return soup_header_parse_param_list (header + 6);
}

char *
mcp_oauth_step_up_scope (const char *challenge)
{
  g_autoptr(GHashTable) params = mcp_oauth_parse_bearer_challenge (challenge);

  if (params == NULL || g_strcmp0 (g_hash_table_lookup (params, "error"), "insufficient_scope") != 0)
    return NULL;
  return g_strdup (g_hash_table_lookup (params, "scope"));
}

/* The login reads it back in mcp-oauth-login.c. */
static gboolean
job_keep_challenge (Flow    *flow,
                    GError **error)
{
  if (!mcp_oauth_job_load (flow, error))
    return FALSE;
  if (flow->record == NULL)
    return TRUE;
  mcp_oauth_record_set (flow->record, "step_up_challenge", flow->challenge);
  return mcp_oauth_job_save (flow, error);
}

static void
on_challenge_kept (Flow   *flow,
                   GError *error)
{
  if (error != NULL)
    mcp_oauth_flow_fail (flow, g_error_copy (error));
  else
    g_task_return_boolean (flow->task, TRUE);
}

void
mcp_oauth_keep_challenge_async (McpServerConfig    *config,
                                const char         *challenge,
                                GAsyncReadyCallback callback,
                                gpointer            user_data)
{
  Flow *flow = mcp_oauth_flow_new (config, NULL, callback, user_data,
                                   mcp_oauth_keep_challenge_async);

  flow->challenge = g_strdup (challenge);
  mcp_oauth_flow_run_job (flow, job_keep_challenge, on_challenge_kept);
  g_object_unref (flow->task);
}

gboolean
mcp_oauth_keep_challenge_finish (GAsyncResult *result,
                                 GError      **error)
{
  return g_task_propagate_boolean (G_TASK (result), error);
}

gboolean
mcp_oauth_logout (const McpServerConfig *config,
                  GError               **error)
{
  return mcp_token_store_forget (config->url, error);
}

const char *
mcp_oauth_login_state (const McpServerConfig *config)
{
  g_autoptr(json_t) record = NULL;
  g_autoptr(GError) error = NULL;

  if (config == NULL || config->transport == MCP_TRANSPORT_STDIO ||
      g_strcmp0 (mcp_server_config_auth_name (config), "headers") == 0)
    return NULL;
  record = mcp_token_store_load (config->url, NULL, &error);
  if (record != NULL)
    return "stored";
  /* A keyring that did not answer says nothing either way. */
  return g_error_matches (error, MCP_TOKEN_STORE_ERROR, MCP_TOKEN_STORE_ERROR_NOT_FOUND) ? "none" : NULL;
}
