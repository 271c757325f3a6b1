/* test-jwt.c — the client assertions of private_key_jwt (mcp-jwt.h):
 * keys of each kind made by GnuTLS here, each signature checked against
 * the public key as an authorization server would (the official
 * conformance suite checks ES256 with another implementation, jose), and
 * the refusals a user meets.
 */
#include "config.h"

#include <string.h>

#include <glib.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "common/mcp-jsonrpc.h"
#include "transport/mcp-jwt.h"

typedef struct {
  gnutls_pk_algorithm_t algorithm;
  unsigned int          bits;          /* or the curve, GNUTLS_CURVE_TO_BITS */
  const char           *alg;
  gnutls_sign_algorithm_t verify;
  guint                 coordinate;    /* ECDSA: bytes of r and of s */
} KeyCase;

static const KeyCase es256 = { GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP256R1), "ES256", GNUTLS_SIGN_ECDSA_SHA256, 32 };
static const KeyCase es384 = { GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP384R1), "ES384", GNUTLS_SIGN_ECDSA_SHA384, 48 };
static const KeyCase es512 = { GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS (GNUTLS_ECC_CURVE_SECP521R1), "ES512", GNUTLS_SIGN_ECDSA_SHA512, 66 };
static const KeyCase rs256 = { GNUTLS_PK_RSA, 2048, "RS256", GNUTLS_SIGN_RSA_SHA256, 0 };
static const KeyCase eddsa = { GNUTLS_PK_EDDSA_ED25519, 256, "EdDSA", GNUTLS_SIGN_EDDSA_ED25519, 0 };

/* A new key of @key_case as PKCS#8 PEM, and its public half. */
static char *
make_key (const KeyCase     *key_case,
          gnutls_pubkey_t   *public)
{
  gnutls_x509_privkey_t x509;
  gnutls_privkey_t key;
  gnutls_datum_t pem = { NULL, 0 };
  char *text;

  g_assert_cmpint (gnutls_x509_privkey_init (&x509), ==, 0);
  g_assert_cmpint (gnutls_x509_privkey_generate (x509, key_case->algorithm, key_case->bits, 0), ==, 0);
  g_assert_cmpint (gnutls_x509_privkey_export2_pkcs8 (x509, GNUTLS_X509_FMT_PEM, NULL,
                                                      GNUTLS_PKCS_PLAIN, &pem), ==, 0);
  g_assert_cmpint (gnutls_privkey_init (&key), ==, 0);
  g_assert_cmpint (gnutls_privkey_import_x509 (key, x509, 0), ==, 0);
  g_assert_cmpint (gnutls_pubkey_init (public), ==, 0);
  g_assert_cmpint (gnutls_pubkey_import_privkey (*public, key, 0, 0), ==, 0);
  text = g_strndup ((const char *) pem.data, pem.size);
  gnutls_free (pem.data);
  gnutls_privkey_deinit (key);
  gnutls_x509_privkey_deinit (x509);
  return text;
}

static guchar *
base64url_decode (const char *text,
                  gsize      *length)
{
  g_autoptr(GString) padded = g_string_new (text);

  g_strdelimit (padded->str, "-", '+');
  g_strdelimit (padded->str, "_", '/');
  while (padded->len % 4 != 0)
    g_string_append_c (padded, '=');
  return g_base64_decode (padded->str, length);
}

static json_t *
decode_part (const char *part)
{
  gsize length;
  g_autofree guchar *bytes = base64url_decode (part, &length);
  json_t *json = json_loadb ((const char *) bytes, length, 0, NULL);

  g_assert_nonnull (json);
  return json;
}

/* Every kind of key signs, as the key's algorithm, a token whose
 * signature its public key verifies over the first two parts; the
 * claims come back as they went in. */
