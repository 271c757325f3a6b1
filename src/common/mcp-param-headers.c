/* mcp-param-headers.c — Mcp-Param-* headers from x-mcp-header (see
 * mcp-param-headers.h). */
#include "config.h"

#include "common/mcp-param-headers.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-protocol.h"

#define ANNOTATION "x-mcp-header"
/* The integers a double holds exactly (the revision's bound). */
#define SAFE_INTEGER_MAX ((json_int_t) 9007199254740991LL)

/* One annotated property: its header name and its path of properties. */
typedef struct {
  const char *name;     /* borrowed from the schema */
  GPtrArray  *path;     /* of borrowed keys */
  const char *type;
} Annotated;

static void
annotated_free (Annotated *annotated)
{
  g_ptr_array_unref (annotated->path);
  g_free (annotated);
}

/* RFC 9110 tchar. */
static gboolean
is_token (const char *text)
{
  if (*text == '\0')
    return FALSE;
  for (const char *p = text; *p != '\0'; p++)
    if (!g_ascii_isalnum (*p) && strchr ("!#$%&'*+-.^_`|~", *p) == NULL)
      return FALSE;
  return TRUE;
}

/* How many annotations @schema holds anywhere, whatever the keyword. */
static guint
count_anywhere (json_t *schema)
{
  guint count = 0;
  const char *key;
  json_t *value;
  size_t index;

  if (json_is_object (schema))
    json_object_foreach (schema, key, value)
      count += g_str_equal (key, ANNOTATION) ? 1 : count_anywhere (value);
  else if (json_is_array (schema))
    json_array_foreach (schema, index, value)
      count += count_anywhere (value);
  return count;
}

/* The annotated properties reached from @schema through `properties`,
 * each appended to @found under @path. */
static void
collect (json_t    *schema,
         GPtrArray *path,
         GPtrArray *found)
{
  const char *key;
  json_t *property;

  json_object_foreach (json_object_get (schema, "properties"), key, property)
    {
      json_t *annotation = json_object_get (property, ANNOTATION);

      g_ptr_array_add (path, (gpointer) key);
      if (annotation != NULL)
        {
          Annotated *annotated = g_new0 (Annotated, 1);

          annotated->name = json_string_value (annotation);
          annotated->path = g_ptr_array_copy (path, NULL, NULL);
          annotated->type = json_string_value (json_object_get (property, "type"));
          g_ptr_array_add (found, annotated);
        }
      collect (property, path, found);
      g_ptr_array_remove_index (path, path->len - 1);
    }
}

static GPtrArray *
annotated_of (json_t *input_schema)
{
  g_autoptr(GPtrArray) path = g_ptr_array_new ();
  GPtrArray *found = g_ptr_array_new_with_free_func ((GDestroyNotify) annotated_free);

  collect (input_schema, path, found);
  return found;
}

static char *
dotted (GPtrArray *path)
{
  GString *text = g_string_new (NULL);

  for (guint i = 0; i < path->len; i++)
    g_string_append_printf (text, "%s%s", i > 0 ? "." : "", (const char *) path->pdata[i]);
  return g_string_free (text, FALSE);
}

gboolean
mcp_param_headers_marks (json_t *input_schema)
{
  return count_anywhere (input_schema) > 0;
}

char *
mcp_param_headers_problem (json_t *input_schema)
{
  g_autoptr(GPtrArray) found = annotated_of (input_schema);

  if (count_anywhere (input_schema) != found->len)
    return g_strdup (_("an x-mcp-header annotation is reached through another keyword than “properties” "
                       "(items, a composition, a condition or $ref)"));
  for (guint i = 0; i < found->len; i++)
    {
      Annotated *annotated = g_ptr_array_index (found, i);
      g_autofree char *where = dotted (annotated->path);

      if (annotated->name == NULL || !is_token (annotated->name))
        return g_strdup_printf (_("the x-mcp-header of “%s” is not an HTTP token"), where);
      if (g_strcmp0 (annotated->type, "string") != 0 && g_strcmp0 (annotated->type, "integer") != 0 &&
          g_strcmp0 (annotated->type, "boolean") != 0)
        return g_strdup_printf (_("the x-mcp-header of “%s” is on a property that is no string, integer "
                                  "or boolean"), where);
      for (guint j = 0; j < i; j++)
        if (g_ascii_strcasecmp (annotated->name, ((Annotated *) g_ptr_array_index (found, j))->name) == 0)
          return g_strdup_printf (_("the x-mcp-header “%s” is given twice"), annotated->name);
    }
  return NULL;
}

/* The argument at @path, or NULL. */
static json_t *
value_at (json_t    *arguments,
          GPtrArray *path)
{
  json_t *value = arguments;

  for (guint i = 0; value != NULL && i < path->len; i++)
    value = json_object_get (value, path->pdata[i]);
  return value;
}

/* @value as its header says it (a new string), NULL for none. */
static char *
header_text (json_t *value)
{
  if (json_is_string (value))
    return g_strdup (json_string_value (value));
  if (json_is_integer (value) && json_integer_value (value) <= SAFE_INTEGER_MAX &&
      json_integer_value (value) >= -SAFE_INTEGER_MAX)
    return g_strdup_printf ("%" JSON_INTEGER_FORMAT, json_integer_value (value));
  if (json_is_boolean (value))
    return g_strdup (json_is_true (value) ? "true" : "false");
  return NULL;
}

GPtrArray *
mcp_param_headers_for_call (json_t *input_schema,
                            json_t *arguments)
{
  g_autoptr(GPtrArray) found = annotated_of (input_schema);
  GPtrArray *headers = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < found->len; i++)
    {
      Annotated *annotated = g_ptr_array_index (found, i);
      g_autofree char *text = header_text (value_at (arguments, annotated->path));

      if (text == NULL)
        continue;
      g_ptr_array_add (headers, g_strconcat (MCP_PARAM_HEADER_PREFIX, annotated->name, NULL));
      g_ptr_array_add (headers, mcp_protocol_header_value (text));
    }
  return headers;
}

char *
mcp_param_headers_mismatch (json_t         *input_schema,
                            json_t         *arguments,
                            McpHeaderLookup lookup,
                            gpointer        user_data)
{
  g_autoptr(GPtrArray) found = annotated_of (input_schema);

  for (guint i = 0; i < found->len; i++)
    {
      Annotated *annotated = g_ptr_array_index (found, i);
      g_autofree char *name = g_strconcat (MCP_PARAM_HEADER_PREFIX, annotated->name, NULL);
      g_autofree char *where = dotted (annotated->path);
      g_autofree char *expected = header_text (value_at (arguments, annotated->path));
      const char *header = annotated->name != NULL ? lookup (name, user_data) : NULL;
      g_autofree char *decoded = header != NULL ? mcp_protocol_header_decode (header) : NULL;

      if (annotated->name == NULL)
        continue;
      if (header != NULL && decoded == NULL)
        return g_strdup_printf (_("Header mismatch: %s “%s” is not valid Base64 of UTF-8 text"), name, header);
      if (expected != NULL && header == NULL)
        return g_strdup_printf (_("Header mismatch: a call with arguments.%s needs the header %s with its value"),
                                where, name);
      if (header != NULL && g_strcmp0 (decoded, expected) != 0)
        return g_strdup_printf (_("Header mismatch: %s header value “%s” does not match body value “%s”"),
                                name, decoded, expected != NULL ? expected : "");
    }
  return NULL;
}
