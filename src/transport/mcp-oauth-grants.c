/* mcp-oauth-grants.c — tokens without a user at a browser, the two
 * official MCP authorization extensions:
 * - OAuth client credentials (io.modelcontextprotocol/oauth-client-credentials):
 *   grant_type=client_credentials, the client authenticated by its secret
 *   (as the authorization server's metadata says, basic or post) or by an
 *   assertion signed with its private key (private_key_jwt, RFC 7523 §2.2);
 * - enterprise-managed authorization (io.modelcontextprotocol/enterprise-managed-authorization):
 *   the user's ID token from the company's identity provider is exchanged
 *   there for an ID-JAG (RFC 8693 token exchange), which the MCP server's
 *   authorization server takes as a JWT bearer grant (RFC 7523 §2.1).
 *
 * Both run after discovery, as one step of the login Flow
 * (mcp-oauth-private.h).  The key and the ID token file are read, and the
 * assertion signed, on a worker; neither is kept in the record or shown
 * in a message.
 */
#include "config.h"

#include <string.h>

#include <glib/gi18n-lib.h>
#include <libsoup/soup.h>

#include "common/mcp-jsonrpc.h"
#include "transport/mcp-jwt.h"
#include "transport/mcp-oauth-private.h"

#define ASSERTION_LIFETIME_S 300
/* A key or an ID token is a few kilobytes; anything much longer is not one. */
#define CREDENTIAL_FILE_MAX (64 * 1024)

#define GRANT_CLIENT_CREDENTIALS "client_credentials"
#define GRANT_TOKEN_EXCHANGE     "urn:ietf:params:oauth:grant-type:token-exchange"
#define GRANT_JWT_BEARER         "urn:ietf:params:oauth:grant-type:jwt-bearer"
#define TOKEN_TYPE_ID_TOKEN      "urn:ietf:params:oauth:token-type:id_token"
#define TOKEN_TYPE_ID_JAG        "urn:ietf:params:oauth:token-type:id-jag"
#define ASSERTION_TYPE_JWT       "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

gboolean
mcp_oauth_grant_is_unattended (const McpServerConfig *config)
{
  return config->oauth_grant != MCP_OAUTH_GRANT_AUTHORIZATION_CODE;
}

/* The file @path of the entry's field @field, whole; a message that names
 * both when it cannot be read. */
static char *
read_credential_file (Flow        *flow,
                      const char  *path,
                      const char  *field,
                      gsize       *length,
                      GError     **error)
{
  g_autoptr(GError) local_error = NULL;
  char *contents = NULL;

  if (!g_file_get_contents (path, &contents, length, &local_error) || *length > CREDENTIAL_FILE_MAX)
    {
      g_set_error (error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_UNSUPPORTED,
                   _("Server “%s”: “%s” of its entry in %s cannot be used: %s"),
                   flow->config->name, field, flow->config->source ? flow->config->source : _("the config"),
                   local_error != NULL ? local_error->message : _("the file is too long to be one"));
      if (contents != NULL)
        memset (contents, 0, *length);
      g_free (contents);
      return NULL;
    }
  return contents;
}

/* The "alg" values the authorization server's metadata lists for
 * private_key_jwt, or NULL when it lists none. */
static GStrv
accepted_algorithms (Flow *flow)
{
  json_t *list = json_object_get (flow->as, "token_endpoint_auth_signing_alg_values_supported");
  g_autoptr(GStrvBuilder) builder = NULL;
  gsize i;
  json_t *alg;

  if (!json_is_array (list) || json_array_size (list) == 0)
    return NULL;
  builder = g_strv_builder_new ();
  json_array_foreach (list, i, alg)
    if (json_is_string (alg))
      g_strv_builder_add (builder, json_string_value (alg));
  return g_strv_builder_end (builder);
}

/* RFC 7523 §3: issued by the client about itself, for the authorization
 * server (its issuer identifier, which RFC 7523bis makes the audience),
 * for a few minutes, once. */
