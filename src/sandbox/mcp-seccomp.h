/* mcp-seccomp.h — the system call filter of the code sandbox.
 *
 * On top of bubblewrap's namespaces, the sandboxed code may not trace,
 * mount, load BPF or kernel modules, use keyrings or perf, make new
 * namespaces, inject terminal input, or open sockets other than AF_UNIX.
 * The filter is compiled with libseccomp into classic BPF in a memfd that
 * bwrap loads with --seccomp FD.  Any thread.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define MCP_SECCOMP_ERROR (mcp_seccomp_error_quark ())
GQuark mcp_seccomp_error_quark (void);

/* Returns a readable fd positioned at the start of the BPF program, or -1
 * with @error set.  The caller closes it. */
int mcp_seccomp_filter_fd (GError **error);

G_END_DECLS
