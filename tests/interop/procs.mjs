// procs.mjs — the processes of a test, read from /proc: whether one still
// runs (and is the same process, not a reused pid), its descendants with
// their command lines, and a bounded wait for a set of them to be gone.
import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export function readStat (pid) {
  try {
    const stat = readFileSync (`/proc/${pid}/stat`, 'utf8');
    /* Fields after "pid (comm) ": state is field 3, ppid 4, starttime 22. */
    const fields = stat.slice (stat.lastIndexOf (')') + 2).split (' ');
    return { state: fields[0], ppid: Number (fields[1]), startTime: fields[19] };
  } catch {
    return null;
  }
}

/* Alive: exists, is the same process (not a reused pid) and has not exited. */
export function isAlive (pid, startTime) {
  const stat = readStat (pid);

  return stat !== null && stat.startTime === startTime && stat.state !== 'Z' && stat.state !== 'X';
}

export function childrenOf (pid) {
  const children = [];
  let tasks = [];

  try {
    tasks = readdirSync (`/proc/${pid}/task`);
  } catch {
    return children;
  }
  for (const task of tasks) {
    try {
      for (const child of readFileSync (`/proc/${pid}/task/${task}/children`, 'utf8').trim ().split (/\s+/))
        if (child !== '')
          children.push (Number (child));
    } catch {
      /* The thread ended meanwhile. */
    }
  }
  return children;
}

/* Every descendant of @pid, with what identifies it. */
export function descendantsOf (pid) {
  const found = [];
  const queue = [pid];

  while (queue.length > 0) {
    for (const child of childrenOf (queue.shift ())) {
      const stat = readStat (child);
      let cmdline = '';

      if (stat === null)
        continue;
      try {
        cmdline = readFileSync (`/proc/${child}/cmdline`, 'utf8').split ('\0').join (' ').trim ();
      } catch { /* gone */ }
      found.push ({ pid: child, startTime: stat.startTime, cmdline });
      queue.push (child);
    }
  }
  return found;
}

export async function waitGone (processes, timeoutMs) {
  const deadline = Date.now () + timeoutMs;
  let alive = processes;

  while ((alive = alive.filter ((p) => isAlive (p.pid, p.startTime))).length > 0 && Date.now () < deadline)
    await sleep (20);
  return alive;
}