static void
test_sign (gconstpointer data)
{
  const KeyCase *key_case = data;
  gnutls_pubkey_t public = NULL;
  g_autofree char *pem = make_key (key_case, &public);
  g_autoptr(json_t) claims = json_pack ("{s:s, s:s, s:s, s:I}", "iss", "client", "sub", "client",
                                        "aud", "https://as.example", "exp", (json_int_t) 2000000000);
  const char *alg = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *token = mcp_jwt_sign (pem, strlen (pem), claims, NULL, &alg, &error);
  g_auto(GStrv) parts = NULL;
  g_autoptr(json_t) header = NULL;
  g_autoptr(json_t) payload = NULL;
  g_autofree char *input = NULL;
  g_autofree guchar *signature = NULL;
  gnutls_datum_t signed_data, signature_datum;
  gnutls_datum_t der = { NULL, 0 };
  gsize length;

  g_assert_no_error (error);
  g_assert_cmpstr (alg, ==, key_case->alg);
  parts = g_strsplit (token, ".", -1);
  g_assert_cmpuint (g_strv_length (parts), ==, 3);
  g_assert_null (strpbrk (token, "+/="));
  header = decode_part (parts[0]);
  payload = decode_part (parts[1]);
  g_assert_cmpstr (json_string_value (json_object_get (header, "alg")), ==, key_case->alg);
  g_assert_cmpstr (json_string_value (json_object_get (header, "typ")), ==, "JWT");
  g_assert_true (json_equal (payload, claims));

  input = g_strconcat (parts[0], ".", parts[1], NULL);
  signed_data = (gnutls_datum_t) { (unsigned char *) input, (unsigned int) strlen (input) };
  signature = base64url_decode (parts[2], &length);
  signature_datum = (gnutls_datum_t) { signature, (unsigned int) length };
  if (key_case->coordinate != 0)
    {
      /* RFC 7518 §3.4: r and s, each of the curve's width, back to DER. */
      gnutls_datum_t r = { signature, key_case->coordinate };
      gnutls_datum_t s = { signature + key_case->coordinate, key_case->coordinate };

      g_assert_cmpuint (length, ==, 2 * key_case->coordinate);
      g_assert_cmpint (gnutls_encode_rs_value (&der, &r, &s), ==, 0);
      signature_datum = der;
    }
  g_assert_cmpint (gnutls_pubkey_verify_data2 (public, key_case->verify, 0, &signed_data,
                                               &signature_datum), >=, 0);
  /* A changed claim breaks it. */
  input[strlen (parts[0]) + 2] ^= 1;
  signed_data.data = (unsigned char *) input;
  g_assert_cmpint (gnutls_pubkey_verify_data2 (public, key_case->verify, 0, &signed_data,
                                               &signature_datum), <, 0);
  gnutls_free (der.data);
  gnutls_pubkey_deinit (public);
}

/* What the user is told: a file that is no key, and a key whose
 * algorithm the server does not take. */
static void
test_refusals (void)
{
  static const char not_a_key[] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  gnutls_pubkey_t public = NULL;
  g_autofree char *pem = make_key (&es256, &public);
  g_autoptr(json_t) claims = json_pack ("{s:s}", "iss", "client");
  g_autoptr(GError) error = NULL;
  char *token;

  token = mcp_jwt_sign (not_a_key, strlen (not_a_key), claims, NULL, NULL, &error);
  g_assert_null (token);
  g_assert_error (error, MCP_JWT_ERROR, MCP_JWT_ERROR_KEY);
  g_assert_nonnull (strstr (error->message, "PEM private key"));
  g_clear_error (&error);

  token = mcp_jwt_sign (pem, strlen (pem), claims, (const char * const []) { "RS256", "PS256", NULL },
                        NULL, &error);
  g_assert_null (token);
  g_assert_error (error, MCP_JWT_ERROR, MCP_JWT_ERROR_ALGORITHM);
  g_assert_nonnull (strstr (error->message, "ES256"));
  g_assert_nonnull (strstr (error->message, "RS256, PS256"));
  g_clear_error (&error);

  token = mcp_jwt_sign (pem, strlen (pem), claims, (const char * const []) { "ES256", NULL },
                        NULL, &error);
  g_assert_no_error (error);
  g_free (token);
  gnutls_pubkey_deinit (public);
}

int
main (int    argc,
      char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/jwt/sign/es256", &es256, test_sign);
  g_test_add_data_func ("/jwt/sign/es384", &es384, test_sign);
  g_test_add_data_func ("/jwt/sign/es512", &es512, test_sign);
  g_test_add_data_func ("/jwt/sign/rs256", &rs256, test_sign);
  g_test_add_data_func ("/jwt/sign/eddsa", &eddsa, test_sign);
  g_test_add_func ("/jwt/refusals", test_refusals);
  return g_test_run ();
}
