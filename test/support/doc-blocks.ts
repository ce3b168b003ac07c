import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { docFiles } from '../../scripts/package-test/readme-blocks.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The code block after a `<!-- NAME: run by TEST -->` marker, found in README.md
 * or any guide under docs/, verbatim, with `'rheo'` pointed at the sources.
 * Exactly one marker of that name and test must exist: a guide that lost it,
 * or two guides that both carry it, fail the test instead of silently running
 * some other block.
 */
export function docBlock(name: string, test: string, lang: 'ts' | 'sql' = 'ts'): string {
  const marker = `<!-- ${name}: run by ${test} -->`;
  const found = docFiles(ROOT).filter((file) => file.text.includes(marker));
  if (found.length !== 1) throw new Error(`${found.length} documentation files carry the marker ${marker}, not one`);
  const { path, text } = found[0]!;
  const match = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(text.slice(text.indexOf(marker)));
  if (!match) throw new Error(`no ${lang} block after the ${name} marker in ${path}`);
  const entry = pathToFileURL(join(ROOT, 'src/index.ts')).href;
  return match[1]!.replaceAll("from 'rheo'", `from '${entry}'`);
}
