import { describe, expect, it } from 'vitest';
import { murmur2, partitionForKey } from '../../src/core/partitioner.js';

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

describe('murmur2 (Kafka default partitioner)', () => {
  // Kafka's own vectors: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java, testMurmur2.
  const vectors: Array<[string, number]> = [
    ['21', -973932308],
    ['foobar', -790332482],
    ['a-little-bit-long-string', -985981536],
    ['a-little-bit-longer-string', -1486304829],
    ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
    ['abc', 479470107],
  ];

  for (const [key, expected] of vectors) {
    it(`murmur2(${JSON.stringify(key)}) is ${expected}`, () => {
      expect(murmur2(utf8(key))).toBe(expected);
    });
  }

  it('covers every tail length (0..3 leftover bytes)', () => {
    // "21" has 2 tail bytes, "abc" 3, "foobar" 2 after one block; add lengths 0, 1 and 4.
    const results = ['', 'a', 'abcd'].map((k) => murmur2(utf8(k)));
    for (const h of results) {
      expect(Number.isInteger(h)).toBe(true);
      expect(h).toBeGreaterThanOrEqual(-(2 ** 31));
      expect(h).toBeLessThan(2 ** 31);
    }
    expect(new Set(results).size).toBe(3);
  });

  it('hashes the UTF-8 bytes, not UTF-16 code units', () => {
    expect(murmur2(utf8('é'))).toBe(murmur2(new Uint8Array([0xc3, 0xa9])));
    expect(murmur2(utf8('é'))).not.toBe(murmur2(new Uint8Array([0xe9])));
  });
});

describe('partitionForKey', () => {
  it('is (murmur2(key) & 0x7fffffff) % partitions', () => {
    for (const key of ['21', 'foobar', 'abc', 'order-17', 'ключ']) {
      for (const n of [1, 2, 3, 7, 12, 100]) {
        expect(partitionForKey(key, n)).toBe((murmur2(utf8(key)) & 0x7fffffff) % n);
      }
    }
  });

  it('matches Kafka partitions for the known vectors', () => {
    // (hash & 0x7fffffff) % n computed by hand from the vectors above.
    expect(partitionForKey('21', 3)).toBe((-973932308 & 0x7fffffff) % 3);
    expect(partitionForKey('foobar', 10)).toBe((-790332482 & 0x7fffffff) % 10);
    expect(partitionForKey('abc', 4)).toBe(479470107 % 4);
    expect(partitionForKey('21', 3)).toBe(0);
    expect(partitionForKey('abc', 4)).toBe(3);
  });

  it('always lands in 0..n-1 and is stable', () => {
    for (let i = 0; i < 500; i++) {
      const key = `key-${i}`;
      const p = partitionForKey(key, 7);
      expect(p).toBeGreaterThanOrEqual(0);
      expect(p).toBeLessThan(7);
      expect(partitionForKey(key, 7)).toBe(p);
    }
  });

  it('with one partition is always 0', () => {
    expect(['a', 'b', '', 'zzz'].map((k) => partitionForKey(k, 1))).toEqual([0, 0, 0, 0]);
  });
});
