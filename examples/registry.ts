import { example as broadwayPipeline } from './broadway-pipeline.js';
import { example as consumerGroups } from './consumer-groups.js';
import type { Example } from './example-kit.js';
import { example as failureMapping } from './failure-mapping.js';
import { example as flowStages } from './flow-stages.js';
import { example as plainConsumer } from './plain-consumer.js';
import { example as resume } from './resume.js';

/**
 * Every example: the core model first, then the notebook's three parts in order.
 * `npm run example -- <name>` picks one by name; `npm run demo` runs them all,
 * ending with `resume`, which shows a durable store carrying over between runs.
 */
export const examples: Array<Example<unknown>> = [consumerGroups, plainConsumer, flowStages, broadwayPipeline, failureMapping, resume];
