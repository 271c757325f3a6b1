/* mcp-oauth-login.c — the interactive OAuth login of mcp-oauth.h: the
 * server's 401, resource and authorization server discovery, the client's
 * identity, the authorization code with PKCE through the loopback
 * redirect, the token, and step-up on insufficient_scope.  Each step is
 * one HTTP exchange of the Flow (mcp-oauth-private.h).  An entry whose
 * grant needs no user takes the same steps, with its grant
 * (mcp-oauth-grants.c) where the browser would be.
 */
#include "config.h"

#include <string.h>

#include <glib/gi18n-lib.h>
#include <libsoup/soup.h>

#include "common/mcp-jsonrpc.h"
#include "transport/mcp-http-transport.h"
#include "transport/mcp-jwt.h"
#include "transport/mcp-oauth-private.h"

static void login_probe (Flow *flow);
static void login_authorize (Flow *flow);
static void login_obtain (Flow *flow);

static char *
pkce_challenge (const char *verifier)
{
  guint8 digest[32];
  gsize length = sizeof digest;
  g_autoptr(GChecksum) checksum = g_checksum_new (G_CHECKSUM_SHA256);

  g_checksum_update (checksum, (const guchar *) verifier, strlen (verifier));
  g_checksum_get_digest (checksum, digest, &length);
  return mcp_jwt_base64url (digest, length);
}

static void
set_json_body (SoupMessage *msg,
               char        *text)
{
  gsize length = strlen (text);
  g_autoptr(GBytes) bytes = g_bytes_new_take (text, length);

  soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
}

static GHashTable *
bearer_challenge (SoupMessage *msg)
{
  return mcp_oauth_parse_bearer_challenge (soup_message_headers_get_one (soup_message_get_response_headers (msg),
                                                               "WWW-Authenticate"));
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

/* The scopes of @had and of @more (space-separated, either may be NULL),
 * each once, in that order: a step-up asks for what was granted and for
 * what the challenge adds, not for the challenge alone (SEP-2350). */
static char *
scope_union (const char *had,
             const char *more)
{
  g_autofree char *both = g_strjoin (" ", had != NULL ? had : "", more != NULL ? more : "", NULL);
  g_auto(GStrv) words = g_strsplit (both, " ", -1);
  g_autoptr(GPtrArray) kept = g_ptr_array_new ();

  for (char **word = words; *word != NULL; word++)
    if (**word != '\0' && !g_ptr_array_find_with_equal_func (kept, *word, g_str_equal, NULL))
      g_ptr_array_add (kept, *word);
  if (kept->len == 0)
    return NULL;
  g_ptr_array_add (kept, NULL);
  return g_strjoinv (" ", (char **) kept->pdata);
}

static void
take_challenge (Flow       *flow,
                GHashTable *challenge)
{
  const char *scope = challenge ? g_hash_table_lookup (challenge, "scope") : NULL;
  const char *metadata = challenge ? g_hash_table_lookup (challenge, "resource_metadata") : NULL;

  if (scope != NULL)
    mcp_oauth_replace_str (&flow->challenge_scope, scope);
  if (metadata != NULL)
    mcp_oauth_replace_str (&flow->metadata_url, metadata);
}

static void
on_login_saved (Flow   *flow,
                GError *error)
{
  if (error != NULL)
    mcp_oauth_flow_fail (flow, g_error_copy (error));
  else
    mcp_oauth_flow_succeed (flow);
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
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_HTTP,
                                    _("Server “%s” cannot be reached at %s: %s"),
                                    flow->config->name, flow->display_url, error->message));
      return;
    }
  status = soup_message_get_status (msg);
  challenge = bearer_challenge (msg);
  if (status == SOUP_STATUS_FORBIDDEN && challenge != NULL &&
      g_strcmp0 (g_hash_table_lookup (challenge, "error"), "insufficient_scope") == 0)
    {
      if (flow->step_ups >= MCP_OAUTH_STEP_UP_MAX)
        {
          mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                        _("Server “%s” still wants more scope after %u step-ups; "
                                          "set \"oauth\": {\"scopes\"} for it in %s"),
                                        flow->config->name, flow->step_ups,
                                        flow->config->source ? flow->config->source : _("the config")));
          return;
        }
      flow->step_ups++;
      take_challenge (flow, challenge);
      {
        g_autofree char *wider = scope_union (flow->scope, flow->challenge_scope);

        mcp_oauth_replace_str (&flow->scope, wider);
      }
      login_obtain (flow);
      return;
    }
  if (status == SOUP_STATUS_UNAUTHORIZED || status == SOUP_STATUS_FORBIDDEN)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                    _("Server “%s” refused the token it just issued (%u %s)"),
                                    flow->config->name, status,
                                    soup_message_get_reason_phrase (msg)));
      return;
    }
  /* Met: the next login starts from the server's 401 again. */
  json_object_del (flow->record, "step_up_challenge");
  mcp_oauth_flow_run_job (flow, mcp_oauth_job_save, on_login_saved);
}

