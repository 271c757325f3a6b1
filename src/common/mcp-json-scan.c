/* mcp-json-scan.c — one pass over a JSON text: valid or not, and where the
 * values of a top-level object's members are.
 *
 * Iterative, with the open containers on a fixed stack as deep as
 * Jansson's limit, so that no input can exhaust the C stack.  Only the
 * top-level member names are decoded; everything else is validated in
 * place and never copied.
 */
#include "config.h"

#include "common/mcp-json-scan.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-json-scan-error-quark, mcp_json_scan_error)

/* Up to this many members, a repeated name is found by comparing names;
 * past it through a hash table, so that a line of a million members does
 * not cost a million squared. */
#define LINEAR_LOOKUP_MAX 8

/* Bytes that stand for themselves inside a string: not a control
 * character, quote, backslash or part of a multi-byte sequence.  The
 * string loop runs over long texts byte by byte; a table keeps it at one
 * load and one test per byte. */
static const guint8 plain_string_byte[256] = {
  [0x20 ... 0x21] = 1,  /* around '"' (0x22) */
  [0x23 ... 0x5b] = 1,  /* around '\\' (0x5c) */
  [0x5d ... 0x7f] = 1,
};

typedef struct {
  const guint8       *text;
  gsize               length;
  gsize               pos;
  McpJsonScanError    code;
  const char         *reason;      /* untranslated; NULL while valid */
  McpJsonScan        *scan;        /* NULL: find_first, which keeps nothing */
  GHashTable         *index;       /* name → member index + 1, past LINEAR_LOOKUP_MAX */
  GString            *name;        /* the top-level member being read */
  gsize               value_start; /* of that member */
  const char * const *stop_names;  /* find_first only */
  int                 stopped_at;  /* index in stop_names, or -1 */
  const char         *nested_name; /* scan_nested only: whose members to keep */
  gboolean            in_nested;   /* the top-level member being read is that one */
  gboolean            nested_is_object;  /* and its value is an object */
  gboolean            nested_overflow;   /* of more than MCP_JSON_SCAN_NESTED_MAX */
  GString            *nested_member;     /* the member of it being read */
  gsize               nested_value_start;
} Scanner;

static gboolean
fail (Scanner          *s,
      McpJsonScanError  code,
      const char       *reason)
{
  s->code = code;
  s->reason = reason;
  return FALSE;
}

static gboolean
fail_syntax (Scanner    *s,
             const char *reason)
{
  return fail (s, MCP_JSON_SCAN_ERROR_SYNTAX, reason);
}

static inline void
skip_space (Scanner *s)
{
  while (s->pos < s->length)
    {
      guint8 c = s->text[s->pos];

      if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
        break;
      s->pos++;
    }
}

static inline gboolean
at (Scanner *s,
    guint8   c)
{
  return s->pos < s->length && s->text[s->pos] == c;
}

static inline gboolean
at_digit (Scanner *s)
{
  return s->pos < s->length && g_ascii_isdigit (s->text[s->pos]);
}

/* The length of the multi-byte UTF-8 sequence at @p, or 0 if it is not
 * one Jansson's utf8_check_full() takes: no overlong forms, surrogates or
 * code points past U+10FFFF. */
static gsize
utf8_sequence_length (const guint8 *p,
                      gsize         left)
{
  gsize n;
  gunichar value;

  if (p[0] >= 0xc2 && p[0] <= 0xdf)
    n = 2, value = p[0] & 0x1f;
  else if (p[0] >= 0xe0 && p[0] <= 0xef)
    n = 3, value = p[0] & 0x0f;
  else if (p[0] >= 0xf0 && p[0] <= 0xf4)
    n = 4, value = p[0] & 0x07;
  else
    return 0;
  if (left < n)
    return 0;
  for (gsize i = 1; i < n; i++)
    {
      if ((p[i] & 0xc0) != 0x80)
        return 0;
      value = (value << 6) | (p[i] & 0x3f);
    }
  if (value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff) ||
      (n == 3 && value < 0x800) || (n == 4 && value < 0x10000))
    return 0;
  return n;
}

