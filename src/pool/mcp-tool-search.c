/* mcp-tool-search.c — ranking tools against a free-text query, and the
 * arguments of a search or a description. */
#include "config.h"

#include "pool/mcp-tool-search.h"

#include <string.h>

#include <glib/gi18n-lib.h>

#include "common/mcp-jsonrpc.h"

/* Weights: the name says what a tool is, the description how. */
#define SCORE_NAME_IS_QUERY   20
#define SCORE_NAME_WORD        8
#define SCORE_NAME_PART        5
#define SCORE_SERVER_PART      3
#define SCORE_DESCRIPTION_WORD 2
#define SCORE_DESCRIPTION_PART 1
#define SCORE_PER_WORD_MATCHED 4

/* Lower-case words of letters and digits: "read_text-File" gives
 * read, text, file. */
char **
mcp_tool_search_words (const char *text)
{
  g_autoptr(GStrvBuilder) builder = g_strv_builder_new ();
  g_autofree char *lower = g_utf8_strdown (text ? text : "", -1);
  const char *p = lower;

  while (*p != '\0')
    {
      const char *start;

      while (*p != '\0' && !g_unichar_isalnum (g_utf8_get_char (p)))
        p = g_utf8_next_char (p);
      start = p;
      while (*p != '\0' && g_unichar_isalnum (g_utf8_get_char (p)))
        p = g_utf8_next_char (p);
      if (p > start)
        {
          g_autofree char *word = g_strndup (start, p - start);
          g_strv_builder_add (builder, word);
        }
    }
  return g_strv_builder_end (builder);
}

static gboolean
has_word (char       **words,
          const char  *word)
{
  return g_strv_contains ((const char * const *) words, word);
}

int
mcp_tool_search_score (json_t  *tool,
                       char   **query_words)
{
  g_autofree char *name = g_utf8_strdown (mcp_json_get_string (tool, "name") ?: "", -1);
  g_autofree char *server = g_utf8_strdown (mcp_json_get_string (tool, "server") ?: "", -1);
  g_autofree char *description = g_utf8_strdown (mcp_json_get_string (tool, "description") ?: "", -1);
  g_auto(GStrv) name_words = mcp_tool_search_words (name);
  g_auto(GStrv) description_words = mcp_tool_search_words (description);
  g_autofree char *joined = g_strjoinv (" ", query_words);
  g_autofree char *name_spaced = g_strjoinv (" ", name_words);
  int score = 0;

  if (query_words[0] != NULL && g_str_equal (joined, name_spaced))
    score += SCORE_NAME_IS_QUERY;

  for (char **word = query_words; *word != NULL; word++)
    {
      int before = score;

      if (has_word (name_words, *word))
        score += SCORE_NAME_WORD;
      else if (strstr (name, *word) != NULL)
        score += SCORE_NAME_PART;
      if (strstr (server, *word) != NULL)
        score += SCORE_SERVER_PART;
      if (has_word (description_words, *word))
        score += SCORE_DESCRIPTION_WORD;
      else if (strstr (description, *word) != NULL)
        score += SCORE_DESCRIPTION_PART;
      if (score > before)
        score += SCORE_PER_WORD_MATCHED;
    }
  return score;
}

typedef struct {
  json_t *tool;
  int     score;
} Ranked;

static int
compare_ranked (gconstpointer a,
                gconstpointer b)
{
  const Ranked *x = a, *y = b;
  int by_server;

  if (x->score != y->score)
    return y->score - x->score;
  by_server = g_strcmp0 (mcp_json_get_string (x->tool, "server"), mcp_json_get_string (y->tool, "server"));
  if (by_server != 0)
    return by_server;
  return g_strcmp0 (mcp_json_get_string (x->tool, "name"), mcp_json_get_string (y->tool, "name"));
}