static void
login_verify (Flow *flow)
{
  SoupMessage *msg = initialize_request (flow, mcp_oauth_record_string (flow->record, "access_token"));

  mcp_oauth_flow_send (flow, msg, on_verified);
}

static void
on_tokens (Flow        *flow,
           SoupMessage *msg,
           GBytes      *body,
           GError      *error)
{
  GError *refused = NULL;

  if (!mcp_oauth_take_tokens (flow, msg, body, error, &refused))
    {
      mcp_oauth_flow_fail (flow, refused);
      return;
    }
  flow->outcome = MCP_OAUTH_LOGIN_AUTHORIZED;
  login_verify (flow);
}

/* The token: by the entry's grant without a user, else through the
 * browser. */
static void
login_obtain (Flow *flow)
{
  if (mcp_oauth_grant_is_unattended (flow->config))
    mcp_oauth_flow_grant (flow, on_tokens);
  else
    login_authorize (flow);
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
      mcp_oauth_flow_fail (flow, error);
      return;
    }
  form = g_string_new (NULL);
  mcp_oauth_form_add (form, "grant_type", "authorization_code");
  mcp_oauth_form_add (form, "code", code);
  mcp_oauth_form_add (form, "redirect_uri", mcp_oauth_redirect_get_uri (flow->redirect));
  mcp_oauth_form_add (form, "code_verifier", flow->verifier);
  mcp_oauth_form_add (form, "resource", flow->resource);
  msg = mcp_oauth_token_request (flow, form);
  if (msg == NULL)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                    _("Server “%s”: the token endpoint is not a URL"),
                                    flow->config->name));
      return;
    }
  mcp_oauth_flow_send (flow, msg, on_tokens);
}

