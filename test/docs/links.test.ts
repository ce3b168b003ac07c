import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { docFiles, type DocFile } from '../../scripts/package-test/readme-blocks.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Markdown without fenced blocks and inline code, where a `[x](y)` is no link. */
function prose(text: string): string {
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of prose(text).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const base = heading!
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    out.add(count === 0 ? base : `${base}-${count}`);
  }
  return out;
}

interface Link {
  from: string;
  target: string;
}

/** Every relative link and image of a file: `[text](target)`, `![alt](target)`, `<a href>`, `<img src>`. */
function relativeLinks(file: DocFile): Link[] {
  const text = prose(file.text);
  const targets = [
    ...[...text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
    ...[...text.matchAll(/<(?:a|img)\b[^>]*\b(?:href|src)="([^"]+)"/g)].map((m) => m[1]!),
  ];
  return targets.filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target)).map((target) => ({ from: file.path, target }));
}

/** Paths (relative to the root) that git ignores, so a fresh clone does not have them (docs/api/, dist/, ...). */
function ignoredByGit(paths: string[]): Set<string> {
  const result = spawnSync('git', ['check-ignore', '--stdin'], { cwd: ROOT, input: paths.join('\n'), encoding: 'utf8' });
  if (result.status !== 0 && result.status !== 1) throw new Error(`git check-ignore failed: ${result.stderr}`);
  return new Set(result.stdout.split('\n').filter(Boolean));
}

/** What is wrong with each link, if anything. */
function brokenLinks(files: DocFile[]): string[] {
  const texts = new Map(files.map((file) => [file.path, file.text]));
  const problems: string[] = [];
  const checked: Array<{ link: Link; path: string }> = [];
  for (const file of files) {
    for (const link of relativeLinks(file)) {
      const [rawPath, fragment] = link.target.split('#', 2) as [string, string | undefined];
      if (rawPath === '') {
        if (fragment && !anchors(file.text).has(fragment)) problems.push(`${link.from}: ${link.target} names no heading of ${file.path}`);
        continue;
      }
      const absolute = resolve(ROOT, dirname(file.path), decodeURIComponent(rawPath));
      const path = relative(ROOT, absolute);
      if (path.startsWith('..') || path.split(sep).includes('..')) {
        problems.push(`${link.from}: ${link.target} points outside the repository`);
        continue;
      }
      if (!existsSync(absolute)) {
        problems.push(`${link.from}: ${link.target} does not exist`);
        continue;
      }
      checked.push({ link, path });
      if (fragment !== undefined && fragment !== '') {
        if (statSync(absolute).isDirectory() || !absolute.endsWith('.md')) {
          problems.push(`${link.from}: ${link.target} has an anchor into a file that is not Markdown`);
          continue;
        }
        const target = texts.get(path) ?? readFileSync(absolute, 'utf8');
        if (!anchors(target).has(fragment)) problems.push(`${link.from}: ${link.target} names no heading of ${path}`);
      }
    }
  }
  const ignored = ignoredByGit(checked.map((c) => c.path));
  for (const { link, path } of checked) {
    if (ignored.has(path)) problems.push(`${link.from}: ${link.target} is ignored by git, so a fresh clone lacks it`);
  }
  return problems;
}

describe('documentation links', () => {
  const files = docFiles(ROOT);

  it('reads the README and every guide', () => {
    const paths = files.map((file) => file.path);
    expect(paths).toContain('README.md');
    expect(paths).toContain(join('docs', 'design.md'));
    expect(paths.filter((path) => path.startsWith(`docs${sep}`)).length).toBeGreaterThan(10);
  });

  it('every relative link and anchor in README.md and docs/ resolves inside the repository, on a fresh clone', () => {
    expect(brokenLinks(files)).toEqual([]);
  });

  it('catches a missing file, a missing anchor, a path outside the tree and a generated directory', () => {
    const probe: DocFile = {
      path: join('docs', 'probe.md'),
      text: [
        '# Probe',
        '[ok](design.md#invariants) [self](#probe) [up](../README.md#quick-start) [self, wrong](#nope)',
        '[gone](missing.md) [no anchor](design.md#no-such-heading) [outside](../../elsewhere/DESIGN.md)',
        '[generated](api/index.html) `[in code](missing.md)`',
        '```md',
        '[in a block](missing.md)',
        '```',
      ].join('\n'),
    };
    const readme = files.find((file) => file.path === 'README.md')!;
    const design = files.find((file) => file.path === join('docs', 'design.md'))!;
    // docs/api/ is generated by `npm run docs`: present or not here, a fresh clone lacks it.
    const problems = brokenLinks([probe, readme, design]).filter((p) => p.startsWith(probe.path));
    const expected = [
      `${probe.path}: #nope names no heading of ${probe.path}`,
      `${probe.path}: missing.md does not exist`,
      `${probe.path}: design.md#no-such-heading names no heading of ${join('docs', 'design.md')}`,
      `${probe.path}: ../../elsewhere/DESIGN.md points outside the repository`,
    ];
    expect(problems.slice(0, 4)).toEqual(expected);
    expect(problems[4]).toMatch(/^docs.probe\.md: api\/index\.html (does not exist|is ignored by git, so a fresh clone lacks it)$/);
    expect(problems).toHaveLength(5);
  });
});

describe('documentation and code stay inside the repository', () => {
  it('name no design notes or shared folder outside the tree', () => {
    const offenders: string[] = [];
    const scan = (dir: string): void => {
      for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) {
          if (path !== join('docs', 'api')) scan(path);
        } else if (/\.(ts|md|js|mjs|sh|json)$/.test(entry.name) && path !== join('test', 'docs', 'links.test.ts')) {
          const text = readFileSync(join(ROOT, path), 'utf8');
          if (text.includes('DESIGN.md') || text.includes('../shared')) offenders.push(path);
        }
      }
    };
    // This file alone names them, as the probes of the checks above.
    for (const dir of ['src', 'docs', 'bench/scenarios', 'examples', 'scripts', 'test']) scan(dir);
    offenders.push(...['README.md', 'CHANGELOG.md'].filter((file) => existsSync(join(ROOT, file)) && /DESIGN\.md|\.\.\/shared/.test(readFileSync(join(ROOT, file), 'utf8'))));
    expect(offenders).toEqual([]);
  });
});
