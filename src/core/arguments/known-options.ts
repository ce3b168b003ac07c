import type { RheoLimits } from '../limits.js';
import { assertKnownKeys, optionKeys } from '../option-keys.js';
import type {
  CallOptions,
  DeadLetterOptions,
  DeleteOptions,
  FetchOptions,
  GroupOptions,
  LagOptions,
  NackOptions,
  QueryOptions,
  ReadOptions,
  RedriveOptions,
  RenewOptions,
  ReplayOptions,
  ResetOptions,
  StreamOptions,
  TrimOptions,
} from '../types.js';

const CALL = optionKeys<CallOptions>()('signal', 'timeoutMs');
const NACK = optionKeys<NackOptions>()('delayMs', 'signal', 'timeoutMs');
const READ = optionKeys<ReadOptions>()('partition', 'after', 'limit', 'maxBytes', 'signal', 'timeoutMs');

/**
 * The options each facade call takes, by the label its checks use
 * (`'fetch options'`, …). `assertOptions` refuses any other key, so a typo
 * fails the call instead of being ignored.
 */
const BY_LABEL: ReadonlyMap<string, readonly string[]> = new Map<string, readonly string[]>([
  ...['migrate', 'ping', 'listStreams', 'listGroups', 'groupInfo', 'setRetention', 'append', 'appendBatch'].map(
    (call): [string, readonly string[]] => [`${call} options`, CALL],
  ),
  ...['ack', 'reject', 'release', 'leaveGroup', 'releasePartitions', 'commit', 'members'].map(
    (call): [string, readonly string[]] => [`${call} options`, CALL],
  ),
  ...['ackMany', 'rejectMany', 'releaseMany', 'settleMany'].map((call): [string, readonly string[]] => [call, CALL]),
  ['nack options', NACK],
  ['nackMany', NACK],
  ['createStream options', optionKeys<StreamOptions>()('partitions', 'retention', 'signal', 'timeoutMs')],
  ['createGroup options', optionKeys<GroupOptions>()('startAfter', 'startAt', 'maxAttempts', 'partitions', 'signal', 'timeoutMs')],
  ['trim options', optionKeys<TrimOptions>()('before', 'keep', 'force', 'signal', 'timeoutMs')],
  ['deleteGroup options', optionKeys<DeleteOptions>()('confirm', 'signal', 'timeoutMs')],
  ['deleteStream options', optionKeys<DeleteOptions>()('confirm', 'signal', 'timeoutMs')],
  ['read options', READ],
  ['readOwned options', READ],
  [
    'query options',
    optionKeys<QueryOptions>()(
      'type',
      'key',
      'where',
      'correlationId',
      'from',
      'to',
      'afterSequence',
      'untilSequence',
      'partition',
      'order',
      'limit',
      'cursor',
      'maxBytes',
      'signal',
      'timeoutMs',
    ),
  ],
  ['fetch options', optionKeys<FetchOptions>()('limit', 'consumerId', 'leaseMs', 'partitions', 'maxBytes', 'signal', 'timeoutMs')],
  ['renew options', optionKeys<RenewOptions>()('leaseMs', 'signal', 'timeoutMs')],
  ['lag options', optionKeys<LagOptions>()('partitions', 'signal', 'timeoutMs')],
  ['replay options', optionKeys<ReplayOptions>()('partitions', 'signal', 'timeoutMs')],
  ['resetGroup options', optionKeys<ResetOptions>()('confirm', 'partitions', 'startAfter', 'startAt', 'signal', 'timeoutMs')],
  ['deadLetters options', optionKeys<DeadLetterOptions>()('limit', 'after', 'maxBytes', 'signal', 'timeoutMs')],
  ['redrive options', optionKeys<RedriveOptions>()('eventIds', 'signal', 'timeoutMs')],
  ['limits', optionKeys<RheoLimits>()('maxEventBytes', 'maxBatchBytes')],
]);

/**
 * Refuses keys the labelled facade call does not take; a label not listed
 * here checks nothing (`heartbeat options` are checked by
 * `heartbeatRequest` in ownership-arguments.ts, which this module must not
 * import: that module imports the argument checks).
 */
export function assertKnownOptions(what: string, options: unknown): void {
  const known = BY_LABEL.get(what);
  if (known !== undefined) assertKnownKeys(what, options, known);
}
