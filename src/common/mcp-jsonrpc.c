/* mcp-jsonrpc.c — JSON-RPC 2.0 messages on Jansson: classify, build, write.
 *
 * MCP's stdio transport carries one compact JSON object per line.  This file
 * knows the shape of messages and how to put one on a pipe; it owns no state.
 */
#include "config.h"

#include "common/mcp-jsonrpc.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-jsonrpc-error-quark, mcp_jsonrpc_error)

/* Ids are strings or integers; 0 is as valid as any other. */
gboolean
mcp_jsonrpc_id_is_valid (json_t *id)
{
  return id != NULL && (json_is_integer (id) || json_is_string (id));
}

/* The decimal digits of @value, written backwards from @end by hand:
 * every warm call writes and keys its id more than once, and printf was a
 * tenth of serve's instructions on such a call.  Where they start. */
#define INTEGER_DIGITS_MAX 20

static char *
write_integer (json_int_t  value,
               char       *end)
{
  char *digit = end;
  guint64 magnitude = value < 0 ? -(guint64) value : (guint64) value;

  do
    *--digit = (char) ('0' + magnitude % 10);
  while ((magnitude /= 10) > 0);
  if (value < 0)
    *--digit = '-';
  return digit;
}

/* The key of an integer id, "i:" and its digits. */
char *
mcp_jsonrpc_integer_id_key (json_int_t id)
{
  char text[2 + INTEGER_DIGITS_MAX];
  char *start = write_integer (id, text + sizeof text) - 2;

  start[0] = 'i';
  start[1] = ':';
  return g_strndup (start, text + sizeof text - start);
}

/* A hashable key for an id that keeps 5 and "5" apart.  A string id is
 * keyed by its JSON text, so that ids that differ only after a NUL stay
 * apart too. */
char *
mcp_jsonrpc_id_key (json_t *id)
{
  g_autofree char *text = NULL;

  if (json_is_integer (id))
    return mcp_jsonrpc_integer_id_key (json_integer_value (id));
  if (!json_is_string (id) || (text = json_dumps (id, JSON_ENCODE_ANY)) == NULL)
    return NULL;
  return g_strconcat ("s:", text, NULL);
}

/* Classifies by shape, as the specification says: method + id is a request,
 * method alone a notification, result or error with an id a response. */
McpMessageKind
mcp_jsonrpc_classify (json_t *message)
{
  json_t *method, *id;

  if (!json_is_object (message))
    return MCP_MESSAGE_INVALID;

  method = json_object_get (message, "method");
  id = json_object_get (message, "id");

  if (method != NULL)
    {
      if (!json_is_string (method))
        return MCP_MESSAGE_INVALID;
      if (id == NULL)
        return MCP_MESSAGE_NOTIFICATION;
      return mcp_jsonrpc_id_is_valid (id) ? MCP_MESSAGE_REQUEST : MCP_MESSAGE_INVALID;
    }

  if ((json_object_get (message, "result") != NULL ||
       json_is_object (json_object_get (message, "error"))) &&
      (mcp_jsonrpc_id_is_valid (id) || json_is_null (id)))
    return MCP_MESSAGE_RESPONSE;

  return MCP_MESSAGE_INVALID;
}

/* Parses one line.  Anything but a JSON object is an error: bare values and
 * batches (arrays) are not messages this project accepts.  "\u0000" is
 * valid JSON, so strings may hold NUL (Jansson keeps their length); only a
 * member name cannot, which is MCP_JSONRPC_ERROR_UNSUPPORTED. */
json_t *
mcp_jsonrpc_parse (const char  *line,
                   gsize        length,
                   GError     **error)
{
  json_error_t json_error;
  g_autoptr(json_t) value = NULL;

  value = json_loadb (line, length, JSON_DECODE_ANY | JSON_ALLOW_NUL, &json_error);
  if (value == NULL && json_error_code (&json_error) == json_error_null_byte_in_key)
    {
      g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_UNSUPPORTED,
                   _("A member name at column %d contains \\u0000, which mcp-pool cannot handle; "
                     "send names without NUL characters"),
                   json_error.column);
      return NULL;
    }
  if (value == NULL)
    {
      g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_PARSE,
                   _("Not valid JSON at column %d: %s"),
                   json_error.column, json_error.text);
      return NULL;
    }
  if (!json_is_object (value))
    {
      g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_PARSE,
                   json_is_array (value)
                   ? _("JSON-RPC batches are not supported; send one object per line")
                   : _("A JSON-RPC message must be a JSON object"));
      return NULL;
    }
  return g_steal_pointer (&value);
}

