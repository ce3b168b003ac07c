/**
 * Runs one example, or all of them (`npm run demo` is `all`):
 *
 *   npm run example -- <name>|all                      # in-memory backend
 *   npm run example -- <name> --database-url=postgres://...
 *   npm run example -- <name> --database-url=pglite://./rheo-data   # durable, no server
 *   npm run example -- <name> --database-url=redis://127.0.0.1:6379
 *   RHEO_DATABASE_URL=postgres://...|pglite://...|redis://... npm run example -- <name>
 */
import { connect } from './example-kit.js';
import { examples } from './registry.js';

async function main(argv: string[]): Promise<number> {
  const urlArg = argv.find((a) => a.startsWith('--database-url='));
  const databaseUrl = urlArg ? urlArg.slice('--database-url='.length) : process.env.RHEO_DATABASE_URL;
  const name = argv.find((a) => !a.startsWith('--'));
  const chosen = name === 'all' ? examples : examples.filter((e) => e.name === name);
  if (chosen.length === 0) {
    console.error(`usage: npm run example -- <name>|all [--database-url=postgres://...|pglite://./rheo-data|redis://...]\n`);
    for (const e of examples) console.error(`  ${e.name.padEnd(20)} ${e.description}`);
    return 2;
  }
  const rheo = await connect(databaseUrl);
  try {
    await rheo.migrate();
    for (const e of chosen) {
      console.log(`\n== ${e.name} (${rheo.backend.name}): ${e.description}`);
      const result = await e.run(rheo, (line) => console.log(`  ${line}`));
      console.log(`  result: ${JSON.stringify(result)}`);
    }
    return 0;
  } finally {
    await rheo.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