/* The four hex digits at s->pos, or -1. */
static gint32
read_hex4 (Scanner *s)
{
  gint32 value = 0;

  if (s->length - s->pos < 4)
    return -1;
  for (int i = 0; i < 4; i++)
    {
      int digit = g_ascii_xdigit_value (s->text[s->pos + i]);

      if (digit < 0)
        return -1;
      value = value * 16 + digit;
    }
  s->pos += 4;
  return value;
}

/* After "\u": a code point, or a surrogate pair, which Jansson requires
 * to be whole. */
static gboolean
scan_unicode_escape (Scanner  *s,
                     GString  *decoded,
                     gboolean *has_nul)
{
  gint32 value = read_hex4 (s);

  if (value < 0)
    return fail_syntax (s, N_("a \\u escape without four hex digits"));
  if (value >= 0xd800 && value <= 0xdbff)
    {
      gint32 low = -1;

      if (s->length - s->pos >= 2 && s->text[s->pos] == '\\' && s->text[s->pos + 1] == 'u')
        {
          s->pos += 2;
          low = read_hex4 (s);
        }
      if (low < 0xdc00 || low > 0xdfff)
        return fail_syntax (s, N_("a UTF-16 surrogate without its other half"));
      value = 0x10000 + ((value - 0xd800) << 10) + (low - 0xdc00);
    }
  else if (value >= 0xdc00 && value <= 0xdfff)
    return fail_syntax (s, N_("a UTF-16 surrogate without its other half"));

  if (value == 0)
    *has_nul = TRUE;
  if (decoded != NULL)
    {
      char utf8[6];

      g_string_append_len (decoded, utf8, g_unichar_to_utf8 (value, utf8));
    }
  return TRUE;
}

static char
simple_escape (guint8 c)
{
  switch (c)
    {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
    }
}

/* s->pos is just after the opening quote; on success just after the
 * closing one.  @decoded (may be NULL) gets the string's value. */
static gboolean
scan_string (Scanner  *s,
             GString  *decoded,
             gboolean *has_nul)
{
  const guint8 *text = s->text;
  gsize run = s->pos;   /* first byte not yet copied to @decoded */

  while (s->pos < s->length)
    {
      guint8 c = text[s->pos];

      if (plain_string_byte[c])
        {
          s->pos++;
          continue;
        }
      if (c >= 0x80)
        {
          /* Copied with the run around it. */
          gsize n = utf8_sequence_length (text + s->pos, s->length - s->pos);

          if (n == 0)
            return fail_syntax (s, N_("invalid UTF-8"));
          s->pos += n;
          continue;
        }
      if (c < 0x20)
        return fail_syntax (s, N_("a control character in a string"));
      if (decoded != NULL)
        g_string_append_len (decoded, (const char *) text + run, s->pos - run);
      if (c == '"')
        {
          s->pos++;
          return TRUE;
        }
      /* A backslash. */
      if (s->pos + 1 == s->length)
        break;
      {
        char escaped = simple_escape (text[s->pos + 1]);
        gboolean unicode = text[s->pos + 1] == 'u';

        s->pos += 2;
        if (unicode && !scan_unicode_escape (s, decoded, has_nul))
          return FALSE;
        if (!unicode && escaped == 0)
          return fail_syntax (s, N_("an unknown escape in a string"));
        if (!unicode && decoded != NULL)
          g_string_append_c (decoded, escaped);
        run = s->pos;
      }
    }
  return fail_syntax (s, N_("a string without its closing quote"));
}

/* Jansson holds integers in json_int_t (64 bits) and refuses the rest. */
static gboolean
integer_fits (const guint8 *digits,
              gsize         count,
              gboolean      negative)
{
  if (count != 19)
    return count < 19;
  return memcmp (digits, negative ? "9223372036854775808" : "9223372036854775807", 19) <= 0;
}

