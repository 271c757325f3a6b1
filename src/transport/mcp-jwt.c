/* mcp-jwt.c — JWS compact signatures with a PEM private key, through
 * GnuTLS (see mcp-jwt.h).
 */
#include "config.h"

#include "transport/mcp-jwt.h"

#include <string.h>

#include <glib/gi18n-lib.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "common/mcp-jsonrpc.h"

G_DEFINE_QUARK (mcp-jwt-error-quark, mcp_jwt_error)

/* How one "alg" is made: the signature algorithm, and for ECDSA the
 * length of each of r and s in the JWS form (RFC 7518 §3.4). */
typedef struct {
  const char             *alg;
  gnutls_sign_algorithm_t sign;
  guint                   coordinate;
} Method;

typedef struct gnutls_privkey_st PrivateKey;
typedef struct gnutls_pubkey_st PublicKey;
G_DEFINE_AUTOPTR_CLEANUP_FUNC (PrivateKey, gnutls_privkey_deinit)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (PublicKey, gnutls_pubkey_deinit)

static gboolean
method_of_curve (gnutls_privkey_t  key,
                 Method           *method)
{
  g_autoptr(PublicKey) public = NULL;
  gnutls_ecc_curve_t curve = GNUTLS_ECC_CURVE_INVALID;
  gnutls_datum_t x = { NULL, 0 }, y = { NULL, 0 };

  if (gnutls_pubkey_init (&public) < 0 || gnutls_pubkey_import_privkey (public, key, 0, 0) < 0 ||
      gnutls_pubkey_export_ecc_raw (public, &curve, &x, &y) < 0)
    return FALSE;
  gnutls_free (x.data);
  gnutls_free (y.data);
  switch (curve)
    {
    case GNUTLS_ECC_CURVE_SECP256R1:
      *method = (Method) { "ES256", GNUTLS_SIGN_ECDSA_SHA256, 32 };
      return TRUE;
    case GNUTLS_ECC_CURVE_SECP384R1:
      *method = (Method) { "ES384", GNUTLS_SIGN_ECDSA_SHA384, 48 };
      return TRUE;
    case GNUTLS_ECC_CURVE_SECP521R1:
      *method = (Method) { "ES512", GNUTLS_SIGN_ECDSA_SHA512, 66 };
      return TRUE;
    default:
      return FALSE;
    }
}

static gboolean
method_of_key (gnutls_privkey_t  key,
               Method           *method)
{
  switch (gnutls_privkey_get_pk_algorithm (key, NULL))
    {
    case GNUTLS_PK_RSA:
      *method = (Method) { "RS256", GNUTLS_SIGN_RSA_SHA256, 0 };
      return TRUE;
    case GNUTLS_PK_ECDSA:
      return method_of_curve (key, method);
    case GNUTLS_PK_EDDSA_ED25519:
      *method = (Method) { "EdDSA", GNUTLS_SIGN_EDDSA_ED25519, 0 };
      return TRUE;
    default:
      return FALSE;
    }
}

char *
mcp_jwt_base64url (const guchar *data,
                   gsize         length)
{
  char *text = g_base64_encode (data, length);

  g_strdelimit (text, "+", '-');
  g_strdelimit (text, "/", '_');
  text[strcspn (text, "=")] = '\0';
  return text;
}

/* @value, a big-endian integer, as exactly @width bytes into @out. */
static gboolean
put_fixed (const gnutls_datum_t *value,
           guint                 width,
           guchar               *out)
{
  const guchar *p = value->data;
  gsize length = value->size;

  while (length > 0 && *p == 0)
    {
      p++;
      length--;
    }
  if (length > width)
    return FALSE;
  memset (out, 0, width - length);
  memcpy (out + width - length, p, length);
  return TRUE;
}

