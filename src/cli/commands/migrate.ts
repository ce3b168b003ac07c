import type { Command } from 'commander';
import { RheoError } from '../../core/errors.js';
import { withRheo } from '../command-context.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending schema migrations (idempotent; needs DDL rights on the schema); on Redis nothing to create')
    .option('--print-sql', 'print the exact SQL that would run, change nothing (needs only SELECT)')
    .action(async (options: { printSql?: boolean }, command: Command) =>
      withRheo(command, async (ctx) => {
        if (ctx.backend.name === 'redis') {
          // Redis has no schema to create: migrate only records the key layout version (idempotent).
          if (options.printSql) throw new RheoError('unsupported', 'migrate --print-sql is for PostgreSQL: the Redis backend runs no SQL');
          await ctx.rheo.migrate();
          if (ctx.json) return ctx.printJson({ prefix: ctx.backend.prefix, applied: 0 });
          return ctx.print(`redis prefix "${ctx.backend.prefix}": nothing to migrate, up to date`);
        }
        const backend = ctx.backend;
        if (options.printSql) {
          const plan = await backend.planMigration();
          if (ctx.json) return ctx.printJson({ schema: backend.schema, statements: plan });
          if (plan.length === 0) return ctx.print(`-- schema "${backend.schema}" is up to date: nothing to run`);
          ctx.print('BEGIN;');
          for (const statement of plan) ctx.print(`\n-- ${statement.label}\n${statement.sql}`);
          ctx.print('\nCOMMIT;');
          return;
        }
        const pending = (await backend.planMigration()).filter((s) => s.kind === 'migration').length;
        await ctx.rheo.migrate();
        if (ctx.json) return ctx.printJson({ schema: backend.schema, applied: pending });
        ctx.print(`schema "${backend.schema}": ${pending} migration(s) applied, up to date`);
      }),
    );
}
