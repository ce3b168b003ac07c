/** What `rheo.ping()` reports. */
export interface PingResult {
  /** The backend's name (`memory`, `postgres`). */
  backend: string;
  /** Wall time of the round trip in milliseconds, measured by the process's monotonic clock. */
  roundTripMs: number;
  /** The installed migration version; `null` for a backend without a schema, or a schema not migrated yet. */
  schemaVersion: number | null;
}
