#!/bin/sh
# `npm run test:mutation [area...]`: StrykerJS over the memory-backed core, one
# area at a time (memory-structures, memory, producer, runtime, consumer, sinks, transforms, core;
# all but memory-structures by default), so each area's report is complete even
# if a later one is cut short. Reports: reports/mutation/<area>.json and .html.
set -e
cd "$(dirname "$0")/.."
for area in ${*:-memory producer runtime consumer sinks transforms core}; do
  RHEO_MUTATION_AREA="$area" npx stryker run
done
