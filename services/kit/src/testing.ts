import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { remoteError } from './errors.js';

/**
 * Where a test's service keeps its data. With `DATABASE_URL` set (CI's Postgres run), a fresh
 * database is created per call so tests never see each other's rows and can run in parallel;
 * otherwise an in-memory PGlite. Call `drop()` in afterAll.
 */
export async function testDatabase(): Promise<{ databaseUrl?: string; dataDir: string; drop(): Promise<void> }> {
  const baseUrl = process.env.DATABASE_URL;
  if (!baseUrl) return { dataDir: 'memory://', drop: async () => undefined };
  const name = `actor_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return {
    databaseUrl: url.toString(),
    dataDir: 'memory://',
    async drop() {
      const client = new pg.Client({ connectionString: baseUrl });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * Awaits a gRPC call that must fail and returns its status, Actor code and message. A call that
 * succeeds fails the test.
 */
export async function rejection(call: Promise<unknown>): Promise<{ status: number; code?: string; message: string }> {
  let result: unknown;
  try {
    result = await call;
  } catch (error) {
    const remote = remoteError(error);
    if (!remote) throw error;
    return remote;
  }
  throw new Error(`expected the call to fail, it returned ${JSON.stringify(result)}`);
}

/** Whether a process (pid > 0) or any process of a group (-pgid) still exists: signal 0 delivers nothing. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