/* Jansson refuses a real that overflows a double (underflow is fine). */
static gboolean
real_fits (const guint8 *text,
           gsize         length)
{
  char small[64];
  g_autofree char *large = NULL;
  char *copy = small;
  double value;

  if (length < sizeof small)
    {
      memcpy (small, text, length);
      small[length] = '\0';
    }
  else
    copy = large = g_strndup ((const char *) text, length);
  value = g_ascii_strtod (copy, NULL);
  return !(isinf (value) && errno == ERANGE);
}

static gboolean
scan_number (Scanner *s)
{
  gsize start = s->pos;
  gsize digits_start, digits;
  gboolean negative = at (s, '-');
  gboolean exponent = FALSE, fraction = FALSE;

  if (negative)
    s->pos++;
  digits_start = s->pos;
  if (at (s, '0'))
    s->pos++;
  else if (at_digit (s))
    while (at_digit (s))
      s->pos++;
  else
    return fail_syntax (s, N_("a number without digits"));
  digits = s->pos - digits_start;

  if (at (s, '.'))
    {
      s->pos++;
      fraction = TRUE;
      if (!at_digit (s))
        return fail_syntax (s, N_("a number without digits after its point"));
      while (at_digit (s))
        s->pos++;
    }
  if (at (s, 'e') || at (s, 'E'))
    {
      s->pos++;
      exponent = TRUE;
      if (at (s, '+') || at (s, '-'))
        s->pos++;
      if (!at_digit (s))
        return fail_syntax (s, N_("a number without digits in its exponent"));
      while (at_digit (s))
        s->pos++;
    }

  if (!fraction && !exponent)
    {
      if (!integer_fits (s->text + digits_start, digits, negative))
        return fail_syntax (s, N_("an integer that does not fit in 64 bits"));
      return TRUE;
    }
  /* Under 10^308 without an exponent: no double overflows there. */
  if ((exponent || digits > 308) && !real_fits (s->text + start, s->pos - start))
    return fail_syntax (s, N_("a number too large for a double"));
  return TRUE;
}

static gboolean
scan_literal (Scanner *s)
{
  static const char * const literals[] = { "true", "false", "null" };

  for (gsize i = 0; i < G_N_ELEMENTS (literals); i++)
    {
      gsize n = strlen (literals[i]);

      if (s->length - s->pos >= n && memcmp (s->text + s->pos, literals[i], n) == 0)
        {
          s->pos += n;
          return TRUE;
        }
    }
  return fail_syntax (s, N_("an unexpected character"));
}

static McpJsonMember *
find_member (Scanner    *s,
             const char *name)
{
  GArray *members = s->scan->members;

  if (s->index != NULL)
    {
      guint i = GPOINTER_TO_UINT (g_hash_table_lookup (s->index, name));

      return i > 0 ? &g_array_index (members, McpJsonMember, i - 1) : NULL;
    }
  for (guint i = 0; i < members->len; i++)
    if (strcmp (g_array_index (members, McpJsonMember, i).name, name) == 0)
      return &g_array_index (members, McpJsonMember, i);
  return NULL;
}

/* The top-level member whose value just ended at s->pos. */
static void
end_member (Scanner *s)
{
  GArray *members = s->scan->members;
  McpJsonMember *member = find_member (s, s->name->str);
  McpJsonMember added;

  if (member != NULL)
    {
      member->start = s->value_start;
      member->end = s->pos;
      return;
    }
  added.name = g_strndup (s->name->str, s->name->len);
  added.start = s->value_start;
  added.end = s->pos;
  g_array_append_val (members, added);

  if (s->index == NULL && members->len > LINEAR_LOOKUP_MAX)
    {
      s->index = g_hash_table_new (g_str_hash, g_str_equal);
      for (guint i = 0; i < members->len; i++)
        g_hash_table_insert (s->index, g_array_index (members, McpJsonMember, i).name,
                             GUINT_TO_POINTER (i + 1));
    }
  else if (s->index != NULL)
    g_hash_table_insert (s->index, added.name, GUINT_TO_POINTER (members->len));
}

