import type * as OtelApi from '@opentelemetry/api';
import { isRheoError } from '../core/errors.js';
import type { Lease } from '../core/types.js';
import type { Api } from './otel-loader.js';
import { readTraceContext } from './trace-context.js';

export const SYSTEM = 'rheo';

/** The producer context an event carries in its metadata, as an OpenTelemetry span context. */
export function remoteContext(api: Api, lease: Lease<unknown>): OtelApi.SpanContext | null {
  const remote = readTraceContext(lease.event.metadata);
  if (remote === null) return null;
  let traceState: OtelApi.TraceState | undefined;
  if (remote.traceState !== null) {
    try {
      traceState = api.createTraceState(remote.traceState);
    } catch {
      traceState = undefined;
    }
  }
  return { traceId: remote.traceId, spanId: remote.spanId, traceFlags: remote.traceFlags, isRemote: true, traceState };
}

export function leaseAttributes(lease: Lease<unknown>, type: 'process' | 'settle', name: string = type): OtelApi.Attributes {
  return {
    'messaging.system': SYSTEM,
    'messaging.operation.type': type,
    'messaging.operation.name': name,
    'messaging.destination.name': lease.stream,
    'messaging.destination.partition.id': String(lease.event.partition),
    'messaging.consumer.group.name': lease.group,
    'messaging.message.id': lease.event.id,
    'messaging.client.id': lease.consumerId,
    'rheo.event.type': lease.event.type,
    'rheo.event.sequence': lease.event.sequence,
    'rheo.delivery.attempt': lease.attempt,
  };
}

export function seconds(startedMs: number): number {
  return (performance.now() - startedMs) / 1000;
}

export function errorType(error: unknown): string {
  if (isRheoError(error)) return error.code;
  return error instanceof Error ? error.name : 'unknown';
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