/* A line that mcp_jsonrpc_parse() refused as MCP_JSONRPC_ERROR_UNSUPPORTED,
 * read again with every "\u0000" turned into U+FFFD.  Backslashes only
 * occur inside strings in valid JSON, so skipping one escape at a time
 * finds every one.  NULL if the result is not a JSON object. */
json_t *
mcp_jsonrpc_parse_salvaged (const char *line,
                            gsize       length)
{
  g_autofree char *copy = g_memdup2 (line, length);
  g_autoptr(json_t) value = NULL;

  for (gsize i = 0; i + 1 < length; i++)
    {
      if (copy[i] != '\\')
        continue;
      if (copy[i + 1] == 'u' && i + 6 <= length && memcmp (copy + i + 2, "0000", 4) == 0)
        memcpy (copy + i + 2, "fffd", 4);
      i++;
    }
  value = json_loadb (copy, length, 0, NULL);
  return json_is_object (value) ? g_steal_pointer (&value) : NULL;
}

static json_t *
message_new (void)
{
  return json_pack ("{s:s}", "jsonrpc", "2.0");
}

/* @params is borrowed and may be NULL. */
json_t *
mcp_jsonrpc_request_new (json_int_t  id,
                         const char *method,
                         json_t     *params)
{
  json_t *message = message_new ();

  json_object_set_new (message, "id", json_integer (id));
  json_object_set_new (message, "method", json_string (method));
  if (params != NULL)
    json_object_set (message, "params", params);
  return message;
}

/* @params is borrowed and may be NULL. */
json_t *
mcp_jsonrpc_notification_new (const char *method,
                              json_t     *params)
{
  json_t *message = message_new ();

  json_object_set_new (message, "method", json_string (method));
  if (params != NULL)
    json_object_set (message, "params", params);
  return message;
}

/* @id is borrowed; @result is stolen. */
json_t *
mcp_jsonrpc_result_new (json_t *id,
                        json_t *result)
{
  json_t *message = message_new ();

  json_object_set (message, "id", id);
  json_object_set_new (message, "result", result != NULL ? result : json_object ());
  return message;
}

/* @id is borrowed (NULL becomes null, for errors about unreadable requests);
 * @data is borrowed and may be NULL. */
json_t *
mcp_jsonrpc_error_new (json_t     *id,
                       int         code,
                       const char *message_text,
                       json_t     *data)
{
  json_t *message = message_new ();
  json_t *error = json_object ();
  /* A message may quote what a client or server sent, which need not be
   * UTF-8; JSON text must be. */
  g_autofree char *valid = g_utf8_make_valid (message_text != NULL ? message_text : "", -1);

  json_object_set_new (error, "code", json_integer (code));
  json_object_set_new (error, "message", json_string (valid));
  if (data != NULL)
    json_object_set (error, "data", data);
  json_object_set (message, "id", id != NULL ? id : json_null ());
  json_object_set_new (message, "error", error);
  return message;
}

static int
append_to_line (const char *buffer,
                size_t      size,
                void       *data)
{
  g_byte_array_append (data, (const guint8 *) buffer, size);
  return 0;
}

/* Compact JSON plus the newline that ends a stdio frame, encoded in one
 * pass into one growing buffer (sizing first would encode twice).  Compact
 * output never contains a raw newline: those inside strings are escaped.
 * NULL if @message cannot be encoded. */
GBytes *
mcp_jsonrpc_encode_line (json_t *message)
{
  /* Most messages are small; a big one grows the buffer by doubling. */
  g_autoptr(GByteArray) line = g_byte_array_sized_new (256);

  if (message == NULL || json_dump_callback (message, append_to_line, line, JSON_COMPACT) != 0 ||
      line->len == 0)
    return NULL;
  g_byte_array_append (line, (const guint8 *) "\n", 1);
  return g_byte_array_free_to_bytes (g_steal_pointer (&line));
}

static GBytes *
encode_line_or_error (json_t  *message,
                      GError **error)
{
  GBytes *line = mcp_jsonrpc_encode_line (message);

  if (line == NULL)
    g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_ENCODE,
                 _("A message could not be encoded as JSON"));
  return line;
}

/* As mcp_jsonrpc_encode_line(), for callers that want a plain buffer. */
char *
mcp_jsonrpc_to_line (json_t  *message,
                     gsize   *length,
                     GError **error)
{
  GBytes *line = encode_line_or_error (message, error);

  return line != NULL ? g_bytes_unref_to_data (line, length) : NULL;
}

