import { example as broadwayPipeline } from './broadway-pipeline.js';
import { example as competingConsumers } from './competing-consumers.js';
import { example as consumeModes } from './consume-modes.js';
import { example as consumerGroups } from './consumer-groups.js';
import type { Example } from './example-kit.js';
import { example as failureMapping } from './failure-mapping.js';
import { example as flowStages } from './flow-stages.js';
import { example as plainConsumer } from './plain-consumer.js';
import { example as replayFromPoint } from './replay-from-point.js';
import { example as resume } from './resume.js';
import { example as riskPipeline } from './risk-pipeline.js';

/**
 * Every example: the core model first, then the notebook's three parts in
 * order, the risk pipeline of the Broadway notes, the consumer's own, and
 * `resume`, which shows a durable store carrying over between runs.
 * `npm run example -- <name>` picks one by name; `npm run demo` runs them all.
 */
export const examples: Array<Example<unknown>> = [
  consumerGroups,
  plainConsumer,
  flowStages,
  broadwayPipeline,
  failureMapping,
  riskPipeline,
  consumeModes,
  competingConsumers,
  replayFromPoint,
  resume,
];
