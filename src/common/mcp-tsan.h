/* mcp-tsan.h — hand-overs that GLib orders out of ThreadSanitizer's sight.
 *
 * The reference that GLib holds on a source, and on its callback's data,
 * through a dispatch is counted inside GLib, which is not instrumented: the
 * data's destroy notify (or the source's finalize) may run on the thread
 * that destroyed the source, after a dispatch on another one, and TSan
 * sees no order between the two.  A dispatch that used the data ends with
 * MCP_TSAN_DISPATCH_DONE (data); whatever frees it begins with
 * MCP_TSAN_FINALIZE_BEGIN (data).  Both are nothing outside TSan builds.
 */
#pragma once

#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#define MCP_TSAN_DISPATCH_DONE(data)  __tsan_release (data)
#define MCP_TSAN_FINALIZE_BEGIN(data) __tsan_acquire (data)
#else
#define MCP_TSAN_DISPATCH_DONE(data)  ((void) (data))
#define MCP_TSAN_FINALIZE_BEGIN(data) ((void) (data))
#endif
