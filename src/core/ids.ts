import { randomFillSync } from 'node:crypto';
import type { Clock } from './clock.js';

// One randomFillSync per 4 KiB instead of one per id: at ~1 µs a call, per-id
// calls were the single largest cost of appending to the memory backend.
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let poolOffset = POOL_BYTES;

function randomSlice(n: number): number {
  if (poolOffset + n > POOL_BYTES) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += n;
  return at;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

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
  const r = randomSlice(8);
  const b = pool;
  const hi = Math.floor(ms / 0x1000000);
  const lo = ms % 0x1000000;
  return (
    HEX[(hi >>> 16) & 0xff]! +
    HEX[(hi >>> 8) & 0xff]! +
    HEX[hi & 0xff]! +
    HEX[(lo >>> 16) & 0xff]! +
    '-' +
    HEX[(lo >>> 8) & 0xff]! +
    HEX[lo & 0xff]! +
    '-' +
    HEX[0x70 | ((counter >>> 8) & 0x0f)]! +
    HEX[counter & 0xff]! +
    '-' +
    HEX[0x80 | (b[r]! & 0x3f)]! +
    HEX[b[r + 1]!]! +
    '-' +
    HEX[b[r + 2]!]! +
    HEX[b[r + 3]!]! +
    HEX[b[r + 4]!]! +
    HEX[b[r + 5]!]! +
    HEX[b[r + 6]!]! +
    HEX[b[r + 7]!]!
  );
}

const LEASE_ID_CHARS = 22;
// 3 KiB of random bytes are 4096 base64url characters: 186 lease ids per refill.
const leaseIdBytes = Buffer.allocUnsafe(3 * 1024);
let leaseIdText = '';
let leaseIdOffset = 0;

/**
 * An unguessable fencing token: 22 base64url characters, each 6 random bits
 * (132 bits). Ids are cut from one encoded string per refill: encoding 16
 * bytes per id was among the top costs of a claim in profiles.
 */
export function newLeaseId(): string {
  if (leaseIdOffset + LEASE_ID_CHARS > leaseIdText.length) {
    randomFillSync(leaseIdBytes);
    leaseIdText = leaseIdBytes.toString('base64url');
    leaseIdOffset = 0;
  }
  const at = leaseIdOffset;
  leaseIdOffset += LEASE_ID_CHARS;
  return leaseIdText.slice(at, at + LEASE_ID_CHARS);
}