/* The member of the nested object whose value just ended at s->pos. */
static void
end_nested_member (Scanner *s)
{
  GArray *nested = s->scan->nested;
  McpJsonMember added;

  if (s->nested_overflow)
    return;
  for (guint i = 0; i < nested->len; i++)
    if (strcmp (g_array_index (nested, McpJsonMember, i).name, s->nested_member->str) == 0)
      {
        g_array_index (nested, McpJsonMember, i).start = s->nested_value_start;
        g_array_index (nested, McpJsonMember, i).end = s->pos;
        return;
      }
  if (nested->len == MCP_JSON_SCAN_NESTED_MAX)
    {
      s->nested_overflow = TRUE;
      return;
    }
  added.name = g_strndup (s->nested_member->str, s->nested_member->len);
  added.start = s->nested_value_start;
  added.end = s->pos;
  g_array_append_val (nested, added);
}

/* A member name and its colon, at @depth open containers; at the top level
 * the name is kept, and in the nested object (scan_nested) its own.
 * FALSE with no reason: find_first found its name. */
static gboolean
scan_member_name (Scanner *s,
                  gsize    depth)
{
  gboolean top = depth == 1;
  gboolean nested = depth == 2 && s->in_nested;
  gboolean has_nul = FALSE;

  if (!at (s, '"'))
    return fail_syntax (s, N_("a member without a quoted name"));
  s->pos++;
  if (top)
    g_string_truncate (s->name, 0);
  else if (nested)
    g_string_truncate (s->nested_member, 0);
  if (!scan_string (s, top ? s->name : nested ? s->nested_member : NULL, &has_nul))
    return FALSE;
  /* Jansson reads the whole name before it looks for a NUL in it. */
  if (has_nul)
    return fail (s, MCP_JSON_SCAN_ERROR_NUL_IN_NAME, N_("a member name holds \\u0000"));
  skip_space (s);
  if (!at (s, ':'))
    return fail_syntax (s, N_("a member name without a colon after it"));
  s->pos++;
  skip_space (s);
  if (top)
    s->value_start = s->pos;
  if (nested)
    s->nested_value_start = s->pos;
  /* A name given twice: the last value's members count. */
  if (top && s->nested_name != NULL && (s->in_nested = strcmp (s->name->str, s->nested_name) == 0))
    {
      g_array_set_size (s->scan->nested, 0);
      s->nested_is_object = s->nested_overflow = FALSE;
    }

  if (top && s->stop_names != NULL)
    for (int i = 0; s->stop_names[i] != NULL; i++)
      if (strcmp (s->name->str, s->stop_names[i]) == 0)
        {
          s->stopped_at = i;
          return FALSE;
        }
  return TRUE;
}

/* One scalar at s->pos. */
static gboolean
scan_scalar (Scanner *s)
{
  guint8 c = s->text[s->pos];
  gboolean has_nul = FALSE;

  if (c == '"')
    {
      s->pos++;
      return scan_string (s, NULL, &has_nul);
    }
  if (c == '-' || g_ascii_isdigit (c))
    {
      if (!scan_number (s))
        return FALSE;
    }
  else if (!scan_literal (s))
    return FALSE;
  /* See the header: Jansson would skip this byte. */
  if (at (s, '\0'))
    return fail (s, MCP_JSON_SCAN_ERROR_STRAY_NUL, N_("a NUL byte"));
  return TRUE;
}

/* The closing brackets, commas and member names after a value that ended
 * at s->pos, up to where the next value starts.  *@done once the
 * outermost value has ended. */