/* An ECDSA signature comes as DER; JWS wants r and s side by side. */
static char *
encode_signature (const Method         *method,
                  const gnutls_datum_t *signature)
{
  gnutls_datum_t r = { NULL, 0 }, s = { NULL, 0 };
  g_autofree guchar *pair = NULL;
  gboolean fits;

  if (method->coordinate == 0)
    return mcp_jwt_base64url (signature->data, signature->size);
  if (gnutls_decode_rs_value (signature, &r, &s) < 0)
    return NULL;
  pair = g_malloc (2 * method->coordinate);
  fits = put_fixed (&r, method->coordinate, pair) &&
         put_fixed (&s, method->coordinate, pair + method->coordinate);
  gnutls_free (r.data);
  gnutls_free (s.data);
  return fits ? mcp_jwt_base64url (pair, 2 * method->coordinate) : NULL;
}

static gboolean
is_accepted (const char         *alg,
             const char * const *accepted)
{
  return accepted == NULL || g_strv_contains (accepted, alg);
}

char *
mcp_jwt_sign (const char          *pem,
              gsize                pem_length,
              json_t              *claims,
              const char * const  *accepted,
              const char         **alg,
              GError             **error)
{
  g_autoptr(PrivateKey) key = NULL;
  gnutls_datum_t datum = { (unsigned char *) pem, (unsigned int) pem_length };
  gnutls_datum_t signature = { NULL, 0 };
  Method method;
  g_autoptr(json_t) header = NULL;
  g_autofree char *header_text = NULL;
  g_autofree char *claims_text = NULL;
  g_autofree char *header_part = NULL;
  g_autofree char *claims_part = NULL;
  g_autofree char *input = NULL;
  g_autofree char *signature_part = NULL;
  gnutls_datum_t signed_data;
  int status = GNUTLS_E_MEMORY_ERROR;

  if (gnutls_privkey_init (&key) < 0 ||
      (status = gnutls_privkey_import_x509_raw (key, &datum, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0)
    {
      g_set_error (error, MCP_JWT_ERROR, MCP_JWT_ERROR_KEY,
                   _("it is not an unencrypted PEM private key (%s)"),
                   gnutls_strerror (status));
      return NULL;
    }
  if (!method_of_key (key, &method))
    {
      g_set_error (error, MCP_JWT_ERROR, MCP_JWT_ERROR_KEY,
                   _("it is a key of a kind mcp-pool cannot sign with; use an EC key on P-256, "
                     "P-384 or P-521, an RSA key or an Ed25519 key"));
      return NULL;
    }
  if (!is_accepted (method.alg, accepted))
    {
      g_autofree char *listed = g_strjoinv (", ", (char **) accepted);

      g_set_error (error, MCP_JWT_ERROR, MCP_JWT_ERROR_ALGORITHM,
                   _("it signs with %s, and the authorization server takes only %s"),
                   method.alg, listed);
      return NULL;
    }

  header = json_pack ("{s:s, s:s}", "alg", method.alg, "typ", "JWT");
  header_text = json_dumps (header, JSON_COMPACT);
  claims_text = json_dumps (claims, JSON_COMPACT);
  header_part = mcp_jwt_base64url ((const guchar *) header_text, strlen (header_text));
  claims_part = mcp_jwt_base64url ((const guchar *) claims_text, strlen (claims_text));
  input = g_strconcat (header_part, ".", claims_part, NULL);
  signed_data = (gnutls_datum_t) { (unsigned char *) input, (unsigned int) strlen (input) };
  status = gnutls_privkey_sign_data2 (key, method.sign, 0, &signed_data, &signature);
  if (status < 0)
    {
      g_set_error (error, MCP_JWT_ERROR, MCP_JWT_ERROR_SIGN, _("signing failed (%s)"),
                   gnutls_strerror (status));
      return NULL;
    }
  signature_part = encode_signature (&method, &signature);
  gnutls_free (signature.data);
  if (signature_part == NULL)
    {
      g_set_error (error, MCP_JWT_ERROR, MCP_JWT_ERROR_SIGN,
                   _("signing failed (the signature has an unexpected form)"));
      return NULL;
    }
  if (alg != NULL)
    *alg = method.alg;
  return g_strconcat (input, ".", signature_part, NULL);
}
