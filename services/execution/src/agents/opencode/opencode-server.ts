import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import { spawnProcessGroup, type ProcessExit, type ProcessGroup } from '../subprocess/process-group.js';

/** Where an `opencode serve` answers, and the basic-auth header it wants. */
export interface OpencodeEndpoint {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  url: string;
  /** `Basic ...` for a server protected by `OPENCODE_SERVER_PASSWORD`; undefined for an open one. */
  authorization?: string;
}

/** An `opencode serve` this adapter started for one run, in its own process group. */
export interface StartedOpencodeServer {
  endpoint: OpencodeEndpoint;
  group: ProcessGroup;
  /** The last lines the server wrote to stderr, for error messages. */
  stderrTail(): string;
}

/** How much of the server's stderr is kept for error messages. */
const stderrTailCharacters = 2_000;

/** The line `opencode serve` prints once it accepts connections (1.x: `opencode server listening on http://...`). */
const listeningLine = /listening on (https?:\/\/[^\s]+)/;

/** The basic-auth header for opencode's server (`OPENCODE_SERVER_USERNAME`, default `opencode`). */
export function basicAuthorization(password: string, username = 'opencode'): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
}

/**
 * Starts `opencode serve` on a free loopback port in `cwd`, protected by a fresh random password (so
 * no other local user can drive it), and resolves once it prints that it listens. `--port 0` is not
 * used: opencode 1.x treats it as its default 4096. Resolves with the failure reason instead when the
 * binary is missing, the server exits first, or `signal` aborts.
 */
export async function startOpencodeServer(options: {
  binaryPath: string;
  cwd: string;
  environment: Record<string, string>;
  signal: AbortSignal;
}): Promise<{ server: StartedOpencodeServer } | { failure: ProcessExit | 'aborted'; stderr: string }> {
  const port = await freeLoopbackPort();
  const password = randomBytes(24).toString('base64url');
  const group = spawnProcessGroup(options.binaryPath, ['serve', '--hostname', '127.0.0.1', '--port', String(port)], {
    cwd: options.cwd,
    environment: { ...options.environment, OPENCODE_SERVER_PASSWORD: password, OPENCODE_SERVER_USERNAME: 'opencode' },
  });
  group.child.stdin.end();
  let stderr = '';
  group.child.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-stderrTailCharacters * 2);
  });
  const stdoutDecoder = new StringDecoder('utf8');
  let stdout = '';
  const listening = new Promise<string>((resolve) => {
    group.child.stdout.on('data', (chunk: Buffer) => {
      // Only the start-up line matters; keep a bounded window so a chatty server cannot grow it.
      stdout = (stdout + stdoutDecoder.write(chunk)).slice(-4_000);
      const match = listeningLine.exec(stdout);
      if (match) resolve(match[1]!.replace(/\/+$/, ''));
    });
  });
  const aborted = new Promise<'aborted'>((resolve) => {
    if (options.signal.aborted) resolve('aborted');
    options.signal.addEventListener('abort', () => resolve('aborted'), { once: true });
  });
  const outcome = await Promise.race([listening, group.closed, aborted]);
  const tail = () => stderr.trim().slice(-stderrTailCharacters);
  if (typeof outcome === 'string' && outcome !== 'aborted') {
    return { server: { endpoint: { url: outcome, authorization: basicAuthorization(password) }, group, stderrTail: tail } };
  }
  group.stop();
  if (outcome === 'aborted') await group.closed;
  return { failure: outcome, stderr: tail() };
}

/** A TCP port free on 127.0.0.1 right now (the OS picks it; the server binds it a moment later). */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}
