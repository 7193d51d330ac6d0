/**
 * What one tiny unary gRPC call costs in CPU, client and server in this process, layer by layer: a
 * bare @grpc/grpc-js call (bytes in, bytes out, no codec, no middleware), nice-grpc on both ends, a
 * kit client (deadline + retry middleware) against a nice-grpc server, and kit on both ends (error
 * middleware, reflection and health registered). Each runs one call at a time and 64 in flight; the
 * call is `grpc.health.v1.Health/Check`. `cpu µs/call` is this process's CPU per call (both ends).
 *
 *   npx tsx bench/lease/grpc-call-profile.ts
 *   CALLS=4000 npx tsx bench/lease/grpc-call-profile.ts
 */
import * as grpc from '@grpc/grpc-js';
import { createChannel, createClient as createBareClient, createServer } from 'nice-grpc';
import { HealthDefinition, HealthServiceImpl, HealthState } from 'nice-grpc-server-health';
import { closeChannels, createClient, createLogger, startGrpcServer } from '@actor/kit';

const calls = Number(process.env.CALLS ?? 3_000);

interface Line {
  what: string;
  inFlight: number;
  perSecond: number;
  cpuMicros: number;
}

async function measure(what: string, inFlight: number, call: () => Promise<unknown>): Promise<Line> {
  for (let index = 0; index < 200; index++) await call();
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < calls) await call();
    }),
  );
  const elapsed = performance.now() - startedAt;
  const cpu = process.cpuUsage(cpuBefore);
  return { what, inFlight, perSecond: (calls / elapsed) * 1_000, cpuMicros: (cpu.user + cpu.system) / calls };
}

const lines: Line[] = [];
const both = async (what: string, call: () => Promise<unknown>) => {
  lines.push(await measure(what, 1, call));
  lines.push(await measure(what, 64, call));
};

// 1. Bare grpc-js: a handler that answers a fixed message, a client that sends raw bytes.
{
  const server = new grpc.Server();
  const reply = Buffer.from([0x08, 0x01]); // HealthCheckResponse { status: SERVING }
  server.addService(
    {
      check: {
        path: '/grpc.health.v1.Health/Check',
        requestStream: false,
        responseStream: false,
        requestSerialize: (value: Buffer) => value,
        requestDeserialize: (value: Buffer) => value,
        responseSerialize: (value: Buffer) => value,
        responseDeserialize: (value: Buffer) => value,
      },
    },
    { check: (_call: unknown, callback: grpc.sendUnaryData<Buffer>) => callback(null, reply) },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const empty = Buffer.alloc(0);
  const check = () =>
    new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(
        '/grpc.health.v1.Health/Check',
        (value: Buffer) => value,
        (value: Buffer) => value,
        empty,
        (error, value) => (error ? reject(error) : resolve(value!)),
      ),
    );
  await both('bare grpc-js client and server', check);
  client.close();
  server.forceShutdown();
}

// 1b. The same exchange as messages on one long-lived bidirectional stream (a request message in,
// a reply message out), to show what a call's fixed cost is against a message's.
{
  const server = new grpc.Server();
  const reply = Buffer.from([0x08, 0x01]);
  const passThrough = (value: Buffer) => value;
  const definition = {
    exchange: {
      path: '/bench.Echo/Exchange',
      requestStream: true,
      responseStream: true,
      requestSerialize: passThrough,
      requestDeserialize: passThrough,
      responseSerialize: passThrough,
      responseDeserialize: passThrough,
    },
  };
  server.addService(definition, {
    exchange: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      call.on('data', () => call.write(reply));
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const stream = client.makeBidiStreamRequest('/bench.Echo/Exchange', passThrough, passThrough);
  // Replies come back in order: each resolves the oldest pending exchange.
  const pending: Array<() => void> = [];
  stream.on('data', () => pending.shift()?.());
  stream.on('error', () => {}); // cancelled by the shutdown below
  const empty = Buffer.alloc(0);
  const exchange = () =>
    new Promise<void>((resolve) => {
      pending.push(resolve);
      stream.write(empty);
    });
  await both('bare grpc-js, one message each way on an open bidi stream', exchange);
  stream.end();
  client.close();
  server.forceShutdown();
}

// 2. nice-grpc on both ends, default options; then channelz and grpc-js's own retries off.
for (const [what, options] of [
  ['nice-grpc client and server (grpc-js defaults)', {}],
  ['nice-grpc client and server (channelz off)', { 'grpc.enable_channelz': 0 }],
  ['nice-grpc client and server (grpc-js retries off)', { 'grpc.enable_retries': 0 }],
  ['nice-grpc client and server (channelz off, grpc-js retries off)', { 'grpc.enable_channelz': 0, 'grpc.enable_retries': 0 }],
  ['nice-grpc client and server (grpc-js defaults, again)', {}],
] as const) {
  const server = createServer(options);
  server.add(HealthDefinition, HealthServiceImpl(HealthState()));
  const port = await server.listen('127.0.0.1:0');
  const channel = createChannel(`127.0.0.1:${port}`, undefined, options);
  const client = createBareClient(HealthDefinition, channel);
  await both(what, () => client.check({ service: '' }));

  if (what.endsWith('(grpc-js defaults)')) {
    const kitClient = createClient(HealthDefinition, `127.0.0.1:${port}`);
    await both('kit client (deadline + retry) -> nice-grpc server', () => kitClient.check({ service: '' }));
    closeChannels();
  }
  channel.close();
  await server.shutdown();
}

// 3. kit on both ends, as every Actor service runs.
{
  const server = await startGrpcServer({
    name: 'profile',
    address: '127.0.0.1:0',
    logger: createLogger('profile', 'silent'),
    serviceNames: [],
    register: () => {},
  });
  const client = createClient(HealthDefinition, server.address);
  await both('kit client -> kit server (error middleware, reflection, health)', () => client.check({ service: '' }));
  closeChannels();
  await server.shutdown();
}

console.log(`\nOne tiny unary call (Health/Check), client and server in this process, ${calls} calls each\n`);
console.log('| what | in flight | calls/s | cpu µs/call |');
console.log('| --- | ---: | ---: | ---: |');
for (const line of lines) {
  console.log(`| ${line.what} | ${line.inFlight} | ${line.perSecond.toFixed(0)} | ${line.cpuMicros.toFixed(0)} |`);
}
process.exit(0);
