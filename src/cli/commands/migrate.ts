import type { Command } from 'commander';
import { withRheo } from '../command-context.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending schema migrations (idempotent; needs DDL rights on the schema)')
    .option('--print-sql', 'print the exact SQL that would run, change nothing (needs only SELECT)')
    .action(async (options: { printSql?: boolean }, command: Command) =>
      withRheo(command, async (ctx) => {
        if (options.printSql) {
          const plan = await ctx.backend.planMigration();
          if (ctx.json) return ctx.printJson({ schema: ctx.backend.schema, statements: plan });
          if (plan.length === 0) return ctx.print(`-- schema "${ctx.backend.schema}" is up to date: nothing to run`);
          ctx.print('BEGIN;');
          for (const statement of plan) ctx.print(`\n-- ${statement.label}\n${statement.sql}`);
          ctx.print('\nCOMMIT;');
          return;
        }
        const pending = (await ctx.backend.planMigration()).filter((s) => s.kind === 'migration').length;
        await ctx.rheo.migrate();
        if (ctx.json) return ctx.printJson({ schema: ctx.backend.schema, applied: pending });
        ctx.print(`schema "${ctx.backend.schema}": ${pending} migration(s) applied, up to date`);
      }),
    );
}
