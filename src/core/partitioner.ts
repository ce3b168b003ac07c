/**
 * Kafka's default partitioner: murmur2 over the UTF-8 bytes of the key with
 * seed 0x9747b28c, masked to a positive int, modulo the partition count. A key
 * therefore lands on the same partition number as with Kafka's Java client.
 */
export function murmur2(data: Uint8Array): number {
  const length = data.length;
  const seed = 0x9747b28c;
  const m = 0x5bd1e995;
  const r = 24;
  let h = (seed ^ length) | 0;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k =
      (data[i4]! & 0xff) |
      ((data[i4 + 1]! & 0xff) << 8) |
      ((data[i4 + 2]! & 0xff) << 16) |
      ((data[i4 + 3]! & 0xff) << 24);
    k = Math.imul(k, m);
    k ^= k >>> r;
    k = Math.imul(k, m);
    h = Math.imul(h, m);
    h ^= k;
  }
  const tail = length4 * 4;
  const rest = length & 3;
  if (rest > 0) {
    if (rest === 3) h ^= (data[tail + 2]! & 0xff) << 16;
    if (rest >= 2) h ^= (data[tail + 1]! & 0xff) << 8;
    h ^= data[tail]! & 0xff;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

const encoder = new TextEncoder();

export function partitionForKey(key: string, partitions: number): number {
  return (murmur2(encoder.encode(key)) & 0x7fffffff) % partitions;
}
