/* mcp-run-format.h — a run_python run as its MCP result, in the seed
 * bridge's formats.
 *
 * A run is described by a record (mcp-code.h makes them):
 *   {"status": "success" | "error" | "timeout" | "memory" | "validation_error",
 *    "exit_code": N (the code's exit status; -1 when it was killed),
 *    "stdout": S, "stderr": S (what the code wrote, whole),
 *    "servers": [names], "timeout_seconds": N (a timeout's limit),
 *    "error": S (why the run failed before or outside the code),
 *    "session": S (the handle of the Python session the run kept)}
 * with only the members that apply.
 *
 * The payload is the seed's: status, summary, exitCode, servers, stdout,
 * stderr, error, timeoutSeconds, in that order, empty ones left out, and
 * the session handle after them where there is one;
 * stdout and stderr as lists of lines without blank lines and "()" lines.
 * Its summary is "Success" ("Success (no output)" when nothing is left to
 * show), "Timeout: execution exceeded Ns", "Sandbox error: …", or the
 * error itself.
 *
 * compact (the default): the text is the output lines, then "stderr:" and
 * its lines (the summary when there is no output), "error: …" after them
 * when nothing else said it, "exit: N" before them for a non-zero exit and
 * "status: X" before all when the run did not succeed; structuredContent
 * keeps only what is not implied (no status on success, no exit code 0).
 * toon and json: the text is the whole payload in a fenced block, TOON (in
 * the payload's order) or indented JSON (keys sorted, as the seed's
 * json.dumps(sort_keys=True)), and structuredContent is the payload.
 * isError is set unless the run succeeded.
 */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

typedef enum {
  MCP_RUN_FORMAT_COMPACT,
  MCP_RUN_FORMAT_TOON,
  MCP_RUN_FORMAT_JSON,
} McpRunFormat;

/* $MCP_BRIDGE_OUTPUT_MODE: unset, empty or "compact" is compact, "json"
 * is json, any other value toon (as the seed bridge reads it). */
McpRunFormat  mcp_run_format_from_env   (void);
/* The seed's payload of @run (a record, above); a new object. */
json_t       *mcp_run_format_payload    (json_t       *run);
/* The CallToolResult of @run in @format; a new object. */
json_t       *mcp_run_format_result     (json_t       *run,
                                         McpRunFormat  format);
/* @value (an object whose members are strings, integers and arrays of
 * strings) as a TOON document; newly allocated. */
char         *mcp_run_format_toon       (json_t       *value);

G_END_DECLS
