/* mcp-json-scan.h — one pass over a JSON text: valid or not, and where the
 * values of a top-level object's members are.
 *
 * A reply line of tens of kilobytes only needs its id and error read; the
 * rest can be passed on as the bytes it came as.  The scanner decides
 * validity exactly as json_loadb (JSON_DECODE_ANY | JSON_ALLOW_NUL) does
 * (the flags of mcp_jsonrpc_parse()): RFC 8259 with strict UTF-8, no lone
 * surrogate escapes, "\u0000" allowed in strings but not in member names,
 * integers that fit in json_int_t, reals that do not overflow a double, at
 * most 2048 nested values, only ' ', '\t', '\n', '\r' around the value.
 * tests/fuzz/fuzz-json-scan.c checks the agreement against Jansson itself.
 *
 * One difference is deliberate: Jansson's lexer skips a single NUL byte
 * right after a number or true/false/null (it takes back the byte it
 * looked ahead at, and a taken-back NUL reads as "nothing buffered"), so
 * it accepts "[1\0]".  RFC 8259 does not, and a reply passed on as bytes
 * must be JSON to every client, so the scanner refuses it; callers fall
 * back to Jansson, which reads such a line as it always did.
 *
 * Pure functions with no state; any thread.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

/* Jansson's JSON_PARSER_MAX_DEPTH: every value counts, scalars too. */
#define MCP_JSON_SCAN_MAX_DEPTH 2048

#define MCP_JSON_SCAN_ERROR (mcp_json_scan_error_quark ())
GQuark mcp_json_scan_error_quark (void);

typedef enum {
  MCP_JSON_SCAN_ERROR_SYNTAX,       /* not valid JSON, or not what Jansson accepts */
  MCP_JSON_SCAN_ERROR_NUL_IN_NAME,  /* valid JSON, but a member name holds "\u0000" */
  MCP_JSON_SCAN_ERROR_STRAY_NUL,    /* a NUL byte right after a number or literal,
                                     * which Jansson skips (see above) */
} McpJsonScanError;

/* One member of a top-level object: its decoded name and where its value
 * lies in the text, [start, end), without the whitespace around it. */
typedef struct {
  char  *name;
  gsize  start;
  gsize  end;
} McpJsonMember;

typedef struct {
  gboolean  is_object;  /* the text is an object and @members are its own */
  /* McpJsonMember, in the order names first appear.  A name given twice
   * keeps the span of its last value, as Jansson keeps the last value. */
  GArray   *members;
  /* mcp_json_scan_nested(): the members of the value of the top-level
   * member asked for, alike, with spans in the whole text, when that value
   * is an object of at most MCP_JSON_SCAN_NESTED_MAX members; else NULL. */
  GArray   *nested;
} McpJsonScan;

#define MCP_JSON_SCAN_NESTED_MAX 8

/* NULL with @error (and @error_offset, if not NULL, set to the byte the
 * text went wrong at) if the text is not valid. */
McpJsonScan         *mcp_json_scan        (const char   *text,
                                           gsize         length,
                                           gsize        *error_offset,
                                           GError      **error);
/* mcp_json_scan(), which also keeps the members of the top-level
 * member @nested (see McpJsonScan.nested), in the same one pass. */
McpJsonScan         *mcp_json_scan_nested (const char   *text,
                                           gsize         length,
                                           const char   *nested,
                                           gsize        *error_offset,
                                           GError      **error);
void                 mcp_json_scan_free   (McpJsonScan  *scan);
const McpJsonMember *mcp_json_scan_lookup (McpJsonScan  *scan,
                                           const char   *name);
/* In McpJsonScan.nested (NULL if it is). */
const McpJsonMember *mcp_json_scan_lookup_nested (McpJsonScan *scan,
                                                  const char  *name);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (McpJsonScan, mcp_json_scan_free)

/* The value of @member (NULL: none) of a text that mcp_json_scan()
 * accepted, as json_loadb() would read it.  An integer and a string
 * without escapes, what ids and names are, are read here without
 * Jansson's parser, whose set-up costs more than such a value. */
json_t              *mcp_json_scan_load   (const char          *text,
                                           const McpJsonMember *member);

/* Reads an object's members only up to the first whose name is in
 * @names (NULL-terminated), without reading that member's value, and
 * returns the name's index; -1 if the text is not an object, is not valid
 * JSON before such a member, or has none.  A cheap look at what a long
 * line is, not a validation of it. */
int                  mcp_json_scan_find_first (const char         *text,
                                               gsize               length,
                                               const char * const *names);

G_END_DECLS
