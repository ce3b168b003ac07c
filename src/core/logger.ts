import { invalidArgument } from './errors.js';

/** Fields of one log record: plain data, the error (if any) under `err`, as pino expects. */
export type LogFields = Record<string, unknown>;

/**
 * What rheo logs through: the subset of pino's interface (also met by
 * bunyan, winston's child loggers and `console` wrapped to take an object
 * first). rheo calls `level(fields, message)` and nothing else.
 */
export interface Logger {
  debug(fields: LogFields, message: string): void;
  info(fields: LogFields, message: string): void;
  warn(fields: LogFields, message: string): void;
  error(fields: LogFields, message: string): void;
}

export type LogLevel = keyof Logger;

const LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** The default: logs nothing. */
export const silentLogger: Logger = Object.freeze({
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
});

/** `undefined` → the silent logger; anything without the four methods is `invalid_argument`. */
export function resolveLogger(value: unknown): Logger {
  if (value === undefined) return silentLogger;
  if (value === null || typeof value !== 'object') {
    throw invalidArgument('logger must be an object with debug, info, warn and error methods (pino-compatible)');
  }
  const candidate = value as Record<string, unknown>;
  const missing = LEVELS.filter((level) => typeof candidate[level] !== 'function');
  if (missing.length > 0) {
    throw invalidArgument(`logger lacks the method(s) ${missing.join(', ')}: expected a pino-compatible logger`);
  }
  return value as Logger;
}

/**
 * Logs without ever throwing into rheo: a logger that fails (a closed
 * transport, a serializer that throws on a cyclic cause) must not turn a
 * diagnostic into a crash of the pipeline that reported it.
 */
export function log(logger: Logger, level: LogLevel, fields: LogFields, message: string): void {
  if (logger === silentLogger) return;
  try {
    logger[level](fields, message);
  } catch {
    // Nothing sensible to do: the logger is the place failures would go.
  }
}
