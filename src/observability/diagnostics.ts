import diagnosticsChannel from 'node:diagnostics_channel';
import type { RheoEventMap, RheoEventName } from './lease-events.js';

/** Every event name, in a stable order. */
export const RHEO_EVENT_NAMES: readonly RheoEventName[] = Object.freeze([
  'lease',
  'ack',
  'retry',
  'dead-letter',
  'lease-lost',
  'settle-error',
  'fetch-error',
  'handler-error',
  'drain',
  'member-join',
  'member-leave',
  'rebalance',
]);

/** The `node:diagnostics_channel` name an event is published on: `rheo:<event>`. */
export function channelName(event: RheoEventName): `rheo:${RheoEventName}` {
  return `rheo:${event}`;
}

// Channel objects are created once: `diagnostics_channel.channel()` is a
// lookup in a WeakRef map, and `hasSubscribers` on a held channel is a field
// read, so an unobserved publish costs almost nothing on the hot path.
const channels = new Map(RHEO_EVENT_NAMES.map((name) => [name, diagnosticsChannel.channel(channelName(name))]));

/** Whether anybody subscribed to `rheo:<event>`: lets hot paths skip building a payload nobody reads. */
export function hasDiagnosticSubscribers(event: RheoEventName): boolean {
  return channels.get(event)?.hasSubscribers === true;
}

/** Publishes on `rheo:<event>` when somebody subscribed. */
export function publishDiagnostic<K extends RheoEventName>(event: K, payload: RheoEventMap[K][0]): void {
  const channel = channels.get(event);
  if (channel?.hasSubscribers) channel.publish(payload);
}

/** Anything with an `emit`: a plain EventEmitter, a stream, a typed emitter. */
export interface EventSink {
  emit(event: string, ...args: unknown[]): boolean;
}

/**
 * The one way rheo reports an event: publish on `rheo:<event>`, then emit on
 * `emitter`. No rheo event is named `error`, so an emitter without listeners
 * never throws here; a listener that throws propagates as with any emitter.
 */
export function report<K extends RheoEventName>(
  emitter: EventSink | null,
  event: K,
  payload: RheoEventMap[K][0],
): void {
  publishDiagnostic(event, payload);
  emitter?.emit(event, payload);
}
