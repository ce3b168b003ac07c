import { describe, expect, it } from 'vitest';
import { RenewingMap, RenewingSet } from '../../src/runtime/renewing-map.js';

describe('RenewingMap', () => {
  it('keeps every entry, in insertion order, through thousands of deletions (each 1,024th moves the entries to a new Map)', () => {
    const map = new RenewingMap<string, number>();
    const model = new Map<string, number>();
    let next = 0;
    // A window of live keys that slides: like leases claimed in batches and settled out of order.
    for (let round = 0; round < 60; round++) {
      for (let i = 0; i < 150; i++, next++) {
        map.set(`k${next}`, next);
        model.set(`k${next}`, next);
      }
      const keys = [...model.keys()];
      for (let i = keys.length - 1; i >= 0; i -= 2) {
        expect(map.delete(keys[i]!)).toBe(true);
        model.delete(keys[i]!);
      }
      expect(map.size).toBe(model.size);
      expect(map.keys()).toEqual([...model.keys()]);
      expect(map.values()).toEqual([...model.values()]);
    }
    expect(next - map.size).toBeGreaterThan(3 * 1024);
    expect(map.delete('missing')).toBe(false);
    for (const key of map.keys()) expect(map.get(key)).toBe(model.get(key));
    expect(map.has('k0')).toBe(false);
  });

  it('iterates a copy: a loop that deletes what it visits sees each entry once, whatever renews meanwhile', () => {
    const map = new RenewingMap<number, number>();
    for (let i = 0; i < 3000; i++) map.set(i, i);
    const seen: number[] = [];
    for (const value of map.values()) {
      seen.push(value);
      map.delete(value);
      if (value % 3 === 0) map.set(10_000 + value, value);
    }
    expect(seen).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    expect(map.size).toBe(1000);
    map.clear();
    expect(map.size).toBe(0);
    expect(map.values()).toEqual([]);
  });
});

describe('renewal', () => {
  it('happens at each 1,024th successful deletion, and only then', () => {
    const map = new RenewingMap<number, number>();
    const set = new RenewingSet<number>();
    for (let i = 0; i < 3000; i++) {
      map.set(i, i);
      set.add(i);
    }
    const both = (n: number) => [map.renewals, set.renewals, n];
    for (let i = 0; i < 1023; i++) {
      map.delete(i);
      set.delete(i);
    }
    // Failed deletions do not count.
    map.delete(0);
    set.delete(0);
    expect(both(1023)).toEqual([0, 0, 1023]);
    map.delete(1023);
    set.delete(1023);
    expect(both(1024)).toEqual([1, 1, 1024]);
    for (let i = 1024; i < 2048; i++) {
      map.delete(i);
      set.delete(i);
    }
    expect(both(2048)).toEqual([2, 2, 2048]);
    expect(map.size).toBe(952);
    expect(set.size).toBe(952);
    map.clear();
    expect(map.renewals).toBe(2);
  });
});

describe('RenewingSet', () => {
  it('keeps its members and their order through renewals', () => {
    const set = new RenewingSet<number>();
    for (let i = 0; i < 5000; i++) set.add(i);
    for (let i = 0; i < 4000; i++) expect(set.delete(i)).toBe(true);
    expect(set.delete(0)).toBe(false);
    expect(set.size).toBe(1000);
    expect(set.has(4999)).toBe(true);
    expect(set.values()).toEqual(Array.from({ length: 1000 }, (_, i) => 4000 + i));
    expect(new RenewingSet<number>().values()).toEqual([]);
  });
});
