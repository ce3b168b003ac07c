import { Writable } from 'node:stream';

/** A sink that keeps every chunk written to it, for asserting what a pipeline emitted. */
export function collect<C>(into: C[]): Writable {
  return new Writable({
    objectMode: true,
    write(chunk: C, _encoding, callback) {
      into.push(chunk);
      callback();
    },
  });
}