static void
login_authorize (Flow *flow)
{
  const char *endpoint = mcp_oauth_record_string (flow->as, "authorization_endpoint");
  g_autofree char *challenge = NULL;
  g_autofree char *uri = NULL;
  GString *query = g_string_new (NULL);
  g_autoptr(GError) error = NULL;

  g_free (flow->verifier);
  flow->verifier = mcp_oauth_random_token (32);
  g_free (flow->state);
  flow->state = mcp_oauth_random_token (16);
  challenge = pkce_challenge (flow->verifier);
  mcp_oauth_form_add (query, "response_type", "code");
  mcp_oauth_form_add (query, "client_id", mcp_oauth_record_string (flow->record, "client_id"));
  mcp_oauth_form_add (query, "redirect_uri", mcp_oauth_redirect_get_uri (flow->redirect));
  mcp_oauth_form_add (query, "state", flow->state);
  mcp_oauth_form_add (query, "code_challenge", challenge);
  mcp_oauth_form_add (query, "code_challenge_method", "S256");
  mcp_oauth_form_add (query, "resource", flow->resource);
  mcp_oauth_form_add (query, "scope", flow->scope);
  uri = g_strconcat (endpoint, strchr (endpoint, '?') ? "&" : "?", query->str, NULL);
  g_string_free (query, TRUE);
  if (!mcp_oauth_flow_check_url (flow, uri, &error))
    {
      mcp_oauth_flow_fail (flow, g_steal_pointer (&error));
      return;
    }
  mcp_oauth_redirect_wait_async (flow->redirect, flow->config->name, flow->state,
                                 mcp_oauth_record_string (flow->as, "issuer") ?: flow->issuer,
                                 json_is_true (json_object_get (flow->as,
                                                                "authorization_response_iss_parameter_supported")),
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
  mcp_oauth_record_set (flow->record, "client_id", id);
  mcp_oauth_record_set (flow->record, "client_secret", secret);
  mcp_oauth_record_set (flow->record, "auth_method", method ? method : choose_auth_method (flow->as, secret));
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
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                    _("Server “%s”: client registration failed: %s"),
                                    flow->config->name, error->message));
      return;
    }
  status = soup_message_get_status (msg);
  reply = mcp_oauth_body_json (body);
  if ((status != SOUP_STATUS_OK && status != SOUP_STATUS_CREATED) ||
      mcp_oauth_record_string (reply, "client_id") == NULL)
    {
      const char *description = mcp_oauth_record_string (reply, "error_description");

      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                    _("Server “%s”: the authorization server refused to register "
                                      "mcp-pool (%u %s); set \"oauth\": {\"clientId\"} for it in %s"),
                                    flow->config->name, status,
                                    description ? description : soup_message_get_reason_phrase (msg),
                                    flow->config->source ? flow->config->source : _("the config")));
      return;
    }
  set_client (flow, mcp_oauth_record_string (reply, "client_id"), mcp_oauth_record_string (reply, "client_secret"),
              mcp_oauth_record_string (reply, "token_endpoint_auth_method"));
  login_authorize (flow);
}

static void
login_register (Flow *flow)
{
  const char *endpoint = mcp_oauth_record_string (flow->as, "registration_endpoint");
  g_autoptr(json_t) request = NULL;
  SoupMessage *msg;

  if (endpoint == NULL || (msg = soup_message_new ("POST", endpoint)) == NULL)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_UNSUPPORTED,
                                    _("Server “%s”: its authorization server %s offers no client "
                                      "registration; set \"oauth\": {\"clientId\"} for it in %s"),
                                    flow->config->name, flow->issuer,
                                    flow->config->source ? flow->config->source : _("the config")));
      return;
    }
  /* A program on the user's machine with a loopback redirect: a native
   * application (OpenID Connect Dynamic Client Registration, SEP-837). */
  request = json_pack ("{s:s, s:s, s:[s], s:[s,s], s:[s], s:s}",
                       "client_name", "mcp-pool", "application_type", "native",
                       "redirect_uris", mcp_oauth_redirect_get_uri (flow->redirect),
                       "grant_types", "authorization_code", "refresh_token",
                       "response_types", "code",
                       "token_endpoint_auth_method", "none");
  set_json_body (msg, json_dumps (request, JSON_COMPACT));
  mcp_oauth_flow_send (flow, msg, on_registered);
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

  /* A grant without a user has its client in the entry, and no redirect. */
  if (mcp_oauth_grant_is_unattended (flow->config))
    {
      mcp_oauth_record_set (flow->record, "token_endpoint", mcp_oauth_record_string (flow->as, "token_endpoint"));
      mcp_oauth_record_set (flow->record, "issuer", flow->issuer);
      set_client (flow, id, flow->config->oauth_client_secret,
                  flow->config->oauth_private_key_file != NULL ? "private_key_jwt" : NULL);
      login_obtain (flow);
      return;
    }
  flow->redirect = mcp_oauth_redirect_new (&error);
  if (flow->redirect == NULL)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_REDIRECT,
                                    _("Server “%s”: cannot listen for the browser on 127.0.0.1: %s"),
                                    flow->config->name, error->message));
      return;
    }
  mcp_oauth_record_set (flow->record, "token_endpoint", mcp_oauth_record_string (flow->as, "token_endpoint"));
  if (id != NULL && !g_str_has_prefix (id, "https://"))
    set_client (flow, id, flow->config->oauth_client_secret, NULL);
  else if (id != NULL && cimd_supported)
    set_client (flow, id, NULL, "none");
  else if (mcp_oauth_record_string (flow->record, "client_id") != NULL &&
           g_strcmp0 (mcp_oauth_record_string (flow->record, "issuer"), flow->issuer) == 0)
    g_debug ("%s: the registration of the last login is used again", flow->config->name);
  else
    {
      mcp_oauth_record_set (flow->record, "issuer", flow->issuer);
      login_register (flow);
      return;
    }
  mcp_oauth_record_set (flow->record, "issuer", flow->issuer);
  login_authorize (flow);
}