static gboolean
sign_client_assertion (Flow    *flow,
                       GError **error)
{
  const char *client_id = flow->config->oauth_client_id;
  const char *audience = mcp_oauth_record_string (flow->as, "issuer") ?: flow->issuer;
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  g_autofree char *jti = mcp_oauth_random_token (16);
  g_autoptr(json_t) claims = json_pack ("{s:s, s:s, s:s, s:I, s:I, s:s}", "iss", client_id,
                                        "sub", client_id, "aud", audience, "iat", (json_int_t) now,
                                        "exp", (json_int_t) (now + ASSERTION_LIFETIME_S), "jti", jti);
  g_auto(GStrv) accepted = accepted_algorithms (flow);
  g_autoptr(GError) local_error = NULL;
  gsize length = 0;
  char *pem = read_credential_file (flow, flow->config->oauth_private_key_file,
                                    "oauth.privateKeyFile", &length, error);

  if (pem == NULL)
    return FALSE;
  g_free (flow->client_assertion);
  flow->client_assertion = mcp_jwt_sign (pem, length, claims, (const char * const *) accepted,
                                         NULL, &local_error);
  memset (pem, 0, length);
  g_free (pem);
  if (flow->client_assertion == NULL)
    {
      g_set_error (error, MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_UNSUPPORTED,
                   _("Server “%s”: the key in “oauth.privateKeyFile” (%s) of its entry in %s cannot "
                     "sign the client's assertion: %s"),
                   flow->config->name, flow->config->oauth_private_key_file,
                   flow->config->source ? flow->config->source : _("the config"), local_error->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
read_subject_token (Flow    *flow,
                    GError **error)
{
  gsize length = 0;
  char *token;

  if (flow->config->oauth_id_token != NULL)
    {
      mcp_oauth_replace_str (&flow->subject_token, flow->config->oauth_id_token);
      return TRUE;
    }
  token = read_credential_file (flow, flow->config->oauth_id_token_file, "oauth.idp.idTokenFile",
                                &length, error);
  if (token == NULL)
    return FALSE;
  g_free (flow->subject_token);
  flow->subject_token = g_strdup (g_strstrip (token));
  memset (token, 0, length);
  g_free (token);
  return TRUE;
}

/* On a worker: what the requests need from files. */
static gboolean
job_prepare (Flow    *flow,
             GError **error)
{
  if (flow->config->oauth_private_key_file != NULL && !sign_client_assertion (flow, error))
    return FALSE;
  return flow->config->oauth_grant != MCP_OAUTH_GRANT_ENTERPRISE || read_subject_token (flow, error);
}

static void
fail_no_endpoint (Flow       *flow,
                  const char *which)
{
  mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_DISCOVERY,
                                          _("Server “%s”: %s is not a URL"), flow->config->name, which));
}

/* The grant's request at the MCP server's authorization server, with the
 * client's authentication: its assertion, else as the record says. */
static void
send_grant (Flow       *flow,
            const char *grant_type,
            const char *assertion)
{
  GString *form = g_string_new (NULL);
  SoupMessage *msg;

  mcp_oauth_form_add (form, "grant_type", grant_type);
  mcp_oauth_form_add (form, "assertion", assertion);
  mcp_oauth_form_add (form, "resource", flow->resource);
  mcp_oauth_form_add (form, "scope", flow->scope);
  if (flow->client_assertion != NULL)
    {
      mcp_oauth_form_add (form, "client_assertion_type", ASSERTION_TYPE_JWT);
      mcp_oauth_form_add (form, "client_assertion", flow->client_assertion);
    }
  msg = mcp_oauth_token_request (flow, form);
  if (msg == NULL)
    {
      fail_no_endpoint (flow, _("the token endpoint"));
      return;
    }
  mcp_oauth_flow_send (flow, msg, flow->granted);
}

/* The identity provider's answer: the ID-JAG, to present as the grant. */
static void
on_exchanged (Flow        *flow,
              SoupMessage *msg,
              GBytes      *body,
              GError      *error)
{
  g_autoptr(json_t) reply = NULL;
  const char *jag;

  if (error != NULL)
    {
      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                              _("Server “%s”: the identity provider cannot be reached: %s"),
                                              flow->config->name, error->message));
      return;
    }
  reply = mcp_oauth_body_json (body);
  jag = mcp_oauth_record_string (reply, "access_token");
  if (soup_message_get_status (msg) != SOUP_STATUS_OK || jag == NULL ||
      g_strcmp0 (mcp_oauth_record_string (reply, "issued_token_type"), TOKEN_TYPE_ID_JAG) != 0)
    {
      const char *code = mcp_oauth_record_string (reply, "error");
      const char *description = mcp_oauth_record_string (reply, "error_description");

      mcp_oauth_flow_fail (flow, g_error_new (MCP_OAUTH_ERROR, MCP_OAUTH_ERROR_TOKEN,
                                              _("Server “%s”: the identity provider %s gave no ID-JAG "
                                                "for it (%u %s%s%s); is the ID token of “oauth.idp” "
                                                "current, and is the server allowed for the user?"),
                                              flow->config->name, flow->config->oauth_idp_token_endpoint,
                                              soup_message_get_status (msg),
                                              code ? code : soup_message_get_reason_phrase (msg),
                                              description ? ": " : "", description ? description : ""));
      return;
    }
  send_grant (flow, GRANT_JWT_BEARER, jag);
}

