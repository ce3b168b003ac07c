import { example as broadwayPipeline } from './broadway-pipeline.js';
import type { Example } from './example-kit.js';
import { example as failureMapping } from './failure-mapping.js';
import { example as flowStages } from './flow-stages.js';
import { example as plainConsumer } from './plain-consumer.js';

/** Every example, in the notebook's order; `npm run example -- <name>` picks one by name. */
export const examples: Array<Example<unknown>> = [plainConsumer, flowStages, broadwayPipeline, failureMapping];
