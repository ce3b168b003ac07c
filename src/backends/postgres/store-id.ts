import type pg from 'pg';

/**
 * The store a PostgreSQL backend reaches, as `Backend.storeId`: server, port,
 * database and schema. Two backends of one process that agree on these share
 * every stream and group, whatever pools they use; two that differ in any of
 * them share nothing. The connection string wins over separate fields, as in
 * `pg` itself; a part left out resolves to one default for the whole process
 * (`pg`'s environment variables), so it is left out of the key too, except that
 * a missing database defaults to the user's name and the user then counts.
 * A connection string that is no URL (a key=value string) is kept whole.
 */
export function postgresStoreId(config: pg.ClientConfig, schema: string): string {
  let host = config.host ?? '';
  let port = config.port === undefined ? '' : String(config.port);
  let database = config.database ?? '';
  let user = config.user ?? '';
  if (config.connectionString !== undefined) {
    let url: URL;
    try {
      url = new URL(config.connectionString);
    } catch {
      return `postgres:${config.connectionString}#${schema}`;
    }
    try {
      host = decodeURIComponent(url.hostname) || url.searchParams.get('host') || host;
      port = url.port || url.searchParams.get('port') || port;
      database = decodeURIComponent(url.pathname.slice(1)) || url.searchParams.get('dbname') || database;
      user = decodeURIComponent(url.username) || url.searchParams.get('user') || user;
    } catch {
      return `postgres:${config.connectionString}#${schema}`; // a malformed %-escape: kept whole
    }
  }
  const where = database === '' ? `user:${user}` : database;
  return `postgres://${host}:${port}/${where}#${schema}`;
}
