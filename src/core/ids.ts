import { randomBytes } from 'node:crypto';
import type { Clock } from './clock.js';

let lastMs = -1;
let counter = 0;

/**
 * UUIDv7 (RFC 9562): 48-bit millisecond timestamp, then a 12-bit counter that
 * keeps ids generated within one millisecond in order, then random bits.
 */
export function uuidv7(clock?: Clock): string {
  let ms = clock ? clock.now() : Date.now();
  if (ms <= lastMs) {
    counter++;
    if (counter > 0xfff) {
      lastMs++;
      counter = 0;
    }
    ms = lastMs;
  } else {
    lastMs = ms;
    counter = 0;
  }
  const bytes = randomBytes(16);
  bytes.writeUIntBE(ms, 0, 6);
  bytes[6] = 0x70 | ((counter >> 8) & 0x0f);
  bytes[7] = counter & 0xff;
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** An unguessable fencing token: 128 random bits. */
export function newLeaseId(): string {
  return randomBytes(16).toString('base64url');
}
