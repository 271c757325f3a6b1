/* mcp-jwt.h — signed JSON Web Tokens (RFC 7515, 7519) for the OAuth
 * client assertions the pool sends (private_key_jwt, RFC 7523): a PEM
 * private key of the user's signs a set of claims.
 *
 * The algorithm follows the key: ES256, ES384 or ES512 for an EC key on
 * P-256, P-384 or P-521, RS256 for RSA, EdDSA for Ed25519.  Any thread,
 * no I/O; the key is read from the caller's buffer and not kept.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

#define MCP_JWT_ERROR (mcp_jwt_error_quark ())
GQuark mcp_jwt_error_quark (void);

typedef enum {
  MCP_JWT_ERROR_KEY,        /* not a PEM private key, or one of a kind no algorithm fits */
  MCP_JWT_ERROR_ALGORITHM,  /* the key's algorithm is not among those the other side takes */
  MCP_JWT_ERROR_SIGN,       /* the signature could not be made */
} McpJwtError;

/* The compact serialization of @claims signed with the PEM private key
 * @pem (PKCS#8 or the key type's own format, unencrypted).  @accepted
 * (nullable, NULL-terminated) lists the "alg" values the verifier takes;
 * NULL takes any.  The header's "typ" is "JWT".  *@alg (nullable) is set
 * to the algorithm used, a static string. */
/* RFC 7515 §2: base64url without padding, as JWS and PKCE (RFC 7636)
 * write bytes. */
char *mcp_jwt_base64url (const guchar *data,
                         gsize         length);

char *mcp_jwt_sign (const char          *pem,
                    gsize                pem_length,
                    json_t              *claims,
                    const char * const  *accepted,
                    const char         **alg,
                    GError             **error);

G_END_DECLS
