// The group reaper's watchdog (see group-reaper.ts): a separate process, in a process group of its own,
// that outlives the process that started it. It reads lines from stdin: `+<pgid>` when a subprocess
// group starts, `-<pgid>` when it ended. When stdin ends (the parent exited or was killed, even with
// SIGKILL, because the kernel closes the pipe either way), every group still listed gets SIGTERM, then
// SIGKILL after a short grace, and the watchdog exits. Plain JavaScript so that it starts with bare
// `node`, without the TypeScript loader.

const graceMs = Number(process.argv[2] ?? 250);
const groups = new Set();
let buffered = '';

process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  let newline;
  while ((newline = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, newline);
    buffered = buffered.slice(newline + 1);
    const pgid = Number(line.slice(1));
    if (!Number.isInteger(pgid) || pgid <= 1) continue;
    if (line[0] === '+') groups.add(pgid);
    else if (line[0] === '-') groups.delete(pgid);
  }
});

function signalAll(signal) {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, signal);
    } catch {
      groups.delete(pgid); // already gone
    }
  }
}

let reaping = false;
function reap() {
  if (reaping) return;
  reaping = true;
  if (groups.size === 0) process.exit(0);
  signalAll('SIGTERM');
  setTimeout(() => {
    signalAll('SIGKILL');
    process.exit(0);
  }, graceMs);
}

process.stdin.on('end', reap);
process.stdin.on('close', reap);
process.stdin.on('error', reap);
// Signals meant for the parent's terminal or service manager: reap rather than die with groups left.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, reap);