static gboolean
scan_after_value (Scanner  *s,
                  guint8   *open,
                  gsize    *depth,
                  gboolean *done)
{
  for (;;)
    {
      guint8 c;

      if (*depth == 1 && open[0] == '{' && s->scan != NULL)
        end_member (s);
      else if (*depth == 2 && s->in_nested && open[1] == '{')
        end_nested_member (s);
      skip_space (s);
      if (*depth == 0)
        {
          *done = TRUE;
          return s->pos == s->length || fail_syntax (s, N_("more after the value"));
        }
      if (s->pos == s->length)
        return fail_syntax (s, N_("an unexpected end"));
      c = s->text[s->pos++];
      if (c == ',')
        {
          skip_space (s);
          return open[*depth - 1] == '[' || scan_member_name (s, *depth);
        }
      if (c != (open[*depth - 1] == '{' ? '}' : ']'))
        {
          s->pos--;
          return fail_syntax (s, N_("a missing comma or closing bracket"));
        }
      (*depth)--;
    }
}

static gboolean
scan_text (Scanner *s)
{
  guint8 open[MCP_JSON_SCAN_MAX_DEPTH];  /* '{' or '[' per open container */
  gsize depth = 0;
  gboolean done = FALSE;

  skip_space (s);
  while (!done)
    {
      guint8 c;

      /* A value starts at s->pos; Jansson counts it one deeper than the
       * containers around it. */
      if (depth + 1 > MCP_JSON_SCAN_MAX_DEPTH)
        return fail_syntax (s, N_("values nested deeper than 2048"));
      if (s->pos == s->length)
        return fail_syntax (s, N_("an unexpected end"));
      c = s->text[s->pos];
      if (c == '{' || c == '[')
        {
          if (depth == 0 && c == '{' && s->scan != NULL)
            s->scan->is_object = TRUE;
          if (depth == 1 && c == '{' && s->in_nested)
            s->nested_is_object = TRUE;
          s->pos++;
          skip_space (s);
          if (!at (s, c == '{' ? '}' : ']'))
            {
              open[depth++] = c;
              if (c == '{' && !scan_member_name (s, depth))
                return FALSE;
              continue;
            }
          s->pos++;
        }
      else if (!scan_scalar (s))
        return FALSE;
      if (!scan_after_value (s, open, &depth, &done))
        return FALSE;
    }
  return TRUE;
}

static void
clear_member (gpointer data)
{
  g_free (((McpJsonMember *) data)->name);
}

static void
scanner_init (Scanner    *s,
              const char *text,
              gsize       length)
{
  memset (s, 0, sizeof *s);
  s->text = (const guint8 *) text;
  s->length = length;
  /* Room for the names of a JSON-RPC message without growing. */
  s->name = g_string_sized_new (32);
  s->stopped_at = -1;
}

static void
scanner_clear (Scanner *s)
{
  g_clear_pointer (&s->index, g_hash_table_unref);
  g_string_free (s->name, TRUE);
  if (s->nested_member != NULL)
    g_string_free (s->nested_member, TRUE);
}

static GArray *
members_new (void)
{
  /* A JSON-RPC message has at most a handful. */
  GArray *members = g_array_sized_new (FALSE, FALSE, sizeof (McpJsonMember), 8);

  g_array_set_clear_func (members, clear_member);
  return members;
}

McpJsonScan *
mcp_json_scan (const char  *text,
               gsize        length,
               gsize       *error_offset,
               GError     **error)
{
  return mcp_json_scan_nested (text, length, NULL, error_offset, error);
}