json_t *
mcp_tool_search_rank (json_t     *tools,
                      const char *query,
                      guint       limit)
{
  g_auto(GStrv) words = mcp_tool_search_words (query);
  g_autoptr(GArray) ranked = g_array_new (FALSE, FALSE, sizeof (Ranked));
  json_t *result = json_array ();
  json_t *tool;
  size_t index;

  json_array_foreach (tools, index, tool)
    {
      Ranked item = { tool, words[0] == NULL ? 1 : mcp_tool_search_score (tool, words) };

      if (item.score > 0)
        g_array_append_val (ranked, item);
    }
  g_array_sort (ranked, compare_ranked);
  for (guint i = 0; i < ranked->len && (limit == 0 || i < limit); i++)
    json_array_append (result, g_array_index (ranked, Ranked, i).tool);
  return result;
}

/* Arguments */

G_DEFINE_QUARK (mcp-tool-search-error-quark, mcp_tool_search_error)

static gboolean
invalid_argument (GError     **error,
                  const char  *format,
                  ...) G_GNUC_PRINTF (2, 3);

static gboolean
invalid_argument (GError     **error,
                  const char  *format,
                  ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (MCP_TOOL_SEARCH_ERROR,
                                                MCP_TOOL_SEARCH_ERROR_INVALID_ARGUMENT, format, args));
  va_end (args);
  return FALSE;
}

/* Absent and null alike mean "not given": clients write either. */
static json_t *
get_given (json_t     *arguments,
           const char *key)
{
  json_t *value = json_object_get (arguments, key);

  return json_is_null (value) ? NULL : value;
}

static gboolean
read_string (json_t       *arguments,
             const char   *key,
             gboolean      required,
             const char  **value,
             GError      **error)
{
  json_t *given = get_given (arguments, key);

  *value = json_string_value (given);
  if (given == NULL && !required)
    return TRUE;
  if (*value != NULL && (*value)[0] != '\0')
    return TRUE;
  if (required)
    return invalid_argument (error, _("The argument “%s” is required and must be a non-empty string"), key);
  return invalid_argument (error, _("The argument “%s” must be a non-empty string, or be left out"), key);
}

static gboolean
read_detail (json_t         *arguments,
             McpToolDetail  *detail,
             GError        **error)
{
  json_t *given = get_given (arguments, "detail");

  if (given == NULL)
    {
      *detail = MCP_TOOL_DETAIL_SUMMARY;
      return TRUE;
    }
  if (json_is_string (given) && mcp_tool_detail_from_string (json_string_value (given), detail))
    return TRUE;
  return invalid_argument (error, _("The argument “detail” must be “summary” or “full”; "
                                    "leave it out for “summary”"));
}

static gboolean
read_limit (json_t   *arguments,
            guint    *limit,
            GError  **error)
{
  json_t *given = get_given (arguments, "limit");

  if (given == NULL)
    {
      *limit = MCP_TOOL_SEARCH_LIMIT_DEFAULT;
      return TRUE;
    }
  if (!json_is_integer (given) || json_integer_value (given) < 1)
    return invalid_argument (error, _("The argument “limit” must be a whole number from 1 to %d; "
                                      "leave it out for %d"),
                             MCP_TOOL_SEARCH_LIMIT_MAX, MCP_TOOL_SEARCH_LIMIT_DEFAULT);
  /* More than the maximum is what a client asks for when it wants all;
   * it gets as many as any client may. */
  *limit = (guint) MIN (json_integer_value (given), MCP_TOOL_SEARCH_LIMIT_MAX);
  return TRUE;
}

gboolean
mcp_tool_search_read_request (json_t                *arguments,
                              McpToolSearchRequest  *request,
                              GError               **error)
{
  return read_string (arguments, "query", TRUE, &request->query, error) &&
         read_limit (arguments, &request->limit, error) &&
         read_detail (arguments, &request->detail, error);
}

gboolean
mcp_tool_describe_read_request (json_t                  *arguments,
                                gboolean                 tool_required,
                                McpToolDescribeRequest  *request,
                                GError                 **error)
{
  return read_string (arguments, "server", TRUE, &request->server, error) &&
         read_string (arguments, "tool", tool_required, &request->tool, error) &&
         read_detail (arguments, &request->detail, error);
}
