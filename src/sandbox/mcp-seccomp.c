/* mcp-seccomp.c — the system call filter of the code sandbox.
 *
 * Allow by default, deny a list: the sandbox runs ordinary Python, and a
 * default-deny list would break it with every new interpreter version,
 * while the dangerous calls are few and known (the list follows what
 * Flatpak denies).  Denied calls fail with EPERM, so code gets a clear
 * error instead of being killed; those that would hold memory outside the
 * address space limit fail with ENOSYS.
 */
#include "config.h"

#include "sandbox/mcp-seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib/gi18n-lib.h>

G_DEFINE_QUARK (mcp-seccomp-error-quark, mcp_seccomp_error)

static const char * const denied_syscalls[] = {
  "ptrace", "process_vm_readv", "process_vm_writev",
  "mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
  "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
  "bpf", "perf_event_open", "userfaultfd",
  "keyctl", "add_key", "request_key",
  "unshare", "setns",
  "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
  "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
  "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
  "io_uring_setup", "io_uring_enter", "io_uring_register",
  NULL,
};

/* Calls that hold memory outside the address space limit (memfds, SysV
 * IPC; ipc is the multiplexer of the architectures that have it).  They
 * fail with ENOSYS, as if absent, so that libraries take the fallback they
 * have for older kernels. */
static const char * const memory_syscalls[] = {
  "memfd_create", "memfd_secret", "shmget", "msgget", "semget", "ipc",
  NULL,
};

/* Namespace flags that clone() must not carry. */
static const unsigned long clone_namespace_flags[] = {
  CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUTS,
  CLONE_NEWIPC, CLONE_NEWCGROUP,
};

static gboolean
fail (GError    **error,
      const char *what,
      int         result)
{
  g_set_error (error, MCP_SECCOMP_ERROR, 0, _("Building the sandbox's seccomp filter failed at %s: %s"),
               what, g_strerror (-result));
  return FALSE;
}

static gboolean
deny_all (scmp_filter_ctx     ctx,
          const char * const *names,
          int                 errno_value,
          GError            **error)
{
  int result;

  for (const char * const *name = names; *name != NULL; name++)
    {
      int number = seccomp_syscall_resolve_name (*name);

      /* Not every call exists on every architecture. */
      if (number == __NR_SCMP_ERROR)
        continue;
      if ((result = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (errno_value), number, 0)) < 0)
        return fail (error, *name, result);
    }
  return TRUE;
}

static gboolean
add_rules (scmp_filter_ctx   ctx,
           GError          **error)
{
  int result;

  if (!deny_all (ctx, denied_syscalls, EPERM, error) ||
      !deny_all (ctx, memory_syscalls, ENOSYS, error))
    return FALSE;

  for (gsize i = 0; i < G_N_ELEMENTS (clone_namespace_flags); i++)
    if ((result = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (clone), 1,
                                    SCMP_A0 (SCMP_CMP_MASKED_EQ, clone_namespace_flags[i],
                                             clone_namespace_flags[i]))) < 0)
      return fail (error, "clone", result);

  /* clone3 passes its flags in memory, out of a filter's reach: make it
   * look absent so that the C library falls back to clone(). */
  if ((result = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (ENOSYS), SCMP_SYS (clone3), 0)) < 0)
    return fail (error, "clone3", result);

  /* Sockets: AF_UNIX only (asyncio needs a socketpair; the RPC channel is
   * inherited). */
  if ((result = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EAFNOSUPPORT), SCMP_SYS (socket), 1,
                                  SCMP_A0 (SCMP_CMP_NE, AF_UNIX))) < 0 ||
      (result = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EAFNOSUPPORT), SCMP_SYS (socketpair), 1,
                                  SCMP_A0 (SCMP_CMP_NE, AF_UNIX))) < 0)
    return fail (error, "socket", result);

  /* No typing into the terminal of whoever started the pool. */
  if ((result = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (ioctl), 1,
                                  SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI))) < 0)
    return fail (error, "ioctl", result);
  return TRUE;
}

int
mcp_seccomp_filter_fd (GError **error)
{
  scmp_filter_ctx ctx = seccomp_init (SCMP_ACT_ALLOW);
  int fd = -1;
  int result;

  if (ctx == NULL)
    {
      g_set_error (error, MCP_SECCOMP_ERROR, 0, _("libseccomp could not create a filter"));
      return -1;
    }
  if (add_rules (ctx, error))
    {
      fd = memfd_create ("mcp-pool-seccomp", MFD_CLOEXEC);
      if (fd < 0)
        fail (error, "memfd_create", -errno);
      else if ((result = seccomp_export_bpf (ctx, fd)) < 0 || lseek (fd, 0, SEEK_SET) < 0)
        {
          fail (error, "export", result < 0 ? result : -errno);
          close (fd);
          fd = -1;
        }
    }
  seccomp_release (ctx);
  return fd;
}