McpJsonScan *
mcp_json_scan_nested (const char  *text,
                      gsize        length,
                      const char  *nested,
                      gsize       *error_offset,
                      GError     **error)
{
  g_autoptr(McpJsonScan) scan = g_new0 (McpJsonScan, 1);
  Scanner s;
  gboolean ok;

  scan->members = members_new ();
  scanner_init (&s, text, length);
  s.scan = scan;
  if (nested != NULL)
    {
      scan->nested = members_new ();
      s.nested_name = nested;
      s.nested_member = g_string_sized_new (32);
    }
  ok = scan_text (&s);
  scanner_clear (&s);
  if (ok && scan->nested != NULL && (!s.nested_is_object || s.nested_overflow))
    g_clear_pointer (&scan->nested, g_array_unref);
  if (ok)
    return g_steal_pointer (&scan);

  if (error_offset != NULL)
    *error_offset = s.pos;
  if (s.code == MCP_JSON_SCAN_ERROR_NUL_IN_NAME)
    g_set_error (error, MCP_JSON_SCAN_ERROR, s.code,
                 _("A member name before byte %zu contains \\u0000, which mcp-pool cannot handle; "
                   "send names without NUL characters"), (size_t) s.pos);
  else
    g_set_error (error, MCP_JSON_SCAN_ERROR, s.code,
                 _("Not valid JSON at byte %zu: %s"), (size_t) s.pos, _(s.reason));
  return NULL;
}

void
mcp_json_scan_free (McpJsonScan *scan)
{
  if (scan == NULL)
    return;
  g_array_unref (scan->members);
  g_clear_pointer (&scan->nested, g_array_unref);
  g_free (scan);
}

const McpJsonMember *
mcp_json_scan_lookup (McpJsonScan *scan,
                      const char  *name)
{
  for (guint i = 0; i < scan->members->len; i++)
    if (strcmp (g_array_index (scan->members, McpJsonMember, i).name, name) == 0)
      return &g_array_index (scan->members, McpJsonMember, i);
  return NULL;
}

const McpJsonMember *
mcp_json_scan_lookup_nested (McpJsonScan *scan,
                             const char  *name)
{
  for (guint i = 0; scan->nested != NULL && i < scan->nested->len; i++)
    if (strcmp (g_array_index (scan->nested, McpJsonMember, i).name, name) == 0)
      return &g_array_index (scan->nested, McpJsonMember, i);
  return NULL;
}

int
mcp_json_scan_find_first (const char         *text,
                          gsize               length,
                          const char * const *names)
{
  Scanner s;
  int found;

  scanner_init (&s, text, length);
  s.stop_names = names;
  skip_space (&s);
  found = at (&s, '{') ? (scan_text (&s), s.stopped_at) : -1;
  scanner_clear (&s);
  return found;
}

/* A JSON integer that the scanner accepted: optional '-', digits, and a
 * value that fits in json_int_t. */
static gboolean
is_plain_integer (const char *text,
                  gsize       length)
{
  gsize i = text[0] == '-' ? 1 : 0;

  if (i == length)
    return FALSE;
  for (; i < length; i++)
    if (!g_ascii_isdigit (text[i]))
      return FALSE;
  return TRUE;
}

static json_int_t
read_plain_integer (const char *text,
                    gsize       length)
{
  gboolean negative = text[0] == '-';
  guint64 magnitude = 0;

  for (gsize i = negative ? 1 : 0; i < length; i++)
    magnitude = magnitude * 10 + (guint64) (text[i] - '0');
  /* In range, as the scanner checked: -(2^63) too. */
  return negative ? (json_int_t) (0 - magnitude) : (json_int_t) magnitude;
}

json_t *
mcp_json_scan_load (const char          *text,
                    const McpJsonMember *member)
{
  const char *value;
  gsize length;

  if (member == NULL)
    return NULL;
  value = text + member->start;
  length = member->end - member->start;
  if (is_plain_integer (value, length))
    return json_integer (read_plain_integer (value, length));
  /* Valid UTF-8 with no control character, as the scanner checked. */
  if (value[0] == '"' && memchr (value, '\\', length) == NULL)
    return json_stringn_nocheck (value + 1, length - 2);
  return json_loadb (value, length, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}
