import { invalidArgument } from './errors.js';
import type { JsonObject } from './types.js';
import { assertPlainObject, assertString } from './validation.js';

/** Metadata key: the id shared by every event of one flow, set from the first event's id on. */
export const CORRELATION_ID = 'correlationId';
/** Metadata key: the id of the event that directly caused this one. */
export const CAUSATION_ID = 'causationId';

/** Same rule as an event id, since both keys normally hold one: 1-200 characters, no U+0000, no lone surrogate. */
export function assertLineageId(what: string, value: unknown): asserts value is string {
  assertString(what, value, { min: 1, max: 200 });
}

/**
 * The lineage keys an append input asks for, before its own metadata:
 * `causedBy` gives `causationId = causedBy.id` and `correlationId =
 * causedBy.metadata.correlationId ?? causedBy.id`; the input's explicit
 * `correlationId`/`causationId` are returned apart because they win over
 * the metadata's keys, which in turn win over what `causedBy` derives.
 */
export function lineageOf(
  input: { causedBy?: unknown; correlationId?: unknown; causationId?: unknown },
  what: string,
): { derived: JsonObject | null; explicit: JsonObject | null } {
  // Each field read once: an input may carry getters, and a value checked must be the value used.
  const { causedBy: cause, correlationId: explicitCorrelation, causationId: explicitCausation } = input;
  let derived: Record<string, string> | null = null;
  if (cause !== undefined) {
    assertPlainObject(`${what}.causedBy`, cause);
    const id = cause.id;
    assertLineageId(`${what}.causedBy.id`, id);
    const metadata = cause.metadata;
    let correlationId: unknown;
    if (metadata !== undefined && metadata !== null) {
      assertPlainObject(`${what}.causedBy.metadata`, metadata);
      correlationId = metadata[CORRELATION_ID];
    }
    if (correlationId !== undefined) assertLineageId(`${what}.causedBy.metadata.${CORRELATION_ID}`, correlationId);
    derived = { [CORRELATION_ID]: correlationId ?? id, [CAUSATION_ID]: id };
  }
  let explicit: Record<string, string> | null = null;
  if (explicitCorrelation !== undefined) {
    assertLineageId(`${what}.correlationId`, explicitCorrelation);
    (explicit ??= {})[CORRELATION_ID] = explicitCorrelation;
  }
  if (explicitCausation !== undefined) {
    assertLineageId(`${what}.causationId`, explicitCausation);
    (explicit ??= {})[CAUSATION_ID] = explicitCausation;
  }
  return { derived, explicit };
}

/** Lineage keys written straight into `metadata` follow the same rule as the explicit fields. */
export function assertLineageKeys(what: string, metadata: JsonObject): void {
  for (const key of [CORRELATION_ID, CAUSATION_ID]) {
    if (Object.hasOwn(metadata, key)) assertLineageId(`${what}.metadata.${key}`, metadata[key]);
  }
}

/** `query({ correlationId })` is metadata containment; a conflicting `where.metadata.correlationId` can match nothing. */
export function withCorrelation(whereMetadata: JsonObject | undefined, correlationId: unknown): JsonObject {
  assertLineageId('query correlationId', correlationId);
  if (whereMetadata !== undefined && Object.hasOwn(whereMetadata, CORRELATION_ID) && whereMetadata[CORRELATION_ID] !== correlationId) {
    throw invalidArgument('query correlationId and where.metadata.correlationId differ, so no event could match');
  }
  return { ...whereMetadata, [CORRELATION_ID]: correlationId };
}