/* Writes everything to a (possibly non-blocking) fd, waiting for room until
 * @deadline (monotonic µs, or -1 for no limit).  A write cut short leaves the
 * stream mid-line, so callers must treat any failure as fatal for the peer. */
gboolean
mcp_jsonrpc_write_all (int         fd,
                       const char *data,
                       gsize       length,
                       gint64      deadline,
                       GError    **error)
{
  while (length > 0)
    {
      ssize_t written = write (fd, data, length);

      if (written >= 0)
        {
          data += written;
          length -= written;
          continue;
        }
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN)
        {
          struct pollfd pfd = { .fd = fd, .events = POLLOUT };
          int timeout_ms = -1;

          if (deadline >= 0)
            {
              gint64 left = deadline - g_get_monotonic_time ();
              if (left <= 0)
                {
                  g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_WRITE_TIMEOUT,
                               _("The peer stopped reading its input"));
                  return FALSE;
                }
              timeout_ms = (int) MIN ((left + 999) / 1000, G_MAXINT);
            }
          if (poll (&pfd, 1, timeout_ms) < 0 && errno != EINTR)
            break;
          continue;
        }
      break;
    }

  if (length == 0)
    return TRUE;

  g_set_error (error, MCP_JSONRPC_ERROR, MCP_JSONRPC_ERROR_WRITE,
               _("Writing to the peer failed: %s"), g_strerror (errno));
  return FALSE;
}

gboolean
mcp_jsonrpc_write_line (int      fd,
                        json_t  *message,
                        gint64   deadline,
                        GError **error)
{
  g_autoptr(GBytes) line = encode_line_or_error (message, error);
  gsize length;
  const char *data;

  if (line == NULL)
    return FALSE;
  data = g_bytes_get_data (line, &length);
  return mcp_jsonrpc_write_all (fd, data, length, deadline, error);
}

/* The reply line to a request of id @id (borrowed) whose result is
 * already JSON text, as mcp_jsonrpc_result_new() and
 * mcp_jsonrpc_to_line() would write it, without parsing and encoding the
 * result again.  @raw_result must be one JSON value without a newline,
 * such as a span that mcp_json_scan() found in a line. */
GBytes *
mcp_jsonrpc_splice_reply (json_t     *id,
                          const char *raw_result,
                          gsize       length)
{
  static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
  static const char middle[] = ",\"result\":";
  char digits[INTEGER_DIGITS_MAX];
  g_autofree char *id_text = NULL;
  GString *line = g_string_sized_new (sizeof head + INTEGER_DIGITS_MAX + sizeof middle + length + 2);

  g_string_append_len (line, head, sizeof head - 1);
  if (json_is_integer (id))
    {
      char *start = write_integer (json_integer_value (id), digits + sizeof digits);

      g_string_append_len (line, start, digits + sizeof digits - start);
    }
  else
    {
      id_text = json_dumps (id != NULL ? id : json_null (), JSON_COMPACT | JSON_ENCODE_ANY);
      g_string_append (line, id_text);
    }
  g_string_append_len (line, middle, sizeof middle - 1);
  g_string_append_len (line, raw_result, length);
  g_string_append_len (line, "}\n", 2);
  return g_string_free_to_bytes (line);
}

/* The request line of id @id for @method (a plain name, which needs no
 * escape) whose params are already JSON text, as mcp_jsonrpc_request_new()
 * and mcp_jsonrpc_to_line() would write it.  @raw_params must be one JSON
 * object without a newline. */
GBytes *
mcp_jsonrpc_splice_request (json_int_t  id,
                            const char *method,
                            const char *raw_params,
                            gsize       length)
{
  static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
  static const char method_head[] = ",\"method\":\"";
  static const char params_head[] = "\",\"params\":";
  char digits[INTEGER_DIGITS_MAX];
  char *start = write_integer (id, digits + sizeof digits);
  GString *line = g_string_sized_new (sizeof head + INTEGER_DIGITS_MAX + sizeof method_head + strlen (method) +
                                      sizeof params_head + length + 2);

  g_string_append_len (line, head, sizeof head - 1);
  g_string_append_len (line, start, digits + sizeof digits - start);
  g_string_append_len (line, method_head, sizeof method_head - 1);
  g_string_append (line, method);
  g_string_append_len (line, params_head, sizeof params_head - 1);
  g_string_append_len (line, raw_params, length);
  g_string_append_len (line, "}\n", 2);
  return g_string_free_to_bytes (line);
}

/* The string member @key of @object, or NULL if absent or not a string. */
const char *
mcp_json_get_string (json_t     *object,
                     const char *key)
{
  return json_string_value (json_object_get (object, key));
}
