import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * The code of the README and of the guides under docs/ as the tests use it.
 * Rules (also stated in docs/getting-started.md, "Set up a checkout"):
 * - every ```ts block is type-checked as its own ES module file, verbatim;
 * - a block preceded by `<!-- package-test: skip -->` is not (a fragment that
 *   cannot stand alone; prefer making the block real);
 * - a block preceded by `<!-- NAME: run by ... -->` can be looked up by NAME.
 */
export interface ReadmeBlock {
  /** 1-based line of the opening fence, for error messages. */
  line: number;
  /** NAME of a preceding `<!-- NAME: run by ... -->` marker, if any. */
  name: string | null;
  skipped: boolean;
  code: string;
}

export function readmeBlocks(readme: string): ReadmeBlock[] {
  const blocks: ReadmeBlock[] = [];
  const fence = /^```ts\n([\s\S]*?)^```$/gm;
  for (let match = fence.exec(readme); match; match = fence.exec(readme)) {
    const before = readme.slice(0, match.index).trimEnd();
    const comment = before.endsWith('-->') ? before.slice(before.lastIndexOf('<!--') + 4, -3).trim() : '';
    blocks.push({
      line: before.split('\n').length + 1,
      name: /^([\w-]+): run by /.exec(comment)?.[1] ?? null,
      skipped: comment === 'package-test: skip',
      code: match[1]!,
    });
  }
  return blocks;
}

/** One Markdown file of the documentation: its path from the root, and its text. */
export interface DocFile {
  path: string;
  text: string;
}

/** README.md and every `.md` under docs/ (the generated docs/api/ left out), in a stable order. */
export function docFiles(root: string): DocFile[] {
  const paths = ['README.md'];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (relative(root, path) !== join('docs', 'api')) walk(path);
      } else if (entry.name.endsWith('.md')) {
        paths.push(relative(root, path));
      }
    }
  };
  walk(join(root, 'docs'));
  return paths.map((path) => ({ path, text: readFileSync(join(root, path), 'utf8') }));
}

/** Every ```ts block of the documentation, with the file it is in. */
export function docBlocks(files: DocFile[]): Array<ReadmeBlock & { file: string }> {
  return files.flatMap((file) => readmeBlocks(file.text).map((block) => ({ ...block, file: file.path })));
}

/** The one block named `name` (by a `<!-- NAME: run by ... -->` marker) anywhere in the documentation. */
export function namedBlock(files: DocFile[], name: string): ReadmeBlock & { file: string } {
  const found = docBlocks(files).filter((b) => b.name === name);
  if (found.length !== 1) {
    throw new Error(`the documentation has ${found.length} \`\`\`ts blocks after a <!-- ${name}: run by ... --> marker, not one`);
  }
  return found[0]!;
}

/**
 * The CommonJS equivalent of an ES module snippet: each named import becomes a
 * destructured `require`, and the rest runs inside an async function (CommonJS
 * has no top-level await) whose failure sets a non-zero exit code. Anything
 * else (default or namespace imports, `import type`) is refused rather than
 * guessed, so a documentation change that needs a new rule fails loudly.
 */
export function toCommonJs(code: string): string {
  const requires: string[] = [];
  const body: string[] = [];
  for (const line of code.split('\n')) {
    if (!/^import\b/.test(line)) {
      body.push(line);
      continue;
    }
    const named = /^import \{([^}]*)\} from '([^']+)';(.*)$/.exec(line);
    if (!named || /\btype\b/.test(named[1]!)) throw new Error(`cannot turn into CommonJS: ${line}`);
    const bindings = named[1]!
      .split(',')
      .map((b) => b.trim())
      .filter(Boolean)
      .map((b) => b.replace(/^(\w+) as (\w+)$/, '$1: $2'));
    requires.push(`const { ${bindings.join(', ')} } = require('${named[2]!}');${named[3]!}`);
  }
  return [
    "'use strict';",
    ...requires,
    '',
    '(async () => {',
    ...body.map((line) => (line ? `  ${line}` : line)),
    '})().catch((error) => {',
    '  console.error(error);',
    '  process.exitCode = 1;',
    '});',
    '',
  ].join('\n');
}