/* Why the authorization server's metadata @document rules out PKCE with
 * S256, or NULL.  The MCP authorization spec (2025-11-25) has the client
 * refuse metadata that lists no code_challenge_methods_supported, as much
 * as a list without S256; only the 2025-03-26 fallback, with no metadata
 * (@document NULL), has nothing that could say it, and is tried. */
static GError *
pkce_refusal (Flow   *flow,
              json_t *document)
{
  json_t *methods = json_object_get (document, "code_challenge_methods_supported");
  gsize i;
  json_t *method;

  if (document == NULL)
    return NULL;
  if (!json_is_array (methods))
    return g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_UNSUPPORTED,
                        _("Server “%s”: the metadata of its authorization server %s lists no "
                          "code_challenge_methods_supported, so PKCE with S256, which mcp-pool "
                          "requires, is not offered; it cannot be used until the server lists "
                          "\"S256\" there"),
                        flow->config->name, flow->issuer);
  json_array_foreach (methods, i, method)
    if (g_strcmp0 (json_string_value (method), "S256") == 0)
      return NULL;
  return g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_UNSUPPORTED,
                      _("Server “%s”: its authorization server %s does not support "
                        "PKCE with S256, which mcp-pool requires; it cannot be used"),
                      flow->config->name, flow->issuer);
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
  GError *refusal;
  gboolean unattended;

  if (document == NULL && flow->prm != NULL)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                    _("Server “%s”: its authorization server %s publishes no "
                                      "metadata (RFC 8414 or OpenID discovery)"),
                                    flow->config->name, flow->issuer));
      return;
    }
  /* Metadata that names another issuer than the one the resource
   * metadata named is not that server's (RFC 8414 §3.3).  Without
   * resource metadata (a 2025-03-26 server, its own authorization server)
   * there is no issuer to hold it to. */
  if (document != NULL && flow->prm != NULL && mcp_oauth_record_string (document, "issuer") != NULL &&
      g_strcmp0 (mcp_oauth_record_string (document, "issuer"), flow->issuer) != 0)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                    _("Server “%s”: the metadata of its authorization server %s names "
                                      "another issuer, “%s”, and is not used (RFC 8414)"),
                                    flow->config->name, flow->issuer,
                                    mcp_oauth_record_string (document, "issuer")));
      return;
    }
  /* PKCE and the authorization endpoint are the browser's. */
  unattended = mcp_oauth_grant_is_unattended (flow->config);
  refusal = unattended ? NULL : pkce_refusal (flow, document);
  if (refusal != NULL)
    {
      mcp_oauth_flow_fail (flow, refusal);
      return;
    }
  flow->as = document ? json_incref (document) : default_endpoints (flow->issuer);
  if ((!unattended && mcp_oauth_record_string (flow->as, "authorization_endpoint") == NULL) ||
      mcp_oauth_record_string (flow->as, "token_endpoint") == NULL)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
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
  g_autofree char *origin = mcp_oauth_split_url (issuer, &path);

  if (origin == NULL)
    return candidates;
  mcp_oauth_add_candidate (candidates, origin, "/.well-known/oauth-authorization-server", path);
  mcp_oauth_add_candidate (candidates, origin, "/.well-known/openid-configuration", path);
  if (*path)
    {
      g_autofree char *base = g_strconcat (origin, path, NULL);

      mcp_oauth_add_candidate (candidates, base, "/.well-known/openid-configuration", "");
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
  const char *resource = mcp_oauth_record_string (document, "resource");
  json_t *servers = json_object_get (document, "authorization_servers");
  g_autofree char *path = NULL;

  if (document == NULL || !json_is_string (json_array_get (servers, 0)))
    {
      g_debug ("%s: no resource metadata; the server is its own authorization server",
               flow->config->name);
      g_free (flow->issuer);
      flow->issuer = mcp_oauth_split_url (flow->config->url, &path);
    }
  else
    {
      /* RFC 9728 §3.3: metadata for another resource must not be used. */
      if (resource != NULL && !g_str_has_prefix (flow->resource, resource))
        {
          mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                        _("Server “%s”: its resource metadata is for %s, not for "
                                          "%s"), flow->config->name, resource, flow->resource));
          return;
        }
      if (resource != NULL)
        mcp_oauth_replace_str (&flow->resource, resource);
      flow->prm = json_incref (document);
      mcp_oauth_replace_str (&flow->issuer, json_string_value (json_array_get (servers, 0)));
    }
  mcp_oauth_record_set (flow->record, "resource", flow->resource);
  if (flow->config->oauth_scopes != NULL)
    mcp_oauth_replace_str (&flow->scope, flow->config->oauth_scopes);
  else if (flow->challenge_scope != NULL)
    {
      /* A challenge after an earlier login widens what that one got. */
      g_autofree char *wider = scope_union (mcp_oauth_record_string (flow->record, "scope"), flow->challenge_scope);

      mcp_oauth_replace_str (&flow->scope, wider);
    }
  else
    take_prm_scopes (flow);
  mcp_oauth_flow_fetch_first (flow, as_metadata_candidates (flow->issuer), on_as_metadata);
}