/* RFC 8693 at the identity provider: the user's ID token for an ID-JAG
 * whose audience is the authorization server, for this resource. */
static void
exchange_id_token (Flow *flow)
{
  const McpServerConfig *config = flow->config;
  GString *form = g_string_new (NULL);
  SoupMessage *msg;

  mcp_oauth_form_add (form, "grant_type", GRANT_TOKEN_EXCHANGE);
  mcp_oauth_form_add (form, "requested_token_type", TOKEN_TYPE_ID_JAG);
  mcp_oauth_form_add (form, "audience", mcp_oauth_record_string (flow->as, "issuer") ?: flow->issuer);
  mcp_oauth_form_add (form, "resource", flow->resource);
  mcp_oauth_form_add (form, "scope", flow->scope);
  mcp_oauth_form_add (form, "subject_token", flow->subject_token);
  mcp_oauth_form_add (form, "subject_token_type", TOKEN_TYPE_ID_TOKEN);
  if (config->oauth_idp_client_secret == NULL)
    mcp_oauth_form_add (form, "client_id", config->oauth_idp_client_id);
  msg = soup_message_new_from_encoded_form ("POST", config->oauth_idp_token_endpoint,
                                            g_string_free (form, FALSE));
  if (msg == NULL)
    {
      fail_no_endpoint (flow, "“oauth.idp.tokenEndpoint”");
      return;
    }
  if (config->oauth_idp_client_secret != NULL)
    mcp_oauth_set_basic_auth (msg, config->oauth_idp_client_id, config->oauth_idp_client_secret);
  mcp_oauth_flow_send (flow, msg, on_exchanged);
}

static void
on_prepared (Flow   *flow,
             GError *error)
{
  if (error != NULL)
    mcp_oauth_flow_fail (flow, g_error_copy (error));
  else if (flow->config->oauth_grant == MCP_OAUTH_GRANT_ENTERPRISE)
    exchange_id_token (flow);
  else
    send_grant (flow, GRANT_CLIENT_CREDENTIALS, NULL);
}

void
mcp_oauth_flow_grant (Flow     *flow,
                      FlowReply reply)
{
  flow->granted = reply;
  mcp_oauth_flow_run_job (flow, job_prepare, on_prepared);
}
