import type { NormalizedQuery } from './backend.js';
import { decodeQueryCursor } from './query-cursor.js';
import type { QueryResult, RheoEvent } from './types.js';

/**
 * Follows `nextCursor` from `first` on, one page per need: a generator runs
 * only as far as the consumer pulls, so the next page is requested only once
 * the current one is used up, and `return()` (a `for await` left early)
 * stops it before another request.
 */
export async function* queryPages<T>(
  first: NormalizedQuery,
  fetchPage: (query: NormalizedQuery) => Promise<QueryResult<T>>,
  stream: string,
): AsyncGenerator<RheoEvent<T>, void, undefined> {
  let query = first;
  while (true) {
    const page = await fetchPage(query);
    yield* page.events;
    if (page.nextCursor === null) return;
    query = { ...query, cursor: decodeQueryCursor(stream, page.nextCursor) };
  }
}