/* From resource_metadata= if the 401 named it, else the well-known paths
 * of RFC 9728: with the server's path, then at the root. */
static void
login_discover (Flow *flow)
{
  GPtrArray *candidates = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *path = NULL;
  g_autofree char *origin = mcp_oauth_split_url (flow->config->url, &path);

  if (flow->metadata_url != NULL)
    g_ptr_array_add (candidates, g_strdup (flow->metadata_url));
  if (origin != NULL && *path)
    mcp_oauth_add_candidate (candidates, origin, "/.well-known/oauth-protected-resource", path);
  if (origin != NULL)
    mcp_oauth_add_candidate (candidates, origin, "/.well-known/oauth-protected-resource", "");
  mcp_oauth_flow_fetch_first (flow, candidates, on_resource_metadata);
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
      mcp_oauth_flow_fail (flow, error->domain == MCP_OAUTH_ERROR ? g_error_copy (error)
                 : g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_HTTP,
                                _("Server “%s” cannot be reached at %s: %s"),
                                flow->config->name, flow->display_url, error->message));
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
          mcp_oauth_flow_succeed (flow);
        }
      else
        mcp_oauth_flow_fail (flow, mcp_oauth_http_error (flow, msg, _("the MCP endpoint")));
      return;
    }
  challenge = bearer_challenge (msg);
  take_challenge (flow, challenge);
  login_discover (flow);
}

static void
login_probe (Flow *flow)
{
  g_autoptr(GHashTable) challenge = mcp_oauth_parse_bearer_challenge (flow->challenge);
  SoupMessage *msg;

  /* The refusal that called for this login says what it wants already. */
  if (challenge != NULL)
    {
      take_challenge (flow, challenge);
      login_discover (flow);
      return;
    }
  msg = initialize_request (flow, NULL);

  if (msg == NULL)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                    _("Server “%s”: its address is not a URL; give an https:// URL"),
                                    flow->config->name));
      return;
    }
  mcp_oauth_flow_send (flow, msg, on_probed);
}

