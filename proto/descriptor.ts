import { readFileSync } from 'node:fs';

/**
 * The binary FileDescriptorSet of every Actor proto (`buf build -o proto/descriptor/actor.binpb`),
 * served by each service's gRPC reflection so that `buf curl` and other generic clients can call it.
 */
export function loadDescriptorSet(): Buffer {
  return readFileSync(new URL('./descriptor/actor.binpb', import.meta.url));
}