static void
on_login_refreshed (Flow        *flow,
                    SoupMessage *msg,
                    GBytes      *body,
                    GError      *error)
{
  g_autoptr(GError) refused = NULL;

  if (mcp_oauth_take_tokens (flow, msg, body, error, &refused))
    {
      flow->outcome = MCP_OAUTH_LOGIN_REFRESHED;
      mcp_oauth_flow_run_job (flow, mcp_oauth_job_save, on_login_saved);
      return;
    }
  g_debug ("%s: the refresh token was not taken (%s); logging in", flow->config->name,
           refused->message);
  json_object_del (flow->record, "refresh_token");
  json_object_del (flow->record, "access_token");
  login_probe (flow);
}

static gboolean
is_step_up (const char *header)
{
  g_autoptr(GHashTable) challenge = mcp_oauth_parse_bearer_challenge (header);

  return challenge != NULL && g_strcmp0 (g_hash_table_lookup (challenge, "error"), "insufficient_scope") == 0;
}

static void
on_login_loaded (Flow   *flow,
                 GError *error)
{
  if (error != NULL)
    {
      mcp_oauth_flow_fail (flow, g_error_copy (error));
      return;
    }
  if (flow->record == NULL)
    flow->record = json_object ();
  /* The refusal of another process, which kept it with the tokens. */
  if (flow->challenge == NULL)
    flow->challenge = g_strdup (mcp_oauth_record_string (flow->record, "step_up_challenge"));
  /* A refresh gives the same scope; a step-up needs a new authorization.
   * A grant without a user is made again instead: a refresh would need
   * the client's authentication all the same. */
  if (!mcp_oauth_grant_is_unattended (flow->config) &&
      mcp_oauth_record_string (flow->record, "refresh_token") != NULL &&
      mcp_oauth_record_string (flow->record, "token_endpoint") != NULL &&
      !is_step_up (flow->challenge))
    mcp_oauth_flow_refresh (flow, on_login_refreshed);
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

  g_return_if_fail (options != NULL &&
                    (options->open_uri != NULL || mcp_oauth_grant_is_unattended (config)));
  flow = mcp_oauth_flow_new (config, cancellable, callback, user_data, mcp_oauth_login_async);
  flow->options = *options;
  flow->options.challenge = NULL;
  flow->challenge = options->challenge != NULL ? g_strdup (options->challenge)
                                                : mcp_http_dup_challenge (config->url);
  mcp_oauth_login_start (flow);
  g_object_unref (flow->task);
}

void
mcp_oauth_login_start (Flow *flow)
{
  flow->resource = canonical_resource (flow->config->url);
  mcp_oauth_flow_run_job (flow, mcp_oauth_job_load, on_login_loaded);
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

typedef struct {
  gboolean              done;
  gboolean              ok;
  McpOAuthLoginOutcome  outcome;
  McpTokenStoreKind     store;
  GError               *error;
} WaitedLogin;

static void
on_waited_login (GObject      *source,
                 GAsyncResult *result,
                 gpointer      user_data)
{
  WaitedLogin *waited = user_data;

  waited->ok = mcp_oauth_login_finish (result, &waited->outcome, &waited->store, &waited->error);
  waited->done = TRUE;
}

gboolean
mcp_oauth_login (McpServerConfig            *config,
                 const McpOAuthLoginOptions *options,
                 McpOAuthLoginOutcome       *outcome,
                 McpTokenStoreKind          *store,
                 GError                    **error)
{
  g_autoptr(GMainContext) context = g_main_context_new ();
  WaitedLogin waited = { 0 };

  g_main_context_push_thread_default (context);
  mcp_oauth_login_async (config, options, NULL, on_waited_login, &waited);
  while (!waited.done)
    g_main_context_iteration (context, TRUE);
  g_main_context_pop_thread_default (context);
  if (!waited.ok)
    {
      g_propagate_error (error, waited.error);
      return FALSE;
    }
  if (outcome != NULL)
    *outcome = waited.outcome;
  if (store != NULL)
    *store = waited.store;
  return TRUE;
}
